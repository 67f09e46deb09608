/*
 * test_q32x8.c: Q4_0 repacked in tiles of 8 rows (q32x8.h), as the AVX2
 * and AVX-512 VNNI engines compute it: each set's kernels on the tiles
 * give bitwise the outputs the AVX2 kernels give on the rows, at batch 1
 * (qmv_32_avx2.c, both prefetch hints: far set and not) and in batches of
 * every grouping of activation rows (qmm_32_avx2.c, and the VNNI set's
 * 16-row tiles, two tiles of 8 each, where the CPU has it: 1, 2, 3, 5, 8,
 * 65 and 70, more than one pass of 64), whole or split at multiples of 16
 * (forward.c's MM_UNIT) and of 8 (the VNNI tile then holds one tile of 8),
 * and a part writes nothing outside its rows. Widths: 3 blocks (odd: the
 * tiles' vectors off 32-byte alignment), 16 (one k-chunk), 18 (576,
 * smollm2: a chunk and 2 over) and 64. Row 0 holds the largest codes, row
 * 1 the smallest. The packed matrix is allocated to its exact size, so
 * ASan sees any read past it. pm_q32x8_ok refuses what the layout cannot
 * hold.
 */
#include "ctest.h"
#include "actquant.h"
#include "kernels.h"
#include "q32x8.h"
#include "weights.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { M = 48, N = 70, KMAX = 2048 };

static float x[N * KMAX], want[N * M], got[N * M + 2];
static char scratch[N * KMAX * 2];

static void fill(uint8_t *b, int cols)
{
	size_t rb = pm_type_row_bytes(PM_TYPE_Q4_0, cols);
	for (size_t i = 0; i < rb * M; i++)
		b[i] = (uint8_t)rnd();
	memset(b, 0xff, rb);
	memset(b + rb, 0, rb);
	for (size_t o = 0; o < rb * M; o += 18)
		put_f16(b + o);
}

/* check: q on the tiles wp (M rows, K columns) against want, q's
 * outputs on the rows */
static void check(pm_qmm q, const pm_weight *wp, int K)
{
	int ns[] = {1, 2, 3, 5, 8, 65, N};
	int cuts[][4] = {{0, M, M, M}, {0, 16, 32, M}, {0, 8, 40, M}};
	for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++)
		for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
			int n = ns[i];
			for (size_t j = 0; j < (size_t)N * M + 2; j++)
				got[j] = -77.0f;
			for (int k = 0; k < 3; k++)
				if (cuts[c][k] < cuts[c][k + 1])
					pm_matmul_q(q, got + 1, M, x, (size_t)K, wp, n, cuts[c][k], cuts[c][k + 1],
						    scratch);
			int bad = 0;
			for (int r = 0; r < n; r++)
				bad += memcmp(&got[1 + r * M], &want[r * M], sizeof(float) * M) != 0;
			for (size_t j = 1 + (size_t)n * M; j < (size_t)N * M + 2; j++)
				bad += got[j] != -77.0f;
			bad += got[0] != -77.0f;
			CHECK(bad == 0, "k %d far %u batch %d cut %zu: %d rows differ from the rows' or outputs were written outside",
			      K, wp->far, n, c, bad);
		}
	/* one tile alone writes only its rows */
	for (size_t j = 0; j < (size_t)M + 2; j++)
		got[j] = -77.0f;
	pm_matmul_q(q, got + 1, M, x, (size_t)K, wp, 1, 16, 24, scratch);
	int outside = 0;
	for (int m = 0; m < M; m++)
		outside += (m < 16 || m >= 24) && got[1 + m] != -77.0f;
	CHECK(outside == 0 && memcmp(got + 17, want + 16, 8 * sizeof(float)) == 0,
	      "k %d: the tile [16, 24) alone wrote %d outputs outside it or differs", K, outside);
}

int main(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	uint8_t probe[18 * 8] = {0};
	pm_weight bad = {probe, PM_TYPE_Q4_0, 7, 32, 18, PM_LAYOUT_ROWS, 0};
	CHECK(!pm_q32x8_ok(&bad), "7 rows (not a whole tile) passed pm_q32x8_ok");
	bad.rows = 8;
	CHECK(pm_q32x8_ok(&bad), "8 rows of Q4_0 failed pm_q32x8_ok");
	bad.layout = PM_LAYOUT_Q32X8;
	CHECK(!pm_q32x8_ok(&bad), "a repacked matrix passed pm_q32x8_ok");
	bad.layout = PM_LAYOUT_ROWS;
	bad.type = PM_TYPE_Q4_1;
	bad.row_bytes = 20;
	CHECK(!pm_q32x8_ok(&bad), "Q4_1 passed pm_q32x8_ok (no kernel reads it in tiles)");
	pm_qmm q = pm_qmm_32_x86(PM_TYPE_Q4_0, 0);
	if (!q.fn) {
		printf("test_q32x8: no AVX2 on this CPU, only pm_q32x8_ok checked\n");
		return fails != 0;
	}
	static const int ks[] = {96, 512, 576, KMAX};
	int vnni = 0;
	for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
		int K = ks[ki];
		size_t rb = pm_type_row_bytes(PM_TYPE_Q4_0, K);
		uint8_t *rows = malloc(rb * M), *tiles = malloc(rb * M);
		CHECK(rows && tiles, "malloc");
		if (!rows || !tiles)
			return 1;
		fill(rows, K);
		pm_weight wr = {rows, PM_TYPE_Q4_0, M, K, rb, PM_LAYOUT_ROWS, 0};
		CHECK(pm_q32x8_ok(&wr), "k %d: %d rows of Q4_0 failed pm_q32x8_ok", K, M);
		pm_q32x8_pack(tiles, &wr);
		CHECK(memcmp(rows, tiles, rb * M) != 0, "k %d: packing changed nothing", K);
		pm_weight wp = wr;
		wp.data = tiles;
		wp.layout = PM_LAYOUT_Q32X8;
		for (int i = 0; i < N * K; i++)
			x[i] = (float)((int)(rnd() % 2001) - 1000) / 300.0f;
		for (int i = 0; i < 64 && i < K; i++) /* a zero block in row 0 */
			x[i] = i % 3 ? -0.0f : 0.0f;
		for (uint32_t far = 0; far < 2; far++) {
			wr.far = wp.far = far;
			pm_matmul_q(q, want, M, x, (size_t)K, &wr, N, 0, M, scratch);
			float one[M];
			pm_matmul_q(q, one, M, x, (size_t)K, &wr, 1, 0, M, scratch);
			CHECK(memcmp(one, want, sizeof one) == 0, "k %d: the rows' decode differs from their batch", K);
			check(q, &wp, K);
			pm_qmm v = pm_qmm_32_x86(PM_TYPE_Q4_0, 1);
			if (v.fn)
				check(v, &wp, K);
			vnni += v.fn != NULL;
		}
		free(rows);
		free(tiles);
	}
	if (fails) {
		fprintf(stderr, "test_q32x8: %d failures\n", fails);
		return 1;
	}
	printf("ok (%s)\n", vnni ? "AVX2 and AVX-512 VNNI" : "AVX2; no AVX-512 VNNI on this CPU");
	return 0;
}
