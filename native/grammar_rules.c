/*
 * grammar_rules.c: the compiler's builder and character classes in UTF-8
 * (contract in grammar_rules.h).
 */
#include "grammar_rules.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- builder ---- */


/* fail records the first error with the line and column of at. */
int fail(cx *c, const char *at, const char *fmt, ...)
{
	if (c->failed)
		return 0;
	c->failed = 1;
	int line = 1, col = 1;
	for (const char *q = c->text; q < at && q < c->end; q++) {
		if (*q == '\n')
			line++, col = 1;
		else
			col++;
	}
	char msg[200];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	snprintf(c->err, c->errlen, "grammar: line %d col %d: %s", line, col, msg);
	return 0;
}

int nomem(cx *c)
{
	if (!c->failed) {
		c->failed = 2;
		snprintf(c->err, c->errlen, "grammar: out of memory");
	}
	return 0;
}

int vec_push(cx *c, vec *v, int32_t x)
{
	if (v->n == v->cap) {
		int32_t nc = v->cap ? v->cap * 2 : 8;
		int32_t *nv = realloc(v->v, sizeof *nv * (size_t)nc);
		if (!nv)
			return nomem(c);
		v->v = nv;
		v->cap = nc;
	}
	v->v[v->n++] = x;
	if (++c->n_elems > PM_GRAMMAR_MAX_ELEMS)
		return fail(c, c->p, "grammar too large (over %d elements once expanded)",
			    PM_GRAMMAR_MAX_ELEMS);
	return 1;
}

int32_t new_rule(cx *c, const char *name, int32_t nlen)
{
	if (c->n_rules >= PM_GRAMMAR_MAX_RULES) {
		fail(c, c->p, "grammar too large (over %d rules once expanded)", PM_GRAMMAR_MAX_RULES);
		return -1;
	}
	if (c->n_rules == c->cap_rules) {
		int32_t nc = c->cap_rules ? c->cap_rules * 2 : 32;
		brule *nr = realloc(c->rules, sizeof *nr * (size_t)nc);
		if (!nr) {
			nomem(c);
			return -1;
		}
		c->rules = nr;
		c->cap_rules = nc;
	}
	brule *r = &c->rules[c->n_rules];
	memset(r, 0, sizeof *r);
	r->name = name;
	r->nlen = nlen;
	r->origin = name ? c->n_rules : c->cur;
	return c->n_rules++;
}

/* add_alt appends alternative v (taken over) to rule r. */
int add_alt(cx *c, int32_t r, vec v)
{
	brule *b = &c->rules[r];
	if (b->n_alts == b->cap_alts) {
		int32_t nc = b->cap_alts ? b->cap_alts * 2 : 4;
		vec *na = realloc(b->alts, sizeof *na * (size_t)nc);
		if (!na) {
			free(v.v);
			return nomem(c);
		}
		b->alts = na;
		b->cap_alts = nc;
	}
	b->alts[b->n_alts++] = v;
	if (++c->n_elems > PM_GRAMMAR_MAX_ELEMS) /* its END */
		return fail(c, c->p, "grammar too large (over %d elements once expanded)",
			    PM_GRAMMAR_MAX_ELEMS);
	return 1;
}

int32_t new_set(cx *c, const uint32_t w[8])
{
	if (c->n_sets == c->cap_sets) {
		int32_t nc = c->cap_sets ? c->cap_sets * 2 : 64;
		uint32_t(*ns)[8] = realloc(c->sets, sizeof *ns * (size_t)nc);
		if (!ns) {
			nomem(c);
			return -1;
		}
		c->sets = ns;
		c->cap_sets = nc;
	}
	memcpy(c->sets[c->n_sets], w, sizeof c->sets[0]);
	return c->n_sets++;
}

int32_t byte_sym(cx *c, uint8_t b)
{
	if (c->byte_set[b] < 0) {
		uint32_t w[8] = {0};
		w[b >> 5] |= 1u << (b & 31);
		c->byte_set[b] = new_set(c, w);
		if (c->byte_set[b] < 0)
			return -1;
	}
	return c->byte_set[b] << 2 | PM_GE_BYTES;
}

int32_t range_sym(cx *c, uint8_t lo, uint8_t hi)
{
	if (lo == hi)
		return byte_sym(c, lo);
	uint32_t w[8] = {0};
	for (int b = lo; b <= hi; b++)
		w[b >> 5] |= 1u << (b & 31);
	int32_t s = new_set(c, w);
	return s < 0 ? -1 : s << 2 | PM_GE_BYTES;
}

int utf8_encode(uint32_t cp, uint8_t out[4])
{
	if (cp < 0x80) {
		out[0] = (uint8_t)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (uint8_t)(0xC0 | cp >> 6);
		out[1] = (uint8_t)(0x80 | (cp & 0x3F));
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = (uint8_t)(0xE0 | cp >> 12);
		out[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
		out[2] = (uint8_t)(0x80 | (cp & 0x3F));
		return 3;
	}
	out[0] = (uint8_t)(0xF0 | cp >> 18);
	out[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
	out[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
	out[3] = (uint8_t)(0x80 | (cp & 0x3F));
	return 4;
}

/* ---- character classes to UTF-8 ---- */

/* One byte-range sequence: n bytes, byte 0 a set, bytes 1.. ranges. */
typedef struct {
	int n;
	uint32_t first[8];
	uint8_t lo[4], hi[4];
} useq;

typedef struct {
	useq *v;
	int n, cap;
} useqs;

static int useq_add(cx *c, useqs *q, uint32_t lo, uint32_t hi, int n)
{
	uint8_t a[4], b[4];
	utf8_encode(lo, a);
	utf8_encode(hi, b);
	for (int i = 0; i < q->n; i++) { /* same tail: widen the first byte */
		useq *s = &q->v[i];
		if (s->n != n || memcmp(s->lo + 1, a + 1, (size_t)n - 1) ||
		    memcmp(s->hi + 1, b + 1, (size_t)n - 1))
			continue;
		for (int x = a[0]; x <= b[0]; x++)
			s->first[x >> 5] |= 1u << (x & 31);
		return 1;
	}
	if (q->n == q->cap) {
		int nc = q->cap ? q->cap * 2 : 16;
		useq *nv = realloc(q->v, sizeof *nv * (size_t)nc);
		if (!nv)
			return nomem(c);
		q->v = nv;
		q->cap = nc;
	}
	useq *s = &q->v[q->n++];
	memset(s, 0, sizeof *s);
	s->n = n;
	memcpy(s->lo, a, 4);
	memcpy(s->hi, b, 4);
	for (int x = a[0]; x <= b[0]; x++)
		s->first[x >> 5] |= 1u << (x & 31);
	return 1;
}

/* split cuts [lo, hi] (all n-byte characters) into ranges whose UTF-8 forms
 * are byte-range sequences (every continuation byte ranging independently). */
static int split(cx *c, useqs *q, uint32_t lo, uint32_t hi, int n)
{
	for (int i = 1; i < n; i++) {
		uint32_t m = (1u << (6 * i)) - 1;
		if ((lo & ~m) != (hi & ~m)) {
			if ((lo & m) != 0)
				return split(c, q, lo, lo | m, n) && split(c, q, (lo | m) + 1, hi, n);
			if ((hi & m) != m)
				return split(c, q, lo, (hi & ~m) - 1, n) && split(c, q, hi & ~m, hi, n);
		}
	}
	return useq_add(c, q, lo, hi, n);
}

static int cmp_range(const void *a, const void *b)
{
	const crange *x = a, *y = b;
	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* class_sym turns code-point ranges (negated: their complement) into one
 * symbol: a byte set when every code point is ASCII, else a rule. */
int32_t class_sym(cx *c, crange *r, int n, int negate)
{
	qsort(r, (size_t)n, sizeof *r, cmp_range);
	int m = 0;
	for (int i = 0; i < n; i++) { /* merge */
		if (m > 0 && r[i].lo <= r[m - 1].hi + 1) {
			if (r[i].hi > r[m - 1].hi)
				r[m - 1].hi = r[i].hi;
		} else
			r[m++] = r[i];
	}
	crange out[2 * 64 + 4]; /* worst case below is bounded by the caller's cap */
	crange *o = out;
	int k = 0;
	crange *tmp = NULL;
	if (m + 3 > (int)(sizeof out / sizeof out[0])) {
		tmp = malloc(sizeof *tmp * (size_t)(m + 3));
		if (!tmp) {
			nomem(c);
			return -1;
		}
		o = tmp;
	}
	if (negate) {
		uint32_t next = 0;
		for (int i = 0; i < m; i++) {
			if (r[i].lo > next)
				o[k++] = (crange){next, r[i].lo - 1};
			next = r[i].hi + 1;
		}
		if (next <= 0x10FFFF)
			o[k++] = (crange){next, 0x10FFFF};
	} else {
		memcpy(o, r, sizeof *r * (size_t)m);
		k = m;
	}
	useqs q = {0};
	uint32_t ascii[8] = {0};
	int has_ascii = 0, ok = 1;
	static const uint32_t top[4] = {0x7F, 0x7FF, 0xFFFF, 0x10FFFF};
	for (int i = 0; i < k && ok; i++) {
		uint32_t lo = o[i].lo, hi = o[i].hi;
		for (int len = 1; len <= 4 && lo <= hi && ok; len++) {
			if (lo > top[len - 1])
				continue;
			uint32_t h = hi < top[len - 1] ? hi : top[len - 1];
			if (len == 1) {
				for (uint32_t x = lo; x <= h; x++)
					ascii[x >> 5] |= 1u << (x & 31);
				has_ascii = 1;
			} else if (len == 3 && lo <= 0xDFFF && h >= 0xD800) { /* no surrogates */
				if (lo < 0xD800)
					ok = split(c, &q, lo, 0xD7FF, 3);
				if (ok && h > 0xDFFF)
					ok = split(c, &q, 0xE000, h, 3);
			} else {
				ok = split(c, &q, lo, h, len);
			}
			lo = h + 1;
		}
	}
	free(tmp);
	if (!ok) {
		free(q.v);
		return -1;
	}
	if (q.n == 0) { /* ASCII only (or nothing: a set that matches no byte) */
		int32_t s = new_set(c, ascii);
		return s < 0 ? -1 : s << 2 | PM_GE_BYTES;
	}
	int32_t rule = new_rule(c, NULL, 0);
	if (rule < 0) {
		free(q.v);
		return -1;
	}
	if (has_ascii) {
		vec v = {0};
		int32_t s = new_set(c, ascii);
		if (s < 0 || !vec_push(c, &v, s << 2 | PM_GE_BYTES) || !add_alt(c, rule, v)) {
			free(q.v);
			return -1;
		}
	}
	for (int i = 0; i < q.n; i++) {
		vec v = {0};
		int32_t s = new_set(c, q.v[i].first);
		ok = s >= 0 && vec_push(c, &v, s << 2 | PM_GE_BYTES);
		for (int j = 1; j < q.v[i].n && ok; j++) {
			int32_t sym = range_sym(c, q.v[i].lo[j], q.v[i].hi[j]);
			ok = sym >= 0 && vec_push(c, &v, sym);
		}
		if (!ok || !add_alt(c, rule, v)) {
			if (!ok)
				free(v.v);
			free(q.v);
			return -1;
		}
	}
	free(q.v);
	return rule << 2 | PM_GE_RULE;
}
