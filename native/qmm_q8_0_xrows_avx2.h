/*
 * qmm_q8_0_xrows_avx2.h: Q8_0's small-batch AVX2 kernel
 * (qmm_q8_0_xrows_avx2.c; pm_qmm_fn's arguments, actquant.h), which
 * qmm_32_avx2.c's Q8_0 batch kernel hands the batches pm_q8_xrows_takes
 * picks.
 */
#ifndef PM_QMM_Q8_0_XROWS_AVX2_H
#define PM_QMM_Q8_0_XROWS_AVX2_H

#include <stddef.h>

#include "weights.h"

/* pm_qmm_q8_0_xrows_avx2 (qmm_q8_0_xrows_avx2.c): Q8_0's batch kernel with
 * the activation rows in the lanes of 8-row sets, for up to
 * PM_Q8_XROWS_MAXN rows of at most PM_Q8_XROWS_MAXNB blocks, bitwise
 * pm_qmm_q8_0_avx2_batch's results. pm_q8_xrows_takes says which batches
 * that kernel hands to it: those of 8 to 16 rows whose last set has at
 * most 2 padding lanes (8, 14, 15, 16; a padding lane costs what a row
 * does, and at 6 or 12 rows the weight-row tile was as fast or faster). */
enum { PM_Q8_XROWS_MAXN = 16, PM_Q8_XROWS_MAXNB = 64 };
static inline int pm_q8_xrows_takes(int n, int nb)
{
	return n >= 8 && n <= PM_Q8_XROWS_MAXN && (8 - n % 8) % 8 <= 2 && nb <= PM_Q8_XROWS_MAXNB;
}
void pm_qmm_q8_0_xrows_avx2(float *out, size_t ldo, const void *xq, size_t xs, const pm_weight *w, int n, int m0,
			    int m1);

#endif
