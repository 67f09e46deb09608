/*
 * mm_float_neon.h: the NEON path's float products (mm_float_neon.c;
 * AArch64 only), bitwise the portable set's (kernels.c): kernels.c's NEON
 * set takes pm_matmul_neon as its matmul (kernels.h's pm_kernels.matmul),
 * matmul.c takes pm_matmul_float_neon's tiles for F32, F16 and BF16
 * weights on that set. Apart from kernels.h so that kernels.c can name
 * them without a cycle.
 */
#ifndef PM_MM_FLOAT_NEON_H
#define PM_MM_FLOAT_NEON_H

#include <stddef.h>
#include <stdint.h>

#include "weights.h"

/* pm_matmul_neon: as pm_kernels.matmul (kernels.h); defined on AArch64 only. */
void pm_matmul_neon(float *out, size_t ldo, const float *x, const float *w, int n, int k, int m0, int m1);

/* pm_neon_tile_fn: kernels.h's pm_tile_fn (the same function type). */
typedef void (*pm_neon_tile_fn)(float *out, size_t ldo, const float *x, const pm_weight *w, int n, int m0,
				int m1);

/* pm_matmul_float_neon returns the NEON tile product of an F32, F16 or
 * BF16 weight: out[r*ldo + m] = x[r] . row m, bitwise the portable
 * dequantize-and-matmul; NULL for other types or off AArch64. */
pm_neon_tile_fn pm_matmul_float_neon(uint32_t type);

#endif
