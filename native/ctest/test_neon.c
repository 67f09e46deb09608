/*
 * test_neon.c: the AArch64 NEON path (PM_ISA_NEON, qmm_32_neon.c).
 *
 * Its kernels are meant to give bitwise the portable set's results, so
 * this is the strongest check available without ARM hardware (they run
 * here only under qemu-aarch64: run-arm64.sh):
 *   - for Q8_0, Q4_0, Q4_1, Q5_0 and Q5_1, k of 1, 3 and 10 blocks and m
 *     of 1, 6 and 13 weight rows (ragged against the 4-row tile), every
 *     batch n = 1..17: each row of the neon batch is bitwise the portable
 *     result (and so the same as the row alone: batch invariance within
 *     the set), for the baseline (vmull_s8) build and, where the CPU has
 *     the dot-product extension, the vdotq_s32 one;
 *   - splits [m0, m1) that cut inside a tile give the whole's bits;
 *   - activations at the codes' extremes (+-127) and all-zero blocks;
 *   - the set's float matmul (mm_float_neon.c) and its F32, F16 and BF16
 *     tiles (through pm_matmul_w) bitwise portable's, k of every tail
 *     length mod 8, n = 1..9, splits, F32 rows at an odd address;
 *   - the K-quant kernels (qmm_k_neon.c) bitwise portable's for Q4_K,
 *     Q5_K and Q6_K, n = 1..9, splits;
 *   - whole engines: every typed tiny model scores bitwise the same logits
 *     with kernel neon as with portable, and auto picks neon;
 *   - the path's name and availability: "neon"; on x86 (or any non-AArch64
 *     build) pm_cpu_has_isa says no, every neon entry point is NULL and an
 *     engine asked for neon fails, naming it.
 */
#include "ctest.h"
#include "actquant.h"
#include "engine.h"
#include "kernels.h"
#include "matmul.h"
#include "model.h"
#include "mm_float_neon.h"
#include "weights.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const uint32_t types[] = {PM_TYPE_Q8_0, PM_TYPE_Q4_0, PM_TYPE_Q4_1, PM_TYPE_Q5_0, PM_TYPE_Q5_1};
#define N_TYPES (sizeof types / sizeof types[0])

enum { MAXM = 13, MAXK = 32 * 10, MAXN = 17 };

#if defined(__aarch64__)
/* random_rows: random codes, finite F16 scales (and mins). */
static void random_rows(uint8_t *b, uint32_t type, int rows, int cols)
{
	size_t rb = pm_type_row_bytes(type, cols), n = rb * (size_t)rows;
	size_t bb = rb / (size_t)(cols / pm_type_block(type));
	for (size_t i = 0; i < n; i++)
		b[i] = (uint8_t)rnd();
	for (size_t o = 0; o < n; o += bb) {
		if (type == PM_TYPE_Q6_K) {
			put_f16(b + o + 208);
			continue;
		}
		put_f16(b + o);
		if (type == PM_TYPE_Q4_1 || type == PM_TYPE_Q5_1 || type == PM_TYPE_Q4_K || type == PM_TYPE_Q5_K)
			put_f16(b + o + 2);
	}
}

static void fill_x(float *x, int n, int k, int it);

/* check_batches: q against port on w for every batch n = 1..N of the
 * activation rows x (pattern it), bitwise; want gets port's N rows, got
 * (got_bytes) is overwritten. Returns the cases. */
static int check_batches(const char *which, pm_qmm port, pm_qmm q, const pm_weight *w, const float *x, int N, int it,
			 float *want, float *got, size_t got_bytes, void *scratch)
{
	int M = w->rows, K = w->cols, cases = 0;
	pm_matmul_q(port, want, M, x, K, w, N, 0, M, scratch);
	for (int n = 1; n <= N; n++) {
		memset(got, 0xff, got_bytes);
		pm_matmul_q(q, got, M, x, K, w, n, 0, M, scratch);
		CHECK(memcmp(got, want, (size_t)n * M * sizeof(float)) == 0,
		      "%s type %u k %d m %d x%d: batch of %d != portable", which, w->type, K, M, it, n);
		cases++;
	}
	return cases;
}

/* check_k: the K-quant kernels (qmm_k_neon.c, through pm_qmm_isa) bitwise
 * the portable ones, k of 1 and 3 super-blocks, m of 1, 5 and 9, every
 * batch n = 1..9 and a split. Returns the cases. */
static int check_k(void)
{
	enum { KM = 9, KK = 768, KN = 9 };
	static const uint32_t ktypes[] = {PM_TYPE_Q4_K, PM_TYPE_Q5_K, PM_TYPE_Q6_K};
	static const int ks[] = {256, KK}, ms[] = {1, 5, KM};
	static uint8_t wb[KM * (KK / 256) * 210];
	static float x[KN * KK], want[KN * KM], got[KN * KM];
	static char scratch[KN * (KK / 256) * sizeof(pm_act256)];
	int cases = 0;
	for (size_t t = 0; t < sizeof ktypes / sizeof *ktypes; t++) {
		pm_qmm port = pm_qmm_isa(ktypes[t], PM_ISA_PORTABLE), q = pm_qmm_isa(ktypes[t], PM_ISA_NEON);
		CHECK(port.fn && q.fn && q.fn == pm_qmm_k_neon(ktypes[t]).fn && q.block == 256,
		      "type %u: no neon K-quant kernel", ktypes[t]);
		if (!port.fn || !q.fn)
			continue;
		for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++)
			for (size_t mi = 0; mi < sizeof ms / sizeof *ms; mi++)
				for (int it = 0; it < 3; it++) {
					int K = ks[ki], M = ms[mi];
					random_rows(wb, ktypes[t], M, K);
					pm_weight w = {wb, ktypes[t], M, K, pm_type_row_bytes(ktypes[t], K), PM_LAYOUT_ROWS, 0};
					fill_x(x, KN, K, it);
					cases += check_batches("neon", port, q, &w, x, KN, it, want, got, sizeof got, scratch);
					memset(got, 0xff, sizeof got);
					pm_matmul_q(q, got, M, x, K, &w, KN, 0, M / 2, scratch);
					pm_matmul_q(q, got, M, x, K, &w, KN, M / 2, M, scratch);
					CHECK(memcmp(got, want, (size_t)KN * M * sizeof(float)) == 0,
					      "neon type %u k %d m %d: a split changed a result", ktypes[t], K, M);
				}
	}
	return cases;
}

/* fill_x: activations for pattern it: 0 random, 1 the codes' extremes
 * (each block's max magnitude repeated: codes +-127), 2 random with
 * all-zero blocks 1 and 2 (d = 0). */
static void fill_x(float *x, int n, int k, int it)
{
	for (int i = 0; i < n * k; i++) {
		float v = (float)((int)(rnd() % 2001) - 1000) / 300.0f;
		if (it == 1)
			v = rnd() & 1 ? 3.5f : -3.5f;
		if (it == 2 && i % k >= 32 && i % k < 96)
			v = 0.0f;
		x[i] = v;
	}
}

/* check_kernel: every case for the neon build dot (0 vmull_s8, 1 vdotq_s32). */
static int check_kernel(int dot, const char *which)
{
	static const int ks[] = {32, 96, 320}, ms[] = {1, 6, 13};
	static uint8_t wb[MAXM * MAXK * 34 / 32];
	static float x[MAXN * MAXK], want[MAXN * MAXM], got[MAXN * MAXM];
	static char scratch[MAXN * (MAXK / 32) * sizeof(pm_act32)];
	int cases = 0;
	for (size_t t = 0; t < N_TYPES; t++) {
		pm_qmm port = pm_qmm_32_isa(types[t], PM_ISA_PORTABLE);
		pm_qmm q = pm_qmm_32_neon(types[t], dot);
		CHECK(port.fn && q.fn && q.block == 32, "%s type %u: no kernel", which, types[t]);
		if (!port.fn || !q.fn)
			continue;
		for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++)
			for (size_t mi = 0; mi < sizeof ms / sizeof *ms; mi++)
				for (int it = 0; it < 3; it++) {
					int K = ks[ki], M = ms[mi];
					if (it == 2 && K < 96)
						continue;
					random_rows(wb, types[t], M, K);
					pm_weight w = {wb, types[t], M, K, pm_type_row_bytes(types[t], K), PM_LAYOUT_ROWS, 0};
					fill_x(x, MAXN, K, it);
					cases += check_batches(which, port, q, &w, x, MAXN, it, want, got, sizeof got, scratch);
					/* splits inside and across the 4-row tiles */
					int cuts[][4] = {{0, 1, 2, M}, {0, M / 2, M / 2 + 1, M}, {0, 3, 5, M}};
					for (int c = 0; c < 3; c++) {
						memset(got, 0xff, sizeof got);
						for (int p = 0; p < 3; p++) {
							int a = cuts[c][p] < M ? cuts[c][p] : M;
							int b = cuts[c][p + 1] < M ? cuts[c][p + 1] : M;
							if (a < b)
								pm_matmul_q(q, got, M, x, K, &w, MAXN, a, b, scratch);
						}
						CHECK(memcmp(got, want, (size_t)MAXN * M * sizeof(float)) == 0,
						      "%s type %u k %d m %d: split %d changed a result", which, types[t],
						      K, M, c);
						cases++;
					}
				}
	}
	return cases;
}

/* float_rows: rows of an F32, F16 or BF16 weight: finite values of
 * either sign, some zeros and negative zeros. */
static void float_rows(uint8_t *b, uint32_t type, int rows, int cols)
{
	for (int i = 0; i < rows * cols; i++) {
		float v = (float)((int)(rnd() % 2001) - 1000) / 700.0f;
		if (rnd() % 16 == 0)
			v = rnd() & 1 ? -0.0f : 0.0f;
		uint32_t u;
		memcpy(&u, &v, 4);
		if (type == PM_TYPE_F32) {
			memcpy(b + 4 * (size_t)i, &v, 4);
		} else if (type == PM_TYPE_F16) {
			put_f16(b + 2 * (size_t)i);
			if (v == 0.0f) /* +-0 */
				b[2 * (size_t)i] = 0, b[2 * (size_t)i + 1] = u >> 31 ? 0x80 : 0;
		} else {
			uint16_t h = (uint16_t)(u >> 16);
			memcpy(b + 2 * (size_t)i, &h, 2);
		}
	}
}

/* check_float: the NEON set's matmul and its F32/F16/BF16 tiles
 * (pm_matmul_w on the set) bitwise the portable set's, over k with every
 * tail length, m ragged against the tile, n = 1..9 and splits; F32 rows
 * also at an odd address (the tiles load bytes). Returns the cases. */
static int check_float(const pm_kernels *neon)
{
	enum { FM = 13, FK = 133, FN = 9 };
	static const int ks[] = {1, 5, 8, 13, 64, 100, FK}, ms[] = {1, 6, FM};
	static const uint32_t ftypes[] = {PM_TYPE_F32, PM_TYPE_F16, PM_TYPE_BF16};
	static float wbuf[FM * FK + 2]; /* floats: row 0 aligned for matmul */
	uint8_t *wb = (uint8_t *)wbuf;
	static float x[FN * FK], want[FN * FM], got[FN * FM], scratch[4 * FK];
	int cases = 0;
	for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++)
		for (size_t mi = 0; mi < sizeof ms / sizeof *ms; mi++) {
			int K = ks[ki], M = ms[mi];
			float_rows(wb, PM_TYPE_F32, M, K);
			float_rows((uint8_t *)x, PM_TYPE_F32, FN, K);
			const float *wf = (const float *)wb;
			pm_kernels_portable.matmul(want, M, x, wf, FN, K, 0, M);
			for (int n = 1; n <= FN; n++) {
				memset(got, 0xff, sizeof got);
				neon->matmul(got, M, x, wf, n, K, 0, M);
				CHECK(memcmp(got, want, (size_t)n * M * sizeof(float)) == 0,
				      "neon matmul k %d m %d: batch of %d != portable", K, M, n);
				cases++;
			}
			memset(got, 0xff, sizeof got);
			neon->matmul(got, M, x, wf, FN, K, 0, M / 2 + 1);
			neon->matmul(got, M, x, wf, FN, K, M / 2 + 1, M);
			CHECK(memcmp(got, want, (size_t)FN * M * sizeof(float)) == 0, "neon matmul k %d m %d: a split", K,
			      M);
			for (size_t t = 0; t < sizeof ftypes / sizeof *ftypes; t++)
				for (int off = 0; off < (ftypes[t] == PM_TYPE_F32 ? 2 : 1); off++) {
					uint32_t ty = ftypes[t];
					CHECK(pm_matmul_float_neon(ty) != NULL, "no neon tile for type %u", ty);
					uint8_t *rows = wb + off * 3;
					float_rows(rows, ty, M, K);
					pm_weight w = {rows, ty, M, K, pm_type_row_bytes(ty, K), PM_LAYOUT_ROWS, 0};
					pm_dequant_fn dq = pm_dequant(ty, 0);
					pm_matmul_w(&pm_kernels_portable, dq, want, M, x, &w, FN, 0, M, scratch);
					for (int n = 1; n <= FN; n++) {
						memset(got, 0xff, sizeof got);
						pm_matmul_w(neon, dq, got, M, x, &w, n, 0, M, scratch);
						CHECK(memcmp(got, want, (size_t)n * M * sizeof(float)) == 0,
						      "neon tile type %u k %d m %d off %d: batch of %d != portable", ty,
						      K, M, off, n);
						cases++;
					}
					memset(got, 0xff, sizeof got);
					pm_matmul_w(neon, dq, got, M, x, &w, FN, 0, 3 < M ? 3 : M, scratch);
					if (M > 3)
						pm_matmul_w(neon, dq, got, M, x, &w, FN, 3, M, scratch);
					CHECK(memcmp(got, want, (size_t)FN * M * sizeof(float)) == 0,
					      "neon tile type %u k %d m %d: a split", ty, K, M);
				}
		}
	return cases;
}
/* score: the logits of 24 fixed tokens on the model at path with kernel
 * (PM_KERNEL_*), into got (24 * vocab floats, vocab in *v); 0 on failure. */
static float *score(const char *path, int32_t kernel, int *v, const char **name)
{
	pm_engine_config c;
	pm_engine_config_default(&c);
	c.kernel = kernel;
	c.threads = 2;
	c.prefill_chunk = 9;
	pm_engine *e = NULL;
	char err[512] = "";
	int rc = pm_engine_open(path, &c, &e, err, sizeof err);
	CHECK(rc == PM_OK && e, "open %s (kernel %d): %d %s", path, (int)kernel, rc, err);
	if (!e)
		return NULL;
	const pm_model *m = NULL;
	pm_engine_model(e, &m);
	pm_engine_kernel_name(e, name);
	*v = m->vocab;
	int32_t tok[24];
	for (int i = 0; i < 24; i++)
		tok[i] = (int32_t)((i * 41 + 5) % 256);
	float *out = malloc(sizeof(float) * 24 * (size_t)m->vocab);
	rc = out ? pm_engine_score(e, tok, 24, out) : PM_ERR_ARG;
	CHECK(rc == PM_OK, "%s score: %s", path, pm_engine_errmsg(e));
	pm_engine_free(e);
	if (rc != PM_OK)
		free(out), out = NULL;
	return out;
}

/* check_models: every typed tiny model (run.sh's PICOMETER_TYPED_MODELS)
 * scores bitwise the same logits with kernel neon as with portable, and
 * auto picks neon. Returns the models compared. */
static int check_models(void)
{
	const char *dir = getenv("PICOMETER_TYPED_MODELS");
	if (!dir || !*dir) {
		CHECK(0, "PICOMETER_TYPED_MODELS is not set (run.sh and run-arm64.sh set it)");
		return 0;
	}
	static const char *const types[] = {"f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q4_k_m", "q5_k_m", "q6_k"};
	int done = 0;
	for (size_t t = 0; t < sizeof types / sizeof *types; t++) {
		char path[1024];
		snprintf(path, sizeof path, "%s/tiny-k-%s.gguf", dir, types[t]);
		int vp = 0, vn = 0;
		const char *np = "?", *nn = "?", *na = "?";
		float *p = score(path, PM_KERNEL_PORTABLE, &vp, &np), *q = score(path, PM_KERNEL_NEON, &vn, &nn);
		float *a = score(path, PM_KERNEL_AUTO, &vn, &na);
		CHECK(strcmp(np, "portable") == 0 && strcmp(nn, "neon") == 0 && strcmp(na, "neon") == 0,
		      "%s: kernels %s, %s, auto %s", types[t], np, nn, na);
		if (p && q && a) {
			CHECK(memcmp(p, q, sizeof(float) * 24 * (size_t)vp) == 0, "%s: neon logits != portable",
			      types[t]);
			CHECK(memcmp(q, a, sizeof(float) * 24 * (size_t)vp) == 0, "%s: auto logits != neon", types[t]);
			done++;
		}
		free(p), free(q), free(a);
	}
	return done;
}
#endif

int main(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	CHECK(strcmp(pm_isa_name(PM_ISA_NEON), "neon") == 0, "pm_isa_name(PM_ISA_NEON) = %s",
	      pm_isa_name(PM_ISA_NEON));
#if defined(__aarch64__)
	CHECK(pm_cpu_has_isa(PM_ISA_NEON), "an AArch64 build does not run neon");
	CHECK(pm_kernels_isa(PM_ISA_NEON) != NULL, "no float kernels for neon");
	for (size_t t = 0; t < N_TYPES; t++) {
		pm_qmm a = pm_qmm_32_isa(types[t], PM_ISA_NEON), b = pm_qmm_32_neon(types[t], -1);
		CHECK(a.fn && a.fn == b.fn, "type %u: pm_qmm_32_isa(neon) is not the best neon kernel", types[t]);
	}
	CHECK(pm_qmm_32_isa(PM_TYPE_Q4_K, PM_ISA_NEON).fn == NULL, "qmm_32 claims Q4_K");
	printf("neon integer kernels (vmull_s8) == portable: %d cases\n", check_kernel(0, "mull"));
	if (pm_cpu_has_neon_dot())
		printf("neon integer kernels (vdotq_s32) == portable: %d cases\n",
		       check_kernel(1, "dotprod"));
	else
		printf("neon integer kernels (vdotq_s32): not run, this CPU has no dot-product extension\n");
	printf("neon K-quant kernels == portable: %d cases\n", check_k());
	const pm_kernels *nk = pm_kernels_isa(PM_ISA_NEON);
	CHECK(nk && nk != &pm_kernels_portable && strcmp(nk->name, "neon") == 0, "the neon float set");
	if (nk)
		printf("neon float matmul and F32/F16/BF16 tiles == portable: %d cases\n", check_float(nk));
	printf("engine logits, kernel neon == portable, bitwise: %d typed models\n", check_models());
#else
	CHECK(!pm_cpu_has_isa(PM_ISA_NEON), "a non-AArch64 build claims neon");
	CHECK(pm_kernels_isa(PM_ISA_NEON) == NULL, "a non-AArch64 build has neon float kernels");
	CHECK(!pm_cpu_has_neon_dot(), "a non-AArch64 build claims the dot-product extension");
	CHECK(!pm_matmul_float_neon(PM_TYPE_F16), "a non-AArch64 build has a neon F16 tile");
	CHECK(!pm_qmm_k_neon(PM_TYPE_Q4_K).fn && !pm_qmm_isa(PM_TYPE_Q4_K, PM_ISA_NEON).fn,
	      "a non-AArch64 build has a neon K-quant kernel");
	for (size_t t = 0; t < N_TYPES; t++) {
		CHECK(pm_qmm_32_isa(types[t], PM_ISA_NEON).fn == NULL, "type %u: a neon kernel on x86", types[t]);
		CHECK(pm_qmm_32_neon(types[t], 0).fn == NULL, "type %u: a neon kernel on x86", types[t]);
	}
	CHECK(!pm_kernel_runs(PM_KERNEL_NEON), "pm_kernel_runs(neon) on a non-AArch64 build");
	const char *tiny = getenv("PICOMETER_TINY_MODEL");
	CHECK(tiny && *tiny, "PICOMETER_TINY_MODEL is not set (run.sh sets it)");
	if (tiny && *tiny) {
		pm_engine_config c;
		pm_engine_config_default(&c);
		c.kernel = PM_KERNEL_NEON;
		pm_engine *e = NULL;
		char err[512] = "";
		int rc = pm_engine_open(tiny, &c, &e, err, sizeof err);
		CHECK(rc == PM_ERR_ARG && !e && strstr(err, "kernel: \"neon\" requested but this CPU cannot run it"),
		      "kernel neon on this build: rc %d, error %s", rc, err);
		pm_engine_free(e);
	}
	printf("neon: not this build's path (not AArch64): checked it is refused\n");
#endif
	if (fails) {
		fprintf(stderr, "test_neon: %d failures\n", fails);
		return 1;
	}
	printf("ok\n");
	return 0;
}
