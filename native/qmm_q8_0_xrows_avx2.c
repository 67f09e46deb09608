/*
 * qmm_q8_0_xrows_avx2.c: the AVX2 batch kernel of Q8_0 for small batches
 * (up to PM_Q8_XROWS_MAXN activation rows: batched decode; qmm_32_avx2.c
 * hands it those pm_q8_xrows_takes picks), with the activation rows, not
 * the weight rows, interleaved in the lanes.
 *
 * qmm_32_avx2.c's tile interleaves 8 weight rows per block (a transpose,
 * the codes' absolute values, 16 stores) and shares that work among the
 * batch's rows. At 8 rows it is not shared enough: on smollm2-135m Q8_0
 * at batch 8 a third of the kernel's time went to the interleave and the
 * burst of next-tile prefetches that comes with it. Here lane i of a
 * register holds activation row i (8 rows a set, up to 2 sets), so the
 * activations are interleaved once per call, and each weight row is read
 * as it lies in memory: 4 of its codes broadcast per group, against every
 * row of the set at once. One weight row's outputs for 8 activation rows
 * are then the 8 lanes of one accumulator.
 *
 * The integer step is qmm_32_avx2.c's sign trick with the roles of its
 * operands the same (the weight codes' |q| unsigned, the activation codes
 * given q's signs): a weight code may be -128, whose negation does not
 * fit a signed byte, while activation codes are within +-127. |q| of a
 * weight row's blocks is taken once per row into a small buffer in L1
 * (and its scales converted to float), so the inner step per group and
 * weight row is two 32-bit broadcasts, vpsignb, vpmaddubsw, vpmaddwd and
 * an add (one set; two sets: see below). S gets 128 * (the activation
 * block's code sum), so it is the sum over (q + 128) * q_x that every
 * other build takes, and the float steps per block are qmm_32_x86.h's,
 * lane by lane: y = fmadd(d_w * d_x,
 * float(S), y), z = fmadd(-128 * d_w, s_x, z), out y + z. z is taken as
 * fmadd(d_w, -128 * s_x, z), with -128 * s_x made once per call: both
 * products are exact powers-of-two scalings of the same d_w * s_x, which an
 * fmadd does not round, so z is the same bits for one multiply fewer per
 * block and weight row (2.7 % on smollm2-135m Q8_0 at batch 8, Zen 4,
 * forced AVX2). Each output is therefore bitwise what the decode path and
 * the other tiles give, for any n, padding lane or split (test_quant.c
 * checks it). Padding lanes (rows past n in the last set) hold zero codes
 * and scales and are not stored.
 *
 * A batch of one set (8 rows: pm_q8_xrows_takes gives it 8 only) takes
 * 64-bit groups: a register holds 8 codes of 4 rows, so a block is 4
 * broadcasts of |q| and 4 of q (not 8 and 8), and a vphaddd per block
 * adds each row's two dwords (leaving the rows in xr_lane's order, which
 * the activations' d, s and c are stored in). Zen 4, forced AVX2: 3 %
 * faster at batch 8 (smollm2-135m and default Q8_0, alternating pmbench).
 * Two sets keep the 32-bit groups: there the 64-bit ones measured 2-5 %
 * slower (their accumulators spill).
 *
 * Two sets also take another integer step: wrow splits each weight code
 * into the nibbles of q + 128 (both 0 .. 15, unsigned), and a group is
 * two vpmaddubsw of those broadcasts against the activation codes as
 * they are, summed in int16 over the block's 8 groups (a pair reaches
 * 2 * 15 * 127, so 8 groups stay within 30480), then 16 * high + low by
 * two vpmaddwd. That is the sum over (q + 128) * q_x itself, the same
 * integer as the sign trick's (no code sum to add), for 2 multiplies a
 * group and set against 3. Zen 4, forced AVX2: 6.5 % fewer cycles per
 * block and row at 14 and 16 rows (C harness), batch 16 decode 1.053x
 * (smollm2-135m Q8_0) and 1.072x (default Q8_0) in alternating pmbench.
 * One set keeps the sign trick: there the nibbles measured no faster
 * (the 64-bit groups' kernel is not bound by its multiplies alone).
 *
 * The interleaved activations live on the stack (PM_Q8_XROWS_MAXNB blocks
 * of up to 16 rows, 44 KiB, and a weight row's codes, 4 KiB as nibbles);
 * wider rows take qmm_32_avx2.c's tile.
 */
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#include <string.h>

#include "actquant.h"
#include "qmm_q8_0_xrows_avx2.h"
#include "qmm_transpose.h"

#define XR_INLINE static inline __attribute__((always_inline, target("avx2,fma,f16c")))
#define XR_UNROLL _Pragma("GCC unroll 8")
/* XR_PIN keeps v in a register as written: without it gcc folds a load
 * into each of its two uses, and reassociates the int16 sums into trees
 * whose partial sums spill */
#define XR_PIN(v) __asm__("" : "+x"(v))

enum { QB = 34, PF = 8, SETS = PM_Q8_XROWS_MAXN / 8, NBMAX = PM_Q8_XROWS_MAXNB };

/* the row in lane p of a set's d, s and c (and of its outputs): in the
 * 32-bit groups lane i is row i; in the 64-bit groups vphaddd leaves the
 * rows in this order */
static const int xr_lane[2][8] = {{0, 1, 2, 3, 4, 5, 6, 7}, {0, 1, 4, 5, 2, 3, 6, 7}};

/* the activations of one call, interleaved. 32-bit groups (two sets):
 * q[b][s][j] holds codes 4j .. 4j+3 of row 8s + i in lane i. 64-bit
 * groups (one set): q[b][0][2g + h] holds codes 8g .. 8g+7 of row 4h + k
 * in 64-bit lane k. */
typedef struct {
	__m256i q[NBMAX][SETS][8];
	__m256 d[NBMAX][SETS];	  /* the rows' scales, in xr_lane's order */
	__m256 s[NBMAX][SETS];	  /* -128 * d * sum(q) */
	__m256i c[NBMAX][SETS];	  /* 128 * sum(q) (64-bit groups only) */
} xrows;

typedef int64_t __attribute__((may_alias, aligned(1))) xr_i64;
typedef int32_t __attribute__((may_alias, aligned(1))) xr_i32;

/* the 4 x 4 transpose of 64-bit words: o[2g] holds word g of a[k] in lane k */
XR_INLINE void transpose4x64(__m256i *o, const __m256i *a)
{
	__m256i t0 = _mm256_unpacklo_epi64(a[0], a[1]), t1 = _mm256_unpackhi_epi64(a[0], a[1]);
	__m256i t2 = _mm256_unpacklo_epi64(a[2], a[3]), t3 = _mm256_unpackhi_epi64(a[2], a[3]);
	o[0] = _mm256_permute2x128_si256(t0, t2, 0x20);
	o[2] = _mm256_permute2x128_si256(t1, t3, 0x20);
	o[4] = _mm256_permute2x128_si256(t0, t2, 0x31);
	o[6] = _mm256_permute2x128_si256(t1, t3, 0x31);
}

/* interleave: the n rows at xq (xs bytes apart; nb blocks each) into x,
 * in 64-bit groups when W (then n <= 8) */
XR_INLINE void interleave(const int W, xrows *x, const char *xq, size_t xs, int n, int nb, int sets)
{
	const __m256i one8 = _mm256_set1_epi8(1), ones = _mm256_set1_epi16(1);
	for (int b = 0; b < nb; b++)
		for (int s = 0; s < sets; s++) {
			__m256i u[8];
			float d[8], sx[8];
			XR_UNROLL for (int i = 0; i < 8; i++) {
				int r = 8 * s + i;
				u[i] = _mm256_setzero_si256();
				if (r < n) {
					const pm_act32 *a = (const pm_act32 *)(xq + (size_t)r * xs) + b;
					u[i] = _mm256_loadu_si256((const __m256i *)a->q);
				}
			}
			XR_UNROLL for (int p = 0; p < 8; p++) {
				int r = 8 * s + xr_lane[W][p];
				d[p] = sx[p] = 0.0f;
				if (r < n) {
					const pm_act32 *a = (const pm_act32 *)(xq + (size_t)r * xs) + b;
					d[p] = a->d;
					sx[p] = a->s;
				}
			}
			/* each row's code sum: 8 groups of 4 codes (or 4 of 8
			 * per half), at most 2 * 127 per int16 and group, so
			 * int16 holds it */
			if (W) {
				transpose4x64(x->q[b][s], u);
				transpose4x64(x->q[b][s] + 1, u + 4);
				__m256i t[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
				XR_UNROLL for (int j = 0; j < 8; j++) {
					__m256i c = _mm256_maddubs_epi16(one8, x->q[b][s][j]);
					t[j & 1] = _mm256_add_epi16(t[j & 1], c);
				}
				__m256i c0 = _mm256_madd_epi16(t[0], ones), c1 = _mm256_madd_epi16(t[1], ones);
				x->c[b][s] = _mm256_slli_epi32(_mm256_hadd_epi32(c0, c1), 7);
			} else {
				/* (the nibbles' S needs no code sum: isum) */
				pm_transpose8x32(x->q[b][s], u);
			}
			x->d[b][s] = _mm256_loadu_ps(d);
			x->s[b][s] = _mm256_mul_ps(_mm256_loadu_ps(sx), _mm256_set1_ps(-128.0f));
		}
}

/* wrow: weight row p's scales d_w as floats into dw, and its codes into
 * a: with W (64-bit groups) |q| per block (32 bytes a block); without,
 * the nibbles of q + 128 (a[2b] the low, a[2b + 1] the high: 0 .. 15) */
XR_INLINE void wrow(const int W, __m256i *a, float *dw, const uint8_t *p, int nb)
{
	const __m256i bias = _mm256_set1_epi8((char)0x80), lo = _mm256_set1_epi8(0x0f);
	for (int b = 0; b < nb; b++) {
		uint16_t h;
		memcpy(&h, p + (size_t)b * QB, 2);
		dw[b] = _cvtsh_ss(h);
		__m256i q = _mm256_loadu_si256((const __m256i *)(p + (size_t)b * QB + 2));
		if (W) {
			a[b] = _mm256_abs_epi8(q);
		} else {
			__m256i u = _mm256_xor_si256(q, bias);
			a[2 * b] = _mm256_and_si256(u, lo);
			a[2 * b + 1] = _mm256_and_si256(_mm256_srli_epi16(u, 4), lo);
		}
	}
}

/* isum: one weight row's S for the activation rows of block b, W and S as
 * in row; acc[s] gets set s's, in xr_lane[W]'s order */
XR_INLINE void isum(const int W, const int S, __m256i *acc, const xrows *x, int b, const uint8_t *ab,
		    const uint8_t *qb)
{
	const __m256i ones = _mm256_set1_epi16(1);
	if (W) { /* 8 codes a broadcast, 4 rows a register */
		__m256i h[2];
		XR_UNROLL for (int g = 0; g < 4; g++) {
			__m256i a = _mm256_set1_epi64x(*(const xr_i64 *)(ab + 8 * g));
			__m256i q = _mm256_set1_epi64x(*(const xr_i64 *)(qb + 8 * g));
			XR_UNROLL for (int k = 0; k < 2; k++) {
				__m256i sx = _mm256_sign_epi8(_mm256_load_si256(&x->q[b][0][2 * g + k]), q);
				__m256i t = _mm256_madd_epi16(_mm256_maddubs_epi16(a, sx), ones);
				h[k] = g ? _mm256_add_epi32(h[k], t) : t;
			}
		}
		acc[0] = _mm256_add_epi32(_mm256_hadd_epi32(h[0], h[1]), x->c[b][0]);
		return;
	}
	/* 32-bit groups: S = 16 * (high nibbles . x) + (low nibbles . x),
	 * which is the sum over (q + 128) * q_x itself; a nibble's pair
	 * reaches 2 * 15 * 127, so the 8 groups add in int16 (30480) */
	const __m256i sixteen = _mm256_set1_epi16(16);
	__m256i pl[SETS], ph[SETS];
	XR_UNROLL for (int j = 0; j < 8; j++) {
		__m256i al = _mm256_set1_epi32(*(const xr_i32 *)(ab + 4 * j));
		__m256i ah = _mm256_set1_epi32(*(const xr_i32 *)(ab + 32 + 4 * j));
		XR_UNROLL for (int s = 0; s < S; s++) {
			__m256i xv = _mm256_load_si256(&x->q[b][s][j]);
			XR_PIN(xv);
			__m256i l = _mm256_maddubs_epi16(al, xv), h = _mm256_maddubs_epi16(ah, xv);
			pl[s] = j ? _mm256_add_epi16(pl[s], l) : l;
			ph[s] = j ? _mm256_add_epi16(ph[s], h) : h;
			XR_PIN(pl[s]);
			XR_PIN(ph[s]);
		}
	}
	XR_UNROLL for (int s = 0; s < S; s++)
		acc[s] = _mm256_add_epi32(_mm256_madd_epi16(ph[s], sixteen), _mm256_madd_epi16(pl[s], ones));
}

/* row: the outputs of weight row p (the next rows rb bytes apart) for the
 * S sets of 8 activation rows (n in all), row r's at out[r * ldo], with
 * the activations in 64-bit groups when W (then S = 1); wa and dw are the
 * row's buffers (wrow). One weight row at a time: two rows a step (sharing
 * the activation loads) measured no faster, as gcc then kept the float
 * accumulators on the stack. The row PF rows ahead is prefetched block by
 * block (without it a third of the time went to waiting for the row's
 * bytes in wrow; 8 rows measured faster than 2 or 4, no slower than 16 or
 * 32). */
XR_INLINE void row(const int W, const int S, float *out, size_t ldo, const xrows *x, const uint8_t *p, size_t rb,
		   int n, int nb, __m256i *wa, float *dw)
{
	wrow(W, wa, dw, p, nb);
	__m256 y[SETS], z[SETS];
	XR_UNROLL for (int s = 0; s < S; s++)
		y[s] = z[s] = _mm256_setzero_ps();
	for (int b = 0; b < nb; b++) {
		__m256i acc[SETS];
		const uint8_t *qb = p + (size_t)b * QB + 2;
		_mm_prefetch((const char *)qb + PF * rb, _MM_HINT_T0);
		isum(W, S, acc, x, b, (const uint8_t *)&wa[W ? b : 2 * b], qb);
		__m256 d = _mm256_set1_ps(dw[b]);
		XR_UNROLL for (int s = 0; s < S; s++) {
			y[s] = _mm256_fmadd_ps(_mm256_mul_ps(d, x->d[b][s]), _mm256_cvtepi32_ps(acc[s]), y[s]);
			z[s] = _mm256_fmadd_ps(d, x->s[b][s], z[s]);
		}
	}
	XR_UNROLL for (int s = 0; s < S; s++) {
		float v[8];
		_mm256_storeu_ps(v, _mm256_add_ps(y[s], z[s]));
		for (int i = 0; i < 8; i++)
			if (8 * s + xr_lane[W][i] < n)
				out[(size_t)(8 * s + xr_lane[W][i]) * ldo] = v[i];
	}
}

__attribute__((target("avx2,fma,f16c"))) void pm_qmm_q8_0_xrows_avx2(float *out, size_t ldo, const void *xq,
								      size_t xs, const pm_weight *w, int n, int m0,
								      int m1)
{
	int nb = w->cols / 32, sets = (n + 7) / 8;
	size_t rb = w->row_bytes;
	xrows x;
	__m256i wa[2 * NBMAX];
	float dw[NBMAX];
	if (sets == 1) {
		interleave(1, &x, xq, xs, n, nb, 1);
		for (int m = m0; m < m1; m++)
			row(1, 1, out + m, ldo, &x, pm_weight_row(w, m), rb, n, nb, wa, dw);
	} else {
		interleave(0, &x, xq, xs, n, nb, sets);
		for (int m = m0; m < m1; m++)
			row(0, 2, out + m, ldo, &x, pm_weight_row(w, m), rb, n, nb, wa, dw);
	}
}
#else
typedef int pm_qmm_q8_0_xrows_empty; /* ISO C wants a declaration */
#endif
