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
// connected: the target never holds more than 2 × MaxDeadBoots dead boots
// (hellos fold them), an expiry pass leaves MaxDeadBoots, the scrape stays
// fast, and no request is lost: the counter holds all 10,001.
func TestBootFlood(t *testing.T) {
	const n = 10000
	a := newTestAggregator(false)
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
	waitApplied(t, a, kindRequest, n+1)
	if maxBoots > 2*MaxDeadBoots+2 {
		t.Errorf("a target held %d boots during the flood, want ≤ %d", maxBoots, 2*MaxDeadBoots+2)
	}
	a.Expire(testNow.Add(time.Minute))
	a.mu.Lock()
	boots := len(a.boots)
	a.mu.Unlock()
	if boots != MaxDeadBoots+1 {
		t.Errorf("%d boots after expiry, want %d dead + the live one", boots, MaxDeadBoots+1)
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
	if finished != n+1 {
		t.Errorf("requests finished %v, want %d: folding lost or doubled some", finished, n+1)
	}
	if scrape > 100*time.Millisecond {
		t.Errorf("scrape after the flood took %v", scrape)
	}
	t.Logf("%d boot ids: at most %d boots held, %d after expiry, scrape %v, %v requests counted", n, maxBoots, boots, scrape, finished)
	keep.close()
}
