/*
 * qmm_k_neon.c: the K-quant integer products (Q4_K, Q5_K, Q6_K against
 * pm_act256) of AArch64's NEON path (PM_ISA_NEON); on other targets
 * pm_qmm_k_neon returns no kernel.
 *
 * The arithmetic is qmm_k.c's (its top comment): per output and
 * super-block, exact integers sumi = sum_s scale[s] * (q_w[s] . q_x[s])
 * and summ = sum_s corr[s] * bsums[s], then one float32 step
 *
 *	Q4_K, Q5_K:  acc = acc + ((d * dx) * sumi - (dmin * dx) * summ)
 *	Q6_K:        acc = acc + (d * dx) * (sumi - summ)
 *
 * written as scalar C here, each operation rounded (no contraction: the
 * #error below refuses GCC's GNU modes), so the results are bitwise the
 * portable set's (and so the AVX2 set's, which matches it).
 *
 * A weight super-block is unpacked once per row of the weight into 256
 * codes in element order with NEON (nibbles, the Q5_K fifth bit, Q6_K's
 * two high bits), and every activation row runs against it: vmull_s8 of
 * the codes (0..63 fit int8) and the activations, the two halves of a
 * 16-element group added in int16 (|2 * 63 * 127| < 32767), widened to
 * int32 lanes and multiplied by the group's scale (vmlaq_n_s32); summ is
 * two vmull_s16 of the corrections and bsums. Every sum is exact and in
 * range (qmm_k.c's bounds), so lane order does not matter.
 *
 * Compiled and tested under qemu-aarch64 only (test_neon.c, against the
 * portable kernels bitwise); never measured for speed.
 */
#include "actquant.h"
#include "kernels.h"

#if defined(__aarch64__) && defined(__GNUC__)

#if !defined(__clang__) && !defined(__STRICT_ANSI__)
#error "qmm_k_neon.c: compile with -std=c11 (GCC's GNU modes contract a * b + c into FMA; the portable set does not)"
#endif
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

#include <arm_neon.h>
#include <string.h>

enum { KIND_Q4, KIND_Q5, KIND_Q6 };

/* an unpacked super-block: codes in element order, a scale and a
 * correction per 16 elements, the F16 scales widened */
typedef struct {
	uint8_t q[256];
	int16_t sc[16], corr[16];
	float d, dmin;
} ublock;

static float f16(const uint8_t *p)
{
	uint16_t h;
	memcpy(&h, p, 2);
	return pm_half_to_float(h);
}

/* scales6: the 8 6-bit scales and mins of a Q4_K/Q5_K super-block's 12
 * scale bytes s (quant_k.c's layout): sub-block j < 4 keeps its low 6 bits
 * in s[j] (scale) and s[j + 4] (min); j >= 4 has its low 4 bits in
 * s[j + 4] (scale: low nibble, min: high nibble) and its top 2 bits in the
 * top of s[j - 4] (scale) and s[j] (min). */
static void scales6(const uint8_t *s, int16_t sc[16], int16_t corr[16])
{
	for (int j = 0; j < 8; j++) {
		int a, m;
		if (j < 4) {
			a = s[j] & 63;
			m = s[j + 4] & 63;
		} else {
			a = (s[j + 4] & 15) | (s[j - 4] >> 6) << 4;
			m = (s[j + 4] >> 4) | (s[j] >> 6) << 4;
		}
		sc[2 * j] = sc[2 * j + 1] = (int16_t)a;
		corr[2 * j] = corr[2 * j + 1] = (int16_t)m;
	}
}

/* bit: 16 where bit sh of each byte of v is set, else 0 */
static inline uint8x16_t bit(uint8x16_t v, int sh)
{
	return vandq_u8(vtstq_u8(v, vdupq_n_u8((uint8_t)(1u << sh))), vdupq_n_u8(16));
}

static void unpack_k(ublock *u, const uint8_t *b, int kind)
{
	const uint8_t *qh = kind == KIND_Q5 ? b + 16 : NULL, *qs = kind == KIND_Q5 ? b + 48 : b + 16;
	u->d = f16(b);
	u->dmin = f16(b + 2);
	scales6(b + 4, u->sc, u->corr);
	const uint8x16_t low4 = vdupq_n_u8(15);
	for (int c = 0; c < 4; c++)
		for (int h = 0; h < 2; h++) { /* bytes l = 16h .. 16h+15 of chunk c */
			uint8x16_t v = vld1q_u8(qs + 32 * c + 16 * h);
			uint8x16_t lo = vandq_u8(v, low4), hi = vshrq_n_u8(v, 4);
			if (qh) {
				uint8x16_t hb = vld1q_u8(qh + 16 * h);
				lo = vorrq_u8(lo, bit(hb, 2 * c));
				hi = vorrq_u8(hi, bit(hb, 2 * c + 1));
			}
			vst1q_u8(u->q + 64 * c + 16 * h, lo);
			vst1q_u8(u->q + 64 * c + 32 + 16 * h, hi);
		}
}

static void unpack_q6(ublock *u, const uint8_t *b)
{
	const uint8_t *ql = b, *qh = b + 128;
	const int8_t *sc = (const int8_t *)(b + 192);
	u->d = u->dmin = f16(b + 208);
	for (int s = 0; s < 16; s++) {
		u->sc[s] = sc[s];
		u->corr[s] = (int16_t)(32 * sc[s]);
	}
	const uint8x16_t low4 = vdupq_n_u8(15), two = vdupq_n_u8(3 << 4);
	for (int c = 0; c < 2; c++)
		for (int h = 0; h < 2; h++) { /* l = 16h .. 16h+15 */
			uint8x16_t a = vld1q_u8(ql + 64 * c + 16 * h), a2 = vld1q_u8(ql + 64 * c + 32 + 16 * h);
			uint8x16_t hb = vld1q_u8(qh + 32 * c + 16 * h);
			uint8_t *q = u->q + 128 * c + 16 * h;
			vst1q_u8(q, vorrq_u8(vandq_u8(a, low4), vandq_u8(vshlq_n_u8(hb, 4), two)));
			vst1q_u8(q + 32, vorrq_u8(vandq_u8(a2, low4), vandq_u8(vshlq_n_u8(hb, 2), two)));
			vst1q_u8(q + 64, vorrq_u8(vshrq_n_u8(a, 4), vandq_u8(hb, two)));
			vst1q_u8(q + 96, vorrq_u8(vshrq_n_u8(a2, 4), vandq_u8(vshrq_n_u8(hb, 2), two)));
		}
}

/* dot: sumi and summ of the unpacked block u against activation block x */
static inline void dot(const ublock *u, const pm_act256 *x, int32_t *sumi, int32_t *summ)
{
	int32x4_t acc = vdupq_n_s32(0);
	for (int s = 0; s < 16; s++) {
		int8x16_t q = vreinterpretq_s8_u8(vld1q_u8(u->q + 16 * s)), a = vld1q_s8(x->q + 16 * s);
		int16x8_t p = vaddq_s16(vmull_s8(vget_low_s8(q), vget_low_s8(a)), vmull_high_s8(q, a));
		acc = vmlaq_n_s32(acc, vpaddlq_s16(p), u->sc[s]);
	}
	*sumi = vaddvq_s32(acc);
	int16x8_t c0 = vld1q_s16(u->corr), c1 = vld1q_s16(u->corr + 8);
	int16x8_t b0 = vld1q_s16(x->bsums), b1 = vld1q_s16(x->bsums + 8);
	int32x4_t m = vaddq_s32(vmull_s16(vget_low_s16(c0), vget_low_s16(b0)), vmull_high_s16(c0, b0));
	m = vaddq_s32(m, vaddq_s32(vmull_s16(vget_low_s16(c1), vget_low_s16(b1)), vmull_high_s16(c1, b1)));
	*summ = vaddvq_s32(m);
}

/* kqmm: one weight super-block unpacked at a time, used by all n rows of
 * x; out accumulates in place, super-block by super-block (as qmm_k.c's
 * portable kernel). */
static void kqmm(float *out, size_t ldo, const void *xq, size_t xs, const pm_weight *w, int n, int m0, int m1,
		 int kind, size_t bb)
{
	int nb = w->cols / 256;
	ublock u;
	for (int m = m0; m < m1; m++) {
		const uint8_t *row = pm_weight_row(w, m);
		for (int r = 0; r < n; r++)
			out[(size_t)r * ldo + m] = 0;
		for (int b = 0; b < nb; b++) {
			const uint8_t *blk = row + bb * (size_t)b;
			if (kind == KIND_Q6)
				unpack_q6(&u, blk);
			else
				unpack_k(&u, blk, kind);
			for (int r = 0; r < n; r++) {
				const pm_act256 *x = (const pm_act256 *)((const char *)xq + (size_t)r * xs) + b;
				int32_t sumi, summ;
				dot(&u, x, &sumi, &summ);
				float *o = out + (size_t)r * ldo + m;
				if (kind == KIND_Q6) {
					float s = u.d * x->d;
					float t = s * (float)(sumi - summ);
					*o = *o + t;
				} else {
					float s = u.d * x->d, sm = u.dmin * x->d;
					float t = s * (float)sumi, tm = sm * (float)summ;
					float v = t - tm;
					*o = *o + v;
				}
			}
		}
	}
}

static void kqmm_q4(float *out, size_t ldo, const void *xq, size_t xs, const pm_weight *w, int n, int m0, int m1)
{
	kqmm(out, ldo, xq, xs, w, n, m0, m1, KIND_Q4, 144);
}

static void kqmm_q5(float *out, size_t ldo, const void *xq, size_t xs, const pm_weight *w, int n, int m0, int m1)
{
	kqmm(out, ldo, xq, xs, w, n, m0, m1, KIND_Q5, 176);
}

static void kqmm_q6(float *out, size_t ldo, const void *xq, size_t xs, const pm_weight *w, int n, int m0, int m1)
{
	kqmm(out, ldo, xq, xs, w, n, m0, m1, KIND_Q6, 210);
}

pm_qmm pm_qmm_k_neon(uint32_t type)
{
	switch (type) {
	case PM_TYPE_Q4_K:
		return (pm_qmm){256, kqmm_q4};
	case PM_TYPE_Q5_K:
		return (pm_qmm){256, kqmm_q5};
	case PM_TYPE_Q6_K:
		return (pm_qmm){256, kqmm_q6};
	}
	return (pm_qmm){0, 0};
}

#else /* not AArch64 */

pm_qmm pm_qmm_k_neon(uint32_t type)
{
	(void)type;
	return (pm_qmm){0, 0};
}

#endif
