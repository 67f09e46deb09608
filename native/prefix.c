/*
 * prefix.c: the prefix cache: which KV blocks hold which tokens, who holds
 * them, and which idle ones to evict first.
 *
 * Contract. A block is "full" once every one of its bs positions holds the
 * K/V of a slot's tokens (positions < s->n_kv). A full block is identified
 * by a hash of its tokens chained with the previous block's hash (block 0
 * chains from a fixed seed), so equal hashes mean equal token prefixes up to
 * the end of the block; the block's own tokens and its parent hash are kept
 * and compared on every lookup, so only a 64-bit collision of the parent
 * chain could make two different prefixes match. Every block has a
 * reference count (the slot tables holding it) and is in exactly one state:
 *   held    ref > 0 (hashed or not);
 *   cached  ref == 0, hashed: in the LRU list, reusable by a lookup,
 *           evicted least recently released first when space is needed;
 *   free    ref == 0, not hashed: on the free stack.
 * e->n_free counts cached + free blocks: everything a reservation may take.
 * Released blocks enter the LRU list at its tail in the order kv_truncate
 * gives them back (a sequence's last block first), so a chain's tail is
 * evicted before its head, which the next request sharing it needs first.
 *
 * prefix_match gives an admitted slot the longest chain of cached blocks
 * that matches its sequence, never covering its last token (whose logits
 * the prefill must compute). prefix_commit hashes the blocks a slot has
 * newly filled and publishes them, unless an equal block is already
 * published (the slot then keeps its copy private). A published block is
 * never written again: its positions lie below every holder's n_kv, and
 * slots only write at n_kv and beyond. With the cache off (no_prefix_cache)
 * nothing is hashed, every block is free or held, and nothing matches.
 * Hash table and lists are arrays sized at build (prefix_alloc); nothing
 * here allocates in the step loop.
 */
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"

#define HASH_SEED 0x6a09e667f3bcc908ull

/* block_hash chains the hash of a block of n tokens from its parent's. */
static uint64_t block_hash(uint64_t parent, const int32_t *tok, int n)
{
	uint64_t h = parent ^ 0x9e3779b97f4a7c15ull;
	for (int i = 0; i < n; i++) {
		h ^= (uint32_t)tok[i];
		h *= 0xbf58476d1ce4e5b9ull;
		h ^= h >> 31;
	}
	h ^= h >> 29;
	h *= 0x94d049bb133111ebull;
	return h ^ (h >> 32);
}

static int32_t *bucket_of(pm_engine *e, uint64_t h)
{
	return &e->pc_bucket[h & e->pc_mask];
}

/* find returns the published block with hash h, parent hash parent and
 * tokens tok[0..bs), or -1. */
static int find(pm_engine *e, uint64_t h, uint64_t parent, const int32_t *tok)
{
	for (int b = *bucket_of(e, h); b >= 0; b = e->pc_chain[b])
		if (e->pc_hash[b] == h && e->pc_parent[b] == parent &&
		    memcmp(e->pc_tokens + (size_t)b * e->bs, tok, (size_t)e->bs * sizeof *tok) == 0)
			return b;
	return -1;
}

static void unpublish(pm_engine *e, int b)
{
	int32_t *p = bucket_of(e, e->pc_hash[b]);
	while (*p != b)
		p = &e->pc_chain[*p];
	*p = e->pc_chain[b];
	e->pc_chain[b] = -1;
	e->pc_hashed[b] = 0;
	e->n_cached--;
}

static void lru_remove(pm_engine *e, int b)
{
	int p = e->lru_prev[b], n = e->lru_next[b];
	if (p >= 0)
		e->lru_next[p] = n;
	else
		e->lru_head = n;
	if (n >= 0)
		e->lru_prev[n] = p;
	else
		e->lru_tail = p;
	e->lru_prev[b] = e->lru_next[b] = -1;
}

static void lru_append(pm_engine *e, int b)
{
	e->lru_prev[b] = e->lru_tail;
	e->lru_next[b] = -1;
	if (e->lru_tail >= 0)
		e->lru_next[e->lru_tail] = b;
	else
		e->lru_head = b;
	e->lru_tail = b;
}

/* calloc of n elements of size bytes, overflow-checked; NULL on failure. */
static void *pc_calloc(size_t n, size_t size)
{
	size_t b;
	if (n == 0 || __builtin_mul_overflow(n, size, &b))
		return NULL;
	return calloc(n, size);
}

int prefix_alloc(pm_engine *e)
{
	size_t n = (size_t)e->n_blocks;
	e->pc_mask = 1;
	while (e->pc_mask < 2u * (uint32_t)e->n_blocks)
		e->pc_mask <<= 1;
	e->pc_mask--;
	if (!(e->free_blocks = pc_calloc(n, sizeof *e->free_blocks)) ||
	    !(e->pc_ref = pc_calloc(n, sizeof *e->pc_ref)) ||
	    !(e->pc_hashed = pc_calloc(n, sizeof *e->pc_hashed)) ||
	    !(e->pc_hash = pc_calloc(n, sizeof *e->pc_hash)) ||
	    !(e->pc_parent = pc_calloc(n, sizeof *e->pc_parent)) ||
	    !(e->pc_tokens = pc_calloc(n * (size_t)e->bs, sizeof *e->pc_tokens)) ||
	    !(e->pc_chain = pc_calloc(n, sizeof *e->pc_chain)) ||
	    !(e->pc_bucket = pc_calloc((size_t)e->pc_mask + 1, sizeof *e->pc_bucket)) ||
	    !(e->lru_prev = pc_calloc(n, sizeof *e->lru_prev)) ||
	    !(e->lru_next = pc_calloc(n, sizeof *e->lru_next)))
		return -1;
	return 0;
}

void prefix_free(pm_engine *e)
{
	free(e->free_blocks);
	free(e->pc_ref);
	free(e->pc_hashed);
	free(e->pc_hash);
	free(e->pc_parent);
	free(e->pc_tokens);
	free(e->pc_chain);
	free(e->pc_bucket);
	free(e->lru_prev);
	free(e->lru_next);
	e->free_blocks = NULL;
	e->pc_ref = NULL;
	e->pc_hashed = NULL;
	e->pc_hash = NULL;
	e->pc_parent = NULL;
	e->pc_tokens = NULL;
	e->pc_chain = NULL;
	e->pc_bucket = NULL;
	e->lru_prev = e->lru_next = NULL;
}

void prefix_init(pm_engine *e)
{
	for (int i = 0; i < e->n_blocks; i++) {
		e->pc_ref[i] = 0;
		e->pc_hashed[i] = 0;
		e->pc_chain[i] = -1;
		e->lru_prev[i] = e->lru_next[i] = -1;
	}
	for (uint32_t i = 0; i <= e->pc_mask; i++)
		e->pc_bucket[i] = -1;
	e->lru_head = e->lru_tail = -1;
	e->n_cached = 0;
}

/* prefix_take gives the caller a block that is cached or free (the caller
 * checked e->n_free > 0): a free one when there is one, else the least
 * recently released cached one, evicted. */
int prefix_take(pm_engine *e)
{
	int b;
	if (e->n_stack > 0) {
		b = e->free_blocks[--e->n_stack];
	} else {
		b = e->lru_head;
		lru_remove(e, b);
		unpublish(e, b);
		e->met.prefix_evictions++;
	}
	e->n_free--;
	e->pc_ref[b] = 1;
	return b;
}

/* prefix_release drops one reference to block b; the last one makes it
 * cached (hashed) or free. */
void prefix_release(pm_engine *e, int b)
{
	if (--e->pc_ref[b] > 0)
		return;
	if (e->pc_hashed[b])
		lru_append(e, b);
	else
		e->free_blocks[e->n_stack++] = b;
	e->n_free++;
}

/* hold adds a reference to a published block found by a lookup. */
static void hold(pm_engine *e, int b)
{
	if (e->pc_ref[b]++ == 0) {
		lru_remove(e, b);
		e->n_free--;
	}
}

int prefix_match(pm_engine *e, slot *s, const int32_t *seq, int n)
{
	s->n_hashed = 0;
	s->hash_last = HASH_SEED;
	if (e->cfg.no_prefix_cache)
		return 0;
	int most = (n - 1) / e->bs; /* the last token is always recomputed */
	while (s->n_hashed < most && s->n_blocks < e->blocks_per_slot) {
		const int32_t *tok = seq + (size_t)s->n_hashed * e->bs;
		uint64_t h = block_hash(s->hash_last, tok, e->bs);
		int b = find(e, h, s->hash_last, tok);
		if (b < 0)
			break;
		hold(e, b);
		s->table[s->n_blocks++] = b;
		s->n_hashed++;
		s->hash_last = h;
	}
	return s->n_hashed * e->bs;
}

void prefix_commit(pm_engine *e, slot *s, const int32_t *seq)
{
	if (e->cfg.no_prefix_cache)
		return;
	int full = s->n_kv / e->bs;
	if (full > s->n_blocks)
		full = s->n_blocks;
	for (; s->n_hashed < full; s->n_hashed++) {
		const int32_t *tok = seq + (size_t)s->n_hashed * e->bs;
		uint64_t parent = s->hash_last;
		uint64_t h = block_hash(parent, tok, e->bs);
		s->hash_last = h;
		int b = s->table[s->n_hashed];
		if (e->pc_hashed[b] || find(e, h, parent, tok) >= 0)
			continue; /* matched from the cache, or an equal block is published */
		e->pc_hash[b] = h;
		e->pc_parent[b] = parent;
		memcpy(e->pc_tokens + (size_t)b * e->bs, tok, (size_t)e->bs * sizeof *tok);
		e->pc_hashed[b] = 1;
		int32_t *head = bucket_of(e, h);
		e->pc_chain[b] = *head;
		*head = b;
		e->n_cached++;
	}
}
