/*
 * kv.c: the paged KV cache's block bookkeeping.
 *
 * Contract: the cache is e->n_blocks blocks of e->bs positions (K and V
 * per layer: kv_at in engine_internal.h gives a position's row). Free
 * blocks are a stack (e->free_blocks[0..n_free)); slot s holds s->n_blocks
 * of them in s->table, block b covering positions b*bs .. b*bs+bs-1.
 * kv_reserve grows a slot's table to cover positions < upto (the caller
 * checked enough blocks are free: kv_blocks_short), kv_truncate returns the
 * blocks beyond those covering positions < keep (rejected drafts, a
 * released slot). No block is ever held by two slots or lost: every block
 * is on the free stack or in exactly one table. Nothing here allocates.
 * (Prefix reuse will land here.)
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
		s->table[s->n_blocks++] = e->free_blocks[--e->n_free];
}

/* kv_truncate frees the blocks of s beyond those covering positions < keep
 * (rollback of rejected drafts, or all of them when the slot is released). */
void kv_truncate(pm_engine *e, slot *s, int keep)
{
	int want = kv_blocks_for(e, keep);
	while (s->n_blocks > want)
		e->free_blocks[e->n_free++] = s->table[--s->n_blocks];
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

/* kv_init puts every block on the free stack (block 0 on top). */
void kv_init(pm_engine *e)
{
	for (int i = 0; i < e->n_blocks; i++)
		e->free_blocks[i] = e->n_blocks - 1 - i;
	e->n_free = e->n_blocks;
}
