/*
 * kx8.h: K-quant weights (Q4_K, Q6_K) repacked in tiles of 8 rows
 * (pm_weight.layout == PM_LAYOUT_KX8), and the loads the AVX2 kernels that
 * read them share (qmv_k_avx2.c: decode at batch 1; qmm_k_avx2.c:
 * batches).
 *
 * The layout: rows come in tiles of 8, rows 8t .. 8t+7 in tile t. For each
 * super-block b (256 elements) a tile holds its 8 rows' blocks of b (BB
 * bytes each: 144 for Q4_K, 210 for Q6_K) transposed in 32-bit words, in
 * 8 * BB bytes at data + (t * nb + b) * 8 * BB (nb = cols / 256): 32-byte
 * vector j holds word j of each block, row 8t + i's in lane i (bytes 4i ..
 * 4i+3). Q6_K's last 2 bytes (d, past its 52 words) follow as 8 halves,
 * row i's at 2i. In the block layouts (quant_k.c) that puts:
 *   Q4_K  vector 0: d and dmin; 1 .. 3: the scale words u0 .. u2; 4 + 8c +
 *         k: word k of code chunk c (qs[32c ..]: low nibbles are elements
 *         64c + 4k .., high ones 64c + 32 + 4k ..);
 *   Q6_K  vector 16c + k: word k of ql[64c ..]; 16c + 8 + k: of ql[64c +
 *         32 ..]; 32 + 8c + k: of qh[32c ..]; 48 .. 51: the 16 int8 scales;
 *         then the halves d.
 * A tile occupies the bytes its 8 rows did (row_bytes and pm_weight_row(w,
 * 8t) still give its size and start: a range of whole tiles is
 * contiguous); rows is a multiple of 8.
 *
 * Why: the row-major AVX2 decode kernels read 8 (Q4_K) or 4 (Q6_K) rows
 * at a time, each its own stream 8 or 4 rows' bytes apart that the
 * hardware prefetcher did not follow, and Q4_K's spent 24 shuffles per 64
 * elements transposing codes into the lanes one vpmaddubsw per 8 rows
 * wants. Here a tile's bytes are one stream read in order, already in
 * those lanes. Measured on AMD EPYC Zen 3 (one thread, a stand-alone loop
 * over 8 matrices of 8192 x 2048 Q4_K, from DRAM): ~11 GB/s against ~8.6
 * for the rows (the machine reads ~13 with loads alone); in L2 26-30
 * against ~19.
 *
 * The integers and the float steps are qmm_k.c's, so every output is
 * bitwise what the rows give (only the order the bytes are read in
 * differs); test_qmm_k.c checks it.
 */
#ifndef PM_KX8_H
#define PM_KX8_H

#include <stddef.h>
#include <stdint.h>

#include "weights.h"

/* pm_kx8_ok: w is Q4_K or Q6_K in rows and its rows a multiple of 8. */
int pm_kx8_ok(const pm_weight *w);

/* pm_kx8_pack writes w's blocks (pm_kx8_ok) into dst (w->rows *
 * w->row_bytes bytes) in tiles. */
void pm_kx8_pack(uint8_t *dst, const pm_weight *w);

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define KX8_INLINE static inline __attribute__((always_inline, target("avx2,f16c")))

/* pm_kx8_vec: vector j of a tile's super-block p */
KX8_INLINE __m256i pm_kx8_vec(const uint8_t *p, int j)
{
	return _mm256_loadu_si256((const __m256i *)(p + 32 * j));
}

/* pm_kx8_q4_d: a Q4_K super-block's d and dmin of the 8 rows, lane i row
 * i's (the halves gathered from vector 0's words) */
KX8_INLINE void pm_kx8_q4_d(const uint8_t *p, __m256 *d, __m256 *dmin)
{
	__m256i h = _mm256_shuffle_epi8(pm_kx8_vec(p, 0), _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10,
									   11, 14, 15, 0, 1, 4, 5, 8, 9, 12, 13, 2,
									   3, 6, 7, 10, 11, 14, 15));
	h = _mm256_permute4x64_epi64(h, _MM_SHUFFLE(3, 1, 2, 0));
	*d = _mm256_cvtph_ps(_mm256_castsi256_si128(h));
	*dmin = _mm256_cvtph_ps(_mm256_extracti128_si256(h, 1));
}

/* pm_kx8_q6_d: a Q6_K super-block's d of the 8 rows, lane i row i's */
KX8_INLINE __m256 pm_kx8_q6_d(const uint8_t *p)
{
	return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + 32 * 52)));
}

/* pm_kx8_q6_pair: of a Q6_K super-block's int8 scales, lane i holds row
 * i's scales s0 (low int16 half) and s1 (high half), sign-extended; s0,
 * s1 in the same word (s0 / 4 == s1 / 4): each byte moved to the high
 * byte of its half, then an arithmetic shift */
KX8_INLINE __m256i pm_kx8_q6_pair(const uint8_t *p, const int s0, const int s1)
{
	const char a = (char)(s0 % 4), b = (char)(s1 % 4);
	__m256i m = _mm256_setr_epi8(0, a, 0, b, 4, 4 + a, 4, 4 + b, 8, 8 + a, 8, 8 + b, 12, 12 + a, 12, 12 + b, 0, a,
				     0, b, 4, 4 + a, 4, 4 + b, 8, 8 + a, 8, 8 + b, 12, 12 + a, 12, 12 + b);
	return _mm256_srai_epi16(_mm256_shuffle_epi8(pm_kx8_vec(p, 48 + s0 / 4), m), 8);
}

/* pm_kx8_q6_codes: the 6-bit codes of words k of chunk c (c < 2, k < 8)
 * of a Q6_K super-block's 8 rows: q[j] (j < 4) lane i holds row i's codes
 * of elements 128c + 32j + 4k .. +3 (4 low bits from ql, 2 high from qh
 * at bits 4, 5: 16-bit shifts, the masks drop what crosses a byte) */
KX8_INLINE void pm_kx8_q6_codes(const uint8_t *p, int c, int k, __m256i q[4])
{
	const __m256i m15 = _mm256_set1_epi8(15), m30 = _mm256_set1_epi8(0x30);
	__m256i l0 = pm_kx8_vec(p, 16 * c + k), l1 = pm_kx8_vec(p, 16 * c + 8 + k), h = pm_kx8_vec(p, 32 + 8 * c + k);
	q[0] = _mm256_or_si256(_mm256_and_si256(l0, m15), _mm256_and_si256(_mm256_slli_epi16(h, 4), m30));
	q[1] = _mm256_or_si256(_mm256_and_si256(l1, m15), _mm256_and_si256(_mm256_slli_epi16(h, 2), m30));
	q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m15), _mm256_and_si256(h, m30));
	q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m15),
			       _mm256_and_si256(_mm256_srli_epi16(h, 2), m30));
}
#undef KX8_INLINE
#endif

#endif
