/*
 * qmv_32_avx2.h: the AVX2 decode kernels of qmv_32_avx2.c (one activation
 * row, n == 1; pm_qmm_fn's arguments less n, ldo and xs, actquant.h),
 * which qmm_32.c's AVX2 kernels call for decode.
 */
#ifndef PM_QMV_32_AVX2_H
#define PM_QMV_32_AVX2_H

#include "weights.h"

void pm_qmv_q4_0_avx2(float *out, const void *xq, const pm_weight *w, int m0, int m1);
void pm_qmv_q4_1_avx2(float *out, const void *xq, const pm_weight *w, int m0, int m1);
void pm_qmv_q5_0_avx2(float *out, const void *xq, const pm_weight *w, int m0, int m1);
void pm_qmv_q5_1_avx2(float *out, const void *xq, const pm_weight *w, int m0, int m1);
void pm_qmv_q8_0_avx2(float *out, const void *xq, const pm_weight *w, int m0, int m1);

/* pm_qmv_32_avx2_wide: rows of row_bytes so wide that these kernels
 * prefetch them into L2 by distance alone (qmv_32_avx2.c: PF_L1), where
 * they also outrun the AVX-512 VNNI build's 4-row decode (qmm_32_x86.h) */
int pm_qmv_32_avx2_wide(size_t row_bytes);

#endif
