/*
 * qmv_32_avx2.c: the AVX2 decode path (n == 1: one activation row) of the
 * 32-block types, Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 (qmm_32.c picks it for
 * PM_ISA_AVX2; batches take qmm_32_avx2.c).
 *
 * The 4 x 1 tile this replaces (qmm_32_x86.h's tile: 4 weight rows, their
 * outputs the lanes of a 128-bit accumulator) took each row's 8 int32
 * lanes of a block to one sum with vphaddd, and gathered the 4 rows'
 * scales and broadcast the activation's per block: on the default Q4_0
 * model (L3-resident) decode was bound by those operations, not by loads.
 * Here, as in the batch tiles, 8 weight rows are interleaved per block so
 * that 32-bit lane i holds 4 codes of row i (g[j]: elements 4j .. 4j+3),
 * and the activation's 4 codes of group j, broadcast, meet all 8 rows at
 * once: vpmaddubsw gives each row's pair sums in its own lane, the groups
 * are added in int16 and vpmaddwd against ones gives each row's S in its
 * lane. The float steps per block are qmm_32_x86.h's, lane by lane:
 *
 *	y = fmadd(d_w * d_x, float(S), y)
 *	z = fmadd(m', s_x, z)       m' = m_w (Q4_1, Q5_1), else -offset * d_w
 *
 * (for the signed types taken as fmadd(d_w, -offset * s_x, z), the same
 * product: see qmv) and the output y + z; S is exact (below), so every
 * output is bitwise what the batch tiles, the VNNI builds and the old tile
 * give, whatever the row split (test_quant.c checks it).
 *
 * Integer bounds (no int16 step saturates; activation codes are in
 * [-127, 127]): Q4 pairs reach 2 * 15 * 127 and 8 groups add in int16
 * (30480); Q5 codes reach 31, so each half block (4 groups: 31496) has
 * its own vpmaddwd. Q4 codes come from each row's qs words, transposed
 * (word j masked to its low nibbles is group j, its high nibbles group
 * j + 4); Q5 adds 16 where the row's qh bit is set, group j's 4 bits
 * being bits 4j .. 4j+3 of qh whichever nibble it is. Q8_0 is not
 * interleaved (its 32 codes need no unpacking, and transposing them
 * measured no faster): each row takes the sign trick (|q| against the
 * activation given q's signs, pairs at most 2 * 128 * 127, one vpmaddwd),
 * a vphaddd tree brings the 8 rows' lanes into lane i, and 128 * the
 * activation block's sum is added, so S is the sum over q + 128 that the
 * other paths take. Against the 4 x 1 tile, one tree serves 8 rows, and
 * the scales and float steps are 8 lanes wide.
 *
 * The rows of the tile after the next are prefetched, a share per block
 * (the old tile prefetched the next one): the hardware prefetcher does
 * not follow 8 row streams.
 *
 * Q4_0 in tiles of 8 rows (PM_LAYOUT_Q32X8, q32x8.h: the AVX2 engine
 * repacks it) skips the interleave and the scale gather: tile8_x8 loads
 * the 4 code words of the 8 rows and their 8 scales as they lie. Default
 * Q4_0 decode (L3-resident, alternating pmbench, AMD EPYC Zen 4 on this
 * path): 1.38x at one thread, 1.58x at two.
 */
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#include <string.h>

#include "actquant.h"
#include "q32x8.h"
#include "qmm_transpose.h"
#include "qmv_32_avx2.h"

#define V2_ATTR __attribute__((target("avx2,fma,f16c")))
#define V2_INLINE static inline __attribute__((always_inline, target("avx2,fma,f16c")))
#define V2_UNROLL _Pragma("GCC unroll 8")

enum { Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 };
/* tiles ahead that tile8 prefetches: the next tile (1 x 8 rows) is too
 * close to arrive in time; 2 and 3 measured alike (default Q4_0 decode,
 * one thread, 1.14x and 1.17x against 1 in alternating runs) */
enum { DPF = 2 };

/* the most bytes ahead that tile8 prefetches into L1 (half of a 32 KiB
 * L1d); tiles whose DPF tiles ahead lie farther, or of a matrix streamed
 * from memory (pm_weight.far: panels.c), are prefetched into L2
 * instead: prefetched into L1 from 2 tiles of 8 rows ahead (35 KiB for
 * llama-3.2-1b's 2048-wide Q8_0 rows) the lines were evicted before use,
 * and decode read 9.6 tokens/s against 15.4 into L2 (alternating pmbench,
 * one thread, AMD EPYC Zen 4); the default model's rows (8.7 KiB ahead,
 * L3-resident) ran 0.89x into L2 and stay in L1. */
enum { PF_L1 = 16384 };

/* the most blocks (rows of 16384) whose Q8_0 activation sums qmv
 * computes once, on the stack (2 KiB), rather than once per tile */
enum { XS_MAX = 512 };

/* bytes per block; the offsets of a block's qs and (Q5) qh */
V2_INLINE int bbytes(const int T)
{
	return T == Q4_0 ? 18 : T == Q4_1 ? 20 : T == Q5_0 ? 22 : T == Q5_1 ? 24 : 34;
}

V2_INLINE int qsoff(const int T)
{
	return T == Q4_0 ? 2 : T == Q4_1 ? 4 : T == Q5_0 ? 6 : T == Q5_1 ? 8 : 2;
}

V2_INLINE int qhoff(const int T)
{
	return T == Q5_0 ? 2 : 4;
}

V2_INLINE int hasmin(const int T)
{
	return T == Q4_1 || T == Q5_1;
}

/* the signed types' code offset (m' = -offset * d_w: exact, a power of
 * two times d_w) */
V2_INLINE float offs(const int T)
{
	return T == Q4_0 ? 8.0f : T == Q5_0 ? 16.0f : T == Q8_0 ? 128.0f : 0.0f;
}

/* a 32-bit load of 4 activation codes that may alias the int8 array */
typedef int32_t __attribute__((may_alias, aligned(1))) v2_i32;

/* half8: the 8 F16 values at wr[i] + off as floats, lane i (built in
 * general registers: the vector inserts cost more) */
V2_INLINE __m256 half8(const uint8_t *const wr[8], size_t off)
{
	uint64_t v[2] = {0, 0};
	V2_UNROLL for (int i = 0; i < 8; i++) {
		uint16_t h;
		memcpy(&h, wr[i] + off, 2);
		v[i / 4] |= (uint64_t)h << (16 * (i % 4));
	}
	return _mm256_cvtph_ps(_mm_set_epi64x((long long)v[1], (long long)v[0]));
}

/* nib8: the 4-bit codes of block off of the 8 rows, interleaved (see the
 * top): g[j] lane i = elements 4j .. 4j+3 of row i */
V2_INLINE void nib8(const int T, __m256i g[8], const uint8_t *const wr[8], size_t off)
{
	pm_interleave_nib8(g, wr, off + qsoff(T));
}

/* hi8: Q5's fifth bits onto the interleaved codes g: 16 in byte k of lane
 * i of g[j] where bit 4j + k of row i's qh is set */
V2_INLINE void hi8(const int T, __m256i g[8], const uint8_t *const wr[8], size_t off)
{
	uint32_t h[8];
	V2_UNROLL for (int i = 0; i < 8; i++)
		memcpy(&h[i], wr[i] + off + qhoff(T), 4);
	__m256i q = _mm256_setr_epi32((int)h[0], (int)h[1], (int)h[2], (int)h[3], (int)h[4], (int)h[5], (int)h[6],
				      (int)h[7]);
	const __m256i lane = _mm256_setr_epi8(0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12, 0, 0, 0, 0, 4, 4, 4,
					      4, 8, 8, 8, 8, 12, 12, 12, 12);
	const __m256i s16 = _mm256_set1_epi8(16);
	V2_UNROLL for (int j = 0; j < 8; j++) {
		/* byte j / 2 of each lane's qh into its 4 bytes, then bit
		 * 4 (j % 2) + k of byte k */
		__m256i b = _mm256_shuffle_epi8(q, _mm256_add_epi8(lane, _mm256_set1_epi8((char)(j / 2))));
		__m256i bit = _mm256_set1_epi32(j % 2 ? (int)0x80402010 : 0x08040201);
		b = _mm256_cmpeq_epi8(_mm256_and_si256(b, bit), bit);
		g[j] = _mm256_or_si256(g[j], _mm256_and_si256(b, s16));
	}
}

/* xsum128: 128 * the sum of activation block a's codes (Q8_0's term
 * added to S: see the top), in every lane */
V2_INLINE __m256i xsum128(const pm_act32 *a)
{
	const __m256i ones = _mm256_set1_epi16(1);
	__m256i x = _mm256_loadu_si256((const __m256i *)a->q);
	__m256i t = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), x), ones);
	t = _mm256_add_epi32(t, _mm256_shuffle_epi32(t, 0x4e));
	t = _mm256_add_epi32(t, _mm256_shuffle_epi32(t, 0xb1));
	t = _mm256_add_epi32(t, _mm256_permute2x128_si256(t, t, 1));
	return _mm256_slli_epi32(t, 7);
}

/* sum8: S of the 8 rows' interleaved 4- or 5-bit codes g (lane i row
 * i's) against activation block a (exact: see the top) */
V2_INLINE __m256i sum8(const int T, const __m256i g[8], const pm_act32 *a)
{
	const __m256i ones = _mm256_set1_epi16(1);
	/* Q4: the 8 groups in int16; Q5: each half's 4 */
	const int H = T == Q4_0 || T == Q4_1 ? 8 : 4;
	__m256i s = _mm256_setzero_si256();
	V2_UNROLL for (int h = 0; h < 8; h += H) {
		__m256i p = _mm256_setzero_si256(), q = _mm256_setzero_si256();
		V2_UNROLL for (int j = h; j < h + H; j += 2) {
			p = _mm256_add_epi16(p, _mm256_maddubs_epi16(
							g[j], _mm256_set1_epi32(*(const v2_i32 *)(a->q + 4 * j))));
			q = _mm256_add_epi16(q, _mm256_maddubs_epi16(
							g[j + 1], _mm256_set1_epi32(*(const v2_i32 *)(a->q + 4 * j + 4))));
		}
		s = _mm256_add_epi32(s, _mm256_madd_epi16(_mm256_add_epi16(p, q), ones));
	}
	return s;
}

/* dot8: S of block off of the 8 rows against activation block a, row i's
 * in lane i (exact: see the top); xs (Q8_0, or NULL): the blocks'
 * xsum128, computed once per call instead of once per tile */
V2_INLINE __m256i dot8(const int T, const uint8_t *const wr[8], size_t off, const pm_act32 *a,
		       const int32_t *xs)
{
	const __m256i ones = _mm256_set1_epi16(1);
	if (T == Q8_0) {
		/* row by row: S's 8 partial lanes, then the 8 rows' lanes
		 * summed by a vphaddd tree into lane i (exact integers) */
		__m256i x = _mm256_loadu_si256((const __m256i *)a->q), p[8];
		V2_UNROLL for (int i = 0; i < 8; i++) {
			__m256i q = _mm256_loadu_si256((const __m256i *)(wr[i] + off + 2));
			p[i] = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(q), _mm256_sign_epi8(x, q)), ones);
		}
		__m256i h0 = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
		__m256i h1 = _mm256_hadd_epi32(_mm256_hadd_epi32(p[4], p[5]), _mm256_hadd_epi32(p[6], p[7]));
		/* h0: rows 0..3's sums over elements 0..15 in the low half,
		 * 16..31 in the high half; h1 rows 4..7's */
		__m256i s = _mm256_add_epi32(_mm256_permute2x128_si256(h0, h1, 0x20),
					     _mm256_permute2x128_si256(h0, h1, 0x31));
		/* + 128 * the activation block's sum, in every lane */
		return _mm256_add_epi32(s, xs ? _mm256_set1_epi32(*xs) : xsum128(a));
	}
	__m256i g[8];
	nib8(T, g, wr, off);
	if (T == Q5_0 || T == Q5_1)
		hi8(T, g, wr, off);
	return sum8(T, g, a);
}

/* pf_share: a block's share of the tile DPF tiles on, share bytes at p,
 * prefetched into L1 or (L2 set: PF_L1) into L2 */
V2_INLINE void pf_share(const int L2, const char *p, size_t share)
{
	for (size_t o = 0; o < share; o += 64)
		if (L2)
			_mm_prefetch(p + o, _MM_HINT_T1);
		else
			_mm_prefetch(p + o, _MM_HINT_T0);
}

/* tile8: outputs of weight rows w .. w + nw - 1 (nw <= 8, rb bytes apart;
 * a short tile repeats its last row and stores nw outputs) against the
 * activation row a of nb blocks; the 8 rows DPF tiles on (where the
 * tile after the next starts) are prefetched, a share per block, into L1
 * or (L2 set: PF_L1) into L2 */
V2_INLINE void tile8(const int T, const int L2, float *out, const uint8_t *w, size_t rb, int nw, const pm_act32 *a,
		     int nb, const int32_t *xs, const float *zs)
{
	const int BB = bbytes(T);
	const uint8_t *wr[8];
	V2_UNROLL for (int i = 0; i < 8; i++)
		wr[i] = w + (size_t)(i < nw ? i : nw - 1) * rb;
	const char *nx = (const char *)w + (size_t)(8 * DPF) * rb;
	size_t share = (8 * rb + (size_t)nb - 1) / (size_t)nb;
	__m256 y = _mm256_setzero_ps(), z = _mm256_setzero_ps();
	for (int j = 0; j < nb; j++) {
		pf_share(L2, nx + (size_t)j * share, share);
		size_t off = (size_t)j * BB;
		__m256 si = _mm256_cvtepi32_ps(dot8(T, wr, off, a + j, xs ? xs + j : NULL));
		__m256 dw = half8(wr, off);
		y = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(a[j].d)), si, y);
		if (hasmin(T))
			z = _mm256_fmadd_ps(half8(wr, off + 2), _mm256_set1_ps(a[j].s), z);
		else if (zs)
			z = _mm256_fmadd_ps(dw, _mm256_set1_ps(zs[j]), z);
		else
			z = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(-offs(T))), _mm256_set1_ps(a[j].s), z);
	}
	__m256 v = _mm256_add_ps(y, z);
	if (nw == 8) {
		_mm256_storeu_ps(out, v);
	} else {
		float t[8];
		_mm256_storeu_ps(t, v);
		for (int i = 0; i < nw; i++)
			out[i] = t[i];
	}
}

/* tile8_x8: tile8 on a tile of Q4_0 in PM_LAYOUT_Q32X8 at t (q32x8.h):
 * the codes come interleaved and the 8 scales in one vector, so a block
 * takes 4 loads and masks where the rows take a transpose and a gather;
 * the same integer sums and float steps, so the same bits */
V2_INLINE void tile8_x8(const int L2, float *out, const uint8_t *t, size_t rb, const pm_act32 *a, int nb,
			const float *zs)
{
	const char *nx = (const char *)t + (size_t)(8 * DPF) * rb;
	size_t share = (8 * rb + (size_t)nb - 1) / (size_t)nb;
	const __m256 off = _mm256_set1_ps(-offs(Q4_0));
	__m256 y = _mm256_setzero_ps(), z = _mm256_setzero_ps();
	for (int j = 0; j < nb; j++) {
		pf_share(L2, nx + (size_t)j * share, share);
		__m256i g[8];
		__m256 dw = pm_q32x8_block(g, pm_q32x8_codes(t, j), pm_q32x8_scales(t, nb, j));
		__m256 si = _mm256_cvtepi32_ps(sum8(Q4_0, g, a + j));
		y = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(a[j].d)), si, y);
		if (zs)
			z = _mm256_fmadd_ps(dw, _mm256_set1_ps(zs[j]), z);
		else
			z = _mm256_fmadd_ps(_mm256_mul_ps(dw, off), _mm256_set1_ps(a[j].s), z);
	}
	_mm256_storeu_ps(out, _mm256_add_ps(y, z));
}

int pm_qmv_32_avx2_wide(size_t row_bytes)
{
	return (size_t)(8 * DPF) * row_bytes > PF_L1;
}

V2_INLINE void qmv(const int T, float *out, const void *xq, const pm_weight *w, int m0, int m1)
{
	int nb = w->cols / 32;
	size_t rb = w->row_bytes;
	const pm_act32 *a = (const pm_act32 *)xq;
	int32_t xsb[XS_MAX];
	const int32_t *xs = NULL;
	if (T == Q8_0 && nb <= XS_MAX) {
		for (int j = 0; j < nb; j++)
			xsb[j] = _mm256_cvtsi256_si32(xsum128(a + j));
		xs = xsb;
	}
	/* z's steps as fmadd(d_w, -offset * s_x, z): -offset * s_x is made
	 * once per call, not -offset * d_w once per block and tile; both are
	 * exact (a power of two), and the fmadd does not round the product,
	 * so the same bits for a multiply fewer */
	float zsb[XS_MAX];
	const float *zs = NULL;
	if (!hasmin(T) && nb <= XS_MAX) {
		for (int j = 0; j < nb; j++)
			zsb[j] = -offs(T) * a[j].s;
		zs = zsb;
	}
	if (T == Q4_0 && w->layout == PM_LAYOUT_Q32X8) {
		/* whole tiles: m0, m1 multiples of 8 (forward.c's MM_UNIT) */
		if (w->far || pm_qmv_32_avx2_wide(rb))
			for (int m = m0; m < m1; m += 8)
				tile8_x8(1, out + m, pm_weight_row(w, m), rb, a, nb, zs);
		else
			for (int m = m0; m < m1; m += 8)
				tile8_x8(0, out + m, pm_weight_row(w, m), rb, a, nb, zs);
		return;
	}
	if (w->far || pm_qmv_32_avx2_wide(rb))
		for (int m = m0; m < m1; m += 8)
			tile8(T, 1, out + m, pm_weight_row(w, m), rb, m1 - m < 8 ? m1 - m : 8, a, nb, xs, zs);
	else
		for (int m = m0; m < m1; m += 8)
			tile8(T, 0, out + m, pm_weight_row(w, m), rb, m1 - m < 8 ? m1 - m : 8, a, nb, xs, zs);
}

/* the decode kernel of each type (qmv_32_avx2.h) */
#define V2_QMV(name, T)                                                                      \
	V2_ATTR void name(float *out, const void *xq, const pm_weight *w, int m0, int m1)    \
	{                                                                                    \
		qmv(T, out, xq, w, m0, m1);                                                  \
	}
V2_QMV(pm_qmv_q4_0_avx2, Q4_0)
V2_QMV(pm_qmv_q4_1_avx2, Q4_1)
V2_QMV(pm_qmv_q5_0_avx2, Q5_0)
V2_QMV(pm_qmv_q5_1_avx2, Q5_1)
V2_QMV(pm_qmv_q8_0_avx2, Q8_0)
#undef V2_QMV
#else
typedef int pm_qmv_32_avx2_empty; /* ISO C wants a declaration */
#endif
