/*
 * qmm_transpose.h: the 8 x 8 transpose of 32-bit groups that the
 * interleaved integer tiles share (qmm_32_avx2.c's AVX2 tiles and
 * qmm_32_x86.h's VNNI ones): g[j] = group j of u[i] in lane i, so lane i
 * of g[j] holds the codes of elements 4j .. 4j+3 of row i. AVX2 only, so
 * it inlines into every build that has AVX2 or more.
 */
#ifndef PM_QMM_TRANSPOSE_H
#define PM_QMM_TRANSPOSE_H

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

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
#endif

#endif
