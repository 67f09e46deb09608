/*
 * grammar_match.h: the byte-level matcher of a compiled grammar
 * (grammar.h): where a partial output stands against the grammar, as a set
 * of stacks, advanced one byte at a time.
 *
 * Contract: a state is a buffer of GM_STATE_CAP int32 words:
 *   st[0] stacks, st[1] words in use (these two included), then each
 *   stack as its depth d and d frames, bottom first.
 * A frame is a position into g->elems: the next element to match in an
 * alternative; the top frame of every stack in a state is a byte set (the
 * next byte it takes) or the stack is empty (the grammar may end there).
 * Rule references are expanded eagerly (a reference last in its
 * alternative pushes no return frame, so right recursion such as x* does
 * not grow the stack); identical stacks are kept once. The grammar
 * compiler refuses left recursion, so expansion ends; the bounds below cut
 * pathological grammars: a state that would exceed them is an overflow
 * (gm_* return -1), which callers treat as a dead end, never a crash.
 * Nothing here allocates: scratch is the caller's (gm_scratch).
 */
#ifndef PM_GRAMMAR_MATCH_H
#define PM_GRAMMAR_MATCH_H

#include <stdint.h>

#include "grammar.h"

#define GM_STATE_CAP 4096  /* words of one state */
#define GM_MAX_STACKS 256  /* stacks of one state */
#define GM_MAX_DEPTH 256   /* frames of one stack */
#define GM_MAX_CALLS 20000 /* expansions of one advance */
#define GM_SCRATCH_WORDS (GM_MAX_DEPTH * 64)

typedef struct {
	int32_t *w; /* [GM_SCRATCH_WORDS] */
} gm_scratch;

/* gm_start writes the state before any byte into st; 0, or -1 on overflow. */
int gm_start(const pm_grammar *g, gm_scratch *sc, int32_t *st);
/* gm_advance writes into out the state after byte b from st (out != st):
 * the number of stacks (0 = b is not allowed there), or -1 on overflow. */
int gm_advance(const pm_grammar *g, gm_scratch *sc, const int32_t *st, uint8_t b, int32_t *out);
/* gm_advance_bytes advances st in place by bytes[0..n), using tmp
 * (2 * GM_STATE_CAP words): the stacks left (0 = rejected), or -1 on
 * overflow. On 0 or -1 st is unchanged. */
int gm_advance_bytes(const pm_grammar *g, gm_scratch *sc, int32_t *st, const uint8_t *bytes, int n,
		     int32_t *tmp);
/* gm_accepting: 1 when the grammar may end in st (it holds an empty stack). */
int gm_accepting(const int32_t *st);
/* gm_canon sorts st's stacks (using tmp, GM_STATE_CAP words), so equal sets
 * are equal buffers (the mask cache's key). */
void gm_canon(int32_t *st, int32_t *tmp);

#endif
