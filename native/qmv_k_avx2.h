/*
 * qmv_k_avx2.h: the AVX2 batch-1 kernels of the K-quants (qmv_k_avx2.c):
 * out[m] = x . (row m of w) for m in [m0, m1), x one row of pm_act256
 * blocks (actquant.h). qmm_k.c's AVX2 set calls them when n == 1.
 */
#ifndef PM_QMV_K_AVX2_H
#define PM_QMV_K_AVX2_H

#include "actquant.h"
#include "weights.h"

void pm_qmv_q4_k_avx2(float *out, const pm_act256 *x, const pm_weight *w, int m0, int m1);
void pm_qmv_q5_k_avx2(float *out, const pm_act256 *x, const pm_weight *w, int m0, int m1);
void pm_qmv_q6_k_avx2(float *out, const pm_act256 *x, const pm_weight *w, int m0, int m1);

#endif
