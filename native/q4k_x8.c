/*
 * q4k_x8.c: the packer of Q4_K tiles of 8 rows (q4k_x8.h).
 */
#include <string.h>

#include "q4k_x8.h"

int pm_q4k_x8_ok(const pm_weight *w)
{
	return w->type == PM_TYPE_Q4_K && w->layout == PM_LAYOUT_ROWS && w->rows > 0 && w->rows % 8 == 0 &&
	       w->cols > 0 && w->cols % 256 == 0 && w->row_bytes == (size_t)w->cols / 256 * 144;
}

void pm_q4k_x8_pack(uint8_t *dst, const pm_weight *w)
{
	int nb = w->cols / 256;
	for (int t = 0; t < w->rows / 8; t++)
		for (int b = 0; b < nb; b++) {
			uint8_t *o = dst + ((size_t)t * (size_t)nb + (size_t)b) * X8_BYTES;
			for (int i = 0; i < 8; i++) {
				const uint8_t *r = (const uint8_t *)pm_weight_row(w, 8 * t + i) + 144 * (size_t)b;
				for (int v = 0; v < 32; v++) /* chunk v / 8, dword v % 8 */
					memcpy(o + 32 * v + 4 * i, r + 16 + 32 * (v / 8) + 4 * (v % 8), 4);
				for (int u = 0; u < 3; u++)
					memcpy(o + 1024 + 32 * u + 4 * i, r + 4 + 4 * u, 4);
				memcpy(o + 1120 + 2 * i, r, 2);
				memcpy(o + 1136 + 2 * i, r + 2, 2);
			}
		}
}
