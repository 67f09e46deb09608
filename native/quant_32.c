/*
 * quant_32.c: the 32-wide block formats (ggml's Q4_0, Q4_1, Q5_0, Q5_1,
 * Q8_0). A block holds 32 consecutive elements of a row; d and m are F16.
 * Bytes, little-endian:
 *
 *   Q8_0 (34)  d[2] qs[32]             y[j] = d * int8(qs[j])
 *   Q4_0 (18)  d[2] qs[16]             y[j]    = d * (lo4(qs[j]) - 8)
 *                                      y[j+16] = d * (hi4(qs[j]) - 8)      j < 16
 *   Q4_1 (20)  d[2] m[2] qs[16]        y[j] = d * lo4(qs[j]) + m, y[j+16] = d * hi4(qs[j]) + m
 *   Q5_0 (22)  d[2] qh[4] qs[16]       q[j] = lo4(qs[j]) | (bit j of qh) << 4,
 *                                      q[j+16] = hi4(qs[j]) | (bit j+16 of qh) << 4,
 *                                      y = d * (q - 16)            (qh a little-endian uint32)
 *   Q5_1 (24)  d[2] m[2] qh[4] qs[16]  Q5_0's 5-bit q, y = d * q + m
 *
 * Each product and sum is one float32 operation, as in native/gguf/quant_32.go
 * (this file builds with -std=c11, so nothing is contracted into an FMA).
 */
#include <string.h>

#include "weights.h"

static float f16at(const uint8_t *p)
{
	uint16_t h;
	memcpy(&h, p, 2);
	return pm_half_to_float(h);
}

static uint32_t u32at(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return v;
}

/* nib returns the 4-bit code of element j (< 32) of a block's qs[16]. */
static int nib(const uint8_t *qs, int j)
{
	return j < 16 ? qs[j] & 15 : qs[j - 16] >> 4;
}

void pm_dq_q8_0(float *y, const void *row, int cols)
{
	for (const uint8_t *b = row; cols > 0; cols -= 32, b += 34, y += 32) {
		float d = f16at(b);
		for (int j = 0; j < 32; j++)
			y[j] = d * (float)(int8_t)b[2 + j];
	}
}

void pm_dq_q4_0(float *y, const void *row, int cols)
{
	for (const uint8_t *b = row; cols > 0; cols -= 32, b += 18, y += 32) {
		float d = f16at(b);
		for (int j = 0; j < 32; j++)
			y[j] = d * (float)(nib(b + 2, j) - 8);
	}
}

void pm_dq_q4_1(float *y, const void *row, int cols)
{
	for (const uint8_t *b = row; cols > 0; cols -= 32, b += 20, y += 32) {
		float d = f16at(b), m = f16at(b + 2);
		for (int j = 0; j < 32; j++)
			y[j] = d * (float)nib(b + 4, j) + m;
	}
}

void pm_dq_q5_0(float *y, const void *row, int cols)
{
	for (const uint8_t *b = row; cols > 0; cols -= 32, b += 22, y += 32) {
		float d = f16at(b);
		uint32_t qh = u32at(b + 2);
		for (int j = 0; j < 32; j++)
			y[j] = d * (float)((nib(b + 6, j) | (int)((qh >> j) & 1) << 4) - 16);
	}
}

void pm_dq_q5_1(float *y, const void *row, int cols)
{
	for (const uint8_t *b = row; cols > 0; cols -= 32, b += 24, y += 32) {
		float d = f16at(b), m = f16at(b + 2);
		uint32_t qh = u32at(b + 4);
		for (int j = 0; j < 32; j++)
			y[j] = d * (float)(nib(b + 8, j) | (int)((qh >> j) & 1) << 4) + m;
	}
}

#ifdef PM_HAVE_AVX2_DQ
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2,fma")))
#define AVX2_INLINE static inline __attribute__((always_inline, target("avx2,fma")))

/* codes32 returns a block's 32 4-bit codes as bytes, element order. */
AVX2_INLINE __m256i codes32(const uint8_t *qs)
{
	__m128i v = _mm_loadu_si128((const __m128i *)qs);
	__m128i m = _mm_set1_epi8(15);
	return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m), _mm_and_si128(v, m));
}

/* high5 returns 16 in byte j where bit j of qh is set, else 0. */
AVX2_INLINE __m256i high5(uint32_t qh)
{
	const __m256i shuf = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2,
					      2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
	const __m256i bit = _mm256_set1_epi64x(0x8040201008040201);
	__m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)qh), shuf);
	v = _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
	return _mm256_and_si256(v, _mm256_set1_epi8(16));
}

/* store32 writes y[j] = d * q[j] (+ m when add) for the 32 signed bytes q. */
AVX2_INLINE void store32(float *y, __m256i q, __m256 d, __m256 m, int add)
{
	__m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
	__m128i p[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
	for (int i = 0; i < 4; i++) {
		__m256 v = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(p[i])));
		_mm256_storeu_ps(y + 8 * i, add ? _mm256_add_ps(v, m) : v);
	}
}

AVX2 void pm_dq_q8_0_avx2(float *y, const void *row, int cols)
{
	__m256 z = _mm256_setzero_ps();
	for (const uint8_t *b = row; cols > 0; cols -= 32, b += 34, y += 32)
		store32(y, _mm256_loadu_si256((const __m256i *)(b + 2)), _mm256_set1_ps(f16at(b)), z, 0);
}

AVX2 void pm_dq_q4_0_avx2(float *y, const void *row, int cols)
{
	__m256 z = _mm256_setzero_ps();
	for (const uint8_t *b = row; cols > 0; cols -= 32, b += 18, y += 32)
		store32(y, _mm256_sub_epi8(codes32(b + 2), _mm256_set1_epi8(8)),
			_mm256_set1_ps(f16at(b)), z, 0);
}

AVX2 void pm_dq_q4_1_avx2(float *y, const void *row, int cols)
{
	for (const uint8_t *b = row; cols > 0; cols -= 32, b += 20, y += 32)
		store32(y, codes32(b + 4), _mm256_set1_ps(f16at(b)), _mm256_set1_ps(f16at(b + 2)), 1);
}

AVX2 void pm_dq_q5_0_avx2(float *y, const void *row, int cols)
{
	__m256 z = _mm256_setzero_ps();
	for (const uint8_t *b = row; cols > 0; cols -= 32, b += 22, y += 32) {
		__m256i q = _mm256_or_si256(codes32(b + 6), high5(u32at(b + 2)));
		store32(y, _mm256_sub_epi8(q, _mm256_set1_epi8(16)), _mm256_set1_ps(f16at(b)), z, 0);
	}
}

AVX2 void pm_dq_q5_1_avx2(float *y, const void *row, int cols)
{
	for (const uint8_t *b = row; cols > 0; cols -= 32, b += 24, y += 32) {
		__m256i q = _mm256_or_si256(codes32(b + 8), high5(u32at(b + 4)));
		store32(y, q, _mm256_set1_ps(f16at(b)), _mm256_set1_ps(f16at(b + 2)), 1);
	}
}
#endif
