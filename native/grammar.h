/*
 * grammar.h: GBNF grammars (llama.cpp's dialect), compiled to a byte-level
 * pushdown grammar.
 *
 * Contract: pm_grammar_compile parses GBNF text (rules `name ::= ...`,
 * alternation `|`, sequences, groups `( )`, literals "..." with escapes
 * \n \r \t \" \\ \[ \] \- \xHH \uHHHH \UHHHHHHHH, character classes
 * [...] with ranges and negation [^...], `.` for any character, the
 * postfix operators * + ? {m} {m,} {m,n}, and # comments) and compiles it
 * to rules over BYTES: every character class becomes the UTF-8 byte
 * sequences of its code points (surrogates excluded), so a token that ends
 * inside a multi-byte character is matched like any other prefix. The
 * result is immutable and reference counted (atomically): one compiled
 * grammar may serve any number of requests on any number of threads.
 *
 * Refused, with a message naming the problem and its line and column:
 * syntax errors, an undefined or twice-defined rule, no `root` rule,
 * token references (<...>, <[id]>), left recursion (a rule that can reach
 * itself without consuming a byte, which includes `x*` over a nullable x),
 * and anything over the bounds below. Compiling is O(text + expansion)
 * and allocates only here; nothing exits.
 *
 * The compiled form: elems[] holds every alternative of every rule, each
 * ended by PM_GE_END; an element is PM_GE_END, a rule reference or a byte
 * set (256 bits). A position is an index into elems.
 */
#ifndef PM_GRAMMAR_H
#define PM_GRAMMAR_H

#include <stddef.h>
#include <stdint.h>

#include "grammar_rules.h" /* bounds, element tags */

typedef struct pm_grammar {
	uint64_t uid;          /* unique per compiled grammar in the process (cache keys) */
	int32_t *elems;        /* [n_elems] */
	int32_t n_elems;
	int32_t *alt_start;    /* [n_alts] position of each alternative's first element */
	int32_t n_alts;
	int32_t *rule_alt0;    /* [n_rules + 1] alternatives of rule r: rule_alt0[r]..rule_alt0[r+1] */
	int32_t n_rules;
	uint32_t (*sets)[8];   /* [n_sets] byte sets, bit b of word b/32 */
	int32_t n_sets;
	int32_t root;          /* rule id of root */
	_Atomic int32_t refs;
} pm_grammar;

/* Status codes are model.h's (PM_OK, PM_ERR_ARG for bad grammar text,
 * PM_ERR_NOMEM). On failure *out is NULL and err holds the reason. */
int pm_grammar_compile(const char *text, size_t len, pm_grammar **out, char *err, size_t errlen);

/* pm_grammar_retain adds a reference; pm_grammar_release drops one and frees
 * the grammar with the last. NULL is fine for both. */
void pm_grammar_retain(pm_grammar *g);
void pm_grammar_release(pm_grammar *g);

/* pm_grammar_set_has reports whether byte set s holds byte b. */
static inline int pm_grammar_set_has(const pm_grammar *g, int32_t s, uint8_t b)
{
	return (g->sets[s][b >> 5] >> (b & 31)) & 1;
}

#endif
