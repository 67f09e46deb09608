/*
 * kernels.c: portable and AVX2+FMA kernels (see kernels.h for the
 * batch-invariance rule both sets keep).
 */
#include "kernels.h"
#include "mm_float_neon.h"

#include <math.h>
#include <string.h>

/* ----------------------------------------------------------------------------
 * portable kernels: plain C with the same 8-lane structure as the AVX2 set
 */

/* dot8 is the portable dot product: 8 lane sums over k/8 chunks in order,
 * a tail chunk, then the reduction tree every kernel uses. */
static float dot8(const float *a, const float *b, int k)
{
	float l[8] = {0};
	int kv = k & ~7;
	for (int i = 0; i < kv; i += 8)
		for (int j = 0; j < 8; j++)
			l[j] += a[i + j] * b[i + j];
	for (int j = 0; j < (k & 7); j++)
		l[j] += a[kv + j] * b[kv + j];
	return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}

static void matmul_portable(float *out, size_t ldo, const float *x, const float *w, int n, int k,
			    int m0, int m1)
{
	/* Tiles of 4 weight rows stay in cache while every row of x passes. */
	for (int mt = m0; mt < m1; mt += 4) {
		int me = mt + 4 < m1 ? mt + 4 : m1;
		for (int r = 0; r < n; r++) {
			const float *xr = x + (size_t)r * k;
			for (int m = mt; m < me; m++)
				out[(size_t)r * ldo + m] = dot8(xr, w + (size_t)m * k, k);
		}
	}
}

static void rmsnorm_portable(float *out, const float *x, const float *w, int n, float eps)
{
	float ss = dot8(x, x, n);
	float inv = 1.0f / sqrtf(ss / (float)n + eps);
	for (int i = 0; i < n; i++)
		out[i] = x[i] * inv * w[i];
}

static void swiglu_portable(float *g, const float *u, int n)
{
	for (int i = 0; i < n; i++) {
		float v = g[i];
		g[i] = v / (1.0f + expf(-v)) * u[i];
	}
}

static void add_portable(float *x, const float *o, int n)
{
	for (int i = 0; i < n; i++)
		x[i] += o[i];
}

/* attend_row: one row of attend_portable (n positions, g heads, scores in scratch[g][n]). */
static void attend_row(float *out, const float *q, int g, int hd, const float *kbase,
		       const float *vbase, const int32_t *table, int bs, size_t stride, int n,
		       float scale, float *scratch)
{
	/* scores[h][t] = q_h . k_t * scale */
	for (int t = 0, b = 0; t < n; b++) {
		size_t blk = (size_t)table[b] * (size_t)bs;
		for (int o = 0; o < bs && t < n; o++, t++) {
			const float *kr = kbase + (blk + (size_t)o) * stride;
			for (int h = 0; h < g; h++)
				scratch[(size_t)h * n + t] = dot8(q + (size_t)h * hd, kr, hd) * scale;
		}
	}
	for (int h = 0; h < g; h++) {
		float *s = scratch + (size_t)h * n;
		float mx = s[0];
		for (int t = 1; t < n; t++)
			mx = s[t] > mx ? s[t] : mx;
		float l[8] = {0};
		for (int t = 0; t < n; t++) {
			s[t] = expf(s[t] - mx);
			l[t & 7] += s[t];
		}
		float sum = ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
		float inv = 1.0f / sum;
		for (int t = 0; t < n; t++)
			s[t] *= inv;
		float *oh = out + (size_t)h * hd;
		memset(oh, 0, (size_t)hd * sizeof(float));
		for (int t = 0, b = 0; t < n; b++) {
			size_t blk = (size_t)table[b] * (size_t)bs;
			for (int o = 0; o < bs && t < n; o++, t++) {
				const float *vr = vbase + (blk + (size_t)o) * stride;
				float p = s[t];
				for (int i = 0; i < hd; i++)
					oh[i] += p * vr[i];
			}
		}
	}
}

static void attend_portable(float *out, const float *q, size_t ldq, int nr, int g, int hd,
			    const float *kbase, const float *vbase, const int32_t *table, int bs,
			    size_t stride, int n, float scale, float *scratch,
			    const pm_attend_next *next)
{
	(void)next;
	for (int j = 0; j < nr; j++)
		attend_row(out + (size_t)j * ldq, q + (size_t)j * ldq, g, hd, kbase, vbase, table, bs,
			   stride, n + j, scale, scratch);
}

const pm_kernels pm_kernels_portable = {
	.name = "portable",
	.matmul = matmul_portable,
	.rmsnorm = rmsnorm_portable,
	.swiglu = swiglu_portable,
	.add = add_portable,
	.attend = attend_portable,
};

/* ----------------------------------------------------------------------------
 * AVX2 + FMA kernels (x86-64 only; compiled per function, chosen at run time)
 */
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2,fma")))
#define AVX2_INLINE static inline __attribute__((always_inline, target("avx2,fma")))

/* Lanes j < rem are set: loads beyond the row never touch memory. */
static const int32_t tail_mask_tab[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};

AVX2_INLINE __m256i tail_mask(int rem)
{
	return _mm256_loadu_si256((const __m256i *)(tail_mask_tab + 8 - rem));
}

/* hsum4 reduces four accumulators, each by ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)). */
AVX2_INLINE __m128 hsum4(__m256 a, __m256 b, __m256 c, __m256 d)
{
	__m256 t0 = _mm256_hadd_ps(a, b);
	__m256 t1 = _mm256_hadd_ps(c, d);
	__m256 t2 = _mm256_hadd_ps(t0, t1);
	return _mm_add_ps(_mm256_castps256_ps128(t2), _mm256_extractf128_ps(t2, 1));
}

AVX2_INLINE float hsum1(__m256 a)
{
	__m256 z = _mm256_setzero_ps();
	return _mm_cvtss_f32(hsum4(a, z, z, z));
}

/* exp256 is Cephes' expf (as in avx_mathfun): range reduction by ln 2 and a
 * degree-5 polynomial; relative error ~1e-7 over the clamped range. */
AVX2_INLINE __m256 exp256(__m256 x)
{
	const __m256 one = _mm256_set1_ps(1.0f);
	x = _mm256_min_ps(x, _mm256_set1_ps(88.3762626647949f));
	x = _mm256_max_ps(x, _mm256_set1_ps(-88.3762626647949f));
	__m256 fx = _mm256_fmadd_ps(x, _mm256_set1_ps(1.44269504088896341f), _mm256_set1_ps(0.5f));
	fx = _mm256_floor_ps(fx);
	x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), x);
	x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(-2.12194440e-4f), x);
	__m256 z = _mm256_mul_ps(x, x);
	__m256 y = _mm256_set1_ps(1.9875691500e-4f);
	y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.3981999507e-3f));
	y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(8.3334519073e-3f));
	y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(4.1665795894e-2f));
	y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.6666665459e-1f));
	y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(5.0000001201e-1f));
	y = _mm256_fmadd_ps(y, z, x);
	y = _mm256_add_ps(y, one);
	__m256i e = _mm256_add_epi32(_mm256_cvttps_epi32(fx), _mm256_set1_epi32(127));
	e = _mm256_slli_epi32(e, 23);
	return _mm256_mul_ps(y, _mm256_castsi256_ps(e));
}

AVX2_INLINE float dot_avx2(const float *a, const float *b, int k)
{
	__m256 acc = _mm256_setzero_ps();
	int kv = k & ~7;
	for (int i = 0; i < kv; i += 8)
		acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc);
	if (k & 7) {
		__m256i mk = tail_mask(k & 7);
		acc = _mm256_fmadd_ps(_mm256_maskload_ps(a + kv, mk), _mm256_maskload_ps(b + kv, mk),
				      acc);
	}
	return hsum1(acc);
}

/*
 * Micro-kernels. Each accumulator a<r><j> is out[r][m+j]; every path feeds
 * it the same chunks in the same order (full chunks, then the masked tail),
 * so tile shape never changes a result.
 *
 * While a tile of 4 weight rows is used against the rows of x (one pass per
 * pair of rows), the next tile is prefetched into L2: pass p fetches npf of
 * its rows (pf, pf+k, ...), one cache line per 16 floats. Without this the
 * DRAM stream stalls at every tile and batch 8 runs at a third of the FMA
 * rate; prefetches are hints and never change a result.
 */
#define FMA(x, w, a) a = _mm256_fmadd_ps(x, w, a)
#define PREFETCH(pf, npf, k, i)                                                            \
	do {                                                                               \
		if (((i) & 15) == 0)                                                       \
			for (int p_ = 0; p_ < (npf); p_++)                                 \
				_mm_prefetch((const char *)((pf) + (size_t)p_ * (k) + (i)), \
					     _MM_HINT_T1);                                 \
	} while (0)

AVX2_INLINE void mm_2x4(float *o0, float *o1, const float *x0, const float *x1, const float *w0,
			int k, const float *pf, int npf)
{
	const float *w1 = w0 + k, *w2 = w1 + k, *w3 = w2 + k;
	__m256 a00 = _mm256_setzero_ps(), a01 = a00, a02 = a00, a03 = a00;
	__m256 a10 = a00, a11 = a00, a12 = a00, a13 = a00;
	int kv = k & ~7;
	for (int i = 0; i < kv; i += 8) {
		__m256 v0 = _mm256_loadu_ps(w0 + i), v1 = _mm256_loadu_ps(w1 + i);
		__m256 v2 = _mm256_loadu_ps(w2 + i), v3 = _mm256_loadu_ps(w3 + i);
		__m256 u = _mm256_loadu_ps(x0 + i);
		PREFETCH(pf, npf, k, i);
		FMA(u, v0, a00), FMA(u, v1, a01), FMA(u, v2, a02), FMA(u, v3, a03);
		u = _mm256_loadu_ps(x1 + i);
		FMA(u, v0, a10), FMA(u, v1, a11), FMA(u, v2, a12), FMA(u, v3, a13);
	}
	if (k & 7) {
		__m256i mk = tail_mask(k & 7);
		__m256 v0 = _mm256_maskload_ps(w0 + kv, mk), v1 = _mm256_maskload_ps(w1 + kv, mk);
		__m256 v2 = _mm256_maskload_ps(w2 + kv, mk), v3 = _mm256_maskload_ps(w3 + kv, mk);
		__m256 u = _mm256_maskload_ps(x0 + kv, mk);
		FMA(u, v0, a00), FMA(u, v1, a01), FMA(u, v2, a02), FMA(u, v3, a03);
		u = _mm256_maskload_ps(x1 + kv, mk);
		FMA(u, v0, a10), FMA(u, v1, a11), FMA(u, v2, a12), FMA(u, v3, a13);
	}
	_mm_storeu_ps(o0, hsum4(a00, a01, a02, a03));
	_mm_storeu_ps(o1, hsum4(a10, a11, a12, a13));
}

AVX2_INLINE void mm_3x4(float *o0, float *o1, float *o2, const float *x0, const float *x1,
			const float *x2, const float *w0, int k, const float *pf, int npf)
{
	const float *w1 = w0 + k, *w2 = w1 + k, *w3 = w2 + k;
	__m256 a00 = _mm256_setzero_ps(), a01 = a00, a02 = a00, a03 = a00;
	__m256 a10 = a00, a11 = a00, a12 = a00, a13 = a00;
	__m256 a20 = a00, a21 = a00, a22 = a00, a23 = a00;
	int kv = k & ~7;
	for (int i = 0; i < kv; i += 8) {
		__m256 v0 = _mm256_loadu_ps(w0 + i), v1 = _mm256_loadu_ps(w1 + i);
		__m256 v2 = _mm256_loadu_ps(w2 + i), v3 = _mm256_loadu_ps(w3 + i);
		__m256 u = _mm256_loadu_ps(x0 + i);
		PREFETCH(pf, npf, k, i);
		FMA(u, v0, a00), FMA(u, v1, a01), FMA(u, v2, a02), FMA(u, v3, a03);
		u = _mm256_loadu_ps(x1 + i);
		FMA(u, v0, a10), FMA(u, v1, a11), FMA(u, v2, a12), FMA(u, v3, a13);
		u = _mm256_loadu_ps(x2 + i);
		FMA(u, v0, a20), FMA(u, v1, a21), FMA(u, v2, a22), FMA(u, v3, a23);
	}
	if (k & 7) {
		__m256i mk = tail_mask(k & 7);
		__m256 v0 = _mm256_maskload_ps(w0 + kv, mk), v1 = _mm256_maskload_ps(w1 + kv, mk);
		__m256 v2 = _mm256_maskload_ps(w2 + kv, mk), v3 = _mm256_maskload_ps(w3 + kv, mk);
		__m256 u = _mm256_maskload_ps(x0 + kv, mk);
		FMA(u, v0, a00), FMA(u, v1, a01), FMA(u, v2, a02), FMA(u, v3, a03);
		u = _mm256_maskload_ps(x1 + kv, mk);
		FMA(u, v0, a10), FMA(u, v1, a11), FMA(u, v2, a12), FMA(u, v3, a13);
		u = _mm256_maskload_ps(x2 + kv, mk);
		FMA(u, v0, a20), FMA(u, v1, a21), FMA(u, v2, a22), FMA(u, v3, a23);
	}
	_mm_storeu_ps(o0, hsum4(a00, a01, a02, a03));
	_mm_storeu_ps(o1, hsum4(a10, a11, a12, a13));
	_mm_storeu_ps(o2, hsum4(a20, a21, a22, a23));
}

AVX2_INLINE void mm_1x4(float *o0, const float *x0, const float *w0, int k, const float *pf,
			int npf)
{
	const float *w1 = w0 + k, *w2 = w1 + k, *w3 = w2 + k;
	__m256 a00 = _mm256_setzero_ps(), a01 = a00, a02 = a00, a03 = a00;
	int kv = k & ~7;
	for (int i = 0; i < kv; i += 8) {
		__m256 u = _mm256_loadu_ps(x0 + i);
		PREFETCH(pf, npf, k, i);
		FMA(u, _mm256_loadu_ps(w0 + i), a00);
		FMA(u, _mm256_loadu_ps(w1 + i), a01);
		FMA(u, _mm256_loadu_ps(w2 + i), a02);
		FMA(u, _mm256_loadu_ps(w3 + i), a03);
	}
	if (k & 7) {
		__m256i mk = tail_mask(k & 7);
		__m256 u = _mm256_maskload_ps(x0 + kv, mk);
		FMA(u, _mm256_maskload_ps(w0 + kv, mk), a00);
		FMA(u, _mm256_maskload_ps(w1 + kv, mk), a01);
		FMA(u, _mm256_maskload_ps(w2 + kv, mk), a02);
		FMA(u, _mm256_maskload_ps(w3 + kv, mk), a03);
	}
	_mm_storeu_ps(o0, hsum4(a00, a01, a02, a03));
}

/*
 * Rows per pass over a weight tile. Passes of 2 rows, except that batches
 * of 3 and 5 rows start with a 3-row pass. While the weight stream (not the
 * FMA units) is the limit, a pass costs about the same for 1, 2 or 3 rows,
 * so 3 = 3 beats 2+1 (-12%) and 5 = 3+2 beats 2+2+1 (-11%; a batch-1
 * verify with k = 4). The 3-row kernel keeps 17 vectors live and spills, so
 * where FMAs are the limit it runs at ~65 GFLOP/s against ~100 for 2 rows
 * (6, 7, 8 and more rows lost 10-40% with it).
 */
static int pass_rows(int n, int left)
{
	if ((n == 3 || n == 5) && left >= 3)
		return 3;
	return left >= 2 ? 2 : 1;
}

static AVX2 void matmul_avx2(float *out, size_t ldo, const float *x, const float *w, int n, int k,
			     int m0, int m1)
{
	int passes = 0;
	for (int r = 0; r < n; r += pass_rows(n, n - r))
		passes++;
	int m = m0;
	for (; m + 4 <= m1; m += 4) {
		const float *wm = w + (size_t)m * k, *next = wm + (size_t)4 * k;
		int nnext = m1 - (m + 4) < 4 ? m1 - (m + 4) : 4; /* rows of the next tile */
		for (int r = 0, p = 0; r < n; p++) {
			/* pass p prefetches next-tile rows [a, b) */
			int a = passes >= nnext ? (p < nnext ? p : nnext) : p * nnext / passes;
			int b = passes >= nnext ? (p < nnext ? p + 1 : nnext) : (p + 1) * nnext / passes;
			const float *pf = next + (size_t)a * k;
			int rows = pass_rows(n, n - r);
			float *o = out + (size_t)r * ldo + m;
			const float *xr = x + (size_t)r * k;
			if (rows == 3)
				mm_3x4(o, o + ldo, o + 2 * ldo, xr, xr + k, xr + 2 * (size_t)k, wm, k, pf,
				       b - a);
			else if (rows == 2)
				mm_2x4(o, o + ldo, xr, xr + k, wm, k, pf, b - a);
			else
				mm_1x4(o, xr, wm, k, pf, b - a);
			r += rows;
		}
	}
	for (; m < m1; m++)
		for (int r = 0; r < n; r++)
			out[(size_t)r * ldo + m] = dot_avx2(x + (size_t)r * k, w + (size_t)m * k, k);
}

static AVX2 void rmsnorm_avx2(float *out, const float *x, const float *w, int n, float eps)
{
	float ss = dot_avx2(x, x, n);
	float inv = 1.0f / sqrtf(ss / (float)n + eps);
	__m256 vi = _mm256_set1_ps(inv);
	int nv = n & ~7;
	for (int i = 0; i < nv; i += 8)
		_mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), vi),
							_mm256_loadu_ps(w + i)));
	if (n & 7) {
		__m256i mk = tail_mask(n & 7);
		__m256 v = _mm256_mul_ps(_mm256_mul_ps(_mm256_maskload_ps(x + nv, mk), vi),
					 _mm256_maskload_ps(w + nv, mk));
		_mm256_maskstore_ps(out + nv, mk, v);
	}
}

AVX2_INLINE __m256 swiglu8(__m256 g, __m256 u)
{
	__m256 one = _mm256_set1_ps(1.0f);
	__m256 d = _mm256_add_ps(one, exp256(_mm256_sub_ps(_mm256_setzero_ps(), g)));
	return _mm256_mul_ps(_mm256_div_ps(g, d), u);
}

static AVX2 void swiglu_avx2(float *g, const float *u, int n)
{
	int nv = n & ~7;
	for (int i = 0; i < nv; i += 8)
		_mm256_storeu_ps(g + i, swiglu8(_mm256_loadu_ps(g + i), _mm256_loadu_ps(u + i)));
	if (n & 7) {
		__m256i mk = tail_mask(n & 7);
		__m256 v = swiglu8(_mm256_maskload_ps(g + nv, mk), _mm256_maskload_ps(u + nv, mk));
		_mm256_maskstore_ps(g + nv, mk, v);
	}
}

/* add_avx2: the residual add after a matmul (a scalar loop was 1.7 % of
 * an F16 prefill at two threads) */
static AVX2 void add_avx2(float *x, const float *o, int n)
{
	int nv = n & ~7;
	for (int i = 0; i < nv; i += 8)
		_mm256_storeu_ps(x + i, _mm256_add_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(o + i)));
	for (int i = nv; i < n; i++)
		x[i] += o[i];
}

/*
 * Attention, AVX2, for nr consecutive rows of one slot (a prefill chunk or
 * a verify draft; nr = 1 in decode) and the g query heads of each that
 * share one KV head: nr * g query vectors, in three stages over the slot's
 * paged cache:
 *   scores:  s[qi][t] = (q_qi . k_t) * scale in tiles of up to ATT_QT
 *            vectors x 4 keys, so a key comes from memory once for every
 *            row and head, and from L1 for the other tiles;
 *   softmax: p[qi][t] = exp(s[qi][t] - max) / sum in place, over the
 *            vector's own row length n + j;
 *   values:  out_qi = sum_t p[qi][t] v_t, a chunk of positions (at most
 *            one cache block, ATT_CHUNK) at a time for every vector: its
 *            value rows come into L1 once for every tile of G vectors x W
 *            column vectors (pv_tile), whose accumulators stay in
 *            registers across the chunk; then each row's last positions
 *            (n..n+j-1, which the rows before it do not see).
 * The rows of a slot lie in blocks anywhere in the cache, where the
 * hardware prefetcher loses them, so a cursor (kv_ahead) walks the key
 * rows, then the value rows, then the next call's key rows (when the
 * caller names it), ATT_AHEAD rows ahead of their use, and prefetches
 * each one into L2. A model that does not fit the last-level cache
 * streams its weights through it between two attentions, so the rows
 * come from memory: prefetched into L1, 16 rows ahead, the prefetches
 * stalled the cursor (a quarter of attend's samples on one instruction);
 * into L2, 32 ahead, smollm2-135m Q8_0 decode ran 1.024x at one
 * sequence and 1.056x at batch 8 (64 ahead: no faster; AMD EPYC Zen 4,
 * forced AVX2, alternating pmbench), the default model no slower.
 * Every score is one 8-lane FMA chain over hd in order (the masked tail
 * last) reduced by hsum4's tree; every output element is one FMA chain
 * over positions in order (kept in out between chunks: exact). So tile
 * and chunk shapes, and how many rows and heads share a call, never change
 * a result: it depends only on q, the cached rows and the row's length.
 *
 * Two copies of the code (attend_tile.h): one for 16 vector registers
 * (score tiles of 3 vectors, values tiles of up to 4 x 2), and one for CPUs
 * with AVX-512VL, compiled for its 32 registers (score tiles of 6 vectors:
 * 24 accumulators; values tiles of up to 6 x 4). Both use the same 256-bit
 * instructions, so they give the same bits (test_attend.c compares them).
 */
#define ATT_AHEAD 32
#define ATT_CHUNK 32 /* positions per values chunk, at most */

typedef struct {
	const float *kbase, *vbase;
	const int32_t *table;
	int bs, n, hd; /* n: positions the call reads */
	size_t stride;
	int t, b, o; /* next row: position t (block table[b], offset o), keys while t < n */
	const pm_attend_next *next; /* where the cursor goes once this call's rows are done */
} kv_ahead;

/*
 * att_split: n items in tiles of at most max: as few tiles as possible, of
 * sizes as equal as possible (the first extra tiles hold size + 1): 4 in
 * tiles of 3 are 2 + 2, not 3 + 1, since a 1-vector tile has too few
 * chains of FMAs to hide their latency.
 */
typedef struct {
	int tiles, size, extra;
} att_split;

static inline att_split att_split_of(int n, int max)
{
	int tiles = (n + max - 1) / max;
	return (att_split){tiles, n / tiles, n % tiles};
}

/* softmax_row: s[0..n) = exp(s - max) / sum in place. */
AVX2_INLINE void softmax_row(float *s, int n)
{
	int nv = n & ~7;
	__m256i mk = tail_mask(n & 7);
	__m256 mx = _mm256_set1_ps(-INFINITY);
	for (int t = 0; t < nv; t += 8)
		mx = _mm256_max_ps(mx, _mm256_loadu_ps(s + t));
	if (n & 7)
		mx = _mm256_blendv_ps(mx, _mm256_max_ps(mx, _mm256_maskload_ps(s + nv, mk)),
				      _mm256_castsi256_ps(mk));
	__m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
	m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
	m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
	__m256 vmx = _mm256_broadcastss_ps(m4), acc = _mm256_setzero_ps();
	for (int t = 0; t < nv; t += 8) {
		__m256 ev = exp256(_mm256_sub_ps(_mm256_loadu_ps(s + t), vmx));
		_mm256_storeu_ps(s + t, ev);
		acc = _mm256_add_ps(acc, ev);
	}
	if (n & 7) {
		__m256 ev = exp256(_mm256_sub_ps(_mm256_maskload_ps(s + nv, mk), vmx));
		ev = _mm256_and_ps(ev, _mm256_castsi256_ps(mk));
		_mm256_maskstore_ps(s + nv, mk, ev);
		acc = _mm256_add_ps(acc, ev);
	}
	__m256 inv = _mm256_set1_ps(1.0f / hsum1(acc));
	for (int t = 0; t < nv; t += 8)
		_mm256_storeu_ps(s + t, _mm256_mul_ps(_mm256_loadu_ps(s + t), inv));
	if (n & 7)
		_mm256_maskstore_ps(s + nv, mk, _mm256_mul_ps(_mm256_maskload_ps(s + nv, mk), inv));
}

#define ATT_TGT "avx2,fma"
#define ATT_SFX 16
#define ATT_QT 3
#define ATT_PG 4
#define ATT_WMAX(G) ((G) == 1 ? 8 : (G) == 2 ? 4 : 2)
#include "attend_tile.h"
#undef ATT_TGT
#undef ATT_SFX
#undef ATT_QT
#undef ATT_PG
#undef ATT_WMAX

#define ATT_TGT "avx2,fma,avx512f,avx512vl"
#define ATT_SFX 32
#define ATT_QT 6
#define ATT_PG 6
#define ATT_WMAX(G) ((G) <= 2 ? 8 : 4)
#include "attend_tile.h"
#undef ATT_TGT
#undef ATT_SFX
#undef ATT_QT
#undef ATT_PG
#undef ATT_WMAX

static const pm_kernels kernels_avx2 = {
	.name = "avx2",
	.regs = 16,
	.matmul = matmul_avx2,
	.rmsnorm = rmsnorm_avx2,
	.swiglu = swiglu_avx2,
	.add = add_avx2,
	.attend = attend_16,
};

/* kernels_avx2 with the attention compiled for AVX-512VL's 32 registers */
static const pm_kernels kernels_avx2_32 = {
	.name = "avx2",
	.regs = 32,
	.matmul = matmul_avx2,
	.rmsnorm = rmsnorm_avx2,
	.swiglu = swiglu_avx2,
	.add = add_avx2,
	.attend = attend_32,
};

int pm_cpu_has_avx512vl(void)
{
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl");
}

int pm_cpu_has_avx2(void)
{
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

const pm_kernels *pm_kernels_avx2(void)
{
	if (!pm_cpu_has_avx2())
		return NULL;
	return pm_cpu_has_avx512vl() ? &kernels_avx2_32 : &kernels_avx2;
}

pm_attend_fn pm_attend_avx2(int regs)
{
	if (!pm_cpu_has_avx2() || (regs == 32 && !pm_cpu_has_avx512vl()))
		return NULL;
	return regs == 32 ? attend_32 : regs == 16 ? attend_16 : pm_kernels_avx2()->attend;
}

int pm_cpu_has_isa(int isa)
{
	__builtin_cpu_init();
	switch (isa) {
	case PM_ISA_PORTABLE:
		return 1;
	case PM_ISA_AVX2:
		return pm_cpu_has_avx2() && __builtin_cpu_supports("f16c");
	case PM_ISA_AVXVNNI:
		return pm_cpu_has_isa(PM_ISA_AVX2) && __builtin_cpu_supports("avxvnni");
	case PM_ISA_AVX512VNNI:
		/* the 512-bit decode and batch paths want F and BW too: every
		 * AVX-512 VNNI CPU has them */
		return pm_cpu_has_isa(PM_ISA_AVX2) && __builtin_cpu_supports("avx512vnni") &&
		       __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512f") &&
		       __builtin_cpu_supports("avx512bw");
	}
	return 0;
}

const pm_kernels *pm_kernels_isa(int isa)
{
	if (!pm_cpu_has_isa(isa))
		return NULL;
	switch (isa) {
	case PM_ISA_PORTABLE:
		return &pm_kernels_portable;
	case PM_ISA_AVX512VNNI:
		return &kernels_avx2_32;
	default:
		return &kernels_avx2;
	}
}

#else /* not x86-64 GCC/Clang: portable, and NEON on AArch64 */

int pm_cpu_has_avx2(void)
{
	return 0;
}

int pm_cpu_has_avx512vl(void)
{
	return 0;
}

const pm_kernels *pm_kernels_avx2(void)
{
	return NULL;
}

pm_attend_fn pm_attend_avx2(int regs)
{
	(void)regs;
	return NULL;
}

int pm_cpu_has_isa(int isa)
{
#if defined(__aarch64__) && defined(__GNUC__)
	if (isa == PM_ISA_NEON)
		return 1; /* Advanced SIMD is baseline on AArch64 */
#endif
	return isa == PM_ISA_PORTABLE;
}

#if defined(__aarch64__) && defined(__GNUC__)
/* the NEON set: its matmul (mm_float_neon.c), portable's other kernels */
static const pm_kernels kernels_neon = {
	.name = "neon",
	.matmul = pm_matmul_neon,
	.rmsnorm = rmsnorm_portable,
	.swiglu = swiglu_portable,
	.add = add_portable,
	.attend = attend_portable,
};
#endif

const pm_kernels *pm_kernels_isa(int isa)
{
#if defined(__aarch64__) && defined(__GNUC__)
	if (isa == PM_ISA_NEON)
		return &kernels_neon;
#endif
	return isa == PM_ISA_PORTABLE ? &pm_kernels_portable : NULL;
}

#endif

const char *pm_isa_name(int isa)
{
	static const char *const names[PM_ISA_COUNT] = {"portable", "avx2", "avxvnni", "avx512vnni", "neon"};
	return isa >= 0 && isa < PM_ISA_COUNT ? names[isa] : "?";
}
