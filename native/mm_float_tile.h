/*
 * mm_float_tile.h: the body of mm_float.c's tile product, included once per
 * register file (see mm_float.c). The includer defines:
 *
 *   MMF_TGT   the target attribute string ("avx2,fma,f16c" or that plus
 *             "avx512f,avx512vl": 32 vector registers, same instructions'
 *             arithmetic)
 *   MMF_SFX   the suffix of this copy's names
 *   MMF_W     weight rows per tile (2, 3 or 4): accumulators per row of x
 *   MMF_RMAX  the most rows of x one pass holds (4 or 6)
 *
 * Nothing here depends on the copy but speed: every output is one 8-lane
 * accumulator fed the row's 8-element chunks in order, then the masked
 * tail chunk, reduced by the tree of hsum4 (kernels.h).
 */
#define MMF_CAT_(a, b) a##b
#define MMF_CAT(a, b) MMF_CAT_(a, b)
#define MMF(name) MMF_CAT(name, MMF_SFX)
#define MMF_INLINE static inline __attribute__((always_inline, target(MMF_TGT)))

/* hsum4 reduces four accumulators, each by ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)). */
MMF_INLINE __m128 MMF(hsum4_)(__m256 a, __m256 b, __m256 c, __m256 d)
{
	__m256 t0 = _mm256_hadd_ps(a, b);
	__m256 t1 = _mm256_hadd_ps(c, d);
	__m256 t2 = _mm256_hadd_ps(t0, t1);
	return _mm_add_ps(_mm256_castps256_ps128(t2), _mm256_extractf128_ps(t2, 1));
}

/* ld_ widens the 8 elements of a row of type ty at element i (exact). */
MMF_INLINE __m256 MMF(ld_)(int ty, const uint8_t *row, int i)
{
	if (ty == PM_TYPE_F32)
		return _mm256_loadu_ps((const float *)(const void *)row + i);
	__m128i h = _mm_loadu_si128((const __m128i *)(const void *)(row + 2 * (size_t)i));
	if (ty == PM_TYPE_F16)
		return _mm256_cvtph_ps(h);
	return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* ld_tail_ widens elements [i, k) of a row, zeros beyond k (loads stay in
 * the row): what the masked loads of the F32 kernels give. */
MMF_INLINE __m256 MMF(ld_tail_)(int ty, const uint8_t *row, int i, int k)
{
	int esz = ty == PM_TYPE_F32 ? 4 : 2;
	uint8_t buf[32] = {0};
	memcpy(buf, row + (size_t)esz * i, (size_t)esz * (k - i));
	return MMF(ld_)(ty, buf, 0);
}

/*
 * tile_: out[r*ldo + j] = x[r] . row j of the W-row tile at w0 (rows rb
 * bytes apart), r < R, j < W (2, 3 or 4). Each widened weight vector feeds R
 * FMAs. While it runs it prefetches into L2 the W * rb bytes at pf (a
 * later tile; NULL: none), one share per chunk, so the weight stream never
 * waits on DRAM at a tile boundary. The chunks go four a step (32
 * elements): the step's share is whole lines, prefetched without the
 * per-chunk line test, and the loop's scalar work (index, test, prefetch
 * address) is paid once per 48 FMAs instead of per 12. The chunks' order
 * per accumulator is the same, so the same bits.
 */
MMF_INLINE void MMF(tile_)(const int W, const int R, const int ty, float *out, size_t ldo,
			   const float *x, int k, const uint8_t *w0, size_t rb, const char *pf)
{
	const int esz = ty == PM_TYPE_F32 ? 4 : 2;
	const int share = 8 * W * esz; /* bytes of the later tile per chunk */
	const uint8_t *wr[4] = {w0, w0 + rb, w0 + 2 * rb, w0 + 3 * rb};
	__m256 a[MMF_RMAX][4], v[4];
#pragma GCC unroll 8
	for (int r = 0; r < R; r++)
#pragma GCC unroll 4
		for (int j = 0; j < W; j++)
			a[r][j] = _mm256_setzero_ps();
	int kv = k & ~7, k32 = k & ~31, i = 0;
	/* Four chunks a step; the later tile's share of a step is 4 * 8 * W
	 * elements, whole lines for every W and esz: W lines (F16) or 2W
	 * (F32), prefetched at the step's start without a test per chunk. */
	for (; i < k32; i += 32) {
		if (pf) {
			const char *p = pf + (size_t)(i / 8) * share;
#pragma GCC unroll 8
			for (int o = 0; o < 4 * share; o += 64)
				_mm_prefetch(p + o, _MM_HINT_T1);
		}
#pragma GCC unroll 4
		for (int c = 0; c < 32; c += 8) {
#pragma GCC unroll 4
			for (int j = 0; j < W; j++)
				v[j] = MMF(ld_)(ty, wr[j], i + c);
#pragma GCC unroll 8
			for (int r = 0; r < R; r++) {
				__m256 u = _mm256_loadu_ps(x + (size_t)r * k + i + c);
#pragma GCC unroll 4
				for (int j = 0; j < W; j++)
					a[r][j] = _mm256_fmadd_ps(u, v[j], a[r][j]);
			}
		}
	}
	if (pf && i < kv)
		for (int o = (i / 8) * share; o < W * (int)rb; o += 64)
			_mm_prefetch(pf + o, _MM_HINT_T1);
	for (; i < kv; i += 8) {
#pragma GCC unroll 4
		for (int j = 0; j < W; j++)
			v[j] = MMF(ld_)(ty, wr[j], i);
#pragma GCC unroll 8
		for (int r = 0; r < R; r++) {
			__m256 u = _mm256_loadu_ps(x + (size_t)r * k + i);
#pragma GCC unroll 4
			for (int j = 0; j < W; j++)
				a[r][j] = _mm256_fmadd_ps(u, v[j], a[r][j]);
		}
	}
	if (k & 7) {
		__m256i mk = _mm256_loadu_si256((const __m256i *)(mmf_tail_tab + 8 - (k & 7)));
#pragma GCC unroll 4
		for (int j = 0; j < W; j++)
			v[j] = MMF(ld_tail_)(ty, wr[j], kv, k);
#pragma GCC unroll 8
		for (int r = 0; r < R; r++) {
			__m256 u = _mm256_maskload_ps(x + (size_t)r * k + kv, mk);
#pragma GCC unroll 4
			for (int j = 0; j < W; j++)
				a[r][j] = _mm256_fmadd_ps(u, v[j], a[r][j]);
		}
	}
#pragma GCC unroll 8
	for (int r = 0; r < R; r++) {
		float *o = out + (size_t)r * ldo;
		if (W == 4) {
			_mm_storeu_ps(o, MMF(hsum4_)(a[r][0], a[r][1], a[r][2], a[r][3]));
		} else if (W == 3) {
			__m128 h = MMF(hsum4_)(a[r][0], a[r][1], a[r][2], a[r][2]);
			_mm_storel_pi((__m64 *)(void *)o, h);
			_mm_store_ss(o + 2, _mm_movehl_ps(h, h));
		} else if (W == 2) {
			_mm_storel_pi((__m64 *)(void *)o, MMF(hsum4_)(a[r][0], a[r][1], a[r][0], a[r][1]));
		} else {
			_mm_store_ss(o, MMF(hsum4_)(a[r][0], a[r][0], a[r][0], a[r][0]));
		}
	}
}

/*
 * rest_: the W < MMF_W rows past the last whole tile of a range, as a
 * narrower tile against the same passes of x. It used to be one dot
 * product per row and output, a single dependent FMA chain (4 cycles an
 * FMA on Zen 3): the thread split cuts ranges in 4-row tiles, so with
 * 3-row tiles most ranges end in 1 or 2 such rows, and at two threads the
 * 128-row K and V projections of the default model (8 chunks of 16 rows)
 * spent as long in them as in their tiles.
 */
MMF_INLINE void MMF(rest_)(const int W, const int R, const int ty, float *out, size_t ldo,
			   const float *x, int k, const uint8_t *w0, size_t rb)
{
#define MMF_REST_R(WW)                                                                  \
	switch (R) {                                                                    \
	case 4: MMF(tile_)(WW, 4, ty, out, ldo, x, k, w0, rb, NULL); break;             \
	case 3: MMF(tile_)(WW, 3, ty, out, ldo, x, k, w0, rb, NULL); break;             \
	case 2: MMF(tile_)(WW, 2, ty, out, ldo, x, k, w0, rb, NULL); break;             \
	default: MMF(tile_)(WW, 1, ty, out, ldo, x, k, w0, rb, NULL); break;            \
	}
	switch (W) {
#if MMF_W > 3
	case 3: MMF_REST_R(3) break;
#endif
	case 2: MMF_REST_R(2) break;
	default: MMF_REST_R(1) break;
	}
#undef MMF_REST_R
}

/*
 * mm_: out[r*ldo + m] = x[r] . row m of w, r < n, m in [m0, m1). Rows of x
 * go in blocks that stay in L2 (mmf_xblock); within a block each 4-row
 * weight tile (MMF_W rows) is used against every row, MMF_RMAX rows (or
 * fewer) a pass; the first pass over a tile prefetches the weight rows
 * MMF_AHEAD_ROWS on.
 */
MMF_INLINE void MMF(mm_)(const int ty, float *out, size_t ldo, const float *x, const pm_weight *w,
			 int n, int m0, int m1)
{
	int k = w->cols;
	size_t rb = w->row_bytes;
	int xb = mmf_xblock(k);
	for (int r0 = 0; r0 < n; r0 += xb) {
		int rn = n - r0 < xb ? n - r0 : xb;
		const float *xr0 = x + (size_t)r0 * k;
		float *or0 = out + (size_t)r0 * ldo;
		int m = m0;
		for (; m + MMF_W <= m1; m += MMF_W) {
			const uint8_t *wm = pm_weight_row(w, m);
			int ahead = m + MMF_AHEAD_ROWS;
			const char *pf = ahead + MMF_W <= w->rows ? (const char *)pm_weight_row(w, ahead) : NULL;
			for (int r = 0; r < rn;) {
				float *o = or0 + (size_t)r * ldo + m;
				const float *xr = xr0 + (size_t)r * k;
				int R = MMF(pass_rows_)(rn, rn - r);
				switch (R) {
#if MMF_RMAX >= 6
				case 6: MMF(tile_)(MMF_W, 6, ty, o, ldo, xr, k, wm, rb, pf); break;
				case 5: MMF(tile_)(MMF_W, 5, ty, o, ldo, xr, k, wm, rb, pf); break;
#endif
#if MMF_RMAX >= 4
				case 4: MMF(tile_)(MMF_W, 4, ty, o, ldo, xr, k, wm, rb, pf); break;
#endif
				case 3: MMF(tile_)(MMF_W, 3, ty, o, ldo, xr, k, wm, rb, pf); break;
				case 2: MMF(tile_)(MMF_W, 2, ty, o, ldo, xr, k, wm, rb, pf); break;
				default: R = 1; MMF(tile_)(MMF_W, 1, ty, o, ldo, xr, k, wm, rb, pf); break;
				}
				pf = NULL;
				r += R;
			}
		}
		if (m < m1) {
			const uint8_t *wm = pm_weight_row(w, m);
			for (int r = 0; r < rn;) {
				int R = MMF(pass_rows_)(rn, rn - r);
				R = R > 4 ? 4 : R;
				MMF(rest_)(m1 - m, R, ty, or0 + (size_t)r * ldo + m, ldo,
					   xr0 + (size_t)r * k, k, wm, rb);
				r += R;
			}
		}
	}
}

static __attribute__((target(MMF_TGT))) void MMF(mm_f32_)(float *out, size_t ldo, const float *x,
							   const pm_weight *w, int n, int m0, int m1)
{
	MMF(mm_)(PM_TYPE_F32, out, ldo, x, w, n, m0, m1);
}

static __attribute__((target(MMF_TGT))) void MMF(mm_f16_)(float *out, size_t ldo, const float *x,
							   const pm_weight *w, int n, int m0, int m1)
{
	MMF(mm_)(PM_TYPE_F16, out, ldo, x, w, n, m0, m1);
}

static __attribute__((target(MMF_TGT))) void MMF(mm_bf16_)(float *out, size_t ldo, const float *x,
							    const pm_weight *w, int n, int m0, int m1)
{
	MMF(mm_)(PM_TYPE_BF16, out, ldo, x, w, n, m0, m1);
}

#undef MMF_INLINE
#undef MMF
#undef MMF_CAT
#undef MMF_CAT_
