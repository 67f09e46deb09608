/*
 * grammar_match.c: the byte-level matcher (grammar_match.h).
 */
#include <string.h>

#include "grammar_match.h"

typedef struct {
	const pm_grammar *g;
	int32_t *out;
	int32_t *arena; /* scratch for the frames of each expansion */
	int32_t used;
	int32_t calls;
	int overflow;
} ex;

/* emit adds stack f[0..n) to x->out unless it holds it already. */
static void emit(ex *x, const int32_t *f, int n)
{
	int32_t *o = x->out;
	int32_t k = 2;
	for (int32_t i = 0; i < o[0]; i++) {
		int32_t d = o[k];
		if (d == n && memcmp(o + k + 1, f, sizeof *f * (size_t)n) == 0)
			return;
		k += 1 + d;
	}
	if (o[0] >= GM_MAX_STACKS || o[1] + 1 + n > GM_STATE_CAP) {
		x->overflow = 1;
		return;
	}
	o[k] = n;
	memcpy(o + k + 1, f, sizeof *f * (size_t)n);
	o[0]++;
	o[1] = k + 1 + n;
}

/* expand emits every stack that f[0..n) (a copy the call may change)
 * stands for once its finished alternatives are popped and the rule at its
 * top is expanded, until each top is a byte set or the stack is empty. */
static void expand(ex *x, int32_t *f, int n)
{
	const pm_grammar *g = x->g;
	if (x->overflow)
		return;
	if (++x->calls > GM_MAX_CALLS) {
		x->overflow = 1;
		return;
	}
	while (n > 0 && PM_GE_TAG(g->elems[f[n - 1]]) == PM_GE_END)
		n--;
	if (n == 0 || PM_GE_TAG(g->elems[f[n - 1]]) == PM_GE_BYTES) {
		emit(x, f, n);
		return;
	}
	int32_t rule = PM_GE_VAL(g->elems[f[n - 1]]);
	int32_t cont = f[n - 1] + 1;
	int m = n - 1;
	if (PM_GE_TAG(g->elems[cont]) != PM_GE_END)
		f[m++] = cont; /* return here; a reference last in its alternative needs no frame */
	if (m + 1 > GM_MAX_DEPTH || x->used + m + 1 > GM_SCRATCH_WORDS) {
		x->overflow = 1;
		return;
	}
	int32_t *c = x->arena + x->used;
	x->used += m + 1;
	for (int32_t a = g->rule_alt0[rule]; a < g->rule_alt0[rule + 1] && !x->overflow; a++) {
		memcpy(c, f, sizeof *f * (size_t)m);
		c[m] = g->alt_start[a];
		expand(x, c, m + 1);
	}
	x->used -= m + 1;
}

static void clear(int32_t *st)
{
	st[0] = 0;
	st[1] = 2;
}

int gm_start(const pm_grammar *g, gm_scratch *sc, int32_t *st)
{
	ex x = {g, st, sc->w, 0, 0, 0};
	clear(st);
	int32_t f[1];
	for (int32_t a = g->rule_alt0[g->root]; a < g->rule_alt0[g->root + 1] && !x.overflow; a++) {
		f[0] = g->alt_start[a];
		expand(&x, f, 1);
	}
	if (x.overflow) {
		clear(st);
		return -1;
	}
	return 0;
}

int gm_advance(const pm_grammar *g, gm_scratch *sc, const int32_t *st, uint8_t b, int32_t *out)
{
	ex x = {g, out, sc->w, 0, 0, 0};
	clear(out);
	int32_t k = 2;
	for (int32_t i = 0; i < st[0]; i++) {
		int32_t d = st[k];
		const int32_t *f = st + k + 1;
		k += 1 + d;
		if (d == 0)
			continue; /* ended: takes no more bytes */
		int32_t top = f[d - 1];
		if (!pm_grammar_set_has(g, PM_GE_VAL(g->elems[top]), b))
			continue;
		if (x.used + d > GM_SCRATCH_WORDS) {
			x.overflow = 1;
			break;
		}
		int32_t *c = x.arena + x.used;
		x.used += d;
		memcpy(c, f, sizeof *f * (size_t)d);
		c[d - 1] = top + 1;
		expand(&x, c, d);
		x.used -= d;
		if (x.overflow)
			break;
	}
	if (x.overflow) {
		clear(out);
		return -1;
	}
	return out[0];
}

int gm_advance_bytes(const pm_grammar *g, gm_scratch *sc, int32_t *st, const uint8_t *bytes, int n,
		     int32_t *tmp)
{
	if (n == 0)
		return st[0];
	const int32_t *a = st;
	int32_t *b = tmp;
	for (int i = 0; i < n; i++) {
		int rc = gm_advance(g, sc, a, bytes[i], b);
		if (rc <= 0)
			return rc; /* st untouched: only tmp was written */
		a = b;
		b = b == tmp ? tmp + GM_STATE_CAP : tmp;
	}
	memcpy(st, a, sizeof *st * (size_t)a[1]);
	return st[0];
}

int gm_accepting(const int32_t *st)
{
	int32_t k = 2;
	for (int32_t i = 0; i < st[0]; i++) {
		if (st[k] == 0)
			return 1;
		k += 1 + st[k];
	}
	return 0;
}

static int cmp_stack(const int32_t *a, const int32_t *b)
{
	if (a[0] != b[0])
		return a[0] < b[0] ? -1 : 1;
	for (int32_t i = 1; i <= a[0]; i++)
		if (a[i] != b[i])
			return a[i] < b[i] ? -1 : 1;
	return 0;
}

void gm_canon(int32_t *st, int32_t *tmp)
{
	int32_t n = st[0];
	if (n < 2)
		return;
	/* offsets of the stacks, insertion-sorted (states hold few stacks) */
	int32_t off[GM_MAX_STACKS];
	int32_t k = 2;
	for (int32_t i = 0; i < n; i++) {
		int32_t j = i;
		while (j > 0 && cmp_stack(st + off[j - 1], st + k) > 0) {
			off[j] = off[j - 1];
			j--;
		}
		off[j] = k;
		k += 1 + st[k];
	}
	tmp[0] = n;
	int32_t w = 2;
	for (int32_t i = 0; i < n; i++) {
		int32_t d = st[off[i]];
		memcpy(tmp + w, st + off[i], sizeof *st * (size_t)(d + 1));
		w += d + 1;
	}
	tmp[1] = w;
	memcpy(st, tmp, sizeof *st * (size_t)w);
}
