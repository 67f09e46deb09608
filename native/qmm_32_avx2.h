/*
 * qmm_32_avx2.h: the AVX2 batch kernels of qmm_32_avx2.c (n > 1
 * activation rows; pm_qmm_fn's arguments, actquant.h), which qmm_32.c's
 * AVX2 kernels of every 32-block type call for batches.
 */
#ifndef PM_QMM_32_AVX2_H
#define PM_QMM_32_AVX2_H

#include <stddef.h>

#include "weights.h"

void pm_qmm_q4_0_avx2_batch(float *out, size_t ldo, const void *xq, size_t xs, const pm_weight *w, int n, int m0,
			    int m1);
void pm_qmm_q4_1_avx2_batch(float *out, size_t ldo, const void *xq, size_t xs, const pm_weight *w, int n, int m0,
			    int m1);
void pm_qmm_q5_0_avx2_batch(float *out, size_t ldo, const void *xq, size_t xs, const pm_weight *w, int n, int m0,
			    int m1);
void pm_qmm_q5_1_avx2_batch(float *out, size_t ldo, const void *xq, size_t xs, const pm_weight *w, int n, int m0,
			    int m1);
void pm_qmm_q8_0_avx2_batch(float *out, size_t ldo, const void *xq, size_t xs, const pm_weight *w, int n, int m0,
			    int m1);

#endif
