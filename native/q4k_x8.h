/*
 * q4k_x8.h: Q4_K weights repacked in tiles of 8 rows (pm_weight.layout ==
 * PM_LAYOUT_Q4K_X8), and the scale decoding the AVX2 kernels that read
 * them share (qmv_k_avx2.c: decode at batch 1; qmm_k_avx2.c: batches).
 *
 * The layout: rows come in tiles of 8, rows 8t .. 8t+7 in tile t; a tile
 * holds, for each super-block b (256 elements), the 8 rows' blocks of b
 * interleaved in X8_BYTES = 8 * 144 bytes at data + (t * nb + b) *
 * X8_BYTES (nb = cols / 256). Of those, with lane i (4 bytes of a 32-byte
 * vector) standing for row 8t + i:
 *   [0, 1024)     32 vectors v = 8c + k: lane i holds bytes 4k .. 4k+3 of
 *                 the row's 32-byte code chunk c (qs[32c .. 32c+31]), so
 *                 its low nibbles are elements 64c + 4k .. and its high
 *                 ones 64c + 32 + 4k ..;
 *   [1024, 1120)  3 vectors u: lane i holds the row's scale bytes 4u ..
 *                 4u+3 (the block's 12 packed 6-bit scales and mins);
 *   [1120, 1136)  the 8 rows' d (F16), row order;
 *   [1136, 1152)  the 8 rows' dmin.
 * A tile occupies the bytes its 8 rows did (row_bytes and pm_weight_row(w,
 * 8t) still give its size and start: a range of whole tiles is
 * contiguous); rows is a multiple of 8.
 *
 * Why: the row-major decode kernel interleaved 8 rows itself, with 24
 * shuffles per 64 elements to transpose their codes, and read 8 streams
 * 1152 bytes apart that the hardware prefetcher did not follow. Here the
 * codes are already in the lanes the vpmaddubsw wants and a tile's bytes
 * are read in order, one stream. Measured on AMD EPYC Zen 3 (one thread,
 * a stand-alone loop over 8192 x 2048 matrices, 8 of them: from DRAM):
 * ~11 GB/s against ~8.6 for the row-major kernel (the machine's read
 * bandwidth: ~13); in L2, 26-30 against ~19.
 *
 * The integers and the float step are qmm_k.c's, so every output is
 * bitwise what the row layout gives (only the order bytes are read in
 * differs); test_qmm_k.c checks it.
 */
#ifndef PM_Q4K_X8_H
#define PM_Q4K_X8_H

#include <stddef.h>
#include <stdint.h>

#include "weights.h"

enum { X8_BYTES = 8 * 144 };

/* pm_q4k_x8_ok: w is Q4_K in rows and its rows a multiple of 8. */
int pm_q4k_x8_ok(const pm_weight *w);

/* pm_q4k_x8_pack writes w's blocks (Q4_K, in rows) into dst (w->rows *
 * w->row_bytes bytes) in tiles. */
void pm_q4k_x8_pack(uint8_t *dst, const pm_weight *w);

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/*
 * pm_q4k_x8_scales decodes the 8 rows' scales and mins of a tile's
 * super-block p (its 3 scale vectors at p + 1024), by kscales' rule
 * (qmm_k.c): 32-group j < 4 has sc = byte j of u0 & 63, m = byte j of u1
 * & 63; group 4 + j has sc = (byte j of u2) & 15 | (byte j of u0) >> 6 <<
 * 4, m = (byte j of u2) >> 4 | (byte j of u1) >> 6 << 4. Lane i of sc[g]
 * and mn[g] holds row i's, as int32.
 */
static inline __attribute__((always_inline, target("avx2"))) void pm_q4k_x8_scales(const uint8_t *p,
										    __m256i sc[8],
										    __m256i mn[8])
{
	const __m256i u0 = _mm256_load_si256((const __m256i *)(p + 1024));
	const __m256i u1 = _mm256_load_si256((const __m256i *)(p + 1056));
	const __m256i u2 = _mm256_load_si256((const __m256i *)(p + 1088));
	const __m256i m63 = _mm256_set1_epi32(63), m30 = _mm256_set1_epi32(0x30), m0f = _mm256_set1_epi32(15);
#pragma GCC unroll 4
	for (int j = 0; j < 4; j++) {
		sc[j] = _mm256_and_si256(_mm256_srli_epi32(u0, 8 * j), m63);
		mn[j] = _mm256_and_si256(_mm256_srli_epi32(u1, 8 * j), m63);
		sc[4 + j] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(u2, 8 * j), m0f),
					    _mm256_and_si256(_mm256_srli_epi32(u0, 8 * j + 2), m30));
		mn[4 + j] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(u2, 8 * j + 4), m0f),
					    _mm256_and_si256(_mm256_srli_epi32(u1, 8 * j + 2), m30));
	}
}
#endif

#endif
