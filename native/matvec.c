/*
 * matvec.c: AVX2 matrix-vector products (decode at batch 1) that decode
 * each weight block in registers and feed it straight to the FMAs, instead
 * of dequantizing a tile to memory and reading it back (pm_matmul_w's
 * path for batches). The K-quants are not here: they compute with int8
 * activations (qmm_k.c).
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

pm_matvec_fn pm_matvec_avx2(uint32_t type)
{
	switch (type) {
	case PM_TYPE_F16:
		return mv_f16;
	case PM_TYPE_BF16:
		return mv_bf16;
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
