package sidecar

import (
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/picometer/picometer/schema"
)

func TestHistogramQuantile(t *testing.T) {
	bounds := []float64{0.1, 0.5, 1}
	f := func(q float64, cum []uint64, want float64) {
		t.Helper()
		got := histogramQuantile(q, bounds, cum)
		if !(got == want || math.IsNaN(got) && math.IsNaN(want) || math.Abs(got-want) < 1e-12) {
			t.Errorf("histogramQuantile(%v, %v) = %v, want %v", q, cum, got, want)
		}
	}
	f(0.5, []uint64{0, 0, 0, 0}, math.NaN())                  // no observations
	f(0.5, []uint64{10, 10, 10, 10}, 0.05)                    // first bucket from 0: 0 + 0.1·5/10
	f(0.5, []uint64{0, 10, 10, 10}, 0.3)                      // (0.1, 0.5]: 0.1 + 0.4·5/10
	f(0.99, []uint64{0, 10, 10, 10}, 0.1+0.4*9.9/10)          // rank 9.9 of 10
	f(0.5, []uint64{2, 4, 6, 8}, 0.5)                         // rank 4 = cum of bucket 1: its upper bound
	f(0.9, []uint64{2, 4, 6, 8}, 1)                           // rank 7.2 falls in +Inf: highest finite bound
	f(0.25, []uint64{2, 4, 6, 8}, 0.1)                        // rank 2 = first bucket's count
	f(0.75, []uint64{2, 4, 8, 8}, 0.5+0.5*(6.0-4)/4)          // (0.5, 1]: rank 6, 2 of its 4
	f(-0.1, []uint64{1, 1, 1, 1}, math.Inf(-1))               // PromQL: q < 0 is -Inf
	f(1.5, []uint64{1, 1, 1, 1}, math.Inf(1))                 // q > 1 is +Inf
	f(1, []uint64{0, 3, 3, 3}, 0.5)                           // q = 1: the top of the highest non-empty bucket
	f(0.5, []uint64{0, 3, 3}, math.NaN())                     // wrong number of buckets
	f(0.5, []uint64{0, 0, 0, 4}, 1)                           // everything above the last bound
	f(0, []uint64{4, 4, 4, 4}, 0)                             // q = 0
	f(math.NaN(), []uint64{4, 4, 4, 4}, math.NaN())           // q NaN
	f(0.5, []uint64{1 << 40, 1 << 41, 1 << 41, 1 << 41}, 0.1) // large counts stay exact

	d := make([]uint64, 3)
	bucketDelta(d, []uint64{5, 7, 9}, []uint64{1, 2, 3})
	if d[0] != 4 || d[1] != 5 || d[2] != 6 {
		t.Errorf("bucketDelta = %v, want [4 5 6]", d)
	}
	bucketDelta(d, []uint64{1, 1, 2}, []uint64{1, 2, 3}) // a reset: the new counts
	if d[0] != 1 || d[1] != 1 || d[2] != 2 {
		t.Errorf("bucketDelta after a reset = %v, want [1 1 2]", d)
	}
}

func TestParseBuckets(t *testing.T) {
	text := `foo_bucket{model="a",le="0.1"} 1
foo_bucket{model="a",le="+Inf"} 3
foo_sum{model="a"} 2
foo_count{model="a"} 3
foo_bucket{model="b,le=\"x\"",le="0.1"} 4
foo_bucket{model="b,le=\"x\"",le="+Inf"} 5
foobar_bucket{model="a",le="0.1"} 9
`
	var got []string
	parseBuckets([]byte(text), "foo", func(s string, i int, v uint64) {
		got = append(got, s+" "+strconv.Itoa(i)+" "+strconv.FormatUint(v, 10))
	})
	want := []string{`foo{model="a"} 0 1`, `foo{model="a"} 1 3`, `foo{model="b,le=\"x\""} 0 4`, `foo{model="b,le=\"x\""} 1 5`}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("parseBuckets:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// statusDoc is the part of /api/v1/status the tests read.
type statusDoc struct {
	Times   []float64 `json:"times"`
	Sidecar struct {
		Connections float64           `json:"connections"`
		Events      map[string]uint64 `json:"events_total"`
		Rejected    map[string]uint64 `json:"rejected_total"`
		Series      struct {
			Events   []*float64            `json:"events_per_second"`
			Rejected map[string][]*float64 `json:"rejected_per_second"`
		} `json:"series"`
	} `json:"sidecar"`
	Targets []struct {
		Model     string `json:"model"`
		Engine    string `json:"engine"`
		Connected bool   `json:"connected"`
		Totals    struct {
			Requests   uint64 `json:"requests"`
			Errors     uint64 `json:"errors"`
			Prompt     uint64 `json:"prompt_tokens"`
			Generation uint64 `json:"generation_tokens"`
			Lost       uint64 `json:"events_lost"`
			Dropped    uint64 `json:"events_dropped"`

			Constrained      uint64            `json:"constrained_requests"`
			ConstrainedValid uint64            `json:"constrained_valid"`
			ToolCalls        uint64            `json:"tool_calls"`
			PrefixQueries    uint64            `json:"prefix_cache_queries"`
			PrefixHits       uint64            `json:"prefix_cache_hits"`
			ByType           map[string]uint64 `json:"errors_by_type"`
		} `json:"totals"`
		Now         map[string]float64 `json:"now"`
		TTFTByCache map[string]struct {
			Requests uint64   `json:"requests"`
			Mean     *float64 `json:"mean_seconds"`
		} `json:"ttft_by_cache"`
		ConstraintMeans struct {
			MaskPerToken float64 `json:"mask_per_token"`
			Compile      float64 `json:"compile"`
		} `json:"constraint_mean_seconds"`
		Batch []struct {
			BatchSize int     `json:"batch_size"`
			Steps     uint64  `json:"steps"`
			Mean      float64 `json:"mean_seconds"`
		} `json:"decode_time_by_batch_size"`
		Series map[string]json.RawMessage `json:"series"`
	} `json:"targets"`
}

func getStatus(t testing.TB, h http.Handler) statusDoc {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/api/v1/status", nil))
	if rec.Code != 200 || rec.Header().Get("Content-Type") != StatusContentType {
		t.Fatalf("/api/v1/status: %d %q\n%s", rec.Code, rec.Header().Get("Content-Type"), rec.Body)
	}
	var doc statusDoc
	dec := json.NewDecoder(rec.Body)
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("/api/v1/status is not JSON: %v", err)
	}
	return doc
}

func (d statusDoc) series(t testing.TB, target int, name string) []*float64 {
	t.Helper()
	raw, ok := d.Targets[target].Series[name]
	if !ok {
		t.Fatalf("target %d has no series %q", target, name)
	}
	var s []*float64
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("series %s: %v", name, err)
	}
	return s
}

// promSum sums the exposition's series of family id whose labels include
// match.
func promSum(p map[string]float64, id, suffix string, match map[string]string) float64 {
	name := schema.Lookup(id).PromName() + suffix
	s := 0.0
	for k, v := range p {
		n, labels, err := parseSeries(k)
		if err != nil || n != name {
			continue
		}
		ok := true
		for mk, mv := range match {
			if labels[mk] != mv {
				ok = false
			}
		}
		if ok {
			s += v
		}
	}
	return s
}

// TestStatusMatchesMetrics: the JSON's totals are /metrics' numbers at the
// same moment, for every target and for the sidecar's own counters.
func TestStatusMatchesMetrics(t *testing.T) {
	clk := newFakeClock(testNow)
	a := newClockAggregator(false, clk)
	h := newHistory(a)
	mux := http.NewServeMux()
	mux.HandleFunc("/api/v1/status", h.ServeStatus)
	h.sample(clk.now())
	populate(t, a, 3)
	feed(t, a, []byte("not json\n"))
	clk.advance(HistoryStep)
	h.sample(clk.now())

	doc := getStatus(t, mux)
	p := parseExposition(t, exposition(a))
	if len(doc.Targets) != 3 {
		t.Fatalf("%d targets, want 3", len(doc.Targets))
	}
	for i, tg := range doc.Targets {
		if want := "model-" + strconv.Itoa(i); tg.Model != want || tg.Engine != "picometer" || tg.Connected {
			t.Errorf("target %d: %q %q connected=%v, want %q picometer, disconnected", i, tg.Model, tg.Engine, tg.Connected, want)
		}
		m := map[string]string{"gen_ai_request_model": tg.Model, "engine": tg.Engine}
		for _, c := range []struct {
			what string
			got  uint64
			id   string
		}{
			{"requests", tg.Totals.Requests, schema.IDRequestsFinished},
			{"errors", tg.Totals.Errors, schema.IDRequestsFailed},
			{"prompt tokens", tg.Totals.Prompt, schema.IDPromptTokens},
			{"generation tokens", tg.Totals.Generation, schema.IDGenerationTokens},
			{"lost", tg.Totals.Lost, schema.IDSidecarEventsLost},
			{"dropped", tg.Totals.Dropped, schema.IDDaemonEventsDropped},
			{"prefix cache queries", tg.Totals.PrefixQueries, schema.IDPrefixQueries},
			{"prefix cache hits", tg.Totals.PrefixHits, schema.IDPrefixHits},
		} {
			want := promSum(p, c.id, "", m)
			if float64(c.got) != want || want == 0 && c.what != "lost" {
				t.Errorf("target %d %s: JSON %d, /metrics %v", i, c.what, c.got, want)
			}
		}
		if len(tg.TTFTByCache) != len(schema.CacheOutcomes) {
			t.Errorf("target %d: ttft_by_cache %v, want every cache outcome", i, tg.TTFTByCache)
		}
		for _, c := range schema.CacheOutcomes {
			got, cm := tg.TTFTByCache[c], with(m, "cache", c)
			n, sum := promSum(p, schema.IDTTFT, "_count", cm), promSum(p, schema.IDTTFT, "_sum", cm)
			if float64(got.Requests) != n || n == 0 || got.Mean == nil || math.Abs(*got.Mean-sum/n) > 1e-6*sum/n {
				t.Errorf("target %d ttft_by_cache[%s]: JSON %d requests, mean %v; /metrics %v, %v s", i, c, got.Requests, got.Mean, n, sum)
			}
		}
		for et, n := range tg.Totals.ByType {
			if want := promSum(p, schema.IDRequestsFailed, "", with(m, "error_type", et)); float64(n) != want {
				t.Errorf("target %d errors %s: JSON %d, /metrics %v", i, et, n, want)
			}
		}
		for k, id := range map[string]string{"requests_running": schema.IDRequestsRunning, "requests_waiting": schema.IDRequestsWaiting,
			"slots": schema.IDSlots, "kv_cache_usage_ratio": schema.IDKVCacheUsage, "prefix_cache_blocks": schema.IDKVBlocksCached} {
			if want := promSum(p, id, "", m); tg.Now[k] != want {
				t.Errorf("target %d %s: JSON %v, /metrics %v", i, k, tg.Now[k], want)
			}
		}
		if len(tg.Batch) != 8 {
			t.Fatalf("target %d: %d batch sizes, want 8", i, len(tg.Batch))
		}
		for _, bs := range tg.Batch {
			bl := with(with(m, "phase", "decode"), "batch_size", strconv.Itoa(bs.BatchSize))
			steps := promSum(p, schema.IDBatchSteps, "", bl)
			secs := promSum(p, schema.IDBatchTime, "", bl)
			if float64(bs.Steps) != steps || math.Abs(bs.Mean-secs/steps) > 1e-6*bs.Mean {
				t.Errorf("target %d batch %d: %d steps mean %v, /metrics %v steps %v s", i, bs.BatchSize, bs.Steps, bs.Mean, steps, secs)
			}
		}
		// rates over the one step: everything arrived within it
		want := float64(tg.Totals.Requests) / HistoryStep.Seconds()
		if rs := doc.series(t, i, "requests_per_second"); len(rs) != 2 || rs[0] != nil || rs[1] == nil || math.Abs(*rs[1]-want) > 1e-6*want {
			t.Errorf("target %d requests_per_second %v, want [null %v]", i, rs, want)
		}
	}
	for k, n := range doc.Sidecar.Events {
		if want := promSum(p, schema.IDSidecarEvents, "", map[string]string{"kind": k}); float64(n) != want {
			t.Errorf("events %s: JSON %d, /metrics %v", k, n, want)
		}
	}
	for k, n := range doc.Sidecar.Rejected {
		if want := promSum(p, schema.IDSidecarDecodeErrors, "", map[string]string{"reason": k}); float64(n) != want {
			t.Errorf("rejected %s: JSON %d, /metrics %v", k, n, want)
		}
	}
	if doc.Sidecar.Rejected[schema.ReasonMalformed] != 1 {
		t.Errorf("rejected malformed = %d, want 1", doc.Sidecar.Rejected[schema.ReasonMalformed])
	}
	if len(doc.Times) != 2 || doc.Times[1]-doc.Times[0] != HistoryStep.Seconds() {
		t.Errorf("times %v, want two steps %v apart", doc.Times, HistoryStep)
	}
}

// TestStatusQuantiles: TTFT and ITL quantiles are histogram_quantile over
// the window's bucket deltas, not over everything since start.
func TestStatusQuantiles(t *testing.T) {
	clk := newFakeClock(testNow)
	a := newClockAggregator(false, clk)
	h := newHistory(a)
	s := newSim(t, "aaaaaaaaaaaaaaaa", "m")
	h.sample(clk.now()) // before the daemon's hello
	clk.advance(HistoryStep)
	c := open(a)
	defer c.close()
	c.send(t, s.hello())
	req := func(ttftUS int64, n int) {
		for range n {
			r := typicalRequest(s.boot, 0).RequestBody
			r.FirstTokenUS = ttftUS
			r.LastTokenUS = r.FirstTokenUS + 63*4152
			r.FinishUS = r.LastTokenUS + 50
			c.send(t, s.request(r))
		}
	}
	// 100 slow requests long ago, then 10 fast ones in the last window.
	req(3_000_000, 100) // 3 s: TTFT bucket (2.5, 5]
	waitApplied(t, a, kindRequest, 100)
	h.sample(clk.now())
	for range windowSteps + 2 {
		clk.advance(HistoryStep)
		h.sample(clk.now())
	}
	req(30_000, 10) // 30 ms: bucket (0.02, 0.04]
	waitApplied(t, a, kindRequest, 110)
	clk.advance(HistoryStep)
	h.sample(clk.now())

	mux := http.NewServeMux()
	mux.HandleFunc("/api/v1/status", h.ServeStatus)
	doc := getStatus(t, mux)
	last := func(name string) float64 {
		s := doc.series(t, 0, name)
		if s[len(s)-1] == nil {
			t.Fatalf("%s: last value null: %v", name, s)
		}
		return *s[len(s)-1]
	}
	bounds := schema.Lookup(schema.IDTTFT).Buckets
	i := 0
	for bounds[i] < 0.03 {
		i++
	}
	lo, hi := bounds[i-1], bounds[i]
	if got, want := last("ttft_p50_seconds"), lo+(hi-lo)*0.5; math.Abs(got-want) > 1e-6 {
		t.Errorf("ttft p50 %v, want %v (the window's 10 fast requests only)", got, want)
	}
	if got, want := last("ttft_p99_seconds"), lo+(hi-lo)*0.99; math.Abs(got-want) > 1e-6 {
		t.Errorf("ttft p99 %v, want %v", got, want)
	}
	// The slow requests' own window showed 3 s.
	s0 := doc.series(t, 0, "ttft_p50_seconds")
	if v := s0[1]; v == nil || *v <= 2.5 || *v > 5 {
		t.Errorf("ttft p50 right after the slow requests: %v, want in (2.5, 5]", v)
	}
	// Between them, no requests in the window: no value.
	if v := s0[len(s0)-2]; v != nil {
		t.Errorf("ttft p50 of an empty window = %v, want null", *v)
	}
	if itl := last("itl_p50_seconds"); itl <= 0.0025 || itl > 0.005 {
		t.Errorf("itl p50 %v, want within (2.5 ms, 5 ms] (gaps 3.0–5.3 ms)", itl)
	}
	if tpot := last("time_per_output_token_p50_seconds"); tpot <= 0.0025 || tpot > 0.005 {
		t.Errorf("time per output token p50 %v, want within (2.5 ms, 5 ms] (4.152 ms)", tpot)
	}
}

// TestHistoryBounded: the rings are fixed; targets beyond MaxHistoryTargets
// show totals without history; expired targets leave the history.
func TestHistoryBounded(t *testing.T) {
	clk := newFakeClock(testNow)
	a := newClockAggregator(false, clk)
	h := newHistory(a)
	populate(t, a, MaxHistoryTargets+2)
	for range HistoryLen + 10 {
		h.sample(clk.now())
		clk.advance(HistoryStep)
	}
	if len(h.targets) != MaxHistoryTargets || h.n != HistoryLen {
		t.Fatalf("%d targets with history, %d steps; want %d, %d", len(h.targets), h.n, MaxHistoryTargets, HistoryLen)
	}
	for _, th := range h.targets {
		if len(th.vals) != HistoryLen*hFields {
			t.Fatalf("ring of %d values, want %d", len(th.vals), HistoryLen*hFields)
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/api/v1/status", h.ServeStatus)
	doc := getStatus(t, mux)
	withSeries := 0
	for _, tg := range doc.Targets {
		if tg.Series != nil {
			withSeries++
		}
	}
	if len(doc.Targets) != MaxHistoryTargets+2 || withSeries != MaxHistoryTargets || len(doc.Times) != HistoryLen {
		t.Fatalf("%d targets, %d with series, %d steps", len(doc.Targets), withSeries, len(doc.Times))
	}
	clk.advance(time.Hour)
	a.Expire(clk.now())
	h.sample(clk.now())
	if len(h.targets) != 0 {
		t.Fatalf("%d targets left in the history after expiry", len(h.targets))
	}
}

// TestPage: the page is one self-contained document with every panel of
// every target, the live totals, and nothing loaded from elsewhere.
func TestPage(t *testing.T) {
	clk := newFakeClock(testNow)
	a := newClockAggregator(false, clk)
	h := newHistory(a)
	h.sample(clk.now())
	populate(t, a, 2)
	clk.advance(HistoryStep)
	h.sample(clk.now())
	mux := http.NewServeMux()
	mux.HandleFunc("/", h.ServePage)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	page := string(body)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET /: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	for _, bad := range []string{"<script", "http://", "https://", "@import", "url("} {
		if strings.Contains(page, bad) {
			t.Errorf("page contains %q: not self-contained", bad)
		}
	}
	if !strings.Contains(page, `<meta http-equiv="refresh" content="5">`) {
		t.Error("page does not refresh itself")
	}
	for i := range 2 {
		sec := page[strings.Index(page, `id="target-`+strconv.Itoa(i)+`"`):]
		for _, p := range []string{"requests", "ttft", "itl", "tokens", "batch", "kv", "spec-rate", "spec-len", "batch-time"} {
			if !strings.Contains(sec, `data-panel="`+p+`"`) {
				t.Errorf("target %d: no panel %s", i, p)
			}
		}
	}
	doc := func() statusDoc {
		m := http.NewServeMux()
		m.HandleFunc("/api/v1/status", h.ServeStatus)
		return getStatus(t, m)
	}()
	if !strings.Contains(page, `<dd data-total="requests">`+strconv.FormatUint(doc.Targets[0].Totals.Requests, 10)+`</dd>`) {
		t.Errorf("page does not show target 0's %d requests", doc.Targets[0].Totals.Requests)
	}
	if tt := doc.Targets[0].Totals; tt.PrefixQueries == 0 {
		t.Errorf("target 0: no prefix cache queries in the status")
	} else if want := `<dd data-total="prefix_cache_hit_ratio">` + string(appendShort(nil, 100*float64(tt.PrefixHits)/float64(tt.PrefixQueries))) + ` % of`; !strings.Contains(page, want) {
		t.Errorf("page does not show target 0's prefix cache hit ratio %q", want)
	}
	if !strings.Contains(page, `data-now="prefix_cache_blocks"`) {
		t.Errorf("page does not show the prefix cache's blocks")
	}
	want := `<dd data-total="ttft_by_cache">`
	for i, c := range schema.CacheOutcomes {
		if i > 0 {
			want += " · "
		}
		bc := doc.Targets[0].TTFTByCache[c]
		if bc.Mean == nil {
			t.Fatalf("target 0: no %s request", c)
		}
		want += c + " " + string(appendDuration(nil, *bc.Mean)) + " (" + strconv.FormatUint(bc.Requests, 10) + ")"
	}
	if !strings.Contains(page, want+"</dd>") {
		t.Errorf("page does not show target 0's TTFT by cache outcome %q", want)
	}
	if !strings.Contains(page, `id="sidecar"`) || !strings.Contains(page, `data-panel="health"`) {
		t.Error("no sidecar health section")
	}
	for _, path := range []string{"/nope", "/favicon.ico"} {
		r, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		if r.StatusCode != 404 {
			t.Errorf("GET %s: %d, want 404", path, r.StatusCode)
		}
	}
	r, err := http.Post(srv.URL+"/", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != 405 {
		t.Errorf("POST /: %d, want 405", r.StatusCode)
	}
}

// BenchmarkStatusPage renders the page and the JSON for 8 targets with full
// rings (the aim: under 5 ms a page).
func BenchmarkStatusPage(b *testing.B) {
	clk := newFakeClock(testNow)
	a := newClockAggregator(false, clk)
	h := newHistory(a)
	populate(b, a, 8)
	for range HistoryLen {
		h.sample(clk.now())
		clk.advance(HistoryStep)
	}
	for _, c := range []struct {
		name string
		f    http.HandlerFunc
	}{{"page", h.ServePage}, {"json", h.ServeStatus}} {
		b.Run(c.name, func(b *testing.B) {
			req := httptest.NewRequest("GET", "/", nil)
			w := &discardWriter{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				c.f(w, req)
			}
			b.SetBytes(int64(w.n / max(1, w.calls)))
		})
	}
	b.Run("sample", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			clk.advance(HistoryStep)
			h.sample(clk.now())
		}
	})
}

type discardWriter struct {
	h        http.Header
	n, calls int
}

func (w *discardWriter) Header() http.Header { return w.h }
func (w *discardWriter) Write(p []byte) (int, error) {
	w.n += len(p)
	w.calls++
	return len(p), nil
}
func (w *discardWriter) WriteHeader(int) {}
