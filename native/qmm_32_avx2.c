/*
 * qmm_32_avx2.c: the AVX2 batch path (n > 1 activation rows: prefill and
 * batched decode) of the 32-block types, Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0,
 * without horizontal sums (qmm_32.c picks it for PM_ISA_AVX2; decode
 * stays in qmm_32_x86.h).
 *
 * The old AVX2 tile (qmm_32_x86.h's tile: 4 weight rows x 4 activation
 * rows) took each output's 8 int32 lanes per block to one sum with
 * vphaddd, several uops each on Zen 3, and spilled its accumulators:
 * prefill spent its time on lane sums, not multiplies. Here, as in the
 * VNNI batch path, a tile of 8 weight rows is interleaved per block so
 * that 32-bit lane i holds 4 codes of row i (g[j]: elements 4j .. 4j+3),
 * and the activation's 4 codes of group j, broadcast, meet every row at
 * once: vpmaddubsw gives each row's two pair sums in its lane's two int16
 * halves, the 8 groups are added in int16 and one vpmaddwd against ones
 * gives each row's S in its own lane. No int16 step saturates: a pair is
 * at most 2 * 15 * 128 = 3840 and a lane adds 8 pairs (30720 < 32767), so
 * S is exact; the float steps per block are qmm_32_x86.h's (y =
 * fmadd(d_w * d_x, float(S), y), z = fmadd(m', s_x, z), out y + z), so
 * every output is bitwise what the decode path and the other builds give,
 * whatever n, the tile or the split (test_quant.c checks it).
 *
 * The 5-bit types (Q5_0, Q5_1) take the same step with codes up to 31: a
 * pair reaches 2 * 31 * 128 = 7936, so int16 adds 4 groups (31744) and
 * each half block has its own vpmaddwd. Q8_0's signed codes q cannot be
 * unsigned operands (q + 128 would saturate the pairs), so its step is
 * qmm_32_x86.h's sign trick lane by lane: vpmaddubsw of |q| against the
 * activation codes given q's signs (pairs at most 2 * 128 * 127), one
 * vpmaddwd per group into int32, and 128 * (the activation block's sum)
 * added, so S is exactly the sum over q + 128 that the decode path takes
 * (y's step is the same and z's m' is -128 * d_w).
 *
 * The 8 rows' codes of a k-chunk of KB blocks are interleaved once into a
 * stack buffer in L1 (4 KiB, Q8_0 8 KiB with its signs) and shared by
 * every activation row of the chunk, 4 rows at a time so the integer sums
 * and float accumulators stay in registers; the next tile's rows are
 * prefetched block by block. The 4-bit types take y and z in two passes
 * (rows4, zrows), so 4 rows' sums and y fit the 16 ymm registers; their
 * row arrays have constant bounds and their int16 sums are pinned as
 * chains (see rows4), or gcc keeps them in memory. Tried and not kept
 * (kernel alone, default shapes, no faster in alternating runs): 5 or 6
 * rows a pass, a 16-row tile (two interleaved halves per broadcast),
 * vbroadcasti128 + vpshufd instead of a 32-bit broadcast per group, z
 * back in the y pass. Q8_0 batches of 8 and 14 to 16 rows (batched
 * decode) go to qmm_q8_0_xrows_avx2.c instead, which interleaves the
 * activation rows and not the weights (pm_q8_xrows_takes). Q4_0 in tiles
 * of 8 rows (PM_LAYOUT_Q32X8, q32x8.h) comes interleaved: xblock loads it.
 */
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#include <string.h>

#include "actquant.h"
#include "q32x8.h"
#include "qmm_32_avx2.h"
#include "qmm_q8_0_xrows_avx2.h"
#include "qmm_transpose.h"

#define A2_ATTR __attribute__((target("avx2,fma,f16c")))
#define A2_INLINE static inline __attribute__((always_inline, target("avx2,fma,f16c")))
#define A2_UNROLL _Pragma("GCC unroll 8")

/* KB: blocks per k-chunk (8 rows x KB blocks of codes, 4 KiB, stay in L1);
 * WT: weight rows per tile (the lanes of a ymm register); XCHUNK:
 * activation rows per pass (their quantized rows stay in L2) */
enum { KB = 16, WT = 8, XCHUNK = 64 };

/* the types of this file: bytes per block, whether a min (m_w) is stored,
 * the offset of the signed types' codes (m' = -offset * d_w) */
enum { Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 };

A2_INLINE int bbytes(const int T)
{
	return T == Q4_0 ? 18 : T == Q4_1 ? 20 : T == Q5_0 ? 22 : T == Q5_1 ? 24 : 34;
}

A2_INLINE int hasmin(const int T)
{
	return T == Q4_1 || T == Q5_1;
}

A2_INLINE float offs(const int T)
{
	return T == Q4_0 ? 8.0f : T == Q5_0 ? 16.0f : T == Q8_0 ? 128.0f : 0.0f;
}

/* a 32-bit load of 4 activation codes that may alias the int8 array */
typedef int32_t __attribute__((may_alias, aligned(1))) a2_i32;

/* codes5: a 5-bit block's 32 codes as bytes, element order: the low
 * nibbles of qs (elements 0..15, then their high nibbles 16..31), 16 added
 * where bit i of qh is set */
A2_INLINE __m256i codes5(const uint8_t *qh, const uint8_t *qs)
{
	__m128i v = _mm_loadu_si128((const __m128i *)qs), m = _mm_set1_epi8(15);
	__m256i lo = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m), _mm_and_si128(v, m));
	const __m256i shuf = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3,
					      3, 3, 3, 3, 3, 3, 3);
	const __m256i bit = _mm256_set1_epi64x(0x8040201008040201);
	uint32_t h;
	memcpy(&h, qh, 4);
	__m256i b = _mm256_shuffle_epi8(_mm256_set1_epi32((int)h), shuf);
	b = _mm256_cmpeq_epi8(_mm256_and_si256(b, bit), bit);
	return _mm256_or_si256(lo, _mm256_and_si256(b, _mm256_set1_epi8(16)));
}

/* wblock: block j of the 8 weight rows wr (at byte off) interleaved: g[j]
 * holds the codes of elements 4j .. 4j+3 of row i in lane i (Q4: 32-bit
 * word j of each row's qs masked to its low nibbles for j < 4, the high
 * nibbles for j + 4; Q8_0: |q|, with q itself in sg for its signs); dw
 * the scales, mw the min terms (m_w, or -offset * d_w: exact, a power of
 * two times d_w) */
A2_INLINE void wblock(const int T, __m256i g[8], __m256i sg[8], __m256 *dw, __m256 *mw, const uint8_t *const wr[8],
		      size_t off)
{
	uint16_t hd[8], hm[8];
	A2_UNROLL for (int i = 0; i < 8; i++) {
		memcpy(&hd[i], wr[i] + off, 2);
		memcpy(&hm[i], wr[i] + off + 2, 2);
	}
	if (T == Q4_0 || T == Q4_1) {
		const int qo = T == Q4_1 ? 4 : 2;
		__m256i r[4];
		A2_UNROLL for (int i = 0; i < 4; i++)
			r[i] = _mm256_set_m128i(_mm_loadu_si128((const __m128i *)(wr[i + 4] + off + qo)),
						_mm_loadu_si128((const __m128i *)(wr[i] + off + qo)));
		__m256i t0 = _mm256_unpacklo_epi32(r[0], r[1]), t1 = _mm256_unpackhi_epi32(r[0], r[1]);
		__m256i t2 = _mm256_unpacklo_epi32(r[2], r[3]), t3 = _mm256_unpackhi_epi32(r[2], r[3]);
		__m256i v[4] = {_mm256_unpacklo_epi64(t0, t2), _mm256_unpackhi_epi64(t0, t2),
				_mm256_unpacklo_epi64(t1, t3), _mm256_unpackhi_epi64(t1, t3)};
		const __m256i m = _mm256_set1_epi8(15);
		A2_UNROLL for (int j = 0; j < 4; j++) {
			g[j] = _mm256_and_si256(v[j], m);
			g[j + 4] = _mm256_and_si256(_mm256_srli_epi16(v[j], 4), m);
		}
	} else {
		__m256i u[8];
		A2_UNROLL for (int i = 0; i < 8; i++)
			u[i] = T == Q8_0   ? _mm256_loadu_si256((const __m256i *)(wr[i] + off + 2))
			       : T == Q5_0 ? codes5(wr[i] + off + 2, wr[i] + off + 6)
					   : codes5(wr[i] + off + 4, wr[i] + off + 8);
		pm_transpose8x32(g, u);
		if (T == Q8_0)
			A2_UNROLL for (int j = 0; j < 8; j++) {
				sg[j] = g[j];
				g[j] = _mm256_abs_epi8(g[j]);
			}
	}
	*dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)hd));
	*mw = hasmin(T) ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)hm))
			: _mm256_mul_ps(*dw, _mm256_set1_ps(-offs(T)));
}

/* xblock: wblock's g, dw and mw of block b of a Q4_0 tile in
 * PM_LAYOUT_Q32X8 at t (q32x8.h), nb blocks: its codes are stored
 * interleaved and its scales side by side */
A2_INLINE void xblock(__m256i g[8], __m256 *dw, __m256 *mw, const uint8_t *t, int nb, int b)
{
	*dw = pm_q32x8_block(g, pm_q32x8_codes(t, b), pm_q32x8_scales(t, nb, b));
	*mw = _mm256_mul_ps(*dw, _mm256_set1_ps(-offs(Q4_0)));
}

/* xsum128: 128 * the sum of an activation block's 32 codes, in every lane */
A2_INLINE __m256i xsum128(const int8_t *q)
{
	__m256i t = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), _mm256_loadu_si256((const __m256i *)q)),
				      _mm256_set1_epi16(1));
	t = _mm256_add_epi32(t, _mm256_shuffle_epi32(t, 0x4e));
	t = _mm256_add_epi32(t, _mm256_shuffle_epi32(t, 0xb1));
	t = _mm256_add_epi32(t, _mm256_permute2x128_si256(t, t, 1));
	return _mm256_slli_epi32(t, 7);
}

/* constant array bounds: an array sized by R is a variable-length array
 * to C even where R is a constant after inlining, and gcc then kept it on
 * the stack, re-aligned every block (the 4-bit types' rows4, and the
 * 5-bit types' int16 sums in rows: 1.2-1.4x on Q5_0 alone). rows' other
 * arrays stay [R]: with constant bounds Q8_0 measured 7 % slower. */
enum { RMAX = 4, R4MAX = 4, ZMAX = 8 };

/* rows: R activation rows (xs bytes apart, blocks k0 ..) against the
 * chunk's kn interleaved blocks, their accumulators y, z updated in block
 * order; S per row and weight lane exact (see the top). Q8_0 and the
 * 5-bit types only: batch gives Q4_0 and Q4_1 to rows4 and zrows. */
A2_INLINE void rows(const int T, const int R, __m256 *y, __m256 *z, const __m256i g[KB][8], const __m256i sg[KB][8],
		    const __m256 *dw, const __m256 *mw, const char *xq, size_t xs, const int32_t *x128, int nb, int k0,
		    int kn)
{
	__m256 yr[R], zr[R];
	A2_UNROLL for (int r = 0; r < R; r++)
		yr[r] = y[r], zr[r] = z[r];
	const __m256i ones = _mm256_set1_epi16(1);
	for (int b = 0; b < kn; b++) {
		const pm_act32 *a[R];
		__m256i s[R];
		A2_UNROLL for (int r = 0; r < R; r++)
			a[r] = (const pm_act32 *)(xq + (size_t)r * xs) + k0 + b;
		if (T == Q8_0) {
			A2_UNROLL for (int r = 0; r < R; r++)
				s[r] = x128 ? _mm256_set1_epi32(x128[(size_t)r * nb + k0 + b]) : xsum128(a[r]->q);
			/* row by row: the 8 groups' products of one row are
			 * added in two chains, so few registers are live (all
			 * rows' groups at once made gcc spill) */
			A2_UNROLL for (int r = 0; r < R; r++) {
				__m256i e = s[r], o = _mm256_setzero_si256();
				A2_UNROLL for (int j = 0; j < 8; j += 2) {
					__m256i x0 = _mm256_set1_epi32(*(const a2_i32 *)(a[r]->q + 4 * j));
					__m256i x1 = _mm256_set1_epi32(*(const a2_i32 *)(a[r]->q + 4 * j + 4));
					__m256i p0 = _mm256_maddubs_epi16(_mm256_load_si256(&g[b][j]),
									  _mm256_sign_epi8(x0, _mm256_load_si256(&sg[b][j])));
					__m256i p1 = _mm256_maddubs_epi16(
						_mm256_load_si256(&g[b][j + 1]),
						_mm256_sign_epi8(x1, _mm256_load_si256(&sg[b][j + 1])));
					e = _mm256_add_epi32(e, _mm256_madd_epi16(p0, ones));
					o = _mm256_add_epi32(o, _mm256_madd_epi16(p1, ones));
				}
				s[r] = _mm256_add_epi32(e, o);
			}
		} else {
			/* int16 sums of 4 groups (5-bit codes) */
			const int H = 4;
			A2_UNROLL for (int r = 0; r < R; r++)
				s[r] = _mm256_setzero_si256();
			A2_UNROLL for (int h = 0; h < 8; h += H) {
				__m256i s16[RMAX]; /* not [R]: see above */
				A2_UNROLL for (int r = 0; r < R; r++)
					s16[r] = _mm256_setzero_si256();
				A2_UNROLL for (int j = h; j < h + H; j++) {
					__m256i gj = _mm256_load_si256(&g[b][j]);
					A2_UNROLL for (int r = 0; r < R; r++) {
						__m256i x = _mm256_set1_epi32(*(const a2_i32 *)(a[r]->q + 4 * j));
						s16[r] = _mm256_add_epi16(s16[r], _mm256_maddubs_epi16(gj, x));
						__asm__("" : "+x"(s16[r])); /* a chain (rows4) */
					}
				}
				A2_UNROLL for (int r = 0; r < R; r++)
					s[r] = _mm256_add_epi32(s[r], _mm256_madd_epi16(s16[r], ones));
			}
		}
		A2_UNROLL for (int r = 0; r < R; r++) {
			__m256 si = _mm256_cvtepi32_ps(s[r]);
			yr[r] = _mm256_fmadd_ps(_mm256_mul_ps(dw[b], _mm256_set1_ps(a[r]->d)), si, yr[r]);
			zr[r] = _mm256_fmadd_ps(mw[b], _mm256_set1_ps(a[r]->s), zr[r]);
		}
	}
	A2_UNROLL for (int r = 0; r < R; r++)
		y[r] = yr[r], z[r] = zr[r];
}

/* rows4: the 4-bit types' y steps of R activation rows against the
 * chunk's kn interleaved blocks (z has its own pass, zrows: with both in
 * the loop, 4 rows' s, y and z and the operands did not fit in 16 ymm
 * registers and gcc kept y and z in memory and spilled the int16 sums).
 * Per block and row: the 8 groups' int16 sums, one vpmaddwd; y's float
 * step in block order as the decode path's. */
A2_INLINE void rows4(const int R, __m256 *y, const __m256i g[KB][8], const __m256 *dw, const char *xq, size_t xs,
		     int k0, int kn)
{
	__m256 yr[R4MAX];
	A2_UNROLL for (int r = 0; r < R; r++)
		yr[r] = y[r];
	const __m256i ones = _mm256_set1_epi16(1);
	for (int b = 0; b < kn; b++) {
		const pm_act32 *a[R4MAX];
		__m256i s[R4MAX];
		A2_UNROLL for (int r = 0; r < R; r++)
			a[r] = (const pm_act32 *)(xq + (size_t)r * xs) + k0 + b;
		A2_UNROLL for (int r = 0; r < R; r++)
			s[r] = _mm256_setzero_si256();
		A2_UNROLL for (int j = 0; j < 8; j++) {
			__m256i gj = _mm256_load_si256(&g[b][j]);
			A2_UNROLL for (int r = 0; r < R; r++) {
				__m256i x = _mm256_set1_epi32(*(const a2_i32 *)(a[r]->q + 4 * j));
				s[r] = _mm256_add_epi16(s[r], _mm256_maddubs_epi16(gj, x));
				/* the sum stays a chain in a register: gcc
				 * otherwise reassociates it into a tree of all
				 * 8R products and spills them */
				__asm__("" : "+x"(s[r]));
			}
		}
		A2_UNROLL for (int r = 0; r < R; r++) {
			__m256 si = _mm256_cvtepi32_ps(_mm256_madd_epi16(s[r], ones));
			yr[r] = _mm256_fmadd_ps(_mm256_mul_ps(dw[b], _mm256_set1_ps(a[r]->d)), si, yr[r]);
		}
	}
	A2_UNROLL for (int r = 0; r < R; r++)
		y[r] = yr[r];
}

/* zrows: the min terms z of R activation rows over the chunk's kn blocks,
 * z = fmadd(m', s_x, z) in block order, as the decode path's */
A2_INLINE void zrows(const int R, __m256 *z, const __m256 *mw, const char *xq, size_t xs, int k0, int kn)
{
	__m256 zr[ZMAX];
	A2_UNROLL for (int r = 0; r < R; r++)
		zr[r] = z[r];
	for (int b = 0; b < kn; b++)
		A2_UNROLL for (int r = 0; r < R; r++)
			zr[r] = _mm256_fmadd_ps(mw[b], _mm256_set1_ps(((const pm_act32 *)(xq + (size_t)r * xs))[k0 + b].s),
						zr[r]);
	A2_UNROLL for (int r = 0; r < R; r++)
		z[r] = zr[r];
}

/* tile8: outputs of weight rows w .. w + nw - 1 (nw <= 8, rb bytes apart;
 * a short tile repeats its last row and stores nw outputs; X8 (Q4_0): w
 * is a tile of PM_LAYOUT_Q32X8, nw 8) against the n (<= XCHUNK)
 * activation rows at xq. Block j of the next tile (the bytes after these)
 * is prefetched with block j of this one: the hardware prefetcher does
 * not follow 8 interleaved row streams. */
A2_INLINE void tile8(const int T, const int X8, float *out, size_t ldo, const uint8_t *w, size_t rb, int nw,
		     const char *xq, size_t xs, const int32_t *x128, int n, int nb)
{
	const int BB = bbytes(T);
	__m256i g[KB][8], sg[T == Q8_0 ? KB : 1][8];
	__m256 dw[KB], mw[KB], y[XCHUNK], z[XCHUNK];
	const uint8_t *wr[WT];
	A2_UNROLL for (int i = 0; i < WT; i++)
		wr[i] = w + (size_t)(i < nw ? i : nw - 1) * rb;
	for (int r = 0; r < n; r++)
		y[r] = z[r] = _mm256_setzero_ps();
	const char *nx = (const char *)w + WT * rb;
	for (int k0 = 0; k0 < nb; k0 += KB) {
		int kn = nb - k0 < KB ? nb - k0 : KB;
		for (int b = 0; b < kn; b++) {
			size_t off = (size_t)(k0 + b) * BB;
			for (int o = 0; o < WT * BB; o += 64)
				_mm_prefetch(nx + WT * off + o, _MM_HINT_T0);
			if (X8)
				xblock(g[b], &dw[b], &mw[b], w, nb, k0 + b);
			else
				wblock(T, g[b], sg[T == Q8_0 ? b : 0], &dw[b], &mw[b], wr, off);
		}
		if (T == Q4_0 || T == Q4_1) {
			int r = 0;
			for (; r + 4 <= n; r += 4)
				rows4(4, y + r, g, dw, xq + (size_t)r * xs, xs, k0, kn);
			if (r + 2 <= n) {
				rows4(2, y + r, g, dw, xq + (size_t)r * xs, xs, k0, kn);
				r += 2;
			}
			if (r < n)
				rows4(1, y + r, g, dw, xq + (size_t)r * xs, xs, k0, kn);
			for (r = 0; r + 8 <= n; r += 8)
				zrows(8, z + r, mw, xq + (size_t)r * xs, xs, k0, kn);
			for (; r < n; r++)
				zrows(1, z + r, mw, xq + (size_t)r * xs, xs, k0, kn);
			continue;
		}
		/* Q8_0 takes 3 rows at a time (4 measured no faster: its
		 * rows keep y, z and two int32 chains each) */
		const int R4 = T == Q8_0 ? 3 : 4;
		int r = 0;
		for (; r + R4 <= n; r += R4)
			rows(T, R4, y + r, z + r, g, (const __m256i(*)[8])sg, dw, mw, xq + (size_t)r * xs, xs,
			     x128 ? x128 + (size_t)r * nb : NULL, nb, k0, kn);
		if (r + 2 <= n) {
			rows(T, 2, y + r, z + r, g, (const __m256i(*)[8])sg, dw, mw, xq + (size_t)r * xs, xs,
			     x128 ? x128 + (size_t)r * nb : NULL, nb, k0, kn);
			r += 2;
		}
		if (r < n)
			rows(T, 1, y + r, z + r, g, (const __m256i(*)[8])sg, dw, mw, xq + (size_t)r * xs, xs,
			     x128 ? x128 + (size_t)r * nb : NULL, nb, k0, kn);
	}
	for (int r = 0; r < n; r++) {
		float *o = out + (size_t)r * ldo;
		__m256 v = _mm256_add_ps(y[r], z[r]);
		if (nw == WT) {
			_mm256_storeu_ps(o, v);
		} else {
			float t[WT];
			_mm256_storeu_ps(t, v);
			for (int i = 0; i < nw; i++)
				o[i] = t[i];
		}
	}
}

/* XNB: the most blocks per row whose Q8_0 activation sums batch keeps
 * (XCHUNK x XNB int32, 64 KiB of stack): 8,192 columns; wider rows
 * compute them per tile */
enum { XNB = 256 };

A2_INLINE void batch(const int T, float *out, size_t ldo, const char *x, size_t xs, const pm_weight *w, int n,
		     int m0, int m1)
{
	int nb = w->cols / 32;
	if (T == Q8_0 && pm_q8_xrows_takes(n, nb)) {
		pm_qmm_q8_0_xrows_avx2(out, ldo, x, xs, w, n, m0, m1);
		return;
	}
	size_t rb = w->row_bytes;
	int32_t x128[T == Q8_0 ? XCHUNK * XNB : 1];
	for (int r0 = 0; r0 < n; r0 += XCHUNK) {
		int rn = n - r0 < XCHUNK ? n - r0 : XCHUNK;
		const char *xc = x + (size_t)r0 * xs;
		/* Q8_0: each activation block's 128 * (sum of codes), once
		 * for every weight tile */
		int pre = T == Q8_0 && nb <= XNB;
		if (pre)
			for (int r = 0; r < rn; r++)
				for (int b = 0; b < nb; b++)
					x128[r * nb + b] = _mm256_cvtsi256_si32(
						xsum128(((const pm_act32 *)(xc + (size_t)r * xs) + b)->q));
		if (T == Q4_0 && w->layout == PM_LAYOUT_Q32X8) /* whole tiles (forward.c's MM_UNIT) */
			for (int m = m0; m < m1; m += WT)
				tile8(T, 1, out + (size_t)r0 * ldo + m, ldo, pm_weight_row(w, m), rb, WT, xc, xs, NULL,
				      rn, nb);
		else
			for (int m = m0; m < m1; m += WT)
				tile8(T, 0, out + (size_t)r0 * ldo + m, ldo, pm_weight_row(w, m), rb,
				      m1 - m < WT ? m1 - m : WT, xc, xs, pre ? x128 : NULL, rn, nb);
	}
}

/* the batch kernel of each type (qmm_32_avx2.h) */
#define A2_BATCH(name, T)                                                                                        \
	A2_ATTR void name(float *out, size_t ldo, const void *xq, size_t xs, const pm_weight *w, int n, int m0, \
			  int m1)                                                                                \
	{                                                                                                        \
		batch(T, out, ldo, xq, xs, w, n, m0, m1);                                                        \
	}
A2_BATCH(pm_qmm_q4_0_avx2_batch, Q4_0)
A2_BATCH(pm_qmm_q4_1_avx2_batch, Q4_1)
A2_BATCH(pm_qmm_q5_0_avx2_batch, Q5_0)
A2_BATCH(pm_qmm_q5_1_avx2_batch, Q5_1)
A2_BATCH(pm_qmm_q8_0_avx2_batch, Q8_0)
#undef A2_BATCH
#else
typedef int pm_qmm_32_avx2_empty; /* ISO C wants a declaration */
#endif
