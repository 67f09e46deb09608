/*
 * qmm_k_avx2.h: the AVX2 batch kernels of qmm_k_avx2.c (n > 1 activation
 * rows; pm_qmm_fn's arguments, actquant.h), which qmm_k.c's AVX2 kernels
 * of Q4_K, Q5_K and Q6_K call for batches. x86-64 only.
 */
#ifndef PM_QMM_K_AVX2_H
#define PM_QMM_K_AVX2_H

#include <stddef.h>

#include "weights.h"

void pm_qmm_q4_k_avx2_batch(float *out, size_t ldo, const void *xq, size_t xs, const pm_weight *w, int n, int m0,
			    int m1);
void pm_qmm_q5_k_avx2_batch(float *out, size_t ldo, const void *xq, size_t xs, const pm_weight *w, int n, int m0,
			    int m1);
void pm_qmm_q6_k_avx2_batch(float *out, size_t ldo, const void *xq, size_t xs, const pm_weight *w, int n, int m0,
			    int m1);

#endif
