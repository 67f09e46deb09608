/*
 * grammar_rules.h: the grammar compiler's builder: rules whose alternatives
 * are lists of symbols (a rule reference or a byte set, tagged as in the
 * compiled form), the byte sets, the bounds, and character classes turned
 * into UTF-8 byte sequences. Used by grammar_parse.c (which fills a
 * builder from GBNF text) and grammar.c (which checks and flattens it).
 * Every function returns 0 (or -1 for an index) after recording the first
 * error in the builder; nothing exits.
 */
#ifndef PM_GRAMMAR_RULES_H
#define PM_GRAMMAR_RULES_H

#include <stddef.h>
#include <stdint.h>

/* Bounds: larger grammars are refused, never slow. */
#define PM_GRAMMAR_MAX_TEXT (1 << 20)   /* bytes of GBNF text */
#define PM_GRAMMAR_MAX_ELEMS (1 << 20)  /* compiled elements */
#define PM_GRAMMAR_MAX_RULES (1 << 18)  /* rules, generated ones included */
#define PM_GRAMMAR_MAX_NEST 128         /* nesting of groups */
#define PM_GRAMMAR_MAX_REPEAT 10000     /* m and n of {m,n} */

/* Element encoding: tag in the low 2 bits, value above. */
enum { PM_GE_END = 0, PM_GE_RULE = 1, PM_GE_BYTES = 2 };
#define PM_GE_TAG(x) ((x) & 3)
#define PM_GE_VAL(x) ((x) >> 2)

typedef struct {
	int32_t *v;
	int32_t n, cap;
} vec;

typedef struct {
	const char *name; /* into the text; NULL for generated rules */
	int32_t nlen;
	int32_t origin;   /* the user rule a generated rule came from */
	int32_t defined;  /* 1 once its ::= was seen */
	int32_t line, col; /* first reference, for "undefined rule" */
	vec *alts;
	int32_t n_alts, cap_alts;
} brule;

typedef struct {
	const char *text, *p, *end;
	char *err;
	size_t errlen;
	int failed;
	brule *rules;
	int32_t n_rules, cap_rules;
	uint32_t (*sets)[8];
	int32_t n_sets, cap_sets;
	int32_t byte_set[256]; /* singleton set of each byte, -1 until made */
	int32_t any_rule;      /* the rule of `.`, -1 until made */
	int64_t n_elems;       /* elements so far (bounded) */
	int depth;
	int32_t cur;           /* the user rule being parsed */
} cx;

/* One code-point range of a character class. */
typedef struct {
	uint32_t lo, hi;
} crange;

/* fail records the first error, "grammar: line L col C: ...", at text position at. */
int fail(cx *c, const char *at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int nomem(cx *c);
int vec_push(cx *c, vec *v, int32_t x);
int32_t new_rule(cx *c, const char *name, int32_t nlen);
int add_alt(cx *c, int32_t r, vec v); /* takes v over */
int32_t new_set(cx *c, const uint32_t w[8]);
int32_t byte_sym(cx *c, uint8_t b);
int32_t range_sym(cx *c, uint8_t lo, uint8_t hi);
int utf8_encode(uint32_t cp, uint8_t out[4]);
/* class_sym: the code points of r[0..n) (negate: all others), surrogates
 * excluded, as one symbol: a byte set when ASCII, else a rule of UTF-8
 * byte-range sequences. Sorts r. */
int32_t class_sym(cx *c, crange *r, int n, int negate);

#endif
