/*
 * test_quant.c: the weight formats' dequantizers and the typed matmul.
 *
 * - the AVX2 dequantizers are bitwise the portable ones (same float32
 *   operations), on random blocks of every type;
 * - hand-worked blocks decode to the values their layout defines;
 * - pm_matmul_w is batch-, tile- and split-invariant for every type, and
 *   bitwise the F32 matmul of the dequantized rows.
 * (The Go tests check the C dequantizers against the Go codecs and the
 * engine's logits against the Go reference, per type.)
 */
#include "kernels.h"
#include "weights.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fails;
#define CHECK(cond, ...)                                                              \
	do {                                                                          \
		if (!(cond)) {                                                        \
			fails++;                                                      \
			fprintf(stderr, "%s:%d: FAIL %s: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__);                                 \
			fprintf(stderr, "\n");                                        \
		}                                                                     \
	} while (0)

static uint64_t rs = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void)
{
	rs ^= rs << 13, rs ^= rs >> 7, rs ^= rs << 17;
	return (uint32_t)(rs >> 16);
}

/* A finite F16 of magnitude about 2^-3 .. 2^1, random sign. */
static void put_f16(uint8_t *p)
{
	uint16_t h = (uint16_t)(0x3000 + rnd() % 0x1000) | (uint16_t)(rnd() & 1 ? 0x8000 : 0);
	memcpy(p, &h, 2);
}

static const uint32_t all_types[] = {PM_TYPE_F32,  PM_TYPE_F16,  PM_TYPE_BF16, PM_TYPE_Q4_0,
				     PM_TYPE_Q4_1, PM_TYPE_Q5_0, PM_TYPE_Q5_1, PM_TYPE_Q8_0,
				     PM_TYPE_Q4_K, PM_TYPE_Q5_K, PM_TYPE_Q6_K};
#define N_TYPES (sizeof all_types / sizeof all_types[0])

/* random_rows fills rows of cols elements of type with random codes and
 * finite scales (and finite floats for the float types). */
static void random_rows(uint8_t *b, uint32_t type, int rows, int cols)
{
	size_t rb = pm_type_row_bytes(type, cols), n = rb * (size_t)rows;
	for (size_t i = 0; i < n; i++)
		b[i] = (uint8_t)rnd();
	int blk = pm_type_block(type);
	size_t bb = rb / (size_t)(cols / blk);
	for (size_t o = 0; o < n; o += bb) {
		switch (type) {
		case PM_TYPE_F32: {
			float v = (float)((int)(rnd() % 2001) - 1000) / 700.0f;
			memcpy(b + o, &v, 4);
			break;
		}
		case PM_TYPE_F16:
			put_f16(b + o);
			break;
		case PM_TYPE_BF16:
			b[o + 1] = (uint8_t)(0x3e + (rnd() & 1) * 0x80);
			break;
		case PM_TYPE_Q4_1:
		case PM_TYPE_Q5_1:
		case PM_TYPE_Q4_K:
		case PM_TYPE_Q5_K:
			put_f16(b + o + 2);
			put_f16(b + o);
			break;
		case PM_TYPE_Q6_K:
			put_f16(b + o + 208);
			break;
		default:
			put_f16(b + o);
		}
	}
}

static void test_avx2_vs_portable(void)
{
	enum { COLS = 512, ROWS = 3 };
	static uint8_t b[ROWS * COLS * 4];
	static float p[COLS], a[COLS];
	for (size_t t = 0; t < N_TYPES; t++) {
		uint32_t ty = all_types[t];
		pm_dequant_fn port = pm_dequant(ty, 0), simd = pm_dequant(ty, 1);
		CHECK(port != NULL && simd != NULL, "type %u has no dequantizer", ty);
		if (!port || !simd)
			continue;
		for (int rep = 0; rep < 20; rep++) {
			random_rows(b, ty, ROWS, COLS);
			size_t rb = pm_type_row_bytes(ty, COLS);
			for (int r = 0; r < ROWS; r++) {
				port(p, b + r * rb, COLS);
				simd(a, b + r * rb, COLS);
				int bad = -1;
				for (int i = 0; i < COLS && bad < 0; i++)
					if (memcmp(&p[i], &a[i], 4) != 0 || !isfinite(p[i]))
						bad = i;
				CHECK(bad < 0, "type %u: element %d: portable %g, avx2 %g", ty, bad,
				      bad >= 0 ? p[bad] : 0, bad >= 0 ? a[bad] : 0);
			}
		}
	}
}

static void test_golden(void)
{
	/* Q4_0: d = 2 (F16 0x4000), qs[j] = j | (15-j) << 4:
	 * y[j] = 2 (j - 8), y[j+16] = 2 (7 - j), j < 16 */
	uint8_t q4[18] = {0x00, 0x40};
	for (int j = 0; j < 16; j++)
		q4[2 + j] = (uint8_t)(j | (15 - j) << 4);
	/* Q8_0: d = -0.5 (0xb800), q = j - 16 */
	uint8_t q8[34] = {0x00, 0xb8};
	for (int j = 0; j < 32; j++)
		q8[2 + j] = (uint8_t)(int8_t)(j - 16);
	/* Q6_K: d = 0.25 (0x3400), scale s - 8, ql 0x21, qh 0xe4: q = 1, 17, 34, 50
	 * for the four quarters of each half */
	uint8_t q6[210];
	memset(q6, 0x21, 128);
	memset(q6 + 128, 0xe4, 64);
	for (int s = 0; s < 16; s++)
		q6[192 + s] = (uint8_t)(int8_t)(s - 8);
	q6[208] = 0x00, q6[209] = 0x34;
	for (int simd = 0; simd < 2; simd++) {
		float y[256];
		pm_dequant(PM_TYPE_Q4_0, simd)(y, q4, 32);
		for (int j = 0; j < 16; j++)
			CHECK(y[j] == 2.0f * (j - 8) && y[j + 16] == 2.0f * (7 - j), "q4_0 %d: %g %g", j,
			      y[j], y[j + 16]);
		pm_dequant(PM_TYPE_Q8_0, simd)(y, q8, 32);
		for (int j = 0; j < 32; j++)
			CHECK(y[j] == -0.5f * (j - 16), "q8_0 %d: %g", j, y[j]);
		pm_dequant(PM_TYPE_Q6_K, simd)(y, q6, 256);
		static const int qv[4] = {1, 17, 34, 50};
		for (int j = 0; j < 256; j++)
			CHECK(y[j] == 0.25f * (float)(j / 16 - 8) * (float)(qv[(j % 128) / 32] - 32),
			      "q6_K %d: %g", j, y[j]);
	}
	CHECK(pm_type_row_bytes(PM_TYPE_Q4_K, 512) == 288 && pm_type_row_bytes(PM_TYPE_Q4_K, 32) == 0 &&
		      pm_type_row_bytes(24, 64) == 0 && pm_type_row_bytes(PM_TYPE_Q8_0, 64) == 68 &&
		      pm_dequant(24, 0) == NULL && pm_dequant(1000, 1) == NULL,
	      "row bytes and dequantizer table");
}

/* pm_matmul_w of every type: row r of a batch of n is bitwise row r alone,
 * whatever the split of the weight rows, and bitwise the F32 matmul of the
 * dequantized weights. */
static void test_matmul_w(const pm_kernels *k)
{
	enum { M = 13, K = 512, N = 9 };
	static uint8_t wb[M * K * 4];
	static float x[N * K], wf[M * K], ref[N * M], out[N * M], one[M], scratch[4 * K];
	for (int i = 0; i < N * K; i++)
		x[i] = (float)((int)(rnd() % 2001) - 1000) / 1000.0f;
	int simd = strcmp(k->name, "portable") != 0;
	for (size_t t = 0; t < N_TYPES; t++) {
		uint32_t ty = all_types[t];
		random_rows(wb, ty, M, K);
		pm_weight w = {.data = wb, .type = ty, .rows = M, .cols = K,
			       .row_bytes = pm_type_row_bytes(ty, K)};
		pm_dequant_fn dq = pm_dequant(ty, simd);
		for (int r = 0; r < M; r++)
			dq(wf + (size_t)r * K, pm_weight_row(&w, r), K);
		k->matmul(ref, M, x, wf, N, K, 0, M);
		pm_matmul_w(k, dq, out, M, x, &w, N, 0, M, scratch);
		CHECK(memcmp(ref, out, sizeof ref) == 0, "%s type %u: typed matmul != F32 matmul of the dequantized rows",
		      k->name, ty);
		/* split at 4 and 8 (thread ranges are multiples of 4) */
		memset(out, 0, sizeof out);
		pm_matmul_w(k, dq, out, M, x, &w, N, 0, 4, scratch);
		pm_matmul_w(k, dq, out, M, x, &w, N, 4, 8, scratch);
		pm_matmul_w(k, dq, out, M, x, &w, N, 8, M, scratch);
		CHECK(memcmp(ref, out, sizeof ref) == 0, "%s type %u: split changed a result", k->name, ty);
		for (int r = 0; r < N; r++) {
			pm_matmul_w(k, dq, one, M, x + (size_t)r * K, &w, 1, 0, M, scratch);
			CHECK(memcmp(one, ref + (size_t)r * M, sizeof one) == 0,
			      "%s type %u: row %d alone != in a batch of %d", k->name, ty, r, N);
		}
	}
}

int main(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	printf("dequantizers: golden blocks\n");
	test_golden();
	if (pm_kernels_avx2()) {
		printf("dequantizers: avx2 == portable\n");
		test_avx2_vs_portable();
	}
	printf("typed matmul invariance (portable)\n");
	test_matmul_w(&pm_kernels_portable);
	if (pm_kernels_avx2()) {
		printf("typed matmul invariance (avx2)\n");
		test_matmul_w(pm_kernels_avx2());
	}
	if (fails) {
		fprintf(stderr, "test_quant: %d failures\n", fails);
		return 1;
	}
	printf("ok\n");
	return 0;
}
