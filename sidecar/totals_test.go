package sidecar

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"

	"github.com/picometer/picometer/schema"
)

// This file tests the totals events (apply_totals.go): a restarted or
// starved sidecar converges to the daemon's own totals, counts what it
// recovered, counts nothing twice and never goes down.

func (s *sim) totals(tb schema.TotalsBody) []byte {
	return mustAppend(s.t, nil, &schema.Totals{Header: s.hdr(schema.KindTotals), TotalsBody: tb})
}

// closeSeries compares like diffSeries, but a histogram _sum within 1e-9
// (relative) counts as equal: a sum raised by a totals event is the
// received events' sum plus the difference to the daemon's, which may
// round differently in the last bit.
func closeSeries(got, want map[string]float64) string {
	var out []string
	for k, v := range want {
		g, ok := got[k]
		name, _, _ := strings.Cut(k, "{")
		switch {
		case !ok:
			out = append(out, "missing "+k)
		case strings.HasSuffix(name, "_sum") && math.Abs(g-v) <= 1e-9*math.Max(1, math.Abs(v)):
		case g != v:
			out = append(out, fmt.Sprintf("%s = %v, want %v", k, g, v))
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			out = append(out, "extra "+k)
		}
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

// notBelow reports the series of now that are below their value in before.
func notBelow(before, now map[string]float64) string {
	var out []string
	for k, v := range before {
		if now[k] < v {
			out = append(out, fmt.Sprintf("%s went down: %v → %v", k, v, now[k]))
		}
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

func recovered(t testing.TB, a *Aggregator, model string) float64 {
	t.Helper()
	return parseExposition(t, exposition(a))[seriesKey("picometer_sidecar_events_recovered_total",
		map[string]string{"gen_ai_request_model": model, "engine": "picometer"})]
}

// TestTotalsRestartMidStream is finding 1 of issue 13 in the aggregator: a
// daemon served 400 requests; the sidecar that is now running never saw
// the first 150 (they went to a sidecar that was killed), lost 50 more in a
// sequence gap, and received the rest. After the daemon's next totals
// event, every request series equals the daemon's own numbers (the
// independent expectation of aggregate_test.go, fed every request), on
// /metrics and OTLP alike; what it recovered is counted; duplicate and
// older totals change nothing, and no series ever went down.
func TestTotalsRestartMidStream(t *testing.T) {
	const model = "restart-model"
	rng := rand.New(rand.NewPCG(3, 4))
	s := newSim(t, "feedfacefeedface", model)
	daemon := schema.NewTotals() // the daemon's own totals
	want := newExpected()
	want.startTarget(model)
	served := func(n int) []schema.RequestBody {
		var rs []schema.RequestBody
		for i := range n {
			r := randomRequest(rng, i)
			daemon.Add(&r, testBlockSize)
			want.expectRequest(model, &r)
			rs = append(rs, r)
		}
		return rs
	}
	// The first sidecar got a hello, 150 requests and a totals event, then died.
	s.hello()
	for range served(150) {
		s.seq++
	}
	s.totals(daemon)

	a := newTestAggregator(true)
	oc := open(a)
	defer oc.close()
	var data bytes.Buffer
	data.Write(s.hello())        // the daemon reconnects to the new sidecar
	early := cloneTotals(daemon) // older totals, sent again below
	gap := served(50)            // lost in transit: a sequence gap
	s.skip(uint64(len(gap)))
	for _, r := range served(200) {
		data.Write(s.request(r))
	}
	oc.send(t, data.Bytes())
	waitApplied(t, a, kindRequest, 200)
	before := parseExposition(t, exposition(a))
	if got := recovered(t, a, model); got != 0 {
		t.Fatalf("recovered %v before any totals, want 0", got)
	}

	// The daemon's totals: everything it served.
	oc.send(t, s.totals(daemon))
	waitApplied(t, a, kindTotals, 1)
	prom := parseExposition(t, exposition(a))
	if d := notBelow(before, prom); d != "" {
		t.Fatalf("a totals event took series down:\n%s", d)
	}
	if d := closeSeries(requestSeries(prom), want.series()); d != "" {
		t.Fatalf("after the totals, the exposition differs from the daemon's numbers:\n%s", d)
	}
	if got := recovered(t, a, model); got != 200 {
		t.Fatalf("recovered %v, want 200 (150 sent to the dead sidecar, 50 lost in a gap)", got)
	}
	if d := closeSeries(otelSeries(t, collect(t, a)), prom); d != "" {
		t.Fatalf("OTel differs from the exposition:\n%s", d)
	}

	// The same totals again, and an older one: nothing changes.
	oc.send(t, append(s.totals(daemon), s.totals(early)...))
	waitApplied(t, a, kindTotals, 3)
	again := parseExposition(t, exposition(a))
	if d := diffSeries(again, prom); d != "" && !onlySelf(again, prom) {
		t.Fatalf("a repeated or older totals event changed series:\n%s", d)
	}

	// Requests after the totals add to it; the next totals agree.
	var more bytes.Buffer
	for _, r := range served(100) {
		more.Write(s.request(r))
	}
	more.Write(s.totals(daemon))
	oc.send(t, more.Bytes())
	waitApplied(t, a, kindTotals, 4)
	final := parseExposition(t, exposition(a))
	if d := closeSeries(requestSeries(final), want.series()); d != "" {
		t.Fatalf("after more requests, the exposition differs from the daemon's numbers:\n%s", d)
	}
	if got := recovered(t, a, model); got != 200 {
		t.Fatalf("recovered %v, want still 200 (the last 100 were received)", got)
	}
	if d := notBelow(again, final); d != "" {
		t.Fatalf("series went down:\n%s", d)
	}
}

// onlySelf: got and want differ only in the sidecar's own event counters.
func onlySelf(got, want map[string]float64) bool {
	for k, v := range want {
		if !strings.HasPrefix(k, "picometer_sidecar_events_total") && got[k] != v {
			return false
		}
	}
	return true
}

func cloneTotals(t schema.TotalsBody) schema.TotalsBody {
	out := schema.NewTotals()
	for op := range t.Ops {
		src, dst := &t.Ops[op], &out.Ops[op]
		dst.PromptTokens, dst.CompletionTokens = src.PromptTokens, src.CompletionTokens
		copy(dst.Finished, src.Finished)
		copy(dst.Failed, src.Failed)
		for h := range src.Hists {
			dst.Hists[h] = schema.Hist{Counts: append([]uint64(nil), src.Hists[h].Counts...), Sum: src.Hists[h].Sum}
		}
		for e := range src.DurationByError {
			dst.DurationByError[e] = schema.Hist{Counts: append([]uint64(nil), src.DurationByError[e].Counts...), Sum: src.DurationByError[e].Sum}
		}
		for c := range src.TTFTCache {
			dst.TTFTCache[c] = schema.Hist{Counts: append([]uint64(nil), src.TTFTCache[c].Counts...), Sum: src.TTFTCache[c].Sum}
		}
	}
	return out
}

// TestTotalsNoDoubleCount: a request event the boot's totals already hold
// (a seq at or below the last totals' seq, on a later connection) is
// stale_seq, not counted again.
func TestTotalsNoDoubleCount(t *testing.T) {
	a := newTestAggregator(false)
	s := newSim(t, "0a0a0a0a0a0a0a0a", "dup")
	r := typicalRequest("", 0).RequestBody
	tot := schema.NewTotals()
	tot.Add(&r, testBlockSize)
	var first bytes.Buffer
	first.Write(s.hello())
	first.Write(s.request(r))
	first.Write(s.totals(tot)) // seq 3
	if st := feed(t, a, first.Bytes()); st.Applied != 3 || st.Rejected != 0 {
		t.Fatalf("stats %+v", st)
	}
	// A later connection of the boot replays seq 2 (below the totals' 3).
	s.seq = 1
	second := append(s.hello(), s.request(r)...)
	if st := feed(t, a, second); st.Applied != 1 || st.Rejected != 1 {
		t.Fatalf("stats %+v, want the hello applied and the replayed request rejected", st)
	}
	if got := rejected(t, a, schema.ReasonStaleSeq); got != 1 {
		t.Fatalf("stale_seq = %v, want 1", got)
	}
	prom := parseExposition(t, exposition(a))
	k := seriesKey("picometer_requests_finished_total", map[string]string{"gen_ai_request_model": "dup", "engine": "picometer",
		"gen_ai_operation_name": r.Operation, "finish_reason": r.FinishReason})
	if prom[k] != 1 {
		t.Fatalf("%s = %v, want 1", k, prom[k])
	}
}

// TestTotalsTwoBoots: two daemons of one target each raise only their own
// share: the target's series are the sum of both boots' totals.
func TestTotalsTwoBoots(t *testing.T) {
	a := newTestAggregator(true)
	rng := rand.New(rand.NewPCG(5, 6))
	want := newExpected()
	want.startTarget("shared")
	for _, boot := range []string{"1111111111111111", "2222222222222222"} {
		s := newSim(t, boot, "shared")
		tot := schema.NewTotals()
		var data bytes.Buffer
		data.Write(s.hello())
		for i := range 60 {
			r := randomRequest(rng, i)
			tot.Add(&r, testBlockSize)
			want.expectRequest("shared", &r)
			if i%3 == 0 { // a third reaches the sidecar as events
				data.Write(s.request(r))
			} else {
				s.skip(1)
			}
		}
		data.Write(s.totals(tot))
		if st := feed(t, a, data.Bytes()); st.Rejected != 0 {
			t.Fatalf("stats %+v", st)
		}
	}
	prom := parseExposition(t, exposition(a))
	if d := closeSeries(requestSeries(prom), want.series()); d != "" {
		t.Fatalf("two boots' totals do not add up:\n%s", d)
	}
	if got := recovered(t, a, "shared"); got != 80 {
		t.Fatalf("recovered %v, want 80", got)
	}
}

// TestTotalsTTFTByCache: a daemon's totals raise the time to first token
// of each cache outcome to its own split; totals of a daemon that predates
// the split (no ttft_cache) raise the misses, as its request events (no
// cached_tokens) would have.
func TestTotalsTTFTByCache(t *testing.T) {
	ttftCount := func(prom map[string]float64, model, cache string) float64 {
		return prom[seriesKey("gen_ai_server_time_to_first_token_seconds_count", map[string]string{"gen_ai_request_model": model,
			"engine": "picometer", "gen_ai_operation_name": schema.OpChat, "cache": cache})]
	}
	a := newTestAggregator(false)
	for _, c := range []struct {
		model  string
		strip  bool
		counts [3]float64 // hit, partial, miss
	}{{"split", false, [3]float64{2, 1, 1}}, {"old-daemon", true, [3]float64{0, 0, 4}}} {
		s := newSim(t, strings.Repeat("ab", 8)+c.model, c.model)
		tot := schema.NewTotals()
		for _, cached := range []int{99, 90, 50, 0} { // of 100 prompt tokens: hit, hit, partial, miss
			r := typicalRequest("", 0).RequestBody
			r.CachedTokens = cached
			tot.Add(&r, testBlockSize)
		}
		if c.strip {
			for op := range tot.Ops {
				tot.Ops[op].TTFTCache = nil
			}
		}
		if st := feed(t, a, append(s.hello(), s.totals(tot)...)); st.Rejected != 0 || st.Applied != 2 {
			t.Fatalf("%s: stats %+v", c.model, st)
		}
		prom := parseExposition(t, exposition(a))
		for i, cache := range schema.CacheOutcomes {
			if got := ttftCount(prom, c.model, cache); got != c.counts[i] {
				t.Errorf("%s: TTFT count with cache=%q is %v, want %v", c.model, cache, got, c.counts[i])
			}
		}
	}
}

// TestBadCachedTokens: a request event whose cached_tokens exceed its
// prompt (its cache label would be made up) is rejected and counted as
// invalid_field; the requests around it are counted under their labels.
func TestBadCachedTokens(t *testing.T) {
	a := newTestAggregator(false)
	s := newSim(t, "cdcdcdcdcdcdcdcd", "m")
	r := typicalRequest("", 0).RequestBody
	r.CachedTokens = 96 // of 100: a hit
	data := append(s.hello(), s.request(r)...)
	bad := bytes.Replace(s.request(r), []byte(`"cached_tokens":96`), []byte(`"cached_tokens":101`), 1)
	if !bytes.Contains(bad, []byte(`"cached_tokens":101`)) {
		t.Fatalf("no cached_tokens in %s", bad)
	}
	data = append(append(data, bad...), s.request(r)...)
	if st := feed(t, a, data); st.Applied != 3 || st.Rejected != 1 {
		t.Fatalf("stats %+v, want the hello and two requests applied, one line rejected", st)
	}
	if got := rejected(t, a, schema.ReasonInvalidField); got != 1 {
		t.Errorf("invalid_field = %v, want 1", got)
	}
	prom := parseExposition(t, exposition(a))
	for cache, want := range map[string]float64{schema.CacheHit: 2, schema.CachePartial: 0, schema.CacheMiss: 0} {
		k := seriesKey("gen_ai_server_time_to_first_token_seconds_count", map[string]string{"gen_ai_request_model": "m",
			"engine": "picometer", "gen_ai_operation_name": schema.OpChat, "cache": cache})
		if prom[k] != want {
			t.Errorf("%s = %v, want %v", k, prom[k], want)
		}
	}
}
