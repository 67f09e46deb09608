/*
 * quant_k.c: the 256-wide "K" super-blocks (ggml's Q4_K, Q5_K, Q6_K).
 * A super-block holds 256 consecutive elements of a row in sub-blocks
 * with small integer scales, scaled by F16 super-scales. Bytes,
 * little-endian:
 *
 *   Q4_K (144)  d[2] dmin[2] scales[12] qs[128]
 *   Q5_K (176)  d[2] dmin[2] scales[12] qh[32] qs[128]
 *   Q6_K (210)  ql[128] qh[64] scales[16] d[2]
 *
 * Q4_K, Q5_K: 8 sub-blocks of 32, each with a 6-bit scale sc and a 6-bit
 * min m packed in scales[12]: sub-block s < 4 has sc = scales[s] & 63,
 * m = scales[s+4] & 63; s >= 4 has sc = (scales[s+4] & 15) | (scales[s-4] >> 6) << 4,
 * m = (scales[s+4] >> 4) | (scales[s] >> 6) << 4. Elements come in 4 chunks
 * of 64: chunk c's first 32 are the low nibbles of qs[32c..32c+32)
 * (sub-block 2c), its last 32 the high nibbles (sub-block 2c+1). Q5_K's
 * fifth bit of element 64c+l is bit 2c of qh[l], of 64c+32+l bit 2c+1.
 *
 *   y = (d * sc) * q - (dmin * m)
 *
 * Q6_K: 16 sub-blocks of 16 with an int8 scale each; the 6-bit q is 4 low
 * bits in ql and 2 high bits in qh. In half c (128 elements) and l < 32:
 * ql[64c+l] holds the low bits of elements l (low nibble) and l+64 (high),
 * ql[64c+l+32] those of l+32 and l+96, and qh[32c+l] the high bits of l,
 * l+32, l+64, l+96 in bit pairs 0-1, 2-3, 4-5, 6-7.
 *
 *   y = (d * scale) * (q - 32)
 *
 * Every product and difference is one float32 operation, as in
 * native/gguf/quant_k.go.
 */
#include <string.h>

#include "weights.h"

static float f16at(const uint8_t *p)
{
	uint16_t h;
	memcpy(&h, p, 2);
	return pm_half_to_float(h);
}

static void scale_min(const uint8_t *sc, int s, int *d, int *m)
{
	if (s < 4) {
		*d = sc[s] & 63;
		*m = sc[s + 4] & 63;
	} else {
		*d = (sc[s + 4] & 15) | (sc[s - 4] >> 6) << 4;
		*m = (sc[s + 4] >> 4) | (sc[s] >> 6) << 4;
	}
}

/* dq_k decodes one Q4_K (qh NULL) or Q5_K super-block. */
static void dq_k(float *y, const uint8_t *b, const uint8_t *qh, const uint8_t *qs)
{
	float d = f16at(b), dmin = f16at(b + 2);
	for (int c = 0; c < 4; c++)
		for (int h = 0; h < 2; h++) {
			int sc, m;
			scale_min(b + 4, 2 * c + h, &sc, &m);
			float d1 = d * (float)sc, m1 = dmin * (float)m;
			for (int l = 0; l < 32; l++) {
				int q = h ? qs[32 * c + l] >> 4 : qs[32 * c + l] & 15;
				if (qh)
					q |= ((qh[l] >> (2 * c + h)) & 1) << 4;
				y[64 * c + 32 * h + l] = d1 * (float)q - m1;
			}
		}
}

void pm_dq_q4_k(float *y, const void *row, int cols)
{
	for (const uint8_t *b = row; cols > 0; cols -= 256, b += 144, y += 256)
		dq_k(y, b, NULL, b + 16);
}

void pm_dq_q5_k(float *y, const void *row, int cols)
{
	for (const uint8_t *b = row; cols > 0; cols -= 256, b += 176, y += 256)
		dq_k(y, b, b + 16, b + 48);
}

void pm_dq_q6_k(float *y, const void *row, int cols)
{
	for (const uint8_t *b = row; cols > 0; cols -= 256, b += 210, y += 256) {
		const uint8_t *ql = b, *qh = b + 128;
		const int8_t *sc = (const int8_t *)(b + 192);
		float d = f16at(b + 208);
		for (int c = 0; c < 2; c++)
			for (int l = 0; l < 32; l++) {
				int q[4] = {
					(ql[64 * c + l] & 15) | (qh[32 * c + l] & 3) << 4,
					(ql[64 * c + l + 32] & 15) | ((qh[32 * c + l] >> 2) & 3) << 4,
					(ql[64 * c + l] >> 4) | ((qh[32 * c + l] >> 4) & 3) << 4,
					(ql[64 * c + l + 32] >> 4) | ((qh[32 * c + l] >> 6) & 3) << 4,
				};
				for (int i = 0; i < 4; i++) {
					int e = 128 * c + 32 * i + l;
					y[e] = d * (float)sc[e / 16] * (float)(q[i] - 32);
				}
			}
	}
}

#ifdef PM_HAVE_AVX2_DQ
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2,fma")))
#define AVX2_INLINE static inline __attribute__((always_inline, target("avx2,fma")))

/* sub32 writes y[j] = d1 * q[j] - m1 for 32 unsigned byte codes q. */
AVX2_INLINE void sub32(float *y, __m256i q, float d1, float m1)
{
	__m256 d = _mm256_set1_ps(d1), m = _mm256_set1_ps(m1);
	__m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
	__m128i p[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
	for (int i = 0; i < 4; i++) {
		__m256 v = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(p[i])));
		_mm256_storeu_ps(y + 8 * i, _mm256_sub_ps(v, m));
	}
}

AVX2_INLINE void dq_k_avx2(float *y, const uint8_t *b, const uint8_t *qh, const uint8_t *qs)
{
	float d = f16at(b), dmin = f16at(b + 2);
	const __m256i m15 = _mm256_set1_epi8(15), m16 = _mm256_set1_epi8(16);
	__m256i hb = qh ? _mm256_loadu_si256((const __m256i *)qh) : _mm256_setzero_si256();
	for (int c = 0; c < 4; c++) {
		__m256i v = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
		__m256i q[2] = {_mm256_and_si256(v, m15), _mm256_and_si256(_mm256_srli_epi16(v, 4), m15)};
		for (int h = 0; h < 2; h++) {
			if (qh) {
				__m256i bit = _mm256_set1_epi8((char)(1 << (2 * c + h)));
				__m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(hb, bit), bit);
				q[h] = _mm256_or_si256(q[h], _mm256_and_si256(set, m16));
			}
			int sc, m;
			scale_min(b + 4, 2 * c + h, &sc, &m);
			sub32(y + 64 * c + 32 * h, q[h], d * (float)sc, dmin * (float)m);
		}
	}
}

AVX2 void pm_dq_q4_k_avx2(float *y, const void *row, int cols)
{
	for (const uint8_t *b = row; cols > 0; cols -= 256, b += 144, y += 256)
		dq_k_avx2(y, b, NULL, b + 16);
}

AVX2 void pm_dq_q5_k_avx2(float *y, const void *row, int cols)
{
	for (const uint8_t *b = row; cols > 0; cols -= 256, b += 176, y += 256)
		dq_k_avx2(y, b, b + 16, b + 48);
}

/* scale16 writes y[j] = s0 * q[j] for j < 8 and s0 (again) for 8..15 of
 * one 16-element sub-block: 16 signed byte codes in q. */
AVX2_INLINE void mul16(float *y, __m128i q, float s)
{
	__m256 d = _mm256_set1_ps(s);
	_mm256_storeu_ps(y, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q))));
	_mm256_storeu_ps(y + 8, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(
							_mm_srli_si128(q, 8)))));
}

AVX2 void pm_dq_q6_k_avx2(float *y, const void *row, int cols)
{
	const __m256i m15 = _mm256_set1_epi8(15), m3 = _mm256_set1_epi8(3), m32 = _mm256_set1_epi8(32);
	for (const uint8_t *b = row; cols > 0; cols -= 256, b += 210, y += 256) {
		const int8_t *sc = (const int8_t *)(b + 192);
		float d = f16at(b + 208);
		for (int c = 0; c < 2; c++) {
			__m256i l0 = _mm256_loadu_si256((const __m256i *)(b + 64 * c));
			__m256i l1 = _mm256_loadu_si256((const __m256i *)(b + 64 * c + 32));
			__m256i h = _mm256_loadu_si256((const __m256i *)(b + 128 + 32 * c));
			__m256i q[4] = {
				_mm256_or_si256(_mm256_and_si256(l0, m15),
						_mm256_slli_epi16(_mm256_and_si256(h, m3), 4)),
				_mm256_or_si256(_mm256_and_si256(l1, m15),
						_mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 2), m3), 4)),
				_mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m15),
						_mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 4), m3), 4)),
				_mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m15),
						_mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 6), m3), 4)),
			};
			for (int i = 0; i < 4; i++) {
				__m256i v = _mm256_sub_epi8(q[i], m32);
				int e = 128 * c + 32 * i;
				mul16(y + e, _mm256_castsi256_si128(v), d * (float)sc[e / 16]);
				mul16(y + e + 16, _mm256_extracti128_si256(v, 1), d * (float)sc[e / 16 + 1]);
			}
		}
	}
}
#endif
