/*
 * constrain.c: constrained decoding in the step loop.
 *
 * Contract: a constrained request (pm_params.grammar) holds its grammar's
 * matcher state (r->gm, gmatch.h) after the output so far. Before each of
 * its tokens is sampled (prefill's first token, a decode row, every
 * speculative verify row) constrain_logits computes the state's token mask
 * (gmask.h: cached, else one walk of the token index) and sets every
 * disallowed logit to -inf in e->pl; EOS and the request's stop tokens
 * stay allowed only where the grammar may end. When nothing is allowed
 * the request is at a dead end: the caller emits EOS and the outcome is
 * PM_GRAMMAR_DEAD. Once a token is chosen constrain_accept advances the
 * state by its bytes. Speculative drafts need no check of their own: a
 * draft token is accepted only when the token sampled at its row equals
 * it, and that token was sampled under the mask, so a draft is rejected at
 * its first disallowed token. Unconstrained requests never reach this
 * file. Nothing here allocates.
 */
#include <math.h>
#include <string.h>

#include "engine_internal.h"

/* ends: t is EOS or one of r's stop tokens. */
static int ends(const pm_engine *e, const req *r, int32_t t)
{
	if (t == e->m->eos_id)
		return 1;
	for (int i = 0; i < r->p.n_stop; i++)
		if (r->p.stop[i] == t)
			return 1;
	return 0;
}

const float *constrain_logits(pm_engine *e, req *r, const float *l)
{
	int64_t t0 = pm_now();
	gm_mask m = gmask_compute(e->gmv, r->p.grammar, r->gm);
	int V = e->vocab;
	float *out = e->pl;
	if (l != out)
		memcpy(out, l, sizeof *out * (size_t)V);
	int any = m.n_allowed > 0;
	for (int w = 0; w < (V + 63) / 64; w++) {
		uint64_t bits = m.words[w];
		if (bits == ~0ULL)
			continue;
		int hi = w * 64 + 64 < V ? 64 : V - w * 64;
		for (int b = 0; b < hi; b++)
			if (!((bits >> b) & 1)) {
				int32_t t = w * 64 + b;
				if (m.accepting && ends(e, r, t))
					any = 1;
				else
					out[t] = -INFINITY;
			}
	}
	int64_t d = pm_now() - t0;
	r->st.mask_ns += d;
	r->st.masked_tokens++;
	if (!e->cfg.no_metrics) {
		e->met.mask_ns += d;
		e->met.mask_count++;
		if (m.hit)
			e->met.mask_cache_hits++;
		else
			e->met.mask_cache_misses++;
	}
	if (!any) {
		r->gm_dead = 1;
		return NULL;
	}
	return out;
}

void constrain_accept(pm_engine *e, req *r, int32_t tok)
{
	int32_t len;
	gmask_token(e->gmv, tok, &len);
	if (len > 0 && !(ends(e, r, tok) && gm_accepting(r->gm)))
		gmask_advance(e->gmv, r->p.grammar, r->gm, tok);
}

int32_t constrain_outcome(const pm_engine *e, const req *r)
{
	(void)e;
	if (r->gm_dead)
		return PM_GRAMMAR_DEAD;
	return gm_accepting(r->gm) ? PM_GRAMMAR_COMPLETE : PM_GRAMMAR_INCOMPLETE;
}
