package sidecar

import (
	"bytes"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/picometer/picometer/schema"
)

// expected accumulates what the exposition must show, computed here from
// the events independently of the aggregator.
type expected struct {
	hist     map[string]*expHist // by series key without le (name without suffix)
	counters map[string]float64
}

type expHist struct {
	name   string
	labels map[string]string
	bounds []float64
	counts []uint64 // per bucket, +Inf last
	sum    float64
	count  uint64
}

func newExpected() *expected {
	return &expected{hist: map[string]*expHist{}, counters: map[string]float64{}}
}

// histogram returns the expected histogram series, empty at first.
func (e *expected) histogram(famID string, labels map[string]string) *expHist {
	f := schema.Lookup(famID)
	key := seriesKey(f.PromName(), labels)
	h := e.hist[key]
	if h == nil {
		h = &expHist{name: f.PromName(), labels: labels, bounds: f.Buckets, counts: make([]uint64, len(f.Buckets)+1)}
		e.hist[key] = h
	}
	return h
}

// startTarget expects the request series a daemon's hello starts at zero:
// for both operations every request histogram but the duration of failures,
// the token counters, requests_finished by every finish reason and
// requests_failed by every error type.
func (e *expected) startTarget(model string) {
	for _, op := range schema.AttrOperation.Values {
		l := map[string]string{"gen_ai_request_model": model, "engine": "picometer", "gen_ai_operation_name": op}
		for _, id := range []string{schema.IDTimePerOutputToken, schema.IDRequestDuration, schema.IDInterTokenLatency,
			schema.IDQueueDuration, schema.IDPrefillDuration, schema.IDDecodeDuration, schema.IDRequestPromptLength, schema.IDRequestGenLength} {
			e.histogram(id, l)
		}
		for _, c := range []string{"hit", "partial", "miss"} {
			e.histogram(schema.IDTTFT, with(l, "cache", c))
		}
		e.add(schema.IDPromptTokens, l, 0)
		e.add(schema.IDGenerationTokens, l, 0)
		for _, fr := range schema.FinishReasons {
			e.add(schema.IDRequestsFinished, with(l, "finish_reason", fr), 0)
		}
		for _, et := range schema.ErrorTypes {
			e.add(schema.IDRequestsFailed, with(l, "error_type", et), 0)
		}
	}
}

func (e *expected) observe(famID string, labels map[string]string, v float64) {
	h := e.histogram(famID, labels)
	h.counts[sort.SearchFloat64s(h.bounds, v)]++ // the first bound >= v: "le" is inclusive
	h.sum += v
	h.count++
}

func (e *expected) add(famID string, labels map[string]string, v float64) {
	e.counters[seriesKey(schema.Lookup(famID).PromName(), labels)] += v
}

// series returns the expected series as parseExposition keys them.
func (e *expected) series() map[string]float64 {
	out := map[string]float64{}
	for _, h := range e.hist {
		cum := uint64(0)
		for i, b := range h.bounds {
			cum += h.counts[i]
			out[seriesKey(h.name+"_bucket", with(h.labels, "le", strconv.FormatFloat(b, 'g', -1, 64)))] = float64(cum)
		}
		out[seriesKey(h.name+"_bucket", with(h.labels, "le", "+Inf"))] = float64(h.count)
		out[seriesKey(h.name+"_sum", h.labels)] = h.sum
		out[seriesKey(h.name+"_count", h.labels)] = float64(h.count)
	}
	for k, v := range e.counters {
		out[k] = v
	}
	return out
}

// expectRequest applies the sidecar's documented rules to one request.
func (e *expected) expectRequest(model string, r *schema.RequestBody) {
	l := map[string]string{"gen_ai_request_model": model, "engine": "picometer", "gen_ai_operation_name": r.Operation}
	us := func(v int64) float64 { return float64(v) / 1e6 }
	if r.AdmittedUS >= 0 {
		e.observe(schema.IDQueueDuration, l, us(r.AdmittedUS))
	}
	if r.FirstTokenUS >= 0 {
		e.observe(schema.IDTTFT, with(l, "cache", expectedCache(r)), us(r.FirstTokenUS))
		if r.AdmittedUS >= 0 {
			e.observe(schema.IDPrefillDuration, l, us(r.FirstTokenUS-r.AdmittedUS))
		}
		e.observe(schema.IDDecodeDuration, l, us(r.FinishUS-r.FirstTokenUS))
		if r.CompletionTokens >= 2 {
			e.observe(schema.IDTimePerOutputToken, l, us(r.LastTokenUS-r.FirstTokenUS)/float64(r.CompletionTokens-1))
		}
	}
	for _, g := range r.ITLUS {
		e.observe(schema.IDInterTokenLatency, l, us(g))
	}
	et := ""
	if r.FinishReason == schema.FinishError || r.FinishReason == schema.FinishAbort {
		et = r.ErrorType
		if et == "" {
			et = schema.ErrOther
		}
	}
	if et == "" {
		e.observe(schema.IDRequestDuration, l, us(r.FinishUS))
	} else {
		e.observe(schema.IDRequestDuration, with(l, "error_type", et), us(r.FinishUS))
		e.add(schema.IDRequestsFailed, with(l, "error_type", et), 1)
	}
	e.add(schema.IDPromptTokens, l, float64(r.PromptTokens))
	e.add(schema.IDGenerationTokens, l, float64(r.CompletionTokens))
	if r.AdmittedUS >= 0 {
		e.observe(schema.IDRequestPromptLength, l, float64(r.PromptTokens))
		e.observe(schema.IDRequestGenLength, l, float64(r.CompletionTokens))
	}
	e.add(schema.IDRequestsFinished, with(l, "finish_reason", r.FinishReason), 1)
}

// expectedCache is the cache label of r's TTFT as METRICS.md defines it
// for testHello's engine (blocks of 16 tokens): miss with nothing cached,
// hit when at most one block was recomputed, partial otherwise.
func expectedCache(r *schema.RequestBody) string {
	switch {
	case r.CachedTokens == 0:
		return "miss"
	case r.PromptTokens-r.CachedTokens <= 16:
		return "hit"
	}
	return "partial"
}

// randomRequest draws a valid request, including values on bucket bounds.
func randomRequest(rng *rand.Rand, i int) schema.RequestBody {
	r := schema.RequestBody{ID: "r" + strconv.Itoa(i), Operation: schema.AttrOperation.Values[rng.IntN(2)]}
	bound := func(b []float64) int64 { return int64(b[rng.IntN(len(b))]*1e6 + 0.5) } // exactly a bucket bound
	dur := func() int64 {
		switch rng.IntN(4) {
		case 0:
			return bound(schema.TokenLatencyBuckets)
		case 1:
			return rng.Int64N(2000)
		default:
			return rng.Int64N(3_000_000)
		}
	}
	r.FinishReason = schema.FinishReasons[rng.IntN(len(schema.FinishReasons))]
	switch r.FinishReason {
	case schema.FinishError:
		r.ErrorType = schema.ErrorTypes[rng.IntN(len(schema.ErrorTypes))]
	case schema.FinishAbort:
		if rng.IntN(3) > 0 {
			r.ErrorType = schema.ErrorTypes[rng.IntN(len(schema.ErrorTypes))]
		}
	}
	if r.FinishReason == schema.FinishError && rng.IntN(2) == 0 {
		// rejected before admission
		r.AdmittedUS, r.FirstTokenUS, r.LastTokenUS = -1, -1, -1
		r.FinishUS = rng.Int64N(500)
		return r
	}
	r.AdmittedUS = dur() / 10
	r.PromptTokens = rng.IntN(3000)
	switch c := rng.IntN(4); {
	case c == 0 || r.PromptTokens < 2: // a miss
	case c == 1: // a hit: 1..16 tokens recomputed, or just past it
		r.CachedTokens = max(r.PromptTokens-1-rng.IntN(17), 0)
	default: // anything cached
		r.CachedTokens = rng.IntN(r.PromptTokens + 1)
	}
	r.PrefillTokens = r.PromptTokens - r.CachedTokens
	if r.FinishReason == schema.FinishAbort && rng.IntN(4) == 0 {
		// aborted in the queue or during prefill: no first token
		r.FirstTokenUS, r.LastTokenUS = -1, -1
		r.FinishUS = r.AdmittedUS + dur()
		return r
	}
	r.FirstTokenUS = r.AdmittedUS + bound(schema.TTFTBuckets[:12])
	r.CompletionTokens = 1 + rng.IntN(130)
	r.LastTokenUS = r.FirstTokenUS
	for range r.CompletionTokens - 1 {
		if rng.IntN(8) == 0 {
			continue // a step that emitted two tokens for this request: one gap covers both
		}
		g := dur()
		r.ITLUS = append(r.ITLUS, g)
		r.LastTokenUS += g
	}
	r.DecodeTokens = r.CompletionTokens - 1
	r.FinishUS = r.LastTokenUS + rng.Int64N(100)
	return r
}

// TestExactness: 10,000 generated requests give exactly the counts, sums and
// bucket counts computed from the events, on both outputs.
func TestExactness(t *testing.T) {
	const n = 10000
	rng := rand.New(rand.NewPCG(1, 2))
	a := newTestAggregator(true)
	want := newExpected()
	s := newSim(t, "0123456789abcdef", "exact-model")
	var data bytes.Buffer
	data.Write(s.hello())
	want.startTarget("exact-model")
	totalGaps := 0
	for i := range n {
		r := randomRequest(rng, i)
		want.expectRequest("exact-model", &r)
		totalGaps += len(r.ITLUS)
		data.Write(s.request(r))
	}
	st := feed(t, a, data.Bytes())
	if st.Err != nil || st.Applied != n+1 || st.Rejected != 0 {
		t.Fatalf("stats %+v", st)
	}
	prom := parseExposition(t, exposition(a))
	if d := diffSeries(requestSeries(prom), want.series()); d != "" {
		t.Fatalf("exposition differs from the events:\n%s", d)
	}
	itl := prom[seriesKey("picometer_request_inter_token_latency_seconds_count",
		map[string]string{"gen_ai_request_model": "exact-model", "engine": "picometer", "gen_ai_operation_name": "chat"})] +
		prom[seriesKey("picometer_request_inter_token_latency_seconds_count",
			map[string]string{"gen_ai_request_model": "exact-model", "engine": "picometer", "gen_ai_operation_name": "text_completion"})]
	if int(itl) != totalGaps {
		t.Fatalf("ITL observations %v, want one per gap: %d", itl, totalGaps)
	}
	if d := diffSeries(otelSeries(t, collect(t, a)), prom); d != "" {
		t.Fatalf("OTel differs from the exposition:\n%s", d)
	}
}

// requestSeries keeps the series of the request families (the
// self-metrics and engine families are checked elsewhere).
func requestSeries(prom map[string]float64) map[string]float64 {
	got := map[string]float64{}
	for k, v := range prom {
		name, _, _ := strings.Cut(k, "{")
		if f := schema.ByPromName(name); f != nil && f.Source == schema.SourceRequest {
			got[k] = v
		}
	}
	return got
}

// TestHelloStartsRequestSeries: a daemon's hello alone starts its request
// series at zero (startTarget says which), on both outputs; a second boot of
// the same model and engine adds none.
func TestHelloStartsRequestSeries(t *testing.T) {
	a := newTestAggregator(true)
	oc := open(a)
	oc.send(t, newSim(t, "0123456789abcdef", "zero-model").hello())
	waitApplied(t, a, kindHello, 1)
	want := newExpected()
	want.startTarget("zero-model")
	prom := parseExposition(t, exposition(a))
	if d := diffSeries(requestSeries(prom), want.series()); d != "" {
		t.Fatalf("after a hello:\n%s", d)
	}
	if d := diffSeries(otelSeries(t, collect(t, a)), prom); d != "" {
		t.Fatalf("OTel differs from the exposition:\n%s", d)
	}
	n := len(prom)
	oc2 := open(a)
	oc2.send(t, newSim(t, "fedcba9876543210", "zero-model").hello())
	waitApplied(t, a, kindHello, 2)
	if got := len(parseExposition(t, exposition(a))); got != n {
		t.Fatalf("a second boot of the target changed the series from %d to %d", n, got)
	}
	oc.close()
	oc2.close()
}

// snapshot builds an engine body from cumulative counters.
func snapshot(preempt, dropped, decodeSteps int64, decodeTime float64, drafts, accepted []int64, running int, kvUsed, kvTotal int) schema.EngineBody {
	tb := make(schema.TimeByBatchSize, 5)
	if decodeSteps > 0 {
		tb[4] = schema.TimeCost{Count: decodeSteps, Sum: decodeTime}
	}
	e := schema.EngineBody{Preemptions: preempt, EventsDropped: dropped, DecodeTimeByBatchSize: tb,
		Running: running, Waiting: 1, Slots: 8, KVBlocksUsed: kvUsed, KVBlocksTotal: kvTotal,
		KVCacheUsage:  float64(kvUsed) / float64(kvTotal),
		PrefixQueries: 16 * decodeSteps, PrefixHits: 8 * decodeSteps, PrefixEvictions: preempt, KVBlocksCached: kvUsed / 2}
	if drafts != nil {
		e.SpecDecode = &schema.SpecDecode{DraftCount: drafts, AcceptCount: accepted}
	}
	return e
}

// TestRestartMonotonic: a daemon restarts (new boot id, counters from zero);
// every exported counter is non-decreasing over the scrapes, and ends at the
// sum of both boots' totals, bit for bit.
func TestRestartMonotonic(t *testing.T) {
	clk := newFakeClock(testNow)
	a := newClockAggregator(true, clk)
	base := map[string]string{"gen_ai_request_model": "m", "engine": "picometer"}
	var scrapes []map[string]float64
	scrape := func() map[string]float64 {
		p := parseExposition(t, exposition(a))
		scrapes = append(scrapes, p)
		return p
	}

	bootA := newSim(t, "aaaaaaaaaaaaaaaa", "m")
	ca := open(a)
	ca.send(t, bootA.hello())
	timesA := []float64{0.1, 0.30000000000000004, 0.7}
	for i, tm := range timesA {
		ca.send(t, bootA.engine(snapshot(int64(i+1), int64(2*i), int64(10*(i+1)), tm, []int64{int64(5 * (i + 1)), 2}, []int64{int64(i), 1}, 3, 8, 64)))
		waitApplied(t, a, kindEngine, uint64(i+1))
		scrape()
	}
	ca.close()
	scrape()

	bootB := newSim(t, "bbbbbbbbbbbbbbbb", "m")
	cb := open(a)
	cb.send(t, bootB.hello())
	timesB := []float64{0.05, 0.2}
	for i, tm := range timesB {
		cb.send(t, bootB.engine(snapshot(int64(i), 0, int64(4*(i+1)), tm, []int64{int64(i + 1), 0}, []int64{0, 0}, 5, 16, 64)))
		waitApplied(t, a, kindEngine, uint64(len(timesA)+i+1))
		scrape()
	}
	last := scrape()

	// Monotonic: every counter series, in every scrape after it appears.
	for i := 1; i < len(scrapes); i++ {
		for k, v := range scrapes[i-1] {
			name, _, _ := strings.Cut(k, "{")
			if f := schema.ByPromName(name); f == nil || f.Kind != schema.KindCounter && !strings.HasSuffix(name, "_count") && !strings.HasSuffix(name, "_bucket") {
				continue
			}
			if scrapes[i][k] < v {
				t.Fatalf("%s went from %v to %v at scrape %d", k, v, scrapes[i][k], i)
			}
		}
	}
	f := func(name string, labels map[string]string, want float64) {
		t.Helper()
		if got := last[seriesKey(name, labels)]; got != want {
			t.Errorf("%s %v = %v, want %v", name, labels, got, want)
		}
	}
	f("picometer_engine_preemptions_total", base, 3+1)
	f("picometer_daemon_events_dropped_total", with(base, "reason", "queue_full"), 4+0)
	f("picometer_engine_batch_steps_total", with(with(base, "phase", "decode"), "batch_size", "4"), 30+8)
	f("picometer_engine_batch_time_seconds_total", with(with(base, "phase", "decode"), "batch_size", "4"), timesA[2]+timesB[1])
	f("picometer_spec_decode_drafts_total", base, 15+2)
	f("picometer_spec_decode_draft_tokens_total", with(base, "position", "1"), 2+0)
	f("picometer_spec_decode_accepted_tokens_total", with(base, "position", "0"), 2+0)
	// Gauges follow the running boot B.
	f("picometer_engine_requests_running", base, 5)
	f("picometer_engine_kv_cache_usage_ratio", base, 0.25)
	// One info series: B's.
	n := 0
	for k := range last {
		if strings.HasPrefix(k, "picometer_engine_info{") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d engine_info series, want 1", n)
	}
	// A single boot's float counter is its own value, bit for bit.
	if got := scrapes[2][seriesKey("picometer_engine_batch_time_seconds_total", with(with(base, "phase", "decode"), "batch_size", "4"))]; got != 0.7 {
		t.Errorf("batch time of boot A alone = %v, want exactly 0.7", got)
	}
	cb.close()
	if d := diffSeries(otelSeries(t, collect(t, a)), parseExposition(t, exposition(a))); d != "" {
		t.Fatal(d)
	}
}

func waitApplied(t testing.TB, a *Aggregator, kind int, n uint64) {
	t.Helper()
	waitFor(t, func() bool { return a.self.events[kind].c.Get() >= n })
}

// TestSequenceGaps: injected gaps are counted exactly, across reconnects of
// the same boot; replays are stale_seq; a boot first seen mid-sequence sets
// the baseline.
func TestSequenceGaps(t *testing.T) {
	a := newTestAggregator(false)
	rng := rand.New(rand.NewPCG(3, 4))
	s := newSim(t, "9999999999999999", "m")
	req := schema.RequestBody{ID: "r", Operation: schema.OpChat, AdmittedUS: -1, FirstTokenUS: -1, LastTokenUS: -1,
		FinishUS: 5, FinishReason: schema.FinishError, ErrorType: schema.ErrQueueFull}
	var lost, stale uint64
	for conn := range 5 {
		if conn > 0 {
			k := uint64(rng.IntN(3))
			s.skip(k) // lost while reconnecting
			lost += k
		}
		var data []byte
		data = append(data, s.hello()...)
		for range 200 {
			if rng.IntN(10) == 0 {
				k := uint64(1 + rng.IntN(7))
				s.skip(k)
				lost += k
			}
			line := s.request(req)
			data = append(data, line...)
			if rng.IntN(20) == 0 {
				data = append(data, line...)
				stale++
			}
		}
		feed(t, a, data)
	}
	prom := parseExposition(t, exposition(a))
	if got := prom[seriesKey("picometer_sidecar_events_lost_total", map[string]string{"gen_ai_request_model": "m", "engine": "picometer"})]; got != float64(lost) {
		t.Fatalf("events lost = %v, want %d", got, lost)
	}
	if got := prom[seriesKey("picometer_sidecar_decode_errors_total", map[string]string{"reason": "stale_seq"})]; got != float64(stale) {
		t.Fatalf("stale_seq = %v, want %d", got, stale)
	}

	// A boot first seen at seq 1000 (its earlier events went to a previous
	// sidecar) counts nothing lost.
	late := newSim(t, "8888888888888888", "late")
	late.skip(999)
	feed(t, a, append(late.hello(), late.request(req)...))
	prom = parseExposition(t, exposition(a))
	if got := prom[seriesKey("picometer_sidecar_events_lost_total", map[string]string{"gen_ai_request_model": "late", "engine": "picometer"})]; got != 0 {
		t.Fatalf("late boot: events lost = %v, want 0", got)
	}
}

// TestExpiry: the series of a daemon that disconnected stay (counters and
// gauges) until ExpireAfter has passed, then go away on both outputs; a
// connected daemon never expires.
func TestExpiry(t *testing.T) {
	clk := newFakeClock(testNow)
	a := newClockAggregator(true, clk)
	gone, stays := newSim(t, "1111111111111111", "gone"), newSim(t, "2222222222222222", "stays")
	req := schema.RequestBody{ID: "r", Operation: schema.OpChat, AdmittedUS: 1, FirstTokenUS: 2, LastTokenUS: 2, FinishUS: 3,
		CompletionTokens: 1, FinishReason: schema.FinishStop}
	keep := open(a)
	keep.send(t, append(stays.hello(), stays.engine(snapshot(0, 0, 0, 0, nil, nil, 1, 1, 2))...))
	feed(t, a, append(append(gone.hello(), gone.request(req)...), gone.engine(snapshot(2, 0, 0, 0, nil, nil, 4, 1, 2))...))
	waitApplied(t, a, kindEngine, 2)
	has := func(model, name string) bool {
		for k := range parseExposition(t, exposition(a)) {
			if strings.HasPrefix(k, name+"{") && strings.Contains(k, `gen_ai_request_model="`+model+`"`) {
				return true
			}
		}
		return false
	}
	otelHas := func(model string) bool {
		for k := range otelSeries(t, collect(t, a)) {
			if strings.Contains(k, `gen_ai_request_model="`+model+`"`) {
				return true
			}
		}
		return false
	}

	clk.advance(5*time.Minute - time.Second)
	if n := a.Expire(clk.now()); n != 0 {
		t.Fatalf("expired %d targets too early", n)
	}
	if !has("gone", "picometer_engine_requests_running") || !has("gone", "picometer_requests_finished_total") || !otelHas("gone") {
		t.Fatal("series of a disconnected daemon went away before expire_after")
	}
	age := parseExposition(t, exposition(a))[seriesKey("picometer_sidecar_last_event_age_seconds", map[string]string{"gen_ai_request_model": "gone", "engine": "picometer"})]
	if age != (5*time.Minute - time.Second).Seconds() {
		t.Fatalf("last event age = %v", age)
	}
	clk.advance(time.Second)
	if n := a.Expire(clk.now()); n != 1 {
		t.Fatalf("expired %d targets, want 1", n)
	}
	if has("gone", "picometer_engine_requests_running") || has("gone", "picometer_requests_finished_total") || has("gone", "picometer_sidecar_events_lost_total") || otelHas("gone") {
		t.Fatal("series of an expired daemon remain")
	}
	if !has("stays", "picometer_engine_requests_running") || !otelHas("stays") {
		t.Fatal("a connected daemon expired")
	}
	if strings.Contains(exposition(a), "picometer_sidecar_events_total") == false {
		t.Fatal("self-metrics went away")
	}
	// The daemon comes back: its series start again.
	feed(t, a, append(gone.hello(), gone.request(req)...))
	if !has("gone", "picometer_requests_finished_total") {
		t.Fatal("a returning daemon has no series")
	}
	keep.close()
	if d := diffSeries(otelSeries(t, collect(t, a)), parseExposition(t, exposition(a))); d != "" {
		t.Fatal(d)
	}
}

// TestSharedTarget: two daemons with the same model and engine at once add
// up; gauges sum, the KV-cache usage is used blocks over total blocks.
func TestSharedTarget(t *testing.T) {
	a := newTestAggregator(false)
	d1, d2 := newSim(t, "3333333333333333", "same"), newSim(t, "4444444444444444", "same")
	c1, c2 := open(a), open(a)
	c1.send(t, append(d1.hello(), d1.engine(snapshot(2, 0, 0, 0, nil, nil, 3, 10, 100))...))
	c2.send(t, append(d2.hello(), d2.engine(snapshot(5, 0, 0, 0, nil, nil, 4, 30, 100))...))
	waitApplied(t, a, kindEngine, 2)
	p := parseExposition(t, exposition(a))
	base := map[string]string{"gen_ai_request_model": "same", "engine": "picometer"}
	for name, want := range map[string]float64{
		"picometer_engine_preemptions_total":    7,
		"picometer_engine_requests_running":     7,
		"picometer_engine_slots":                16,
		"picometer_engine_kv_cache_usage_ratio": 0.2,
	} {
		if got := p[seriesKey(name, base)]; got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	c1.close()
	p = parseExposition(t, exposition(a))
	if got := p[seriesKey("picometer_engine_requests_running", base)]; got != 4 {
		t.Errorf("running after one daemon left = %v, want the other's 4", got)
	}
	if got := p[seriesKey("picometer_engine_preemptions_total", base)]; got != 7 {
		t.Errorf("preemptions after one daemon left = %v, want 7 (counters stay)", got)
	}
	c2.close()
}

// TestHelloConflicts: a boot id that said hello as one model cannot say it
// as another; a hello repeated on the same connection is harmless.
func TestHelloConflicts(t *testing.T) {
	a := newTestAggregator(false)
	s := newSim(t, "5555555555555555", "first")
	st := feed(t, a, append(s.hello(), s.hello()...))
	if st.Applied != 2 {
		t.Fatalf("repeated hello: %+v", st)
	}
	s.model = "second"
	st = feed(t, a, s.hello())
	if st.Rejected != 1 || st.Applied != 0 {
		t.Fatalf("conflicting hello: %+v", st)
	}
	p := parseExposition(t, exposition(a))
	if got := p[seriesKey("picometer_sidecar_decode_errors_total", map[string]string{"reason": "invalid_field"})]; got != 1 {
		t.Fatalf("invalid_field = %v", got)
	}
}

// TestApplyAllocs locks the steady state of the per-event path: applying a
// decoded request or engine snapshot allocates nothing.
func TestApplyAllocs(t *testing.T) {
	for _, otlp := range []bool{false, true} {
		a := newTestAggregator(otlp)
		c := a.Connect()
		var ev schema.Event
		s := newSim(t, "6666666666666666", "m")
		apply := func(line []byte) {
			if err := decodeLine(bytes.TrimSuffix(line, []byte("\n")), &ev); err != nil {
				t.Fatal(err)
			}
			if err := c.Apply(&ev); err != nil {
				t.Fatal(err)
			}
		}
		apply(s.hello())
		apply(mustAppend(t, nil, typicalRequest(s.boot, s.seq+1)))
		s.seq++
		seq := s.seq
		allocs := testing.AllocsPerRun(1000, func() {
			seq++
			ev.Seq = seq
			if err := c.Apply(&ev); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("otlp=%v: applying a request allocates %v times", otlp, allocs)
		}
		s.seq = seq
		apply(s.engine(snapshot(1, 0, 10, 0.5, []int64{3, 1}, []int64{1, 0}, 2, 3, 8)))
		seq = s.seq
		allocs = testing.AllocsPerRun(1000, func() {
			seq++
			ev.Seq = seq
			ev.Preemptions++
			if err := c.Apply(&ev); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("otlp=%v: applying an engine snapshot allocates %v times", otlp, allocs)
		}
		c.Close()
	}
}
