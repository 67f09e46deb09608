/*
 * qmm_32_x86.h: the x86 kernels of qmm_32.c, written once and built twice:
 * by qmm_32_avxvnni.c for AVX-VNNI (QMM_VNNI 0, QMM_AVXVNNI 1) and by
 * qmm_32_vnni.c for AVX-512 VNNI (QMM_VNNI 1: 256-bit registers for
 * decode, 512-bit lanes for the batch path's 16-row tiles). Plain AVX2
 * runs its own interleaved tiles instead (qmv_32_avx2.c for decode,
 * qmm_32_avx2.c for batches), which took the place of this header's AVX2
 * build. Only the integer step differs (maddubs + madd, or one vpdpbusd);
 * its lanes are exact integers either way and every float operation is
 * the same, so every build gives bitwise the same results (test_quant.c
 * checks it). The includer defines
 * QMM_TARGET (the target attribute string), QMM_VNNI and QMM_FN (the name
 * of the function returning a type's kernel), and may define QMM_AVXVNNI 1
 * (with QMM_VNNI 0: qmm_32_avxvnni.c): the AVX2 build's tiles with the
 * integer step one VEX vpdpbusd, for CPUs with AVX-VNNI but no AVX-512.
 *
 * An output is a sum over blocks. Per block, with u the weights' unsigned
 * codes (Q8_0: q + 128; Q4_0, Q5_0: the stored code, offset 8 or 16 still
 * in; Q4_1, Q5_1: the code) and S = sum u * q_x (exact integer):
 *
 *	y = fmadd(d_w * d_x, float(S), y)
 *	z = fmadd(m', s_x, z)       m' = m_w (Q4_1, Q5_1), else -offset * d_w
 *
 * and the output is y + z (two chains, so their latencies overlap; -offset
 * * d_w is exact: a power of two times d_w). The sequence depends
 * only on k, and every path below computes S exactly, so decode (4 weight
 * rows, their 4 outputs the lanes of one accumulator, the next 4 rows
 * prefetched; on VNNI, Q4_0 and Q5_0 in 512-bit steps of 4 blocks x 4
 * rows, decode512), the AVX2 batch tiles (4 weight rows x 4, 2 or 1 activation
 * rows) and the VNNI batch path (16 weight rows interleaved into the lanes
 * of 512-bit registers, each activation group of 4 codes broadcast against
 * them: no horizontal sums; lanes never mix, so the width changes no
 * operation of an output) give every output bitwise the same value,
 * whatever n or the split.
 */
#include <immintrin.h>
#include <string.h>

#include "actquant.h"
#include "q32x8.h"
#include "qmm_transpose.h"

#ifndef QMM_AVXVNNI
#define QMM_AVXVNNI 0
#endif
/* QMM_DP: the integer step is vpdpbusd (unsigned weight codes, no sign trick) */
#define QMM_DP (QMM_VNNI || QMM_AVXVNNI)

#define QMM_ATTR __attribute__((target(QMM_TARGET)))
#define QMM_INLINE static inline __attribute__((always_inline, target(QMM_TARGET)))

/* the loops over a tile's 4 weight rows and R activation rows are unrolled
 * so the accumulators live in registers (-O2 does not unroll them) */
#define UNROLL _Pragma("GCC unroll 8")

/* T4X: Q4_0 in tiles of 8 rows (PM_LAYOUT_Q32X8, q32x8.h), the VNNI
 * batch path's only: the codes come interleaved (wblock8) */
enum { T8_0, T4_0, T4_1, T5_0, T5_1, T4X };

QMM_INLINE int tbytes(const int T)
{
	return T == T8_0 ? 34 : T == T4_0 || T == T4X ? 18 : T == T4_1 ? 20 : T == T5_0 ? 22 : 24;
}

QMM_INLINE int has_min(const int T)
{
	return T == T4_1 || T == T5_1;
}

/* nib32: a block's 32 4-bit codes as bytes, element order */
QMM_INLINE __m256i nib32(const uint8_t *qs)
{
	__m128i v = _mm_loadu_si128((const __m128i *)qs), m = _mm_set1_epi8(15);
	return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m), _mm_and_si128(v, m));
}

/* hi5: 16 in byte j where bit j of the little-endian qh[4] is set, else 0 */
QMM_INLINE __m256i hi5(const uint8_t *p)
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

/* offset of the signed types' codes in u (128, 8, 16), 0 for the types
 * with a min */
QMM_INLINE int offset(const int T)
{
	return T == T8_0 ? 128 : T == T4_0 || T == T4X ? 8 : T == T5_0 ? 16 : 0;
}

/* ucodes: a block's 32 codes u as bytes, element order */
QMM_INLINE __m256i ucodes(const int T, const uint8_t *b)
{
	switch (T) {
	case T8_0:
		return _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(b + 2)), _mm256_set1_epi8(-128));
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

/*
 * A weight block as the decode/AVX2 integer step wants it: c = u, except
 * AVX2 Q8_0, where u (up to 255) would saturate maddubs's pairs: there
 * c = |q|, aux = q (the sign goes onto the activation) and the activation
 * side adds 128 * (its sums per 4).
 */
typedef struct {
	__m256i c, aux;
} wblk;

QMM_INLINE wblk wprep(const int T, const uint8_t *b)
{
	wblk w = {_mm256_setzero_si256(), _mm256_setzero_si256()};
#if !QMM_DP
	if (T == T8_0) {
		__m256i q = _mm256_loadu_si256((const __m256i *)(b + 2));
		w.c = _mm256_abs_epi8(q);
		w.aux = q;
		return w;
	}
#endif
	w.c = ucodes(T, b);
	return w;
}

/* An activation block: its codes, and for AVX2 Q8_0 128 * (sums per 4). */
typedef struct {
	__m256i x, x128;
} xblk;

QMM_INLINE xblk xprep(const int T, const pm_act32 *a)
{
	__m256i x = _mm256_loadu_si256((const __m256i *)a->q);
	xblk p = {x, _mm256_setzero_si256()};
#if !QMM_DP
	if (T == T8_0)
		p.x128 = _mm256_slli_epi32(
			_mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), x), _mm256_set1_epi16(1)), 7);
#endif
	return p;
}

/*
 * lanes: 8 int32 lanes summing to S, lane l over elements 4l .. 4l+3. No
 * int16 step of the AVX2 build saturates: pairs reach 2 * 128 * 127 (Q8_0,
 * |q| against the signed x) or 2 * 31 * 127.
 */
QMM_INLINE __m256i lanes(const int T, wblk w, xblk x)
{
#if QMM_AVXVNNI
	return _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), w.c, x.x);
#elif QMM_VNNI
	return _mm256_dpbusd_epi32(_mm256_setzero_si256(), w.c, x.x);
#else
	if (T == T8_0)
		return _mm256_add_epi32(
			_mm256_madd_epi16(_mm256_maddubs_epi16(w.c, _mm256_sign_epi8(x.x, w.aux)), _mm256_set1_epi16(1)),
			x.x128);
	return _mm256_madd_epi16(_mm256_maddubs_epi16(w.c, x.x), _mm256_set1_epi16(1));
#endif
}

/* sum4: the 4 lane sums of a, b, c, d (exact: a block's sum fits easily) */
QMM_INLINE __m128i sum4(__m256i a, __m256i b, __m256i c, __m256i d)
{
	__m256i t = _mm256_hadd_epi32(_mm256_hadd_epi32(a, b), _mm256_hadd_epi32(c, d));
	return _mm_add_epi32(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1));
}

/* h4: the F16 values at p[0..3] + off as 4 floats */
QMM_INLINE __m128 h4(const uint8_t *const p[4], int off)
{
	uint64_t v = 0;
	UNROLL for (int i = 0; i < 4; i++) {
		uint16_t h;
		memcpy(&h, p[i] + off, 2);
		v |= (uint64_t)h << (16 * i);
	}
	return _mm_cvtph_ps(_mm_cvtsi64_si128((long long)v));
}

/*
 * tile: outputs of weight rows w .. w + nw - 1 (nw <= 4, rows rb bytes
 * apart) against R activation rows at xq (xs bytes apart), stored at
 * out[r*ldo + i]. A short tile repeats its last row and stores only nw
 * outputs, so every output takes the same operations. PF != 0 prefetches
 * the next 4 rows (the bytes after these), a share per block: without it
 * decode stalls on each row stream (matvec.c).
 */
QMM_INLINE void tile(const int T, const int R, const int PF, float *out, size_t ldo, const uint8_t *w,
		     size_t rb, int nw, const char *xq, size_t xs, int nb)
{
	const int BB = tbytes(T);
	const uint8_t *wr[4];
	UNROLL for (int i = 0; i < 4; i++)
		wr[i] = w + (size_t)(i < nw ? i : nw - 1) * rb;
	const char *nx = (const char *)w + 4 * rb;
	size_t share = (4 * rb + (size_t)nb - 1) / (size_t)nb;
	__m128 y[R], z[R];
	UNROLL for (int r = 0; r < R; r++)
		y[r] = z[r] = _mm_setzero_ps();
	for (int j = 0; j < nb; j++) {
		if (PF)
			for (size_t o = 0; o < share; o += 64)
				_mm_prefetch(nx + (size_t)j * share + o, _MM_HINT_T0);
		const uint8_t *b[4];
		wblk c[4];
		UNROLL for (int i = 0; i < 4; i++) {
			b[i] = wr[i] + (size_t)j * BB;
			c[i] = wprep(T, b[i]);
		}
		__m128 dw = h4(b, 0);
		__m128 mw = has_min(T) ? h4(b, 2) : _mm_mul_ps(dw, _mm_set1_ps(-(float)offset(T)));
		UNROLL for (int r = 0; r < R; r++) {
			const pm_act32 *a = (const pm_act32 *)(xq + (size_t)r * xs) + j;
			xblk x = xprep(T, a);
			__m256i l[4];
			UNROLL for (int i = 0; i < 4; i++)
				l[i] = lanes(T, c[i], x);
			__m128 si = _mm_cvtepi32_ps(sum4(l[0], l[1], l[2], l[3]));
			y[r] = _mm_fmadd_ps(_mm_mul_ps(dw, _mm_set1_ps(a->d)), si, y[r]);
			z[r] = _mm_fmadd_ps(mw, _mm_set1_ps(a->s), z[r]);
		}
	}
	UNROLL for (int r = 0; r < R; r++) {
		float *o = out + (size_t)r * ldo;
		__m128 yz = _mm_add_ps(y[r], z[r]);
		if (nw == 4) {
			_mm_storeu_ps(o, yz);
		} else {
			float v[4];
			_mm_storeu_ps(v, yz);
			for (int i = 0; i < nw; i++)
				o[i] = v[i];
		}
	}
}

/* activation rows per chunk of a batch: the chunk's quantized rows stay in
 * L2 while every weight tile passes over them */
enum { XCHUNK = 64 };

#if QMM_VNNI
/* blocks per k-chunk of the VNNI batch path: 16 rows x KB blocks of
 * interleaved codes (8 KiB) stay in L1 while the activation rows pass */
enum { KB = 16 };

/* a 32-bit load that may alias the int8 codes it reads */
typedef int32_t __attribute__((may_alias, aligned(1))) qmm_i32;

/* dpb: acc + vpdpbusd of g against the 4 activation codes of group j at
 * q (elements 4j..4j+3) broadcast to every 32-bit lane, the broadcast
 * folded into the instruction ({1to16} from memory). gcc does not fold it
 * by itself: from _mm256_set1_epi32 it emits a vpbroadcastd per vpdpbusd,
 * and copying the 32 codes to an array first made it load them 8 at a
 * time and move each through a general register (three more ops each);
 * at 8 rows the batch path is bound by the ops it issues per vpdpbusd. */
QMM_INLINE __m512i dpb(__m512i acc, __m512i g, const int8_t *q, int j)
{
	__asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(g), "m"(*(const qmm_i32 *)(q + 4 * j)));
	return acc;
}

/* row16: one activation block a against 16 interleaved weight blocks g
 * (scales dw, mw), its 16 outputs' y and z updated; two vpdpbusd chains
 * when the caller runs no other row beside it (CH 2), else one */
QMM_INLINE void row16(const int CH, __m512 *y, __m512 *z, const __m512i g[8], __m512 dw, __m512 mw,
		      const pm_act32 *a)
{
	__m512i e = dpb(_mm512_setzero_si512(), g[0], a->q, 0);
	if (CH == 1) {
		UNROLL for (int j = 1; j < 8; j++)
			e = dpb(e, g[j], a->q, j);
	} else {
		__m512i o = dpb(_mm512_setzero_si512(), g[1], a->q, 1);
		UNROLL for (int j = 2; j < 8; j += 2) {
			e = dpb(e, g[j], a->q, j);
			o = dpb(o, g[j + 1], a->q, j + 1);
		}
		e = _mm512_add_epi32(e, o);
	}
	*y = _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_set1_ps(a->d)), _mm512_cvtepi32_ps(e), *y);
	*z = _mm512_fmadd_ps(mw, _mm512_set1_ps(a->s), *z);
}

/* rows16: R activation rows (xs bytes apart) against the k-chunk's
 * interleaved blocks g, their y updated in block order; R rows at once so
 * their chains overlap */
QMM_INLINE void rows16(const int R, __m512 *y, __m512 *z, __m512i g[KB][8], const __m512 *dw, const __m512 *mw,
		       const char *xq, size_t xs, int k0, int kn)
{
	__m512 yr[R], zr[R];
	UNROLL for (int r = 0; r < R; r++)
		yr[r] = y[r], zr[r] = z[r];
	for (int b = 0; b < kn; b++)
		UNROLL for (int r = 0; r < R; r++)
			row16(R >= 4 ? 1 : 2, &yr[r], &zr[r], g[b], dw[b], mw[b],
			      (const pm_act32 *)(xq + (size_t)r * xs) + k0 + b);
	UNROLL for (int r = 0; r < R; r++)
		y[r] = yr[r], z[r] = zr[r];
}

/* ucodes5: ucodes with AVX-512BW for the batch path: Q5_0's and Q5_1's
 * 32 low nibbles from one broadcast load and a per-half shift, their fifth
 * bits added as 16 under the mask qh (kmovd from memory) instead of
 * spread into bytes by a shuffle and a compare (the same codes) */
QMM_INLINE __m256i ucodes5(const int T, const uint8_t *b)
{
	if (T != T5_0 && T != T5_1)
		return ucodes(T, b);
	const uint8_t *qs = b + (T == T5_0 ? 6 : 8), *qh = b + (T == T5_0 ? 2 : 4);
	__m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qs));
	v = _mm256_and_si256(_mm256_srlv_epi16(v, _mm256_setr_epi64x(0, 0, 0x0004000400040004, 0x0004000400040004)),
			     _mm256_set1_epi8(15));
	uint32_t h;
	memcpy(&h, qh, 4);
	return _mm256_mask_add_epi8(v, (__mmask32)h, v, _mm256_set1_epi8(16));
}

/* interleave: g[j] = the codes of elements 4j..4j+3 of block p[i], row i
 * in lane i (an 8 x 8 transpose of 32-bit groups) */
QMM_INLINE void interleave(const int T, __m256i g[8], const uint8_t *const p[8])
{
	__m256i u[8];
	UNROLL for (int i = 0; i < 8; i++)
		u[i] = ucodes5(T, p[i]);
	pm_transpose8x32(g, u);
}

/* interleave4: interleave for the 4-bit codes at p[i] + qo (Q4_0, Q4_1),
 * qmm_transpose.h's pm_interleave_nib8 */
QMM_INLINE void interleave4(__m256i g[8], const uint8_t *const p[8], int qo)
{
	pm_interleave_nib8(g, p, (size_t)qo);
}

/* wblock8: block j of the 8 weight rows wr, interleaved into g, with its
 * scales dw and min terms mw (m', see the top); T4X: wr[0] is the
 * tile's codes and wr[1] its scales (wrows), stored as g and dw want them */
QMM_INLINE void wblock8(const int T, __m256i g[8], __m256 *dw, __m256 *mw, const uint8_t *const wr[8], int j)
{
	if (T == T4X) {
		*dw = pm_q32x8_block(g, pm_q32x8_codes(wr[0], j), wr[1] + (size_t)16 * j);
		*mw = _mm256_mul_ps(*dw, _mm256_set1_ps(-(float)offset(T)));
		return;
	}
	const int BB = tbytes(T);
	const uint8_t *p[8];
	uint16_t hd[8], hm[8];
	UNROLL for (int i = 0; i < 8; i++) {
		p[i] = wr[i] + (size_t)j * BB;
		memcpy(&hd[i], p[i], 2);
		memcpy(&hm[i], p[i] + 2, 2);
	}
	if (T == T4_0 || T == T4_1)
		interleave4(g, p, T == T4_0 ? 2 : 4);
	else
		interleave(T, g, p);
	*dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)hd));
	*mw = has_min(T) ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)hm))
			 : _mm256_mul_ps(*dw, _mm256_set1_ps(-(float)offset(T)));
}

/* wblock16: block j of the 16 weight rows wr, two wblock8 halves in the
 * low and high 256 bits */
QMM_INLINE void wblock16(const int T, __m512i g[8], __m512 *dw, __m512 *mw, const uint8_t *const wr[16], int j)
{
	__m256i lo[8], hi[8];
	__m256 dl, dh, ml, mh;
	wblock8(T, lo, &dl, &ml, wr, j);
	wblock8(T, hi, &dh, &mh, wr + 8, j);
	UNROLL for (int i = 0; i < 8; i++)
		g[i] = _mm512_inserti64x4(_mm512_castsi256_si512(lo[i]), hi[i], 1);
	*dw = _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(dl)), _mm256_castps_pd(dh), 1));
	*mw = _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(ml)), _mm256_castps_pd(mh), 1));
}

/* pf16: prefetch block j of the next tile's 16 rows (nx: the bytes after
 * this tile's, where the next tile starts), 16 blocks' worth per block:
 * the hardware prefetcher does not follow interleaved row streams, and
 * without it a batch of 8 spent a third of its matmul time waiting on
 * weight loads (Q8_0 decode at batch 8 went from about 2,100 to 2,700
 * tok/s, smollm2-135m Q4_K_M from 227 to 318). Prefetches are hints: past
 * the matrix's end they fetch nothing harmful, and they never change a
 * result. */
QMM_INLINE void pf16(const int T, const char *nx, int j)
{
	const int BB = tbytes(T);
	for (int o = 0; o < 16 * BB; o += 64)
		_mm_prefetch(nx + (size_t)j * 16 * BB + o, _MM_HINT_T0);
}

/* store16: write the R rows' outputs y + z of a tile of nw (<= 16) rows */
QMM_INLINE void store16(float *out, size_t ldo, int nw, const __m512 *y, const __m512 *z, int R)
{
	UNROLL for (int r = 0; r < R; r++) {
		float *o = out + (size_t)r * ldo;
		__m512 v = _mm512_add_ps(y[r], z[r]);
		if (nw == 16)
			_mm512_storeu_ps(o, v);
		else
			_mm512_mask_storeu_ps(o, (__mmask16)((1u << nw) - 1), v);
	}
}

/* rows of the weight tile of the VNNI batch path: 16, the lanes of a
 * 512-bit register (Zen 4 runs it as two 256-bit halves: the gain is half
 * the instructions per output, which bound this path) */
enum { WT = 16 };

/* wrows: the row pointers of the weight tile at w (nw rows, rb bytes
 * apart, nb blocks), a short tile repeating its last row; T4X: two tiles
 * of 8 (the second the first again when nw <= 8), each half's first two
 * pointers its codes and scales (wblock8) */
QMM_INLINE void wrows(const int T, const uint8_t *wr[WT], const uint8_t *w, size_t rb, int nw, int nb)
{
	if (T == T4X) {
		UNROLL for (int h = 0; h < 2; h++) {
			const uint8_t *t = w + (size_t)(h && nw > 8 ? 8 : 0) * rb;
			UNROLL for (int i = 0; i < 8; i++)
				wr[8 * h + i] = i == 1 ? pm_q32x8_scales(t, nb, 0) : t;
		}
		return;
	}
	UNROLL for (int i = 0; i < WT; i++)
		wr[i] = w + (size_t)(i < nw ? i : nw - 1) * rb;
}

/*
 * batch16: outputs of weight rows w .. w + nw - 1 (nw <= 16) against the
 * n (<= XCHUNK) activation rows at xq. Per k-chunk the 16 rows' codes are
 * interleaved, g[b][j] = 4 codes of elements 4j..4j+3 of each row in turn,
 * so vpdpbusd against the activation's 4 codes of group j broadcast adds
 * each row's partial sum into its own lane: S for 16 outputs in 8
 * instructions, no horizontal sums. A short tile repeats its last row.
 * The next tile's rows (contiguous after these) are prefetched (pf16).
 */
QMM_INLINE void batch16(const int T, float *out, size_t ldo, const uint8_t *w, size_t rb, int nw, const char *xq,
			size_t xs, int n, int nb)
{
	__m512i g[KB][8];
	__m512 dw[KB], mw[KB], y[XCHUNK], z[XCHUNK];
	const uint8_t *wr[WT];
	wrows(T, wr, w, rb, nw, nb);
	for (int r = 0; r < n; r++)
		y[r] = z[r] = _mm512_setzero_ps();
	const char *nx = (const char *)w + WT * rb;
	for (int k0 = 0; k0 < nb; k0 += KB) {
		int kn = nb - k0 < KB ? nb - k0 : KB;
		for (int b = 0; b < kn; b++) {
			pf16(T, nx, k0 + b);
			wblock16(T, g[b], &dw[b], &mw[b], wr, k0 + b);
		}
		int r = 0;
		for (; r + 4 <= n; r += 4)
			rows16(4, y + r, z + r, g, dw, mw, xq + (size_t)r * xs, xs, k0, kn);
		for (; r < n; r++)
			rows16(1, y + r, z + r, g, dw, mw, xq + (size_t)r * xs, xs, k0, kn);
	}
	store16(out, ldo, nw, y, z, n);
}

/*
 * fused16: batch16 for R <= 8 activation rows in one pass over the
 * blocks: each block's weight rows are interleaved into registers and
 * used at once by every row, so the interleave's shuffles overlap the
 * rows' vpdpbusd chains instead of running as a phase of their own (small
 * batches: there the interleave is shared by few rows). PF prefetches the
 * next tile.
 */
QMM_INLINE void fused16(const int T, const int R, const int PF, float *out, size_t ldo, const uint8_t *w,
			size_t rb, int nw, const char *xq, size_t xs, int nb)
{
	const uint8_t *wr[WT];
	wrows(T, wr, w, rb, nw, nb);
	const char *nx = (const char *)w + WT * rb;
	__m512 y[R], z[R];
	UNROLL for (int r = 0; r < R; r++)
		y[r] = z[r] = _mm512_setzero_ps();
	for (int b = 0; b < nb; b++) {
		__m512i g[8];
		__m512 dw, mw;
		if (PF)
			pf16(T, nx, b);
		wblock16(T, g, &dw, &mw, wr, b);
		UNROLL for (int r = 0; r < R; r++)
			row16(R >= 4 ? 1 : 2, &y[r], &z[r], g, dw, mw, (const pm_act32 *)(xq + (size_t)r * xs) + b);
	}
	store16(out, ldo, nw, y, z, R);
}

/* small16: n <= FUSED rows against a weight tile, in groups of 8
 * (fused16); the first group prefetches the next tile. Beyond 8 rows the
 * k-chunked batch16 wins (its interleave is shared by every row of the
 * chunk). */
enum { FUSED = 8 };

QMM_INLINE void small16(const int T, float *out, size_t ldo, const uint8_t *w, size_t rb, int nw, const char *xq,
			size_t xs, int n, int nb)
{
	for (int r = 0; r < n; r += 8) {
		float *o = out + (size_t)r * ldo;
		const char *x = xq + (size_t)r * xs;
		int pf = r == 0;
		switch (n - r < 8 ? n - r : 8) {
#define FUSED_R(R)                                                                     \
	case R:                                                                        \
		if (pf)                                                                \
			fused16(T, R, 1, o, ldo, w, rb, nw, x, xs, nb);                \
		else                                                                   \
			fused16(T, R, 0, o, ldo, w, rb, nw, x, xs, nb);                \
		break;
			FUSED_R(1)
			FUSED_R(2)
			FUSED_R(3)
			FUSED_R(4)
			FUSED_R(5)
			FUSED_R(6)
			FUSED_R(7)
			FUSED_R(8)
#undef FUSED_R
		}
	}
}
#endif

#if QMM_VNNI
#include "qmm_32_x86_dec512.h" /* decode512: the 512-bit decode of Q4_0 and Q5_0 */
#endif

/* decode: one activation row; the VNNI build's 512-bit path where it
 * has one, else 4 weight rows at a time */
#if QMM_VNNI
#define DECODE_ATTR DEC_ATTR
#else
#define DECODE_ATTR QMM_ATTR
#endif
static inline __attribute__((always_inline)) DECODE_ATTR void decode(const int T, float *out, const char *x,
								     const pm_weight *w, int m0, int m1)
{
	int nb = w->cols / 32;
	size_t rb = w->row_bytes;
#if QMM_VNNI
	if ((T == T4_0 || T == T5_0) && nb <= 4 * DXG) {
		decode512(T, out, x, w, m0, m1);
		return;
	}
#endif
	for (int m = m0; m < m1; m += 4)
		tile(T, 1, 1, out + m, 0, pm_weight_row(w, m), rb, m1 - m < 4 ? m1 - m : 4, x, 0, nb);
}

/* batch: n > 1 activation rows, in chunks of XCHUNK */
QMM_INLINE void batch(const int T, float *out, size_t ldo, const char *x, size_t xs, const pm_weight *w, int n,
		      int m0, int m1)
{
	int nb = w->cols / 32;
	size_t rb = w->row_bytes;
	for (int r0 = 0; r0 < n; r0 += XCHUNK) {
		int r1 = n - r0 < XCHUNK ? n : r0 + XCHUNK;
#if QMM_VNNI
		for (int m = m0; m < m1; m += WT) {
			float *o = out + (size_t)r0 * ldo + m;
			const uint8_t *wm = pm_weight_row(w, m);
			int nw = m1 - m < WT ? m1 - m : WT;
			if (n <= FUSED)
				small16(T, o, ldo, wm, rb, nw, x + (size_t)r0 * xs, xs, r1 - r0, nb);
			else
				batch16(T, o, ldo, wm, rb, nw, x + (size_t)r0 * xs, xs, r1 - r0, nb);
		}
#else
		/* the first tile of activation rows against each 4 weight rows
		 * prefetches the next 4 (as decode does): without it the
		 * hardware prefetcher left this path waiting on DRAM. Kernel
		 * alone, one thread, medians of 6-8 alternating runs (each the
		 * best of its passes) over smollm2-135m's 210 layer matrices
		 * at 8 rows: Q8_0 (113 MB) 77.3 -> 49.3 ms, Q4_0 (60 MB)
		 * 40.2 -> 35.9 ms; the default model's Q4_0 (L3-resident)
		 * 3.21 -> 3.07 ms; its Q8_0 at 64 rows unchanged (~60 ms) */
		for (int m = m0; m < m1; m += 4) {
			const uint8_t *wm = pm_weight_row(w, m);
			int nw = m1 - m < 4 ? m1 - m : 4, r = r0;
			if (r + 4 <= r1) {
				tile(T, 4, 1, out + (size_t)r * ldo + m, ldo, wm, rb, nw, x + (size_t)r * xs, xs, nb);
				r += 4;
			} else if (r + 2 <= r1) {
				tile(T, 2, 1, out + (size_t)r * ldo + m, ldo, wm, rb, nw, x + (size_t)r * xs, xs, nb);
				r += 2;
			} else {
				tile(T, 1, 1, out + (size_t)r * ldo + m, ldo, wm, rb, nw, x + (size_t)r * xs, xs, nb);
				r++;
			}
			for (; r + 4 <= r1; r += 4)
				tile(T, 4, 0, out + (size_t)r * ldo + m, ldo, wm, rb, nw, x + (size_t)r * xs, xs, nb);
			for (; r + 2 <= r1; r += 2)
				tile(T, 2, 0, out + (size_t)r * ldo + m, ldo, wm, rb, nw, x + (size_t)r * xs, xs, nb);
			if (r < r1)
				tile(T, 1, 0, out + (size_t)r * ldo + m, ldo, wm, rb, nw, x + (size_t)r * xs, xs, nb);
		}
#endif
	}
}

/* the decode and batch paths are separate functions, so neither's
 * register allocation pays for the other's */
#define QMM_KERNEL(NAME, T)                                                                          \
	static DECODE_ATTR __attribute__((noinline)) void NAME##_decode(float *out, const char *x,      \
									const pm_weight *w, int m0, int m1) \
	{                                                                                            \
		decode(T, out, x, w, m0, m1);                                                        \
	}                                                                                            \
	static QMM_ATTR __attribute__((noinline)) void NAME##_batch(                                  \
		float *out, size_t ldo, const char *x, size_t xs, const pm_weight *w, int n, int m0, int m1) \
	{                                                                                            \
		batch(T, out, ldo, x, xs, w, n, m0, m1);                                             \
	}                                                                                            \
	static QMM_ATTR void NAME(float *out, size_t ldo, const void *xq, size_t xs, const pm_weight *w, \
				  int n, int m0, int m1)                                             \
	{                                                                                            \
		if (n == 1)                                                                          \
			NAME##_decode(out, xq, w, m0, m1);                                           \
		else                                                                                 \
			NAME##_batch(out, ldo, xq, xs, w, n, m0, m1);                                \
	}

QMM_KERNEL(qmm_q8_0, T8_0)
QMM_KERNEL(qmm_q4_0, T4_0)
QMM_KERNEL(qmm_q4_1, T4_1)
QMM_KERNEL(qmm_q5_0, T5_0)
QMM_KERNEL(qmm_q5_1, T5_1)

#if QMM_VNNI
/* qmm_q4_0x_batch: the batch path on Q4_0 tiles (T4X; decode on them is
 * qmv_32_avx2.c's: qmm_32_vnni.c) */
static QMM_ATTR __attribute__((noinline, unused)) void qmm_q4_0x_batch(float *out, size_t ldo, const char *x,
									  size_t xs, const pm_weight *w, int n,
									  int m0, int m1)
{
	batch(T4X, out, ldo, x, xs, w, n, m0, m1);
}
#endif

pm_qmm_fn QMM_FN(uint32_t type);
pm_qmm_fn QMM_FN(uint32_t type)
{
	switch (type) {
	case PM_TYPE_Q8_0:
		return qmm_q8_0;
	case PM_TYPE_Q4_0:
		return qmm_q4_0;
	case PM_TYPE_Q4_1:
		return qmm_q4_1;
	case PM_TYPE_Q5_0:
		return qmm_q5_0;
	case PM_TYPE_Q5_1:
		return qmm_q5_1;
	}
	return NULL;
}
