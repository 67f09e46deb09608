package daemon

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/picometer/picometer/schema"
)

// checkConnection checks one connection's lines: a hello first, then
// contiguous sequence numbers, one boot; it returns the decoded events.
func checkConnection(t *testing.T, lines []string, boot string) []schema.Event {
	t.Helper()
	var evs []schema.Event
	for i, line := range lines {
		var ev schema.Event
		if err := schema.Decode([]byte(line), &ev); err != nil {
			t.Fatalf("line %d %s: %v", i, line, err)
		}
		if i == 0 && ev.Kind != schema.KindHello {
			t.Fatalf("connection starts with %s, not hello", ev.Kind)
		}
		if i > 0 && ev.Kind == schema.KindHello {
			t.Fatalf("second hello at line %d", i)
		}
		if i > 0 && ev.Seq != evs[i-1].Seq+1 {
			t.Fatalf("seq %d after %d: not contiguous", ev.Seq, evs[i-1].Seq)
		}
		if ev.Boot != boot {
			t.Fatalf("boot %q, want %q", ev.Boot, boot)
		}
		evs = append(evs, ev)
	}
	return evs
}

func TestEmitterEvents(t *testing.T) {
	eng := newFakeEngine(128)
	ts := startServer(t, eng, nil)
	var ids []string
	for i := range 10 {
		c := decodeCompletionResponse(t, ts.post("/v1/completions", fmt.Sprintf(`{"prompt":"n%d"}`, i)).body)
		ids = append(ids, c.ID)
	}
	ts.post("/v1/completions", `{"prompt":1}`) // one error event
	time.Sleep(250 * time.Millisecond)         // a couple of periodic snapshots
	ts.shutdown()
	ts.sink.drained()
	conns := ts.sink.lines()
	if len(conns) != 1 {
		t.Fatalf("%d connections, want 1", len(conns))
	}
	evs := checkConnection(t, conns[0], ts.d.BootID())
	h := evs[0]
	if h.Seq != 1 || h.Model != "fake-model" || h.Engine != EngineName || h.Daemon != Version || h.PID == 0 ||
		h.Config.BMax != 8 || h.Config.ContextLength != 128 || h.Config.SpecK != 4 || h.Config.BlockSize != 16 || h.Config.PrefillChunk != 64 {
		t.Errorf("hello %+v", h.HelloBody)
	}
	var got []string
	kinds := map[string]int{}
	for _, ev := range evs {
		kinds[ev.Kind]++
		if ev.Kind == schema.KindRequest && ev.FinishReason != schema.FinishError {
			got = append(got, ev.ID)
		}
	}
	if !slices.Equal(got, ids) || kinds[schema.KindRequest] != 11 || kinds[schema.KindEngine] < 2 {
		t.Errorf("kinds %v, request ids %v want %v", kinds, got, ids)
	}
	last, tot := finalSnapshot(t, evs)
	if last.RequestsFinished != 10 || last.Running != 0 || last.EventsDropped != 0 || last.EventsWriteFailed != 0 {
		t.Errorf("final snapshot %+v", last.EngineBody)
	}
	// The totals hold every request event (10 served, 1 refused), as the
	// sidecar would count them.
	if got := tot.Requests(); got != 11 || kinds[schema.KindTotals] < 3 { // after the hello and each snapshot
		t.Errorf("final totals of %d requests (want 11); kinds %v", got, kinds)
	}
}

// TestEmitterStalledSidecar: a sidecar that accepts but never reads fills
// the socket and the queue; overflow is dropped and counted, and no request
// waits for it (a blocking emitter would wait out the 10 s write timeout).
func TestEmitterStalledSidecar(t *testing.T) {
	eng := newFakeEngine(1 << 16)
	eng.gen = forever
	eng.runLen = 50
	ts := startServer(t, eng, func(c *Config) {
		c.Metrics.Queue = 16
		c.Metrics.WriteTimeout = 10 * time.Second
	})
	ts.sink.stall.Store(true)
	var mu sync.Mutex
	var worst time.Duration
	var wg sync.WaitGroup
	start := time.Now()
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 150 {
				t0 := time.Now()
				r := ts.post("/v1/completions", fmt.Sprintf(`{"prompt":"w%d r%d","max_tokens":500}`, w, i))
				d := time.Since(t0)
				if r.status != 200 {
					t.Errorf("%d %s", r.status, r.body)
					return
				}
				mu.Lock()
				worst = max(worst, d)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	total := time.Since(start)
	dropped := ts.d.Emitter().Dropped()
	t.Logf("600 requests in %s, slowest %s, %d events dropped", total, worst, dropped)
	if dropped == 0 {
		t.Fatalf("no events dropped: the stalled sidecar absorbed everything; make the test write more")
	}
	if worst > 2*time.Second || total > 8*time.Second {
		t.Errorf("requests slowed by the stalled sidecar: slowest %s, total %s", worst, total)
	}
	// Drops are visible in /debug/engine_metrics …
	var m schema.EngineBody
	if err := json.Unmarshal(ts.do("GET", "/debug/engine_metrics", "").body, &m); err != nil || m.EventsDropped < dropped {
		t.Errorf("debug events_dropped %d, emitter dropped %d (%v)", m.EventsDropped, dropped, err)
	}
	// … and, once the sidecar reads again, in the next snapshots.
	ts.sink.stall.Store(false)
	waitFor(t, 15*time.Second, "a snapshot reporting the drops", func() bool {
		for _, ev := range ts.sink.events() {
			if ev.Kind == schema.KindEngine && ev.EventsDropped > 0 {
				return true
			}
		}
		return false
	})
}

// TestEmitterRestart: the sidecar restarts mid-run; the emitter reconnects
// with a new hello and sequence numbers continue.
func TestEmitterRestart(t *testing.T) {
	eng := newFakeEngine(128)
	ts := startServer(t, eng, nil)
	run := func(n int, tag string) {
		for i := range n {
			if r := ts.post("/v1/completions", fmt.Sprintf(`{"prompt":"%s%d"}`, tag, i)); r.status != 200 {
				t.Fatalf("%d %s", r.status, r.body)
			}
		}
	}
	run(5, "a")
	waitFor(t, 5*time.Second, "the first sidecar to get 5 requests", func() bool {
		c := ts.sink.lines()
		return len(c) == 1 && len(c[0]) >= 6
	})
	ts.sink.close()
	run(5, "b") // the emitter finds the sidecar gone; events wait in the queue
	time.Sleep(100 * time.Millisecond)
	ts.sink.listen() // the sidecar is back on the same path
	run(5, "c")
	var a, b []schema.Event
	waitFor(t, 5*time.Second, "the second connection to carry the c requests", func() bool {
		conns := ts.sink.lines()
		if len(conns) != 2 {
			return false
		}
		a = checkConnection(t, conns[0], ts.d.BootID())
		b = checkConnection(t, conns[1], ts.d.BootID())
		n := 0
		for _, ev := range b {
			if ev.Kind == schema.KindRequest {
				n++
			}
		}
		return n >= 5
	})
	lost := ts.d.Emitter().Lost()
	gap := b[0].Seq - a[len(a)-1].Seq - 1
	if gap < uint64(lost) || b[0].Kind != schema.KindHello {
		t.Errorf("second connection starts with %s seq %d after seq %d; %d events lost in failed writes", b[0].Kind, b[0].Seq, a[len(a)-1].Seq, lost)
	}
	if got := ts.d.Emitter().Connects(); got != 2 {
		t.Errorf("%d connections, want 2", got)
	}
	// Every request event reached a sidecar or left a gap in the sequence
	// (lost in a failed write, or written to the old sidecar's socket but
	// not read before it exited).
	n := 0
	for _, ev := range append(a, b...) {
		if ev.Kind == schema.KindRequest {
			n++
		}
	}
	gaps := b[len(b)-1].Seq - uint64(len(a)+len(b))
	if uint64(n)+gaps < 15 {
		t.Errorf("%d request events delivered, %d sequence numbers missing: some vanished without a gap", n, gaps)
	}
	t.Logf("delivered %d request events, %d events lost in failed writes, seq gap %d", n, lost, gaps)
}

// TestNoSidecar: without a sidecar the daemon serves normally and shuts
// down within the flush timeout.
func TestNoSidecar(t *testing.T) {
	eng := newFakeEngine(128)
	sock := filepath.Join(socketDir(t), "absent.sock")
	ts := startServer(t, eng, func(c *Config) {
		c.Metrics.Socket = sock
		c.Metrics.FlushTimeout = 200 * time.Millisecond
	})
	ts.sink.close() // nobody listens
	for range 20 {
		if r := ts.post("/v1/completions", `{"prompt":"hi"}`); r.status != 200 {
			t.Fatalf("%d %s", r.status, r.body)
		}
	}
	start := time.Now()
	ts.shutdown()
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("shutdown took %s with no sidecar", d)
	}
	if ts.d.Emitter().Connects() != 0 {
		t.Errorf("connected to nothing?")
	}
}

// TestEmitterOff: an empty socket turns the emitter off.
func TestEmitterOff(t *testing.T) {
	eng := newFakeEngine(128)
	ts := startServer(t, eng, func(c *Config) { c.Metrics.Socket = "" })
	if ts.d.Emitter() != nil {
		t.Fatal("emitter on")
	}
	if r := ts.post("/v1/completions", `{"prompt":"hi"}`); r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
}

func newTestEmitter(t *testing.T, queue int) *Emitter {
	cfg := DefaultConfig().Metrics
	cfg.Socket = filepath.Join(socketDir(t), "none.sock")
	cfg.Queue = queue
	cfg.BackoffMin, cfg.BackoffMax = time.Hour, time.Hour
	e := NewEmitter(cfg, "b00t", schema.HelloBody{Model: "m", Engine: "e"}, slog.New(slog.DiscardHandler), time.Now)
	t.Cleanup(func() { e.Close(0) })
	return e
}

// TestEmitterNeverBlocks: producers never wait, whatever the queue holds.
func TestEmitterNeverBlocks(t *testing.T) {
	e := newTestEmitter(t, 4)
	start := time.Now()
	for range 100 {
		e.Request(&schema.Request{RequestBody: schema.RequestBody{ID: "x"}})
	}
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Errorf("100 enqueues took %s", d)
	}
	// 4 in the queue, at most 1 taken by the writer (stuck connecting).
	if d := e.Dropped(); d != 95 && d != 96 {
		t.Errorf("dropped %d, want 95 or 96", d)
	}
}

func TestEmitterEnqueueAllocs(t *testing.T) {
	e := newTestEmitter(t, 1)
	ev := &schema.Request{RequestBody: schema.RequestBody{ID: "x"}}
	for range 3 {
		e.Request(ev) // fill the queue
	}
	if a := testing.AllocsPerRun(1000, func() { e.Request(ev) }); a != 0 {
		t.Errorf("Request allocates %v times, want 0", a)
	}
}

// TestEmitterStepBudget: queued snapshots cannot hold more than
// maxQueuedSteps step records; the rest are counted as dropped.
func TestEmitterStepBudget(t *testing.T) {
	e := newTestEmitter(t, 64)
	steps := make([]schema.StepRecord, maxQueuedSteps/4+1)
	for range 5 {
		e.Engine(&schema.Engine{EngineBody: schema.EngineBody{Steps: slices.Clone(steps)}})
	}
	if got := e.StepsDropped(); got < int64(len(steps)) {
		t.Errorf("steps dropped %d, want at least %d", got, len(steps))
	}
}

// TestEmitterGapBudget: queued request events cannot hold more than
// maxQueuedGaps ITL gaps; an event beyond that is dropped and counted.
func TestEmitterGapBudget(t *testing.T) {
	e := newTestEmitter(t, 64)
	gaps := make([]int64, maxQueuedGaps/4+1)
	for range 5 {
		e.Request(&schema.Request{RequestBody: schema.RequestBody{ID: "x", ITLUS: gaps}})
	}
	// Three fit (an event the writer took but could not write still counts).
	if got := e.Dropped(); got != 2 {
		t.Errorf("dropped %d events, want 2", got)
	}
}

// TestEmitterBackoffCapped: while the sidecar is away the emitter retries
// with exponential backoff, but never waits longer than BackoffMax: after
// a long outage it connects within about BackoffMax of the sidecar's return
// (uncapped, the wait would have grown to seconds).
func TestEmitterBackoffCapped(t *testing.T) {
	cfg := DefaultConfig().Metrics
	cfg.Socket = filepath.Join(socketDir(t), "late.sock")
	cfg.BackoffMin, cfg.BackoffMax = time.Millisecond, 20*time.Millisecond
	hello := schema.HelloBody{PID: 1, Model: "m", Engine: "e", Daemon: Version,
		Config: schema.EngineConfig{BMax: 1, ContextLength: 16, BlockSize: 16, KVBlocks: 1, PrefillChunk: 16}}
	e := NewEmitter(cfg, "b00t", hello, slog.New(slog.DiscardHandler), time.Now)
	defer e.Close(time.Second)
	s := seq{id: "x", op: schema.OpTextCompletion}
	e.Request(&schema.Request{RequestBody: requestBody(&s, nil, schema.FinishError, schema.ErrOther, 0)})
	time.Sleep(1500 * time.Millisecond) // 1 ms doubled 11 times would be 2 s
	start := time.Now()
	sink := listenSink(t, cfg.Socket)
	waitFor(t, 5*time.Second, "the hello and the queued event", func() bool {
		c := sink.lines()
		return len(c) == 1 && len(c[0]) == 3
	})
	if d := time.Since(start); d > 200*time.Millisecond {
		t.Errorf("connected %s after the sidecar came back; the backoff is capped at %s", d, cfg.BackoffMax)
	}
	evs := checkConnection(t, sink.lines()[0], "b00t")
	// The hello, the totals (empty: the queued request has no number yet), the request.
	if evs[0].Seq != 1 || evs[1].Kind != schema.KindTotals || evs[1].Requests() != 0 || evs[2].Seq != 3 || evs[2].ID != "x" {
		t.Errorf("events %+v", evs)
	}
}
