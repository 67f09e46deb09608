/*
 * test_sample.c: sample.c in isolation, on a hand-built engine (only the
 * sampler's scratch) and request: greedy picks the first largest logit
 * and never a NaN; top_k = 1 and a tiny top_p are greedy at any
 * temperature; a seeded stream repeats and two seeds differ; draws follow
 * softmax(logits / temperature) (cut to top_k, to min_p); the penalties follow
 * vLLM's rules exactly and leave the count scratch zeroed; logprobs are
 * the log-softmax, the top ones sorted with ties by lower id.
 */
#define CTEST_SEED 0x510e527fade682d1ull
#include "ctest.h"
#include "engine_internal.h"

#include <math.h>
#include <stdlib.h>

enum { V = 8 };

static pm_engine *new_sampler(void)
{
	pm_engine *e = calloc(1, sizeof *e);
	e->vocab = V;
	e->cfg.b_max = 1;
	e->sp = calloc(V, sizeof *e->sp);
	e->sidx = calloc(V, sizeof *e->sidx);
	e->pl = calloc(V, sizeof *e->pl);
	e->pcnt = calloc(V, sizeof *e->pcnt);
	e->lp = calloc(PM_MAX_SPEC_K + 1, sizeof *e->lp);
	e->top_id = calloc((PM_MAX_SPEC_K + 1) * PM_MAX_TOP_LOGPROBS, sizeof *e->top_id);
	e->top_lp = calloc((PM_MAX_SPEC_K + 1) * PM_MAX_TOP_LOGPROBS, sizeof *e->top_lp);
	return e;
}

static void free_sampler(pm_engine *e)
{
	free(e->sp);
	free(e->sidx);
	free(e->pl);
	free(e->pcnt);
	free(e->lp);
	free(e->top_id);
	free(e->top_lp);
	free(e);
}

/* new_req: a request whose tokens are prompt[0..np) then out[0..no). */
static void new_req(req *r, int32_t *buf, const int32_t *prompt, int np, const int32_t *out, int no,
		    float temperature, uint64_t seed)
{
	memset(r, 0, sizeof *r);
	r->seq = buf;
	memcpy(buf, prompt, sizeof *buf * (size_t)np);
	if (no > 0)
		memcpy(buf + np, out, sizeof *buf * (size_t)no);
	r->n_seq = np + no;
	r->st.prompt_tokens = np;
	r->st.completion_tokens = no;
	r->p.temperature = temperature;
	r->p.max_tokens = 16;
	sample_seed(r->rng, seed);
}

static void test_greedy(pm_engine *e)
{
	int32_t buf[4], p[1] = {0};
	req r;
	new_req(&r, buf, p, 1, NULL, 0, 0, 1);
	float l[V] = {NAN, 1, 3, 3, -INFINITY, 2, NAN, 0};
	CHECK(sample_at(e, &r, 0, 0, l) == 2, "greedy: want the first of the two largest");
	float m[V] = {NAN, NAN, NAN, NAN, NAN, NAN, NAN, -5};
	CHECK(sample_at(e, &r, 0, 0, m) == 7, "greedy: a NaN won over -5");
	/* top_k = 1, or a top_p that only the best reaches, is greedy at any temperature */
	float n[V] = {0, 0.5f, 4, 1, 3.9f, 0, 0, 0};
	new_req(&r, buf, p, 1, NULL, 0, 5, 7);
	r.p.top_k = 1;
	for (int i = 0; i < 200; i++)
		CHECK(sample_at(e, &r, 0, 0, n) == 2, "top_k 1 drew another token");
	new_req(&r, buf, p, 1, NULL, 0, 1, 7);
	r.p.top_p = 0.01f;
	for (int i = 0; i < 200; i++)
		CHECK(sample_at(e, &r, 0, 0, n) == 2, "top_p 0.01 drew another token");
}

static void test_streams(pm_engine *e)
{
	int32_t b1[4], b2[4], p[1] = {0};
	req r1, r2;
	float l[V] = {1, 1, 1, 1, 1, 1, 1, 1};
	new_req(&r1, b1, p, 1, NULL, 0, 1, 42);
	new_req(&r2, b2, p, 1, NULL, 0, 1, 42);
	int same = 1;
	for (int i = 0; i < 64; i++)
		same &= sample_at(e, &r1, 0, 0, l) == sample_at(e, &r2, 0, 0, l);
	CHECK(same, "one seed gave two streams");
	new_req(&r2, b2, p, 1, NULL, 0, 1, 43);
	new_req(&r1, b1, p, 1, NULL, 0, 1, 42);
	int differ = 0;
	for (int i = 0; i < 64; i++)
		differ += sample_at(e, &r1, 0, 0, l) != sample_at(e, &r2, 0, 0, l);
	CHECK(differ > 20, "seeds 42 and 43 differ at %d of 64 draws", differ);
}

/* Draws follow softmax(l / t): 40000 draws, each frequency within 0.015
 * (over 6 standard deviations) of its probability. */
static void test_distribution(pm_engine *e)
{
	int32_t buf[4], p[1] = {0};
	req r;
	enum { N = 40000 };
	/* probabilities 1/2, 1/4, 1/8, 1/8 at temperature 2 (logits doubled) */
	float l[V] = {2 * logf(0.5f), 2 * logf(0.25f), 2 * logf(0.125f), 2 * logf(0.125f),
		      -INFINITY, -INFINITY, -INFINITY, -INFINITY};
	double want[V] = {0.5, 0.25, 0.125, 0.125};
	int cnt[V] = {0};
	new_req(&r, buf, p, 1, NULL, 0, 2, 99);
	for (int i = 0; i < N; i++)
		cnt[sample_at(e, &r, 0, 0, l)]++;
	for (int i = 0; i < V; i++)
		CHECK(fabs((double)cnt[i] / N - want[i]) < 0.015, "token %d: %d of %d draws, want %.3f",
		      i, cnt[i], N, want[i]);
	/* top_k 2 renormalizes over the two best: 2/3 and 1/3 */
	memset(cnt, 0, sizeof cnt);
	r.p.top_k = 2;
	for (int i = 0; i < N; i++)
		cnt[sample_at(e, &r, 0, 0, l)]++;
	CHECK(cnt[2] + cnt[3] == 0, "top_k 2 drew a third token (%d, %d)", cnt[2], cnt[3]);
	CHECK(fabs((double)cnt[0] / N - 2.0 / 3) < 0.015, "top_k 2: token 0 %d of %d", cnt[0], N);
	/* min_p 0.3 keeps p >= 0.3 * 1/2: the first two, renormalized to 2/3 and 1/3;
	 * min_p 0.25 keeps all four (1/8 >= 0.25 * 1/2) */
	memset(cnt, 0, sizeof cnt);
	r.p.top_k = 0;
	r.p.min_p = 0.3f;
	for (int i = 0; i < N; i++)
		cnt[sample_at(e, &r, 0, 0, l)]++;
	CHECK(cnt[2] + cnt[3] == 0, "min_p 0.3 drew a token below it (%d, %d)", cnt[2], cnt[3]);
	CHECK(fabs((double)cnt[0] / N - 2.0 / 3) < 0.015, "min_p 0.3: token 0 %d of %d", cnt[0], N);
	memset(cnt, 0, sizeof cnt);
	r.p.min_p = 0.25f;
	for (int i = 0; i < N; i++)
		cnt[sample_at(e, &r, 0, 0, l)]++;
	CHECK(fabs((double)cnt[3] / N - 0.125) < 0.015, "min_p 0.25: token 3 %d of %d", cnt[3], N);
	/* with top_p 0.9 after min_p 0.3: top_p cuts within the kept two only */
	memset(cnt, 0, sizeof cnt);
	r.p.min_p = 0.3f;
	r.p.top_p = 0.5f;
	for (int i = 0; i < N; i++)
		cnt[sample_at(e, &r, 0, 0, l)]++;
	CHECK(cnt[0] > N / 2 && cnt[2] + cnt[3] == 0, "min_p 0.3 + top_p 0.5: %d %d %d %d", cnt[0],
	      cnt[1], cnt[2], cnt[3]);
}

static void test_penalties(pm_engine *e)
{
	int32_t buf[16];
	int32_t prompt[3] = {0, 2, 0}, out[3] = {1, 3, 1};
	req r;
	float l[V] = {2, 1.9f, -1, 0.5f, 0.25f, 3, -2, 0};
	new_req(&r, buf, prompt, 3, out, 3, 0, 1);
	r.p.repetition_penalty = 2;
	r.p.frequency_penalty = 0.5f;
	r.p.presence_penalty = 0.25f;
	int32_t tok = sample_at(e, &r, 0, 0, l);
	/* prompt and output tokens 0..3 get the repetition rule (divide a
	 * positive logit, multiply a negative one), output tokens 1 (twice)
	 * and 3 (once) lose count * 0.5 + 0.25; the rest are untouched */
	float want[V] = {1, 1.9f / 2 - 2 * 0.5f - 0.25f, -2, 0.5f / 2 - 0.5f - 0.25f, 0.25f, 3, -2, 0};
	for (int i = 0; i < V; i++)
		CHECK(e->pl[i] == want[i], "penalized logit %d: %g, want %g", i, (double)e->pl[i],
		      (double)want[i]);
	CHECK(tok == 5, "penalized greedy: %d, want 5", (int)tok);
	for (int i = 0; i < V; i++)
		CHECK(e->pcnt[i] == 0, "count scratch %d left at %d", i, (int)e->pcnt[i]);
	/* the repetition penalty turns the winner: 2 / 2 < 1.9 when 5 is out of the way */
	float m[V] = {2, 1.9f, 0, 0, 0, 0, 0, 0};
	new_req(&r, buf, prompt, 1, NULL, 0, 0, 1);
	r.p.repetition_penalty = 2;
	CHECK(sample_at(e, &r, 0, 0, m) == 1, "repetition penalty did not move the argmax");
	r.p.repetition_penalty = 1; /* 1 is off: the logits are used as they are */
	CHECK(sample_at(e, &r, 0, 0, m) == 0, "repetition penalty 1 changed the argmax");
}

static void test_logprobs(pm_engine *e)
{
	int32_t buf[4], p[1] = {0};
	req r;
	float l[V] = {0.5f, 2, -1, 2, 0, 1, -3, 0.25f};
	new_req(&r, buf, p, 1, NULL, 0, 0.5f, 3);
	r.p.logprobs = 1;
	r.p.top_logprobs = 4;
	int j = 2; /* position 2 of slot 0's step */
	int32_t tok = sample_at(e, &r, 0, j, l);
	double sum = 0;
	for (int i = 0; i < V; i++)
		sum += exp((double)l[i] / 0.5);
	double lse = log(sum);
	CHECK(fabs(e->lp[j] - ((double)l[tok] / 0.5 - lse)) < 1e-5, "logprob of %d: %g, want %g",
	      (int)tok, (double)e->lp[j], (double)l[tok] / 0.5 - lse);
	const int32_t *ids = e->top_id + (size_t)j * PM_MAX_TOP_LOGPROBS;
	const float *lps = e->top_lp + (size_t)j * PM_MAX_TOP_LOGPROBS;
	int want[4] = {1, 3, 5, 0}; /* ties (1 and 3) by lower id */
	for (int i = 0; i < 4; i++) {
		CHECK(ids[i] == want[i], "top %d: id %d, want %d", i, (int)ids[i], want[i]);
		CHECK(fabs(lps[i] - ((double)l[want[i]] / 0.5 - lse)) < 1e-5, "top %d: logprob %g", i,
		      (double)lps[i]);
	}
	CHECK(e->lp[0] == 0 && e->lp[1] == 0, "logprobs wrote outside position %d", j);
}

int main(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	printf("sample.c: greedy, streams, distribution, penalties, logprobs\n");
	pm_engine *e = new_sampler();
	test_greedy(e);
	test_streams(e);
	test_distribution(e);
	test_penalties(e);
	test_logprobs(e);
	free_sampler(e);
	if (fails) {
		fprintf(stderr, "%d failures\n", fails);
		return 1;
	}
	printf("ok\n");
	return 0;
}
