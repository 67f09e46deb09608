/*
 * qmv_k_rows.h: the row loop of the K-quant batch-1 (n == 1) kernels on
 * x86: qmv_k_avx2.c's AVX2 ones (qmv8, qmv) and qmm_k_vnni.c's AVX512-VNNI
 * one (vqmv). A tile of weight rows is used for every super-block while the
 * next tile (rows are contiguous) is prefetched a share per super-block:
 * the bytes swept in order, ahead of the reads by exactly one tile.
 * pm_qmv_prefetch is that share (every tile width); PM_QMV4_ROWS the whole
 * loop of the four-row kernels, around their per-super-block step. Both
 * inline into the caller's target (AVX2 or more); x86-64 only. Each
 * kernel's objdump -d was the same before and after they were shared.
 */
#ifndef PM_QMV_K_ROWS_H
#define PM_QMV_K_ROWS_H

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "weights.h"

/* pm_qmv_prefetch: share b of the next tile's bytes at next (a constant
 * share, so the prefetches unroll: a loop over them cost ~2% of the Q4_K
 * matvec) */
static inline __attribute__((always_inline)) void pm_qmv_prefetch(const char *next, size_t share, int b)
{
#pragma GCC unroll 32
	for (size_t o = 0; o < share; o += 64)
		_mm_prefetch(next + share * (size_t)b + o, _MM_HINT_T0);
}

/*
 * PM_QMV4_ROWS: rows [m0, m1) of w (super-blocks of bb bytes) four at a
 * time into out, against the pm_act256 row x. STEP is the statement that
 * adds super-block b of the four rows, blk[0..3], to the __m128 acc (lane
 * i row i), e.g. acc = tile(acc, blk, x + b).
 */
#define PM_QMV4_ROWS(out, x, w, m0, m1, bb, STEP)                                                         \
	do {                                                                                              \
		int nb_ = (w)->cols / 256;                                                                \
		size_t rb_ = (w)->row_bytes;                                                              \
		for (int m = (m0); m < (m1); m += 4) {                                                    \
			int rows = (m1) - m < 4 ? (m1) - m : 4;                                           \
			const uint8_t *r[4];                                                              \
			for (int i = 0; i < 4; i++) /* a short last tile repeats its last row */         \
				r[i] = pm_weight_row((w), m + (i < rows ? i : rows - 1));                 \
			const char *next = (const char *)r[0] + 4 * rb_;                                  \
			int prefetch = m + 4 < (m1);                                                      \
			__m128 acc = _mm_setzero_ps();                                                    \
			for (int b = 0; b < nb_; b++) {                                                   \
				if (prefetch)                                                             \
					pm_qmv_prefetch(next, 4 * (bb), b);                              \
				const uint8_t *blk[4] = {r[0] + (bb) * (size_t)b, r[1] + (bb) * (size_t)b, \
							 r[2] + (bb) * (size_t)b, r[3] + (bb) * (size_t)b}; \
				STEP;                                                                     \
			}                                                                                 \
			float o_[4];                                                                      \
			_mm_storeu_ps(o_, acc);                                                           \
			memcpy((out) + m, o_, sizeof(float) * (size_t)rows);                              \
		}                                                                                         \
	} while (0)
#endif

#endif
