/*
 * test_attend.c: the attention kernels (kernels.h attend) against a plain
 * softmax(q k^T * scale) v in double precision, over head dims that are
 * and are not multiples of 8, every query-head group size the tiles treat
 * differently (1..9), block sizes 5 and 16 and contexts that cross them.
 * Besides the tolerance, the invariances the engine relies on, bitwise:
 * a head's result does not depend on the other heads of its group (g = 1
 * gives the same bits), nor on where the slot's blocks lie in the cache,
 * scratch contents, cache rows past n (poisoned with NaN) or the next call
 * (pm_attend_next) a kernel may prefetch.
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

static void run(const pm_kernels *kn, float *out, const float *q, int g, const cache *c,
		float scale, const cache *next)
{
	pm_attend_next nx = {0};
	if (next)
		nx = (pm_attend_next){next->kc + next->hd, next->vc + next->hd, next->table, next->n};
	float *scr = malloc(sizeof(float) * g * c->n);
	for (int i = 0; i < g * c->n; i++)
		scr[i] = NAN;
	kn->attend(out, q, g, c->hd, c->kc + c->hd, c->vc + c->hd, c->table, c->bs, c->stride, c->n,
		   scale, scr, next ? &nx : NULL);
	free(scr);
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

static void test_kernel(const pm_kernels *kn)
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
	test_kernel(&pm_kernels_portable);
	if (pm_kernels_avx2())
		test_kernel(pm_kernels_avx2());
	else
		printf("  (no AVX2+FMA: portable only)\n");
	if (fails) {
		fprintf(stderr, "%d failures\n", fails);
		return 1;
	}
	printf("ok\n");
	return 0;
}
