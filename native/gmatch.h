/*
 * gmatch.h: the byte-level matcher of a compiled grammar (grammar.h).
 *
 * Contract: a gm_set is the set of the grammar's parse stacks after the
 * bytes consumed so far. A stack is a list of positions into g->elems,
 * bottom first; its top is the next element to match and is always a
 * byte set (gm_expand resolves rule references and alternative ends
 * first); an empty stack means the input so far is a whole sentence
 * (gm_accepting). A rule reference whose return position is an
 * alternative's end pushes no return frame (tail call), so right-recursive
 * repetitions keep their depth. Stacks are deduplicated.
 *
 * Everything is bounded by the PM_GMATCH_* limits below and by the fixed
 * size of gm_set: exceeding one sets status GM_OVERFLOW on the set, which
 * callers treat as a dead end (no continuation). Nothing allocates or
 * exits; a gm_set is plain memory the caller owns (about 33 KB).
 */
#ifndef PM_GMATCH_H
#define PM_GMATCH_H

#include <stdint.h>

#include "grammar.h"

#define PM_GMATCH_MAX_STACKS 256  /* stacks of one set */
#define PM_GMATCH_MAX_DEPTH 64    /* positions of one stack */
#define PM_GMATCH_MAX_WORDS 8192  /* positions of all stacks of one set */
#define PM_GMATCH_MAX_EXPAND 128  /* nested rule expansions without a byte */

enum { GM_OK = 0, GM_OVERFLOW = 1 };

typedef struct {
	int32_t n;      /* stacks */
	int32_t used;   /* entries of pos in use */
	int32_t status; /* GM_OK or GM_OVERFLOW (then n is 0: a dead end) */
	int32_t off[PM_GMATCH_MAX_STACKS + 1]; /* stack i is pos[off[i]..off[i+1]) */
	int32_t pos[PM_GMATCH_MAX_WORDS];
} gm_set;

/* gm_init sets s to the grammar's start: every alternative of root. */
void gm_init(const pm_grammar *g, gm_set *s);
/* gm_step sets dst to src advanced by byte b (dst != src). dst->n == 0
 * means no stack accepts b (or an overflow: dst->status). */
void gm_step(const pm_grammar *g, const gm_set *src, uint8_t b, gm_set *dst);
/* gm_accepting: the bytes so far are a whole sentence of the grammar. */
int gm_accepting(const gm_set *s);
/* gm_copy copies the used part of src to dst. */
void gm_copy(gm_set *dst, const gm_set *src);
/* gm_canon sorts the stacks of s into a canonical order (equal sets compare
 * equal) and returns its 64-bit hash. */
uint64_t gm_canon(gm_set *s);
/* gm_equal: two canonical sets hold the same stacks. */
int gm_equal(const gm_set *a, const gm_set *b);

#endif
