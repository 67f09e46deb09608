/*
 * test_prefix_engine.c: prefix caching through the whole engine, on the
 * tiny GGUF model (PICOMETER_TINY_MODEL). Each request is first run alone
 * on a cold engine with the cache off; then the same requests, built on a
 * few shared stems, run on caching engines: one at a time (batch 1), in
 * batches with speculation, and under memory pressure (far fewer KV blocks
 * than the requests need: evictions and preemptions, both recomputing
 * from the cache). Every request's tokens and log-probabilities must equal
 * its cold run bitwise, the cache must have hit, each request's
 * cached_tokens must add up to the engine's hits, and no block may stay
 * held once all finished.
 */
#define CTEST_SEED 0x9b05688c2b3e6c1full
#include "ctest.h"
#include "engine.h"

#include <stdlib.h>

enum { N = 16, MAXP = 160, MAXOUT = 64 };

typedef struct {
	int32_t prompt[MAXP];
	int n_prompt;
	pm_params p;
	int32_t out[MAXOUT];
	float lp[MAXOUT];
	int n_out, done;
	uint64_t id;
	pm_request_stats st;
} job;

/* make_job: request i is stem i%3 (64..100 tokens, shared) and a tail of
 * its own; every fourth asks for log-probabilities, every fifth penalizes. */
static void make_job(job *j, int i)
{
	memset(j, 0, sizeof *j);
	int stem = i % 3, n_stem = 64 + 18 * stem, n_tail = 3 + (i * 5) % 17;
	j->n_prompt = n_stem + n_tail;
	for (int k = 0; k < j->n_prompt; k++)
		j->prompt[k] = k < n_stem ? (int32_t)((k * 31 + stem * 101) % 256)
					  : (int32_t)((k * 7 + i * 13) % 256);
	j->p.max_tokens = 24 + (i * 11) % 40;
	j->p.seed = (uint64_t)i + 1;
	j->p.logprobs = i % 4 == 0;
	j->p.repetition_penalty = i % 5 == 0 ? 1.3f : 0;
	j->p.frequency_penalty = i % 5 == 0 ? 0.5f : 0;
}

/* Runs jobs[0..n) to completion, submitting job i once i*stagger steps ran. */
static void run_jobs(pm_engine *e, job *jobs, int n, int stagger)
{
	int submitted = 0, done = 0, steps = 0;
	while (done < n) {
		while (submitted < n && submitted * stagger <= steps) {
			job *j = &jobs[submitted];
			int rc = pm_engine_submit(e, j->prompt, j->n_prompt, &j->p, &j->id);
			CHECK(rc == PM_OK, "submit %d: %s", submitted, pm_engine_errmsg(e));
			if (rc)
				return;
			submitted++;
		}
		const pm_output *o;
		int32_t no;
		if (pm_engine_step(e, &o, &no) != PM_OK || ++steps > 100000) {
			CHECK(0, "step failed or made no progress: %s", pm_engine_errmsg(e));
			return;
		}
		for (int i = 0; i < no; i++) {
			job *j = NULL;
			for (int k = 0; k < submitted; k++)
				if (jobs[k].id == o[i].id)
					j = &jobs[k];
			if (!j || j->done) {
				CHECK(0, "output for unknown or finished id");
				return;
			}
			for (int t = 0; t < o[i].n_tokens && j->n_out < MAXOUT; t++) {
				j->lp[j->n_out] = o[i].logprobs ? o[i].logprobs[t] : 0;
				j->out[j->n_out++] = o[i].tokens[t];
			}
			if (o[i].finish) {
				j->done = 1;
				j->st = *o[i].stats;
				done++;
			}
		}
	}
}

static pm_model model;
static job cold[N];

static pm_engine *engine(int bmax, int spec_k, int kv_blocks, int chunk, int off)
{
	pm_engine_config c;
	pm_engine_config_default(&c);
	const char *t = getenv("PICOMETER_TEST_THREADS");
	c.threads = t && atoi(t) >= 1 ? atoi(t) : 1;
	c.b_max = bmax;
	c.spec_k = spec_k;
	c.block_size = 8;
	c.kv_blocks = kv_blocks;
	c.prefill_chunk = chunk;
	c.no_prefix_cache = off;
	pm_engine *e = NULL;
	char err[256] = "";
	int rc = pm_engine_create(&model, &c, &e, err, sizeof err);
	CHECK(rc == PM_OK && e, "create: %s", err);
	return e;
}

static void run_cold(void)
{
	for (int i = 0; i < N; i++) {
		pm_engine *e = engine(1, 0, 0, 64, 1);
		if (!e)
			return;
		make_job(&cold[i], i);
		run_jobs(e, &cold[i], 1, 0);
		CHECK(cold[i].st.cached_tokens == 0, "the cache is off but %d tokens were cached",
		      cold[i].st.cached_tokens);
		pm_engine_free(e);
	}
}

/* cached runs the jobs in waves of `wave` on one caching engine and holds
 * them to the cold runs. */
static void cached(const char *name, int bmax, int spec_k, int kv_blocks, int chunk, int wave,
		   int want_evictions)
{
	pm_engine *e = engine(bmax, spec_k, kv_blocks, chunk, 0);
	if (!e)
		return;
	job jobs[N];
	for (int i = 0; i < N; i++)
		make_job(&jobs[i], i);
	for (int i = 0; i < N; i += wave)
		run_jobs(e, jobs + i, i + wave <= N ? wave : N - i, 1);
	int64_t cached_sum = 0, preempted = 0;
	for (int i = 0; i < N; i++) {
		const job *a = &jobs[i], *b = &cold[i];
		CHECK(a->n_out == b->n_out && memcmp(a->out, b->out, sizeof(int32_t) * b->n_out) == 0 &&
			      memcmp(a->lp, b->lp, sizeof(float) * b->n_out) == 0,
		      "%s: request %d differs from its cold run (%d vs %d tokens, %d cached)", name,
		      i, a->n_out, b->n_out, a->st.cached_tokens);
		CHECK(a->st.prompt_tokens == a->n_prompt && a->st.cached_tokens < a->n_prompt &&
			      a->st.cached_tokens % 8 == 0,
		      "%s: request %d cached %d of %d prompt tokens", name, i, a->st.cached_tokens,
		      a->n_prompt);
		cached_sum += a->st.cached_tokens;
		preempted += a->st.preemptions;
	}
	const pm_engine_metrics *m = NULL;
	pm_engine_get_metrics(e, &m);
	CHECK(cached_sum > 0 && m->prefix_hits >= cached_sum && m->prefix_queries > m->prefix_hits,
	      "%s: hits %lld (requests' cached tokens %lld) of %lld queried", name,
	      (long long)m->prefix_hits, (long long)cached_sum, (long long)m->prefix_queries);
	if (preempted == 0)
		CHECK(m->prefix_hits == cached_sum, "%s: engine hits %lld != requests' %lld", name,
		      (long long)m->prefix_hits, (long long)cached_sum);
	CHECK(!want_evictions || (m->prefix_evictions > 0 && m->preemptions > 0),
	      "%s: no eviction (%lld) or preemption (%lld) under pressure", name,
	      (long long)m->prefix_evictions, (long long)m->preemptions);
	CHECK(m->kv_blocks_used == 0 && m->kv_blocks_cached > 0 && m->running == 0,
	      "%s: after all finished %d blocks held, %d cached", name, m->kv_blocks_used,
	      m->kv_blocks_cached);
	printf("  %-28s hits %5lld of %5lld tokens, evictions %4lld, preemptions %3lld\n", name,
	       (long long)m->prefix_hits, (long long)m->prefix_queries,
	       (long long)m->prefix_evictions, (long long)m->preemptions);
	pm_engine_free(e);
}

int main(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	const char *path = getenv("PICOMETER_TINY_MODEL");
	char err[512] = "";
	if (!path || pm_model_load(path, &model, err, sizeof err) != PM_OK) {
		fprintf(stderr, "FAIL: tiny model %s: %s\n", path ? path : "(PICOMETER_TINY_MODEL unset)",
			err);
		return 1;
	}
	printf("prefix cache through the engine: cached == cold, bitwise\n");
	run_cold();
	cached("batch 1", 1, 0, 256, 64, 1, 0);
	cached("batch 1, chunk 5", 1, 0, 256, 5, 1, 0);
	cached("batch 8, spec 4", 8, 4, 0, 16, 8, 0);
	cached("batch 4, spec 2, waves of 4", 4, 2, 0, 16, 4, 0);
	/* one request needs up to 32 blocks of 8; 40 hold barely one */
	cached("pressure: 40 blocks, batch 4", 4, 2, 40, 16, 8, 1);
	cached("pressure: 34 blocks, batch 8", 8, 0, 34, 7, 16, 1);
	pm_model_free(&model);
	if (fails) {
		fprintf(stderr, "%d failures\n", fails);
		return 1;
	}
	printf("ok\n");
	return 0;
}
