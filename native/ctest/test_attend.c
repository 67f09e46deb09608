/*
 * test_attend.c: the attention kernels (kernels.h pm_attend_fn: portable,
 * and the AVX2 copies for 16 and, when the CPU has AVX-512VL, 32 vector
 * registers) against a plain softmax(q k^T * scale) v in double precision,
 * over head dims that are and are not multiples of 8, every query-head
 * group size the tiles treat differently (1..9), block sizes 5 and 16 and
 * contexts that cross them.
 * Besides the tolerance, the invariances the engine relies on, bitwise:
 * a head's result does not depend on the other heads of its group (g = 1
 * gives the same bits), nor on where the slot's blocks lie in the cache,
 * scratch contents, cache rows past n (poisoned with NaN) or the next call
 * (pm_attend_next) a kernel may prefetch; the two AVX2 copies give the same
 * bits; and a call of nr rows (a prefill chunk: row j sees n + j
 * positions, the rows ldq floats apart) gives each row the bits of a
 * one-row call, writing nothing between the rows.
 * Buffers are allocated at their exact sizes, so ASan sees any overrun.
 */
#define CTEST_SEED 0x6a09e667f3bcc909ull
#include "ctest.h"
#include "kernels.h"

#include <math.h>
#include <stdlib.h>

enum { KVH = 2, MAXBLK = 40 };

static float frnd(float a)
{
	return ((float)(rnd() % 20001) / 10000.0f - 1.0f) * a;
}

/* cache: KVH heads per position, blocks laid out by table; logical rows
 * k[t][hd] / v[t][hd] of head 1 (head 0 is filler) */
typedef struct {
	int hd, bs, n;
	size_t stride;
	float *kc, *vc;
	int32_t table[MAXBLK];
} cache;

static void build(cache *c, const float *k, const float *v, int hd, int bs, int n, int perm)
{
	c->hd = hd, c->bs = bs, c->n = n, c->stride = (size_t)KVH * hd;
	int nb = (n + bs - 1) / bs;
	size_t rows = (size_t)MAXBLK * bs;
	c->kc = malloc(sizeof(float) * rows * c->stride);
	c->vc = malloc(sizeof(float) * rows * c->stride);
	for (size_t i = 0; i < rows * c->stride; i++)
		c->kc[i] = c->vc[i] = NAN; /* rows past n and head 0 must not be read into a result */
	for (int b = 0; b < nb; b++)
		c->table[b] = (int32_t)((b * (perm ? 7 : 13) + (perm ? 3 : 1)) % MAXBLK);
	for (int t = 0; t < n; t++) {
		size_t r = ((size_t)c->table[t / bs] * bs + t % bs) * c->stride + hd;
		memcpy(c->kc + r, k + (size_t)t * hd, sizeof(float) * hd);
		memcpy(c->vc + r, v + (size_t)t * hd, sizeof(float) * hd);
	}
}

typedef struct {
	const char *name;
	pm_attend_fn attend;
} kernel;

/* run: rows j < nr (q and out ldq floats apart), row j seeing n + j
 * positions of c (which holds n + nr - 1); scratch at its exact size,
 * poisoned */
static void run_rows(const kernel *kn, float *out, const float *q, size_t ldq, int nr, int g,
		     int n, const cache *c, float scale, const cache *next)
{
	pm_attend_next nx = {0};
	if (next)
		nx = (pm_attend_next){next->kc + next->hd, next->vc + next->hd, next->table, next->n};
	size_t ns = (size_t)nr * g * (n + nr - 1);
	float *scr = malloc(sizeof(float) * ns);
	for (size_t i = 0; i < ns; i++)
		scr[i] = NAN;
	kn->attend(out, q, ldq, nr, g, c->hd, c->kc + c->hd, c->vc + c->hd, c->table, c->bs, c->stride,
		   n, scale, scr, next ? &nx : NULL);
	free(scr);
}

static void run(const kernel *kn, float *out, const float *q, int g, const cache *c, float scale,
		const cache *next)
{
	run_rows(kn, out, q, 0, 1, g, c->n, c, scale, next);
}

/* reference: double precision, head by head */
static void reference(double *out, const float *q, int g, int hd, const float *k, const float *v,
		      int n, float scale)
{
	double *s = malloc(sizeof(double) * n);
	for (int h = 0; h < g; h++) {
		double mx = -INFINITY, sum = 0;
		for (int t = 0; t < n; t++) {
			double d = 0;
			for (int i = 0; i < hd; i++)
				d += (double)q[h * hd + i] * k[(size_t)t * hd + i];
			s[t] = d * scale;
			mx = s[t] > mx ? s[t] : mx;
		}
		for (int t = 0; t < n; t++)
			sum += s[t] = exp(s[t] - mx);
		for (int i = 0; i < hd; i++) {
			double o = 0;
			for (int t = 0; t < n; t++)
				o += s[t] * v[(size_t)t * hd + i];
			out[h * hd + i] = o / sum;
		}
	}
	free(s);
}

/*
 * test_rows: calls of nr rows against one-row calls of the same kernel,
 * bitwise, for ragged lengths n..n+nr-1 across block edges, rows ldq
 * floats apart (the gaps, poisoned, must stay untouched), scattered blocks.
 */
static void test_rows(const kernel *kn)
{
	static const int hds[] = {3, 8, 17, 64};
	static const int gs[] = {1, 2, 3, 4, 5, 7};
	static const int nrs[] = {2, 3, 4, 5, PM_ATTEND_MAX_ROWS};
	static const int ns[] = {1, 2, 4, 5, 6, 15, 16, 33, 61};
	int cases = 0;
	for (size_t hi = 0; hi < sizeof hds / sizeof hds[0]; hi++)
		for (size_t gi = 0; gi < sizeof gs / sizeof gs[0]; gi++)
			for (size_t ri = 0; ri < sizeof nrs / sizeof nrs[0]; ri++)
				for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
					int hd = hds[hi], g = gs[gi], nr = nrs[ri], n = ns[ni];
					int bs = ni & 1 ? 5 : 16, nt = n + nr - 1;
					size_t ldq = (size_t)g * hd + 5; /* a gap between rows */
					size_t len = ldq * nr;
					float scale = 1.0f / sqrtf((float)hd);
					float *q = malloc(sizeof(float) * len), *out = malloc(sizeof(float) * len);
					float *one = malloc(sizeof(float) * g * hd);
					float *k = malloc(sizeof(float) * nt * hd), *v = malloc(sizeof(float) * nt * hd);
					for (size_t i = 0; i < len; i++)
						q[i] = frnd(1), out[i] = -7.0f;
					for (int i = 0; i < nt * hd; i++)
						k[i] = frnd(2), v[i] = frnd(1);
					cache c;
					build(&c, k, v, hd, bs, nt, (int)(ni & 1));
					run_rows(kn, out, q, ldq, nr, g, n, &c, scale, NULL);
					for (int j = 0; j < nr; j++) {
						run_rows(kn, one, q + (size_t)j * ldq, 0, 1, g, n + j, &c, scale,
							 NULL);
						CHECK(memcmp(one, out + (size_t)j * ldq, sizeof(float) * g * hd) == 0,
						      "%s hd=%d g=%d nr=%d n=%d bs=%d: row %d differs from a "
						      "one-row call",
						      kn->name, hd, g, nr, n, bs, j);
						for (size_t i = (size_t)g * hd; i < ldq; i++)
							CHECK(out[(size_t)j * ldq + i] == -7.0f,
							      "%s hd=%d g=%d nr=%d n=%d: wrote between rows", kn->name,
							      hd, g, nr, n);
					}
					cases++;
					free(c.kc), free(c.vc);
					free(q), free(out), free(one), free(k), free(v);
				}
	printf("  %s: %d multi-row cases\n", kn->name, cases);
}

/* test_same: two kernels give the same bits (the AVX2 copies) */
static void test_same(const kernel *a, const kernel *b)
{
	static const int hds[] = {5, 8, 64, 72};
	int cases = 0;
	for (size_t hi = 0; hi < sizeof hds / sizeof hds[0]; hi++)
		for (int g = 1; g <= 9; g++)
			for (int nr = 1; nr <= 4; nr++)
				for (int n = 1; n <= 40; n += 3) {
					int hd = hds[hi], nt = n + nr - 1;
					size_t len = (size_t)nr * g * hd;
					float *q = malloc(sizeof(float) * len), *o1 = malloc(sizeof(float) * len);
					float *o2 = malloc(sizeof(float) * len);
					float *k = malloc(sizeof(float) * nt * hd), *v = malloc(sizeof(float) * nt * hd);
					for (size_t i = 0; i < len; i++)
						q[i] = frnd(1);
					for (int i = 0; i < nt * hd; i++)
						k[i] = frnd(2), v[i] = frnd(1);
					cache c;
					build(&c, k, v, hd, 5, nt, 1);
					run_rows(a, o1, q, (size_t)g * hd, nr, g, n, &c, 0.3f, NULL);
					run_rows(b, o2, q, (size_t)g * hd, nr, g, n, &c, 0.3f, &c);
					CHECK(memcmp(o1, o2, sizeof(float) * len) == 0,
					      "%s vs %s hd=%d g=%d nr=%d n=%d: results differ", a->name, b->name,
					      hd, g, nr, n);
					cases++;
					free(c.kc), free(c.vc), free(q), free(o1), free(o2), free(k), free(v);
				}
	printf("  %s = %s: %d cases\n", a->name, b->name, cases);
}

static void test_kernel(const kernel *kn)
{
	static const int hds[] = {1, 3, 8, 12, 17, 24, 33, 64, 72, 128};
	static const int gs[] = {1, 2, 3, 4, 5, 7, 9};
	static const int ns[] = {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 33, 64, 100, 161};
	static const int bss[] = {5, 16};
	int cases = 0;
	double worst = 0;
	for (size_t hi = 0; hi < sizeof hds / sizeof hds[0]; hi++)
		for (size_t gi = 0; gi < sizeof gs / sizeof gs[0]; gi++)
			for (size_t bi = 0; bi < sizeof bss / sizeof bss[0]; bi++)
				for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
					int hd = hds[hi], g = gs[gi], bs = bss[bi], n = ns[ni];
					if ((n + bs - 1) / bs > MAXBLK)
						continue;
					/* keys scaled up for some cases: peaked softmax */
					float ka = (ni & 1) ? 3.0f : 1.0f, scale = 1.0f / sqrtf((float)hd);
					float *q = malloc(sizeof(float) * g * hd);
					float *k = malloc(sizeof(float) * n * hd), *v = malloc(sizeof(float) * n * hd);
					float *out = malloc(sizeof(float) * g * hd), *o2 = malloc(sizeof(float) * g * hd);
					float *one = malloc(sizeof(float) * hd);
					double *ref = malloc(sizeof(double) * g * hd);
					for (int i = 0; i < g * hd; i++)
						q[i] = frnd(1);
					for (int i = 0; i < n * hd; i++)
						k[i] = frnd(ka), v[i] = frnd(1);
					cache c, c2;
					build(&c, k, v, hd, bs, n, 0);
					build(&c2, k, v, hd, bs, n, 1);
					run(kn, out, q, g, &c, scale, NULL);
					reference(ref, q, g, hd, k, v, n, scale);
					for (int i = 0; i < g * hd; i++) {
						/* |v| <= 1: an absolute bound is a relative one */
						double d = fabs(out[i] - ref[i]);
						worst = d > worst ? d : worst;
						CHECK(d <= 1e-6, "%s hd=%d g=%d bs=%d n=%d out[%d]=%.9g want %.9g",
						      kn->name, hd, g, bs, n, i, out[i], ref[i]);
						if (!(d <= 1e-6))
							break;
					}
					run(kn, o2, q, g, &c2, scale, NULL);
					CHECK(memcmp(out, o2, sizeof(float) * g * hd) == 0,
					      "%s hd=%d g=%d n=%d: block placement changed a result", kn->name, hd,
					      g, n);
					run(kn, o2, q, g, &c, scale, &c2); /* a next call to prefetch */
					CHECK(memcmp(out, o2, sizeof(float) * g * hd) == 0,
					      "%s hd=%d g=%d n=%d: the next call changed a result", kn->name, hd,
					      g, n);
					for (int h = 0; h < g; h++) {
						run(kn, one, q + (size_t)h * hd, 1, &c, scale, NULL);
						CHECK(memcmp(one, out + (size_t)h * hd, sizeof(float) * hd) == 0,
						      "%s hd=%d g=%d n=%d: head %d alone differs", kn->name, hd, g,
						      n, h);
					}
					cases++;
					free(c.kc), free(c.vc), free(c2.kc), free(c2.vc);
					free(q), free(k), free(v), free(out), free(o2), free(one), free(ref);
				}
	printf("  %s: %d cases, worst |out - ref| %.3g\n", kn->name, cases, worst);
}

int main(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	printf("attend vs a double-precision softmax(qk)v\n");
	kernel ks[3] = {{"portable", pm_kernels_portable.attend}};
	int nk = 1;
	if (pm_attend_avx2(16))
		ks[nk++] = (kernel){"avx2-16", pm_attend_avx2(16)};
	else
		printf("  (no AVX2+FMA: portable only)\n");
	if (pm_attend_avx2(32))
		ks[nk++] = (kernel){"avx2-32", pm_attend_avx2(32)};
	else
		printf("  (no AVX-512VL: the 32-register copy is not run)\n");
	if (pm_kernels_avx2())
		CHECK(pm_kernels_avx2()->attend == pm_attend_avx2(0), "the AVX2 set's attend is not "
		      "pm_attend_avx2(0)");
	for (int i = 0; i < nk; i++) {
		test_kernel(&ks[i]);
		test_rows(&ks[i]);
	}
	if (nk == 3)
		test_same(&ks[1], &ks[2]);
	if (fails) {
		fprintf(stderr, "%d failures\n", fails);
		return 1;
	}
	printf("ok\n");
	return 0;
}
