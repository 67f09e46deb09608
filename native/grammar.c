/*
 * grammar.c: compiling GBNF (contract in grammar.h): grammar_parse.c fills
 * a builder, then this file checks it (every reference defined, a root, no
 * left recursion) and flattens it into elems.
 *
 */
#include "grammar.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar_parse.h"
#include "model.h"

/* ---- checks ---- */

/* check_left_recursion refuses a rule that reaches itself before a byte. */
static int check_left_recursion(cx *c)
{
	int32_t n = c->n_rules;
	char *nullable = calloc((size_t)n, 1);
	char *color = calloc((size_t)n, 1);
	int32_t *stk = malloc(sizeof *stk * (size_t)n * 2 + 8);
	if (!nullable || !color || !stk) {
		free(nullable), free(color), free(stk);
		return nomem(c);
	}
	for (int changed = 1; changed;) { /* nullable rules, to a fixed point */
		changed = 0;
		for (int32_t r = 0; r < n; r++) {
			if (nullable[r])
				continue;
			for (int32_t a = 0; a < c->rules[r].n_alts && !nullable[r]; a++) {
				vec *v = &c->rules[r].alts[a];
				int all = 1;
				for (int32_t i = 0; i < v->n && all; i++)
					all = PM_GE_TAG(v->v[i]) == PM_GE_RULE && nullable[PM_GE_VAL(v->v[i])];
				if (all)
					nullable[r] = changed = 1;
			}
		}
	}
	/* depth-first over "r may start with s"; stk holds (rule, next edge) */
	int ok = 1;
	for (int32_t root = 0; root < n && ok; root++) {
		if (color[root])
			continue;
		int32_t sp = 0;
		stk[sp++] = root;
		stk[sp++] = 0;
		color[root] = 1;
		while (sp > 0 && ok) {
			int32_t r = stk[sp - 2], e = stk[sp - 1], k = 0, next = -1;
			for (int32_t a = 0; a < c->rules[r].n_alts && next < 0; a++) {
				vec *v = &c->rules[r].alts[a];
				for (int32_t i = 0; i < v->n; i++) {
					if (PM_GE_TAG(v->v[i]) != PM_GE_RULE)
						break;
					int32_t s = PM_GE_VAL(v->v[i]);
					if (k++ == e) {
						next = s;
						break;
					}
					if (!nullable[s])
						break;
				}
			}
			if (next < 0) {
				color[r] = 2;
				sp -= 2;
				continue;
			}
			stk[sp - 1] = e + 1;
			if (color[next] == 1) {
				brule *o = &c->rules[c->rules[next].origin];
				fail(c, o->name ? o->name : c->text,
				     "rule %.*s is left-recursive (it can reach itself without consuming "
				     "input; a repetition of something that can be empty counts)",
				     (int)o->nlen, o->name ? o->name : "");
				ok = 0;
			} else if (color[next] == 0) {
				color[next] = 1;
				stk[sp++] = next;
				stk[sp++] = 0;
			}
		}
	}
	free(nullable), free(color), free(stk);
	return ok;
}

/* ---- API ---- */

static _Atomic uint64_t next_uid = 1;

static void free_builder(cx *c)
{
	for (int32_t r = 0; r < c->n_rules; r++) {
		for (int32_t a = 0; a < c->rules[r].n_alts; a++)
			free(c->rules[r].alts[a].v);
		free(c->rules[r].alts);
	}
	free(c->rules);
	free(c->sets);
}

static void grammar_free(pm_grammar *g)
{
	if (!g)
		return;
	free(g->elems);
	free(g->alt_start);
	free(g->rule_alt0);
	free(g->sets);
	free(g);
}

int pm_grammar_compile(const char *text, size_t len, pm_grammar **out, char *err, size_t errlen)
{
	char dummy[8];
	if (!err || errlen == 0)
		err = dummy, errlen = sizeof dummy;
	err[0] = 0;
	if (!out || (!text && len)) {
		snprintf(err, errlen, "grammar: NULL argument");
		return PM_ERR_ARG;
	}
	*out = NULL;
	if (len > PM_GRAMMAR_MAX_TEXT) {
		snprintf(err, errlen, "grammar: %zu bytes of text, at most %d", len, PM_GRAMMAR_MAX_TEXT);
		return PM_ERR_ARG;
	}
	cx c = {.text = text, .p = text, .end = text + len, .err = err, .errlen = errlen,
		.any_rule = -1, .cur = 0};
	for (int i = 0; i < 256; i++)
		c.byte_set[i] = -1;
	int ok = len > 0 && parse_rules(&c);
	if (len == 0)
		fail(&c, text, "empty grammar");
	int32_t root = -1;
	for (int32_t r = 0; ok && r < c.n_rules; r++)
		if (c.rules[r].name && !c.rules[r].defined) {
			snprintf(err, errlen, "grammar: line %d col %d: rule %.*s is not defined",
				 (int)c.rules[r].line, (int)c.rules[r].col, (int)c.rules[r].nlen,
				 c.rules[r].name);
			ok = 0;
			c.failed = 1;
		}
	if (ok && (root = find_rule(&c, "root", 4)) < 0) {
		snprintf(err, errlen, "grammar: no root rule");
		ok = 0;
		c.failed = 1;
	}
	if (ok)
		ok = check_left_recursion(&c);
	pm_grammar *g = NULL;
	if (ok) {
		g = calloc(1, sizeof *g);
		int32_t n_alts = 0;
		for (int32_t r = 0; r < c.n_rules; r++)
			n_alts += c.rules[r].n_alts;
		if (g) {
			g->elems = malloc(sizeof *g->elems * (size_t)(c.n_elems + 1));
			g->alt_start = malloc(sizeof *g->alt_start * (size_t)(n_alts + 1));
			g->rule_alt0 = malloc(sizeof *g->rule_alt0 * (size_t)(c.n_rules + 1));
			g->sets = malloc(sizeof *g->sets * (size_t)(c.n_sets + 1));
		}
		if (!g || !g->elems || !g->alt_start || !g->rule_alt0 || !g->sets) {
			grammar_free(g);
			g = NULL;
			nomem(&c);
			ok = 0;
		}
	}
	if (ok) {
		int32_t ne = 0, na = 0;
		for (int32_t r = 0; r < c.n_rules; r++) {
			g->rule_alt0[r] = na;
			for (int32_t a = 0; a < c.rules[r].n_alts; a++) {
				vec *v = &c.rules[r].alts[a];
				g->alt_start[na++] = ne;
				if (v->n) /* an empty alternative has no vector */
					memcpy(g->elems + ne, v->v, sizeof *v->v * (size_t)v->n);
				ne += v->n;
				g->elems[ne++] = PM_GE_END;
			}
		}
		g->rule_alt0[c.n_rules] = na;
		g->n_elems = ne;
		g->n_alts = na;
		g->n_rules = c.n_rules;
		memcpy(g->sets, c.sets, sizeof *g->sets * (size_t)c.n_sets);
		g->n_sets = c.n_sets;
		g->root = root;
		g->uid = atomic_fetch_add(&next_uid, 1);
		atomic_init(&g->refs, 1);
		*out = g;
	}
	int failed = c.failed;
	free_builder(&c);
	if (ok)
		return PM_OK;
	return failed == 2 ? PM_ERR_NOMEM : PM_ERR_ARG;
}

void pm_grammar_retain(pm_grammar *g)
{
	if (g)
		atomic_fetch_add(&g->refs, 1);
}

void pm_grammar_release(pm_grammar *g)
{
	if (g && atomic_fetch_sub(&g->refs, 1) == 1)
		grammar_free(g);
}

