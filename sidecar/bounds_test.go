package sidecar

import (
	"math"
	"testing"

	"github.com/picometer/picometer/schema"
)

// This file tests the sidecar's bounds against hostile or buggy producers
// (issue 13): counters that cannot wrap, targets, connections, identity.

func rejected(t testing.TB, a *Aggregator, reason string) float64 {
	t.Helper()
	return parseExposition(t, exposition(a))[seriesKey("picometer_sidecar_decode_errors_total", map[string]string{"reason": reason})]
}

func genTokens(t testing.TB, a *Aggregator, model string) float64 {
	t.Helper()
	return parseExposition(t, exposition(a))[seriesKey("picometer_generation_tokens_total",
		map[string]string{"gen_ai_request_model": model, "engine": "picometer", "gen_ai_operation_name": "chat"})]
}

// TestCounterWrap reproduces finding 6: completion_tokens = 2^63−1 sent
// twice took generation_tokens_total from 9.2e18 to 1. Both events are now
// rejected (invalid_field) and the counter stays where it was; and even
// from a counter already near its bound, no in-range event can wrap it.
func TestCounterWrap(t *testing.T) {
	a := newTestAggregator(false)
	s := newSim(t, "wrapwrapwrapwrap", "m")
	r := typicalRequest("", 0).RequestBody
	r.Operation = schema.OpChat
	data := s.hello()
	data = append(data, s.request(r)...)
	huge := r
	huge.CompletionTokens = math.MaxInt64
	data = append(data, s.request(huge)...)
	data = append(data, s.request(huge)...)
	st := feed(t, a, data)
	if st.Applied != 2 || st.Rejected != 2 {
		t.Fatalf("stats %+v, want 2 applied and 2 rejected", st)
	}
	if got, want := genTokens(t, a, "m"), float64(r.CompletionTokens); got != want {
		t.Fatalf("generation tokens = %v, want %v", got, want)
	}
	if got := rejected(t, a, schema.ReasonInvalidField); got != 2 {
		t.Fatalf("invalid_field = %v, want 2", got)
	}

	// The sum of in-range events: take the counter to its bound minus a
	// little; the next request that would pass it is rejected whole.
	a.mu.Lock()
	tg := a.targets[targetKey{"m", "picometer"}]
	a.mu.Unlock()
	gt := tg.req[indexOf(schema.AttrOperation.Values, schema.OpChat)].genTokens
	near := uint64(maxCounter) - 10
	gt.c.Set(near)
	big := r
	big.CompletionTokens = schema.MaxTokens
	st = feed(t, a, append(s.hello(), s.request(big)...))
	if st.Applied != 1 || st.Rejected != 1 {
		t.Fatalf("stats %+v, want the hello applied and the request rejected", st)
	}
	if got := gt.c.Get(); got != near {
		t.Fatalf("counter = %d, want %d (untouched)", got, near)
	}
	if got := rejected(t, a, schema.ReasonInvalidField); got != 3 {
		t.Fatalf("invalid_field = %v, want 3", got)
	}
}

func TestSatAdd(t *testing.T) {
	f := func(a, b, want int64) {
		t.Helper()
		if got := satAdd(a, b); got != want {
			t.Errorf("satAdd(%d, %d) = %d, want %d", a, b, got, want)
		}
	}
	f(0, 0, 0)
	f(1, 2, 3)
	f(math.MaxInt64-1, 1, math.MaxInt64)
	f(math.MaxInt64-1, 2, math.MaxInt64)
	f(math.MaxInt64, math.MaxInt64, math.MaxInt64)
	f(1<<53, 1<<53, 1<<54)
}
