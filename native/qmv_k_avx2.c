/*
 * qmv_k_avx2.c: the AVX2 batch-1 products of the K-quants (Q4_K, Q5_K,
 * Q6_K weights against one row of pm_act256 activations: decode), which
 * qmm_k.c's AVX2 set calls when n == 1 (CPUs with AVX512-VNNI keep
 * qmm_k_vnni.c's pairdot). The integer sums and the float step per super-block
 * are qmm_k.c's (its top comment), so every output is bitwise what the
 * portable path and the batch tiles give, whatever the range or split.
 *
 * On Zen 3 the 4-row kernel this replaces (4 rows decoded into registers,
 * per 32 elements and row one vpmaddubsw against the activation codes and
 * one vpmaddwd against the group's scale) was bound by those two vector
 * multiplies: taking its per-group scale shuffles out (scales broadcast
 * from memory) gained nothing on Q4_K. So Q4_K interleaves 8 rows per
 * super-block, as qmm_32_avx2.c's batch tiles do: the packed codes of a
 * 64-element chunk are transposed in 32-bit groups (lane i: row i's bytes
 * 4j .. 4j+3), one vpmaddubsw of a group's nibbles against 4 activation
 * codes broadcast serves 8 rows, a sub-block's 8 groups add in int16 and
 * one vpmaddwd against the 8 rows' scales adds it to sumi: 1.125
 * multiplies per row and 32 elements instead of 2, no horizontal sums,
 * and the float step on 8 lanes. Q5_K (5-bit codes would take two int16
 * chains per sub-block and a transposed qh) and Q6_K (bound by building
 * its 6-bit codes, not by multiplies) stay at 4 rows, with Q5_K's scales
 * broadcast from a stack buffer and its 5th bit by shifts, Q6_K's codes
 * built in 17 logic ops per 128 elements instead of 21 and its sumi - summ
 * kept as one accumulator (its float step takes only the difference).
 *
 * Measured against the 4-row kernel (one thread, CPU time, medians of
 * alternating runs, a loaded 2-vCPU EPYC): Q4_K 1376 x 512 1.15-1.41x,
 * 512 x 512 1.17-1.38x, 2048 x 2048 1.08-1.12x, 8192 x 2048 (from DRAM)
 * 0.86-1.01x (not a gain); Q6_K 264 x 512 1.15-1.32x, 2048 x 8192
 * 0.90-1.04x; Q5_K 1376 x 512 1.05-1.13x. An 8-row Q4_K kernel reading one row at a time
 * (sums reduced by an unpack tree) ran 0.6-0.8x from DRAM, whatever the
 * prefetch distance: the tiles here read their rows together and
 * prefetch the next tile's bytes in order, a share per super-block.
 */
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#include <string.h>

#include "qmv_k_avx2.h"
#include "kscales_avx2.h"
#include "qmm_transpose.h"
#include "qmv_k_rows.h"
#include "kx8.h"

#define QV_ATTR __attribute__((target("avx2,fma,f16c")))
#define QV_INLINE static inline __attribute__((always_inline, target("avx2,fma,f16c")))

enum { QV_Q4, QV_Q5, QV_Q6 };

/* an unaligned 16/32-bit load that may alias anything */
typedef int32_t __attribute__((may_alias, aligned(1))) qv_i32;
typedef int16_t __attribute__((may_alias, aligned(1))) qv_i16;

/* the 5th bit of Q5_K's codes: bit k of each qh byte moved to bit 4
 * (16-bit shifts by at most 4 move no bit across a byte that the mask
 * keeps) */
QV_INLINE __m256i bit5(__m256i hb, const int k)
{
	const __m256i m16 = _mm256_set1_epi8(16);
	if (k < 4)
		return _mm256_and_si256(_mm256_slli_epi16(hb, 4 - k), m16);
	if (k == 4)
		return _mm256_and_si256(hb, m16);
	return _mm256_and_si256(_mm256_srli_epi16(hb, k - 4), m16);
}

/* hsum4 returns the 4 lane sums of a[0..3], a[i]'s in lane i (exact) */
QV_INLINE __m128i hsum4(const __m256i a[4])
{
	__m256i t = _mm256_hadd_epi32(_mm256_hadd_epi32(a[0], a[1]), _mm256_hadd_epi32(a[2], a[3]));
	return _mm_add_epi32(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1));
}

/* tile4_q5: Q5_K, the super-blocks b[0..3] of 4 rows against x, added to
 * acc (add_k on 4 lanes) */
QV_INLINE __m128 tile4_q5(__m128 acc, const uint8_t *const b[4], const pm_act256 *x)
{
	/* the scales as [s, s] int16 pairs, read back one broadcast dword per
	 * group: row i group g at sc[16 (i / 2) + 8 (g / 4) + 4 (i % 2) + g % 4] */
	int32_t sc[32] __attribute__((aligned(32)));
	const __m256i z = _mm256_setzero_si256();
	__m256i p = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)x->bsums), _mm256_set1_epi16(1));
	__m256i bs2 = _mm256_broadcastsi128_si256(
		_mm_packs_epi32(_mm256_castsi256_si128(p), _mm256_extracti128_si256(p, 1)));
	__m256i mv[2];
#pragma GCC unroll 2
	for (int q = 0; q < 2; q++) {
		__m256i k = pm_kscales8x2(b[2 * q], b[2 * q + 1]);
		__m256i s16 = _mm256_unpacklo_epi8(k, z);
		_mm256_store_si256((__m256i *)(sc + 16 * q), _mm256_unpacklo_epi16(s16, s16));
		_mm256_store_si256((__m256i *)(sc + 16 * q + 8), _mm256_unpackhi_epi16(s16, s16));
		/* summ: min[g] times bs2[g] = bsums[2g] + bsums[2g + 1] (at most
		 * 2 * 16 * 127: int16), the same integer as corr . bsums; rows
		 * 2q (low lane) and 2q + 1 (high lane) */
		mv[q] = _mm256_madd_epi16(_mm256_unpackhi_epi8(k, z), bs2);
	}
	__m256i t = _mm256_hadd_epi32(mv[0], mv[1]);
	t = _mm256_hadd_epi32(t, t); /* lanes: r0 r2 r0 r2 | r1 r3 r1 r3 */
	__m128i summ = _mm_unpacklo_epi32(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1));
	const __m256i m15 = _mm256_set1_epi8(15);
	__m256i a[4], hb[4];
#pragma GCC unroll 4
	for (int i = 0; i < 4; i++) {
		hb[i] = _mm256_loadu_si256((const __m256i *)(b[i] + 16));
		a[i] = z;
	}
#pragma GCC unroll 4
	for (int c = 0; c < 4; c++) {
		__m256i x0 = _mm256_loadu_si256((const __m256i *)(x->q + 64 * c));
		__m256i x1 = _mm256_loadu_si256((const __m256i *)(x->q + 64 * c + 32));
#pragma GCC unroll 4
		for (int i = 0; i < 4; i++) {
			__m256i v = _mm256_loadu_si256((const __m256i *)(b[i] + 48 + 32 * c));
			__m256i lo = _mm256_or_si256(_mm256_and_si256(v, m15), bit5(hb[i], 2 * c));
			__m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), m15), bit5(hb[i], 2 * c + 1));
			const int32_t *si = sc + 16 * (i / 2) + 4 * (i % 2) + 8 * (c / 2) + (2 * c) % 4;
			__m256i s0 = _mm256_set1_epi32(*(const qv_i32 *)si);
			__m256i s1 = _mm256_set1_epi32(*(const qv_i32 *)(si + 1));
			a[i] = _mm256_add_epi32(a[i], _mm256_madd_epi16(_mm256_maddubs_epi16(lo, x0), s0));
			a[i] = _mm256_add_epi32(a[i], _mm256_madd_epi16(_mm256_maddubs_epi16(hi, x1), s1));
		}
	}
	/* d, dmin of each row (through registers: four small stores read
	 * back as one vector stall on store forwarding) */
	__m128i hv = _mm_setr_epi32(*(const qv_i32 *)b[0], *(const qv_i32 *)b[1], *(const qv_i32 *)b[2],
				    *(const qv_i32 *)b[3]);
	__m256 f = _mm256_cvtph_ps(hv);
	__m128 flo = _mm256_castps256_ps128(f), fhi = _mm256_extractf128_ps(f, 1);
	__m128 d = _mm_shuffle_ps(flo, fhi, _MM_SHUFFLE(2, 0, 2, 0));
	__m128 dmin = _mm_shuffle_ps(flo, fhi, _MM_SHUFFLE(3, 1, 3, 1));
	/* add_k: acc + ((d * dx) * sumi - (dmin * dx) * summ) */
	__m128 dx = _mm_set1_ps(x->d);
	return _mm_add_ps(acc, _mm_sub_ps(_mm_mul_ps(_mm_mul_ps(d, dx), _mm_cvtepi32_ps(hsum4(a))),
					  _mm_mul_ps(_mm_mul_ps(dmin, dx), _mm_cvtepi32_ps(summ))));
}

/* tile4_6: Q6_K, the super-blocks b[0..3] of 4 rows against x, added to
 * acc (add_6 on 4 lanes); each row's accumulator starts at -(corr .
 * bsums), so its lane sum is sumi - summ, the one integer add_6 takes */
QV_INLINE __m128 tile4_6(__m128 acc, const uint8_t *const b[4], const pm_act256 *x)
{
	const __m256i m15 = _mm256_set1_epi8(15), m30 = _mm256_set1_epi8(0x30);
	const __m256i bs = _mm256_loadu_si256((const __m256i *)x->bsums);
	__m256i a[4], s[4];
#pragma GCC unroll 4
	for (int i = 0; i < 4; i++) {
		/* the 16 int8 scales as int16, even ones in the low lane and odd
		 * ones in the high lane (group 2j's scale is word j of the low
		 * lane, 2j + 1's word j of the high lane), and corr = 32 * scale */
		__m128i s8 = _mm_loadu_si128((const __m128i *)(b[i] + 192));
		__m256i corr = _mm256_slli_epi16(_mm256_cvtepi8_epi16(s8), 5);
		s[i] = _mm256_cvtepi8_epi16(
			_mm_shuffle_epi8(s8, _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15)));
		a[i] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_madd_epi16(corr, bs));
	}
#pragma GCC unroll 2
	for (int c = 0; c < 2; c++) {
		__m256i xv[4];
#pragma GCC unroll 4
		for (int k = 0; k < 4; k++)
			xv[k] = _mm256_loadu_si256((const __m256i *)(x->q + 128 * c + 32 * k));
#pragma GCC unroll 4
		for (int i = 0; i < 4; i++) {
			__m256i l0 = _mm256_loadu_si256((const __m256i *)(b[i] + 64 * c));
			__m256i l1 = _mm256_loadu_si256((const __m256i *)(b[i] + 64 * c + 32));
			__m256i h = _mm256_loadu_si256((const __m256i *)(b[i] + 128 + 32 * c));
			/* code = 4 low bits from ql | 2 high bits from qh at bits 4,
			 * 5 (16-bit shifts: the masks drop what crosses a byte) */
			__m256i q[4];
			q[0] = _mm256_or_si256(_mm256_and_si256(l0, m15),
					       _mm256_and_si256(_mm256_slli_epi16(h, 4), m30));
			q[1] = _mm256_or_si256(_mm256_and_si256(l1, m15),
					       _mm256_and_si256(_mm256_slli_epi16(h, 2), m30));
			q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m15),
					       _mm256_and_si256(h, m30));
			q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m15),
					       _mm256_and_si256(_mm256_srli_epi16(h, 2), m30));
#pragma GCC unroll 4
			for (int k = 0; k < 4; k++) {
				__m256i sk = _mm256_shuffle_epi8(
					s[i], _mm256_set1_epi16((short)(0x0100 + 0x0202 * (4 * c + k))));
				a[i] = _mm256_add_epi32(a[i], _mm256_madd_epi16(_mm256_maddubs_epi16(q[k], xv[k]), sk));
			}
		}
	}
	__m128 d = _mm_cvtph_ps(_mm_setr_epi16(*(const qv_i16 *)(b[0] + 208), *(const qv_i16 *)(b[1] + 208),
					       *(const qv_i16 *)(b[2] + 208), *(const qv_i16 *)(b[3] + 208), 0, 0,
					       0, 0));
	/* add_6: acc + (d * dx) * (sumi - summ) */
	return _mm_add_ps(acc, _mm_mul_ps(_mm_mul_ps(d, _mm_set1_ps(x->d)), _mm_cvtepi32_ps(hsum4(a))));
}

/* tile8_q4: Q4_K, the super-blocks b[0..7] of 8 rows against x, added to
 * acc (add_k on 8 lanes), the rows interleaved in lane order
 * 0 2 4 6 1 3 5 7 (the order pm_kscales8x2's pairs reduce to; qmv8 puts
 * the outputs back in row order). Per 64-element chunk the 8 rows' packed
 * codes are transposed in 32-bit groups (pm_transpose8x32: g[j] holds
 * bytes 4j .. 4j+3 of each row), so that one vpmaddubsw of a group's
 * nibbles against 4 broadcast activation codes serves 8 rows; the 8
 * groups of a 32-element sub-block are added in int16 (a pair is at most
 * 2 * 15 * 127 = 3810, 8 of them 30480 < 32767) and one vpmaddwd against
 * the rows' scales (SC: int16 pairs [s, s], lane i row i's) adds the
 * sub-block to sumi. Per row and 32 elements that is 1.125 multiplies
 * where the 4-row path takes 2. */
QV_INLINE __m256 tile8_q4(__m256 acc, const uint8_t *const b[8], const pm_act256 *x)
{
	static const int L[8] = {0, 2, 4, 6, 1, 3, 5, 7};
	const __m256i z = _mm256_setzero_si256();
	__m256i k[4];
#pragma GCC unroll 4
	for (int q = 0; q < 4; q++)
		k[q] = pm_kscales8x2(b[2 * q], b[2 * q + 1]); /* rows 2q | 2q + 1 */
	/* summ: min[g] times bs2[g] = bsums[2g] + bsums[2g + 1] (the same
	 * integer as corr . bsums), lanes r0 r2 r4 r6 | r1 r3 r5 r7 after the
	 * adds */
	__m256i p = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)x->bsums), _mm256_set1_epi16(1));
	__m256i bs2 = _mm256_broadcastsi128_si256(
		_mm_packs_epi32(_mm256_castsi256_si128(p), _mm256_extracti128_si256(p, 1)));
	__m256i mv[4];
#pragma GCC unroll 4
	for (int q = 0; q < 4; q++)
		mv[q] = _mm256_madd_epi16(_mm256_unpackhi_epi8(k[q], z), bs2);
	__m256i summ = _mm256_hadd_epi32(_mm256_hadd_epi32(mv[0], mv[1]), _mm256_hadd_epi32(mv[2], mv[3]));
	/* the scales transposed: v[h] dword g % 4 = the scale bytes of group
	 * g = 4h + g % 4 of rows 0 2 4 6 (low lane) and 1 3 5 7 (high lane) */
	__m256i u0 = _mm256_unpacklo_epi8(k[0], k[1]), u1 = _mm256_unpacklo_epi8(k[2], k[3]);
	__m256i v[2] = {_mm256_unpacklo_epi16(u0, u1), _mm256_unpackhi_epi16(u0, u1)};
	const __m256i m15 = _mm256_set1_epi8(15);
	__m256i a = z;
#pragma GCC unroll 4
	for (int c = 0; c < 4; c++) {
		__m256i w[8], g[8];
#pragma GCC unroll 8
		for (int i = 0; i < 8; i++)
			w[i] = _mm256_loadu_si256((const __m256i *)(b[L[i]] + 16 + 32 * c));
		pm_transpose8x32(g, w);
#pragma GCC unroll 2
		for (int h = 0; h < 2; h++) {
			/* group 2c + h: low nibbles (h 0, elements 64c + 4j ..) or
			 * high ones (h 1, 64c + 32 + 4j ..) */
			__m256i s16 = z;
#pragma GCC unroll 8
			for (int j = 0; j < 8; j++) {
				__m256i q = h ? _mm256_and_si256(_mm256_srli_epi16(g[j], 4), m15) : _mm256_and_si256(g[j], m15);
				__m256i xb = _mm256_set1_epi32(*(const qv_i32 *)(x->q + 64 * c + 32 * h + 4 * j));
				s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(q, xb));
			}
			const int grp = 2 * c + h, d = grp % 4;
			/* [s, s] int16 pairs of group grp, lane i row L[i]'s */
			__m256i sc = _mm256_shuffle_epi8(
				v[grp / 4], _mm256_setr_epi8(d * 4, -1, d * 4, -1, d * 4 + 1, -1, d * 4 + 1, -1, d * 4 + 2, -1,
							     d * 4 + 2, -1, d * 4 + 3, -1, d * 4 + 3, -1, d * 4, -1, d * 4, -1,
							     d * 4 + 1, -1, d * 4 + 1, -1, d * 4 + 2, -1, d * 4 + 2, -1,
							     d * 4 + 3, -1, d * 4 + 3, -1));
			a = _mm256_add_epi32(a, _mm256_madd_epi16(s16, sc));
		}
	}
	/* d, dmin in lane order: the conversions of rows 0 2 1 3 and 4 6 5 7
	 * shuffled in-lane */
	__m128i hX = _mm_setr_epi32(*(const qv_i32 *)b[0], *(const qv_i32 *)b[2], *(const qv_i32 *)b[1],
				    *(const qv_i32 *)b[3]);
	__m128i hY = _mm_setr_epi32(*(const qv_i32 *)b[4], *(const qv_i32 *)b[6], *(const qv_i32 *)b[5],
				    *(const qv_i32 *)b[7]);
	__m256 fX = _mm256_cvtph_ps(hX), fY = _mm256_cvtph_ps(hY);
	__m256 d = _mm256_shuffle_ps(fX, fY, _MM_SHUFFLE(2, 0, 2, 0));
	__m256 dmin = _mm256_shuffle_ps(fX, fY, _MM_SHUFFLE(3, 1, 3, 1));
	/* add_k: acc + ((d * dx) * sumi - (dmin * dx) * summ) */
	__m256 dx = _mm256_set1_ps(x->d);
	return _mm256_add_ps(acc, _mm256_sub_ps(_mm256_mul_ps(_mm256_mul_ps(d, dx), _mm256_cvtepi32_ps(a)),
						_mm256_mul_ps(_mm256_mul_ps(dmin, dx), _mm256_cvtepi32_ps(summ))));
}

/* qmv8: Q4_K rows [m0, m1) eight at a time (a short last tile repeats its
 * last row; those lanes are computed and dropped), the next tile's bytes
 * prefetched a share per super-block (qmv_k_rows.h) */
QV_INLINE void qmv8(float *out, const pm_act256 *x, const pm_weight *w, int m0, int m1)
{
	const size_t bb = 144;
	int nb = w->cols / 256;
	size_t rb = w->row_bytes;
	for (int m = m0; m < m1; m += 8) {
		int rows = m1 - m < 8 ? m1 - m : 8;
		const uint8_t *r[8];
		for (int i = 0; i < 8; i++)
			r[i] = pm_weight_row(w, m + (i < rows ? i : rows - 1));
		const char *next = (const char *)r[0] + 8 * rb;
		int prefetch = m + 8 < m1;
		__m256 acc = _mm256_setzero_ps();
		for (int b = 0; b < nb; b++) {
			if (prefetch)
				pm_qmv_prefetch(next, 8 * bb, b);
			const uint8_t *blk[8];
			for (int i = 0; i < 8; i++)
				blk[i] = r[i] + bb * (size_t)b;
			acc = tile8_q4(acc, blk, x + b);
		}
		/* lane order 0 2 4 6 1 3 5 7 back to row order */
		acc = _mm256_permutevar8x32_ps(acc, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
		if (rows == 8) {
			_mm256_storeu_ps(out + m, acc);
		} else {
			float o[8];
			_mm256_storeu_ps(o, acc);
			memcpy(out + m, o, sizeof(float) * (size_t)rows);
		}
	}
}

/* qmv: rows [m0, m1) four at a time, the next four prefetched
 * (qmv_k_rows.h) */
QV_INLINE void qmv(float *out, const pm_act256 *x, const pm_weight *w, int m0, int m1, const int kind,
		   const size_t bb)
{
	PM_QMV4_ROWS(out, x, w, m0, m1, bb,
		     acc = kind == QV_Q6 ? tile4_6(acc, blk, x + b) : tile4_q5(acc, blk, x + b));
}

/* x8_prefetch: share i (of 8) of the LINES cache lines at pf (NULL: none),
 * PER lines: the kernels below spread a later super-block's lines over
 * their steps (27 prefetches at once, Q6_K's, measured 0.7-0.8x from DRAM
 * against the rows; two bursts of 14 0.9x) */
QV_INLINE void x8_prefetch(const uint8_t *pf, const int i, const int per, const int lines)
{
	if (!pf)
		return;
	for (int l = i * per; l < i * per + per && l < lines; l++)
		_mm_prefetch((const char *)pf + 64 * l, _MM_HINT_T0);
}

/* x8_bytes: dword lanes [byte j0, 0, byte j1, 0] of v (j1 < 0: [j0, 0,
 * j0, 0]): int16 pairs of two unsigned bytes of each lane */
QV_INLINE __m256i x8_bytes(__m256i v, const int j0, int j1)
{
	if (j1 < 0)
		j1 = j0;
	const char a = (char)j0, b = (char)j1, z = (char)0x80;
	return _mm256_shuffle_epi8(v, _mm256_setr_epi8(a, z, b, z, 4 + a, z, 4 + b, z, 8 + a, z, 8 + b, z, 12 + a, z,
						       12 + b, z, a, z, b, z, 4 + a, z, 4 + b, z, 8 + a, z, 8 + b, z,
						       12 + a, z, 12 + b, z));
}

/* x8_q4: Q4_K, super-block p of a tile in PM_LAYOUT_KX8 (kx8.h) against
 * x, added to acc (add_k on 8 lanes, row order): tile8_q4 with the codes
 * already in their lanes. The 6-bit scales and mins are decoded bytewise
 * by kscales' rule (qmm_k.c: 32-group j < 4 has sc = byte j of u0 & 63,
 * m = byte j of u1 & 63; group 4 + j has sc = (byte j of u2) & 15 | (byte
 * j of u0) >> 6 << 4, m = (byte j of u2) >> 4 | (byte j of u1) >> 6 << 4):
 * sl, sh hold scales 0..3 and 4..7 of each row in its lane's bytes, ml,
 * mh the mins, and each group's or
 * pair's int16 operand is one byte shuffle of them, so few registers stay
 * live; summ is 4 vpmaddwd of min pairs against bs2 pairs (the same
 * integer as corr . bsums). */
QV_INLINE __m256 x8_q4(__m256 acc, const uint8_t *p, const pm_act256 *x, const uint8_t *pf)
{
	const __m256i u0 = pm_kx8_vec(p, 1), u1 = pm_kx8_vec(p, 2), u2 = pm_kx8_vec(p, 3);
	const __m256i m3f = _mm256_set1_epi8(0x3f), m30 = _mm256_set1_epi8(0x30), m0f = _mm256_set1_epi8(15);
	/* 32-bit shifts: the masks drop the bits that cross a byte */
	const __m256i sl = _mm256_and_si256(u0, m3f), ml = _mm256_and_si256(u1, m3f);
	const __m256i sh = _mm256_or_si256(_mm256_and_si256(u2, m0f), _mm256_and_si256(_mm256_srli_epi32(u0, 2), m30));
	const __m256i mh = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(u2, 4), m0f),
					   _mm256_and_si256(_mm256_srli_epi32(u1, 2), m30));
	/* bs2[g] = bsums[2g] + bsums[2g + 1] (at most 2 * 16 * 127: int16),
	 * as int16 pairs (g, g + 1) in dword g / 2 */
	__m256i bp = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)x->bsums), _mm256_set1_epi16(1));
	__m256i bs2 = _mm256_castsi128_si256(
		_mm_packs_epi32(_mm256_castsi256_si128(bp), _mm256_extracti128_si256(bp, 1)));
	__m256i summ = _mm256_setzero_si256();
#pragma GCC unroll 4
	for (int q = 0; q < 4; q++) {
		__m256i mp = x8_bytes(q < 2 ? ml : mh, 2 * (q % 2), 2 * (q % 2) + 1);
		__m256i bq = _mm256_permutevar8x32_epi32(bs2, _mm256_set1_epi32(q)); /* dword q, broadcast */
		summ = _mm256_add_epi32(summ, _mm256_madd_epi16(mp, bq));
	}
	const __m256i m15 = _mm256_set1_epi8(15);
	__m256i a = _mm256_setzero_si256();
#pragma GCC unroll 4
	for (int c = 0; c < 4; c++) {
#pragma GCC unroll 2
		for (int h = 0; h < 2; h++) {
			x8_prefetch(pf, 2 * c + h, 3, 18); /* 1152 bytes: 18 lines */
			/* group 2c + h: as tile8_q4 (int16 runs of 8 dwords) */
			__m256i s16 = _mm256_setzero_si256();
#pragma GCC unroll 8
			for (int k = 0; k < 8; k++) {
				__m256i g = pm_kx8_vec(p, 4 + 8 * c + k);
				__m256i q = h ? _mm256_and_si256(_mm256_srli_epi16(g, 4), m15) : _mm256_and_si256(g, m15);
				__m256i xb = _mm256_set1_epi32(*(const qv_i32 *)(x->q + 64 * c + 32 * h + 4 * k));
				s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(q, xb));
			}
			const int g = 2 * c + h;
			a = _mm256_add_epi32(a, _mm256_madd_epi16(s16, x8_bytes(g < 4 ? sl : sh, g % 4, -1)));
		}
	}
	__m256 d, dmin;
	pm_kx8_q4_d(p, &d, &dmin);
	/* add_k: acc + ((d * dx) * sumi - (dmin * dx) * summ) */
	__m256 dx = _mm256_set1_ps(x->d);
	return _mm256_add_ps(acc, _mm256_sub_ps(_mm256_mul_ps(_mm256_mul_ps(d, dx), _mm256_cvtepi32_ps(a)),
						_mm256_mul_ps(_mm256_mul_ps(dmin, dx), _mm256_cvtepi32_ps(summ))));
}

/* x8_q6: Q6_K, super-block p of a tile in PM_LAYOUT_KX8 against x, added
 * to acc (add_6 on 8 lanes, row order). Per pair of code words one int16
 * run (a pair of products is at most 2 * 63 * 127: two fit, as in
 * qmm_k_avx2.c) and one vpmaddwd against its 16-group's scale; sumi starts
 * at -summ (corr = 32 * scale against the bsums, a vpmaddwd per pair of
 * 16-groups), so its lanes end as sumi - summ, the one integer add_6
 * takes. */
QV_INLINE __m256 x8_q6(__m256 acc, const uint8_t *p, const pm_act256 *x, const uint8_t *pf)
{
	__m256i a = _mm256_setzero_si256();
#pragma GCC unroll 8
	for (int g = 0; g < 8; g++) {
		__m256i cp = _mm256_slli_epi16(pm_kx8_q6_pair(p, 2 * g, 2 * g + 1), 5); /* corr pairs */
		__m256i bs = _mm256_set1_epi32(*(const qv_i32 *)(x->bsums + 2 * g));
		a = _mm256_sub_epi32(a, _mm256_madd_epi16(cp, bs));
	}
#pragma GCC unroll 2
	for (int c = 0; c < 2; c++) {
#pragma GCC unroll 4
		for (int k = 0; k < 8; k += 2) {
			/* 1680 bytes: 27 lines, 28 when they start mid-line */
			x8_prefetch(pf, 4 * c + k / 2, 4, 28);
			__m256i q0[4], q1[4];
			pm_kx8_q6_codes(p, c, k, q0);
			pm_kx8_q6_codes(p, c, k + 1, q1);
#pragma GCC unroll 4
			for (int j = 0; j < 4; j++) {
				/* words k, k + 1 of element run 128c + 32j: elements
				 * e .. e + 7, e = 128c + 32j + 4k, in 16-group e / 16 */
				const int e = 128 * c + 32 * j + 4 * k;
				__m256i s16 = _mm256_add_epi16(
					_mm256_maddubs_epi16(q0[j], _mm256_set1_epi32(*(const qv_i32 *)(x->q + e))),
					_mm256_maddubs_epi16(q1[j], _mm256_set1_epi32(*(const qv_i32 *)(x->q + e + 4))));
				a = _mm256_add_epi32(a, _mm256_madd_epi16(s16, pm_kx8_q6_pair(p, e / 16, e / 16)));
			}
		}
	}
	/* add_6: acc + (d * dx) * (sumi - summ) */
	return _mm256_add_ps(acc, _mm256_mul_ps(_mm256_mul_ps(pm_kx8_q6_d(p), _mm256_set1_ps(x->d)),
						_mm256_cvtepi32_ps(a)));
}

/* qmv_x8: tiles (PM_LAYOUT_KX8) of rows [m0, m1), multiples of 8 (or m1
 * the last row), of super-blocks of BB bytes (per row). A tile's bytes are
 * one stream, read in order; the super-block X8_AHEAD ahead is
 * prefetched while each is used (into the next tile: tiles are
 * contiguous). */
enum { X8_AHEAD = 2 };
QV_INLINE void qmv_x8(float *out, const pm_act256 *x, const pm_weight *w, int m0, int m1, const int kind,
		      const size_t BB)
{
	int nb = w->cols / 256;
	const uint8_t *end = (const uint8_t *)pm_weight_row(w, m1 - 1) + w->row_bytes;
	for (int m = m0; m < m1; m += 8) {
		const uint8_t *p = pm_weight_row(w, m);
		__m256 acc = _mm256_setzero_ps();
		for (int b = 0; b < nb; b++, p += 8 * BB) {
			const uint8_t *ahead = p + X8_AHEAD * 8 * BB;
			if (ahead >= end)
				ahead = NULL;
			acc = kind == QV_Q6 ? x8_q6(acc, p, x + b, ahead) : x8_q4(acc, p, x + b, ahead);
		}
		_mm256_storeu_ps(out + m, acc);
	}
}

QV_ATTR void pm_qmv_q4_k_avx2(float *out, const pm_act256 *x, const pm_weight *w, int m0, int m1)
{
	if (w->layout == PM_LAYOUT_KX8)
		qmv_x8(out, x, w, m0, m1, QV_Q4, 144);
	else
		qmv8(out, x, w, m0, m1);
}

QV_ATTR void pm_qmv_q5_k_avx2(float *out, const pm_act256 *x, const pm_weight *w, int m0, int m1)
{
	qmv(out, x, w, m0, m1, QV_Q5, 176);
}

QV_ATTR void pm_qmv_q6_k_avx2(float *out, const pm_act256 *x, const pm_weight *w, int m0, int m1)
{
	if (w->layout == PM_LAYOUT_KX8)
		qmv_x8(out, x, w, m0, m1, QV_Q6, 210);
	else
		qmv(out, x, w, m0, m1, QV_Q6, 210);
}
#endif
