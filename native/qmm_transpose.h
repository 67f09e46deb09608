/*
 * qmm_transpose.h: the 8 x 8 transpose of 32-bit groups that the
 * interleaved integer tiles share (qmm_32_avx2.c's AVX2 tiles and
 * qmm_32_x86.h's VNNI ones): g[j] = group j of u[i] in lane i, so lane i
 * of g[j] holds the codes of elements 4j .. 4j+3 of row i. AVX2 only, so
 * it inlines into every build that has AVX2 or more.
 *
 * pm_interleave_nib8 is the same interleave for 4-bit codes (Q4_0, Q4_1),
 * shared by qmv_32_avx2.c's AVX2 decode and qmm_32_x86.h's VNNI tiles.
 */
#ifndef PM_QMM_TRANSPOSE_H
#define PM_QMM_TRANSPOSE_H

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

static inline __attribute__((always_inline, target("avx2"))) void pm_transpose8x32(__m256i g[8], const __m256i u[8])
{
	__m256i t0 = _mm256_unpacklo_epi32(u[0], u[1]), t1 = _mm256_unpackhi_epi32(u[0], u[1]);
	__m256i t2 = _mm256_unpacklo_epi32(u[2], u[3]), t3 = _mm256_unpackhi_epi32(u[2], u[3]);
	__m256i t4 = _mm256_unpacklo_epi32(u[4], u[5]), t5 = _mm256_unpackhi_epi32(u[4], u[5]);
	__m256i t6 = _mm256_unpacklo_epi32(u[6], u[7]), t7 = _mm256_unpackhi_epi32(u[6], u[7]);
	__m256i s0 = _mm256_unpacklo_epi64(t0, t2), s1 = _mm256_unpackhi_epi64(t0, t2);
	__m256i s2 = _mm256_unpacklo_epi64(t1, t3), s3 = _mm256_unpackhi_epi64(t1, t3);
	__m256i s4 = _mm256_unpacklo_epi64(t4, t6), s5 = _mm256_unpackhi_epi64(t4, t6);
	__m256i s6 = _mm256_unpacklo_epi64(t5, t7), s7 = _mm256_unpackhi_epi64(t5, t7);
	g[0] = _mm256_permute2x128_si256(s0, s4, 0x20);
	g[4] = _mm256_permute2x128_si256(s0, s4, 0x31);
	g[1] = _mm256_permute2x128_si256(s1, s5, 0x20);
	g[5] = _mm256_permute2x128_si256(s1, s5, 0x31);
	g[2] = _mm256_permute2x128_si256(s2, s6, 0x20);
	g[6] = _mm256_permute2x128_si256(s2, s6, 0x31);
	g[3] = _mm256_permute2x128_si256(s3, s7, 0x20);
	g[7] = _mm256_permute2x128_si256(s3, s7, 0x31);
}

/* pm_interleave_nib8: the 16 bytes of 4-bit codes at p[i] + off of 8 rows
 * interleaved: group j < 4 is 32-bit word j masked to its low nibbles,
 * group j + 4 the same word's high nibbles (lane i row i), so only the 4
 * words are transposed */
static inline __attribute__((always_inline, target("avx2"))) void pm_interleave_nib8(__m256i g[8],
										       const uint8_t *const p[8],
										       size_t off)
{
	__m256i r[4];
#pragma GCC unroll 8
	for (int i = 0; i < 4; i++)
		r[i] = _mm256_set_m128i(_mm_loadu_si128((const __m128i *)(p[i + 4] + off)),
					_mm_loadu_si128((const __m128i *)(p[i] + off)));
	__m256i t0 = _mm256_unpacklo_epi32(r[0], r[1]), t1 = _mm256_unpackhi_epi32(r[0], r[1]);
	__m256i t2 = _mm256_unpacklo_epi32(r[2], r[3]), t3 = _mm256_unpackhi_epi32(r[2], r[3]);
	__m256i v[4] = {_mm256_unpacklo_epi64(t0, t2), _mm256_unpackhi_epi64(t0, t2), _mm256_unpacklo_epi64(t1, t3),
			_mm256_unpackhi_epi64(t1, t3)};
	const __m256i m = _mm256_set1_epi8(15);
#pragma GCC unroll 8
	for (int j = 0; j < 4; j++) {
		g[j] = _mm256_and_si256(v[j], m);
		g[j + 4] = _mm256_and_si256(_mm256_srli_epi16(v[j], 4), m);
	}
}
#endif

#endif
