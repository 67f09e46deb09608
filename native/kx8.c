/*
 * kx8.c: the packer of K-quant tiles of 8 rows (kx8.h).
 */
#include <string.h>

#include "kx8.h"

/* block_bytes: a super-block's bytes of a type kx8 repacks, else 0 */
static size_t block_bytes(uint32_t type)
{
	return type == PM_TYPE_Q4_K ? 144 : type == PM_TYPE_Q6_K ? 210 : 0;
}

int pm_kx8_ok(const pm_weight *w)
{
	size_t bb = block_bytes(w->type);
	return bb && w->layout == PM_LAYOUT_ROWS && w->rows > 0 && w->rows % 8 == 0 && w->cols > 0 &&
	       w->cols % 256 == 0 && w->row_bytes == (size_t)w->cols / 256 * bb;
}

void pm_kx8_pack(uint8_t *dst, const pm_weight *w)
{
	size_t bb = block_bytes(w->type), words = bb / 4;
	int nb = w->cols / 256;
	for (int t = 0; t < w->rows / 8; t++)
		for (int b = 0; b < nb; b++) {
			uint8_t *o = dst + ((size_t)t * (size_t)nb + (size_t)b) * 8 * bb;
			for (int i = 0; i < 8; i++) {
				const uint8_t *r = (const uint8_t *)pm_weight_row(w, 8 * t + i) + bb * (size_t)b;
				for (size_t j = 0; j < words; j++)
					memcpy(o + 32 * j + 4 * (size_t)i, r + 4 * j, 4);
				if (bb % 4) /* Q6_K's d */
					memcpy(o + 32 * words + 2 * (size_t)i, r + 4 * words, 2);
			}
		}
}
