/*
 * matmul.h: the typed matrix product (matmul.c), the one entry the
 * forward pass computes a weight through, whatever its type, and the
 * choice of a type's integer kernel.
 */
#ifndef PM_MATMUL_H
#define PM_MATMUL_H

#include <stddef.h>

#include "actquant.h"
#include "kernels.h"
#include "weights.h"

/*
 * pm_matmul_w is matmul against a typed weight: out[r*ldo + m] = x[r] . row m
 * of w for m in [m0, m1). A batch of 1 takes the type's matvec (AVX2). With
 * the AVX2 set, F32, F16 and BF16 take the tile product that widens the
 * weights in registers (pm_matmul_float_avx2). Otherwise tiles of 4 rows
 * of w are dequantized (dq) into scratch (4 * w->cols floats) and passed
 * to k->matmul against every row of x, so each weight block is decoded
 * once per tile whatever the batch. Every path gives bitwise the F32
 * matmul of the dequantized weights: batch- and tile-invariant as matmul is.
 */
void pm_matmul_w(const pm_kernels *k, pm_dequant_fn dq, float *out, size_t ldo, const float *x,
		 const pm_weight *w, int n, int m0, int m1, float *scratch);

/* pm_qmm_for returns type's integer kernel (actquant.h) from either
 * family: qmm_32.c's, else qmm_k.c's; fn NULL when the type computes
 * with float activations. */
pm_qmm pm_qmm_for(uint32_t type, int avx2);

/* pm_qmm_isa returns type's integer kernel on instruction-set path isa
 * (PM_ISA_*, kernels.h); fn NULL when the type computes with float
 * activations or this build or CPU cannot run the path. */
pm_qmm pm_qmm_isa(uint32_t type, int isa);

#endif
