package daemon

import (
	"bufio"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/picometer/picometer/schema"
)

// startStream starts a streaming request and returns its reader once the
// first event has arrived (so the request is running).
func startStream(t *testing.T, ts *testServer, body string) (*sse, func() *sse) {
	t.Helper()
	resp, err := testClient.Post(ts.url+"/v1/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	if _, err := br.Peek(1); err != nil {
		t.Fatal(err)
	}
	s := &sse{status: resp.StatusCode}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer resp.Body.Close()
		readSSE(t, br, s)
	}()
	return s, func() *sse { <-done; return s }
}

// TestShutdownGrace: in-flight requests finish within the grace period,
// new connections are refused, the final snapshot reaches the sidecar.
func TestShutdownGrace(t *testing.T) {
	eng := newFakeEngine(1 << 16)
	eng.gen = forever
	eng.stepDelay = 5 * time.Millisecond
	ts := startServer(t, eng, noPeriodicSnapshots)
	_, wait := startStream(t, ts, `{"prompt":"x","max_tokens":60,"stream":true}`)
	var nonStream httpResult
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		nonStream = ts.post("/v1/completions", `{"prompt":"y","max_tokens":60}`)
	}()
	waitFor(t, 5*time.Second, "two running requests", func() bool { r, _ := eng.Load(); return r == 2 })
	start := time.Now()
	if err := ts.d.Shutdown(5 * time.Second); err != nil {
		t.Errorf("shutdown: %v", err)
	}
	if d := time.Since(start); d > 4*time.Second {
		t.Errorf("shutdown took %s", d)
	}
	s := wait()
	wg.Wait()
	if s.chunks[len(s.chunks)-1].finish() != "length" || s.data[len(s.data)-1] != "[DONE]" || len(s.errs) != 0 {
		t.Errorf("in-flight stream did not finish normally: %q", s.data[len(s.data)-2:])
	}
	if c := decodeCompletionResponse(t, nonStream.body); nonStream.status != 200 || c.Usage.CompletionTokens != 60 {
		t.Errorf("in-flight request: %d %s", nonStream.status, nonStream.body)
	}
	if _, err := testClient.Post(ts.url+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"z"}`)); err == nil {
		t.Errorf("a new request after shutdown was served")
	}
	ts.sink.drained()
	checkFinalSnapshot(t, ts.sink.events(), 2)
}

// noPeriodicSnapshots makes the final snapshot the only one.
func noPeriodicSnapshots(c *Config) { c.Metrics.SnapshotInterval = time.Hour }

// checkFinalSnapshot checks that the only engine snapshot is the last
// event but the totals that follow it, counts finished requests, and that
// the totals hold every request event (aborted ones too).
func checkFinalSnapshot(t *testing.T, evs []schema.Event, finished int64) {
	t.Helper()
	n, requests := 0, int64(0)
	for _, ev := range evs {
		switch ev.Kind {
		case schema.KindEngine:
			n++
		case schema.KindRequest:
			requests++
		}
	}
	last, tot := finalSnapshot(t, evs)
	if n != 1 || last.RequestsFinished != finished || last.Running != 0 || last.Waiting != 0 {
		t.Errorf("%d snapshots; last snapshot %+v, want the final snapshot with %d requests finished", n, last.EngineBody, finished)
	}
	if got := tot.Requests(); got != requests {
		t.Errorf("the final totals hold %d requests, want %d (the request events)", got, requests)
	}
}

// finalSnapshot returns the last two events, which must be an engine
// snapshot and the totals the emitter sends right after it.
func finalSnapshot(t *testing.T, evs []schema.Event) (*schema.Event, *schema.Event) {
	t.Helper()
	if len(evs) < 2 || evs[len(evs)-2].Kind != schema.KindEngine || evs[len(evs)-1].Kind != schema.KindTotals {
		kinds := []string{}
		for _, ev := range evs {
			kinds = append(kinds, ev.Kind)
		}
		t.Fatalf("events of kinds %v, want a snapshot and totals last", kinds)
	}
	return &evs[len(evs)-2], &evs[len(evs)-1]
}

// TestShutdownAborts: requests still running when the grace period ends
// are aborted with error type shutdown.
func TestShutdownAborts(t *testing.T) {
	eng := newFakeEngine(1 << 20)
	eng.gen = forever
	eng.stepDelay = time.Millisecond
	ts := startServer(t, eng, noPeriodicSnapshots)
	_, wait := startStream(t, ts, `{"prompt":"x","max_tokens":1000000,"stream":true}`)
	var nonStream httpResult
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		nonStream = ts.post("/v1/completions", `{"prompt":"y","max_tokens":1000000}`)
	}()
	waitFor(t, 5*time.Second, "two running requests", func() bool { r, _ := eng.Load(); return r == 2 })
	start := time.Now()
	ts.d.Shutdown(200 * time.Millisecond)
	if d := time.Since(start); d < 200*time.Millisecond || d > 3*time.Second {
		t.Errorf("shutdown took %s with a 200ms grace", d)
	}
	s := wait()
	wg.Wait()
	if len(s.errs) != 1 || *s.errs[0].Code != "shutting_down" || s.data[len(s.data)-1] != "[DONE]" {
		t.Errorf("aborted stream ended with %q", s.data[max(0, len(s.data)-2):])
	}
	if e := decodeError(t, nonStream.body); nonStream.status != 503 || *e.Code != "shutting_down" {
		t.Errorf("aborted request: %d %s", nonStream.status, nonStream.body)
	}
	ts.sink.drained()
	evs := ts.sink.events()
	n := 0
	for _, ev := range evs {
		if ev.Kind == schema.KindRequest && ev.FinishReason == schema.FinishAbort && ev.ErrorType == schema.ErrShutdown {
			n++
		}
	}
	if n != 2 {
		t.Errorf("%d shutdown request events, want 2", n)
	}
	checkFinalSnapshot(t, evs, 0)

	if r, w := eng.Load(); r+w != 0 {
		t.Errorf("engine still holds %d running, %d waiting", r, w)
	}
}
