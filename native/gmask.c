/*
 * gmask.c: the token index, the mask walk and the mask cache (gmask.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmask.h"
#include "model.h"

typedef struct {
	uint64_t uid, hash;
	int32_t used;   /* 1 once filled */
	int32_t ref;    /* clock bit */
	int32_t n_allowed, accepting;
	gm_set *key;    /* the canonical state */
	uint64_t *words;
} centry;

struct gm_vocab {
	int32_t n;          /* vocabulary size */
	int32_t nw;         /* 64-bit words of a mask */
	uint8_t *bytes;
	uint32_t *offs;     /* [n+1] */
	int32_t n_sorted;   /* byte tokens */
	int32_t *sorted;    /* [n_sorted] token ids by bytes */
	int32_t *lcp;       /* [n_sorted] common prefix with the previous */
	int32_t maxlen;
	gm_set *lv;         /* [maxlen+1] the walk's state after each depth */
	centry cache[PM_GMASK_CACHE];
	int32_t hand;
	uint64_t *scratch;  /* [nw] an uncacheable state's mask */
	int64_t hits, misses;
};

static const uint8_t *sort_bytes;
static const uint32_t *sort_offs;

static int by_bytes(const void *a, const void *b)
{
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
	uint32_t lx = sort_offs[x + 1] - sort_offs[x], ly = sort_offs[y + 1] - sort_offs[y];
	int c = memcmp(sort_bytes + sort_offs[x], sort_bytes + sort_offs[y], lx < ly ? lx : ly);
	if (c)
		return c;
	if (lx != ly)
		return lx < ly ? -1 : 1;
	return x < y ? -1 : x > y;
}

int gmask_vocab_new(const uint8_t *bytes, const uint32_t *offs, int32_t n, gm_vocab **out,
		    char *err, size_t errlen)
{
	*out = NULL;
	gm_vocab *v = calloc(1, sizeof *v);
	if (!v)
		return PM_ERR_NOMEM;
	v->n = n;
	v->nw = (n + 63) / 64;
	uint32_t total = offs[n] - offs[0];
	v->bytes = malloc((size_t)total + 1);
	v->offs = malloc(sizeof *v->offs * ((size_t)n + 1));
	v->sorted = malloc(sizeof *v->sorted * ((size_t)n + 1));
	v->lcp = malloc(sizeof *v->lcp * ((size_t)n + 1));
	v->scratch = malloc(sizeof *v->scratch * (size_t)v->nw);
	if (!v->bytes || !v->offs || !v->sorted || !v->lcp || !v->scratch)
		goto nomem;
	memcpy(v->bytes, bytes + offs[0], total);
	for (int32_t i = 0; i <= n; i++)
		v->offs[i] = offs[i] - offs[0];
	for (int32_t i = 0; i < n; i++) {
		uint32_t len = v->offs[i + 1] - v->offs[i];
		if (v->offs[i + 1] < v->offs[i]) {
			snprintf(err, errlen, "token bytes: offsets of token %d decrease", (int)i);
			gmask_vocab_free(v);
			return PM_ERR_ARG;
		}
		if (len > PM_GMASK_MAX_TOKEN) {
			snprintf(err, errlen, "token bytes: token %d has %u bytes, at most %d", (int)i,
				 len, PM_GMASK_MAX_TOKEN);
			gmask_vocab_free(v);
			return PM_ERR_ARG;
		}
		if (len > 0)
			v->sorted[v->n_sorted++] = i;
		if ((int32_t)len > v->maxlen)
			v->maxlen = (int32_t)len;
	}
	sort_bytes = v->bytes; /* SetTokenBytes runs once per engine, never concurrently with itself */
	sort_offs = v->offs;
	qsort(v->sorted, (size_t)v->n_sorted, sizeof *v->sorted, by_bytes);
	for (int32_t i = 0; i < v->n_sorted; i++) {
		int32_t l = 0;
		if (i > 0) {
			int32_t a = v->sorted[i - 1], b = v->sorted[i];
			uint32_t la = v->offs[a + 1] - v->offs[a], lb = v->offs[b + 1] - v->offs[b];
			const uint8_t *pa = v->bytes + v->offs[a], *pb = v->bytes + v->offs[b];
			while ((uint32_t)l < la && (uint32_t)l < lb && pa[l] == pb[l])
				l++;
		}
		v->lcp[i] = l;
	}
	v->lv = malloc(sizeof *v->lv * ((size_t)v->maxlen + 2));
	if (!v->lv)
		goto nomem;
	for (int i = 0; i < PM_GMASK_CACHE; i++) {
		v->cache[i].key = malloc(sizeof(gm_set));
		v->cache[i].words = malloc(sizeof(uint64_t) * (size_t)v->nw);
		if (!v->cache[i].key || !v->cache[i].words)
			goto nomem;
	}
	*out = v;
	return PM_OK;
nomem:
	gmask_vocab_free(v);
	return PM_ERR_NOMEM;
}

void gmask_vocab_free(gm_vocab *v)
{
	if (!v)
		return;
	for (int i = 0; i < PM_GMASK_CACHE; i++) {
		free(v->cache[i].key);
		free(v->cache[i].words);
	}
	free(v->bytes);
	free(v->offs);
	free(v->sorted);
	free(v->lcp);
	free(v->lv);
	free(v->scratch);
	free(v);
}

const uint8_t *gmask_token(const gm_vocab *v, int32_t t, int32_t *len)
{
	*len = (int32_t)(v->offs[t + 1] - v->offs[t]);
	return v->bytes + v->offs[t];
}

void gmask_cache_stats(const gm_vocab *v, int64_t *hits, int64_t *misses)
{
	*hits = v->hits;
	*misses = v->misses;
}

/* walk fills words with the tokens state s allows: the byte tokens in
 * sorted order, each advancing the level states from its common prefix
 * with the previous token; a prefix no stack survives skips every token
 * under it. Returns the tokens allowed. */
static int32_t walk(gm_vocab *v, const pm_grammar *g, const gm_set *s, uint64_t *words)
{
	memset(words, 0, sizeof *words * (size_t)v->nw);
	if (s->n == 0)
		return 0;
	gm_copy(&v->lv[0], s);
	int32_t valid = 0;   /* lv[0..valid] hold the previous token's prefix states */
	int32_t dead = 1 << 30; /* lv[dead] is empty (dead <= valid) */
	int32_t allowed = 0;
	for (int32_t i = 0; i < v->n_sorted; i++) {
		int32_t l = v->lcp[i];
		if (dead <= l)
			continue; /* shares a prefix the grammar cannot continue */
		dead = 1 << 30;
		if (valid > l)
			valid = l;
		int32_t t = v->sorted[i];
		int32_t len = (int32_t)(v->offs[t + 1] - v->offs[t]);
		const uint8_t *b = v->bytes + v->offs[t];
		while (valid < len) {
			gm_step(g, &v->lv[valid], b[valid], &v->lv[valid + 1]);
			valid++;
			if (v->lv[valid].n == 0) {
				dead = valid;
				break;
			}
		}
		if (dead > len) {
			words[t >> 6] |= 1ULL << (t & 63);
			allowed++;
		}
	}
	return allowed;
}

gm_mask gmask_compute(gm_vocab *v, const pm_grammar *g, gm_set *s)
{
	gm_mask m = {0};
	uint64_t h = gm_canon(s) ^ (g->uid * 0x9e3779b97f4a7c15ULL);
	m.accepting = gm_accepting(s);
	for (int i = 0; i < PM_GMASK_CACHE; i++) {
		centry *c = &v->cache[i];
		if (c->used && c->hash == h && c->uid == g->uid && gm_equal(c->key, s)) {
			c->ref = 1;
			v->hits++;
			m.words = c->words;
			m.n_allowed = c->n_allowed;
			m.hit = 1;
			return m;
		}
	}
	v->misses++;
	/* clock: the first entry past the hand without its reference bit */
	centry *c;
	for (;;) {
		c = &v->cache[v->hand];
		v->hand = (v->hand + 1) % PM_GMASK_CACHE;
		if (!c->ref)
			break;
		c->ref = 0;
	}
	c->used = 0;
	c->n_allowed = walk(v, g, s, c->words);
	gm_copy(c->key, s);
	c->uid = g->uid;
	c->hash = h;
	c->ref = 1;
	c->used = 1;
	c->accepting = m.accepting;
	m.words = c->words;
	m.n_allowed = c->n_allowed;
	return m;
}

void gmask_advance(gm_vocab *v, const pm_grammar *g, gm_set *s, int32_t t)
{
	int32_t len = (int32_t)(v->offs[t + 1] - v->offs[t]);
	const uint8_t *b = v->bytes + v->offs[t];
	gm_set *a = &v->lv[0], *c = &v->lv[1];
	gm_copy(a, s);
	for (int32_t i = 0; i < len; i++) {
		gm_step(g, a, b[i], c);
		gm_set *x = a;
		a = c;
		c = x;
	}
	gm_copy(s, a);
}
