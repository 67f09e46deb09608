package daemon

import (
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/picometer/picometer/native"
)

// TestReadiness: /ready is 200 with the model once the engine loop runs,
// 503 engine_stalled while a step hangs longer than readyStall (the clock
// is the daemon's, passed in through Deps, and jumps ahead), 200 again when
// the step ends, and 503 shutting_down while draining; /health (liveness)
// stays 200 through the stall.
func TestReadiness(t *testing.T) {
	eng := newFakeEngine(128)
	hold := make(chan struct{})
	eng.hold = hold
	var skew atomic.Int64
	clock := func() int64 { return native.Now() + skew.Load() }
	cfg := testConfig(t)
	cfg.Metrics.Socket = ""
	log := &testLog{}
	d := New(cfg, eng, Deps{Clock: clock, Logger: log.logger(slog.LevelDebug)})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go d.Serve(ln)
	ts := &testServer{t: t, d: d, url: "http://" + ln.Addr().String(), log: log}
	t.Cleanup(ts.shutdown)

	waitFor(t, 5*time.Second, "ready", func() bool { return ts.do("GET", "/ready", "").status == 200 })
	if r := ts.do("GET", "/ready", ""); string(r.body) != `{"status":"ready","model":"fake-model"}` {
		t.Errorf("ready: %d %s", r.status, r.body)
	}
	if r := ts.do("POST", "/ready", ""); r.status != 405 {
		t.Errorf("POST /ready: %d %s", r.status, r.body)
	}

	// A request whose step hangs: the loop stops iterating.
	done := make(chan httpResult, 1)
	go func() { done <- ts.post("/v1/completions", `{"prompt":"x","max_tokens":2}`) }()
	waitFor(t, 5*time.Second, "a step in progress", func() bool { r, _ := eng.Load(); return r == 1 })
	time.Sleep(50 * time.Millisecond)
	skew.Add(int64(d.readyStall() + time.Second))
	if r := ts.do("GET", "/ready", ""); r.status != 503 || !strings.HasPrefix(string(r.body), `{"status":"engine_stalled","since_last_step_seconds":`) {
		t.Errorf("ready during a hung step: %d %s", r.status, r.body)
	}
	if r := ts.do("GET", "/health", ""); r.status != 200 {
		t.Errorf("health during a hung step: %d %s", r.status, r.body)
	}
	close(hold)
	if r := <-done; r.status != 200 {
		t.Errorf("the held request: %d %s", r.status, r.body)
	}
	waitFor(t, 5*time.Second, "ready again", func() bool { return ts.do("GET", "/ready", "").status == 200 })

	d.draining.Store(true)
	if r := ts.do("GET", "/ready", ""); r.status != 503 || string(r.body) != `{"status":"shutting_down"}` {
		t.Errorf("ready while draining: %d %s", r.status, r.body)
	}
}

// TestReadinessAfterEngineFailure: an engine that failed is not ready.
func TestReadinessAfterEngineFailure(t *testing.T) {
	eng := newFakeEngine(128)
	eng.failAt = 1
	ts := startServer(t, eng, func(c *Config) { c.Metrics.Socket = "" })
	ts.post("/v1/completions", `{"prompt":"x"}`)
	if r := ts.do("GET", "/ready", ""); r.status != 503 || string(r.body) != `{"status":"engine_failed"}` {
		t.Errorf("ready after failure: %d %s", r.status, r.body)
	}
}
