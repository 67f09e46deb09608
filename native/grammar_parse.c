/*
 * grammar_parse.c: the GBNF parser (contract in grammar_parse.h).
 */
#include "grammar_parse.h"

#include <stdlib.h>
#include <string.h>

/* ---- characters ---- */

static void skip_space(cx *c, int newline_ok)
{
	while (c->p < c->end) {
		char ch = *c->p;
		if (ch == ' ' || ch == '\t' || ch == '\r')
			c->p++;
		else if (ch == '#')
			while (c->p < c->end && *c->p != '\n')
				c->p++;
		else if (ch == '\n' && newline_ok)
			c->p++;
		else
			return;
	}
}

static int is_word(char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
	       ch == '-' || ch == '_';
}

static int hexval(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

/* utf8_decode reads one UTF-8 character at c->p; -1 on invalid UTF-8. */
static int32_t utf8_decode(cx *c)
{
	const unsigned char *s = (const unsigned char *)c->p;
	size_t left = (size_t)(c->end - c->p);
	int n;
	uint32_t cp;
	if (s[0] < 0x80)
		n = 1, cp = s[0];
	else if ((s[0] & 0xE0) == 0xC0)
		n = 2, cp = s[0] & 0x1F;
	else if ((s[0] & 0xF0) == 0xE0)
		n = 3, cp = s[0] & 0x0F;
	else if ((s[0] & 0xF8) == 0xF0)
		n = 4, cp = s[0] & 0x07;
	else
		return -1;
	if ((size_t)n > left)
		return -1;
	for (int i = 1; i < n; i++) {
		if ((s[i] & 0xC0) != 0x80)
			return -1;
		cp = cp << 6 | (s[i] & 0x3F);
	}
	static const uint32_t minv[5] = {0, 0, 0x80, 0x800, 0x10000};
	if (cp < minv[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
		return -1;
	c->p += n;
	return (int32_t)cp;
}

/* parse_char reads one character of a literal or class (escapes included);
 * -1 after an error. */
static int32_t parse_char(cx *c)
{
	const char *at = c->p;
	if (c->p >= c->end) {
		fail(c, at, "unexpected end of grammar");
		return -1;
	}
	if (*c->p != '\\') {
		int32_t cp = utf8_decode(c);
		if (cp < 0)
			fail(c, at, "invalid UTF-8");
		return cp;
	}
	c->p++;
	if (c->p >= c->end) {
		fail(c, at, "unexpected end after \\");
		return -1;
	}
	char e = *c->p++;
	int digits = 0;
	switch (e) {
	case 'n': return '\n';
	case 'r': return '\r';
	case 't': return '\t';
	case '\\': case '"': case '\'': case '[': case ']': case '-': case '/': case '^':
		return (unsigned char)e;
	case 'x': digits = 2; break;
	case 'u': digits = 4; break;
	case 'U': digits = 8; break;
	default:
		fail(c, at, "unknown escape \\%c", e);
		return -1;
	}
	uint32_t v = 0;
	for (int i = 0; i < digits; i++) {
		int h = c->p < c->end ? hexval(*c->p) : -1;
		if (h < 0) {
			fail(c, at, "\\%c needs %d hex digits", e, digits);
			return -1;
		}
		v = v << 4 | (uint32_t)h;
		c->p++;
	}
	if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) {
		fail(c, at, "escape \\%c is not a Unicode scalar value (0x%X)", e, v);
		return -1;
	}
	return (int32_t)v;
}

/* parse_class reads [...] (c->p after '['). */
static int32_t parse_class(cx *c)
{
	const char *at = c->p - 1;
	int negate = 0;
	if (c->p < c->end && *c->p == '^')
		negate = 1, c->p++;
	crange *r = NULL;
	int n = 0, cap = 0;
	while (c->p < c->end && *c->p != ']') {
		int32_t lo = parse_char(c), hi = lo;
		if (lo < 0)
			goto bad;
		if (c->p + 1 < c->end && *c->p == '-' && c->p[1] != ']') {
			c->p++;
			hi = parse_char(c);
			if (hi < 0)
				goto bad;
			if (hi < lo) {
				fail(c, at, "class range is backwards (U+%04X-U+%04X)", lo, hi);
				goto bad;
			}
		}
		if (n == cap) {
			cap = cap ? cap * 2 : 8;
			crange *nr = realloc(r, sizeof *nr * (size_t)cap);
			if (!nr) {
				nomem(c);
				goto bad;
			}
			r = nr;
		}
		if (++c->n_elems > PM_GRAMMAR_MAX_ELEMS) {
			fail(c, at, "grammar too large");
			goto bad;
		}
		r[n++] = (crange){(uint32_t)lo, (uint32_t)hi};
	}
	if (c->p >= c->end) {
		fail(c, at, "unterminated character class");
		goto bad;
	}
	c->p++;
	int32_t sym = class_sym(c, r, n, negate);
	free(r);
	return sym;
bad:
	free(r);
	return -1;
}

/* ---- rules ---- */

int32_t find_rule(cx *c, const char *name, int32_t nlen)
{
	for (int32_t i = 0; i < c->n_rules; i++)
		if (c->rules[i].name && c->rules[i].nlen == nlen &&
		    !memcmp(c->rules[i].name, name, (size_t)nlen))
			return i;
	return -1;
}

/* ref_rule returns the rule called name, creating it (undefined) at first use. */
static int32_t ref_rule(cx *c, const char *name, int32_t nlen)
{
	int32_t r = find_rule(c, name, nlen);
	if (r >= 0)
		return r;
	r = new_rule(c, name, nlen);
	if (r >= 0) {
		int line = 1, col = 1;
		for (const char *q = c->text; q < name; q++) {
			if (*q == '\n')
				line++, col = 1;
			else
				col++;
		}
		c->rules[r].line = line;
		c->rules[r].col = col;
	}
	return r;
}

/* wrap makes a rule of one alternative: syms[0..n). */
static int32_t wrap(cx *c, const int32_t *syms, int n)
{
	int32_t r = new_rule(c, NULL, 0);
	if (r < 0)
		return -1;
	vec v = {0};
	for (int i = 0; i < n; i++)
		if (!vec_push(c, &v, syms[i])) {
			free(v.v);
			return -1;
		}
	return add_alt(c, r, v) ? r : -1;
}

/* opt_rule: R ::= x tail | (tail = -1: none) */
static int32_t opt_rule(cx *c, int32_t x, int32_t tail, int self)
{
	int32_t r = new_rule(c, NULL, 0);
	if (r < 0)
		return -1;
	vec a = {0}, b = {0};
	int ok = vec_push(c, &a, x);
	if (ok && self)
		ok = vec_push(c, &a, r << 2 | PM_GE_RULE);
	else if (ok && tail >= 0)
		ok = vec_push(c, &a, tail);
	if (!ok) {
		free(a.v);
		return -1;
	}
	return add_alt(c, r, a) && add_alt(c, r, b) ? r : -1;
}

static int parse_alternates(cx *c, int32_t rule, int nested);

static int parse_int(cx *c, int *v)
{
	const char *at = c->p;
	long x = 0;
	int digits = 0;
	while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
		x = x * 10 + (*c->p++ - '0');
		if (x > PM_GRAMMAR_MAX_REPEAT)
			return fail(c, at, "repetition count over %d", PM_GRAMMAR_MAX_REPEAT);
		digits++;
	}
	if (!digits)
		return fail(c, at, "expected a number");
	*v = (int)x;
	return 1;
}

/* postfix applies *, +, ?, {..} at c->p to out[start..). */
static int postfix(cx *c, vec *out, int32_t start)
{
	const char *at = c->p;
	char op = *c->p++;
	int m = 0, n = -1; /* n -1: unbounded */
	if (op == '*')
		m = 0;
	else if (op == '+')
		m = 1;
	else if (op == '?')
		m = 0, n = 1;
	else { /* { m } | { m , } | { m , n } */
		skip_space(c, 0);
		if (!parse_int(c, &m))
			return 0;
		skip_space(c, 0);
		if (c->p < c->end && *c->p == ',') {
			c->p++;
			skip_space(c, 0);
			if (c->p < c->end && *c->p != '}') {
				if (!parse_int(c, &n))
					return 0;
				if (n < m)
					return fail(c, at, "repetition {%d,%d}: max below min", m, n);
			}
		} else {
			n = m;
		}
		skip_space(c, 0);
		if (c->p >= c->end || *c->p != '}')
			return fail(c, at, "expected } to close the repetition");
		c->p++;
	}
	if (start >= out->n)
		return fail(c, at, "'%c' follows no symbol", op);
	int32_t x = out->v[start];
	if (out->n - start > 1) { /* a literal of several bytes: one symbol */
		int32_t w = wrap(c, out->v + start, out->n - start);
		if (w < 0)
			return 0;
		x = w << 2 | PM_GE_RULE;
	}
	c->n_elems -= out->n - start;
	out->n = start;
	for (int i = 0; i < m; i++)
		if (!vec_push(c, out, x))
			return 0;
	if (n < 0) {
		int32_t s = opt_rule(c, x, -1, 1);
		return s >= 0 && vec_push(c, out, s << 2 | PM_GE_RULE);
	}
	int32_t tail = -1;
	for (int k = 1; k <= n - m; k++) {
		int32_t r = opt_rule(c, x, tail, 0);
		if (r < 0)
			return 0;
		tail = r << 2 | PM_GE_RULE;
	}
	return tail < 0 || vec_push(c, out, tail);
}

/* parse_sequence reads one alternative into out. */
static int parse_sequence(cx *c, vec *out, int nested)
{
	int32_t last = -1; /* where the last symbol starts in out */
	for (;;) {
		skip_space(c, nested);
		if (c->p >= c->end)
			return 1;
		char ch = *c->p;
		const char *at = c->p;
		if (ch == '"') {
			c->p++;
			last = out->n;
			while (c->p < c->end && *c->p != '"') {
				int32_t cp = parse_char(c);
				if (cp < 0)
					return 0;
				uint8_t b[4];
				int nb = utf8_encode((uint32_t)cp, b);
				for (int i = 0; i < nb; i++) {
					int32_t s = byte_sym(c, b[i]);
					if (s < 0 || !vec_push(c, out, s))
						return 0;
				}
			}
			if (c->p >= c->end)
				return fail(c, at, "unterminated string literal");
			c->p++;
		} else if (ch == '[') {
			c->p++;
			int32_t s = parse_class(c);
			if (s < 0)
				return 0;
			last = out->n;
			if (!vec_push(c, out, s))
				return 0;
		} else if (ch == '.') {
			c->p++;
			if (c->any_rule < 0) {
				crange all = {0, 0x10FFFF};
				int32_t s = class_sym(c, &all, 1, 0);
				if (s < 0)
					return 0;
				c->any_rule = s;
			}
			last = out->n;
			if (!vec_push(c, out, c->any_rule))
				return 0;
		} else if (is_word(ch)) {
			const char *name = c->p;
			while (c->p < c->end && is_word(*c->p))
				c->p++;
			int32_t r = ref_rule(c, name, (int32_t)(c->p - name));
			if (r < 0)
				return 0;
			last = out->n;
			if (!vec_push(c, out, r << 2 | PM_GE_RULE))
				return 0;
		} else if (ch == '(') {
			if (++c->depth > PM_GRAMMAR_MAX_NEST)
				return fail(c, at, "groups nested deeper than %d", PM_GRAMMAR_MAX_NEST);
			c->p++;
			int32_t r = new_rule(c, NULL, 0);
			if (r < 0)
				return 0;
			skip_space(c, 1);
			if (!parse_alternates(c, r, 1))
				return 0;
			if (c->p >= c->end || *c->p != ')')
				return fail(c, at, "unclosed (");
			c->p++;
			c->depth--;
			last = out->n;
			if (!vec_push(c, out, r << 2 | PM_GE_RULE))
				return 0;
		} else if (ch == '*' || ch == '+' || ch == '?' || ch == '{') {
			if (last < 0)
				return fail(c, at, "'%c' follows no symbol", ch);
			if (!postfix(c, out, last))
				return 0;
		} else if (ch == '<' || ch == '!') {
			return fail(c, at, "token references (<...>, !<...>) are not supported");
		} else if (ch == ')' || ch == '|' || ch == '\n') {
			return 1;
		} else {
			return fail(c, at, "unexpected '%c'", ch);
		}
	}
}

static int parse_alternates(cx *c, int32_t rule, int nested)
{
	for (;;) {
		vec v = {0};
		if (!parse_sequence(c, &v, nested) || !add_alt(c, rule, v)) {
			free(v.v);
			return 0;
		}
		if (c->p >= c->end || *c->p != '|')
			return 1;
		c->p++;
		skip_space(c, 1);
	}
}

int parse_rules(cx *c)
{
	for (;;) {
		skip_space(c, 1);
		if (c->p >= c->end)
			return 1;
		const char *name = c->p;
		while (c->p < c->end && is_word(*c->p))
			c->p++;
		int32_t nlen = (int32_t)(c->p - name);
		if (nlen == 0)
			return fail(c, name, "expected a rule name");
		skip_space(c, 0);
		if (c->end - c->p < 3 || memcmp(c->p, "::=", 3))
			return fail(c, c->p, "expected ::= after rule name");
		c->p += 3;
		int32_t r = find_rule(c, name, nlen);
		if (r >= 0 && c->rules[r].defined)
			return fail(c, name, "rule %.*s defined twice", (int)nlen, name);
		if (r < 0 && (r = new_rule(c, name, nlen)) < 0)
			return 0;
		c->rules[r].defined = 1;
		c->cur = r;
		skip_space(c, 1);
		if (!parse_alternates(c, r, 0))
			return 0;
		if (c->p < c->end && *c->p != '\n')
			return fail(c, c->p, "unexpected '%c' after rule %.*s", *c->p, (int)nlen, name);
	}
}

