/*
 * qmm_32_x86_dec512.h: the AVX-512 VNNI build's 512-bit decode of Q4_0 and
 * Q5_0 (decode512), a part of qmm_32_x86.h in a file of its own. It is
 * included there, inside its QMM_VNNI section, after the helpers it uses
 * (QMM_INLINE, tbytes, offset, ucodes and the rest); it is not a header to
 * include anywhere else.
 */
/*
 * The VNNI decode path (n == 1) of Q4_0 and Q5_0, on 512-bit registers
 * (AVX-512 F and BW, which every VNNI CPU has; qmm_32.c checks). A step
 * takes 4 blocks of 4 weight rows. One word permute per row gathers its 4
 * blocks' 16 code bytes into the 4 128-bit lanes of a register, which
 * splits into the codes of elements 0..15 (lo) and 16..31 (hi), against
 * the activation's codes staged once per call in the same layout (xg4):
 * two vpdpbusd leave block b's S as the 4 int32 of lane b. An
 * unpack-and-add transpose of the 4 rows' registers puts the 16 sums at
 * lane 4b + r (block b, row r), and word permutes gather the 16 scales
 * d_w in the same order. So a 4 x 4 step costs about 5 instructions a
 * block, where the 4 x 1 tile costs about 17 (a horizontal sum per row,
 * scalar scale loads): a 1376 x 512 Q4_0 matrix, L2-resident, decodes at
 * 0.70 ns a block against 1.0 (Q5_0: 1.13 against 1.40). The float
 * operations are the ones at the top of the file, per block in block
 * order: lane b of d_w * d_x and of float(S) into the quad's y, lane b
 * of m' with s_x into z. A tile is one quad of 4 rows (dtile can run Q
 * quads, independent fmadd chains; decode512 measured 4 rows best, see
 * there), the tile after the next prefetched. Rows past nw repeat the
 * last row; blocks past nb (a row's last step) are loaded masked, so
 * nothing past the row is read, and take no float operation. Q8_0 keeps the 4 x 1 tile: its
 * codes need no unpacking, and there the gathers cost what the
 * horizontal sums save (measured: no faster).
 */
#define DEC_TARGET QMM_TARGET ",avx512f,avx512bw"
#define DEC_ATTR __attribute__((target(DEC_TARGET)))
#define DEC_INLINE static inline __attribute__((always_inline, target(DEC_TARGET)))

/* 4 activation blocks as a step reads them (256 bytes) */
typedef struct {
	__m512i lo, hi; /* codes 0..15 / 16..31 of block b in 128-bit lane b */
	__m512 d;       /* d_x of block b in lanes 4b .. 4b+3 */
	float s[16];    /* s_x of block b at s[b] */
} xg4;

/* steps of activation blocks staged on the stack (32 KiB): k <= 16384;
 * a longer row takes the 4 x 1 tile */
enum { DXG = 128 };

/* tiles ahead that dtile prefetches: 2, because one tile (1,296 bytes of
 * 576-wide Q4_0 rows) ahead is too close to hide DRAM latency */
enum { DPF = 2 };

DEC_INLINE void xstage(xg4 *g, const pm_act32 *a, int nb)
{
	for (int j = 0; j < nb; j += 4) {
		__m128i lo[4], hi[4];
		float d[4], s[4];
		UNROLL for (int b = 0; b < 4; b++) {
			int in = j + b < nb;
			lo[b] = in ? _mm_loadu_si128((const __m128i *)a[j + b].q) : _mm_setzero_si128();
			hi[b] = in ? _mm_loadu_si128((const __m128i *)(a[j + b].q + 16)) : _mm_setzero_si128();
			d[b] = in ? a[j + b].d : 0.0f;
			s[b] = in ? a[j + b].s : 0.0f;
		}
		xg4 *p = g + j / 4;
		p->lo = _mm512_inserti32x4(
			_mm512_inserti32x4(_mm512_inserti32x4(_mm512_castsi128_si512(lo[0]), lo[1], 1), lo[2], 2),
			lo[3], 3);
		p->hi = _mm512_inserti32x4(
			_mm512_inserti32x4(_mm512_inserti32x4(_mm512_castsi128_si512(hi[0]), hi[1], 1), hi[2], 2),
			hi[3], 3);
		p->d = _mm512_setr_ps(d[0], d[0], d[0], d[0], d[1], d[1], d[1], d[1], d[2], d[2], d[2], d[2], d[3],
				      d[3], d[3], d[3]);
		memset(p->s, 0, sizeof p->s);
		memcpy(p->s, s, sizeof s);
	}
}

/* byte mask of the first n bytes of a 64-byte load (n may be <= 0 or >= 64) */
DEC_INLINE __mmask64 bmask(int n)
{
	return n <= 0 ? 0 : n >= 64 ? ~(__mmask64)0 : ((__mmask64)1 << n) - 1;
}

/* wix: the permute index of word w of a step's bytes, held by a (words
 * 0..31) and c (the step's bytes from cofs on: index 32 + w - cofs / 2) */
DEC_INLINE int wix(int w, int cofs)
{
	return w < 32 ? w : 32 + w - cofs / 2;
}

/* qidx: dest word 8b + i = word o * b + a + i (b < 4, i < 8), the 16
 * code bytes of block b into lane b (Q4_0: o 9, a 1; Q5_0: 11, 3) */
DEC_INLINE __m512i qidx(int o, int a, int cofs)
{
	int16_t v[32];
	for (int i = 0; i < 32; i++)
		v[i] = (int16_t)wix(o * (i / 8) + a + i % 8, cofs);
	return _mm512_loadu_si512((const void *)v);
}

/*
 * drow: the codes u of blocks b < t (t <= 4) of one row from sp (the
 * row's first block of the step), block b's elements 0..15 in lane b of
 * *lo and 16..31 in lane b of *hi; *a and *c the step's bytes 0..63 and
 * cofs.. cofs + 63 (dscales finds d_w there). The step's n bytes are
 * read with plain loads when n >= 64 (c the last 64 of them: masked byte
 * loads cost a twentieth of Q4_0's decode time), else masked (a row's
 * short last step; c unused).
 */
DEC_INLINE int cofs_of(const int T, const int t)
{
	return t * tbytes(T) >= 64 ? t * tbytes(T) - 64 : 64;
}

DEC_INLINE void drow(const int T, const uint8_t *sp, const int t, __m512i *lo, __m512i *hi, __m512i *a,
		     __m512i *c)
{
	const int n = t * tbytes(T), cofs = cofs_of(T, t);
	if (n >= 64) {
		*a = _mm512_loadu_si512((const void *)sp);
		*c = _mm512_loadu_si512((const void *)(sp + cofs));
	} else {
		*a = _mm512_maskz_loadu_epi8(bmask(n), sp);
		*c = _mm512_setzero_si512();
	}
	const __m512i m15 = _mm512_set1_epi8(15);
	if (T == T4_0) {
		__m512i q = _mm512_permutex2var_epi16(*a, qidx(9, 1, cofs), *c);
		*lo = _mm512_and_si512(q, m15);
		*hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), m15);
	} else { /* T5_0 */
		__m512i q = _mm512_permutex2var_epi16(*a, qidx(11, 3, cofs), *c);
		/* qh of block b: words 11b + 1 (bits 0..15) and 11b + 2 (16..31) */
		const __m512i hidx = _mm512_setr_epi32(1 | 12 << 16, 23 | wix(34, cofs) << 16, 2 | 13 << 16,
						       24 | wix(35, cofs) << 16, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
		__m128i h = _mm512_castsi512_si128(_mm512_permutex2var_epi16(*a, hidx, *c));
		const __m512i s16 = _mm512_set1_epi8(16);
		__m512i l = _mm512_and_si512(q, m15), u = _mm512_and_si512(_mm512_srli_epi16(q, 4), m15);
		*lo = _mm512_mask_add_epi8(l, (__mmask64)(uint64_t)_mm_cvtsi128_si64(h), l, s16);
		*hi = _mm512_mask_add_epi8(u, (__mmask64)(uint64_t)_mm_extract_epi64(h, 1), u, s16);
	}
}

/* dscales: the 16 d_w of a quad's step of t blocks as floats, block b row
 * r at lane 4b + r, from each row's *a, *c (drow) */
DEC_INLINE __m512 dscales(const int T, const int t, const __m512i *a, const __m512i *c)
{
	const int o = tbytes(T) / 2; /* block b's d is word o * b */
	__m512i d;
	if (3 * o < 32) {
		/* every d in the first 64 bytes: two rows per permute */
		int16_t v0[32] = {0}, v1[32] = {0};
		for (int b = 0; b < 4; b++) {
			v0[4 * b] = v1[4 * b + 2] = (int16_t)(o * b);
			v0[4 * b + 1] = v1[4 * b + 3] = (int16_t)(32 + o * b);
		}
		__m512i p = _mm512_permutex2var_epi16(a[0], _mm512_loadu_si512((const void *)v0), a[1]);
		__m512i q = _mm512_permutex2var_epi16(a[2], _mm512_loadu_si512((const void *)v1), a[3]);
		d = _mm512_castsi256_si512(
			_mm256_blend_epi32(_mm512_castsi512_si256(p), _mm512_castsi512_si256(q), 0xaa));
	} else {
		int16_t v[32] = {0};
		for (int b = 0; b < 4; b++)
			for (int r = 0; r < 4; r++)
				v[4 * b + r] = (int16_t)wix(o * b, cofs_of(T, t));
		__m512i ix = _mm512_loadu_si512((const void *)v);
		d = _mm512_permutex2var_epi16(a[0], ix, c[0]);
		d = _mm512_mask_mov_epi16(d, 0x22222222, _mm512_permutex2var_epi16(a[1], ix, c[1]));
		d = _mm512_mask_mov_epi16(d, 0x44444444, _mm512_permutex2var_epi16(a[2], ix, c[2]));
		d = _mm512_mask_mov_epi16(d, 0x88888888, _mm512_permutex2var_epi16(a[3], ix, c[3]));
	}
	return _mm512_cvtph_ps(_mm512_castsi512_si256(d));
}

/* dstep: blocks j .. j + t - 1 (t <= 4; sp = the offset of block j in a
 * row) of Q quads of rows wr into the quads' y and z */
DEC_INLINE void dstep(const int T, const int Q, const int t, const uint8_t *const *wr, size_t sp, const xg4 *g,
		      __m128 *y, __m128 *z)
{
	UNROLL for (int q = 0; q < Q; q++) {
		__m512i s[4], a[4], c[4];
		UNROLL for (int r = 0; r < 4; r++) {
			__m512i lo, hi;
			drow(T, wr[4 * q + r] + sp, t, &lo, &hi, &a[r], &c[r]);
			s[r] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, g->lo), hi, g->hi);
		}
		/* exact integer transpose-and-add: lane 4b + r = S of row r, block b */
		__m512i t0 = _mm512_add_epi32(_mm512_unpacklo_epi32(s[0], s[1]), _mm512_unpackhi_epi32(s[0], s[1]));
		__m512i t1 = _mm512_add_epi32(_mm512_unpacklo_epi32(s[2], s[3]), _mm512_unpackhi_epi32(s[2], s[3]));
		__m512 si = _mm512_cvtepi32_ps(
			_mm512_add_epi32(_mm512_unpacklo_epi64(t0, t1), _mm512_unpackhi_epi64(t0, t1)));
		__m512 dw = dscales(T, t, a, c);
		__m512 dd = _mm512_mul_ps(dw, g->d);
		__m512 mw = _mm512_mul_ps(dw, _mm512_set1_ps(-(float)offset(T)));
		__m128 yq = y[q], zq = z[q];
#define DEC_BLOCK(b)                                                                                         \
	if (b < t) {                                                                                         \
		yq = _mm_fmadd_ps(_mm512_extractf32x4_ps(dd, b), _mm512_extractf32x4_ps(si, b), yq);         \
		zq = _mm_fmadd_ps(_mm512_extractf32x4_ps(mw, b), _mm_broadcast_ss(&g->s[b]), zq);           \
	}

		DEC_BLOCK(0) DEC_BLOCK(1) DEC_BLOCK(2) DEC_BLOCK(3)
#undef DEC_BLOCK
		y[q] = yq, z[q] = zq;
	}
}

/* dtile: outputs of weight rows w .. w + nw - 1 (nw <= 4Q, rows rb bytes
 * apart) against the staged activation g; the 4Q rows of the tile after
 * the next are prefetched, a share per step (DPF: the next tile's lines
 * are in flight already, from the previous tile's prefetches) */
DEC_INLINE void dtile(const int T, const int Q, float *out, const uint8_t *w, size_t rb, int nw, const xg4 *g,
		      int nb)
{
	const int BB = tbytes(T), steps = (nb + 3) / 4;
	const uint8_t *wr[4 * Q];
	UNROLL for (int i = 0; i < 4 * Q; i++)
		wr[i] = w + (size_t)(i < nw ? i : nw - 1) * rb;
	const char *nx = (const char *)w + (size_t)(DPF * 4 * Q) * rb;
	size_t share = ((size_t)(4 * Q) * rb + (size_t)steps - 1) / (size_t)steps;
	__m128 y[Q], z[Q];
	UNROLL for (int q = 0; q < Q; q++)
		y[q] = z[q] = _mm_setzero_ps();
	int j = 0;
	for (; j + 4 <= nb; j += 4) {
		for (size_t o = 0; o < share; o += 64)
			_mm_prefetch(nx + (size_t)(j / 4) * share + o, _MM_HINT_T0);
		dstep(T, Q, 4, wr, (size_t)j * BB, g + j / 4, y, z);
	}
	if (j < nb) {
		for (size_t o = 0; o < share; o += 64)
			_mm_prefetch(nx + (size_t)(j / 4) * share + o, _MM_HINT_T0);
		dstep(T, Q, nb - j, wr, (size_t)j * BB, g + j / 4, y, z);
	}
	UNROLL for (int q = 0; q < Q; q++) {
		float v[4];
		_mm_storeu_ps(v, _mm_add_ps(y[q], z[q]));
		for (int i = 0; i < 4 && 4 * q + i < nw; i++)
			out[4 * q + i] = v[i];
	}
}

/*
 * decode512: one activation row, 4 weight rows at a time (dtile Q 1),
 * prefetching 2 tiles ahead (DPF). Measured on smollm2-135m's 210 Q4_0
 * layer matrices (576 and 1536 wide, 60 MB: from DRAM), one thread, best
 * of 60 passes: 8-row tiles (Q 2) prefetching the next tile, as this path
 * first ran, 4.1 ms, slower than the 4 x 1 tile (4.0 ms); 8 rows 2 tiles
 * ahead 3.5 ms; 4 rows 1 tile ahead 3.4 ms; 4 rows 2 tiles ahead 3.1 ms
 * (19 GB/s, the measured one-thread DRAM limit), 3 tiles 3.2, 4 tiles
 * 3.25; no software prefetch 5.3 ms, prefetcht1/t2 as slow as none. The
 * default model's 9 MB of Q4_0 (L3-resident): 0.370 ms at 8 rows, 0.372
 * at 4 (the 4 x 1 tile: 0.517). Q5_0: 4 rows 2 ahead 4.9 ms from DRAM
 * (8 rows: 5.6, the 4 x 1 tile 4.9) and 0.593 ms from L3 (8 rows: 0.618).
 */
DEC_INLINE void decode512(const int T, float *out, const char *x, const pm_weight *w, int m0, int m1)
{
	int nb = w->cols / 32;
	size_t rb = w->row_bytes;
	xg4 g[DXG];
	xstage(g, (const pm_act32 *)x, nb);
	for (int m = m0; m < m1; m += 4)
		dtile(T, 1, out + m, pm_weight_row(w, m), rb, m1 - m < 4 ? m1 - m : 4, g, nb);
}
