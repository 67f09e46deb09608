/*
 * actquant.c: the activation quantizers (the rule is in actquant.h) and
 * the dispatch to the integer kernels of qmm_32.c and qmm_k.c.
 */
#include "actquant.h"

#include <math.h>

/* quant_block quantizes n floats of x into q and returns d. */
static float quant_block_c(int8_t *q, const float *x, int n)
{
	float amax = 0;
	for (int i = 0; i < n; i++) {
		float a = fabsf(x[i]);
		if (a > amax)
			amax = a;
	}
	float d = amax / 127.0f, id = amax > 0 ? 127.0f / amax : 0.0f;
	for (int i = 0; i < n; i++) {
		float v = rintf(x[i] * id);
		if (v != v)
			v = 0;
		else if (v > 127)
			v = 127;
		else if (v < -127)
			v = -127;
		q[i] = (int8_t)v;
	}
	return d;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* quant_block_avx2 is quant_block_c for n a multiple of 32, bitwise: the
 * same float32 product, rounding (ties to even), clamp and NaN rule. With
 * sums16 != NULL it also stores the n / 16 sums of q over each 16 elements
 * (integer sums: exact in any order, so the same as the scalar loops). */
static __attribute__((target("avx2"))) float quant_block_avx2(int8_t *q, const float *x, int n,
							     int *sums16)
{
	const __m256 sign = _mm256_set1_ps(-0.0f);
	__m256 m = _mm256_setzero_ps();
	for (int i = 0; i < n; i += 8) /* max(a, m) keeps m when a is NaN */
		m = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + i)), m);
	__m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
	h = _mm_max_ps(h, _mm_movehl_ps(h, h));
	h = _mm_max_ss(h, _mm_movehdup_ps(h));
	float amax = _mm_cvtss_f32(h);
	float d = amax / 127.0f, id = amax > 0 ? 127.0f / amax : 0.0f;
	const __m256 vid = _mm256_set1_ps(id), hi = _mm256_set1_ps(127), lo = _mm256_set1_ps(-127);
	const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
	for (int i = 0; i < n; i += 32) {
		__m256i v[4];
		for (int j = 0; j < 4; j++) {
			__m256 p = _mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i + 8 * j), vid),
						   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
			p = _mm256_and_ps(p, _mm256_cmp_ps(p, p, _CMP_ORD_Q)); /* NaN -> 0 */
			v[j] = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(p, lo), hi));
		}
		__m256i b = _mm256_packs_epi16(_mm256_packs_epi32(v[0], v[1]), _mm256_packs_epi32(v[2], v[3]));
		_mm256_storeu_si256((__m256i *)(q + i), _mm256_permutevar8x32_epi32(b, perm));
		if (sums16) {
			/* lanes of a: elements 0-15 pairwise; of c: 16-31. Two
			 * hadds leave sum(a) halves in lane 0 of each 128-bit
			 * half, sum(c) halves in lane 1. */
			__m256i a = _mm256_add_epi32(v[0], v[1]), c = _mm256_add_epi32(v[2], v[3]);
			__m256i t = _mm256_hadd_epi32(a, c);
			t = _mm256_hadd_epi32(t, t);
			__m128i s = _mm_add_epi32(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1));
			sums16[i / 16] = _mm_cvtsi128_si32(s);
			sums16[i / 16 + 1] = _mm_extract_epi32(s, 1);
		}
	}
	return d;
}

static int use_avx2(void)
{
	/* the CPU model was initialized when the engine picked its kernels */
	return __builtin_cpu_supports("avx2");
}
#else
/* not reached (use_avx2 is 0), but complete: the sums per 16 as the AVX2
 * version writes them, so no caller reads an unwritten one */
static float quant_block_avx2(int8_t *q, const float *x, int n, int *sums16)
{
	float d = quant_block_c(q, x, n);
	for (int j = 0; sums16 && j < n / 16; j++) {
		sums16[j] = 0;
		for (int i = 0; i < 16; i++)
			sums16[j] += q[16 * j + i];
	}
	return d;
}

static int use_avx2(void)
{
	return 0;
}
#endif

float pm_quant_block(int8_t *q, const float *x, int n, int avx2)
{
	return avx2 && n % 32 == 0 && use_avx2() ? quant_block_avx2(q, x, n, NULL)
						   : quant_block_c(q, x, n);
}

static void quant_act32(pm_act32 *dst, const float *x, int k, int avx2)
{
	for (int b = 0; b < k / 32; b++) {
		pm_act32 *y = dst + b;
		int sum = 0;
		if (avx2) {
			int s[2];
			y->d = quant_block_avx2(y->q, x + 32 * (size_t)b, 32, s);
			sum = s[0] + s[1];
		} else {
			y->d = quant_block_c(y->q, x + 32 * (size_t)b, 32);
			for (int i = 0; i < 32; i++)
				sum += y->q[i];
		}
		y->s = y->d * (float)sum;
	}
}

static void quant_act256(pm_act256 *dst, const float *x, int k, int avx2)
{
	for (int b = 0; b < k / 256; b++) {
		pm_act256 *y = dst + b;
		if (avx2) {
			int s[16];
			y->d = quant_block_avx2(y->q, x + 256 * (size_t)b, 256, s);
			for (int j = 0; j < 16; j++)
				y->bsums[j] = (int16_t)s[j];
			continue;
		}
		y->d = quant_block_c(y->q, x + 256 * (size_t)b, 256);
		for (int j = 0; j < 16; j++) {
			int sum = 0;
			for (int i = 0; i < 16; i++)
				sum += y->q[16 * j + i];
			y->bsums[j] = (int16_t)sum;
		}
	}
}

void pm_quant_act32(pm_act32 *dst, const float *x, int k)
{
	quant_act32(dst, x, k, use_avx2());
}

void pm_quant_act256(pm_act256 *dst, const float *x, int k)
{
	quant_act256(dst, x, k, use_avx2());
}

int pm_quant_act(int block, void *dst, const float *x, int k, int avx2)
{
	if (pm_act_row_bytes(block, k) == 0)
		return -1;
	avx2 = avx2 && use_avx2();
	if (block == 32)
		quant_act32(dst, x, k, avx2);
	else
		quant_act256(dst, x, k, avx2);
	return 0;
}

size_t pm_act_row_bytes(int block, int k)
{
	if (k < 1 || k % (block > 0 ? block : 1) != 0)
		return 0;
	switch (block) {
	case 32:
		return (size_t)(k / 32) * sizeof(pm_act32);
	case 256:
		return (size_t)(k / 256) * sizeof(pm_act256);
	}
	return 0;
}

void pm_matmul_q(pm_qmm q, float *out, size_t ldo, const float *x, size_t ldx, const pm_weight *w,
		 int n, int m0, int m1, void *scratch)
{
	int k = w->cols;
	size_t rb = pm_act_row_bytes(q.block, k);
	for (int r = 0; r < n; r++)
		pm_quant_act(q.block, (char *)scratch + (size_t)r * rb, x + (size_t)r * ldx, k, 1);
	q.fn(out, ldo, scratch, rb, w, n, m0, m1);
}
