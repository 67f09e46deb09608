/*
 * kv.c: the paged KV cache's block bookkeeping.
 *
 * Contract: the cache is e->n_blocks blocks of e->bs positions (K and V
 * per layer: kv_at in engine_internal.h gives a position's row). Slot s
 * holds s->n_blocks blocks in s->table, block b covering positions
 * b*bs .. b*bs+bs-1. e->n_free blocks may be taken: free ones, and cached
 * ones (prefix.c) that a reservation evicts, least recently used first.
 * kv_reserve grows a slot's table to cover positions < upto (the caller
 * checked enough blocks are available: kv_blocks_short), kv_truncate gives
 * back the blocks beyond those covering positions < keep (rejected drafts,
 * a released slot). A block is written only by the one slot whose n_kv
 * lies inside it; blocks shared by several tables (prefix reuse) are full
 * and published, so never written again. No block is lost: each is free,
 * cached or held, and a held block's reference count is the number of
 * tables holding it. Nothing here allocates.
 */
#include "engine_internal.h"

int kv_blocks_for(const pm_engine *e, int positions)
{
	return (positions + e->bs - 1) / e->bs;
}

/* Extra blocks slot s needs so positions < upto are covered. */
int kv_blocks_short(const pm_engine *e, const slot *s, int upto)
{
	int need = kv_blocks_for(e, upto) - s->n_blocks;
	return need > 0 ? need : 0;
}

/* kv_reserve gives slot s blocks for positions < upto (the caller checked
 * enough are free). */
void kv_reserve(pm_engine *e, slot *s, int upto)
{
	while (s->n_blocks < kv_blocks_for(e, upto))
		s->table[s->n_blocks++] = prefix_take(e);
}

/* kv_truncate frees the blocks of s beyond those covering positions < keep
 * (rollback of rejected drafts, or all of them when the slot is released). */
void kv_truncate(pm_engine *e, slot *s, int keep)
{
	int want = kv_blocks_for(e, keep);
	while (s->n_blocks > want)
		prefix_release(e, s->table[--s->n_blocks]);
	if (s->n_hashed > s->n_blocks)
		s->n_hashed = s->n_blocks; /* only on release to 0: hashed blocks lie below n_kv */
}

/* Blocks that prefilling slots still need to finish their prefill. */
int kv_reserved_blocks(const pm_engine *e)
{
	int n = 0;
	for (int i = 0; i < e->cfg.b_max; i++)
		if (e->slots[i].state == SLOT_PREFILL)
			n += kv_blocks_short(e, &e->slots[i], e->slots[i].prefill_end);
	return n;
}

/* kv_init puts every block on the free stack (block 0 on top) and empties
 * the prefix cache. */
void kv_init(pm_engine *e)
{
	for (int i = 0; i < e->n_blocks; i++)
		e->free_blocks[i] = e->n_blocks - 1 - i;
	e->n_stack = e->n_blocks;
	e->n_free = e->n_blocks;
	prefix_init(e);
}
