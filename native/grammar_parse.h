/*
 * grammar_parse.h: GBNF text into a builder (grammar_rules.h), by
 * recursive descent: rules, alternation, sequences, groups, literals,
 * classes, `.`, the postfix operators and comments. Groups, repetitions
 * and non-ASCII classes become generated rules:
 *   ( a | b )  -> G ::= a | b
 *   x*         -> S ::= x S |            (tail call: the matcher keeps it flat)
 *   x+         -> x S
 *   x?         -> O ::= x |
 *   x{m,n}     -> x (m times) R[n-m], R[k] ::= x R[k-1] |, R[1] ::= x |
 */
#ifndef PM_GRAMMAR_PARSE_H
#define PM_GRAMMAR_PARSE_H

#include "grammar_rules.h"

/* parse_rules reads every rule of c's text; 0 after the first error. */
int parse_rules(cx *c);

/* find_rule returns the user rule called name, or -1. */
int32_t find_rule(cx *c, const char *name, int32_t nlen);

#endif
