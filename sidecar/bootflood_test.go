package sidecar

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/picometer/picometer/schema"
)

// TestBootFlood: 10,000 distinct boot ids of one target, each a hello and
// one request on its own connection, then gone, while a daemon stays
// connected: the target never holds more than 2 × max_dead_boots dead
// boots (hellos fold them), an expiry pass leaves max_dead_boots, the
// scrape stays fast, and no request is lost: the counter holds all 10,001.
// With the default cap and a configured one.
func TestBootFlood(t *testing.T) {
	t.Run("default", func(t *testing.T) { bootFlood(t, 0) })
	t.Run("max_dead_boots=4", func(t *testing.T) { bootFlood(t, 4) })
}

func bootFlood(t *testing.T, maxDead int) {
	n := 10000
	if maxDead != 0 {
		n = 1000
	}
	a := NewAggregator(AggregatorOptions{Now: newFakeClock(testNow).now, ExpireAfter: 5 * time.Minute, MaxDeadBoots: maxDead, Logger: discardLogger()})
	if maxDead == 0 {
		maxDead = MaxDeadBoots
	}
	req := schema.RequestBody{ID: "r", Operation: schema.OpChat, AdmittedUS: 1, FirstTokenUS: 2, LastTokenUS: 2, FinishUS: 3,
		CompletionTokens: 1, FinishReason: schema.FinishStop}
	live := newSim(t, "ffffffffffffffff", "m")
	keep := open(a)
	keep.send(t, live.hello())
	maxBoots := 0
	for i := range n {
		s := newSim(t, fmt.Sprintf("%016x", i), "m")
		feed(t, a, append(s.hello(), s.request(req)...))
		a.mu.Lock()
		for _, tg := range a.targets {
			tg.mu.Lock()
			maxBoots = max(maxBoots, len(tg.boots))
			tg.mu.Unlock()
		}
		a.mu.Unlock()
	}
	keep.send(t, live.request(req))
	waitApplied(t, a, kindRequest, uint64(n+1))
	if maxBoots > 2*maxDead+2 {
		t.Errorf("a target held %d boots during the flood, want ≤ %d", maxBoots, 2*maxDead+2)
	}
	a.Expire(testNow.Add(time.Minute))
	a.mu.Lock()
	boots := len(a.boots)
	a.mu.Unlock()
	if boots != maxDead+1 {
		t.Errorf("%d boots after expiry, want %d dead + the live one", boots, maxDead+1)
	}
	start := time.Now()
	text := exposition(a)
	scrape := time.Since(start)
	var finished float64
	for k, v := range parseExposition(t, text) {
		if strings.HasPrefix(k, "picometer_requests_finished_total{") {
			finished += v
		}
	}
	if finished != float64(n+1) {
		t.Errorf("requests finished %v, want %d: folding lost or doubled some", finished, n+1)
	}
	if scrape > 100*time.Millisecond {
		t.Errorf("scrape after the flood took %v", scrape)
	}
	t.Logf("%d boot ids: at most %d boots held, %d after expiry, scrape %v, %v requests counted", n, maxBoots, boots, scrape, finished)
	keep.close()
}

// BenchmarkHelloFold is what a new boot's hello costs under the global
// lock when it folds: a target holding 2 × MaxDeadBoots + 1 dead boots
// folds them down to MaxDeadBoots (one scan, one sort, the map deletes).
// A flood folds once every MaxDeadBoots + 1 hellos. Targets are made in
// batches outside the timer (stopping it per fold would cost more than a
// fold).
func BenchmarkHelloFold(b *testing.B) {
	a := newTestAggregator(false)
	ids := make([]string, 2*MaxDeadBoots+1)
	for i := range ids {
		ids[i] = fmt.Sprintf("%016x", i)
	}
	const batch = 256
	var ts []*target
	for i := 0; i < b.N; i++ {
		if i%batch == 0 {
			b.StopTimer()
			ts = ts[:0]
			for range batch {
				t := &target{a: a, key: targetKey{"m", "picometer"}, boots: map[string]*boot{}} // what folding touches
				for j, id := range ids {
					bt := &boot{id: id, t: t, disconnects: testNow.Add(time.Duration(j))}
					t.boots[id], a.boots[id] = bt, bt
					t.order = append(t.order, bt)
				}
				ts = append(ts, t)
			}
			b.StartTimer()
		}
		t := ts[i%batch]
		a.mu.Lock()
		t.mu.Lock()
		t.foldDeadBoots(MaxDeadBoots)
		t.mu.Unlock()
		a.mu.Unlock()
	}
}
