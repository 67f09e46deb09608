/*
 * gmatch.c: the byte-level grammar matcher (gmatch.h).
 */
#include <string.h>

#include "gmatch.h"

/* add appends stack stk[0..len) to s unless s holds it already. */
static void add(gm_set *s, const int32_t *stk, int len)
{
	if (s->status)
		return;
	for (int i = 0; i < s->n; i++)
		if (s->off[i + 1] - s->off[i] == len &&
		    !memcmp(s->pos + s->off[i], stk, (size_t)len * sizeof *stk))
			return;
	if (s->n == PM_GMATCH_MAX_STACKS || s->used + len > PM_GMATCH_MAX_WORDS) {
		s->status = GM_OVERFLOW;
		return;
	}
	memcpy(s->pos + s->used, stk, (size_t)len * sizeof *stk);
	s->used += len;
	s->off[++s->n] = s->used;
}

/* expand adds to s every normalized stack stk[0..len) leads to: its top
 * resolved until it is a byte set or the stack is empty. stk is the
 * caller's scratch of PM_GMATCH_MAX_DEPTH + 1 entries and may be changed. */
static void expand(const pm_grammar *g, gm_set *s, int32_t *stk, int len, int nest)
{
	for (;;) {
		if (s->status)
			return;
		if (len == 0) {
			add(s, stk, 0);
			return;
		}
		int32_t p = stk[len - 1], x = g->elems[p];
		if (PM_GE_TAG(x) == PM_GE_BYTES) {
			add(s, stk, len);
			return;
		}
		if (PM_GE_TAG(x) == PM_GE_END) { /* the alternative ends: return */
			len--;
			continue;
		}
		/* a rule reference: each alternative on top of the return frame */
		if (nest >= PM_GMATCH_MAX_EXPAND) {
			s->status = GM_OVERFLOW;
			return;
		}
		int32_t r = PM_GE_VAL(x), base = len - 1;
		if (PM_GE_TAG(g->elems[p + 1]) != PM_GE_END) /* else a tail call */
			stk[base++] = p + 1;
		if (base >= PM_GMATCH_MAX_DEPTH) {
			s->status = GM_OVERFLOW;
			return;
		}
		int32_t a0 = g->rule_alt0[r], a1 = g->rule_alt0[r + 1];
		int32_t keep[PM_GMATCH_MAX_DEPTH + 1];
		for (int32_t a = a0; a < a1; a++) {
			memcpy(keep, stk, (size_t)base * sizeof *stk);
			keep[base] = g->alt_start[a];
			expand(g, s, keep, base + 1, nest + 1);
		}
		return;
	}
}

void gm_init(const pm_grammar *g, gm_set *s)
{
	s->n = s->used = s->status = 0;
	s->off[0] = 0;
	int32_t stk[PM_GMATCH_MAX_DEPTH + 1];
	for (int32_t a = g->rule_alt0[g->root]; a < g->rule_alt0[g->root + 1]; a++) {
		stk[0] = g->alt_start[a];
		expand(g, s, stk, 1, 0);
	}
	if (s->status)
		s->n = s->used = 0;
}

void gm_step(const pm_grammar *g, const gm_set *src, uint8_t b, gm_set *dst)
{
	dst->n = dst->used = dst->status = 0;
	dst->off[0] = 0;
	int32_t stk[PM_GMATCH_MAX_DEPTH + 1];
	for (int i = 0; i < src->n && !dst->status; i++) {
		int len = src->off[i + 1] - src->off[i];
		if (len == 0)
			continue;
		const int32_t *t = src->pos + src->off[i];
		int32_t p = t[len - 1];
		if (!pm_grammar_set_has(g, PM_GE_VAL(g->elems[p]), b))
			continue;
		memcpy(stk, t, (size_t)len * sizeof *stk);
		stk[len - 1] = p + 1;
		expand(g, dst, stk, len, 0);
	}
	if (dst->status)
		dst->n = dst->used = 0;
}

int gm_accepting(const gm_set *s)
{
	for (int i = 0; i < s->n; i++)
		if (s->off[i + 1] == s->off[i])
			return 1;
	return 0;
}

void gm_copy(gm_set *dst, const gm_set *src)
{
	dst->n = src->n;
	dst->used = src->used;
	dst->status = src->status;
	memcpy(dst->off, src->off, (size_t)(src->n + 1) * sizeof *src->off);
	memcpy(dst->pos, src->pos, (size_t)src->used * sizeof *src->pos);
}

/* cmp orders stacks i and j of s: shorter first, then by positions. */
static int cmp(const gm_set *s, const int32_t *o, int i, int j)
{
	int li = s->off[i + 1] - s->off[i], lj = s->off[j + 1] - s->off[j];
	if (li != lj)
		return li < lj ? -1 : 1;
	const int32_t *a = s->pos + o[i], *b = s->pos + o[j];
	for (int k = 0; k < li; k++)
		if (a[k] != b[k])
			return a[k] < b[k] ? -1 : 1;
	return 0;
}

uint64_t gm_canon(gm_set *s)
{
	/* insertion sort of stack indices (sets are small), then a rewrite */
	int32_t idx[PM_GMATCH_MAX_STACKS], o[PM_GMATCH_MAX_STACKS + 1];
	memcpy(o, s->off, sizeof o[0] * (size_t)(s->n + 1));
	for (int i = 0; i < s->n; i++) {
		int j = i;
		while (j > 0 && cmp(s, o, idx[j - 1], i) > 0) {
			idx[j] = idx[j - 1];
			j--;
		}
		idx[j] = i;
	}
	int32_t tmp[PM_GMATCH_MAX_WORDS];
	int32_t used = 0;
	uint64_t h = 0xcbf29ce484222325ULL ^ (uint64_t)s->n;
	for (int i = 0; i < s->n; i++) {
		int k = idx[i], len = o[k + 1] - o[k];
		memcpy(tmp + used, s->pos + o[k], (size_t)len * sizeof *tmp);
		h = (h ^ (uint64_t)len) * 0x100000001b3ULL;
		for (int q = 0; q < len; q++)
			h = (h ^ (uint32_t)tmp[used + q]) * 0x100000001b3ULL;
		used += len;
		s->off[i + 1] = used;
	}
	memcpy(s->pos, tmp, (size_t)used * sizeof *tmp);
	return h ^ (h >> 29);
}

int gm_equal(const gm_set *a, const gm_set *b)
{
	return a->n == b->n && a->used == b->used &&
	       !memcmp(a->off, b->off, (size_t)(a->n + 1) * sizeof *a->off) &&
	       !memcmp(a->pos, b->pos, (size_t)a->used * sizeof *a->pos);
}
