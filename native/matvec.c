/*
 * matvec.c: AVX2 matrix-vector products (decode at batch 1) that decode
 * each weight block in registers and feed it straight to the FMAs, instead
 * of dequantizing a tile to memory and reading it back (pm_matmul_w's
 * path for batches).
 *
 * Batch invariance: a result is bitwise the one pm_matmul_w's tile path
 * gives. Each output is one 8-lane accumulator fed the row's 8-element
 * chunks in order by fmadd(x, w, acc), w decoded with exactly the float32
 * operations of the row dequantizers (quant_*.c), then reduced by the tree
 * ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)): the sequence kernels.c's matmul runs
 * on the dequantized rows. test_quant.c checks the two agree bitwise.
 *
 * The 32-block types (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1) no longer come here:
 * they compute with int8 activations and integer dot products (qmm_32.c,
 * actquant.h). Measured against this file's float Q8_0/Q4_0 kernels and
 * the float tile path, one thread, side by side (min of 7, shared
 * machine): decode 2.0-3.4x (1376x512 .. 4096x2048), 8 rows 2.2-3.0x,
 * 64 rows 1.7-2.0x with VNNI (0.8-1.0x with AVX2 alone), at a cost of
 * ~0.4% relative error per product; the Go reference quantizes its
 * activations by the same rule, so greedy tokens still match it. The
 * types here keep float32 activations.
 */
#include "kernels.h"
#include "weights.h"

#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2,fma,f16c")))
#define AVX2_INLINE static inline __attribute__((always_inline, target("avx2,fma,f16c")))

AVX2_INLINE float f16at(const uint8_t *p)
{
	uint16_t h;
	memcpy(&h, p, 2);
	return _cvtsh_ss(h);
}

/* The same reduction as kernels.c's hsum4. */
AVX2_INLINE __m128 hsum4(__m256 a, __m256 b, __m256 c, __m256 d)
{
	__m256 t0 = _mm256_hadd_ps(a, b);
	__m256 t1 = _mm256_hadd_ps(c, d);
	__m256 t2 = _mm256_hadd_ps(t0, t1);
	return _mm_add_ps(_mm256_castps256_ps128(t2), _mm256_extractf128_ps(t2, 1));
}

/* dec_* decode 32-element chunk j of a row into v[4] (element order). */
AVX2_INLINE void dec_f16(const uint8_t *row, int j, __m256 v[4])
{
	const __m128i *p = (const __m128i *)(row + 64 * (size_t)j);
	for (int i = 0; i < 4; i++)
		v[i] = _mm256_cvtph_ps(_mm_loadu_si128(p + i));
}

AVX2_INLINE void dec_bf16(const uint8_t *row, int j, __m256 v[4])
{
	const __m128i *p = (const __m128i *)(row + 64 * (size_t)j);
	for (int i = 0; i < 4; i++)
		v[i] = _mm256_castsi256_ps(
			_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(p + i)), 16));
}

/* (d * sc) * q - (dmin * m) for 32 unsigned byte codes */
AVX2_INLINE void sub_u8(__m256i q, float d1, float m1, __m256 v[4])
{
	__m256 d = _mm256_set1_ps(d1), m = _mm256_set1_ps(m1);
	__m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
	__m128i p[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
	for (int i = 0; i < 4; i++)
		v[i] = _mm256_sub_ps(_mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(p[i]))), m);
}

AVX2_INLINE void kscale(const uint8_t *sc, int s, int *d, int *m)
{
	if (s < 4) {
		*d = sc[s] & 63;
		*m = sc[s + 4] & 63;
	} else {
		*d = (sc[s + 4] & 15) | (sc[s - 4] >> 6) << 4;
		*m = (sc[s + 4] >> 4) | (sc[s] >> 6) << 4;
	}
}

AVX2_INLINE void dec_k(const uint8_t *b, const uint8_t *qh, const uint8_t *qs, int s, __m256 v[4])
{
	int c = s / 2, h = s % 2, sc, m;
	__m256i x = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
	if (h)
		x = _mm256_srli_epi16(x, 4);
	x = _mm256_and_si256(x, _mm256_set1_epi8(15));
	if (qh) {
		__m256i bit = _mm256_set1_epi8((char)(1 << s));
		__m256i hb = _mm256_loadu_si256((const __m256i *)qh);
		__m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(hb, bit), bit);
		x = _mm256_or_si256(x, _mm256_and_si256(set, _mm256_set1_epi8(16)));
	}
	kscale(b + 4, s, &sc, &m);
	sub_u8(x, f16at(b) * (float)sc, f16at(b + 2) * (float)m, v);
}

AVX2_INLINE void dec_q4_k(const uint8_t *row, int j, __m256 v[4])
{
	const uint8_t *b = row + 144 * (size_t)(j / 8);
	dec_k(b, NULL, b + 16, j % 8, v);
}

AVX2_INLINE void dec_q5_k(const uint8_t *row, int j, __m256 v[4])
{
	const uint8_t *b = row + 176 * (size_t)(j / 8);
	dec_k(b, b + 16, b + 48, j % 8, v);
}

AVX2_INLINE void dec_q6_k(const uint8_t *row, int j, __m256 v[4])
{
	const uint8_t *b = row + 210 * (size_t)(j / 8);
	int s = j % 8, c = s / 4, i = s % 4;
	__m256i l = _mm256_loadu_si256((const __m256i *)(b + 64 * c + 32 * (i & 1)));
	__m256i h = _mm256_loadu_si256((const __m256i *)(b + 128 + 32 * c));
	if (i >= 2)
		l = _mm256_srli_epi16(l, 4);
	l = _mm256_and_si256(l, _mm256_set1_epi8(15));
	h = _mm256_and_si256(_mm256_srli_epi16(h, 2 * i), _mm256_set1_epi8(3));
	__m256i q = _mm256_sub_epi8(_mm256_or_si256(l, _mm256_slli_epi16(h, 4)), _mm256_set1_epi8(32));
	const int8_t *sc = (const int8_t *)(b + 192);
	float d = f16at(b + 208);
	int e = 128 * c + 32 * i;
	__m256 d0 = _mm256_set1_ps(d * (float)sc[e / 16]), d1 = _mm256_set1_ps(d * (float)sc[e / 16 + 1]);
	__m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
	v[0] = _mm256_mul_ps(d0, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo)));
	v[1] = _mm256_mul_ps(d0, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8))));
	v[2] = _mm256_mul_ps(d1, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi)));
	v[3] = _mm256_mul_ps(d1, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8))));
}

#define FMA4(a, v, x0, x1, x2, x3)                    \
	do {                                          \
		a = _mm256_fmadd_ps(x0, v[0], a);      \
		a = _mm256_fmadd_ps(x1, v[1], a);      \
		a = _mm256_fmadd_ps(x2, v[2], a);      \
		a = _mm256_fmadd_ps(x3, v[3], a);      \
	} while (0)

/* MATVEC(name, dec): out[m] = x . row m, m in [m0, m1), 4 rows at a time.
 * While a tile of 4 rows is used, the next tile (the next 4 * row_bytes
 * bytes: rows are contiguous) is prefetched, a share per chunk: without it
 * the 4 row streams stall on DRAM at every load (perf showed the cycles on
 * the instruction after each weight load). Prefetches are hints: they never
 * fault and never change a result. */
#define MATVEC(NAME, DEC)                                                                   \
	static AVX2 void NAME(float *out, const float *x, const pm_weight *w, int m0, int m1)  \
	{                                                                                   \
		int nc = w->cols / 32, m = m0;                                              \
		size_t rb = w->row_bytes;                                                   \
		for (; m + 4 <= m1; m += 4) {                                               \
			const uint8_t *r0 = pm_weight_row(w, m), *r1 = r0 + rb, *r2 = r1 + rb, \
				      *r3 = r2 + rb;                                        \
			__m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, v[4];    \
			const char *nx = (const char *)r3 + rb;                             \
			size_t share = (4 * rb + (size_t)nc - 1) / (size_t)nc;              \
			for (int j = 0; j < nc; j++) {                                      \
				const float *xj = x + 32 * (size_t)j;                      \
				for (size_t o_ = 0; o_ < share; o_ += 64)                   \
					_mm_prefetch(nx + (size_t)j * share + o_, _MM_HINT_T0); \
				__m256 x0 = _mm256_loadu_ps(xj), x1 = _mm256_loadu_ps(xj + 8); \
				__m256 x2 = _mm256_loadu_ps(xj + 16), x3 = _mm256_loadu_ps(xj + 24); \
				DEC(r0, j, v);                                              \
				FMA4(a0, v, x0, x1, x2, x3);                                \
				DEC(r1, j, v);                                              \
				FMA4(a1, v, x0, x1, x2, x3);                                \
				DEC(r2, j, v);                                              \
				FMA4(a2, v, x0, x1, x2, x3);                                \
				DEC(r3, j, v);                                              \
				FMA4(a3, v, x0, x1, x2, x3);                                \
			}                                                                   \
			_mm_storeu_ps(out + m, hsum4(a0, a1, a2, a3));                      \
		}                                                                           \
		for (; m < m1; m++) {                                                       \
			const uint8_t *r0 = pm_weight_row(w, m);                            \
			__m256 a0 = _mm256_setzero_ps(), z = a0, v[4];                      \
			for (int j = 0; j < nc; j++) {                                      \
				const float *xj = x + 32 * (size_t)j;                      \
				DEC(r0, j, v);                                              \
				FMA4(a0, v, _mm256_loadu_ps(xj), _mm256_loadu_ps(xj + 8),    \
				     _mm256_loadu_ps(xj + 16), _mm256_loadu_ps(xj + 24));    \
			}                                                                   \
			out[m] = _mm_cvtss_f32(hsum4(a0, z, z, z));                         \
		}                                                                           \
	}

MATVEC(mv_f16, dec_f16)
MATVEC(mv_bf16, dec_bf16)
MATVEC(mv_q4_k, dec_q4_k)
MATVEC(mv_q5_k, dec_q5_k)
MATVEC(mv_q6_k, dec_q6_k)

pm_matvec_fn pm_matvec_avx2(uint32_t type)
{
	switch (type) {
	case PM_TYPE_F16:
		return mv_f16;
	case PM_TYPE_BF16:
		return mv_bf16;
	case PM_TYPE_Q4_K:
		return mv_q4_k;
	case PM_TYPE_Q5_K:
		return mv_q5_k;
	case PM_TYPE_Q6_K:
		return mv_q6_k;
	}
	return NULL;
}

#else

pm_matvec_fn pm_matvec_avx2(uint32_t type)
{
	(void)type;
	return NULL;
}

#endif
