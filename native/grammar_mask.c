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

#define MEMO_WORDS (1 << 21)
#define MEMO_STATES (1 << 16)
#define MEMO_TRANS (1 << 19)
#define MEMO_DENSE 4096 /* states whose transitions sit in a direct 256-entry row */

struct pm_gmask {
	int32_t vocab;
	uint8_t *bytes;   /* every token's bytes */
	uint32_t *offs;   /* [vocab+1] token i is bytes[offs[i]..offs[i+1]) */
	int32_t *sorted;  /* [n_sorted] tokens with 1..GMASK_MAX_TOKEN bytes, by their bytes */
	uint16_t *lcp;    /* [n_sorted] common prefix with the token before (0 for the first) */
	int32_t end1[256]; /* sorted index after the tokens starting with byte b */
	int32_t *end2;    /* [65536] after those of 2+ bytes starting with bytes b0 b1 */
	int32_t n_sorted;
	int32_t *levels;  /* [GMASK_MAX_TOKEN+1][GM_STATE_CAP] the walk's state after d bytes */
	int32_t *states;  /* [n_reqs][GM_STATE_CAP] each request's matcher state */
	int32_t *tmp;     /* [2][GM_STATE_CAP] */
	int32_t *scratch; /* [GM_SCRATCH_WORDS] */
	int32_t words;    /* 32-bit words of one mask */
	int32_t n_cache;  /* entries of the mask cache */
	uint32_t *bits;   /* [n_cache+1][words]: cached masks, then an uncached one */
	uint64_t *key_uid, *key_hash; /* [n_cache] */
	int32_t *key_len;  /* [n_cache] words of the key; 0 = empty entry */
	int32_t *keys;     /* [n_cache][GMASK_KEY_CAP] the states the masks are for */
	int32_t *next;     /* [n_cache] next entry of the same bucket, -1 */
	int32_t *bucket;   /* [bmask+1] first entry of each bucket, -1 */
	uint32_t bmask;
	int32_t clock;     /* the entry replaced next (oldest first) */
	/* transition memo (memo_*): states interned by id, and (id, byte) ->
	 * id, kept across masks: inside a string every letter leads to the
	 * same state, so a walk matches each distinct step once. A state is
	 * interned with its grammar's uid, so the grammars of a batch (an
	 * agent's several tools) share the memo instead of resetting it in
	 * turn; it is cleared only when full */
	int32_t *ist;        /* [MEMO_WORDS] interned states' words */
	int32_t ist_used;
	int32_t *ist_off;    /* [MEMO_STATES] where each state starts in ist */
	uint64_t *ist_hash;  /* [MEMO_STATES] */
	uint64_t *ist_uid;   /* [MEMO_STATES] the grammar each state belongs to */
	int32_t n_ist;
	int32_t *ist_tab;    /* [MEMO_STATES*2] state hash table: id + 1, 0 empty */
	uint32_t *tr_key;    /* [MEMO_TRANS] (id << 8 | byte) + 1, 0 empty */
	int32_t *tr_to;      /* [MEMO_TRANS] the state after it; -1 refused */
	int32_t n_tr;
	int32_t *lvl;        /* [GMASK_MAX_TOKEN+1] state id after d bytes */
	int32_t *dense;      /* [MEMO_DENSE][256] the first states' transitions: to id + 1,
			      * -1 refused, 0 not known yet (a row stays in cache while a
			      * walk sweeps the tokens under one prefix) */
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
	free(m->end2);
	free(m->levels);
	free(m->states);
	free(m->tmp);
	free(m->scratch);
	free(m->bits);
	free(m->keys);
	free(m->key_uid);
	free(m->key_hash);
	free(m->key_len);
	free(m->next);
	free(m->bucket);
	free(m->ist);
	free(m->ist_off);
	free(m->ist_hash);
	free(m->ist_uid);
	free(m->ist_tab);
	free(m->tr_key);
	free(m->tr_to);
	free(m->lvl);
	free(m->dense);
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
	size_t per = sizeof(uint32_t) * ((size_t)m->words + GMASK_KEY_CAP);
	size_t nc = GMASK_CACHE_BYTES / per;
	m->n_cache = nc < GMASK_CACHE_MIN ? GMASK_CACHE_MIN : nc > GMASK_CACHE_MAX ? GMASK_CACHE_MAX : (int32_t)nc;
	m->bmask = 1;
	while (m->bmask < 2u * (uint32_t)m->n_cache)
		m->bmask <<= 1;
	m->bmask--;
	m->bits = malloc(sizeof *m->bits * ((size_t)m->n_cache + 1) * (size_t)m->words);
	m->keys = malloc(sizeof *m->keys * (size_t)m->n_cache * GMASK_KEY_CAP);
	m->key_uid = calloc((size_t)m->n_cache, sizeof *m->key_uid);
	m->key_hash = calloc((size_t)m->n_cache, sizeof *m->key_hash);
	m->key_len = calloc((size_t)m->n_cache, sizeof *m->key_len);
	m->next = malloc(sizeof *m->next * (size_t)m->n_cache);
	m->bucket = malloc(sizeof *m->bucket * ((size_t)m->bmask + 1));
	if (!m->bytes || !m->offs || !m->sorted || !m->lcp || !t || !m->levels || !m->states ||
	    !m->tmp || !m->scratch || !m->bits || !m->keys || !m->key_uid || !m->key_hash ||
	    !m->key_len || !m->next || !m->bucket || !(m->ist = malloc(sizeof *m->ist * MEMO_WORDS)) ||
	    !(m->ist_off = malloc(sizeof *m->ist_off * MEMO_STATES)) ||
	    !(m->ist_hash = malloc(sizeof *m->ist_hash * MEMO_STATES)) ||
	    !(m->ist_uid = malloc(sizeof *m->ist_uid * MEMO_STATES)) ||
	    !(m->ist_tab = calloc(2 * MEMO_STATES, sizeof *m->ist_tab)) ||
	    !(m->tr_key = calloc(MEMO_TRANS, sizeof *m->tr_key)) ||
	    !(m->tr_to = malloc(sizeof *m->tr_to * MEMO_TRANS)) ||
	    !(m->lvl = malloc(sizeof *m->lvl * (GMASK_MAX_TOKEN + 1))) ||
	    !(m->end2 = calloc(65536, sizeof *m->end2)) ||
	    !(m->dense = calloc((size_t)MEMO_DENSE * 256, sizeof *m->dense))) {
		free(t);
		gmask_free(e);
		return seterr(e, PM_ERR_NOMEM, "token bytes: out of memory");
	}
	for (uint32_t i = 0; i <= m->bmask; i++)
		m->bucket[i] = -1;
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
	for (int32_t i = 0; i < m->n_sorted; i++) {
		const uint8_t *b = m->bytes + m->offs[m->sorted[i]];
		m->end1[b[0]] = i + 1;
		if (tok_len(m, m->sorted[i]) >= 2)
			m->end2[b[0] << 8 | b[1]] = i + 1;
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

/* skip returns the last sorted index holding the refused prefix b[0..dead)
 * of the token at i when dead is 1 or 2 (the walk then resumes after it
 * without visiting them), else i (the walk skips them one by one). */
static int32_t skip(const pm_gmask *m, int32_t i, const uint8_t *b, int32_t dead)
{
	if (dead == 1)
		return m->end1[b[0]] - 1;
	if (dead == 2)
		return m->end2[b[0] << 8 | b[1]] - 1;
	return i;
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

static void memo_reset(pm_gmask *m)
{
	memset(m->ist_tab, 0, sizeof *m->ist_tab * 2 * MEMO_STATES);
	memset(m->tr_key, 0, sizeof *m->tr_key * MEMO_TRANS);
	if (m->n_ist > 0)
		memset(m->dense, 0, sizeof *m->dense * (size_t)(m->n_ist < MEMO_DENSE ? m->n_ist : MEMO_DENSE) * 256);
	m->ist_used = m->n_ist = m->n_tr = 0;
}

/* intern returns the id of grammar uid's state st (adding it), or -1 when
 * the memo is full. */
static int32_t intern(pm_gmask *m, uint64_t uid, const int32_t *st)
{
	uint64_t h = hash_state(uid, st);
	uint32_t tm = 2 * MEMO_STATES - 1;
	for (uint32_t i = (uint32_t)h & tm;; i = (i + 1) & tm) {
		int32_t id = m->ist_tab[i] - 1;
		if (id < 0) {
			if (m->n_ist == MEMO_STATES || m->ist_used + st[1] > MEMO_WORDS)
				return -1;
			id = m->n_ist++;
			m->ist_off[id] = m->ist_used;
			m->ist_hash[id] = h;
			m->ist_uid[id] = uid;
			memcpy(m->ist + m->ist_used, st, sizeof *st * (size_t)st[1]);
			m->ist_used += st[1];
			m->ist_tab[i] = id + 1;
			return id;
		}
		const int32_t *o = m->ist + m->ist_off[id];
		if (m->ist_hash[id] == h && m->ist_uid[id] == uid && o[1] == st[1] && memcmp(o, st, sizeof *st * (size_t)st[1]) == 0)
			return id;
	}
}

/* step returns the state after byte b from state id: its id, -1 when b is
 * refused (or the matcher overflowed), -2 when the memo is full. */
static int32_t step(pm_gmask *m, const pm_grammar *g, gm_scratch *sc, int32_t id, uint8_t b)
{
	if (id < MEMO_DENSE) {
		int32_t *d = &m->dense[(size_t)id * 256 + b];
		if (*d)
			return *d > 0 ? *d - 1 : -1;
		int rc = gm_advance(g, sc, m->ist + m->ist_off[id], b, m->tmp);
		int32_t to = -1;
		if (rc > 0 && (to = intern(m, g->uid, m->tmp)) < 0)
			return -2;
		*d = to >= 0 ? to + 1 : -1;
		return to;
	}
	uint32_t key = ((uint32_t)id << 8 | b) + 1;
	uint32_t h = key * 0x9e3779b1u;
	for (uint32_t i = h >> (32 - 19);; i = (i + 1) & (MEMO_TRANS - 1)) {
		if (m->tr_key[i] == key)
			return m->tr_to[i];
		if (m->tr_key[i] == 0) {
			if (m->n_tr >= MEMO_TRANS / 2)
				return -2;
			int rc = gm_advance(g, sc, m->ist + m->ist_off[id], b, m->tmp);
			int32_t to = -1;
			if (rc > 0 && (to = intern(m, g->uid, m->tmp)) < 0)
				return -2;
			m->tr_key[i] = key;
			m->tr_to[i] = to;
			m->n_tr++;
			return to;
		}
	}
}

/* walk writes the mask of st into bits: the sorted tokens walked in
 * order, each from the state its common prefix with the one before left
 * (after d bytes: m->lvl[d], an interned id, through the memo; else
 * m->levels[d], a state buffer, matched afresh); tokens under a refused
 * prefix are skipped without matching a byte. 0, or -1 when the memo
 * filled up (bits is then incomplete). */
static int walk(pm_gmask *m, const pm_grammar *g, const int32_t *st, uint32_t *bits, int memo)
{
	memset(bits, 0, sizeof *bits * (size_t)m->words);
	gm_scratch sc = {m->scratch};
	if (memo) {
		if ((m->lvl[0] = intern(m, g->uid, st)) < 0)
			return -1;
	} else {
		memcpy(m->levels, st, sizeof *st * (size_t)st[1]);
	}
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
			int ok;
			if (memo) {
				int32_t to = step(m, g, &sc, m->lvl[d], b[d]);
				if (to == -2)
					return -1;
				ok = to >= 0;
				m->lvl[d + 1] = to;
			} else {
				int32_t *from = m->levels + (size_t)d * GM_STATE_CAP;
				ok = gm_advance(g, &sc, from, b[d], from + GM_STATE_CAP) > 0;
			}
			if (!ok) {
				dead = d + 1;
				break;
			}
		}
		if (d == len)
			bits[tok >> 5] |= 1u << (tok & 31);
		else
			i = skip(m, i, b, dead);
	}
	return 0;
}

/* mask_fill computes the mask of st into bits, through the memo when it
 * has room. */
static void mask_fill(pm_gmask *m, const pm_grammar *g, const int32_t *st, uint32_t *bits)
{
	if (walk(m, g, st, bits, 1) == 0)
		return;
	memo_reset(m);
	if (walk(m, g, st, bits, 1) == 0)
		return;
	walk(m, g, st, bits, 0);
}

/* mask_of returns the mask of r's state: cached, or computed (and cached
 * when its state is short enough to key). */
static const uint32_t *mask_of(pm_engine *e, const req *r, const int32_t *st)
{
	pm_gmask *m = e->gm;
	const pm_grammar *g = r->p.grammar;
	uint64_t h = hash_state(g->uid, st);
	int32_t *head = &m->bucket[h & m->bmask];
	for (int32_t i = *head; i >= 0; i = m->next[i])
		if (m->key_hash[i] == h && m->key_uid[i] == g->uid && m->key_len[i] == st[1] &&
		    memcmp(m->keys + (size_t)i * GMASK_KEY_CAP, st, sizeof *st * (size_t)st[1]) == 0) {
			e->met.mask_cache_hits++;
			return m->bits + (size_t)i * m->words;
		}
	e->met.mask_cache_misses++;
	if (st[1] > GMASK_KEY_CAP) {
		uint32_t *bits = m->bits + (size_t)m->n_cache * m->words;
		mask_fill(m, g, st, bits);
		return bits;
	}
	int32_t i = m->clock;
	m->clock = (m->clock + 1) % m->n_cache;
	if (m->key_len[i]) { /* unlink the entry replaced */
		int32_t *p = &m->bucket[m->key_hash[i] & m->bmask];
		while (*p != i)
			p = &m->next[*p];
		*p = m->next[i];
	}
	uint32_t *bits = m->bits + (size_t)i * m->words;
	mask_fill(m, g, st, bits);
	m->key_hash[i] = h;
	m->key_uid[i] = g->uid;
	m->key_len[i] = st[1];
	memcpy(m->keys + (size_t)i * GMASK_KEY_CAP, st, sizeof *st * (size_t)st[1]);
	m->next[i] = *head;
	*head = i;
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
	/* allowed: set bits, less the end tokens among them (handled below) */
	int64_t allowed = 0;
	for (int32_t w = 0; w < m->words; w++) {
		uint32_t b = bits[w];
		int32_t base = w * 32;
		if (b == 0xffffffffu) {
			allowed += 32;
			continue;
		}
		if (b == 0 && base + 32 <= V) {
			for (int32_t i = 0; i < 32; i++)
				l[base + i] = -INFINITY;
			continue;
		}
		allowed += __builtin_popcount(b);
		if (base + 32 <= V) {
			float *x = l + base; /* branch-free, so it vectorizes */
			for (int32_t i = 0; i < 32; i++)
				x[i] = (b >> i) & 1 ? x[i] : -INFINITY;
		} else {
			for (int32_t i = 0; base + i < V; i++)
				if (!((b >> i) & 1))
					l[base + i] = -INFINITY;
		}
	}
	if (has_eos)
		allowed -= (bits[eos >> 5] >> (eos & 31)) & 1;
	for (int i = 0; i < r->p.n_stop; i++) {
		int32_t t = r->p.stop[i];
		int dup = t == eos;
		for (int j = 0; j < i; j++)
			dup |= r->p.stop[j] == t;
		if (!dup)
			allowed -= (bits[t >> 5] >> (t & 31)) & 1;
	}
	int any = allowed > 0;
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
	int32_t *cp = m->levels; /* free outside walk */
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
