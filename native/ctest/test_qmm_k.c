/*
 * test_qmm_k.c: the K-quant integer kernels (qmm_k.c) beyond test_quant.c's
 * test_qmm: shapes that take several weight tiles, a short last tile and
 * more rows of x than one pass holds, extreme codes and scales (the
 * integer ranges), and the AVX2 set bitwise the portable one (both run the
 * same integer sums and the same float32 steps, qmm_k.c), in both of its
 * forms: where the CPU has AVX512-VNNI, pm_qmm_k(type, 1) (qmm_k_vnni.c:
 * vpdpwssd at batch 1, interleaved vpdpbusd tiles of 8 weight rows for
 * batches), and with plain AVX2 instructions (pm_qmm_k(type, 2):
 * qmm_k_avx2.c's interleaved vpmaddubsw tiles of 8 weight rows for
 * batches). M = 37
 * makes several tiles of 16 and of 8 rows and a short last one, and the
 * splits short tiles of every length; N = 70 more rows of x than one pass
 * (64) holds, and batches of 2, 3, 5, 6, 7, 8, 16, 65, 66, 67 and 70 take
 * every grouping of rows of x (fours, a pair, a single row, a row paired
 * with itself). Batch 1 (qmv_k_avx2.c's tiles of 8 Q4_K rows, 4 Q5_K/Q6_K
 * rows) also runs over ranges that end 1 to 7 rows past a whole tile.
 * Q4_K and Q6_K repacked in tiles of 8 rows (kx8.h), as an x86 engine
 * computes them: the AVX2 kernels at batch 1 and in batches, and the
 * AVX-512 VNNI set's batch tiles where the CPU has it, split at multiples
 * of 8 and 16, bitwise the portable kernel on the rows.
 */
#define CTEST_SEED 0x2545f4914f6cdd1dull
#include "ctest.h"
#include "actquant.h"
#include "kernels.h"
#include "matmul.h"
#include "kx8.h"
#include "weights.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { M = 37, K = 768, N = 70 };

/* fill: random bytes; row 0 all 0xff (largest codes, 6-bit scales and
 * mins; Q6_K scale -1), row 1 all 0x00 except Q6_K scales 0x80 (-128,
 * codes 0: q - 32 = -32); then finite F16 scales everywhere. */
static void fill(uint8_t *b, uint32_t ty, size_t rb, size_t bb);

/* check_x8: w (Q4_K or Q6_K, M rows) repacked in tiles of 8 (its first M8 rows,
 * the whole tiles) against want (the portable kernel's N x M outputs on
 * the rows) */
enum { M8 = M / 8 * 8 };
static void check_x8_set(pm_qmm q, const char *name, const pm_weight *wp, const float *x, const float *want,
			 char *scratch, float *part);

static void check_x8(const pm_weight *w, const float *x, const float *want, char *scratch)
{
	static float part[N * M];
	static uint8_t packed[M8 * (K / 256) * 210] __attribute__((aligned(64)));
	pm_weight w37 = *w;
	CHECK(!pm_kx8_ok(&w37), "type %u: a matrix of %d rows (not whole tiles) passed pm_kx8_ok", w->type, M);
	pm_weight wr = *w;
	wr.rows = M8;
	CHECK(pm_kx8_ok(&wr), "type %u: a matrix of %d rows failed pm_kx8_ok", w->type, M8);
	pm_kx8_pack(packed, &wr);
	pm_weight wp = wr;
	wp.data = packed;
	wp.layout = PM_LAYOUT_KX8;
	CHECK(!pm_kx8_ok(&wp), "type %u: a repacked matrix passed pm_kx8_ok", w->type);
	/* the plain AVX2 set, and the AVX-512 VNNI one where the CPU has it
	 * (its own vpdpbusd tiles in batches) */
	for (int set = 2; set >= 1; set--) {
		if (set == 1 && !pm_cpu_has_isa(PM_ISA_AVX512VNNI))
			break;
		check_x8_set(pm_qmm_k(w->type, set), set == 2 ? "avx2" : "avx512vnni", &wp, x, want, scratch, part);
	}
}

/* check_x8_set: q on the tiles wp against want */
static void check_x8_set(pm_qmm q, const char *name, const pm_weight *wp, const float *x, const float *want,
			 char *scratch, float *part)
{
	/* whole, split at 8 and at 16 (mm_unit), batches of every grouping */
	int cuts[][4] = {{0, M8, M8, M8}, {0, 8, 24, M8}, {0, 16, M8, M8}};
	int ns[] = {1, 2, 3, 5, 8, 65, N};
	for (int c = 0; c < 3; c++)
		for (int i = 0; i < (int)(sizeof ns / sizeof ns[0]); i++) {
			int n = ns[i];
			for (size_t j = 0; j < (size_t)N * M; j++)
				part[j] = -77.0f;
			for (int k = 0; k < 3; k++)
				if (cuts[c][k] < cuts[c][k + 1])
					pm_matmul_q(q, part, M, x, K, wp, n, cuts[c][k], cuts[c][k + 1], scratch);
			int bad = 0;
			for (int r = 0; r < n; r++)
				for (int m = 0; m < M; m++)
					bad += m < M8 ? memcmp(&part[r * M + m], &want[r * M + m], sizeof(float)) != 0
						      : part[r * M + m] != -77.0f;
			CHECK(bad == 0, "%s type %u in tiles of 8, batch %d, cut %d: %d outputs differ from the rows' or were written outside",
			      name, wp->type, n, c, bad);
		}
	/* batch 1 on every row of x (each row alone is decode) */
	for (int r = 0; r < N; r += 7) {
		float one[M];
		pm_matmul_q(q, one, M, x + (size_t)r * K, K, wp, 1, 0, M8, scratch);
		CHECK(memcmp(one, want + (size_t)r * M, sizeof(float) * M8) == 0,
		      "%s type %u in tiles of 8: row %d of x at batch 1 differs from the rows'", name, wp->type, r);
	}
}

static void fill(uint8_t *b, uint32_t ty, size_t rb, size_t bb)
{
	for (size_t i = 0; i < rb * M; i++)
		b[i] = (uint8_t)rnd();
	memset(b, 0xff, rb);
	memset(b + rb, 0, rb);
	for (size_t o = 0; o < rb * M; o += bb) {
		if (ty == PM_TYPE_Q6_K) {
			if (o / rb == 1)
				memset(b + o + 192, 0x80, 16);
			put_f16(b + o + 208);
		} else {
			put_f16(b + o);
			put_f16(b + o + 2);
		}
	}
}

int main(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	static const uint32_t types[] = {PM_TYPE_Q4_K, PM_TYPE_Q5_K, PM_TYPE_Q6_K};
	static uint8_t wb[M * (K / 256) * 210];
	static float x[N * K], out[3][N * M], part[N * M], one[M], wf[K], xd[N * K];
	static char scratch[N * K * 2];
	int have_avx2 = pm_kernels_avx2() != NULL;
	for (int i = 0; i < N * K; i++)
		x[i] = (float)((int)(rnd() % 2001) - 1000) / 300.0f;
	for (int i = 0; i < K; i++) {
		x[i] = 5.0f;                       /* row 0: every code 127 */
		x[K + i] = i % 2 ? -5.0f : 5.0f; /* row 1: +-127 */
	}
	for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
		uint32_t ty = types[t];
		size_t rb = pm_type_row_bytes(ty, K), bb = rb / (K / 256);
		fill(wb, ty, rb, bb);
		pm_weight w = {wb, ty, M, K, rb, PM_LAYOUT_ROWS, 0};
		for (int set = 0; set <= 2 * have_avx2; set++) {
			pm_qmm q = pm_qmm_k(ty, set);
			CHECK(q.fn && q.block == 256, "type %u set %d: no kernel", ty, set);
			if (!q.fn)
				continue;
			const char *name = set == 2 ? "avx2 (no vnni)" : set ? "avx2" : "portable";
			pm_matmul_q(q, out[set], M, x, K, &w, N, 0, M, scratch);
			/* splits at multiples of 4 (as mm_task makes them), and
			 * ranges that start and end inside the AVX2 batch
			 * path's 8-row tiles (short tiles of 3, 7, 1 and 2 rows) */
			int cuts[] = {0, 4, 20, 36, M}, odd[] = {0, 3, 10, 27, M};
			for (int c = 0; c + 1 < 5; c++)
				pm_matmul_q(q, part, M, x, K, &w, N, cuts[c], cuts[c + 1], scratch);
			CHECK(memcmp(part, out[set], sizeof part) == 0, "%s type %u: a split changed a result",
			      name, ty);
			for (int c = 0; c + 1 < 5; c++)
				pm_matmul_q(q, part, M, x, K, &w, N, odd[c], odd[c + 1], scratch);
			CHECK(memcmp(part, out[set], sizeof part) == 0, "%s type %u: a split inside a tile changed a result",
			      name, ty);
			/* a part writes its own columns only (the VNNI batch path
			 * accumulates whole tiles of 16 in out itself) */
			for (int c = 0; c + 1 < 5; c++) {
				for (size_t i = 0; i < sizeof part / sizeof part[0]; i++)
					part[i] = -77.0f;
				pm_matmul_q(q, part, M, x, K, &w, N, cuts[c], cuts[c + 1], scratch);
				int outside = 0;
				for (int r = 0; r < N; r++)
					for (int m = 0; m < M; m++)
						outside += (m < cuts[c] || m >= cuts[c + 1]) && part[r * M + m] != -77.0f;
				CHECK(outside == 0, "%s type %u: rows [%d, %d) wrote %d outputs outside them", name, ty,
				      cuts[c], cuts[c + 1], outside);
			}
			/* smaller batches, odd ones too (the VNNI batch path runs
			 * rows of x in fours and pairs, the AVX2 one in fours, a
			 * pair and a single row, both 64 per pass): the same rows */
			int ns[] = {2, 3, 5, 6, 7, 8, 16, 65, 66, 67};
			for (int i = 0; i < (int)(sizeof ns / sizeof ns[0]); i++) {
				pm_matmul_q(q, part, M, x, K, &w, ns[i], 0, M, scratch);
				CHECK(memcmp(part, out[set], sizeof(float) * (size_t)ns[i] * M) == 0,
				      "%s type %u: a batch of %d != the first rows of %d", name, ty, ns[i], N);
			}
			for (int r = 0; r < N; r += 13) {
				pm_matmul_q(q, one, M, x + (size_t)r * K, K, &w, 1, 0, M, scratch);
				CHECK(memcmp(one, out[set] + (size_t)r * M, sizeof one) == 0,
				      "%s type %u: row %d alone != in a batch of %d", name, ty, r, N);
				/* batch 1 over ranges that start and end inside the
				 * decode path's tiles of 4 and 8 rows (1, 2, 3, 5, 6, 7
				 * rows past a whole tile): the same outputs, and none
				 * written outside the range */
				int odd[] = {0, 3, 5, 14, 15, 22, 29, M};
				for (int c = 0; c + 1 < 8; c++) {
					float part1[M];
					for (int m = 0; m < M; m++)
						part1[m] = -77.0f;
					pm_matmul_q(q, part1, M, x + (size_t)r * K, K, &w, 1, odd[c], odd[c + 1], scratch);
					int bad = 0;
					for (int m = 0; m < M; m++)
						bad += m >= odd[c] && m < odd[c + 1] ? memcmp(&part1[m], &one[m], sizeof one[m]) != 0
										      : part1[m] != -77.0f;
					CHECK(bad == 0, "%s type %u row %d: batch 1 over rows [%d, %d): %d outputs wrong",
					      name, ty, r, odd[c], odd[c + 1], bad);
				}
			}
		}
		if (have_avx2 && ty != PM_TYPE_Q5_K)
			check_x8(&w, x, out[0], scratch);
		if (ty == PM_TYPE_Q5_K) {
			pm_weight w8 = w;
			w8.rows = M8;
			CHECK(!pm_kx8_ok(&w8), "Q5_K passed pm_kx8_ok (no kernel reads it in tiles)");
		}
		if (have_avx2) {
			CHECK(memcmp(out[0], out[1], sizeof out[0]) == 0, "type %u: avx2 != portable", ty);
			CHECK(memcmp(out[0], out[2], sizeof out[0]) == 0, "type %u: avx2 (no vnni) != portable", ty);
		}
		/* against the double product of what the kernel saw */
		pm_matmul_q(pm_qmm_for(ty, 0), out[0], M, x, K, &w, N, 0, M, scratch);
		size_t xb = pm_act_row_bytes(256, K);
		for (int r = 0; r < N; r++)
			for (int i = 0; i < K; i++) {
				const pm_act256 *a = (const pm_act256 *)(scratch + (size_t)r * xb) + i / 256;
				xd[r * K + i] = a->d * (float)a->q[i % 256];
			}
		CHECK(xd[0] == 5.0f && xd[K] == 5.0f && xd[K + 1] == -5.0f, "rows 0, 1: not the extreme codes");
		for (int m = 0; m < M; m++) {
			pm_dequant(ty, 0)(wf, pm_weight_row(&w, m), K);
			for (int r = 0; r < N; r++) {
				double s = 0, mag = 0;
				for (int i = 0; i < K; i++) {
					s += (double)wf[i] * xd[r * K + i];
					mag += fabs((double)wf[i] * xd[r * K + i]);
				}
				double got = out[0][r * M + m];
				CHECK(fabs(got - s) <= 1e-5 * mag + 1e-6, "type %u row %d out %d: %g, want %g", ty, r,
				      m, got, s);
			}
		}
	}
	if (fails) {
		fprintf(stderr, "test_qmm_k: %d failures\n", fails);
		return 1;
	}
	printf("ok\n");
	return 0;
}
