/*
 * qmm_k.c: integer matrix products of Q4_K, Q5_K and Q6_K weights against
 * pm_act256 activations (actquant.h). The block layouts are in quant_k.c.
 *
 * Per output (row r of x, weight row m) and per 256-element super-block
 * b, everything up to one int32 is exact integer arithmetic:
 *
 *	sumi = sum over 16-element groups s of  scale[s] * (q_w[s] . q_x[s])
 *	summ = sum over s of                    corr[s] * bsums[s]
 *
 * where the weight codes q_w are unsigned (Q4_K 0..15, Q5_K 0..31, Q6_K
 * 0..63), scale[s] is the 6-bit scale of the 32-sub-block (Q4_K, Q5_K) or
 * the int8 scale of the 16-sub-block (Q6_K), and corr[s] is the 6-bit min
 * (Q4_K, Q5_K) or 32 * scale (Q6_K, whose codes are stored + 32). The
 * super-block then adds one float32 term to the output's accumulator,
 * which starts at 0 and sees the super-blocks in order b = 0, 1, ...:
 *
 *	Q4_K, Q5_K:  acc = acc + ((d * dx) * sumi - (dmin * dx) * summ)
 *	Q6_K:        acc = acc + (d * dx) * (sumi - summ)
 *
 * (d, dmin: the weight super-block's F16 scales; dx: the activation
 * block's scale), each product, difference and sum one float32 operation
 * (no contraction: the build is -std=c11). Every path, the portable one
 * here or the x86 ones below, batch 1 or a tile of rows, computes exactly
 * this sequence, so the sets agree bitwise and a row's result never
 * depends on n, the tile or the split [m0, m1) (test_quant.c's test_qmm
 * and test_qmm_k.c check both).
 *
 * Ranges (no overflow anywhere): a maddubs pair is at most 2*63*127 =
 * 16002 < 32767; |sumi| <= 256*63*127*128 < 2^31; |summ| likewise.
 *
 * The x86 kernels live in files of their own, and this one's AVX2 set
 * (vqmm_*) only chooses among them: batch 1 is qmv_k_avx2.c's, batches
 * (n > 1) are qmm_k_avx2.c's: tiles of 8 weight rows interleaved in
 * lanes, so each row's sums land in its own lane. (They replaced tiles of
 * 4 unpacked rows against 2 rows of x, one row's codes per register and
 * vphaddd to each output: default Q4_K_M prefill 256 at one thread
 * 1.37x.) The first AVX2 kernels, here, decoded four weight rows straight
 * into registers at batch 1, prefetching the next four; measured on this
 * machine (1376 x 512 Q4_K, one thread, CPU time per product with the
 * activation quantization, against the float32 kernels these replace):
 * 4.7x at batch 1, 2.0x at 8, 1.4x at 64. Where the CPU has AVX512-VNNI
 * with VL and BW, pm_qmm_k returns qmm_k_vnni.c's kernels instead
 * (pairdot at batch 1 on matrices in rows, kqmm_vnni's vpdpbusd tiles for
 * batches; each file's top comment has its measurements).
 */
#include "actquant.h"
#include "kernels.h"
#include "qmm_k_avx2.h"
#include "qmm_k_vnni.h"
#include "qmv_k_avx2.h"

#include <string.h>

/* ---- portable ---- */

/* kscales decodes a Q4_K/Q5_K super-block's 12 scale bytes into 8 6-bit
 * scales and 8 6-bit mins: sub-block s < 4 has sc = b[s] & 63, m = b[s+4]
 * & 63; s >= 4 has sc = (b[s+4] & 15) | (b[s-4] >> 6) << 4 and m = (b[s+4]
 * >> 4) | (b[s] >> 6) << 4. Done on three 32-bit words at once. */
static inline void kscales(const uint8_t *b, uint8_t sc[8], uint8_t m[8])
{
	uint32_t u[3], o[4];
	memcpy(u, b, 12);
	o[0] = u[0] & 0x3f3f3f3fu;
	o[1] = (u[2] & 0x0f0f0f0fu) | ((u[0] >> 2) & 0x30303030u);
	o[2] = u[1] & 0x3f3f3f3fu;
	o[3] = ((u[2] >> 4) & 0x0f0f0f0fu) | ((u[1] >> 2) & 0x30303030u);
	memcpy(sc, o, 8);
	memcpy(m, o + 2, 8);
}

static inline float f16at(const uint8_t *p)
{
	uint16_t h;
	memcpy(&h, p, 2);
	return pm_half_to_float(h);
}

/* The float step, shared by every path (see the top comment). */
static inline float add_k(float acc, float d, float dmin, float dx, int32_t sumi, int32_t summ)
{
	return acc + ((d * dx) * (float)sumi - (dmin * dx) * (float)summ);
}

static inline float add_6(float acc, float d, float dx, int32_t sumi, int32_t summ)
{
	return acc + (d * dx) * (float)(sumi - summ);
}

/* The portable unpacked super-block: codes in element order, a scale and
 * a correction per 16 elements. */
typedef struct {
	uint8_t q[256];
	int16_t sc[16], corr[16];
	float d, dmin;
} kblock;

static void unpack_k(kblock *u, const uint8_t *b, const uint8_t *qh, const uint8_t *qs)
{
	uint8_t sc[8], m[8];
	kscales(b + 4, sc, m);
	u->d = f16at(b);
	u->dmin = f16at(b + 2);
	for (int s = 0; s < 8; s++) {
		u->sc[2 * s] = u->sc[2 * s + 1] = sc[s];
		u->corr[2 * s] = u->corr[2 * s + 1] = m[s];
	}
	for (int c = 0; c < 4; c++)
		for (int l = 0; l < 32; l++) {
			int lo = qs[32 * c + l] & 15, hi = qs[32 * c + l] >> 4;
			if (qh) {
				lo |= ((qh[l] >> (2 * c)) & 1) << 4;
				hi |= ((qh[l] >> (2 * c + 1)) & 1) << 4;
			}
			u->q[64 * c + l] = (uint8_t)lo;
			u->q[64 * c + 32 + l] = (uint8_t)hi;
		}
}

static void unpack_q6(kblock *u, const uint8_t *b)
{
	const uint8_t *ql = b, *qh = b + 128;
	const int8_t *sc = (const int8_t *)(b + 192);
	u->d = u->dmin = f16at(b + 208);
	for (int s = 0; s < 16; s++) {
		u->sc[s] = sc[s];
		u->corr[s] = (int16_t)(32 * sc[s]);
	}
	for (int c = 0; c < 2; c++)
		for (int l = 0; l < 32; l++) {
			uint8_t *q = u->q + 128 * c + l;
			q[0] = (uint8_t)((ql[64 * c + l] & 15) | (qh[32 * c + l] & 3) << 4);
			q[32] = (uint8_t)((ql[64 * c + l + 32] & 15) | ((qh[32 * c + l] >> 2) & 3) << 4);
			q[64] = (uint8_t)((ql[64 * c + l] >> 4) | ((qh[32 * c + l] >> 4) & 3) << 4);
			q[96] = (uint8_t)((ql[64 * c + l + 32] >> 4) | ((qh[32 * c + l] >> 6) & 3) << 4);
		}
}

static void dot_block(const kblock *u, const pm_act256 *x, int32_t *sumi, int32_t *summ)
{
	int32_t si = 0, sm = 0;
	for (int s = 0; s < 16; s++) {
		int32_t dot = 0;
		for (int i = 0; i < 16; i++)
			dot += (int32_t)u->q[16 * s + i] * x->q[16 * s + i];
		si += u->sc[s] * dot;
		sm += u->corr[s] * x->bsums[s];
	}
	*sumi = si;
	*summ = sm;
}

enum { K_Q4, K_Q5, K_Q6 };

static void unpack_one(kblock *u, const uint8_t *b, int kind)
{
	switch (kind) {
	case K_Q4:
		unpack_k(u, b, NULL, b + 16);
		break;
	case K_Q5:
		unpack_k(u, b, b + 16, b + 48);
		break;
	default:
		unpack_q6(u, b);
	}
}

/* qmm_portable: one weight super-block unpacked at a time, used by all n
 * rows of x; out accumulates in place, super-block by super-block. */
static void qmm_portable(float *out, size_t ldo, const void *xq, size_t xs, const pm_weight *w, int n,
			 int m0, int m1, int kind, size_t bb)
{
	int nb = w->cols / 256;
	kblock u;
	for (int m = m0; m < m1; m++) {
		const uint8_t *row = pm_weight_row(w, m);
		for (int r = 0; r < n; r++)
			out[(size_t)r * ldo + m] = 0;
		for (int b = 0; b < nb; b++) {
			unpack_one(&u, row + bb * (size_t)b, kind);
			for (int r = 0; r < n; r++) {
				const pm_act256 *x = (const pm_act256 *)((const char *)xq + (size_t)r * xs) + b;
				int32_t sumi, summ;
				dot_block(&u, x, &sumi, &summ);
				float *o = out + (size_t)r * ldo + m;
				*o = kind == K_Q6 ? add_6(*o, u.d, x->d, sumi, summ)
						  : add_k(*o, u.d, u.dmin, x->d, sumi, summ);
			}
		}
	}
}

static void qmm_q4_k(float *out, size_t ldo, const void *xq, size_t xs, const pm_weight *w, int n, int m0,
		     int m1)
{
	qmm_portable(out, ldo, xq, xs, w, n, m0, m1, K_Q4, 144);
}

static void qmm_q5_k(float *out, size_t ldo, const void *xq, size_t xs, const pm_weight *w, int n, int m0,
		     int m1)
{
	qmm_portable(out, ldo, xq, xs, w, n, m0, m1, K_Q5, 176);
}

static void qmm_q6_k(float *out, size_t ldo, const void *xq, size_t xs, const pm_weight *w, int n, int m0,
		     int m1)
{
	qmm_portable(out, ldo, xq, xs, w, n, m0, m1, K_Q6, 210);
}

/* ---- AVX2 ---- */

#if defined(__x86_64__) && defined(__GNUC__)
#define AVX2 __attribute__((target("avx2,fma,f16c")))

/* KQMM_TYPE(t) defines type t's AVX2 kernel vqmm_t: qmv_k_avx2.c's at
 * batch 1, qmm_k_avx2.c's tiles for batches (on AVX512-VNNI CPUs pm_qmm_k
 * returns qmm_k_vnni.c's instead). */
#define KQMM_TYPE(T)                                                                             \
	static AVX2 void vqmm_##T(float *out, size_t ldo, const void *xq, size_t xs,            \
				  const pm_weight *w, int n, int m0, int m1)                   \
	{                                                                                        \
		if (n == 1)                                                                      \
			pm_qmv_##T##_avx2(out, xq, w, m0, m1);                                   \
		else                                                                             \
			pm_qmm_##T##_avx2_batch(out, ldo, xq, xs, w, n, m0, m1);                 \
	}

KQMM_TYPE(q4_k)
KQMM_TYPE(q5_k)
KQMM_TYPE(q6_k)

/* has_vnni reports AVX512-VNNI with AVX512VL (vpdpwssd on ymm) and
 * AVX512BW (qmm_k_vnni.c's kchain's EVEX vpsrlw; every VNNI CPU has it). */
static int has_vnni(void)
{
	return __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vl") &&
	       __builtin_cpu_supports("avx512bw");
}

#define HAVE_VQMM 1
#endif

/* pm_qmm_k: avx2 0 is the portable set; nonzero the AVX2 set, which where
 * the CPU has AVX512-VNNI with VL uses pairdot at batch 1 and kqmm_vnni's
 * vpdpbusd tiles for batches (qmm_k_vnni.c; bitwise the same results); 2
 * forces the plain AVX2 instructions (for tests on such CPUs). */
pm_qmm pm_qmm_k(uint32_t type, int avx2)
{
	pm_qmm_fn p = NULL, v = NULL;
	switch (type) {
	case PM_TYPE_Q4_K:
		p = qmm_q4_k;
#ifdef HAVE_VQMM
		v = vqmm_q4_k;
#endif
		break;
	case PM_TYPE_Q5_K:
		p = qmm_q5_k;
#ifdef HAVE_VQMM
		v = vqmm_q5_k;
#endif
		break;
	case PM_TYPE_Q6_K:
		p = qmm_q6_k;
#ifdef HAVE_VQMM
		v = vqmm_q6_k;
#endif
		break;
	default:
		return (pm_qmm){0, 0};
	}
	if (!avx2 || !v)
		return (pm_qmm){256, p};
#ifdef HAVE_VQMM
	if (avx2 == 1 && has_vnni())
		return (pm_qmm){256, pm_qmm_k_vnni(type)};
#endif
	return (pm_qmm){256, v};
}

pm_qmm pm_qmm_k_isa(uint32_t type, int isa)
{
	switch (isa) {
	case PM_ISA_PORTABLE:
		return pm_qmm_k(type, 0);
	case PM_ISA_AVX2:
	case PM_ISA_AVXVNNI: /* no AVX-VNNI K-quant kernel: the AVX2 one */
		return pm_cpu_has_isa(isa) ? pm_qmm_k(type, 2) : (pm_qmm){0, 0};
	case PM_ISA_AVX512VNNI:
		return pm_cpu_has_isa(isa) ? pm_qmm_k(type, 1) : (pm_qmm){0, 0};
	}
	return (pm_qmm){0, 0};
}
