/*
 * sample.c: choosing each output token from its logits.
 *
 * Contract: sample_at(e, r, sx, j, logits) returns the token at position j
 * of slot sx's step for request r: r's penalties first (repetition, then
 * frequency and presence, in vLLM's order), then greedy (temperature 0:
 * the first index of the largest logit) or a draw from softmax(logits /
 * temperature) cut to top_k and then top_p, with one draw of r's own
 * xoshiro256** stream (seeded by sample_seed from the request's seed) per
 * sampled position, in order, so a seeded request samples the same tokens
 * whatever is batched with it. When r asks for logprobs it also writes the
 * token's log-probability and the top_logprobs most likely tokens' into
 * e->lp / e->top_id / e->top_lp at (sx, j). It uses only e's sampler
 * scratch (e->sp, sidx, pl, pcnt) and allocates nothing. min_p (vLLM,
 * llama.cpp) drops, after temperature and top_k, every token whose
 * probability is below min_p times the most likely one's, before top_p.
 * (The constraint mask will land here.)
 */
#include <math.h>
#include <string.h>

#include "engine_internal.h"

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

void sample_seed(uint64_t s[4], uint64_t seed)
{
	for (int i = 0; i < 4; i++)
		s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

static uint64_t rng_next(uint64_t s[4])
{
	uint64_t out = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return out;
}

/* First index of the largest logit (NaN never wins). */
static int32_t argmax(const float *l, int n)
{
	int32_t best = 0;
	for (int i = 1; i < n; i++)
		if (l[i] > l[best] || (l[best] != l[best] && l[i] == l[i]))
			best = i;
	return best;
}

/* better orders candidates: higher value first, then lower id. */
static int better(const float *v, const int32_t *id, int a, int b)
{
	return v[a] > v[b] || (v[a] == v[b] && id[a] < id[b]);
}

static void swap2(float *v, int32_t *id, int a, int b)
{
	float t = v[a];
	v[a] = v[b];
	v[b] = t;
	int32_t u = id[a];
	id[a] = id[b];
	id[b] = u;
}

static void sift(float *v, int32_t *id, int i, int n)
{
	for (;;) {
		int c = 2 * i + 1;
		if (c >= n)
			return;
		if (c + 1 < n && better(v, id, c + 1, c))
			c++;
		if (!better(v, id, c, i))
			return;
		swap2(v, id, i, c);
		i = c;
	}
}

/* Moves the k best of v[0..n) to the front, best first (partial heapsort). */
static void top_sort(float *v, int32_t *id, int n, int k)
{
	for (int i = n / 2 - 1; i >= 0; i--)
		sift(v, id, i, n);
	for (int i = 0; i < k; i++) { /* pop the best to the back */
		swap2(v, id, 0, n - 1 - i);
		sift(v, id, 0, n - 1 - i);
	}
	for (int i = 0; i < n / 2; i++) /* back (best last) to front (best first) */
		swap2(v, id, i, n - 1 - i);
}

/* penalize applies r's penalties to logits, in vLLM's order, and returns
 * the result (e->pl), or logits itself when r has none:
 *  - repetition_penalty (vLLM, the CTRL rule): the logit of every token in
 *    the prompt or the output so far is divided by it when positive and
 *    multiplied by it otherwise;
 *  - frequency and presence penalties (OpenAI): a token the output so far
 *    holds c times loses c * frequency_penalty + presence_penalty.
 * O(tokens so far); e->pcnt is all 0 again on return. */
static const float *penalize(pm_engine *e, const req *r, const float *logits)
{
	const pm_params *p = &r->p;
	float rep = p->repetition_penalty;
	int has_rep = rep != 0 && rep != 1;
	if (!has_rep && p->presence_penalty == 0 && p->frequency_penalty == 0)
		return logits;
	enum { DONE = 1 << 30 }; /* the token's logit is penalized; the count is below */
	float *l = e->pl;
	int32_t *cnt = e->pcnt;
	const int32_t *seq = r->seq;
	int32_t n = r->n_seq;
	memcpy(l, logits, sizeof *l * (size_t)e->vocab);
	for (int32_t i = r->st.prompt_tokens; i < n; i++)
		cnt[seq[i]]++;
	for (int32_t i = 0; i < n; i++) {
		int32_t t = seq[i], c = cnt[t];
		if (c & DONE)
			continue;
		cnt[t] = c | DONE;
		if (has_rep)
			l[t] = l[t] > 0 ? l[t] / rep : l[t] * rep;
		if (c > 0)
			l[t] -= (float)c * p->frequency_penalty + p->presence_penalty;
	}
	for (int32_t i = 0; i < n; i++)
		cnt[seq[i]] = 0;
	return l;
}

static int32_t sample(pm_engine *e, req *r, const float *logits)
{
	int V = e->vocab;
	if (r->p.temperature == 0)
		return argmax(logits, V);
	double u = (double)(rng_next(r->rng) >> 11) * 0x1.0p-53;
	float *v = e->sp;
	int32_t *id = e->sidx;
	for (int i = 0; i < V; i++) {
		v[i] = logits[i] / r->p.temperature;
		id[i] = i;
	}
	int n = r->p.top_k > 0 && r->p.top_k < V ? r->p.top_k : V;
	int nucleus = r->p.top_p > 0 && r->p.top_p < 1;
	if (n < V || nucleus)
		top_sort(v, id, V, n);
	float mx = v[argmax(v, n)];
	double sum = 0;
	float minp = r->p.min_p; /* p >= min_p * p_max  <=>  exp(v - mx) >= min_p */
	for (int i = 0; i < n; i++) {
		v[i] = expf(v[i] - mx);
		if (minp > 0 && v[i] < minp)
			v[i] = 0; /* never drawn: target < c needs c to grow */
		sum += v[i];
	}
	if (nucleus) {
		double c = 0;
		for (int i = 0; i < n; i++) {
			c += v[i];
			if (c >= r->p.top_p * sum) {
				n = i + 1;
				sum = c;
				break;
			}
		}
	}
	double target = u * sum, c = 0;
	for (int i = 0; i < n; i++) {
		c += v[i];
		if (target < c)
			return id[i];
	}
	return id[n - 1];
}

/* logprobs writes, for the token tok sampled from logits at position j of
 * slot sx's step, its log-probability and the top_logprobs most likely
 * tokens' (most likely first, ties by lower id): the log-softmax of
 * logits / temperature (1 when greedy). O(vocab * top_logprobs). */
static void logprobs(pm_engine *e, const req *r, int sx, int j, const float *logits, int32_t tok)
{
	int V = e->vocab, n = r->p.top_logprobs;
	float t = r->p.temperature > 0 ? r->p.temperature : 1;
	size_t at = (size_t)sx * (PM_MAX_SPEC_K + 1) + (size_t)j;
	int32_t *ids = e->top_id + at * PM_MAX_TOP_LOGPROBS;
	float *lps = e->top_lp + at * PM_MAX_TOP_LOGPROBS;
	float mx = logits[argmax(logits, V)] / t;
	double sum = 0;
	int k = 0; /* entries of ids/lps in use, sorted */
	for (int i = 0; i < V; i++) {
		float v = logits[i] / t;
		sum += exp((double)v - mx);
		if (n == 0 || (k == n && !(v > lps[k - 1])))
			continue;
		int at2 = k < n ? k++ : n - 1; /* insert, dropping the last when full */
		while (at2 > 0 && v > lps[at2 - 1]) {
			lps[at2] = lps[at2 - 1];
			ids[at2] = ids[at2 - 1];
			at2--;
		}
		lps[at2] = v;
		ids[at2] = i;
	}
	float lse = (float)((double)mx + log(sum));
	for (int i = 0; i < k; i++) /* a token a grammar masked (-inf): -9999, as OpenAI reports */
		lps[i] = lps[i] == -INFINITY ? -9999.0f : lps[i] - lse;
	e->lp[at] = logits[tok] / t - lse;
}

/* sample_at samples the token at position j of slot sx's step from logits,
 * after r's penalties, and records its log-probabilities when r asks. */
int32_t sample_at(pm_engine *e, req *r, int sx, int j, const float *logits)
{
	const float *l = penalize(e, r, logits);
	int32_t tok = sample(e, r, l);
	if (r->p.logprobs)
		logprobs(e, r, sx, j, l, tok);
	return tok;
}
