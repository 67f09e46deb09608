/*
 * gmask.h: the vocabulary mask of constrained decoding.
 *
 * Contract: gmask_vocab_new indexes the vocabulary's token bytes once: the
 * byte tokens sorted by their bytes with each one's common prefix with the
 * previous (lcp), so a walk in that order advances a grammar matcher
 * (gmatch.h) along each shared prefix once and skips every token under a
 * prefix the grammar cannot continue. Control tokens (no bytes) are never
 * in a mask. gmask_compute fills the allowed-token bitset of a matcher
 * state; results are kept in a bounded cache (PM_GMASK_CACHE entries,
 * clock replacement) keyed by the grammar and the canonical stack set,
 * since structured output revisits the same states constantly. All memory
 * is allocated by gmask_vocab_new; computing allocates nothing.
 */
#ifndef PM_GMASK_H
#define PM_GMASK_H

#include <stddef.h>
#include <stdint.h>

#include "gmatch.h"

#define PM_GMASK_CACHE 64          /* cached masks per vocabulary */
#define PM_GMASK_MAX_TOKEN 1024    /* longest token (bytes) */

typedef struct gm_vocab gm_vocab;

/* A mask: bit t of words[t/64] allows token t. */
typedef struct {
	const uint64_t *words;
	int32_t n_allowed; /* bits set */
	int32_t accepting; /* the state is a whole sentence (EOS may end it) */
	int32_t hit;       /* came from the cache */
} gm_mask;

/* gmask_vocab_new: status PM_OK, PM_ERR_ARG (a token over
 * PM_GMASK_MAX_TOKEN bytes: err says which) or PM_ERR_NOMEM. */
int gmask_vocab_new(const uint8_t *bytes, const uint32_t *offs, int32_t n, gm_vocab **out,
		    char *err, size_t errlen);
void gmask_vocab_free(gm_vocab *v);
/* gmask_compute returns the mask of state s (canonicalized in place) of
 * grammar g; its words stay valid until the next gmask_compute on v. */
gm_mask gmask_compute(gm_vocab *v, const pm_grammar *g, gm_set *s);
/* gmask_advance moves s along token t's bytes (scratch: v's). */
void gmask_advance(gm_vocab *v, const pm_grammar *g, gm_set *s, int32_t t);
/* gmask_token: token t's bytes. */
const uint8_t *gmask_token(const gm_vocab *v, int32_t t, int32_t *len);
/* gmask_cache_stats: cumulative hits and misses. */
void gmask_cache_stats(const gm_vocab *v, int64_t *hits, int64_t *misses);

#endif
