/*
 * grammar_mask.c: token masks from grammars in the step loop
 * (grammar_mask.h).
 */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "grammar_mask.h"
#include "grammar_match.h"

struct pm_gmask {
	int32_t vocab;
	uint8_t *bytes;   /* every token's bytes */
	uint32_t *offs;   /* [vocab+1] token i is bytes[offs[i]..offs[i+1]) */
	int32_t *sorted;  /* [n_sorted] tokens with 1..GMASK_MAX_TOKEN bytes, by their bytes */
	uint16_t *lcp;    /* [n_sorted] common prefix with the token before (0 for the first) */
	int32_t n_sorted;
	int32_t *levels;  /* [GMASK_MAX_TOKEN+1][GM_STATE_CAP] the walk's state after d bytes */
	int32_t *states;  /* [n_reqs][GM_STATE_CAP] each request's matcher state */
	int32_t *tmp;     /* [2][GM_STATE_CAP] */
	int32_t *scratch; /* [GM_SCRATCH_WORDS] */
	int32_t words;    /* 32-bit words of one mask */
	uint32_t *bits;   /* [GMASK_CACHE+1][words]: cached masks, then an uncached one */
	uint64_t key_uid[GMASK_CACHE], key_hash[GMASK_CACHE];
	int32_t key_len[GMASK_CACHE];
	int32_t *keys;    /* [GMASK_CACHE][GMASK_KEY_CAP] the states the masks are for */
	int32_t n_used, clock;
};

static int32_t tok_len(const pm_gmask *m, int32_t t)
{
	return (int32_t)(m->offs[t + 1] - m->offs[t]);
}

static int cmp_tok(const pm_gmask *m, int32_t a, int32_t b)
{
	int32_t la = tok_len(m, a), lb = tok_len(m, b);
	int c = memcmp(m->bytes + m->offs[a], m->bytes + m->offs[b], (size_t)(la < lb ? la : lb));
	if (c)
		return c;
	if (la != lb)
		return la < lb ? -1 : 1;
	return a < b ? -1 : a > b;
}

/* Merge sort of ids by cmp_tok (qsort has no context argument). */
static void sort_toks(const pm_gmask *m, int32_t *v, int32_t *t, int32_t n)
{
	if (n < 2)
		return;
	int32_t h = n / 2;
	sort_toks(m, v, t, h);
	sort_toks(m, v + h, t, n - h);
	int32_t i = 0, j = h, k = 0;
	while (i < h && j < n)
		t[k++] = cmp_tok(m, v[i], v[j]) <= 0 ? v[i++] : v[j++];
	while (i < h)
		t[k++] = v[i++];
	while (j < n)
		t[k++] = v[j++];
	memcpy(v, t, sizeof *v * (size_t)n);
}

void gmask_free(pm_engine *e)
{
	pm_gmask *m = e->gm;
	if (!m)
		return;
	free(m->bytes);
	free(m->offs);
	free(m->sorted);
	free(m->lcp);
	free(m->levels);
	free(m->states);
	free(m->tmp);
	free(m->scratch);
	free(m->bits);
	free(m->keys);
	free(m);
	e->gm = NULL;
}

int gmask_build(pm_engine *e, const uint8_t *bytes, const uint32_t *offs, int32_t n)
{
	if (e->gm)
		return seterr(e, PM_ERR_STATE, "token bytes: already set");
	if (offs[0] != 0)
		return seterr(e, PM_ERR_ARG, "token bytes: offs[0] is %u, not 0", offs[0]);
	for (int32_t i = 0; i < n; i++)
		if (offs[i + 1] < offs[i])
			return seterr(e, PM_ERR_ARG, "token bytes: offsets decrease at token %d", (int)i);
	pm_gmask *m = calloc(1, sizeof *m);
	if (!m)
		return seterr(e, PM_ERR_NOMEM, "token bytes: out of memory");
	e->gm = m;
	m->vocab = n;
	m->words = (n + 31) / 32;
	size_t total = offs[n];
	m->bytes = malloc(total + 1);
	m->offs = malloc(sizeof *m->offs * ((size_t)n + 1));
	m->sorted = malloc(sizeof *m->sorted * (size_t)n);
	m->lcp = malloc(sizeof *m->lcp * (size_t)n);
	int32_t *t = malloc(sizeof *t * (size_t)n);
	m->levels = malloc(sizeof *m->levels * (GMASK_MAX_TOKEN + 1) * GM_STATE_CAP);
	m->states = malloc(sizeof *m->states * (size_t)e->n_reqs * GM_STATE_CAP);
	m->tmp = malloc(sizeof *m->tmp * 2 * GM_STATE_CAP);
	m->scratch = malloc(sizeof *m->scratch * GM_SCRATCH_WORDS);
	m->bits = malloc(sizeof *m->bits * (GMASK_CACHE + 1) * (size_t)m->words);
	m->keys = malloc(sizeof *m->keys * GMASK_CACHE * GMASK_KEY_CAP);
	if (!m->bytes || !m->offs || !m->sorted || !m->lcp || !t || !m->levels || !m->states ||
	    !m->tmp || !m->scratch || !m->bits || !m->keys) {
		free(t);
		gmask_free(e);
		return seterr(e, PM_ERR_NOMEM, "token bytes: out of memory");
	}
	memcpy(m->bytes, bytes, total);
	memcpy(m->offs, offs, sizeof *offs * ((size_t)n + 1));
	for (int32_t i = 0; i < n; i++) {
		int32_t l = tok_len(m, i);
		if (l >= 1 && l <= GMASK_MAX_TOKEN)
			m->sorted[m->n_sorted++] = i;
	}
	sort_toks(m, m->sorted, t, m->n_sorted);
	free(t);
	for (int32_t i = 0; i < m->n_sorted; i++) {
		int32_t l = 0;
		if (i > 0) {
			int32_t a = m->sorted[i - 1], b = m->sorted[i];
			int32_t la = tok_len(m, a), lb = tok_len(m, b);
			const uint8_t *pa = m->bytes + m->offs[a], *pb = m->bytes + m->offs[b];
			while (l < la && l < lb && pa[l] == pb[l])
				l++;
		}
		m->lcp[i] = (uint16_t)l;
	}
	return PM_OK;
}

static int32_t *state_of(const pm_engine *e, const req *r)
{
	return e->gm->states + (size_t)(r - e->reqs) * GM_STATE_CAP;
}

int gmask_start(pm_engine *e, req *r)
{
	pm_gmask *m = e->gm;
	gm_scratch sc = {m->scratch};
	int32_t *st = state_of(e, r);
	if (gm_start(r->p.grammar, &sc, st) < 0)
		return seterr(e, PM_ERR_ARG, "grammar: its start expands past the matcher's bounds (%d stacks of %d frames)",
			      GM_MAX_STACKS, GM_MAX_DEPTH);
	gm_canon(st, m->tmp);
	return PM_OK;
}

/* compute writes the mask of st into bits: the sorted tokens walked in
 * order, each from the state its common prefix with the one before left
 * (levels[d] is the state after the current token's first d bytes);
 * tokens under a refused prefix are skipped without matching a byte. */
static void compute(pm_gmask *m, const pm_grammar *g, const int32_t *st, uint32_t *bits)
{
	memset(bits, 0, sizeof *bits * (size_t)m->words);
	memcpy(m->levels, st, sizeof *st * (size_t)st[1]);
	gm_scratch sc = {m->scratch};
	int32_t dead = INT_MAX; /* the current prefix of this length is refused */
	for (int32_t i = 0; i < m->n_sorted; i++) {
		int32_t tok = m->sorted[i], l = m->lcp[i];
		if (l >= dead)
			continue;
		dead = INT_MAX;
		int32_t len = tok_len(m, tok);
		const uint8_t *b = m->bytes + m->offs[tok];
		int32_t d = l;
		for (; d < len; d++) {
			int32_t *from = m->levels + (size_t)d * GM_STATE_CAP;
			if (gm_advance(g, &sc, from, b[d], from + GM_STATE_CAP) <= 0) {
				dead = d + 1;
				break;
			}
		}
		if (d == len)
			bits[tok >> 5] |= 1u << (tok & 31);
	}
}

static uint64_t hash_state(uint64_t uid, const int32_t *st)
{
	uint64_t h = 0xcbf29ce484222325ULL ^ uid;
	for (int32_t i = 0; i < st[1]; i++) {
		h ^= (uint32_t)st[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

/* mask_of returns the mask of r's state: cached, or computed (and cached
 * when its state is short enough to key). */
static const uint32_t *mask_of(pm_engine *e, const req *r, const int32_t *st)
{
	pm_gmask *m = e->gm;
	const pm_grammar *g = r->p.grammar;
	uint64_t h = hash_state(g->uid, st);
	for (int32_t i = 0; i < m->n_used; i++)
		if (m->key_hash[i] == h && m->key_uid[i] == g->uid && m->key_len[i] == st[1] &&
		    memcmp(m->keys + (size_t)i * GMASK_KEY_CAP, st, sizeof *st * (size_t)st[1]) == 0) {
			e->met.mask_cache_hits++;
			return m->bits + (size_t)i * m->words;
		}
	e->met.mask_cache_misses++;
	if (st[1] > GMASK_KEY_CAP) {
		uint32_t *bits = m->bits + (size_t)GMASK_CACHE * m->words;
		compute(m, g, st, bits);
		return bits;
	}
	int32_t i = m->n_used < GMASK_CACHE ? m->n_used++ : m->clock++ % GMASK_CACHE;
	uint32_t *bits = m->bits + (size_t)i * m->words;
	compute(m, g, st, bits);
	m->key_hash[i] = h;
	m->key_uid[i] = g->uid;
	m->key_len[i] = st[1];
	memcpy(m->keys + (size_t)i * GMASK_KEY_CAP, st, sizeof *st * (size_t)st[1]);
	return bits;
}

static int is_end_token(const pm_engine *e, const req *r, int32_t tok)
{
	if (tok == e->m->eos_id)
		return 1;
	for (int i = 0; i < r->p.n_stop; i++)
		if (tok == r->p.stop[i])
			return 1;
	return 0;
}

void gmask_apply(pm_engine *e, req *r, float *l)
{
	pm_gmask *m = e->gm;
	int64_t t0 = pm_now();
	const int32_t *st = state_of(e, r);
	const uint32_t *bits = mask_of(e, r, st);
	int acc = gm_accepting(st);
	int32_t V = e->vocab, eos = e->m->eos_id;
	int has_eos = eos >= 0 && eos < V;
	/* end tokens are allowed where the grammar may end, whatever their
	 * bytes: keep their logits across the mask */
	float keep_eos = has_eos ? l[eos] : 0, keep_stop[PM_MAX_STOP];
	for (int i = 0; i < r->p.n_stop; i++)
		keep_stop[i] = l[r->p.stop[i]];
	int any = 0;
	for (int32_t w = 0; w < m->words; w++) {
		uint32_t b = bits[w];
		if (b == 0xffffffffu) {
			any = 1;
			continue;
		}
		int32_t base = w * 32;
		for (int32_t i = 0; i < 32 && base + i < V; i++)
			if (!((b >> i) & 1))
				l[base + i] = -INFINITY;
			else if (!is_end_token(e, r, base + i))
				any = 1;
	}
	for (int i = 0; i < r->p.n_stop; i++)
		l[r->p.stop[i]] = acc ? keep_stop[i] : -INFINITY;
	if (has_eos)
		l[eos] = acc ? keep_eos : -INFINITY;
	if (!any && !acc && has_eos) {
		l[eos] = 0; /* nothing can continue: end the request */
		r->st.grammar = PM_GRAMMAR_DEAD;
	}
	r->st.masked_tokens++;
	int64_t d = pm_now() - t0;
	r->st.mask_ns += d;
	e->met.mask_ns += d;
	e->met.mask_count++;
}

void gmask_accept(pm_engine *e, req *r, int32_t tok)
{
	pm_gmask *m = e->gm;
	if (is_end_token(e, r, tok)) {
		if (r->st.grammar != PM_GRAMMAR_DEAD)
			r->st.grammar = PM_GRAMMAR_COMPLETE;
		return;
	}
	int32_t *st = state_of(e, r);
	gm_scratch sc = {m->scratch};
	int32_t len = tok_len(m, tok);
	int rc = len > 0 && len <= GMASK_MAX_TOKEN
			 ? gm_advance_bytes(r->p.grammar, &sc, st, m->bytes + m->offs[tok], len, m->tmp)
			 : 0;
	if (rc <= 0) { /* a token the mask refused: only when forced (dead end) */
		r->st.grammar = PM_GRAMMAR_DEAD;
		st[0] = 0;
		st[1] = 2;
		return;
	}
	gm_canon(st, m->tmp);
}

void gmask_trim_draft(pm_engine *e, req *r, slot *s)
{
	pm_gmask *m = e->gm;
	if (s->n_draft == 0)
		return;
	int32_t *cp = m->levels; /* free outside compute */
	const int32_t *st = state_of(e, r);
	memcpy(cp, st, sizeof *st * (size_t)st[1]);
	gm_scratch sc = {m->scratch};
	int d = 0;
	for (; d < s->n_draft; d++) {
		int32_t tok = s->draft[d], len = tok_len(m, tok);
		if (is_end_token(e, r, tok) || len == 0 || len > GMASK_MAX_TOKEN ||
		    gm_advance_bytes(r->p.grammar, &sc, cp, m->bytes + m->offs[tok], len, m->tmp) <= 0)
			break;
	}
	s->n_draft = d;
}
