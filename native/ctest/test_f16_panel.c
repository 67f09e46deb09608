/*
 * test_f16_panel.c: mm_f16_panel.c's layout and products. The packer puts
 * every element where the header says; the decode kernel and the batch
 * tile give, bitwise, the order the header defines (out = 0; out =
 * fma(x[i], w[i], out) for i in order, in float32: the scalar fmaf chain
 * below) for every shape of the tiles and their remainders, every batch
 * size a pass or an x block can end on, every split of the rows into
 * whole panels; and a range writes only its own outputs.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ctest.h"
#include "kernels.h"
#include "mm_f16_panel.h"

/* ref: the header's order, one output at a time. */
static float ref(const float *x, const uint16_t *row, int k)
{
	float s = 0.0f;
	for (int i = 0; i < k; i++)
		s = fmaf(x[i], pm_half_to_float(row[i]), s);
	return s;
}

/* fill: random F16 rows, some entries zero, subnormal or large. */
static void fill(uint16_t *w, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint32_t c = rnd() % 64;
		if (c == 0)
			w[i] = 0;
		else if (c == 1)
			w[i] = (uint16_t)(rnd() % 0x400) | (uint16_t)(rnd() & 1 ? 0x8000 : 0); /* subnormal */
		else if (c == 2)
			w[i] = (uint16_t)(0x7000 + rnd() % 0x800); /* ~2^12 .. 2^15 */
		else
			put_f16((uint8_t *)&w[i]);
	}
}

static void test_pack(void)
{
	enum { M = 24, K = 37 };
	static uint16_t w[M * K], p[M * K];
	fill(w, M * K);
	pm_weight W = {.data = w, .type = PM_TYPE_F16, .rows = M, .cols = K, .row_bytes = 2 * K};
	pm_f16_panel_pack(p, &W);
	int bad = 0;
	for (int r = 0; r < M; r++)
		for (int i = 0; i < K; i++)
			bad += p[((size_t)(r / 8) * K + (size_t)i) * 8 + (size_t)(r % 8)] != w[(size_t)r * K + i];
	CHECK(bad == 0, "pack: %d elements out of place", bad);
	CHECK(pm_f16_panel_ok(&W) == (pm_kernels_avx2() != NULL), "a 24-row F16 matrix: panel_ok %d",
	      pm_f16_panel_ok(&W));
	W.rows = 20;
	CHECK(!pm_f16_panel_ok(&W), "20 rows are not whole panels");
	W.rows = 24, W.type = PM_TYPE_BF16;
	CHECK(!pm_f16_panel_ok(&W), "BF16 has no panels");
	W.type = PM_TYPE_F16, W.layout = PM_LAYOUT_PANEL8;
	CHECK(!pm_f16_panel_ok(&W), "a matrix already in panels");
}

/* test_products: returns the cases run. */
static int test_products(void)
{
	enum { MMAX = 136, KMAX = 1376, NMAX = 75 };
	/* rows: one panel, two, an odd count of panels (a lone last panel),
	 * 17 panels (8 + 8 + 1 decode groups; 8 tiles and a lone one) */
	static const int ms[] = {8, 16, 40, 136};
	/* k: shorter than a 4-column step, steps and 1..3 left, whole steps,
	 * the default model's and an x block of 18 rows (1376) */
	static const int ks[] = {1, 3, 4, 7, 64, 101, 512, KMAX};
	static uint16_t w[MMAX * KMAX], p[MMAX * KMAX];
	static float x[NMAX * KMAX], want[NMAX * MMAX], out[NMAX * MMAX];
	int cases = 0;
	for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
		int K = ks[ki];
		for (int i = 0; i < NMAX * K; i++)
			x[i] = (float)((int)(rnd() % 2001) - 1000) / 1000.0f * (rnd() % 16 == 0 ? 1e-6f : 1.0f);
		for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++) {
			int M = ms[mi];
			fill(w, (size_t)M * K);
			pm_weight W = {.data = w, .type = PM_TYPE_F16, .rows = M, .cols = K,
				       .row_bytes = 2 * (size_t)K};
			pm_f16_panel_pack(p, &W);
			pm_weight P = W;
			P.data = p;
			P.layout = PM_LAYOUT_PANEL8;
			for (int r = 0; r < NMAX; r++)
				for (int m = 0; m < M; m++)
					want[(size_t)r * M + m] = ref(x + (size_t)r * K, w + (size_t)m * K, K);
			/* decode: every row of x alone, whole and split at each panel */
			for (int r = 0; r < 3; r++) {
				const float *xr = x + (size_t)r * K;
				memset(out, 0, sizeof(float) * (size_t)M);
				pm_mv_f16_panel(out, xr, &P, 0, M);
				CHECK(memcmp(out, want + (size_t)r * M, sizeof(float) * (size_t)M) == 0,
				      "decode m %d k %d row %d != the fmaf chain", M, K, r);
				memset(out, 0, sizeof(float) * (size_t)M);
				for (int m = 0; m < M; m += 8)
					pm_mv_f16_panel(out, xr, &P, m, m + 8);
				CHECK(memcmp(out, want + (size_t)r * M, sizeof(float) * (size_t)M) == 0,
				      "decode m %d k %d row %d: panel by panel != the fmaf chain", M, K, r);
				cases += 2;
			}
			/* batches: pass shapes 1..12, block ends, a range split */
			int ns[] = {2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13, 16, 19, 25, NMAX};
			for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
				int n = ns[ni];
				size_t bytes = sizeof(float) * (size_t)n * M;
				memset(out, 0, bytes);
				pm_mm_f16_panel(out, (size_t)M, x, &P, n, 0, M);
				CHECK(memcmp(out, want, bytes) == 0, "batch m %d k %d n %d != the fmaf chain", M, K, n);
				int mid = M / 16 * 8; /* a split that leaves lone panels on both sides */
				if (mid > 0) {
					memset(out, 0, bytes);
					pm_mm_f16_panel(out, (size_t)M, x, &P, n, 0, mid);
					int outside = 0;
					for (int r = 0; r < n; r++)
						for (int m = mid; m < M; m++)
							outside += out[(size_t)r * M + m] != 0.0f;
					CHECK(outside == 0, "batch m %d k %d n %d: rows [0, %d) wrote %d outputs past them",
					      M, K, n, mid, outside);
					pm_mm_f16_panel(out, (size_t)M, x, &P, n, mid, M);
					CHECK(memcmp(out, want, bytes) == 0, "batch m %d k %d n %d: split at %d changed a result",
					      M, K, n, mid);
				}
				cases += 2;
			}
		}
	}
	return cases;
}

int main(void)
{
	test_pack();
	if (pm_kernels_avx2())
		printf("f16 panels: decode and batch == the fmaf chain (%d cases)\n", test_products());
	else
		printf("f16 panels: no AVX2+F16C here, products not run\n");
	if (fails) {
		fprintf(stderr, "test_f16_panel: %d failures\n", fails);
		return 1;
	}
	printf("ok\n");
	return 0;
}
