//go:build cgo

package native

import (
	"fmt"
	"slices"
	"testing"
)

// prefixRequests are n requests built on three shared stems (60..100
// tokens) with tails of their own: greedy ones, seeded sampled ones, and
// some with penalties, as a conversation's turns or a shared system prompt
// look to the engine.
func prefixRequests(n int) []*request {
	reqs := make([]*request, n)
	for i := range reqs {
		stem := prompt(1000+i%3, 60+20*(i%3))
		tail := prompt(i, 4+(i*7)%25)[1:] // without its BOS
		p := Params{MaxTokens: 20 + (i*13)%30}
		switch i % 4 {
		case 1:
			p.Temperature, p.TopK, p.Seed = 0.8, 40, uint64(i)
		case 2:
			p.RepetitionPenalty, p.FrequencyPenalty = 1.2, 0.4
		}
		reqs[i] = &request{prompt: append(slices.Clip(stem), tail...), p: p}
	}
	return reqs
}

// TestPrefixCacheExact: requests whose prompts share prefixes give the
// same tokens with the prefix cache as on a cold engine with it off (the
// greedy ones the reference's too), one at a time and batched, with
// speculation, and under memory pressure where cached blocks are evicted
// and requests preempted; and the cache really was used.
func TestPrefixCacheExact(t *testing.T) {
	_, ref := tinyModel(t)
	const n = 18
	cold := open(t, func(c *Config) { c.NoPrefixCache = true; c.BMax = 1; c.SpecK = 0 })
	want := prefixRequests(n)
	for i, r := range want {
		run(t, cold, []*request{r}, 0)
		if r.stats.CachedTokens != 0 {
			t.Fatalf("cache off, request %d: %d cached tokens", i, r.stats.CachedTokens)
		}
		if r.p.Temperature == 0 && r.p.RepetitionPenalty == 0 {
			if g := refGreedy(t, ref, r.prompt, r.p.MaxTokens); !slices.Equal(r.out, g) {
				t.Fatalf("cold request %d is not the reference's: %v\n%v", i, r.out, g)
			}
		}
	}
	var coldSnap Snapshot
	cold.Snapshot(&coldSnap)
	if coldSnap.PrefixQueries != 0 || coldSnap.KVBlocksCached != 0 {
		t.Fatalf("cache off, but %d tokens queried and %d blocks cached", coldSnap.PrefixQueries, coldSnap.KVBlocksCached)
	}
	for _, tc := range []struct {
		bmax, specK, kvBlocks, chunk, stagger int
		pressure                              bool
	}{
		{1, 0, 64, 64, 0, false},
		{1, 4, 64, 7, 0, false},
		{4, 0, 0, 16, 2, false},
		{8, 4, 0, 16, 1, false},
		{4, 2, 20, 16, 0, true}, // 4 requests of up to 180 tokens want 48 blocks of 16
		{8, 0, 17, 9, 0, true},
	} {
		name := fmt.Sprintf("bmax=%d/spec=%d/kv=%d/chunk=%d", tc.bmax, tc.specK, tc.kvBlocks, tc.chunk)
		t.Run(name, func(t *testing.T) {
			e := open(t, func(c *Config) {
				c.BMax, c.SpecK, c.KVBlocks, c.PrefillChunk = tc.bmax, tc.specK, tc.kvBlocks, tc.chunk
			})
			reqs := prefixRequests(n)
			run(t, e, reqs, tc.stagger)
			cached, preempted := 0, 0
			for i, r := range reqs {
				if !slices.Equal(r.out, want[i].out) || r.finish != want[i].finish {
					t.Errorf("request %d (%d cached tokens, %d preemptions): %v %s\ncold %v %s",
						i, r.stats.CachedTokens, r.stats.Preemptions, r.out, r.finish, want[i].out, want[i].finish)
				}
				if r.stats.CachedTokens >= r.stats.PromptTokens || r.stats.CachedTokens%16 != 0 {
					t.Errorf("request %d: %d of %d prompt tokens cached", i, r.stats.CachedTokens, r.stats.PromptTokens)
				}
				if r.stats.Preemptions == 0 && r.stats.PrefillTokens != r.stats.PromptTokens-r.stats.CachedTokens {
					t.Errorf("request %d: prefill %d tokens, prompt %d, cached %d", i, r.stats.PrefillTokens,
						r.stats.PromptTokens, r.stats.CachedTokens)
				}
				cached += r.stats.CachedTokens
				preempted += r.stats.Preemptions
			}
			var s Snapshot
			e.Snapshot(&s)
			if cached == 0 || s.PrefixHits < int64(cached) || s.PrefixQueries <= s.PrefixHits {
				t.Errorf("hits %d (requests' cached tokens %d) of %d queried", s.PrefixHits, cached, s.PrefixQueries)
			}
			if preempted == 0 && s.PrefixHits != int64(cached) {
				t.Errorf("no preemption, but the engine hit %d tokens and the requests %d", s.PrefixHits, cached)
			}
			if tc.pressure && (s.PrefixEvictions == 0 || s.Preemptions == 0) {
				t.Errorf("memory pressure, but %d evictions and %d preemptions", s.PrefixEvictions, s.Preemptions)
			}
			if s.KVBlocksUsed != 0 || s.KVBlocksCached == 0 || s.KVBlocksCached > s.KVBlocksTotal {
				t.Errorf("after all finished: %d blocks used, %d cached of %d", s.KVBlocksUsed, s.KVBlocksCached, s.KVBlocksTotal)
			}
			t.Logf("hits %d of %d prompt tokens, %d evictions, %d preemptions", s.PrefixHits, s.PrefixQueries,
				s.PrefixEvictions, s.Preemptions)
		})
	}
}

// TestPrefixCacheReuse: a repeated prompt reuses every full block but the
// one holding its last token, and a turn that extends an earlier
// conversation (prompt, answer, a new question) reuses the earlier turn,
// answer included.
func TestPrefixCacheReuse(t *testing.T) {
	e := open(t, func(c *Config) { c.SpecK = 0 })
	p := prompt(5, 100)
	first := solo(t, e, p, Params{MaxTokens: 30})
	again := solo(t, e, p, Params{MaxTokens: 30})
	if first.stats.CachedTokens != 0 || again.stats.CachedTokens != 96 || !slices.Equal(first.out, again.out) {
		t.Fatalf("cached %d then %d tokens of 100 (want 0, 96); outputs equal: %v",
			first.stats.CachedTokens, again.stats.CachedTokens, slices.Equal(first.out, again.out))
	}
	turn2 := append(append(slices.Clip(p), first.out...), prompt(6, 12)[1:]...)
	second := solo(t, e, turn2, Params{MaxTokens: 10})
	// the first turn's K/V covers its prompt and every output token but the
	// last (never run through the model)
	if want := (len(p) + len(first.out) - 1) / 16 * 16; second.stats.CachedTokens != want {
		t.Fatalf("turn 2 (%d tokens) reused %d, want %d", len(turn2), second.stats.CachedTokens, want)
	}
}
