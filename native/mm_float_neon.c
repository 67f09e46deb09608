/*
 * mm_float_neon.c: the float matrix products of AArch64's NEON path
 * (PM_ISA_NEON): pm_matmul_neon, the F32 matmul of its kernel set
 * (kernels.h's matmul), and pm_matmul_float_neon, the tile products of
 * F32, F16 and BF16 weights widened in registers. On other targets this
 * file compiles to stubs that return NULL.
 *
 * Bitwise the portable set (kernels.c's dot8, on the rows pm_dq_f16 /
 * pm_dq_bf16 would write): every output is 8 lane sums l[j] += x * w over
 * the k/8 chunks in order, each product and sum rounded (vmulq_f32, then
 * vaddq_f32: never fused), then the tail chunk, then the tree
 * ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)), which three vpaddq_f32 give for 4
 * weight rows at once. The tail's missing lanes are loaded as zeros: a
 * lane sum starts at +0 and so is never -0, and l + (+0) = l, so they
 * change nothing. As in qmm_32_neon.c, contraction must be off: the
 * #error refuses GCC's GNU modes. F16 widens exactly (vcvt_f32_f16; a
 * signalling NaN comes out quiet, which pm_half_to_float leaves), BF16 by
 * a 16-bit shift as pm_dq_bf16.
 *
 * Tiles: 4 weight rows (8 registers per 8-column chunk) against passes of
 * 2 activation rows (16 accumulators) or 1; a tile past m1 repeats the last
 * row and stores only the rows in [m0, m1). Compiled and tested under
 * qemu-aarch64 only (test_neon.c); its speed has never been measured.
 */
#include "mm_float_neon.h"

#if defined(__aarch64__) && defined(__GNUC__)

#if !defined(__clang__) && !defined(__STRICT_ANSI__)
#error "mm_float_neon.c: compile with -std=c11 (GCC's GNU modes contract a * b + c into FMA; the portable set does not)"
#endif
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

#include <arm_neon.h>
#include <string.h>

#define INLINE static inline __attribute__((always_inline))

enum { TILE_M = 4 };

/* load8: 8 weights of a row of type at column i as two float32x4 (n < 8:
 * the first n, zeros after). */
INLINE void load8(uint32_t type, const void *row, int i, int n, float32x4_t *lo, float32x4_t *hi)
{
	if (type == PM_TYPE_F32) {
		/* a weight's F32 rows need not be 4-byte aligned in the file */
		const uint8_t *p = (const uint8_t *)row + 4 * (size_t)i;
		if (n == 8) {
			*lo = vreinterpretq_f32_u8(vld1q_u8(p)), *hi = vreinterpretq_f32_u8(vld1q_u8(p + 16));
			return;
		}
		float t[8] = {0};
		memcpy(t, p, (size_t)n * sizeof(float));
		*lo = vld1q_f32(t), *hi = vld1q_f32(t + 4);
		return;
	}
	uint16x8_t h;
	const uint8_t *p = (const uint8_t *)row + 2 * (size_t)i;
	if (n == 8) {
		h = vreinterpretq_u16_u8(vld1q_u8(p));
	} else {
		uint16_t t[8] = {0};
		memcpy(t, p, (size_t)n * 2);
		h = vld1q_u16(t);
	}
	if (type == PM_TYPE_F16) {
		*lo = vcvt_f32_f16(vreinterpret_f16_u16(vget_low_u16(h)));
		*hi = vcvt_high_f32_f16(vreinterpretq_f16_u16(h));
	} else { /* BF16 */
		*lo = vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(h), 16));
		*hi = vreinterpretq_f32_u32(vshll_high_n_u16(h, 16));
	}
}

/* loadx: 8 activations at x + i (n < 8: zeros after the first n) */
INLINE void loadx(const float *x, int n, float32x4_t *lo, float32x4_t *hi)
{
	if (n == 8) {
		*lo = vld1q_f32(x), *hi = vld1q_f32(x + 4);
		return;
	}
	float t[8] = {0};
	memcpy(t, x, (size_t)n * sizeof(float));
	*lo = vld1q_f32(t), *hi = vld1q_f32(t + 4);
}

/* tree4: [dot of row 0, .., row 3] from each row's lane sums lo (l0..l3)
 * and hi (l4..l7), by dot8's tree. */
INLINE float32x4_t tree4(const float32x4_t lo[TILE_M], const float32x4_t hi[TILE_M])
{
	float32x4_t p0 = vpaddq_f32(lo[0], hi[0]), p1 = vpaddq_f32(lo[1], hi[1]);
	float32x4_t p2 = vpaddq_f32(lo[2], hi[2]), p3 = vpaddq_f32(lo[3], hi[3]);
	return vpaddq_f32(vpaddq_f32(p0, p1), vpaddq_f32(p2, p3));
}

INLINE void store(float *o, float32x4_t v, int keep)
{
	if (keep == TILE_M) {
		vst1q_f32(o, v);
		return;
	}
	float t[TILE_M];
	vst1q_f32(t, v);
	memcpy(o, t, (size_t)keep * sizeof(float));
}

/* pass: rn (1 or 2) rows of x, ldx floats apart, against the TILE_M rows
 * row[] of a weight of type with k columns; writes out[r*ldo + 0..keep). */
INLINE void pass(uint32_t type, float *out, size_t ldo, const float *x, size_t ldx, const void *const row[TILE_M],
		 int k, int keep, const int rn)
{
	float32x4_t lo[2][TILE_M], hi[2][TILE_M];
	for (int r = 0; r < rn; r++)
		for (int j = 0; j < TILE_M; j++)
			lo[r][j] = hi[r][j] = vdupq_n_f32(0);
	for (int i = 0; i < k; i += 8) {
		int n = k - i < 8 ? k - i : 8;
		float32x4_t wl[TILE_M], wh[TILE_M];
		for (int j = 0; j < TILE_M; j++)
			load8(type, row[j], i, n, &wl[j], &wh[j]);
		for (int r = 0; r < rn; r++) {
			float32x4_t xl, xh;
			loadx(x + (size_t)r * ldx + i, n, &xl, &xh);
			for (int j = 0; j < TILE_M; j++) {
				lo[r][j] = vaddq_f32(lo[r][j], vmulq_f32(xl, wl[j]));
				hi[r][j] = vaddq_f32(hi[r][j], vmulq_f32(xh, wh[j]));
			}
		}
	}
	for (int r = 0; r < rn; r++)
		store(out + (size_t)r * ldo, tree4(lo[r], hi[r]), keep);
}

/* product: out[r*ldo + m] = x[r] . row m for r < n, m in [m0, m1); row m
 * of w at w + m * row_bytes. */
INLINE void product(uint32_t type, float *out, size_t ldo, const float *x, const void *w, size_t row_bytes,
		    int n, int k, int m0, int m1)
{
	for (int m = m0; m < m1; m += TILE_M) {
		int keep = m1 - m < TILE_M ? m1 - m : TILE_M;
		const void *row[TILE_M];
		for (int j = 0; j < TILE_M; j++)
			row[j] = (const char *)w + (size_t)(m + (j < keep ? j : keep - 1)) * row_bytes;
		int r = 0;
		for (; r + 2 <= n; r += 2)
			pass(type, out + (size_t)r * ldo + m, ldo, x + (size_t)r * k, (size_t)k, row, k, keep, 2);
		if (r < n)
			pass(type, out + (size_t)r * ldo + m, ldo, x + (size_t)r * k, (size_t)k, row, k, keep, 1);
	}
}

void pm_matmul_neon(float *out, size_t ldo, const float *x, const float *w, int n, int k, int m0, int m1)
{
	product(PM_TYPE_F32, out, ldo, x, w, (size_t)k * sizeof(float), n, k, m0, m1);
}

static void tile_f32(float *out, size_t ldo, const float *x, const pm_weight *w, int n, int m0, int m1)
{
	product(PM_TYPE_F32, out, ldo, x, w->data, w->row_bytes, n, w->cols, m0, m1);
}

static void tile_f16(float *out, size_t ldo, const float *x, const pm_weight *w, int n, int m0, int m1)
{
	product(PM_TYPE_F16, out, ldo, x, w->data, w->row_bytes, n, w->cols, m0, m1);
}

static void tile_bf16(float *out, size_t ldo, const float *x, const pm_weight *w, int n, int m0, int m1)
{
	product(PM_TYPE_BF16, out, ldo, x, w->data, w->row_bytes, n, w->cols, m0, m1);
}

pm_neon_tile_fn pm_matmul_float_neon(uint32_t type)
{
	switch (type) {
	case PM_TYPE_F32:
		return tile_f32;
	case PM_TYPE_F16:
		return tile_f16;
	case PM_TYPE_BF16:
		return tile_bf16;
	}
	return NULL;
}

#else /* not AArch64 */

pm_neon_tile_fn pm_matmul_float_neon(uint32_t type)
{
	(void)type;
	return NULL;
}

#endif
