/*
 * test_shapes.c: the real-model shape features under ASan+UBSan, on the
 * tiny-llama3 / tiny-qwen2 / tiny-qwen3 GGUF models that run.sh writes into
 * PICOMETER_SHAPES_DIR: the loader reads each architecture's features, the
 * engine's scores are finite, and greedy tokens are the same solo and
 * batched (with and without speculation, one or two threads). The Go tests
 * (native/shapes_test.go) check the same models against the reference.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "engine.h"

#include "ctest.h"

enum { N = 7, MAXOUT = 64 };

typedef struct {
	int32_t prompt[64];
	int n_prompt;
	pm_params p;
	int32_t out[MAXOUT];
	int n_out;
	uint64_t id;
	int done;
} job;

static void make_jobs(job *jobs)
{
	for (int i = 0; i < N; i++) {
		job *j = &jobs[i];
		memset(j, 0, sizeof *j);
		j->n_prompt = 4 + (i * 11) % 50;
		for (int k = 0; k < j->n_prompt; k++)
			j->prompt[k] = i % 2 ? (int32_t)("abcabd"[k % 6]) : (int32_t)((k * 31 + i * 17) % 256);
		j->p.max_tokens = 10 + (i * 13) % 40;
	}
}

static void run_jobs(pm_engine *e, job *jobs, int n, int stagger)
{
	int submitted = 0, done = 0, steps = 0;
	while (done < n && steps < 100000) {
		while (submitted < n && submitted * stagger <= steps) {
			int rc = pm_engine_submit(e, jobs[submitted].prompt, jobs[submitted].n_prompt,
						  &jobs[submitted].p, &jobs[submitted].id);
			CHECK(rc == PM_OK, "submit: %s", pm_engine_errmsg(e));
			if (rc)
				return;
			submitted++;
		}
		const pm_output *o;
		int32_t no;
		int rc = pm_engine_step(e, &o, &no);
		CHECK(rc == PM_OK, "step: %s", pm_engine_errmsg(e));
		if (rc)
			return;
		steps++;
		for (int i = 0; i < no; i++)
			for (int k = 0; k < submitted; k++)
				if (jobs[k].id == o[i].id) {
					for (int t = 0; t < o[i].n_tokens && jobs[k].n_out < MAXOUT; t++)
						jobs[k].out[jobs[k].n_out++] = o[i].tokens[t];
					if (o[i].finish) {
						jobs[k].done = 1;
						done++;
					}
				}
	}
	CHECK(done == n, "%d of %d jobs finished", done, n);
}

static pm_engine *open_engine(const char *path, int bmax, int spec_k, int threads)
{
	pm_engine_config c;
	pm_engine_config_default(&c);
	c.b_max = bmax;
	c.spec_k = spec_k;
	c.threads = threads;
	c.prefill_chunk = 16;
	c.ctx = 512;
	pm_engine *e = NULL;
	char err[512] = "";
	int rc = pm_engine_open(path, &c, &e, err, sizeof err);
	CHECK(rc == PM_OK && e, "open %s: %d %s", path, rc, err);
	return e;
}

static void test_shape(const char *dir, const char *name, const char *arch, int rope_type, int bias,
		       int qk_norm, int rope_freqs, int head_dim)
{
	char path[1024];
	snprintf(path, sizeof path, "%s/%s.gguf", dir, name);
	printf("%s\n", name);
	pm_model m;
	char err[512] = "";
	int rc = pm_model_load(path, &m, err, sizeof err);
	CHECK(rc == PM_OK, "load %s: %s", path, err);
	if (rc)
		return;
	CHECK(strcmp(m.arch, arch) == 0 && m.rope_type == rope_type && m.head_dim == head_dim &&
		      !m.layers[1].bq == !bias && !m.layers[1].bv == !bias && !m.layers[1].q_norm == !qk_norm &&
		      !m.layers[0].k_norm == !qk_norm && !m.rope_freqs == !rope_freqs,
	      "%s: arch %s rope %d head_dim %d bias %d qk_norm %d rope_freqs %d", name, m.arch, m.rope_type,
	      m.head_dim, m.layers[1].bq != NULL, m.layers[1].q_norm != NULL, m.rope_freqs != NULL);
	pm_model_free(&m);

	/* scores are finite at every position */
	pm_engine *e = open_engine(path, 1, 0, 1);
	if (!e)
		return;
	const pm_model *em;
	pm_engine_model(e, &em);
	int32_t toks[40];
	for (int i = 0; i < 40; i++)
		toks[i] = (i * 37) % 256;
	float *logits = malloc(sizeof(float) * 40 * (size_t)em->vocab);
	CHECK(pm_engine_score(e, toks, 40, logits) == PM_OK, "score: %s", pm_engine_errmsg(e));
	int finite = 1;
	for (size_t i = 0; i < 40 * (size_t)em->vocab; i++)
		finite &= isfinite(logits[i]) != 0;
	CHECK(finite, "%s: non-finite logits", name);
	free(logits);
	pm_engine_free(e);

	/* solo == batched, with speculation and threads */
	job alone[N];
	make_jobs(alone);
	for (int i = 0; i < N; i++) {
		e = open_engine(path, 1, 0, 1);
		if (!e)
			return;
		run_jobs(e, &alone[i], 1, 0);
		pm_engine_free(e);
	}
	const int cfgs[][3] = {{3, 0, 1}, {3, 4, 1}, {4, 4, 2}};
	for (size_t c = 0; c < sizeof cfgs / sizeof cfgs[0]; c++) {
		job batched[N];
		make_jobs(batched);
		e = open_engine(path, cfgs[c][0], cfgs[c][1], cfgs[c][2]);
		if (!e)
			return;
		run_jobs(e, batched, N, 2);
		pm_engine_free(e);
		for (int i = 0; i < N; i++)
			CHECK(batched[i].n_out == alone[i].n_out &&
				      memcmp(batched[i].out, alone[i].out, sizeof(int32_t) * (size_t)alone[i].n_out) == 0,
			      "%s: b_max %d spec_k %d threads %d: job %d differs from its solo run", name, cfgs[c][0],
			      cfgs[c][1], cfgs[c][2], i);
	}
}

int main(void)
{
	const char *dir = getenv("PICOMETER_SHAPES_DIR");
	if (!dir || !*dir) {
		fprintf(stderr, "PICOMETER_SHAPES_DIR is not set (run.sh sets it)\n");
		return 1;
	}
	test_shape(dir, "tiny-llama3", "llama", PM_ROPE_NORM, 0, 0, 1, 32);
	test_shape(dir, "tiny-qwen2", "qwen2", PM_ROPE_NEOX, 1, 0, 0, 8);
	test_shape(dir, "tiny-qwen3", "qwen3", PM_ROPE_NEOX, 0, 1, 0, 32);
	if (fails) {
		printf("FAIL: %d checks failed\n", fails);
		return 1;
	}
	printf("test_shapes: ok\n");
	return 0;
}
