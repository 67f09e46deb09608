/*
 * q32x8.h: Q4_0 weights repacked in tiles of 8 rows
 * (pm_weight.layout == PM_LAYOUT_Q32X8), as the AVX2 and AVX-512 VNNI
 * engines compute them (qmv_32_avx2.c at batch 1 for both; in batches
 * qmm_32_avx2.c, and qmm_32_x86.h's VNNI 16-row tiles, two tiles each:
 * T4X; panels.c repacks for PM_ISA_AVX2 and PM_ISA_AVX512VNNI).
 *
 * The layout: rows come in tiles of 8, rows 8t .. 8t+7 in tile t, the
 * tile in the bytes its 8 rows took (8 * row_bytes = 144 * nb, nb = cols /
 * 32 blocks), so pm_weight_row(w, 8t) gives its start and a range of whole
 * tiles is contiguous; rows is a multiple of 8. A tile holds first the
 * codes of its nb blocks, 128 bytes each: block b's 32-byte vector j (j <
 * 4) at 128 b + 32 j holds 32-bit word j of each row's 16 code bytes, row
 * 8t + i's in lane i (bytes 4i .. 4i+3). Then the scales, 16 bytes per
 * block: block b's 8 F16 d at 128 nb + 16 b, row 8t + i's at 2i. Masked
 * to its low nibbles vector j is the interleaved group j (lane i:
 * elements 4j .. 4j+3 of row i), its high nibbles group j + 4: the lanes
 * the kernels' vpmaddubsw wants (qmm_transpose.h's pm_interleave_nib8
 * builds the same from rows).
 *
 * Why: on the rows the AVX2 decode of the L3-resident default Q4_0 model
 * spent its time gathering each block's 8 scales in general registers and
 * transposing its codes (perf: the scale gather alone ~20 % of the
 * kernel), and read 8 row streams the hardware prefetcher does not
 * follow; here a tile is one stream of aligned vectors read in order.
 * Decode on the tiles ran 1.38x the rows at one thread, and faster than
 * the VNNI build's own decode of the rows, which therefore borrows it.
 *
 * The integer sums and float steps do not change, so every output is
 * bitwise what the rows give (test_quant.c checks it).
 */
#ifndef PM_Q32X8_H
#define PM_Q32X8_H

#include <stddef.h>
#include <stdint.h>

#include "weights.h"

/* pm_q32x8_ok: w is Q4_0 in rows and its rows a multiple of 8. */
int pm_q32x8_ok(const pm_weight *w);

/* pm_q32x8_pack writes w's blocks (pm_q32x8_ok) into dst (w->rows *
 * w->row_bytes bytes) in tiles. */
void pm_q32x8_pack(uint8_t *dst, const pm_weight *w);

/* pm_q32x8_codes: block b's 4 code vectors in the tile at t;
 * pm_q32x8_scales: its 8 scales, in a tile of nb blocks */
static inline const uint8_t *pm_q32x8_codes(const uint8_t *t, int b)
{
	return t + (size_t)128 * (size_t)b;
}

static inline const uint8_t *pm_q32x8_scales(const uint8_t *t, int nb, int b)
{
	return t + (size_t)128 * (size_t)nb + (size_t)16 * (size_t)b;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* pm_q32x8_block: a block's 8 interleaved groups into g (g[j] lane i: row
 * i's codes of elements 4j .. 4j+3, unsigned) from its codes c, and its 8
 * scales as floats (lane i row i's) from s (pm_q32x8_codes,
 * pm_q32x8_scales): the loads every kernel on the tiles shares */
static inline __attribute__((always_inline, target("avx2,f16c"))) __m256 pm_q32x8_block(__m256i g[8],
											    const uint8_t *c,
											    const uint8_t *s)
{
	const __m256i m = _mm256_set1_epi8(15);
#pragma GCC unroll 4
	for (int k = 0; k < 4; k++) {
		__m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(c + 32 * k));
		g[k] = _mm256_and_si256(v, m);
		g[k + 4] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m);
	}
	return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)s));
}
#endif

#endif
