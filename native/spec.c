/*
 * spec.c: n-gram speculative decoding: the draft proposals and their
 * budget.
 *
 * Contract: spec_draft proposes a draft for a decoding slot by prompt
 * lookup (the longest suffix of the request's tokens, spec_ngram_min..
 * PM_SPEC_NGRAM_MAX long, that occurred before: the tokens that followed it), never reaching
 * beyond max_tokens or the context; a request whose drafts were rejected
 * outright backs off (spec_verified). spec_ration trims a step's drafts to
 * the verify budget. Drafts change only speed: the scheduler verifies
 * them, so the tokens a request gets are those it gets without
 * speculation. Nothing here allocates.
 */
#include <string.h>

#include "engine_internal.h"

/* n-gram lookup: the longest suffix of the context (at most
 * PM_SPEC_NGRAM_MAX tokens, at least cfg.spec_ngram_min) that occurred
 * before; the tokens after it are the draft. With byte tokens a 1-token
 * match predicts little: on the default model ~1-2% of such drafts were
 * accepted; the default minimum (3) was chosen on the trained model's
 * workloads (docs/SPECULATIVE.md). */
#define NGRAM_MAX PM_SPEC_NGRAM_MAX

/*
 * A request whose draft was rejected outright skips its next 2^f - 1
 * lookups (f failures in a row, at most SPEC_BACKOFF_MAX); any accepted
 * draft token resets it. Text the model copies from its context keeps
 * drafting every step; text it does not copy stops paying for verify rows
 * that are rejected. On the random default model (which never copies) the
 * two rules took speculation from 8-22% slower than none to within 1-3%.
 */
#define SPEC_BACKOFF_MAX 63

/*
 * Draft rows share a budget: a verify forward holds at most
 * max(SPEC_ROWS, slots) rows. Up to a few rows a forward costs about the same
 * (the weights are the memory traffic); beyond that every row costs compute,
 * and drafts that are mostly rejected would make a full batch slower than no
 * speculation at all. The longest n-gram matches get the budget first.
 */
#define SPEC_ROWS 8

/*
 * lookup proposes a draft for r: find the earlier occurrence of the longest
 * suffix of its tokens (spec_ngram_min..NGRAM_MAX long; the most recent one among
 * equals) and copy up to kmax tokens that followed it. Drafts never reach
 * beyond max_tokens or the context.
 */
static int lookup(const pm_engine *e, const req *r, int32_t *draft, int32_t *match)
{
	const int32_t *s = r->seq;
	int n = r->n_seq;
	int d = e->cfg.spec_k;
	if (d > e->ctx - n - 1)
		d = e->ctx - n - 1;
	if (d > r->p.max_tokens - r->st.completion_tokens - 1)
		d = r->p.max_tokens - r->st.completion_tokens - 1;
	if (d <= 0)
		return 0;
	int best = 0, at = -1;
	for (int j = n - 2; j >= 0 && best < NGRAM_MAX; j--) {
		int len = 0;
		while (len < NGRAM_MAX && len <= j && s[j - len] == s[n - 1 - len])
			len++;
		if (len > best) {
			best = len;
			at = j;
		}
	}
	if (best < e->cfg.spec_ngram_min)
		return 0;
	if (d > n - 1 - at)
		d = n - 1 - at;
	*match = best;
	memcpy(draft, s + at + 1, (size_t)d * sizeof(int32_t));
	return d;
}

/* Trims the drafts of e->order[0..ns) to budget tokens in all, longest
 * match first (ties: oldest admission). Returns the drafts kept. */
static int ration_drafts(pm_engine *e, int ns, int budget)
{
	int32_t *want = e->row_pos; /* scratch: proposed draft lengths */
	for (int i = 0; i < ns; i++) {
		want[i] = e->slots[e->order[i]].n_draft;
		e->slots[e->order[i]].n_draft = 0;
	}
	int kept = 0;
	while (budget > 0) {
		int best = -1;
		for (int i = 0; i < ns; i++)
			if (want[i] > 0 && (best < 0 || e->slots[e->order[i]].match >
								e->slots[e->order[best]].match))
				best = i;
		if (best < 0)
			break;
		int d = want[best] < budget ? want[best] : budget;
		e->slots[e->order[best]].n_draft = d;
		want[best] = 0;
		budget -= d;
		kept += d;
	}
	return kept;
}

/* spec_draft proposes slot s's draft for this step (s->n_draft tokens in
 * s->draft, 0 for none; s->match the n-gram length it came from), unless
 * r's backoff skips this step's lookup. */
void spec_draft(const pm_engine *e, req *r, slot *s)
{
	s->match = 0;
	s->n_draft = 0;
	if (e->cfg.spec_k > 0 && r->spec_skip > 0)
		r->spec_skip--;
	else if (e->cfg.spec_k > 0)
		s->n_draft = lookup(e, r, s->draft, &s->match);
}

/* spec_ration keeps the drafts of e->order[0..ns) (drafted tokens in all)
 * within the verify budget of SPEC_ROWS rows and returns the tokens kept. */
int spec_ration(pm_engine *e, int ns, int drafted)
{
	if (drafted > SPEC_ROWS - ns)
		drafted = ration_drafts(e, ns, SPEC_ROWS - ns);
	return drafted;
}

/* spec_verified updates r's backoff after a verify of n_draft tokens of
 * which accepted were accepted. */
void spec_verified(req *r, int n_draft, int accepted)
{
	if (n_draft > 0 && accepted == 0) {
		r->spec_fails++;
		r->spec_skip = r->spec_fails >= 6 ? SPEC_BACKOFF_MAX : (1 << r->spec_fails) - 1;
	} else if (accepted > 0) {
		r->spec_fails = 0;
	}
}
