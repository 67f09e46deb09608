/*
 * matmul.c: the typed matrix product. For a weight's type it picks the
 * kernel that computes it: the row dequantizer (pm_dequant, declared in
 * weights.h beside the types), the AVX2 batch-1 matvec (matvec.c), the
 * AVX2 float tile product (mm_float.c), the F16 panel products
 * (mm_f16_panel.c: for matrices an engine repacked), the NEON one
 * (mm_float_neon.c) or the dequantize-a-tile path on kernels.h's matmul; and the integer kernel of a type (pm_qmm_for:
 * qmm_32.c's or qmm_k.c's). It stands above the kernels and the types it
 * dispatches to; none of them calls back into it.
 */
#include <stdint.h>

#include "matmul.h"
#include "mm_f16_panel.h"
#include "mm_float_neon.h"

/* How far ahead (rows: two 4-row tiles) the dequantizing path prefetches
 * the weight stream; the next tile is too close to arrive in time. */
#define PM_PREFETCH_ROWS 8

static const pm_dequant_fn portable[PM_TYPE_COUNT] = {
	[PM_TYPE_F32] = pm_dq_f32,   [PM_TYPE_F16] = pm_dq_f16,   [PM_TYPE_BF16] = pm_dq_bf16,
	[PM_TYPE_Q4_0] = pm_dq_q4_0, [PM_TYPE_Q4_1] = pm_dq_q4_1, [PM_TYPE_Q5_0] = pm_dq_q5_0,
	[PM_TYPE_Q5_1] = pm_dq_q5_1, [PM_TYPE_Q8_0] = pm_dq_q8_0, [PM_TYPE_Q4_K] = pm_dq_q4_k,
	[PM_TYPE_Q5_K] = pm_dq_q5_k, [PM_TYPE_Q6_K] = pm_dq_q6_k,
};

#ifdef PM_HAVE_AVX2_DQ
static const pm_dequant_fn avx2[PM_TYPE_COUNT] = {
	[PM_TYPE_F32] = pm_dq_f32,        [PM_TYPE_F16] = pm_dq_f16_avx2,
	[PM_TYPE_BF16] = pm_dq_bf16_avx2, [PM_TYPE_Q4_0] = pm_dq_q4_0_avx2,
	[PM_TYPE_Q4_1] = pm_dq_q4_1_avx2, [PM_TYPE_Q5_0] = pm_dq_q5_0_avx2,
	[PM_TYPE_Q5_1] = pm_dq_q5_1_avx2, [PM_TYPE_Q8_0] = pm_dq_q8_0_avx2,
	[PM_TYPE_Q4_K] = pm_dq_q4_k_avx2, [PM_TYPE_Q5_K] = pm_dq_q5_k_avx2,
	[PM_TYPE_Q6_K] = pm_dq_q6_k_avx2,
};
#endif

pm_dequant_fn pm_dequant(uint32_t type, int simd)
{
	if (type >= PM_TYPE_COUNT)
		return NULL;
#ifdef PM_HAVE_AVX2_DQ
	if (simd && pm_cpu_has_avx2() && __builtin_cpu_supports("f16c"))
		return avx2[type];
#endif
	(void)simd;
	return portable[type];
}

void pm_matmul_w(const pm_kernels *k, pm_dequant_fn dq, float *out, size_t ldo, const float *x,
		 const pm_weight *w, int n, int m0, int m1, float *scratch)
{
	int cols = w->cols;
	/* an engine puts F16 matrices in panels only for a kernel set that
	 * runs the panel products (engine_api.c) */
	if (w->layout == PM_LAYOUT_PANEL8) {
		if (n == 1)
			pm_mv_f16_panel(out, x, w, m0, m1);
		else
			pm_mm_f16_panel(out, ldo, x, w, n, m0, m1);
		return;
	}
	if (n == 1 && k != &pm_kernels_portable && cols % 32 == 0) {
		pm_matvec_fn mv = pm_matvec_avx2(w->type);
		if (mv) {
			mv(out, x, w, m0, m1);
			return;
		}
	}
	if (k != &pm_kernels_portable) {
		pm_tile_fn tf = pm_matmul_float_avx2(w->type, k->regs);
		if (!tf && k->regs == 0) /* the NEON set (AArch64): NULL elsewhere */
			tf = pm_matmul_float_neon(w->type);
		if (tf) {
			tf(out, ldo, x, w, n, m0, m1);
			return;
		}
	}
	if (w->type == PM_TYPE_F32 && (uintptr_t)w->data % sizeof(float) == 0) {
		k->matmul(out, ldo, x, (const float *)w->data, n, cols, m0, m1);
		return;
	}
	for (int mt = m0; mt < m1; mt += 4) {
		int rows = m1 - mt < 4 ? m1 - mt : 4;
		for (int i = 0; i < rows; i++)
			dq(scratch + (size_t)i * cols, pm_weight_row(w, mt + i), cols);
		/* a later tile's bytes are on their way from DRAM while this
		 * tile is used (a hint: never faults, never changes a result) */
		int next = m1 - (mt + PM_PREFETCH_ROWS) < 4 ? m1 - (mt + PM_PREFETCH_ROWS) : 4;
		if (next > 0) {
			const char *p = pm_weight_row(w, mt + PM_PREFETCH_ROWS);
			size_t bytes = (size_t)next * w->row_bytes;
			for (size_t o = 0; o < bytes; o += 64)
				__builtin_prefetch(p + o, 0, 2);
		}
		k->matmul(out + mt, ldo, x, scratch, n, cols, 0, rows);
	}
}

pm_qmm pm_qmm_for(uint32_t type, int avx2)
{
	pm_qmm q = pm_qmm_32(type, avx2);
	if (q.fn)
		return q;
	return pm_qmm_k(type, avx2);
}

pm_qmm pm_qmm_isa(uint32_t type, int isa)
{
	pm_qmm q = pm_qmm_32_isa(type, isa);
	if (q.fn)
		return q;
	/* the NEON path's K-quant kernels are qmm_k_neon.c's */
	if (isa == PM_ISA_NEON)
		return pm_cpu_has_isa(isa) ? pm_qmm_k_neon(type) : (pm_qmm){0, 0};
	return pm_qmm_k_isa(type, isa);
}
