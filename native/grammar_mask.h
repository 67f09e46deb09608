/*
 * grammar_mask.h: constrained decoding in the step loop: which tokens of
 * the vocabulary a request's grammar allows next, applied to its logits
 * before sampling, and the request's matcher state advanced by what it
 * emitted.
 *
 * Contract:
 *  - gmask_build (pm_engine_set_token_bytes) copies the token bytes and
 *    builds the token index: the tokens sorted by their bytes, with each
 *    one's common prefix with the one before, so a mask walks every shared
 *    prefix once and skips every token under a prefix the grammar refused
 *    (a trie walked in order, without nodes). It also allocates the mask
 *    cache, the per-request matcher states and the walk's levels: all
 *    constrained decoding's memory; the step loop allocates nothing.
 *  - gmask_start (Submit) writes a request's start state.
 *  - gmask_apply (before sampling a constrained request's position) sets
 *    every logit the grammar refuses to -inf, in place: a token is allowed
 *    when its bytes, fed to the matcher from the request's state, leave a
 *    stack; a control token (no bytes) never is; EOS and the request's stop
 *    tokens are allowed exactly where the grammar may end. When nothing is
 *    allowed it allows EOS alone (the request ends, PM_GRAMMAR_DEAD).
 *    Masks are cached by (grammar, canonical state): JSON grammars revisit
 *    the same states constantly, and a hit costs one pass over the logits.
 *  - gmask_accept advances the state by the emitted token.
 *  - gmask_trim_draft cuts a speculative draft before its first token the
 *    grammar refuses, so verification never spends rows on it.
 * Tokens longer than GMASK_MAX_TOKEN bytes are never allowed by a grammar.
 */
#ifndef PM_GRAMMAR_MASK_H
#define PM_GRAMMAR_MASK_H

#include <stdint.h>

#include "engine_internal.h"

#define GMASK_MAX_TOKEN 256 /* bytes of the longest token a grammar may allow */
#define GMASK_CACHE 64      /* cached masks per engine */
#define GMASK_KEY_CAP 1024  /* words of the longest state whose mask is cached */

int gmask_build(pm_engine *e, const uint8_t *bytes, const uint32_t *offs, int32_t n);
void gmask_free(pm_engine *e);
int gmask_start(pm_engine *e, req *r);
void gmask_apply(pm_engine *e, req *r, float *logits);
void gmask_accept(pm_engine *e, req *r, int32_t tok);
void gmask_trim_draft(pm_engine *e, req *r, slot *s);

#endif
