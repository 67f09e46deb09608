/*
 * test_kv.c: kv.c's block bookkeeping in isolation, on a hand-built
 * engine (a free stack and two slots' tables, no cache memory): block
 * counts round up, kv_reserve takes blocks off the top of the free stack
 * in order, kv_truncate gives back exactly those beyond what it keeps,
 * kv_reserved_blocks counts what prefilling slots still need, and across
 * thousands of random reserves and truncations every block is always
 * either free or in exactly one table. kv_at's address arithmetic is
 * checked against the cache layout [layer][block][bs][kvdim].
 */
#define CTEST_SEED 0x3c6ef372fe94f82bull
#include "ctest.h"
#include "engine_internal.h"

#include <stdlib.h>

enum { BS = 4, NBLK = 12, PER_SLOT = 6, SLOTS = 3 };

static pm_engine *new_kv(void)
{
	pm_engine *e = calloc(1, sizeof *e);
	e->bs = BS;
	e->n_blocks = NBLK;
	e->blocks_per_slot = PER_SLOT;
	e->ctx = BS * PER_SLOT;
	e->cfg.b_max = SLOTS;
	/* the prefix cache's arrays (nothing is published here: test_prefix.c) */
	CHECK(prefix_alloc(e) == 0, "prefix_alloc: out of memory");
	e->tables = calloc(SLOTS * PER_SLOT, sizeof *e->tables);
	e->slots = calloc(SLOTS, sizeof *e->slots);
	for (int i = 0; i < SLOTS; i++) {
		e->slots[i].req = -1;
		e->slots[i].table = e->tables + i * PER_SLOT;
	}
	kv_init(e);
	return e;
}

static void free_kv(pm_engine *e)
{
	prefix_free(e);
	free(e->tables);
	free(e->slots);
	free(e);
}

/* owned_once: every block is on the free stack or in one slot's table,
 * exactly once. */
static int owned_once(const pm_engine *e)
{
	int seen[NBLK] = {0};
	if (e->n_stack != e->n_free)
		return 0;
	for (int i = 0; i < e->n_stack; i++)
		if (e->free_blocks[i] < 0 || e->free_blocks[i] >= NBLK || seen[e->free_blocks[i]]++)
			return 0;
	for (int s = 0; s < SLOTS; s++)
		for (int i = 0; i < e->slots[s].n_blocks; i++) {
			int b = e->slots[s].table[i];
			if (b < 0 || b >= NBLK || seen[b]++)
				return 0;
		}
	for (int b = 0; b < NBLK; b++)
		if (seen[b] != 1)
			return 0;
	return 1;
}

static void test_counts(pm_engine *e)
{
	CHECK(e->n_free == NBLK && e->free_blocks[NBLK - 1] == 0, "kv_init: %d free, top %d",
	      (int)e->n_free, (int)e->free_blocks[NBLK - 1]);
	int want[][2] = {{0, 0}, {1, 1}, {4, 1}, {5, 2}, {8, 2}, {9, 3}, {24, 6}};
	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
		CHECK(kv_blocks_for(e, want[i][0]) == want[i][1], "kv_blocks_for(%d) = %d, want %d",
		      want[i][0], kv_blocks_for(e, want[i][0]), want[i][1]);
}

static void test_reserve_truncate(pm_engine *e)
{
	slot *a = &e->slots[0], *b = &e->slots[1];
	CHECK(kv_blocks_short(e, a, 9) == 3, "short of 9 positions: %d", kv_blocks_short(e, a, 9));
	kv_reserve(e, a, 9);
	CHECK(a->n_blocks == 3 && a->table[0] == 0 && a->table[1] == 1 && a->table[2] == 2,
	      "reserve 9: %d blocks %d %d %d", (int)a->n_blocks, (int)a->table[0], (int)a->table[1],
	      (int)a->table[2]);
	CHECK(e->n_free == NBLK - 3, "reserve 9: %d free", (int)e->n_free);
	CHECK(kv_blocks_short(e, a, 12) == 0 && kv_blocks_short(e, a, 13) == 1 &&
		      kv_blocks_short(e, a, 1) == 0,
	      "short after reserve");
	kv_reserve(e, a, 9); /* covered already: nothing moves */
	CHECK(a->n_blocks == 3 && e->n_free == NBLK - 3, "a second reserve took blocks");
	kv_reserve(e, b, 4);
	CHECK(b->n_blocks == 1 && b->table[0] == 3, "reserve 4 for b: block %d", (int)b->table[0]);
	kv_truncate(e, a, 5); /* keeps the blocks of positions 0..4 */
	CHECK(a->n_blocks == 2 && e->free_blocks[e->n_free - 1] == 2,
	      "truncate to 5: %d blocks, top of stack %d", (int)a->n_blocks,
	      (int)e->free_blocks[e->n_free - 1]);
	kv_truncate(e, a, 8); /* nothing beyond 8 is held */
	CHECK(a->n_blocks == 2, "truncate to 8 freed a block");
	kv_reserve(e, a, 9); /* the block just given back comes back first */
	CHECK(a->table[2] == 2, "re-reserve: block %d, want 2", (int)a->table[2]);
	CHECK(owned_once(e), "a block is lost or held twice");
	/* prefilling slots still need the blocks up to their prefill_end */
	a->state = SLOT_PREFILL;
	a->prefill_end = 20; /* 5 blocks, 3 held */
	b->state = SLOT_DECODE;
	b->prefill_end = 24;
	e->slots[2].state = SLOT_PREFILL;
	e->slots[2].prefill_end = 1; /* 1 block, none held */
	CHECK(kv_reserved_blocks(e) == 3, "reserved: %d, want 3", kv_reserved_blocks(e));
	kv_truncate(e, a, 0);
	kv_truncate(e, b, 0);
	CHECK(e->n_free == NBLK && a->n_blocks == 0 && b->n_blocks == 0 && owned_once(e),
	      "releasing both slots left %d free", (int)e->n_free);
	for (int i = 0; i < SLOTS; i++)
		e->slots[i].state = SLOT_FREE;
}

/* Random reserves (when the blocks are free) and truncations. */
static void test_random(pm_engine *e)
{
	int bad = 0;
	for (int it = 0; it < 20000 && !bad; it++) {
		slot *s = &e->slots[rnd() % SLOTS];
		int upto = (int)(rnd() % (BS * PER_SLOT + 1));
		if (rnd() % 2) {
			if (kv_blocks_short(e, s, upto) <= e->n_free) {
				int had = s->n_blocks, nf = e->n_free;
				kv_reserve(e, s, upto);
				int want = kv_blocks_for(e, upto) > had ? kv_blocks_for(e, upto) : had;
				bad |= s->n_blocks != want || e->n_free != nf - (want - had);
			}
		} else {
			int had = s->n_blocks;
			kv_truncate(e, s, upto);
			int want = kv_blocks_for(e, upto) < had ? kv_blocks_for(e, upto) : had;
			bad |= s->n_blocks != want;
		}
		bad |= !owned_once(e);
		if (bad)
			fprintf(stderr, "random step %d: slot %d upto %d\n", it, (int)(s - e->slots), upto);
	}
	CHECK(!bad, "random reserves and truncations broke the bookkeeping");
}

static void test_kv_at(void)
{
	pm_engine e = {0};
	e.n_blocks = 7;
	e.bs = 5;
	e.kvdim = 3;
	float base[1];
	CHECK(kv_at(&e, base, 2, 4, 3) - base == ((2 * 7 + 4) * 5 + 3) * 3, "kv_at offset %td",
	      kv_at(&e, base, 2, 4, 3) - base);
	CHECK(kv_at(&e, base, 0, 0, 0) == base, "kv_at(0,0,0) is not the base");
}

int main(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	printf("kv.c: block counts, reserve, truncate, reserved, random bookkeeping\n");
	pm_engine *e = new_kv();
	test_counts(e);
	test_reserve_truncate(e);
	test_random(e);
	free_kv(e);
	test_kv_at();
	if (fails) {
		fprintf(stderr, "%d failures\n", fails);
		return 1;
	}
	printf("ok\n");
	return 0;
}
