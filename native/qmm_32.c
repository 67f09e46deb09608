/*
 * qmm_32.c: integer matrix products of Q8_0, Q4_0, Q4_1, Q5_0 and Q5_1
 * weights (layouts in quant_32.c) against pm_act32 activations
 * (actquant.h): out[r*ldo + m] = xq_r . w_m.
 *
 * Per 32-block b of an output, with the weight codes q_w (d_w, m_w) and
 * the activation codes q_x (d_x, s_x = d_x * sum q_x):
 *
 *	sumi_b = sum q_w[i] * q_x[i]                (integers, exact)
 *	y     += (d_w * d_x) * sumi_b               (float32)
 *	y     += m_w * s_x                          (Q4_1, Q5_1: the min term)
 *
 * q_w is signed (Q8_0: the int8 codes, Q4_0: code - 8, Q5_0: code - 16)
 * or, for the types with a min, the unsigned code (0..15, 0..31).
 *
 * Batch invariance: each set computes an output with one operation
 * sequence that depends only on k, whatever n, the tile or the [m0, m1)
 * split (test_quant.c checks it bitwise):
 *   - portable: one float accumulator, the two statements above per block
 *     (a product, then a sum, each rounded), in block order;
 *   - x86 (qmm_32_x86.h): the integer dot of the unsigned codes (Q8_0's
 *     offset by 128, Q4_0's and Q5_0's offset 8 and 16 left in), then two
 *     fused multiply-adds per block: the scale term, and the min term with
 *     m_w, or -offset * d_w (the offset taken off in float).
 * The two sets agree closely, not bitwise (FMA rounds once; the offset).
 * AArch64's NEON kernels (qmm_32_neon.c, PM_ISA_NEON) keep the portable
 * set's float steps, so they give its bits.
 *
 * Speed: decode (n == 1) on AVX2 runs 8 weight rows at a time,
 * interleaved into the lanes of 256-bit registers (qmv_32_avx2.c); the
 * VNNI builds run 4 weight rows at a time against the one activation row,
 * prefetching the next 4 rows as matvec.c does (Q8_0 in wide rows streamed
 * from memory takes the AVX2 8-row tiles there: qmm_32_vnni.c; with AVX-512
 * VNNI, Q4_0 and Q5_0 take 4 blocks of 4 rows per step on 512-bit
 * registers, no horizontal sum per block, prefetching 2 tiles ahead:
 * qmm_32_x86.h); batches
 * and prefill run tiles of 4 weight rows x 4 activation rows (AVX2), or,
 * where the CPU has AVX-512 VNNI (qmm_32_vnni.c), 16 weight rows
 * interleaved into 512-bit lanes against the activation rows with
 * vpdpbusd, each weight block decoded once per tile: per block for up to
 * 8 rows, per k-chunk for more.
 */
#include "actquant.h"
#include "kernels.h"

#include <string.h>

/* ---- portable ---- */

static float f16at(const uint8_t *p)
{
	uint16_t h;
	memcpy(&h, p, 2);
	return pm_half_to_float(h);
}

/* codes writes the 32 weight codes of block b (signed, or unsigned for the
 * types with a min: see the top of the file); *d and *m get the scale and
 * min (0 without one). */
static void codes(uint32_t type, const uint8_t *b, int8_t q[32], float *d, float *m)
{
	*d = f16at(b);
	*m = 0;
	const uint8_t *qs;
	uint32_t qh = 0;
	int bias = 0;
	switch (type) {
	case PM_TYPE_Q8_0:
		memcpy(q, b + 2, 32);
		return;
	case PM_TYPE_Q4_0:
		qs = b + 2, bias = 8;
		break;
	case PM_TYPE_Q4_1:
		*m = f16at(b + 2);
		qs = b + 4;
		break;
	case PM_TYPE_Q5_0:
		memcpy(&qh, b + 2, 4);
		qs = b + 6, bias = 16;
		break;
	default: /* Q5_1 */
		*m = f16at(b + 2);
		memcpy(&qh, b + 4, 4);
		qs = b + 8;
		break;
	}
	for (int j = 0; j < 16; j++) {
		q[j] = (int8_t)(((qs[j] & 15) | (int)((qh >> j) & 1) << 4) - bias);
		q[j + 16] = (int8_t)(((qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4) - bias);
	}
}

/* rows of x per pass over a weight row: the weight row's codes are decoded
 * once per block per pass */
enum { PCHUNK = 16 };

static void qmm_portable(float *out, size_t ldo, const void *xq, size_t xs, const pm_weight *w, int n,
			 int m0, int m1)
{
	int nb = w->cols / 32, bb = pm_qmm_32_block_bytes(w->type);
	int min = w->type == PM_TYPE_Q4_1 || w->type == PM_TYPE_Q5_1;
	for (int m = m0; m < m1; m++) {
		const uint8_t *row = pm_weight_row(w, m);
		for (int r0 = 0; r0 < n; r0 += PCHUNK) {
			int rn = n - r0 < PCHUNK ? n - r0 : PCHUNK;
			float acc[PCHUNK] = {0};
			for (int b = 0; b < nb; b++) {
				int8_t q[32];
				float d, mn;
				codes(w->type, row + (size_t)b * bb, q, &d, &mn);
				for (int r = 0; r < rn; r++) {
					const pm_act32 *a = (const pm_act32 *)((const char *)xq +
									(size_t)(r0 + r) * xs) + b;
					int sumi = 0;
					for (int i = 0; i < 32; i++)
						sumi += q[i] * a->q[i];
					float s = d * a->d;
					acc[r] = acc[r] + s * (float)sumi;
					if (min) {
						float t = mn * a->s;
						acc[r] = acc[r] + t;
					}
				}
			}
			for (int r = 0; r < rn; r++)
				out[(size_t)(r0 + r) * ldo + m] = acc[r];
		}
	}
}

/* ---- x86: AVX2, and AVX-512 VNNI where the CPU has it (qmm_32_x86.h) ---- */

#if defined(__x86_64__) && defined(__GNUC__)
#define HAVE_QMM_X86 1

#include "qmm_32_avx2.h"
#include "qmv_32_avx2.h"

/* qmm_32_avx2_fn: the AVX2 kernels, every type's decode run by
 * qmv_32_avx2.c's 8-row interleaved tiles and its batches by
 * qmm_32_avx2.c's (bitwise the same outputs as qmm_32_x86.h's 4-row
 * tiles, which the AVX-VNNI build still runs, without their horizontal
 * sums) */
#define A2_KERNEL(name, decodefn, batchfn)                                                                       \
	static void name##_a2(float *out, size_t ldo, const void *xq, size_t xs, const pm_weight *w, int n,    \
			      int m0, int m1)                                                                  \
	{                                                                                                      \
		if (n == 1)                                                                                    \
			decodefn(out, xq, w, m0, m1);                                                          \
		else                                                                                           \
			batchfn(out, ldo, xq, xs, w, n, m0, m1);                                               \
	}
A2_KERNEL(qmm_q4_0, pm_qmv_q4_0_avx2, pm_qmm_q4_0_avx2_batch)
A2_KERNEL(qmm_q4_1, pm_qmv_q4_1_avx2, pm_qmm_q4_1_avx2_batch)
A2_KERNEL(qmm_q5_0, pm_qmv_q5_0_avx2, pm_qmm_q5_0_avx2_batch)
A2_KERNEL(qmm_q5_1, pm_qmv_q5_1_avx2, pm_qmm_q5_1_avx2_batch)
A2_KERNEL(qmm_q8_0, pm_qmv_q8_0_avx2, pm_qmm_q8_0_avx2_batch)
#undef A2_KERNEL

static pm_qmm_fn qmm_32_avx2_fn(uint32_t type)
{
	switch (type) {
	case PM_TYPE_Q4_0:
		return qmm_q4_0_a2;
	case PM_TYPE_Q4_1:
		return qmm_q4_1_a2;
	case PM_TYPE_Q5_0:
		return qmm_q5_0_a2;
	case PM_TYPE_Q5_1:
		return qmm_q5_1_a2;
	case PM_TYPE_Q8_0:
		return qmm_q8_0_a2;
	}
	return NULL;
}

pm_qmm_fn qmm_32_vnni(uint32_t type);    /* qmm_32_vnni.c */
pm_qmm_fn qmm_32_avxvnni(uint32_t type); /* qmm_32_avxvnni.c */
#endif

pm_qmm pm_qmm_32_x86(uint32_t type, int vnni)
{
#ifdef HAVE_QMM_X86
	static const int isa[3] = {PM_ISA_AVX2, PM_ISA_AVX512VNNI, PM_ISA_AVXVNNI};
	if (pm_qmm_32_block_bytes(type) && vnni >= 0 && vnni <= 2 && pm_cpu_has_isa(isa[vnni]))
		return (pm_qmm){32, vnni == 1 ? qmm_32_vnni(type) : vnni == 2 ? qmm_32_avxvnni(type) : qmm_32_avx2_fn(type)};
#endif
	(void)type;
	(void)vnni;
	return (pm_qmm){0, 0};
}

pm_qmm pm_qmm_32_isa(uint32_t type, int isa)
{
	if (pm_qmm_32_block_bytes(type) == 0)
		return (pm_qmm){0, 0};
	switch (isa) {
	case PM_ISA_PORTABLE:
		return (pm_qmm){32, qmm_portable};
	case PM_ISA_AVX2:
		return pm_qmm_32_x86(type, 0);
	case PM_ISA_AVXVNNI:
		return pm_qmm_32_x86(type, 2);
	case PM_ISA_AVX512VNNI:
		return pm_qmm_32_x86(type, 1);
	case PM_ISA_NEON:
		return pm_cpu_has_isa(isa) ? pm_qmm_32_neon(type, -1) : (pm_qmm){0, 0};
	}
	return (pm_qmm){0, 0};
}

pm_qmm pm_qmm_32(uint32_t type, int avx2)
{
	if (pm_qmm_32_block_bytes(type) == 0)
		return (pm_qmm){0, 0};
	if (avx2) {
		pm_qmm q = pm_qmm_32_x86(type, 1);
		if (!q.fn)
			q = pm_qmm_32_x86(type, 0);
		if (q.fn)
			return q;
	}
	return (pm_qmm){32, qmm_portable};
}
