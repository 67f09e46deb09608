/*
 * test_qmm_decode.c: the 32-block kernels' decode path (n == 1) at the
 * real models' row widths. test_quant.c's test_qmm_decode covers widths
 * that leave 1..3 blocks over a 4-block step; this file adds the widths of
 * smollm2-135m (576: 18 blocks, 4 steps and 2 over; 1536: 48 blocks) and
 * the default model (512, 1376), with row counts that leave 1..3 rows over
 * a 4-row tile and matrices long enough that decode512's prefetch runs two
 * tiles past the last row. For each 32-block type and both x86 builds
 * (AVX2, and AVX-512 VNNI where the CPU has it):
 *
 * - each row r of a batch of N is bitwise the decode of row r alone;
 * - a decode split at cuts that are not multiples of the tile gives
 *   bitwise the unsplit result, and writes nothing outside its rows;
 * - the VNNI build's decode is bitwise the AVX2 build's;
 * - the decode is within a small tolerance of the portable kernel (which
 *   rounds differently: qmm_32.c), so a bitwise-consistent wrong answer
 *   fails too.
 *
 * The weights are allocated to their exact size, so ASan sees any read
 * past the matrix (prefetches are hints and read nothing).
 */
#include "ctest.h"
#include "actquant.h"
#include "kernels.h"
#include "weights.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const uint32_t types[] = {PM_TYPE_Q4_0, PM_TYPE_Q4_1, PM_TYPE_Q5_0, PM_TYPE_Q5_1, PM_TYPE_Q8_0};

/* fill: random codes and a finite F16 scale (and min) per block */
static void fill(uint8_t *b, uint32_t type, int rows, int cols)
{
	size_t rb = pm_type_row_bytes(type, cols), n = rb * (size_t)rows, bb = rb / (size_t)(cols / 32);
	for (size_t i = 0; i < n; i++)
		b[i] = (uint8_t)rnd();
	for (size_t o = 0; o < n; o += bb) {
		put_f16(b + o);
		if (type == PM_TYPE_Q4_1 || type == PM_TYPE_Q5_1)
			put_f16(b + o + 2);
	}
}

/* M >= 9 (the cuts below) */
enum { N = 3, MMAX = 203, KMAX = 1536 };

static float x[N * KMAX], bn[N * MMAX], one[MMAX], dec[2][MMAX], sp[MMAX + 2], port[MMAX];
static char scratch[N * KMAX * 2];

/* check_kernel: the batch/decode/split checks of one build q on w;
 * leaves the decode of row 0 of x in d. Returns 0 when q is absent. */
static int check_kernel(pm_qmm q, const char *name, const pm_weight *w, float *d)
{
	if (!q.fn)
		return 0;
	int M = w->rows, K = w->cols;
	pm_matmul_q(q, bn, (size_t)M, x, (size_t)K, w, N, 0, M, scratch);
	for (int r = 0; r < N; r++) {
		pm_matmul_q(q, one, (size_t)M, x + (size_t)r * K, (size_t)K, w, 1, 0, M, scratch);
		CHECK(memcmp(one, bn + (size_t)r * M, (size_t)M * sizeof(float)) == 0,
		      "%s type %u k %d m %d: decode of row %d != row %d of a batch of %d", name, w->type, K, M, r, r,
		      N);
		if (r == 0)
			memcpy(d, one, (size_t)M * sizeof(float));
	}
	const int cuts[][4] = {{0, 1, 6, M}, {0, 5, M - 2, M}, {0, 3, M - 1, M}, {0, M / 2, M - 1, M}};
	for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++) {
		for (int i = 0; i < M + 2; i++)
			sp[i] = -12345.0f;
		for (int p = 0; p < 3; p++)
			pm_matmul_q(q, sp + 1, (size_t)M, x, (size_t)K, w, 1, cuts[c][p], cuts[c][p + 1], scratch);
		CHECK(sp[0] == -12345.0f && sp[M + 1] == -12345.0f, "%s type %u k %d m %d: a split wrote outside the matrix",
		      name, w->type, K, M);
		CHECK(memcmp(sp + 1, d, (size_t)M * sizeof(float)) == 0,
		      "%s type %u k %d m %d: split %zu changed a decode result", name, w->type, K, M, c);
	}
	/* one part alone writes only its own rows */
	int p0 = 5, p1 = M < 11 ? M : 11;
	for (int i = 0; i < M + 2; i++)
		sp[i] = -12345.0f;
	pm_matmul_q(q, sp + 1, (size_t)M, x, (size_t)K, w, 1, p0, p1, scratch);
	int outside = 0;
	for (int i = 0; i < M; i++)
		if ((i < p0 || i >= p1) && sp[1 + i] != -12345.0f)
			outside++;
	CHECK(outside == 0, "%s type %u k %d m %d: the part [%d, %d) wrote %d outputs outside it", name, w->type, K,
	      M, p0, p1, outside);
	CHECK(memcmp(sp + 1 + p0, d + p0, (size_t)(p1 - p0) * sizeof(float)) == 0,
	      "%s type %u k %d m %d: the part [%d, %d) differs", name, w->type, K, M, p0, p1);
	return 1;
}

int main(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	if (!pm_kernels_avx2()) {
		printf("test_qmm_decode: no AVX2 on this CPU, nothing to check\n");
		return 0;
	}
	static const int ks[] = {512, 576, 1376, 1536};
	static const int ms[] = {MMAX, 202, 201, 200, 9};
	int cases = 0, vnni = 0;
	for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
		uint32_t ty = types[t];
		for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
			for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++) {
				int K = ks[ki], M = ms[mi];
				size_t rb = pm_type_row_bytes(ty, K);
				uint8_t *wb = malloc(rb * (size_t)M);
				CHECK(wb != NULL, "malloc");
				if (!wb)
					return 1;
				fill(wb, ty, M, K);
				pm_weight w = {wb, ty, M, K, rb, PM_LAYOUT_ROWS, 0};
				for (int it = 0; it < 2; it++) {
					w.far = (uint32_t)it; /* the second pass prefetches into L2 */
					for (int i = 0; i < N * K; i++)
						x[i] = (float)((int)(rnd() % 2001) - 1000) / 300.0f;
					if (it == 1) /* a zero block and signed zeros in row 0 */
						for (int i = 32; i < 96; i++)
							x[i] = i % 3 ? -0.0f : 0.0f;
					int a = check_kernel(pm_qmm_32_x86(ty, 0), "avx2", &w, dec[0]);
					int v = check_kernel(pm_qmm_32_x86(ty, 1), "vnni", &w, dec[1]);
					CHECK(a, "type %u: no AVX2 kernel", ty);
					if (a && v)
						CHECK(memcmp(dec[0], dec[1], (size_t)M * sizeof(float)) == 0,
						      "type %u k %d m %d: VNNI decode != AVX2 decode", ty, K, M);
					/* the AVX-VNNI build, where the CPU has it */
					if (a && check_kernel(pm_qmm_32_x86(ty, 2), "avxvnni", &w, dec[1]))
						CHECK(memcmp(dec[0], dec[1], (size_t)M * sizeof(float)) == 0,
						      "type %u k %d m %d: AVX-VNNI decode != AVX2 decode", ty, K, M);
					vnni += v;
					/* against the portable kernel: the same products,
					 * rounded differently */
					pm_matmul_q(pm_qmm_32(ty, 0), port, (size_t)M, x, (size_t)K, &w, 1, 0, M, scratch);
					double worst = 0, big = 1;
					for (int i = 0; i < M; i++) {
						double e = fabs((double)dec[0][i] - port[i]);
						worst = e > worst ? e : worst;
						big = fabs((double)port[i]) > big ? fabs((double)port[i]) : big;
					}
					worst /= big; /* relative to the largest output */
					CHECK(worst < 1e-5, "type %u k %d m %d: decode differs from portable by %g", ty, K,
					      M, worst);
				}
				free(wb);
				cases++;
			}
		}
	}
	printf("integer decode at model widths: == batch rows, splits, AVX2 == VNNI, ~ portable "
	       "(%d cases, %d with VNNI)\n",
	       cases, vnni);
	if (fails) {
		fprintf(stderr, "test_qmm_decode: %d failures\n", fails);
		return 1;
	}
	return 0;
}
