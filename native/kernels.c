/*
 * kernels.c: portable and AVX2+FMA kernels (see kernels.h for the
 * batch-invariance rule both sets keep).
 */
#include "kernels.h"

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

static void attend_portable(float *out, const float *q, int g, int hd, const float *kbase,
			    const float *vbase, const int32_t *table, int bs, size_t stride, int n,
			    float scale, float *scratch, const pm_attend_next *next)
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

const pm_kernels pm_kernels_portable = {
	.name = "portable",
	.matmul = matmul_portable,
	.rmsnorm = rmsnorm_portable,
	.swiglu = swiglu_portable,
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

/*
 * Attention, AVX2, for the g query heads that share one KV head, in three
 * stages over one slot's paged cache:
 *   scores:  s[h][t] = (q_h . k_t) * scale in tiles of 2 heads x 4 keys
 *            (3 x 4 for the last three of an odd g, 1 x 4 for g = 1), so
 *            a key comes from memory once and from L1 for the other tiles;
 *   softmax: p[h][t] = exp(s[h][t] - max_h) / sum_h in place;
 *   values:  out_h = sum_t p[h][t] v_t, a chunk of positions (at most
 *            one cache block, ATT_CHUNK) at a time: its value rows come
 *            into L1 once for every tile of G heads x W vectors (pv_tile),
 *            whose accumulators stay in registers across the chunk.
 * The rows of a slot lie in blocks anywhere in the cache, where the
 * hardware prefetcher loses them, so a cursor (kv_ahead) walks the key
 * rows, then the value rows, then the next call's key rows (when the
 * caller names it), ATT_AHEAD rows ahead of their use, and prefetches
 * each one.
 * Every score is one 8-lane FMA chain over hd in order (the masked tail
 * last) reduced by hsum4's tree; every output element is one FMA chain
 * over positions in order (kept in out between chunks: exact). So tile
 * and chunk shapes never change a result: it depends only on q, the
 * cached rows and n.
 */
#define ATT_AHEAD 16
#define ATT_CHUNK 32 /* positions per values chunk, at most */

typedef struct {
	const float *kbase, *vbase;
	const int32_t *table;
	int bs, n, hd;
	size_t stride;
	int t, b, o; /* next row: position t (block table[b], offset o), keys while t < n */
	const pm_attend_next *next; /* where the cursor goes once this call's rows are done */
} kv_ahead;

/* ahead_step prefetches the cache lines of the cursor's row and moves on. */
AVX2_INLINE void ahead_step(kv_ahead *a)
{
	if (a->t >= 2 * a->n) {
		if (!a->next)
			return;
		/* on to the next call's keys */
		a->kbase = a->next->kbase, a->vbase = a->next->vbase;
		a->table = a->next->table, a->n = a->next->n;
		a->t = a->b = a->o = 0, a->next = NULL;
	}
	const float *base = a->t < a->n ? a->kbase : a->vbase;
	const float *p = base + ((size_t)a->table[a->b] * (size_t)a->bs + (size_t)a->o) * a->stride;
	uintptr_t l = (uintptr_t)p & ~(uintptr_t)63, end = (uintptr_t)(p + a->hd);
	for (; l < end; l += 64)
		_mm_prefetch((const char *)l, _MM_HINT_T0);
	if (++a->t == a->n)
		a->b = 0, a->o = 0; /* on to the values */
	else if (++a->o == a->bs)
		a->b++, a->o = 0;
}

/* s0[0..4) (and s1[0..4) when q1 is set) = q . k[0..4) * scale */
AVX2_INLINE void qk_tile(float *s0, float *s1, const float *q0, const float *q1,
			 const float *const *k, int hd, __m128 scale)
{
	__m256 a00 = _mm256_setzero_ps(), a01 = a00, a02 = a00, a03 = a00;
	__m256 a10 = a00, a11 = a00, a12 = a00, a13 = a00;
	int nv = hd & ~7;
	for (int i = 0; i < nv; i += 8) {
		__m256 v0 = _mm256_loadu_ps(k[0] + i), v1 = _mm256_loadu_ps(k[1] + i);
		__m256 v2 = _mm256_loadu_ps(k[2] + i), v3 = _mm256_loadu_ps(k[3] + i);
		__m256 u = _mm256_loadu_ps(q0 + i);
		FMA(u, v0, a00), FMA(u, v1, a01), FMA(u, v2, a02), FMA(u, v3, a03);
		if (q1) {
			u = _mm256_loadu_ps(q1 + i);
			FMA(u, v0, a10), FMA(u, v1, a11), FMA(u, v2, a12), FMA(u, v3, a13);
		}
	}
	if (hd & 7) {
		__m256i mk = tail_mask(hd & 7);
		__m256 v0 = _mm256_maskload_ps(k[0] + nv, mk), v1 = _mm256_maskload_ps(k[1] + nv, mk);
		__m256 v2 = _mm256_maskload_ps(k[2] + nv, mk), v3 = _mm256_maskload_ps(k[3] + nv, mk);
		__m256 u = _mm256_maskload_ps(q0 + nv, mk);
		FMA(u, v0, a00), FMA(u, v1, a01), FMA(u, v2, a02), FMA(u, v3, a03);
		if (q1) {
			u = _mm256_maskload_ps(q1 + nv, mk);
			FMA(u, v0, a10), FMA(u, v1, a11), FMA(u, v2, a12), FMA(u, v3, a13);
		}
	}
	_mm_storeu_ps(s0, _mm_mul_ps(hsum4(a00, a01, a02, a03), scale));
	if (q1)
		_mm_storeu_ps(s1, _mm_mul_ps(hsum4(a10, a11, a12, a13), scale));
}

/* qk_tile3: qk_tile for 3 heads: each key chunk is loaded once for all
 * three (12 accumulators, 3 query vectors and 1 key vector: 16 registers). */
AVX2_INLINE void qk_tile3(float *s0, float *s1, float *s2, const float *q0, const float *q1,
			  const float *q2, const float *const *k, int hd, __m128 scale)
{
	__m256 a[3][4];
#pragma GCC unroll 4
	for (int h = 0; h < 3; h++)
#pragma GCC unroll 4
		for (int j = 0; j < 4; j++)
			a[h][j] = _mm256_setzero_ps();
	int nv = hd & ~7;
	for (int i = 0; i < nv; i += 8) {
		__m256 u0 = _mm256_loadu_ps(q0 + i), u1 = _mm256_loadu_ps(q1 + i);
		__m256 u2 = _mm256_loadu_ps(q2 + i);
#pragma GCC unroll 4
		for (int j = 0; j < 4; j++) {
			__m256 v = _mm256_loadu_ps(k[j] + i);
			FMA(u0, v, a[0][j]), FMA(u1, v, a[1][j]), FMA(u2, v, a[2][j]);
		}
	}
	if (hd & 7) {
		__m256i mk = tail_mask(hd & 7);
		__m256 u0 = _mm256_maskload_ps(q0 + nv, mk), u1 = _mm256_maskload_ps(q1 + nv, mk);
		__m256 u2 = _mm256_maskload_ps(q2 + nv, mk);
#pragma GCC unroll 4
		for (int j = 0; j < 4; j++) {
			__m256 v = _mm256_maskload_ps(k[j] + nv, mk);
			FMA(u0, v, a[0][j]), FMA(u1, v, a[1][j]), FMA(u2, v, a[2][j]);
		}
	}
	_mm_storeu_ps(s0, _mm_mul_ps(hsum4(a[0][0], a[0][1], a[0][2], a[0][3]), scale));
	_mm_storeu_ps(s1, _mm_mul_ps(hsum4(a[1][0], a[1][1], a[1][2], a[1][3]), scale));
	_mm_storeu_ps(s2, _mm_mul_ps(hsum4(a[2][0], a[2][1], a[2][2], a[2][3]), scale));
}

/* qk_keys: scores of the keys k[0..nk), nk <= 4, against every head: in
 * pairs, and the last three heads together when g is odd. */
AVX2_INLINE void qk_keys(float *s, int n, int t0, const float *q, int g, int hd,
			 const float **k, int nk, __m128 scale)
{
	float r[3][4];
	for (int i = nk; i < 4; i++)
		k[i] = k[0]; /* a short tile repeats a key; its scores are dropped */
	for (int h = 0; h < g;) {
		int th = g - h == 3 ? 3 : g - h >= 2 ? 2 : 1; /* heads in this tile */
		const float *q0 = q + (size_t)h * hd;
		float *s0 = s + (size_t)h * n + t0;
		float *d0 = nk == 4 ? s0 : r[0], *d1 = nk == 4 ? s0 + n : r[1];
		if (th == 3)
			qk_tile3(d0, d1, nk == 4 ? s0 + 2 * (size_t)n : r[2], q0, q0 + hd, q0 + 2 * hd, k,
				 hd, scale);
		else
			qk_tile(d0, d1, q0, th == 2 ? q0 + hd : NULL, k, hd, scale);
		if (nk < 4)
			for (int j = 0; j < th; j++)
				for (int i = 0; i < nk; i++)
					s0[(size_t)j * n + i] = r[j][i];
		h += th;
	}
}

/*
 * pv_tile: out_h[c..c+8W) += sum_t e_h[t] v_t[c..c+8W) over the chunk's
 * positions t0 <= t < t0+cnt (rows v, v + stride, ...) for G heads
 * (e_h = e + h*n, out_h = out + h*hd); out_h starts at 0 when first is
 * set. The last vector is masked by mk when tail is set.
 */
AVX2_INLINE void pv_tile(const int G, const int W, const int tail, float *out, int hd,
			 const float *e, int n, const float *v, size_t stride, int t0, int cnt,
			 int first, int c, __m256i mk)
{
	__m256 acc[4][8];
#pragma GCC unroll 8
	for (int h = 0; h < G; h++)
#pragma GCC unroll 8
		for (int w = 0; w < W; w++) {
			const float *o = out + (size_t)h * hd + c + 8 * w;
			acc[h][w] = first ? _mm256_setzero_ps()
				    : tail && w == W - 1 ? _mm256_maskload_ps(o, mk)
							 : _mm256_loadu_ps(o);
		}
	v += c;
	e += t0;
	for (int i = 0; i < cnt; i++, v += stride) {
		__m256 x[8];
#pragma GCC unroll 8
		for (int w = 0; w < W; w++)
			x[w] = tail && w == W - 1 ? _mm256_maskload_ps(v + 8 * w, mk)
						  : _mm256_loadu_ps(v + 8 * w);
#pragma GCC unroll 8
		for (int h = 0; h < G; h++) {
			__m256 p = _mm256_broadcast_ss(e + (size_t)h * n + i);
#pragma GCC unroll 8
			for (int w = 0; w < W; w++)
				FMA(p, x[w], acc[h][w]);
		}
	}
#pragma GCC unroll 8
	for (int h = 0; h < G; h++)
#pragma GCC unroll 8
		for (int w = 0; w < W; w++) {
			float *o = out + (size_t)h * hd + c + 8 * w;
			if (tail && w == W - 1)
				_mm256_maskstore_ps(o, mk, acc[h][w]);
			else
				_mm256_storeu_ps(o, acc[h][w]);
		}
}

/* pv_heads: pv_tile over every column of G heads, W vectors at a time:
 * as many as keep about 8 accumulators (4 heads x 2 ... 1 head x 8). */
AVX2_INLINE void pv_heads(const int G, float *out, int hd, const float *e, int n,
			  const float *v, size_t stride, int t0, int cnt, int first)
{
	const int wmax = G == 1 ? 8 : G == 2 ? 4 : 2;
	__m256i full = tail_mask(8);
	int c = 0;
	for (int left = hd / 8; left > 0;) {
		int w = wmax;
		while (w > left)
			w >>= 1;
#define PV(W_) pv_tile(G, W_, 0, out, hd, e, n, v, stride, t0, cnt, first, c, full)
		if (w == 8)
			PV(8);
		else if (w == 4)
			PV(4);
		else if (w == 2)
			PV(2);
		else
			PV(1);
#undef PV
		c += 8 * w;
		left -= w;
	}
	if (hd & 7)
		pv_tile(G, 1, 1, out, hd, e, n, v, stride, t0, cnt, first, c, tail_mask(hd & 7));
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

static AVX2 void attend_avx2(float *out, const float *q, int g, int hd, const float *kbase,
			     const float *vbase, const int32_t *table, int bs, size_t stride, int n,
			     float scale, float *scratch, const pm_attend_next *next)
{
	kv_ahead pf = {kbase, vbase, table, bs, n, hd, stride, 0, 0, 0, next};
	for (int i = 0; i < ATT_AHEAD; i++)
		ahead_step(&pf);
	/* scores, 4 keys at a time */
	__m128 vscale = _mm_set1_ps(scale);
	const float *kp[4];
	int nk = 0, t0 = 0;
	for (int t = 0, b = 0; t < n; b++) {
		const float *kr = kbase + (size_t)table[b] * (size_t)bs * stride;
		int end = n - t < bs ? n : t + bs;
		for (; t < end; t++, kr += stride) {
			ahead_step(&pf);
			kp[nk++] = kr;
			if (nk == 4 || t + 1 == n) {
				qk_keys(scratch, n, t0, q, g, hd, kp, nk, vscale);
				t0 += nk;
				nk = 0;
			}
		}
	}
	for (int h = 0; h < g; h++)
		softmax_row(scratch + (size_t)h * n, n);
	/* values, a chunk of positions at a time: heads 4 at a time, then 1..3 */
	for (int t = 0, b = 0; t < n; b++) {
		const float *vb = vbase + (size_t)table[b] * (size_t)bs * stride;
		int end = n - t < bs ? n : t + bs;
		for (int c0 = t; c0 < end; c0 += ATT_CHUNK) {
			int cnt = end - c0 < ATT_CHUNK ? end - c0 : ATT_CHUNK;
			const float *v = vb + (size_t)(c0 - t) * stride;
			for (int i = 0; i < cnt; i++)
				ahead_step(&pf);
			int h = 0;
			for (; h + 4 <= g; h += 4)
				pv_heads(4, out + (size_t)h * hd, hd, scratch + (size_t)h * n, n, v,
					 stride, c0, cnt, c0 == 0);
			if (g - h == 3)
				pv_heads(3, out + (size_t)h * hd, hd, scratch + (size_t)h * n, n, v,
					 stride, c0, cnt, c0 == 0);
			else if (g - h == 2)
				pv_heads(2, out + (size_t)h * hd, hd, scratch + (size_t)h * n, n, v,
					 stride, c0, cnt, c0 == 0);
			else if (g - h == 1)
				pv_heads(1, out + (size_t)h * hd, hd, scratch + (size_t)h * n, n, v,
					 stride, c0, cnt, c0 == 0);
		}
		t = end;
	}
}

static const pm_kernels kernels_avx2 = {
	.name = "avx2",
	.matmul = matmul_avx2,
	.rmsnorm = rmsnorm_avx2,
	.swiglu = swiglu_avx2,
	.attend = attend_avx2,
};

int pm_cpu_has_avx2(void)
{
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

const pm_kernels *pm_kernels_avx2(void)
{
	return pm_cpu_has_avx2() ? &kernels_avx2 : NULL;
}

#else /* not x86-64 GCC/Clang: portable only */

int pm_cpu_has_avx2(void)
{
	return 0;
}

const pm_kernels *pm_kernels_avx2(void)
{
	return NULL;
}

#endif
