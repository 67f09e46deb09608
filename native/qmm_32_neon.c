/*
 * qmm_32_neon.c: qmm_32.c's integer products of Q8_0, Q4_0, Q4_1, Q5_0 and
 * Q5_1 weights against pm_act32 activations, for AArch64 Advanced SIMD
 * (NEON: baseline on every ARM64 CPU). pm_qmm_32_isa(type, PM_ISA_NEON)
 * returns them; on other targets this file compiles to nothing.
 *
 * Bitwise the portable set (qmm_32.c), not the x86 one: per 32-block b of
 * an output the integer dot sumi_b is exact, and the float steps are the
 * portable set's, each rounded, in block order:
 *
 *	s    = d_w * d_x
 *	acc  = acc + s * (float)sumi_b
 *	acc  = acc + m_w * s_x              (Q4_1, Q5_1)
 *
 * done four weight rows at a time with vmulq_f32 / vaddq_f32 lane by lane.
 * They must not be fused into multiply-adds (the portable C rounds the
 * product): GCC contracts a * b + c only with -ffp-contract=fast, which
 * is its default in GNU mode but off under -std=c11 (ISO mode), the mode
 * cgo.go and the C test scripts compile with. The #error below refuses a
 * GNU-mode build rather than give silently different bits; clang honours
 * the STDC pragma. test_neon.c checks neon == portable bitwise.
 *
 * The weights' codes are the signed ones (Q8_0 as stored, Q4_0 - 8,
 * Q5_0 - 16) or, for the types with a min, the unsigned ones, as in
 * qmm_32.c; the integer dot of a block is
 *   - baseline: vmull_s8 of the two 8-byte halves of each 16 bytes into
 *     int16 (|w * x| <= 128 * 127 fits), summed pairwise into int32 lanes
 *     with vpaddlq_s16 / vpadalq_s16;
 *   - with the dot-product extension (FEAT_DotProd, HWCAP_ASIMDDP: Cortex
 *     A55/A76 and later, Neoverse N1/V1, Graviton 2+): vdotq_s32, two per
 *     block; chosen at run time.
 * Four weight rows' lane sums reduce to one vector [sumi_0 .. sumi_3]
 * with three vpaddq_s32.
 *
 * Tiles: 4 weight rows (codes decoded once per block per tile) against up
 * to 4 activation rows per pass: 8 code registers, 2 activation
 * registers and 4 accumulators of AArch64's 32. Decode (n == 1) is the
 * 1-row pass. A tile past m1 repeats the last row and stores only the
 * rows in [m0, m1), so tile edges never change an output's operations:
 * batch-, split- and tile-invariant.
 *
 * Nothing here has run on ARM hardware: it was compiled with Debian's
 * aarch64 cross gcc and tested under qemu-aarch64 (run-arm64.sh); its
 * speed has never been measured.
 */
#include "actquant.h"
#include "kernels.h"

#if defined(__aarch64__) && defined(__GNUC__)

#if !defined(__clang__) && !defined(__STRICT_ANSI__)
#error "qmm_32_neon.c: compile with -std=c11 (GCC's GNU modes contract a * b + c into FMA; the portable set does not)"
#endif
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

#include <arm_neon.h>
#include <string.h>
#include <sys/auxv.h>

#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1UL << 20)
#endif

#define INLINE static inline __attribute__((always_inline))

enum { TILE_M = 4, PASS_N = 4 };

INLINE uint16_t u16at(const uint8_t *p)
{
	uint16_t h;
	memcpy(&h, p, 2);
	return h;
}

/* hbit16: byte j of the result is 16 where bit j of the two bytes at p
 * (little-endian) is set, else 0: the fifth bit of 16 Q5 codes. */
INLINE uint8x16_t hbit16(const uint8_t *p)
{
	static const uint8_t bit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
	uint8x16_t v = vcombine_u8(vdup_n_u8(p[0]), vdup_n_u8(p[1]));
	return vandq_u8(vtstq_u8(v, vld1q_u8(bit)), vdupq_n_u8(16));
}

/* decode: block b's 32 codes as lo (elements 0..15) and hi (16..31), the
 * scale's and min's F16 bits in *d, *m (0 without a min). */
INLINE void decode(uint32_t type, const uint8_t *b, int8x16_t *lo, int8x16_t *hi, uint16_t *d, uint16_t *m)
{
	*d = u16at(b);
	*m = 0;
	const uint8x16_t low4 = vdupq_n_u8(15);
	uint8x16_t qs, l, h;
	switch (type) {
	case PM_TYPE_Q8_0:
		*lo = vld1q_s8((const int8_t *)(b + 2));
		*hi = vld1q_s8((const int8_t *)(b + 18));
		return;
	case PM_TYPE_Q4_0:
		qs = vld1q_u8(b + 2);
		*lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(qs, low4)), vdupq_n_s8(8));
		*hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(qs, 4)), vdupq_n_s8(8));
		return;
	case PM_TYPE_Q4_1:
		*m = u16at(b + 2);
		qs = vld1q_u8(b + 4);
		*lo = vreinterpretq_s8_u8(vandq_u8(qs, low4));
		*hi = vreinterpretq_s8_u8(vshrq_n_u8(qs, 4));
		return;
	case PM_TYPE_Q5_0:
		qs = vld1q_u8(b + 6);
		l = vorrq_u8(vandq_u8(qs, low4), hbit16(b + 2));
		h = vorrq_u8(vshrq_n_u8(qs, 4), hbit16(b + 4));
		*lo = vsubq_s8(vreinterpretq_s8_u8(l), vdupq_n_s8(16));
		*hi = vsubq_s8(vreinterpretq_s8_u8(h), vdupq_n_s8(16));
		return;
	default: /* Q5_1 */
		*m = u16at(b + 2);
		qs = vld1q_u8(b + 8);
		*lo = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(qs, low4), hbit16(b + 4)));
		*hi = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(qs, 4), hbit16(b + 6)));
		return;
	}
}

/* lanes_mull: int32 lanes whose sum is the block's dot (baseline NEON). */
INLINE int32x4_t lanes_mull(int8x16_t wl, int8x16_t wh, int8x16_t xl, int8x16_t xh)
{
	int32x4_t a = vpaddlq_s16(vmull_s8(vget_low_s8(wl), vget_low_s8(xl)));
	a = vpadalq_s16(a, vmull_high_s8(wl, xl));
	a = vpadalq_s16(a, vmull_s8(vget_low_s8(wh), vget_low_s8(xh)));
	return vpadalq_s16(a, vmull_high_s8(wh, xh));
}

/* sum4: [sum a, sum b, sum c, sum d] */
INLINE int32x4_t sum4(int32x4_t a, int32x4_t b, int32x4_t c, int32x4_t d)
{
	return vpaddq_s32(vpaddq_s32(a, b), vpaddq_s32(c, d));
}

/* f16x4: four F16 scales widened (exact, as pm_half_to_float for every
 * finite or infinite value; a signalling NaN comes out quiet) */
INLINE float32x4_t f16x4(const uint16_t h[4])
{
	return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(h)));
}

/*
 * PASS: one pass of rn activation rows (x rows r0 .. r0+rn-1) over the
 * TILE_M weight rows at row[0..3], writing out rows r0.. at column m,
 * keep columns (TILE_M for a whole tile). DOT(wl, wh, xl, xh) gives the
 * int32 lanes of one block's dot. Expanded once per (type, dot, rn) by
 * the functions below.
 */
#define PASS_BODY(DOT)                                                                                  \
	int nb = w->cols / 32, bb = pm_qmm_32_block_bytes(type);                                       \
	int mn = type == PM_TYPE_Q4_1 || type == PM_TYPE_Q5_1;                                         \
	float32x4_t acc[PASS_N];                                                                        \
	const pm_act32 *xr[PASS_N];                                                                     \
	for (int r = 0; r < rn; r++) {                                                                  \
		acc[r] = vdupq_n_f32(0);                                                                \
		xr[r] = (const pm_act32 *)((const char *)xq + (size_t)(r0 + r) * xs);                   \
	}                                                                                               \
	for (int b = 0; b < nb; b++) {                                                                  \
		int8x16_t wl[TILE_M], wh[TILE_M];                                                       \
		uint16_t dh[TILE_M], mh[TILE_M];                                                        \
		for (int i = 0; i < TILE_M; i++)                                                        \
			decode(type, row[i] + (size_t)b * bb, &wl[i], &wh[i], &dh[i], &mh[i]);          \
		float32x4_t dw = f16x4(dh), mw = mn ? f16x4(mh) : vdupq_n_f32(0);                       \
		for (int r = 0; r < rn; r++) {                                                          \
			const pm_act32 *a = xr[r] + b;                                                  \
			int8x16_t xl = vld1q_s8(a->q), xh = vld1q_s8(a->q + 16);                        \
			int32x4_t si = sum4(DOT(wl[0], wh[0], xl, xh), DOT(wl[1], wh[1], xl, xh),       \
					    DOT(wl[2], wh[2], xl, xh), DOT(wl[3], wh[3], xl, xh));      \
			float32x4_t s = vmulq_f32(dw, vdupq_n_f32(a->d));                               \
			acc[r] = vaddq_f32(acc[r], vmulq_f32(s, vcvtq_f32_s32(si)));                     \
			if (mn)                                                                         \
				acc[r] = vaddq_f32(acc[r], vmulq_f32(mw, vdupq_n_f32(a->s)));           \
		}                                                                                       \
	}                                                                                               \
	for (int r = 0; r < rn; r++) {                                                                  \
		float *o = out + (size_t)(r0 + r) * ldo + m;                                            \
		if (keep == TILE_M) {                                                                   \
			vst1q_f32(o, acc[r]);                                                           \
		} else {                                                                                \
			float t[TILE_M];                                                                \
			vst1q_f32(t, acc[r]);                                                           \
			memcpy(o, t, (size_t)keep * sizeof(float));                                     \
		}                                                                                       \
	}

#define PASS_ARGS                                                                                       \
	float *out, size_t ldo, const void *xq, size_t xs, const pm_weight *w, const uint8_t *const row[TILE_M], \
		int m, int keep, int r0, uint32_t type, int rn

INLINE void pass_mull(PASS_ARGS)
{
	PASS_BODY(lanes_mull)
}

/* lanes_dot: as lanes_mull with the dot-product extension's vdotq_s32 */
static inline __attribute__((always_inline, target("arch=armv8.2-a+dotprod"))) int32x4_t lanes_dot(int8x16_t wl, int8x16_t wh,
										      int8x16_t xl, int8x16_t xh)
{
	return vdotq_s32(vdotq_s32(vdupq_n_s32(0), wl, xl), wh, xh);
}

static inline __attribute__((always_inline, target("arch=armv8.2-a+dotprod"))) void pass_dot(PASS_ARGS)
{
	PASS_BODY(lanes_dot)
}

/*
 * QMM: the kernel of one type and dot flavour: tiles of TILE_M weight
 * rows, and for each, passes of up to PASS_N activation rows, each pass
 * body expanded for its row count so the accumulators stay in registers.
 */
#define QMM(name, TYPE, PASS, ATTR)                                                                          \
	static ATTR void name(float *out, size_t ldo, const void *xq, size_t xs, const pm_weight *w, int n,   \
			      int m0, int m1)                                                                \
	{                                                                                                    \
		for (int m = m0; m < m1; m += TILE_M) {                                                      \
			int keep = m1 - m < TILE_M ? m1 - m : TILE_M;                                        \
			const uint8_t *row[TILE_M];                                                          \
			for (int i = 0; i < TILE_M; i++)                                                     \
				row[i] = pm_weight_row(w, m + (i < keep ? i : keep - 1));                    \
			for (int r0 = 0; r0 < n; r0 += PASS_N) {                                             \
				switch (n - r0 < PASS_N ? n - r0 : PASS_N) {                                 \
				case 1:                                                                      \
					PASS(out, ldo, xq, xs, w, row, m, keep, r0, TYPE, 1);                \
					break;                                                               \
				case 2:                                                                      \
					PASS(out, ldo, xq, xs, w, row, m, keep, r0, TYPE, 2);                \
					break;                                                               \
				case 3:                                                                      \
					PASS(out, ldo, xq, xs, w, row, m, keep, r0, TYPE, 3);                \
					break;                                                               \
				default:                                                                     \
					PASS(out, ldo, xq, xs, w, row, m, keep, r0, TYPE, 4);                \
					break;                                                               \
				}                                                                            \
			}                                                                                    \
		}                                                                                            \
	}

#define DOTPROD __attribute__((target("arch=armv8.2-a+dotprod")))
QMM(qmm_q8_0_mull, PM_TYPE_Q8_0, pass_mull, )
QMM(qmm_q4_0_mull, PM_TYPE_Q4_0, pass_mull, )
QMM(qmm_q4_1_mull, PM_TYPE_Q4_1, pass_mull, )
QMM(qmm_q5_0_mull, PM_TYPE_Q5_0, pass_mull, )
QMM(qmm_q5_1_mull, PM_TYPE_Q5_1, pass_mull, )
QMM(qmm_q8_0_dot, PM_TYPE_Q8_0, pass_dot, DOTPROD)
QMM(qmm_q4_0_dot, PM_TYPE_Q4_0, pass_dot, DOTPROD)
QMM(qmm_q4_1_dot, PM_TYPE_Q4_1, pass_dot, DOTPROD)
QMM(qmm_q5_0_dot, PM_TYPE_Q5_0, pass_dot, DOTPROD)
QMM(qmm_q5_1_dot, PM_TYPE_Q5_1, pass_dot, DOTPROD)

int pm_cpu_has_neon_dot(void)
{
	return (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
}

pm_qmm pm_qmm_32_neon(uint32_t type, int dot)
{
	if (dot < 0)
		dot = pm_cpu_has_neon_dot();
	if (dot && !pm_cpu_has_neon_dot())
		return (pm_qmm){0, 0};
	pm_qmm_fn fn = NULL;
	switch (type) {
	case PM_TYPE_Q8_0:
		fn = dot ? qmm_q8_0_dot : qmm_q8_0_mull;
		break;
	case PM_TYPE_Q4_0:
		fn = dot ? qmm_q4_0_dot : qmm_q4_0_mull;
		break;
	case PM_TYPE_Q4_1:
		fn = dot ? qmm_q4_1_dot : qmm_q4_1_mull;
		break;
	case PM_TYPE_Q5_0:
		fn = dot ? qmm_q5_0_dot : qmm_q5_0_mull;
		break;
	case PM_TYPE_Q5_1:
		fn = dot ? qmm_q5_1_dot : qmm_q5_1_mull;
		break;
	}
	return fn ? (pm_qmm){32, fn} : (pm_qmm){0, 0};
}

#else /* not AArch64: no NEON kernels */

int pm_cpu_has_neon_dot(void)
{
	return 0;
}

pm_qmm pm_qmm_32_neon(uint32_t type, int dot)
{
	(void)type;
	(void)dot;
	return (pm_qmm){0, 0};
}

#endif
