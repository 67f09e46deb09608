/*
 * actquant.h: activations quantized to int8 per block, and the integer
 * matrix products that use them (ggml's Q8_0/Q8_K idea, our own layout).
 *
 * A quantized weight type may compute with int8 activations: each row of
 * x is cut into blocks of 32 (pm_act32, for Q4_0, Q4_1, Q5_0, Q5_1, Q8_0)
 * or 256 (pm_act256, for the K-quants) elements and every block is stored
 * as one float scale d and int8 codes q, x[i] ~ d * q[i]. The weight
 * blocks are then multiplied against q with integer dot products and one
 * float multiply-add per block.
 *
 * The quantization rule is the contract the Go reference
 * (native/internal/reference/actquant.go) repeats exactly, so the engine
 * and the reference see the same activations:
 *
 *	amax = max |x[i]| over the block            (float32)
 *	d    = amax / 127                            (float32 division)
 *	id   = amax > 0 ? 127 / amax : 0             (float32 division)
 *	q[i] = rint(x[i] * id)                       (float32 product, ties to even),
 *	       clamped to [-127, 127]; NaN -> 0
 *
 * pm_act32.s is d * (float)sum(q) (for weight types with a min, Q4_1 and
 * Q5_1); pm_act256.bsums[j] is the sum of q[16j .. 16j+15] (for the
 * K-quants' mins and Q6_K's 16-element scales).
 *
 * Batch invariance: a qmm kernel computes each output from the row's
 * blocks in an order that depends only on k, never on n, the tile or the
 * thread split, so batch 1 and batch n agree bitwise (as kernels.h).
 */
#ifndef PM_ACTQUANT_H
#define PM_ACTQUANT_H

#include <stddef.h>
#include <stdint.h>

#include "weights.h"

typedef struct {
	float d;   /* scale: x ~ d * q */
	float s;   /* d * sum(q) */
	int8_t q[32];
} pm_act32;

typedef struct {
	float d;
	int16_t bsums[16]; /* sums of q over each 16 elements */
	int8_t q[256];
} pm_act256;

/* pm_quant_block quantizes n floats of x into q by the rule above and
 * returns d; avx2 != 0 uses the AVX2 code where the CPU has it and n is a
 * multiple of 32 (bitwise the same result; the quantizers below use it
 * whenever they can). For tests. */
float pm_quant_block(int8_t *q, const float *x, int n, int avx2);

/* pm_quant_act32 quantizes k floats (k % 32 == 0) into k / 32 blocks. */
void pm_quant_act32(pm_act32 *dst, const float *x, int k);

/* pm_quant_act256 quantizes k floats (k % 256 == 0) into k / 256 blocks. */
void pm_quant_act256(pm_act256 *dst, const float *x, int k);

/* pm_quant_act quantizes one row of k floats into k / block blocks of
 * block 32 (pm_act32) or 256 (pm_act256); avx2 as pm_quant_block (the
 * bytes are the same either way). Returns 0, or -1 for another block or a
 * k that is not a whole number of blocks (nothing written). */
int pm_quant_act(int block, void *dst, const float *x, int k, int avx2);

/* pm_act_row_bytes returns the bytes of one quantized row of k elements
 * with the given block (32 or 256), 0 for another block or a k that is not
 * a whole number of blocks. */
size_t pm_act_row_bytes(int block, int k);

/*
 * pm_qmm_fn: out[r*ldo + m] = (row r of xq) . (row m of w) for r < n and m
 * in [m0, m1). xq holds n quantized rows (pm_act32 or pm_act256 blocks, as
 * the kernel's block says), row r at (const char *)xq + r * xq_stride.
 */
typedef void (*pm_qmm_fn)(float *out, size_t ldo, const void *xq, size_t xq_stride,
			  const pm_weight *w, int n, int m0, int m1);

/* pm_qmm is a type's integer kernel: block 32 or 256, and fn; fn NULL when
 * the type computes with float activations (pm_matmul_w). */
typedef struct {
	int block;
	pm_qmm_fn fn;
} pm_qmm;

/*
 * The kernels per family, avx2 != 0 for the AVX2 set (else portable). A
 * family registers a type only with both sets, so the kernel choice never
 * changes which activations a model computes with.
 *   qmm_32.c: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 (block 32)
 *   qmm_k.c:  Q4_K, Q5_K, Q6_K (block 256)
 */
pm_qmm pm_qmm_32(uint32_t type, int avx2);
pm_qmm pm_qmm_k(uint32_t type, int avx2);

/* pm_qmm_32_block_bytes: the bytes of one 32-element block of a qmm_32
 * type (qmm_32.c, qmm_32_neon.c), 0 for another type. Inline so a kernel
 * expanded per type folds it to a constant. */
static inline int pm_qmm_32_block_bytes(uint32_t type)
{
	switch (type) {
	case PM_TYPE_Q8_0:
		return 34;
	case PM_TYPE_Q4_0:
		return 18;
	case PM_TYPE_Q4_1:
		return 20;
	case PM_TYPE_Q5_0:
		return 22;
	case PM_TYPE_Q5_1:
		return 24;
	}
	return 0;
}

/* The kernels of one instruction-set path (PM_ISA_*, kernels.h), for the
 * engine's kernel choice: fn NULL when the type has no integer kernel in
 * the family or this build or CPU cannot run the path. AVX-VNNI has no
 * K-quant kernel of its own: pm_qmm_k_isa gives the AVX2 one there. */
pm_qmm pm_qmm_32_isa(uint32_t type, int isa);
pm_qmm pm_qmm_k_isa(uint32_t type, int isa);

/* pm_qmm_32_x86 returns one of qmm_32.c's x86 kernels for type: vnni 0
 * the AVX2 build, 1 the AVX-512 VNNI build, 2 the AVX-VNNI build (bitwise the same results;
 * pm_qmm_32(type, 1) picks it where it runs); fn NULL when this build or
 * CPU cannot run it. For tests and benchmarks. */
pm_qmm pm_qmm_32_x86(uint32_t type, int vnni);

/* pm_qmm_32_neon returns one of qmm_32_neon.c's AArch64 kernels for type:
 * dot 0 the baseline (vmull_s8) build, 1 the dot-product one (vdotq_s32),
 * -1 the best this CPU runs (bitwise the same results, and the portable
 * set's); fn NULL for other types, other targets, or dot 1 on a CPU
 * without the extension. For tests; pm_qmm_32_isa(type, PM_ISA_NEON)
 * picks. */
pm_qmm pm_qmm_32_neon(uint32_t type, int dot);

/* pm_qmm_k_neon returns qmm_k_neon.c's AArch64 kernel for Q4_K, Q5_K or
 * Q6_K (bitwise the portable one's results); fn NULL for other types or
 * off AArch64. pm_qmm_isa(type, PM_ISA_NEON) picks it (matmul.c). */
pm_qmm pm_qmm_k_neon(uint32_t type);

/*
 * pm_matmul_q quantizes the n rows of x (k = w->cols each, ldx floats
 * apart) into scratch (at least n * pm_act_row_bytes(q.block, k) bytes)
 * and runs q.fn: out[r*ldo + m] = x[r] . row m of w for m in [m0, m1).
 * For tests: the engine quantizes a matmul's input once for all its
 * threads and parts (forward.c, mm_run) and calls q.fn itself.
 */
void pm_matmul_q(pm_qmm q, float *out, size_t ldo, const float *x, size_t ldx, const pm_weight *w,
		 int n, int m0, int m1, void *scratch);

#endif
