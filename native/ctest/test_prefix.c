/*
 * test_prefix.c: prefix.c (through kv.c) on a hand-built engine with no
 * cache memory: a block's "contents" are simulated as the token each
 * position was last written with, so a test can see what a slot would
 * attend over. Checked: blocks are published once full and matched by
 * their chained prefix (never the last token), equal blocks are published
 * once, released blocks are evicted least recently released first and
 * counted, a differing token or an evicted parent ends a match, the cache
 * off matches nothing; and across thousands of random admissions, writes,
 * rollbacks and releases of overlapping sequences: every reference count is
 * the number of tables holding the block, every block is exactly one of
 * free, cached or held, no write ever lands in a shared or published
 * block, and every matched block holds exactly the tokens of the prefix it
 * was matched for.
 */
#define CTEST_SEED 0x510e527fade682d1ull
#include "ctest.h"
#include "engine_internal.h"

#include <stdlib.h>

enum { BS = 4, NBLK = 16, PER_SLOT = 8, SLOTS = 3, CTX = BS * PER_SLOT };

static int32_t content[NBLK][BS]; /* the token each position was written with */

static pm_engine *new_pc(int off)
{
	pm_engine *e = calloc(1, sizeof *e);
	e->bs = BS;
	e->n_blocks = NBLK;
	e->blocks_per_slot = PER_SLOT;
	e->ctx = CTX;
	e->cfg.b_max = SLOTS;
	e->cfg.no_prefix_cache = off;
	CHECK(prefix_alloc(e) == 0, "prefix_alloc: out of memory");
	e->tables = calloc(SLOTS * PER_SLOT, sizeof *e->tables);
	e->slots = calloc(SLOTS, sizeof *e->slots);
	for (int i = 0; i < SLOTS; i++) {
		e->slots[i].req = -1;
		e->slots[i].table = e->tables + i * PER_SLOT;
	}
	kv_init(e);
	memset(content, 0xff, sizeof content);
	return e;
}

static void free_pc(pm_engine *e)
{
	prefix_free(e);
	free(e->tables);
	free(e->slots);
	free(e);
}

/* consistent: reference counts equal table occurrences; every block is
 * exactly one of free (stack), cached (LRU, hashed, ref 0) or held; the
 * counts agree; the LRU list is well linked. */
static int consistent(const pm_engine *e)
{
	int held[NBLK] = {0}, onstack[NBLK] = {0}, inlru[NBLK] = {0}, hashed = 0;
	for (int s = 0; s < SLOTS; s++)
		for (int i = 0; i < e->slots[s].n_blocks; i++)
			held[e->slots[s].table[i]]++;
	for (int i = 0; i < e->n_stack; i++)
		if (onstack[e->free_blocks[i]]++)
			return 0;
	int n_lru = 0, prev = -1;
	for (int b = e->lru_head; b >= 0; b = e->lru_next[b]) {
		if (e->lru_prev[b] != prev || inlru[b]++ || ++n_lru > NBLK)
			return 0;
		prev = b;
	}
	if (prev != e->lru_tail)
		return 0;
	for (int b = 0; b < NBLK; b++) {
		hashed += e->pc_hashed[b];
		if (held[b] != e->pc_ref[b])
			return 0;
		int states = (held[b] > 0) + onstack[b] + inlru[b];
		if (states != 1 || (onstack[b] && e->pc_hashed[b]) || (inlru[b] && !e->pc_hashed[b]))
			return 0;
	}
	return e->n_free == e->n_stack + n_lru && hashed == e->n_cached;
}

/* write stores seq's tokens at positions from..to-1 of slot s, checking no
 * write lands in a block another table shares or the cache published. */
static int write_kv(const pm_engine *e, const slot *s, const int32_t *seq, int from, int to)
{
	int ok = 1;
	for (int p = from; p < to; p++) {
		int b = s->table[p / BS];
		ok &= e->pc_ref[b] == 1 && !e->pc_hashed[b];
		content[b][p % BS] = seq[p];
	}
	return ok;
}

/* holds: positions 0..n-1 of slot s hold seq's tokens. */
static int holds(const slot *s, const int32_t *seq, int n)
{
	for (int p = 0; p < n; p++)
		if (content[s->table[p / BS]][p % BS] != seq[p])
			return 0;
	return 1;
}

/* run_slot admits seq[0..n) into slot s, writes the rest and publishes. */
static int run_slot(pm_engine *e, slot *s, const int32_t *seq, int n)
{
	int hit = prefix_match(e, s, seq, n);
	kv_reserve(e, s, n);
	write_kv(e, s, seq, hit, n);
	s->n_kv = n;
	prefix_commit(e, s, seq);
	return hit;
}

static void release(pm_engine *e, slot *s)
{
	kv_truncate(e, s, 0);
	s->n_kv = 0;
}

static void test_publish_match(void)
{
	pm_engine *e = new_pc(0);
	slot *a = &e->slots[0], *b = &e->slots[1];
	int32_t seq[CTX];
	for (int i = 0; i < CTX; i++)
		seq[i] = 100 + i;
	CHECK(run_slot(e, a, seq, 10) == 0, "a cold cache matched");
	CHECK(e->n_cached == 2 && a->n_hashed == 2, "10 positions: %d published, want 2",
	      (int)e->n_cached);
	/* b shares a's two full blocks while a still holds them */
	CHECK(run_slot(e, b, seq, 11) == 8, "b did not reuse a's blocks");
	CHECK(b->table[0] == a->table[0] && b->table[1] == a->table[1] &&
		      e->pc_ref[a->table[0]] == 2,
	      "b's first blocks are not a's");
	CHECK(holds(b, seq, 11), "b's positions do not hold its tokens");
	CHECK(consistent(e), "inconsistent after sharing");
	release(e, a);
	release(e, b);
	CHECK(e->n_free == NBLK && consistent(e), "release: %d free", (int)e->n_free);
	/* the last token is never matched: 8 tokens reuse one block, 9 two */
	CHECK(prefix_match(e, a, seq, 8) == 4, "8 tokens matched %d", a->n_hashed * BS);
	release(e, a);
	CHECK(prefix_match(e, a, seq, 9) == 8, "9 tokens matched %d", a->n_hashed * BS);
	release(e, a);
	/* a different token in block 1 ends the match after block 0 */
	int32_t other[CTX];
	memcpy(other, seq, sizeof other);
	other[5] = 7;
	CHECK(prefix_match(e, a, other, 12) == 4, "a changed block 1 matched %d",
	      a->n_hashed * BS);
	release(e, a);
	/* the same block 1 after a different block 0 is another prefix */
	other[5] = seq[5];
	other[0] = 7;
	CHECK(prefix_match(e, a, other, 12) == 0, "a changed block 0 matched %d",
	      a->n_hashed * BS);
	release(e, a);
	CHECK(consistent(e), "inconsistent after lookups");
	free_pc(e);
}

static void test_duplicates_and_off(void)
{
	pm_engine *e = new_pc(0);
	slot *a = &e->slots[0], *b = &e->slots[1];
	int32_t seq[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
	/* both admitted before either published: two copies, one published */
	prefix_match(e, a, seq, 12);
	prefix_match(e, b, seq, 12);
	kv_reserve(e, a, 12);
	kv_reserve(e, b, 12);
	write_kv(e, a, seq, 0, 12);
	write_kv(e, b, seq, 0, 12);
	a->n_kv = b->n_kv = 12;
	prefix_commit(e, a, seq);
	prefix_commit(e, b, seq);
	CHECK(e->n_cached == 3, "published %d blocks, want 3 (b's copies stay private)",
	      (int)e->n_cached);
	release(e, b);
	CHECK(e->n_stack == NBLK - 3 && consistent(e), "b's private copies are not free: %d",
	      (int)e->n_stack);
	release(e, a);
	free_pc(e);

	e = new_pc(1);
	a = &e->slots[0];
	run_slot(e, a, seq, 12);
	release(e, a);
	CHECK(e->n_cached == 0 && prefix_match(e, a, seq, 12) == 0 && e->n_stack == NBLK,
	      "the cache is off but published %d blocks", (int)e->n_cached);
	free_pc(e);
}

static void test_eviction(void)
{
	pm_engine *e = new_pc(0);
	slot *a = &e->slots[0];
	int32_t x[CTX], y[CTX];
	for (int i = 0; i < CTX; i++)
		x[i] = i, y[i] = 1000 + i;
	run_slot(e, a, x, 4 * BS); /* 4 blocks published */
	release(e, a);
	run_slot(e, a, y, 4 * BS); /* 4 more, from the free stack: no eviction */
	release(e, a);
	CHECK(e->n_cached == 8 && e->met.prefix_evictions == 0, "cached %d evicted %lld",
	      (int)e->n_cached, (long long)e->met.prefix_evictions);
	/* taking every block evicts all 8, x's first, tail block first */
	kv_reserve(e, a, NBLK * BS > CTX ? CTX : NBLK * BS);
	slot *b = &e->slots[1];
	kv_reserve(e, b, (NBLK - PER_SLOT) * BS);
	CHECK(e->n_free == 0 && e->met.prefix_evictions == 8 && e->n_cached == 0,
	      "free %d evicted %lld cached %d", (int)e->n_free,
	      (long long)e->met.prefix_evictions, (int)e->n_cached);
	CHECK(consistent(e), "inconsistent after eviction");
	release(e, a);
	release(e, b);
	/* LRU order: publish x then y; need 2 blocks beyond the free ones */
	e->met.prefix_evictions = 0;
	run_slot(e, a, x, 4 * BS);
	release(e, a);
	run_slot(e, a, y, 4 * BS);
	release(e, a);
	kv_reserve(e, a, (NBLK - 8 + 2) * BS); /* all free blocks, then two cached ones */
	CHECK(e->met.prefix_evictions == 2, "evicted %lld, want 2",
	      (long long)e->met.prefix_evictions);
	release(e, a);
	/* x lost its last two blocks (released first), y is whole */
	CHECK(prefix_match(e, a, x, 4 * BS + 1) == 2 * BS, "x matched %d positions, want %d",
	      a->n_hashed * BS, 2 * BS);
	release(e, a);
	CHECK(prefix_match(e, a, y, 4 * BS + 1) == 4 * BS, "y matched %d positions, want %d",
	      a->n_hashed * BS, 4 * BS);
	CHECK(holds(a, y, 4 * BS), "y's matched blocks lost their contents");
	release(e, a);
	CHECK(consistent(e), "inconsistent at the end");
	free_pc(e);
}

/*
 * Random admissions of sequences drawn from a few shared stems, written a
 * few positions at a time (prefill chunks, decode steps) with rollbacks of
 * unaccepted positions, published after every write, released at random.
 */
static void test_random(void)
{
	pm_engine *e = new_pc(0);
	int32_t seqs[SLOTS][CTX];
	int want[SLOTS] = {0}, live[SLOTS] = {0};
	int bad = 0, hits = 0;
	for (int it = 0; it < 30000 && !bad; it++) {
		int si = (int)(rnd() % SLOTS);
		slot *s = &e->slots[si];
		int32_t *seq = seqs[si];
		if (!live[si]) {
			int stem = (int)(rnd() % 3), n = 2 + (int)(rnd() % (CTX - 2));
			for (int i = 0; i < n; i++) /* a stem, then a tail of its own */
				seq[i] = i < 3 * BS + stem ? stem * 50 + i : (int32_t)(rnd() % 4);
			/* admit only when the whole sequence fits (as the scheduler does) */
			if (kv_blocks_for(e, n) > e->n_free)
				continue;
			int hit = prefix_match(e, s, seq, n);
			hits += hit;
			bad |= hit >= n || hit % BS || !holds(s, seq, hit);
			s->n_kv = hit;
			want[si] = n;
			live[si] = 1;
		} else if (s->n_kv < want[si] && rnd() % 4) {
			int step = 1 + (int)(rnd() % 6), to = s->n_kv + step;
			to = to > want[si] ? want[si] : to;
			if (kv_blocks_short(e, s, to) > e->n_free) { /* preempted */
				release(e, s);
				live[si] = 0;
				continue;
			}
			kv_reserve(e, s, to);
			bad |= !write_kv(e, s, seq, s->n_kv, to);
			int keep = s->n_kv + 1 + (int)(rnd() % (to - s->n_kv)); /* a rollback */
			kv_truncate(e, s, keep);
			s->n_kv = keep;
			prefix_commit(e, s, seq);
		} else {
			release(e, s);
			live[si] = 0;
		}
		bad |= !consistent(e);
		for (int k = 0; k < SLOTS; k++)
			bad |= live[k] && !holds(&e->slots[k], seqs[k], e->slots[k].n_kv);
		if (bad)
			fprintf(stderr, "random step %d: slot %d\n", it, si);
	}
	CHECK(!bad, "random admissions, writes and releases broke the cache");
	CHECK(hits > 0 && e->met.prefix_evictions > 0, "the run never hit (%d) or evicted (%lld)",
	      hits, (long long)e->met.prefix_evictions);
	free_pc(e);
}

int main(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	printf("prefix.c: publish, match, duplicates, off, LRU eviction, random bookkeeping\n");
	test_publish_match();
	test_duplicates_and_off();
	test_eviction();
	test_random();
	if (fails) {
		fprintf(stderr, "%d failures\n", fails);
		return 1;
	}
	printf("ok\n");
	return 0;
}
