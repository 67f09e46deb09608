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
 *   - portable: one float accumulator, the two statements above per block,
 *     in block order;
 *   - AVX2: sumi_b is kept as 8 int32 lanes (lane l = the exact sum over
 *     elements 4l..4l+3; any way of computing them gives the same
 *     integers), and the block adds fmadd(d_w * d_x, float(lanes), acc) to
 *     one 8-lane accumulator, in block order; the min terms go to a
 *     separate float accumulator, fmadd(m_w, s_x, mt) in block order; at
 *     the end y = hsum(acc) + mt, hsum by the tree
 *     ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)) (kernels.c's hsum4).
 * The two sets agree closely, not bitwise (FMA rounds once).
 *
 * Speed: decode (n == 1) runs 4 weight rows at a time against the one
 * activation row, prefetching the next 4 rows as matvec.c does; batches
 * and prefill run tiles of 4 weight rows x 2 activation rows, each weight
 * block decoded once per tile and used for both rows, over chunks of
 * activation rows small enough to stay in L2 while the weights stream.
 */
#include "actquant.h"

#include <string.h>

/* ---- portable ---- */

static float f16at(const uint8_t *p)
{
	uint16_t h;
	memcpy(&h, p, 2);
	return pm_half_to_float(h);
}

/* block bytes per type */
static int block_bytes(uint32_t type)
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
	int nb = w->cols / 32, bb = block_bytes(w->type);
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

/* ---- AVX2 ---- */

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define HAVE_QMM_AVX2 1
#define AVX2 __attribute__((target("avx2,fma,f16c")))
#define AVX2_INLINE static inline __attribute__((always_inline, target("avx2,fma,f16c")))

enum { T8_0, T4_0, T4_1, T5_0, T5_1 };

/* the loops over a tile's 4 weight rows and R activation rows are unrolled
 * so the accumulators live in registers (-O2 does not unroll them) */
#define UNROLL _Pragma("GCC unroll 8")

AVX2_INLINE float hf(const uint8_t *p)
{
	uint16_t h;
	memcpy(&h, p, 2);
	return _cvtsh_ss(h);
}

AVX2_INLINE int tbytes(const int T)
{
	return T == T8_0 ? 34 : T == T4_0 ? 18 : T == T4_1 ? 20 : T == T5_0 ? 22 : 24;
}

AVX2_INLINE int has_min(const int T)
{
	return T == T4_1 || T == T5_1;
}

/* nib32: a block's 32 4-bit codes as bytes, element order */
AVX2_INLINE __m256i nib32(const uint8_t *qs)
{
	__m128i v = _mm_loadu_si128((const __m128i *)qs), m = _mm_set1_epi8(15);
	return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m), _mm_and_si128(v, m));
}

/* hi5: 16 in byte j where bit j of the little-endian qh[4] is set, else 0 */
AVX2_INLINE __m256i hi5(const uint8_t *p)
{
	const __m256i shuf = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2,
					      2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
	const __m256i bit = _mm256_set1_epi64x(0x8040201008040201);
	uint32_t qh;
	memcpy(&qh, p, 4);
	__m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)qh), shuf);
	v = _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
	return _mm256_and_si256(v, _mm256_set1_epi8(16));
}

/*
 * wcodes: the weight operand of maddubs for block b: |q_w| for Q8_0 (the
 * sign goes onto the activation), else the unsigned 4/5-bit codes.
 */
AVX2_INLINE __m256i wcodes(const int T, const uint8_t *b)
{
	switch (T) {
	case T8_0:
		return _mm256_abs_epi8(_mm256_loadu_si256((const __m256i *)(b + 2)));
	case T4_0:
		return nib32(b + 2);
	case T4_1:
		return nib32(b + 4);
	case T5_0:
		return _mm256_or_si256(nib32(b + 6), hi5(b + 2));
	default:
		return _mm256_or_si256(nib32(b + 8), hi5(b + 4));
	}
}

/* xbias: what Q4_0/Q5_0 subtract from maddubs(code, x) for their offset
 * (8 or 16 times each pair's sum of x) */
AVX2_INLINE __m256i xbias(const int T, __m256i x)
{
	if (T == T4_0)
		return _mm256_maddubs_epi16(_mm256_set1_epi8(8), x);
	if (T == T5_0)
		return _mm256_maddubs_epi16(_mm256_set1_epi8(16), x);
	return x;
}

/*
 * lanes: the 8 int32 lanes of sum q_w * q_x of one block (lane l over
 * elements 4l..4l+3). No int16 step saturates: Q8_0 pairs reach
 * 2 * 128 * 127; Q5_0's reach 2 * 31 * 127 before the bias and
 * 2 * 31 * 127 + 2 * 16 * 127 apart from it.
 */
AVX2_INLINE __m256i lanes(const int T, __m256i c, const uint8_t *b, __m256i x, __m256i xb)
{
	__m256i p;
	if (T == T8_0)
		p = _mm256_maddubs_epi16(c, _mm256_sign_epi8(x, _mm256_loadu_si256((const __m256i *)(b + 2))));
	else if (T == T4_0 || T == T5_0)
		p = _mm256_sub_epi16(_mm256_maddubs_epi16(c, x), xb);
	else
		p = _mm256_maddubs_epi16(c, x);
	return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

/* sum4: the 4 lane sums of a, b, c, d (exact: a block's sum fits easily) */
AVX2_INLINE __m128i sum4(__m256i a, __m256i b, __m256i c, __m256i d)
{
	__m256i t = _mm256_hadd_epi32(_mm256_hadd_epi32(a, b), _mm256_hadd_epi32(c, d));
	return _mm_add_epi32(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1));
}

/* h4: the F16 values at p0..p3 + off as 4 floats */
AVX2_INLINE __m128 h4(const uint8_t *const p[4], int off)
{
	uint16_t h[4];
	for (int i = 0; i < 4; i++)
		memcpy(&h[i], p[i] + off, 2);
	return _mm_cvtph_ps(_mm_setr_epi16((short)h[0], (short)h[1], (short)h[2], (short)h[3], 0, 0, 0, 0));
}

/*
 * tile: outputs of weight rows w .. w + nw - 1 (nw <= 4, rows rb bytes
 * apart) against R activation rows at xq (xs bytes apart), stored at
 * out[r*ldo + i]. A short tile repeats its last row and stores only nw
 * outputs, so every output takes the same operations. The 4 rows' outputs
 * for one activation row are the 4 lanes of one accumulator: per block,
 * y = fmadd(d_w * d_x, float(sumi), y), then for the types with a min
 * y = fmadd(m_w, s_x, y). PF != 0 prefetches the next 4 rows (the bytes
 * after these), a share per block.
 */
AVX2_INLINE void tile(const int T, const int R, const int PF, float *out, size_t ldo, const uint8_t *w,
		      size_t rb, int nw, const char *xq, size_t xs, int nb)
{
	const int BB = tbytes(T);
	const uint8_t *wr[4];
	UNROLL for (int i = 0; i < 4; i++)
		wr[i] = w + (size_t)(i < nw ? i : nw - 1) * rb;
	const char *nx = (const char *)w + 4 * rb;
	size_t share = (4 * rb + (size_t)nb - 1) / (size_t)nb;
	__m128 y[R];
	UNROLL for (int r = 0; r < R; r++)
		y[r] = _mm_setzero_ps();
	for (int j = 0; j < nb; j++) {
		if (PF)
			for (size_t o = 0; o < share; o += 64)
				_mm_prefetch(nx + (size_t)j * share + o, _MM_HINT_T0);
		const uint8_t *b[4];
		__m256i c[4];
		UNROLL for (int i = 0; i < 4; i++) {
			b[i] = wr[i] + (size_t)j * BB;
			c[i] = wcodes(T, b[i]);
		}
		__m128 dw = h4(b, 0), mw = _mm_setzero_ps();
		if (has_min(T))
			mw = h4(b, 2);
		UNROLL for (int r = 0; r < R; r++) {
			const pm_act32 *a = (const pm_act32 *)(xq + (size_t)r * xs) + j;
			__m256i x = _mm256_loadu_si256((const __m256i *)a->q), xb = xbias(T, x);
			__m256i l[4];
			UNROLL for (int i = 0; i < 4; i++)
				l[i] = lanes(T, c[i], b[i], x, xb);
			__m128 si = _mm_cvtepi32_ps(sum4(l[0], l[1], l[2], l[3]));
			y[r] = _mm_fmadd_ps(_mm_mul_ps(dw, _mm_set1_ps(a->d)), si, y[r]);
			if (has_min(T))
				y[r] = _mm_fmadd_ps(mw, _mm_set1_ps(a->s), y[r]);
		}
	}
	UNROLL for (int r = 0; r < R; r++) {
		float *o = out + (size_t)r * ldo;
		if (nw == 4) {
			_mm_storeu_ps(o, y[r]);
		} else {
			float v[4];
			_mm_storeu_ps(v, y[r]);
			for (int i = 0; i < nw; i++)
				o[i] = v[i];
		}
	}
}

/* activation rows per chunk of a batch: the chunk's quantized rows stay in
 * L2 while every weight tile passes over them */
enum { XCHUNK = 64 };

AVX2_INLINE void qmm_avx2(const int T, float *out, size_t ldo, const void *xq, size_t xs, const pm_weight *w,
			  int n, int m0, int m1)
{
	int nb = w->cols / 32;
	size_t rb = w->row_bytes;
	const char *x = xq;
	if (n == 1) {
		for (int m = m0; m < m1; m += 4)
			tile(T, 1, 1, out + m, ldo, pm_weight_row(w, m), rb, m1 - m < 4 ? m1 - m : 4, x, xs, nb);
		return;
	}
	for (int r0 = 0; r0 < n; r0 += XCHUNK) {
		int r1 = n - r0 < XCHUNK ? n : r0 + XCHUNK;
		for (int m = m0; m < m1; m += 4) {
			const uint8_t *wm = pm_weight_row(w, m);
			int nw = m1 - m < 4 ? m1 - m : 4, r = r0;
			for (; r + 2 <= r1; r += 2)
				tile(T, 2, 0, out + (size_t)r * ldo + m, ldo, wm, rb, nw, x + (size_t)r * xs, xs, nb);
			if (r < r1)
				tile(T, 1, 0, out + (size_t)r * ldo + m, ldo, wm, rb, nw, x + (size_t)r * xs, xs, nb);
		}
	}
}

#define QMM(NAME, T)                                                                             \
	static AVX2 void NAME(float *out, size_t ldo, const void *xq, size_t xs, const pm_weight *w, \
			      int n, int m0, int m1)                                             \
	{                                                                                        \
		qmm_avx2(T, out, ldo, xq, xs, w, n, m0, m1);                                     \
	}

QMM(qmm_q8_0, T8_0)
QMM(qmm_q4_0, T4_0)
QMM(qmm_q4_1, T4_1)
QMM(qmm_q5_0, T5_0)
QMM(qmm_q5_1, T5_1)
#endif

pm_qmm pm_qmm_32(uint32_t type, int avx2)
{
	if (block_bytes(type) == 0)
		return (pm_qmm){0, 0};
#ifdef HAVE_QMM_AVX2
	if (avx2) {
		switch (type) {
		case PM_TYPE_Q8_0:
			return (pm_qmm){32, qmm_q8_0};
		case PM_TYPE_Q4_0:
			return (pm_qmm){32, qmm_q4_0};
		case PM_TYPE_Q4_1:
			return (pm_qmm){32, qmm_q4_1};
		case PM_TYPE_Q5_0:
			return (pm_qmm){32, qmm_q5_0};
		case PM_TYPE_Q5_1:
			return (pm_qmm){32, qmm_q5_1};
		}
	}
#endif
	(void)avx2;
	return (pm_qmm){32, qmm_portable};
}
