/*
 * test_quant.c: the weight formats' dequantizers and the typed matmul.
 *
 * - the AVX2 dequantizers are bitwise the portable ones (same float32
 *   operations), on random blocks of every type;
 * - hand-worked blocks decode to the values their layout defines;
 * - pm_matmul_w is batch-, tile- and split-invariant for every type, and
 *   bitwise the F32 matmul of the dequantized rows;
 * - the activation quantizers follow actquant.h's rule on hand-worked
 *   blocks, and every type with an integer kernel (pm_qmm_for) computes
 *   the product of its dequantized rows and the dequantized activations,
 *   batch- and split-invariant, in both kernel sets.
 * (The Go tests check the C dequantizers against the Go codecs and the
 * engine's logits against the Go reference, per type.)
 */
#include "ctest.h"
#include "actquant.h"
#include "kernels.h"
#include "matmul.h"
#include "qmm_q8_0_xrows_avx2.h"
#include "weights.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/*
 * test_float_tiles checks mm_float.c's tile products (F32, F16, BF16; the
 * 16- and the 32-register copy) against the AVX2 F32 matmul of the
 * widened rows, bitwise: every batch size 1..11 (every pass shape and
 * remainder), splits of the weight rows at 4 and 8 and at 3 and 10 (ranges
 * ending 1, 2 or 3 rows past a whole tile; a range writes only its rows),
 * a row count that leaves a partial tile, k with and without a tail chunk
 * and with and without chunks past the last 4-chunk step, and a batch
 * larger than one block of x rows.
 */
static void test_float_tiles(const pm_kernels *k)
{
	enum { M = 13, KMAX = 2048, NMAX = 70 };
	static const uint32_t types[] = {PM_TYPE_F32, PM_TYPE_F16, PM_TYPE_BF16};
	/* k: whole 4-chunk steps only (512, KMAX), steps then a tail (100,
	 * 37), steps then single chunks (56) and a tail (118), single
	 * chunks and a tail without a step (20) */
	static const int ks[] = {512, 100, 37, 56, 118, 20, KMAX};
	static uint8_t wb[M * KMAX * 4];
	static float x[NMAX * KMAX], wf[M * KMAX], ref[NMAX * M], out[NMAX * M];
	for (int i = 0; i < NMAX * KMAX; i++)
		x[i] = (float)((int)(rnd() % 2001) - 1000) / 1000.0f;
	int copies = 0;
	for (int regs = 16; regs <= 32; regs += 16) {
		for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
			uint32_t ty = types[t];
			pm_tile_fn tf = pm_matmul_float_avx2(ty, regs);
			if (!tf)
				continue;
			copies++;
			for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
				int K = ks[ki];
				random_rows(wb, ty, M, K);
				pm_weight w = {.data = wb, .type = ty, .rows = M, .cols = K,
					       .row_bytes = pm_type_row_bytes(ty, K)};
				pm_dequant_fn dq = pm_dequant(ty, 0);
				for (int r = 0; r < M; r++)
					dq(wf + (size_t)r * K, pm_weight_row(&w, r), K);
				int ns[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, K == KMAX ? NMAX : 11};
				for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
					int n = ns[ni];
					size_t bytes = (size_t)n * M * sizeof(float);
					k->matmul(ref, M, x, wf, n, K, 0, M);
					memset(out, 0, bytes);
					tf(out, M, x, &w, n, 0, M);
					CHECK(memcmp(ref, out, bytes) == 0,
					      "type %u regs %d k %d n %d: tile product != F32 matmul", ty, regs, K, n);
					memset(out, 0, bytes);
					tf(out, M, x, &w, n, 0, 4);
					int outside = 0; /* a range writes only its own rows */
					for (int r = 0; r < n; r++)
						for (int m = 4; m < M; m++)
							outside += out[(size_t)r * M + m] != 0.0f;
					CHECK(outside == 0, "type %u regs %d k %d n %d: rows [0, 4) wrote %d outputs past row 4",
					      ty, regs, K, n, outside);
					tf(out, M, x, &w, n, 4, 8);
					tf(out, M, x, &w, n, 8, M);
					CHECK(memcmp(ref, out, bytes) == 0,
					      "type %u regs %d k %d n %d: split changed a result", ty, regs, K, n);
					/* ranges ending in 1, 2 and 3 rows past a whole tile */
					memset(out, 0, bytes);
					tf(out, M, x, &w, n, 0, 3);
					tf(out, M, x, &w, n, 3, 10);
					tf(out, M, x, &w, n, 10, M);
					CHECK(memcmp(ref, out, bytes) == 0,
					      "type %u regs %d k %d n %d: split 3/10 changed a result", ty, regs, K, n);
				}
			}
		}
	}
	printf("float tile products: %d type x register-file copies\n", copies);
}

/* The rule of actquant.h on hand-worked blocks: amax 127 makes d exactly
 * 1, so the codes are x rounded half to even (the Go reference's
 * TestQuantActGolden works the same block). */
static void test_act_golden(void)
{
	float x[256] = {127, 0.5f, 1.5f, 2.5f, -2.5f, -0.49f, 3.51f, -127};
	const int8_t want[8] = {127, 0, 2, 2, -2, 0, 4, -127};
	pm_act32 a[8];
	pm_quant_act32(a, x, 256);
	CHECK(a[0].d == 1.0f && a[0].s == 1.0f * (127 + 2 + 2 - 2 + 4 - 127), "d %g s %g", a[0].d,
	      a[0].s);
	for (int i = 0; i < 32; i++)
		CHECK(a[0].q[i] == (i < 8 ? want[i] : 0), "q[%d] = %d", i, a[0].q[i]);
	CHECK(a[1].d == 0 && a[1].s == 0 && a[1].q[0] == 0, "zero block: d %g", a[1].d);
	static pm_act256 b;
	pm_quant_act256(&b, x, 256);
	CHECK(b.d == 1.0f && b.bsums[0] == 127 + 2 + 2 - 2 + 4 - 127 && b.bsums[1] == 0, "d %g bsums %d %d",
	      b.d, b.bsums[0], b.bsums[1]);
	for (int i = 0; i < 256; i++)
		CHECK(b.q[i] == (i < 8 ? want[i] : 0), "q[%d] = %d", i, b.q[i]);
	CHECK(pm_act_row_bytes(32, 64) == 2 * sizeof(pm_act32) &&
		      pm_act_row_bytes(256, 512) == 2 * sizeof(pm_act256) &&
		      pm_act_row_bytes(256, 32) == 0 && pm_act_row_bytes(16, 32) == 0,
	      "pm_act_row_bytes");
}

/* test_act_avx2: the AVX2 activation quantizer gives bitwise the portable
 * one's d and codes, on random blocks and on ties, NaN, infinities and
 * subnormals. */
static void test_act_avx2(void)
{
	static float x[256];
	for (int it = 0; it < 200; it++) {
		int n = it % 2 ? 256 : 32;
		float scale = it % 7 == 0 ? 1e-39f : it % 5 == 0 ? 127.0f : 1.0f + (float)(rnd() % 1000);
		for (int i = 0; i < n; i++)
			x[i] = (float)((int)(rnd() % 20001) - 10000) / 10000.0f * scale;
		if (it % 5 == 0) /* amax 127: codes are x itself, halves are ties */
			for (int i = 0; i < n; i++)
				x[i] = i == 0 ? 127.0f : (float)((int)(rnd() % 255) - 127) + (rnd() % 2 ? 0.5f : 0.0f);
		if (it % 11 == 3)
			x[rnd() % n] = NAN;
		if (it % 13 == 4)
			x[rnd() % n] = it % 2 ? INFINITY : -INFINITY;
		int8_t qc[256], qa[256];
		float dc = pm_quant_block(qc, x, n, 0), da = pm_quant_block(qa, x, n, 1);
		CHECK(memcmp(&dc, &da, sizeof dc) == 0 && memcmp(qc, qa, (size_t)n) == 0,
		      "block %d (n %d): avx2 d %g, portable %g, or the codes differ", it, n, da, dc);
	}
}

/* test_act_rows_avx2: whole rows quantized into pm_act32 and pm_act256
 * blocks (d, the codes, s and bsums) are bitwise the same with the AVX2
 * code as with the portable one, on random rows, rows of exact ties
 * (halves at amax 127), rows with zero blocks, and all-zero rows. */
static void test_act_rows_avx2(void)
{
	enum { K = 1024 };
	static float x[K];
	static pm_act32 a32[2][K / 32];
	static pm_act256 a256[2][K / 256];
	for (int it = 0; it < 120; it++) {
		float scale = it % 7 == 0 ? 1e-39f : 1.0f + (float)(rnd() % 1000);
		for (int i = 0; i < K; i++)
			x[i] = (float)((int)(rnd() % 20001) - 10000) / 10000.0f * scale;
		if (it % 3 == 1) /* amax 127 per 32: codes are x, halves are ties */
			for (int i = 0; i < K; i++)
				x[i] = i % 32 == 0 ? 127.0f
						   : (float)((int)(rnd() % 255) - 127) + (rnd() % 2 ? 0.5f : 0.0f);
		if (it % 4 == 2) /* a zero block of each size, and scattered zeros */
			for (int i = 0; i < K; i++)
				if (i < 256 || rnd() % 3 == 0)
					x[i] = it % 8 == 2 ? -0.0f : 0.0f;
		if (it % 10 == 5)
			memset(x, 0, sizeof x);
		memset(a32, 0x5a, sizeof a32);
		memset(a256, 0x5a, sizeof a256);
		for (int v = 0; v < 2; v++) {
			CHECK(pm_quant_act(32, a32[v], x, K, v) == 0, "pm_quant_act 32 refused k %d", K);
			CHECK(pm_quant_act(256, a256[v], x, K, v) == 0, "pm_quant_act 256 refused k %d", K);
		}
		CHECK(memcmp(a32[0], a32[1], sizeof a32[0]) == 0, "row %d: pm_act32 avx2 != portable", it);
		CHECK(memcmp(a256[0], a256[1], sizeof a256[0]) == 0, "row %d: pm_act256 avx2 != portable", it);
	}
	/* the bsums are real sums: a row of all 127 gives 16 * 127 each */
	for (int i = 0; i < 256; i++)
		x[i] = 1.0f;
	pm_quant_act(256, a256[1], x, 256, 1);
	CHECK(a256[1][0].bsums[0] == 16 * 127 && a256[1][0].bsums[15] == 16 * 127,
	      "bsums of a constant row: %d, %d, want %d", a256[1][0].bsums[0], a256[1][0].bsums[15], 16 * 127);
	CHECK(pm_quant_act(256, a256[0], x, 288, 1) == -1 && pm_quant_act(64, a32[0], x, 256, 1) == -1,
	      "pm_quant_act accepted a k or block it cannot quantize");
}

/* test_qmm checks every type's integer kernel of one set: against the
 * double product of the dequantized weights and activations, row r of a
 * batch bitwise row r alone, and any split of the weight rows bitwise the
 * whole. Returns how many types have a kernel. */
static int test_qmm(int avx2)
{
	enum { M = 13, K = 512, N = 5 };
	static uint8_t wb[M * K * 4];
	static float x[N * K], out[N * M], one[M], part[N * M], wf[K];
	static char scratch[N * K * 2];
	int kernels = 0;
	for (size_t t = 0; t < N_TYPES; t++) {
		uint32_t ty = all_types[t];
		pm_qmm q = pm_qmm_for(ty, avx2);
		if (!q.fn)
			continue;
		kernels++;
		CHECK(q.block == 32 || q.block == 256, "type %u: block %d", ty, q.block);
		random_rows(wb, ty, M, K);
		for (int i = 0; i < N * K; i++)
			x[i] = (float)((int)(rnd() % 2001) - 1000) / 300.0f;
		pm_weight w = {wb, ty, M, K, pm_type_row_bytes(ty, K), PM_LAYOUT_ROWS, 0};
		pm_matmul_q(q, out, M, x, K, &w, N, 0, M, scratch);
		/* the activations as the kernel saw them */
		static float xd[N * K];
		size_t rb = pm_act_row_bytes(q.block, K);
		for (int r = 0; r < N; r++)
			for (int i = 0; i < K; i++) {
				const char *row = scratch + (size_t)r * rb;
				if (q.block == 32) {
					const pm_act32 *a = (const pm_act32 *)row + i / 32;
					xd[r * K + i] = a->d * (float)a->q[i % 32];
				} else {
					const pm_act256 *a = (const pm_act256 *)row + i / 256;
					xd[r * K + i] = a->d * (float)a->q[i % 256];
				}
			}
		pm_dequant_fn dq = pm_dequant(ty, 0);
		for (int m = 0; m < M; m++) {
			dq(wf, pm_weight_row(&w, m), K);
			for (int r = 0; r < N; r++) {
				double s = 0, mag = 0;
				for (int i = 0; i < K; i++) {
					s += (double)wf[i] * xd[r * K + i];
					mag += fabs((double)wf[i] * xd[r * K + i]);
				}
				double got = out[r * M + m];
				CHECK(fabs(got - s) <= 1e-5 * mag + 1e-6, "%s type %u row %d out %d: %g, want %g",
				      avx2 ? "avx2" : "portable", ty, r, m, got, s);
			}
		}
		pm_matmul_q(q, part, M, x, K, &w, N, 0, 4, scratch);
		pm_matmul_q(q, part, M, x, K, &w, N, 4, 9, scratch);
		pm_matmul_q(q, part, M, x, K, &w, N, 9, M, scratch);
		CHECK(memcmp(part, out, sizeof out) == 0, "%s type %u: a split changed a result",
		      avx2 ? "avx2" : "portable", ty);
		for (int r = 0; r < N; r++) {
			pm_matmul_q(q, one, M, x + (size_t)r * K, K, &w, 1, 0, M, scratch);
			CHECK(memcmp(one, out + (size_t)r * M, sizeof one) == 0,
			      "%s type %u: row %d alone != in a batch of %d", avx2 ? "avx2" : "portable", ty, r,
			      N);
		}
	}
	return kernels;
}

/* test_qmm_vnni: where the CPU has AVX-512 VNNI (or AVX-VNNI), qmm_32's VNNI build (or AVX-VNNI build) gives
 * bitwise the AVX2 build's results at every batch size its batch path
 * treats differently (1; the tails of 8-row groups; 8 and 16; past the
 * 64-row chunk), over k of 17 blocks (a k-chunk of 16 and a short one),
 * every row of a batch bitwise the row alone, and any split of the weight
 * rows (whole 16-row tiles and splits inside one) bitwise the whole. Returns
 * the number of types compared. */
static int test_qmm_vnni(void)
{
	enum { M = 37, K = 544, N = 70 };
	static const int ns[] = {1, 2, 3, 4, 5, 7, 8, 9, 12, 15, 16, 17, 24, 33, 64, 65, N};
	static uint8_t wb[M * K * 2];
	static float x[N * K], a[N * M], v[N * M], one[M], part[N * M];
	static char scratch[N * K * 2];
	int compared = 0;
	for (int vn = 1; vn <= 2; vn++) /* the AVX-512 VNNI build, the AVX-VNNI build */
	for (size_t t = 0; t < N_TYPES; t++) {
		uint32_t ty = all_types[t];
		pm_qmm q0 = pm_qmm_32_x86(ty, 0), q1 = pm_qmm_32_x86(ty, vn);
		if (!q0.fn || !q1.fn)
			continue;
		compared++;
		random_rows(wb, ty, M, K);
		for (int i = 0; i < N * K; i++)
			x[i] = (float)((int)(rnd() % 2001) - 1000) / 300.0f;
		pm_weight w = {wb, ty, M, K, pm_type_row_bytes(ty, K), PM_LAYOUT_ROWS, 0};
		for (size_t c = 0; c < sizeof ns / sizeof ns[0]; c++) {
			int n = ns[c];
			pm_matmul_q(q0, a, M, x, K, &w, n, 0, M, scratch);
			pm_matmul_q(q1, v, M, x, K, &w, n, 0, M, scratch);
			CHECK(memcmp(a, v, sizeof(float) * (size_t)(n * M)) == 0,
			      "type %u, %d rows: the VNNI kernel (%d) != the AVX2 kernel", ty, n, vn);
			static const int cut[] = {0, 4, 6, 22, M};
			for (int ci = 0; ci + 1 < (int)(sizeof cut / sizeof cut[0]); ci++)
				pm_matmul_q(q1, part, M, x, K, &w, n, cut[ci], cut[ci + 1], scratch);
			CHECK(memcmp(part, v, sizeof(float) * (size_t)(n * M)) == 0,
			      "type %u, %d rows: a split changed a VNNI (%d) result", ty, n, vn);
		}
		for (int r = 0; r < N; r++) {
			pm_matmul_q(q1, one, M, x + (size_t)r * K, K, &w, 1, 0, M, scratch);
			CHECK(memcmp(one, v + (size_t)r * M, sizeof one) == 0,
			      "type %u: VNNI (%d) row %d alone != in a batch of %d", ty, vn, r, N);
		}
	}
	return compared;
}

/* test_qmm_decode: the 32-block kernels' decode path (n == 1; on AVX-512
 * its own 512-bit steps of 4 blocks x 4 or 8 rows) gives bitwise each
 * row's batch result and the AVX2 build's, for row counts that leave 1..7
 * rows over, block counts that leave 1..3 blocks over a step, any split,
 * and all-zero or signed-zero activations. The weights are allocated to
 * their exact size, so ASan sees a read past the matrix. Returns the
 * number of (type, k) cases compared. */
static int test_qmm_decode(void)
{
	static const int ks[] = {32, 64, 96, 128, 544, 608, 1376};
	enum { M = 23, N = 3, KMAX = 1376 };
	static float x[N * KMAX], b1[M], b0[M], bn[N * M], sp[M];
	static char scratch[N * KMAX * 2];
	int cases = 0;
	for (size_t t = 0; t < N_TYPES; t++) {
		uint32_t ty = all_types[t];
		pm_qmm q0 = pm_qmm_32_x86(ty, 0), q1 = pm_qmm_32_x86(ty, 1);
		if (!q0.fn)
			continue;
		for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
			int K = ks[ki];
			size_t rb = pm_type_row_bytes(ty, K);
			uint8_t *wb = malloc(rb * M);
			CHECK(wb != NULL, "malloc");
			if (!wb)
				return cases;
			random_rows(wb, ty, M, K);
			pm_weight w = {wb, ty, M, K, rb, PM_LAYOUT_ROWS, 0};
			for (int it = 0; it < 3; it++) {
				for (int i = 0; i < N * K; i++)
					x[i] = (float)((int)(rnd() % 2001) - 1000) / 300.0f;
				if (it == 1)
					for (int i = 0; i < K; i++)
						x[i] = i % 3 ? -0.0f : 0.0f;
				if (it == 2)
					for (int i = 32; i < K && i < 96; i++)
						x[i] = 0.0f;
				pm_qmm qs[2] = {q0, q1};
				for (int v = 0; v < 2; v++) {
					pm_qmm q = qs[v];
					if (!q.fn)
						continue;
					pm_matmul_q(q, bn, M, x, K, &w, N, 0, M, scratch);
					pm_matmul_q(q, v ? b1 : b0, M, x, K, &w, 1, 0, M, scratch);
					CHECK(memcmp(v ? b1 : b0, bn, sizeof b1) == 0,
					      "%s type %u k %d: decode != row 0 of a batch of %d", v ? "vnni" : "avx2", ty,
					      K, N);
					/* ranges ending inside the AVX2 decode's 8-row
					 * tiles (4, 3, 10 rows: 2 over) and on them */
					static const int cuts[][4] = {
						{0, 4, 12, M}, {0, 8, 20, M}, {0, 16, 20, M}, {0, 3, 13, M}};
					for (int c = 0; c < 4; c++) {
						memset(sp, 0xff, sizeof sp);
						for (int p = 0; p < 3; p++)
							pm_matmul_q(q, sp, M, x, K, &w, 1, cuts[c][p], cuts[c][p + 1],
								    scratch);
						CHECK(memcmp(sp, v ? b1 : b0, sizeof sp) == 0,
						      "%s type %u k %d: a split changed a decode result",
						      v ? "vnni" : "avx2", ty, K);
					}
				}
				if (q1.fn)
					CHECK(memcmp(b0, b1, sizeof b0) == 0, "type %u k %d: VNNI decode != AVX2 decode",
					      ty, K);
			}
			free(wb);
			cases++;
		}
	}
	return cases;
}

/* test_qmm_avx2_tiles: qmm_32_avx2.c's interleaved batch tiles (Q4_0,
 * Q4_1, Q5_0, Q5_1, Q8_0) over the shapes test_qmm's misses: a short 8-row weight tile, k
 * not a multiple of the 16-block chunk, and more than 64 activation rows
 * (4-, 2- and 1-row groups): every row of the batch bitwise the row alone
 * (the decode path), a split inside a tile bitwise the whole, and batches
 * of 2 to 13 rows (the other row groups) bitwise the big batch's first
 * rows. Returns the cases checked. */
static int test_qmm_avx2_tiles(void)
{
	enum { M = 21, K = 32 * 37, N = 71 };
	static uint8_t wb[M * K * 34 / 32];
	static float x[N * K], out[N * M], one[M], part[N * M];
	static char scratch[N * K * 2];
	static const uint32_t types[] = {PM_TYPE_Q4_0, PM_TYPE_Q4_1, PM_TYPE_Q5_0, PM_TYPE_Q5_1, PM_TYPE_Q8_0};
	int cases = 0;
	for (size_t t = 0; t < sizeof types / sizeof *types; t++) {
		pm_qmm q = pm_qmm_32_isa(types[t], PM_ISA_AVX2);
		if (!q.fn)
			continue;
		random_rows(wb, types[t], M, K);
		for (int i = 0; i < N * K; i++)
			x[i] = (float)((int)(rnd() % 2001) - 1000) / 300.0f;
		pm_weight w = {wb, types[t], M, K, pm_type_row_bytes(types[t], K), PM_LAYOUT_ROWS, 0};
		pm_matmul_q(q, out, M, x, K, &w, N, 0, M, scratch);
		pm_matmul_q(q, part, M, x, K, &w, N, 0, 3, scratch);
		pm_matmul_q(q, part, M, x, K, &w, N, 3, 17, scratch);
		pm_matmul_q(q, part, M, x, K, &w, N, 17, M, scratch);
		CHECK(memcmp(part, out, sizeof out) == 0, "avx2 tiles type %u: a split changed a result", types[t]);
		/* smaller batches take other row groups (the 4-bit types: 4,
		 * 2 and 1 rows for y, 8 and 1 for z): their rows are the big
		 * batch's first rows */
		static const int few[] = {2, 3, 5, 7, 10, 13};
		for (size_t f = 0; f < sizeof few / sizeof *few; f++) {
			pm_matmul_q(q, part, M, x, K, &w, few[f], 0, M, scratch);
			CHECK(memcmp(part, out, sizeof(float) * (size_t)(few[f] * M)) == 0,
			      "avx2 tiles type %u: a batch of %d != the first rows of a batch of %d", types[t],
			      few[f], N);
			cases++;
		}
		for (int r = 0; r < N; r++) {
			pm_matmul_q(q, one, M, x + (size_t)r * K, K, &w, 1, 0, M, scratch);
			CHECK(memcmp(one, out + (size_t)r * M, sizeof one) == 0,
			      "avx2 tiles type %u: row %d alone != in a batch of %d", types[t], r, N);
			cases++;
		}
	}
	return cases;
}

/* test_qmm_q8_xrows: qmm_q8_0_xrows_avx2.c's Q8_0 kernel for batches of 8,
 * 14, 15 and 16 rows (one full 8-row set; two sets with 2, 1 or 0 padding
 * lanes) gives bitwise what the weight-row tile gives for the same rows
 * (the first rows of a batch past its reach, 20), each row alone (decode),
 * and any split of the weight rows, over k of 1 block, 37 blocks and its
 * widest 64, and 65 blocks (past it: the tile's path); the weights are
 * allocated to their exact size, so ASan sees a read past the matrix (the
 * kernel's prefetches run ahead, but a prefetch never faults), and every
 * code value, -128 included, occurs. Also the kernel called directly
 * (pm_q8_xrows_takes is the caller's choice) at 2 .. 16 rows against the
 * tile. Returns the cases checked. */
#if defined(__x86_64__) && defined(__GNUC__)
static int test_qmm_q8_xrows(void)
{
	static const int ks[] = {32, 32 * 37, 32 * PM_Q8_XROWS_MAXNB, 32 * (PM_Q8_XROWS_MAXNB + 1)};
	static const int ns[] = {8, 14, 15, 16};
	enum { M = 13, N = 20, KMAX = 32 * (PM_Q8_XROWS_MAXNB + 1) };
	static float x[N * KMAX], big[N * M], out[N * M], one[M], part[N * M];
	static char scratch[N * KMAX * 2];
	pm_qmm q = pm_qmm_32_isa(PM_TYPE_Q8_0, PM_ISA_AVX2);
	int cases = 0;
	if (!q.fn)
		return 0;
	for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++) {
		int K = ks[ki];
		size_t rb = pm_type_row_bytes(PM_TYPE_Q8_0, K);
		uint8_t *wb = malloc(rb * M);
		CHECK(wb != NULL, "malloc");
		if (!wb)
			return cases;
		random_rows(wb, PM_TYPE_Q8_0, M, K);
		for (int i = 0; i < 256 && i < K; i++) /* every code, -128 included */
			wb[(size_t)(i / 32) * 34 + 2 + (size_t)(i % 32)] = (uint8_t)i;
		for (int i = 0; i < N * K; i++)
			x[i] = (float)((int)(rnd() % 2001) - 1000) / 300.0f;
		pm_weight w = {wb, PM_TYPE_Q8_0, M, K, rb, PM_LAYOUT_ROWS, 0};
		CHECK(!pm_q8_xrows_takes(N, K / 32), "a batch of %d took the xrows kernel", N);
		pm_matmul_q(q, big, M, x, K, &w, N, 0, M, scratch);
		for (size_t ni = 0; ni < sizeof ns / sizeof *ns; ni++) {
			int n = ns[ni];
			CHECK(pm_q8_xrows_takes(n, K / 32) == (K / 32 <= PM_Q8_XROWS_MAXNB),
			      "k %d: a batch of %d: xrows choice", K, n);
			pm_matmul_q(q, out, M, x, K, &w, n, 0, M, scratch);
			CHECK(memcmp(out, big, sizeof(float) * (size_t)(n * M)) == 0,
			      "q8 xrows k %d: a batch of %d != the first rows of a batch of %d", K, n, N);
			static const int cuts[][4] = {{0, 1, 6, M}, {0, 5, 12, M}};
			for (int c = 0; c < 2; c++) {
				memset(part, 0xff, sizeof part);
				for (int p = 0; p < 3; p++)
					pm_matmul_q(q, part, M, x, K, &w, n, cuts[c][p], cuts[c][p + 1], scratch);
				CHECK(memcmp(part, out, sizeof(float) * (size_t)(n * M)) == 0,
				      "q8 xrows k %d, %d rows: a split changed a result", K, n);
			}
			cases++;
		}
		for (int r = 0; r < 16; r++) {
			pm_matmul_q(q, one, M, x + (size_t)r * K, K, &w, 1, 0, M, scratch);
			CHECK(memcmp(one, big + (size_t)r * M, sizeof one) == 0,
			      "q8 xrows k %d: row %d alone != in a batch of %d", K, r, N);
		}
		/* the kernel itself at every row count it can take (the
		 * activations of the big batch, quantized by the last call) */
		if (K / 32 <= PM_Q8_XROWS_MAXNB) {
			pm_matmul_q(q, big, M, x, K, &w, N, 0, M, scratch);
			size_t xs = pm_act_row_bytes(32, K);
			for (int n = 2; n <= PM_Q8_XROWS_MAXN; n++) {
				memset(part, 0xff, sizeof part);
				pm_qmm_q8_0_xrows_avx2(part, M, scratch, xs, &w, n, 0, 7);
				pm_qmm_q8_0_xrows_avx2(part, M, scratch, xs, &w, n, 7, M);
				CHECK(memcmp(part, big, sizeof(float) * (size_t)(n * M)) == 0,
				      "q8 xrows k %d: the kernel at %d rows != the tile", K, n);
				CHECK(((const uint32_t *)part)[n * M] == 0xffffffffu,
				      "q8 xrows k %d: the kernel at %d rows wrote past its rows", K, n);
				cases++;
			}
		}
		free(wb);
	}
	return cases;
}
#else
static int test_qmm_q8_xrows(void)
{
	return 0;
}
#endif

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
	if (pm_kernels_avx2())
		test_float_tiles(pm_kernels_avx2());
	printf("activation quantizers: golden blocks\n");
	test_act_golden();
	if (pm_kernels_avx2()) {
		printf("activation quantizers: avx2 == portable\n");
		test_act_avx2();
		printf("activation rows: avx2 == portable\n");
		test_act_rows_avx2();
	}
	printf("integer kernels (portable): %d types\n", test_qmm(0));
	if (pm_kernels_avx2()) {
		int n = test_qmm(1);
		printf("integer kernels (avx2): %d types\n", n);
		CHECK(n == test_qmm(0), "the avx2 set has %d integer kernels, portable %d", n, test_qmm(0));
	}
	printf("integer kernels: VNNI == AVX2 (%d type x build pairs; 0 without AVX-512 VNNI and AVX-VNNI)\n",
	       test_qmm_vnni());
	if (pm_kernels_avx2())
		printf("integer avx2 batch tiles: == rows alone, splits (%d cases)\n", test_qmm_avx2_tiles());
	if (pm_kernels_avx2())
		printf("integer decode: == batch, splits, AVX2 == VNNI (%d cases)\n", test_qmm_decode());
	if (pm_kernels_avx2())
		printf("integer avx2 Q8_0 xrows batches: == tile, rows alone, splits (%d cases)\n",
		       test_qmm_q8_xrows());
	if (fails) {
		fprintf(stderr, "test_quant: %d failures\n", fails);
		return 1;
	}
	printf("ok\n");
	return 0;
}
