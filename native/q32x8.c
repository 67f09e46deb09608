/*
 * q32x8.c: the packer of Q4_0 tiles of 8 rows (q32x8.h).
 */
#include <string.h>

#include "q32x8.h"

int pm_q32x8_ok(const pm_weight *w)
{
	return w->type == PM_TYPE_Q4_0 && w->layout == PM_LAYOUT_ROWS && w->rows > 0 && w->rows % 8 == 0 &&
	       w->cols > 0 && w->cols % 32 == 0 && w->row_bytes == (size_t)w->cols / 32 * 18;
}

void pm_q32x8_pack(uint8_t *dst, const pm_weight *w)
{
	int nb = w->cols / 32;
	for (int t = 0; t < w->rows / 8; t++) {
		uint8_t *tile = dst + (size_t)t * 8 * w->row_bytes;
		for (int i = 0; i < 8; i++) {
			const uint8_t *r = pm_weight_row(w, 8 * t + i);
			for (int b = 0; b < nb; b++) {
				const uint8_t *blk = r + (size_t)18 * (size_t)b;
				uint8_t *c = (uint8_t *)pm_q32x8_codes(tile, b);
				for (int j = 0; j < 4; j++)
					memcpy(c + 32 * j + 4 * i, blk + 2 + 4 * j, 4);
				memcpy((uint8_t *)pm_q32x8_scales(tile, nb, b) + 2 * i, blk, 2);
			}
		}
	}
}
