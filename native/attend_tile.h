/*
 * attend_tile.h: the body of kernels.c's AVX2 attention, included once per
 * register file (see "Attention, AVX2" in kernels.c). The includer defines:
 *
 *   ATT_TGT      the target attribute string ("avx2,fma", or that plus
 *                "avx512f,avx512vl": 32 vector registers, the same 256-bit
 *                instructions, so the same bits)
 *   ATT_SFX      the suffix of this copy's names
 *   ATT_QT       the most query vectors one score tile holds (each with 4
 *                accumulators, one per key: 5 * ATT_QT + 1 registers)
 *   ATT_PG       the most output vectors one values tile holds
 *   ATT_WMAX(G)  the most 8-float column vectors a values tile of G output
 *                vectors holds (G * W accumulators + W values + 1)
 *
 * and kernels.c's tail_mask, hsum4, exp256 and FMA (target "avx2,fma", a
 * subset of every copy's, so they inline into it).
 * Nothing here depends on the copy but speed: see kernels.c for why tile
 * shapes never change a result.
 */
#define ATT_CAT_(a, b) a##b
#define ATT_CAT(a, b) ATT_CAT_(a, b)
#define ATT(name) ATT_CAT(name, ATT_SFX)
#define ATT_INLINE static inline __attribute__((always_inline, target(ATT_TGT)))
#define ATT_FN static __attribute__((target(ATT_TGT)))
/* ATT_IN_REG: v is loaded once into a register (the compiler would
 * otherwise fold the load into each FMA that uses it: 2 or Q loads). */
#define ATT_IN_REG(v) __asm__("" : "+x"(v))

/* ahead_step prefetches the cache lines of the cursor's row into L2 and
 * moves on. */
ATT_INLINE void ATT(ahead_step_)(kv_ahead *a)
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
		_mm_prefetch((const char *)l, _MM_HINT_T1);
	if (++a->t == a->n)
		a->b = 0, a->o = 0; /* on to the values */
	else if (++a->o == a->bs)
		a->b++, a->o = 0;
}

/*
 * qk_tile_: s[h][0..4) = (q[h] . k[0..4)) * scale for Q query vectors: the
 * Q query chunks stay in registers while each key chunk is loaded once and
 * fed to Q accumulators.
 */
ATT_INLINE void ATT(qk_tile_)(const int Q, float *const *s, const float *const *q,
			      const float *const *k, int hd, __m128 scale)
{
	__m256 a[ATT_QT][4], u[ATT_QT];
#pragma GCC unroll 8
	for (int h = 0; h < Q; h++)
#pragma GCC unroll 4
		for (int j = 0; j < 4; j++)
			a[h][j] = _mm256_setzero_ps();
	int nv = hd & ~7;
	for (int i = 0; i < nv; i += 8) {
		if (Q <= 2) {
			/* the 4 keys in registers, a query vector at a time */
			__m256 v[4];
#pragma GCC unroll 4
			for (int j = 0; j < 4; j++) {
				v[j] = _mm256_loadu_ps(k[j] + i);
				ATT_IN_REG(v[j]);
			}
#pragma GCC unroll 8
			for (int h = 0; h < Q; h++) {
				__m256 x = _mm256_loadu_ps(q[h] + i);
#pragma GCC unroll 4
				for (int j = 0; j < 4; j++)
					FMA(x, v[j], a[h][j]);
			}
			continue;
		}
#pragma GCC unroll 8
		for (int h = 0; h < Q; h++) {
			u[h] = _mm256_loadu_ps(q[h] + i);
			ATT_IN_REG(u[h]);
		}
#pragma GCC unroll 4
		for (int j = 0; j < 4; j++) {
			__m256 v = _mm256_loadu_ps(k[j] + i);
			ATT_IN_REG(v);
#pragma GCC unroll 8
			for (int h = 0; h < Q; h++)
				FMA(u[h], v, a[h][j]);
		}
	}
	if (hd & 7) {
		__m256i mk = tail_mask(hd & 7);
#pragma GCC unroll 8
		for (int h = 0; h < Q; h++)
			u[h] = _mm256_maskload_ps(q[h] + nv, mk);
#pragma GCC unroll 4
		for (int j = 0; j < 4; j++) {
			__m256 v = _mm256_maskload_ps(k[j] + nv, mk);
#pragma GCC unroll 8
			for (int h = 0; h < Q; h++)
				FMA(u[h], v, a[h][j]);
		}
	}
#pragma GCC unroll 8
	for (int h = 0; h < Q; h++)
		_mm_storeu_ps(s[h], _mm_mul_ps(hsum4(a[h][0], a[h][1], a[h][2], a[h][3]), scale));
}

/* qk_run_: qk_tile_ with Q known at compile time (1 <= Q <= ATT_QT). */
ATT_INLINE void ATT(qk_run_)(int Q, float *const *s, const float *const *q,
				    const float *const *k, int hd, __m128 scale)
{
	switch (Q) {
#define QK_(n_)                                                  \
	case n_:                                                 \
		if (n_ <= ATT_QT)                                \
			ATT(qk_tile_)(n_ <= ATT_QT ? n_ : 1, s, q, k, hd, scale); \
		break;
		QK_(1)
		QK_(2)
		QK_(3)
		QK_(4)
		QK_(5)
		QK_(6)
#undef QK_
	}
}

/*
 * qk_keys_: the scores of the keys k[0..nk), nk <= 4, at positions
 * t0.. against every query vector of the call (row j's head h is vector
 * j * g + h, its scores at s + (j * g + h) * ld), in the tiles of sp.
 */
ATT_INLINE void ATT(qk_keys_)(float *s, size_t ld, int t0, const float *q, size_t ldq, int g,
			      const att_split *sp, int hd, const float **k, int nk, __m128 scale)
{
	float r[ATT_QT][4];
	float *d[ATT_QT];
	const float *qp[ATT_QT];
	for (int i = nk; i < 4; i++)
		k[i] = k[0]; /* a short tile repeats a key; its scores are dropped */
	int j = 0, h = 0, qi = 0; /* the row and head of vector qi */
	for (int x = 0; x < sp->tiles; x++) {
		int tq = sp->size + (x < sp->extra);
		for (int y = 0; y < tq; y++) {
			qp[y] = q + (size_t)j * ldq + (size_t)h * hd;
			d[y] = nk == 4 ? s + (size_t)(qi + y) * ld + t0 : r[y];
			if (++h == g)
				h = 0, j++;
		}
		ATT(qk_run_)(tq, d, qp, k, hd, scale);
		if (nk < 4)
			for (int y = 0; y < tq; y++)
				for (int i = 0; i < nk; i++)
					s[(size_t)(qi + y) * ld + t0 + i] = r[y][i];
		qi += tq;
	}
}

/*
 * pv_tile_: o[h][c..c+8W) += sum_i e[h][i] v_i[c..c+8W) over the chunk's
 * cnt positions (rows v, v + stride, ...) for G output vectors; o[h]
 * starts at 0 when first is set. The last vector is masked by mk when
 * tail is set.
 */
ATT_INLINE void ATT(pv_tile_)(const int G, const int W, const int tail, float *const *o,
			      const float *const *e, const float *v, size_t stride, int cnt,
			      int first, int c, __m256i mk)
{
	__m256 acc[ATT_PG][8];
#pragma GCC unroll 8
	for (int h = 0; h < G; h++)
#pragma GCC unroll 8
		for (int w = 0; w < W; w++) {
			const float *p = o[h] + c + 8 * w;
			acc[h][w] = first ? _mm256_setzero_ps()
				    : tail && w == W - 1 ? _mm256_maskload_ps(p, mk)
							 : _mm256_loadu_ps(p);
		}
	v += c;
	for (int i = 0; i < cnt; i++, v += stride) {
		__m256 x[8];
#pragma GCC unroll 8
		for (int w = 0; w < W; w++)
			x[w] = tail && w == W - 1 ? _mm256_maskload_ps(v + 8 * w, mk)
						  : _mm256_loadu_ps(v + 8 * w);
#pragma GCC unroll 8
		for (int h = 0; h < G; h++) {
			__m256 p = _mm256_broadcast_ss(e[h] + i);
#pragma GCC unroll 8
			for (int w = 0; w < W; w++)
				FMA(p, x[w], acc[h][w]);
		}
	}
#pragma GCC unroll 8
	for (int h = 0; h < G; h++)
#pragma GCC unroll 8
		for (int w = 0; w < W; w++) {
			float *p = o[h] + c + 8 * w;
			if (tail && w == W - 1)
				_mm256_maskstore_ps(p, mk, acc[h][w]);
			else
				_mm256_storeu_ps(p, acc[h][w]);
		}
}

/* pv_cols_: pv_tile_ over every column of G output vectors, W vectors at
 * a time (ATT_WMAX(G), then halves for what is left), the masked tail last. */
ATT_INLINE void ATT(pv_cols_)(const int G, float *const *o, const float *const *e, int hd,
			      const float *v, size_t stride, int cnt, int first)
{
	const int wmax = ATT_WMAX(G);
	__m256i full = tail_mask(8);
	int c = 0;
	for (int left = hd / 8; left > 0;) {
		int w = wmax;
		while (w > left)
			w >>= 1;
#define PV(W_) ATT(pv_tile_)(G, W_ <= wmax ? W_ : 1, 0, o, e, v, stride, cnt, first, c, full)
		if (w >= 8)
			PV(8);
		else if (w >= 4)
			PV(4);
		else if (w >= 2)
			PV(2);
		else
			PV(1);
#undef PV
		w = w >= 8 ? 8 : w >= 4 ? 4 : w >= 2 ? 2 : 1;
		c += 8 * w;
		left -= w;
	}
	if (hd & 7)
		ATT(pv_tile_)(G, 1, 1, o, e, v, stride, cnt, first, c, tail_mask(hd & 7));
}

/* pv_run_: pv_cols_ with G known at compile time (1 <= G <= ATT_PG). */
ATT_FN void ATT(pv_run_)(int G, float *const *o, const float *const *e, int hd,
				    const float *v, size_t stride, int cnt, int first)
{
	switch (G) {
#define PVG_(n_)                                                                            \
	case n_:                                                                            \
		if (n_ <= ATT_PG)                                                           \
			ATT(pv_cols_)(n_ <= ATT_PG ? n_ : 1, o, e, hd, v, stride, cnt, first); \
		break;
		PVG_(1)
		PVG_(2)
		PVG_(3)
		PVG_(4)
		PVG_(5)
		PVG_(6)
#undef PVG_
	}
}

/*
 * pv_vecs_: the values of positions t0..t0+cnt-1 (rows v, v + stride, ...
 * of one block) for the output vectors from row j0 on (vector qi = row
 * qi / g, head qi % g: out at out + j * ldq + h * hd, its probabilities at
 * s + qi * ld), in the tiles of sp.
 */
ATT_INLINE void ATT(pv_vecs_)(float *out, size_t ldq, int g, int hd, const float *s, size_t ld,
			      int j0, const att_split *sp, const float *v, size_t stride, int t0,
			      int cnt)
{
	float *o[ATT_PG];
	const float *e[ATT_PG];
	int j = j0, h = 0, qi = j0 * g;
	for (int x = 0; x < sp->tiles; x++) {
		int tg = sp->size + (x < sp->extra);
		for (int y = 0; y < tg; y++) {
			o[y] = out + (size_t)j * ldq + (size_t)h * hd;
			e[y] = s + (size_t)(qi + y) * ld + t0;
			if (++h == g)
				h = 0, j++;
		}
		ATT(pv_run_)(tg, o, e, hd, v, stride, cnt, t0 == 0);
		qi += tg;
	}
}

/*
 * attend_: kernels.h's attend. Scores of every query vector against the
 * keys 0..n+nr-2 (a row's scores past its own length are computed and
 * never read), softmax of vector (j, h) over row j's n + j scores, then the
 * values: positions 0..n-1 for every vector a chunk at a time, then each
 * row's own last positions n..n+j-1.
 */
ATT_FN void ATT(attend_)(float *out, const float *q, size_t ldq, int nr, int g, int hd,
				    const float *kbase, const float *vbase, const int32_t *table,
				    int bs, size_t stride, int n, float scale, float *scratch,
				    const pm_attend_next *next)
{
	int nt = n + nr - 1, nq = nr * g; /* positions read, query vectors */
	size_t ld = (size_t)nt;
	/* the tiles of the scores, and of the values of rows j.. (pvs[j]) */
	att_split qks = att_split_of(nq, ATT_QT), pvs[PM_ATTEND_MAX_ROWS];
	for (int j = 0; j < nr; j++)
		pvs[j] = att_split_of(nq - j * g, ATT_PG);
	kv_ahead pf = {kbase, vbase, table, bs, nt, hd, stride, 0, 0, 0, next};
	for (int i = 0; i < ATT_AHEAD; i++)
		ATT(ahead_step_)(&pf);
	/* scores, 4 keys at a time */
	__m128 vscale = _mm_set1_ps(scale);
	const float *kp[4];
	int nk = 0, t0 = 0;
	for (int t = 0, b = 0; t < nt; b++) {
		const float *kr = kbase + (size_t)table[b] * (size_t)bs * stride;
		int end = nt - t < bs ? nt : t + bs;
		for (; t < end; t++, kr += stride) {
			ATT(ahead_step_)(&pf);
			kp[nk++] = kr;
			if (nk == 4 || t + 1 == nt) {
				ATT(qk_keys_)(scratch, ld, t0, q, ldq, g, &qks, hd, kp, nk, vscale);
				t0 += nk;
				nk = 0;
			}
		}
	}
	for (int qi = 0; qi < nq; qi++)
		softmax_row(scratch + (size_t)qi * ld, n + qi / g);
	/* values: positions 0..n-1 for every vector, a chunk at a time */
	for (int t = 0, b = 0; t < nt; b++) {
		const float *vb = vbase + (size_t)table[b] * (size_t)bs * stride;
		int end = nt - t < bs ? nt : t + bs;
		for (int c0 = t; c0 < end; c0 += ATT_CHUNK) {
			int cnt = end - c0 < ATT_CHUNK ? end - c0 : ATT_CHUNK;
			const float *v = vb + (size_t)(c0 - t) * stride;
			for (int i = 0; i < cnt; i++)
				ATT(ahead_step_)(&pf);
			if (c0 < n)
				ATT(pv_vecs_)(out, ldq, g, hd, scratch, ld, 0, &pvs[0], v, stride, c0,
					      (c0 + cnt < n ? c0 + cnt : n) - c0);
			/* rows j >= 1 also see positions n..n+j-1 */
			int lo = c0 > n ? c0 : n;
			for (int p = lo; p < c0 + cnt; p++)
				ATT(pv_vecs_)(out, ldq, g, hd, scratch, ld, p - n + 1, &pvs[p - n + 1],
					      v + (size_t)(p - c0) * stride, stride, p, 1);
		}
		t = end;
	}
}

#undef ATT_INLINE
#undef ATT_FN
#undef ATT_IN_REG
#undef ATT
#undef ATT_CAT
#undef ATT_CAT_
