/*
 * quant_float.c: the float weight formats, one element per "block".
 *
 *   F32   4 bytes  IEEE 754 binary32, little-endian
 *   F16   2 bytes  IEEE 754 binary16 (widened exactly)
 *   BF16  2 bytes  the upper half of a binary32 (widened exactly: << 16)
 *
 * Rows in the mapping are only as aligned as the file made them: every
 * load is unaligned-safe (memcpy, loadu).
 */
#include <string.h>

#include "weights.h"

float pm_half_to_float(uint16_t h)
{
	uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
	if (exp == 0x1f) {
		bits = sign | 0x7f800000u | (man << 13);
	} else if (exp != 0) {
		bits = sign | ((exp + 112) << 23) | (man << 13);
	} else if (man == 0) {
		bits = sign;
	} else { /* subnormal: man x 2^-24 (exact in float) */
		float f = (float)man * (1.0f / 16777216.0f);
		return sign ? -f : f;
	}
	float f;
	memcpy(&f, &bits, 4);
	return f;
}

void pm_dq_f32(float *out, const void *row, int cols)
{
	memcpy(out, row, (size_t)cols * sizeof(float));
}

void pm_dq_f16(float *out, const void *row, int cols)
{
	const uint8_t *p = row;
	for (int i = 0; i < cols; i++) {
		uint16_t h;
		memcpy(&h, p + 2 * (size_t)i, 2);
		out[i] = pm_half_to_float(h);
	}
}

void pm_dq_bf16(float *out, const void *row, int cols)
{
	const uint8_t *p = row;
	for (int i = 0; i < cols; i++) {
		uint16_t h;
		memcpy(&h, p + 2 * (size_t)i, 2);
		uint32_t b = (uint32_t)h << 16;
		memcpy(&out[i], &b, 4);
	}
}

#ifdef PM_HAVE_AVX2_DQ
#include <immintrin.h>

__attribute__((target("avx2,fma,f16c"))) void pm_dq_f16_avx2(float *out, const void *row, int cols)
{
	const uint8_t *p = row;
	int i = 0;
	for (; i + 8 <= cols; i += 8)
		_mm256_storeu_ps(out + i,
				 _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + 2 * (size_t)i))));
	if (i < cols)
		pm_dq_f16(out + i, p + 2 * (size_t)i, cols - i);
}

__attribute__((target("avx2,fma"))) void pm_dq_bf16_avx2(float *out, const void *row, int cols)
{
	const uint8_t *p = row;
	int i = 0;
	for (; i + 8 <= cols; i += 8) {
		__m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(p + 2 * (size_t)i)));
		_mm256_storeu_ps(out + i, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
	}
	if (i < cols)
		pm_dq_bf16(out + i, p + 2 * (size_t)i, cols - i);
}
#endif
