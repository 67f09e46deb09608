/*
 * kscales_avx2.h: the Q4_K/Q5_K scale decoding that qmm_k_vnni.c's VNNI
 * decode path and qmv_k_avx2.c's AVX2 one share. x86-64 only; AVX2 code
 * that inlines into any caller compiled for AVX2 or more.
 */
#ifndef PM_KSCALES_AVX2_H
#define PM_KSCALES_AVX2_H

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#include <stdint.h>

/* pm_kscales8x2: the 8 6-bit scales (bytes 0..7) and mins (bytes 8..15)
 * of two Q4_K/Q5_K super-blocks, b0's in the low lane and b1's in the
 * high one, from the 12 bytes at b + 4 (16 read, inside the block): sub-
 * block s < 4 has sc = b[s] & 63, m = b[s+4] & 63; s >= 4 has sc =
 * (b[s+4] & 15) | (b[s-4] >> 6) << 4 and m = (b[s+4] >> 4) | (b[s] >> 6)
 * << 4 (b: the 12 bytes), done on three 32-bit words at once. */
static inline __attribute__((always_inline, target("avx2"))) __m256i pm_kscales8x2(const uint8_t *b0,
										    const uint8_t *b1)
{
	__m256i v = _mm256_loadu2_m128i((const __m128i *)(b1 + 4), (const __m128i *)(b0 + 4));
	__m256i lo = _mm256_and_si256(v, _mm256_set1_epi32(0x3f3f3f3f));
	__m256i c = _mm256_srlv_epi32(_mm256_shuffle_epi32(v, _MM_SHUFFLE(2, 2, 2, 2)),
				      _mm256_setr_epi32(0, 4, 0, 0, 0, 4, 0, 0));
	__m256i hi = _mm256_or_si256(_mm256_and_si256(c, _mm256_set1_epi32(0x0f0f0f0f)),
				     _mm256_and_si256(_mm256_srli_epi32(v, 2), _mm256_set1_epi32(0x30303030)));
	return _mm256_unpacklo_epi32(lo, hi);
}
#endif

#endif
