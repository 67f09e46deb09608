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

// TestHijack reproduces finding 3: a forged hello with a live daemon's boot
// id and seq 2^64−1 made every real event stale_seq until the sidecar
// restarted. Now a boot that is connected cannot be claimed by a second
// connection (boot_in_use, the connection is closed), and the sequence
// baseline belongs to the connection: a forger that claims the boot while
// its daemon is away does not make the daemon's events stale afterwards.
func TestHijack(t *testing.T) {
	a := newTestAggregator(false)
	real := newSim(t, "b00tb00tb00tb00t", "m")
	r := typicalRequest("", 0).RequestBody
	rc := open(a)
	rc.send(t, real.hello())
	rc.send(t, real.request(r))
	waitApplied(t, a, kindRequest, 1)

	forged := newSim(t, real.boot, "m")
	forged.seq = math.MaxUint64 - 1
	st := feed(t, a, append(forged.hello(), forged.hello()...))
	if st.Applied != 0 || st.Rejected != 1 || schema.ReasonOf(st.Err) != schema.ReasonBootInUse {
		t.Fatalf("forged hello while the daemon is connected: %+v, want rejected with boot_in_use and closed", st)
	}
	rc.send(t, real.request(r))
	waitApplied(t, a, kindRequest, 2)
	if st := rc.close(); st.Applied != 3 || st.Rejected != 0 {
		t.Fatalf("daemon connection: %+v, want 3 applied", st)
	}

	// The daemon is away (reconnecting): a forger claims its boot with the
	// highest seq; when the daemon comes back its events still count.
	forged.seq = math.MaxUint64 - 2
	if st := feed(t, a, append(forged.hello(), forged.request(r)...)); st.Applied != 2 {
		t.Fatalf("forged connection while the daemon is away: %+v", st)
	}
	if st := feed(t, a, append(real.hello(), real.request(r)...)); st.Applied != 2 || st.Rejected != 0 {
		t.Fatalf("daemon back: %+v, want 2 applied", st)
	}
	if got := rejected(t, a, schema.ReasonStaleSeq); got != 0 {
		t.Fatalf("stale_seq = %v, want 0", got)
	}
	if got := rejected(t, a, schema.ReasonBootInUse); got != 1 {
		t.Fatalf("boot_in_use = %v, want 1", got)
	}
	p := parseExposition(t, exposition(a))
	model := map[string]string{"gen_ai_request_model": "m", "engine": "picometer"}
	if got := p[seriesKey("picometer_sidecar_events_lost_total", model)]; got != 0 {
		t.Fatalf("events lost = %v, want 0", got)
	}
	// 3 of the daemon's requests and the forger's one (a same-uid forger can
	// add events; SO_PEERCRED keeps other uids out, see TestPeerCredentials).
	if got := genTokens(t, a, "m"); got != 4*float64(r.CompletionTokens) {
		t.Fatalf("generation tokens = %v, want %v", got, 4*r.CompletionTokens)
	}
}
