package sidecar

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"math"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

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
	chat := indexOf(schema.AttrOperation.Values, schema.OpChat)
	gt := tg.req[chat].genTokens
	near := uint64(maxCounter) - 10
	tg.mu.Lock()
	tg.tot.Ops[chat].CompletionTokens = int64(near) // the counter shows the target's totals
	tg.syncOp(chat)
	tg.mu.Unlock()
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

func capAggregator(maxTargets int, maxBuffered int64) (*Aggregator, *fakeClock) {
	c := newFakeClock(testNow)
	return NewAggregator(AggregatorOptions{Now: c.now, ExpireAfter: 5 * time.Minute, MaxTargets: maxTargets,
		MaxBufferedBytes: maxBuffered, Logger: discardLogger()}), c
}

// helloFlood says hello as n daemons of n distinct models, one connection
// each (a connection that is refused closes, so each needs its own).
func helloFlood(t *testing.T, a *Aggregator, n int) {
	t.Helper()
	for i := range n {
		s := newSim(t, fmt.Sprintf("%016x", i+1), fmt.Sprintf("flood-model-%05d-%s", i, strings.Repeat("x", 180)))
		feed(t, a, s.hello())
	}
}

// minDuration is the fastest of n runs of f (a loaded machine adds noise).
func minDuration(n int, f func()) time.Duration {
	best := time.Duration(math.MaxInt64)
	for range n {
		start := time.Now()
		f()
		best = min(best, time.Since(start))
	}
	return best
}

// TestTargetCap reproduces finding 2 (hellos for 10,000 model names took
// the sidecar to 633 MiB and a 40 s scrape): past max_targets a hello is
// refused (too_many_targets), so the series, the heap and the scrape stay
// those of max_targets targets.
func TestTargetCap(t *testing.T) {
	a, _ := capAggregator(64, 0)
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	helloFlood(t, a, 10_000)
	if got := a.Targets(); got != 64 {
		t.Fatalf("targets = %d, want 64", got)
	}
	if got := rejected(t, a, schema.ReasonTooManyTargets); got != 10_000-64 {
		t.Fatalf("too_many_targets = %v, want %d", got, 10_000-64)
	}
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	grew := float64(int64(after.HeapInuse)-int64(before.HeapInuse)) / (1 << 20)
	var buf bytes.Buffer
	scrape := minDuration(5, func() { buf.Reset(); a.reg.WritePrometheus(&buf) })
	t.Logf("10,000 hellos: 64 targets, heap +%.1f MiB, /metrics %d bytes in %v", grew, buf.Len(), scrape)
	if grew > 48 {
		t.Errorf("heap grew by %.1f MiB, want < 48", grew)
	}
	if scrape > 100*time.Millisecond {
		t.Errorf("scrape took %v, want < 100ms", scrape)
	}
}

// TestExpireThousandTargets: expiry was O(N²) in the series (7 targets/s);
// 1,000 targets now expire in well under a second, and a scrape or a hello
// is not held up by the pass.
func TestExpireThousandTargets(t *testing.T) {
	a, clock := capAggregator(1000, 0)
	helloFlood(t, a, 1000)
	if got := a.Targets(); got != 1000 {
		t.Fatalf("targets = %d, want 1000", got)
	}
	clock.advance(6 * time.Minute)
	start := time.Now()
	n := a.Expire(clock.now())
	took := time.Since(start)
	t.Logf("expired %d targets in %v", n, took)
	if n != 1000 || a.Targets() != 0 {
		t.Fatalf("expired %d, %d left; want 1000, 0", n, a.Targets())
	}
	if took > time.Second {
		t.Errorf("expiry of 1,000 targets took %v, want < 1s", took)
	}
	if text := exposition(a); strings.Contains(text, "flood-model") {
		t.Fatalf("expired series still exported")
	}
	for _, fam := range a.reg.fams {
		if fam.index != a.reg.byID[schema.IDSidecarEvents].index && fam.n.Load() != 0 &&
			!strings.HasPrefix(fam.name, "picometer_sidecar_") {
			t.Errorf("family %s still counts %d series", fam.name, fam.n.Load())
		}
	}
	// A new hello after expiry gets a fresh target.
	helloFlood(t, a, 1)
	if a.Targets() != 1 {
		t.Fatalf("targets = %d after a new hello, want 1", a.Targets())
	}
}

// TestBufferBudget reproduces finding 5 (200 connections each holding a
// 1 MiB partial line took RSS to 219 MiB): the buffers grow only from a
// shared budget; a connection whose partial line needs more is closed
// (buffer_full), and a closed connection gives its bytes back.
func TestBufferBudget(t *testing.T) {
	const budgetBytes = 4 << 20
	a, _ := capAggregator(0, budgetBytes)
	const conns = 40
	ocs := make([]*openConn, conns)
	partial := append([]byte(`{"v":1,"kind":"hello","boot":"`), bytes.Repeat([]byte("x"), 1<<20-64)...)
	var wg sync.WaitGroup
	for i := range ocs {
		ocs[i] = open(a)
		wg.Add(1)
		go func() {
			defer wg.Done()
			ocs[i].client.Write(partial) // fails once the sidecar closed it
		}()
	}
	waitFor(t, func() bool {
		return rejected(t, a, schema.ReasonBufferFull) >= conns-budgetBytes/(1<<20)
	})
	if left := a.buffers.left.Load(); left < 0 || left > budgetBytes {
		t.Fatalf("budget left %d, want in 0..%d", left, budgetBytes)
	}
	for _, oc := range ocs {
		oc.close()
	}
	wg.Wait()
	if left := a.buffers.left.Load(); left != budgetBytes {
		t.Fatalf("budget left %d after every connection closed, want %d", left, budgetBytes)
	}
	got := rejected(t, a, schema.ReasonBufferFull)
	t.Logf("%d connections with 1 MiB partial lines, budget 4 MiB: %v closed (buffer_full)", conns, got)
	if got < conns-budgetBytes/(1<<20) || got > conns {
		t.Fatalf("buffer_full = %v, want %d..%d", got, conns-budgetBytes/(1<<20), conns)
	}
}

// TestConnectionCap: past max_connections a connection is closed at once
// and counted (too_many_connections); the others are served.
func TestConnectionCap(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxConnections = 4
	s, _ := startSidecar(t, cfg, nil)
	var cs []net.Conn
	defer func() {
		for _, c := range cs {
			c.Close()
		}
	}()
	for range 4 {
		c, err := net.Dial("unix", s.cfg.Socket)
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
	}
	waitFor(t, func() bool { return s.Agg.self.connections.g.Get() == 4 })
	for range 10 {
		c, err := net.Dial("unix", s.cfg.Socket)
		if err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err != io.EOF {
			t.Fatalf("read on a connection past the cap: %v, want EOF (closed)", err)
		}
		c.Close()
	}
	waitFor(t, func() bool { return rejected(t, s.Agg, schema.ReasonTooManyConnections) >= 10 })
	if got := rejected(t, s.Agg, schema.ReasonTooManyConnections); got != 10 {
		t.Fatalf("too_many_connections = %v, want 10", got)
	}
	// The connections within the cap still work.
	sm := newSim(t, "c0c0c0c0c0c0c0c0", "capped")
	if _, err := cs[0].Write(sm.hello()); err != nil {
		t.Fatal(err)
	}
	waitApplied(t, s.Agg, kindHello, 1)
}

// BenchmarkScrapeAtCaps renders /metrics of a sidecar at max_targets (64
// targets with 210-byte model names, every request series started).
func BenchmarkScrapeAtCaps(b *testing.B) {
	a, _ := capAggregator(64, 0)
	for i := range 64 {
		s := newSim(b, fmt.Sprintf("%016x", i+1), fmt.Sprintf("flood-model-%05d-%s", i, strings.Repeat("x", 180)))
		server, client := net.Pipe()
		go func() { client.Write(s.hello()); client.Close() }()
		ServeConn(server, a, 1<<20, discardLogger())
	}
	var buf bytes.Buffer
	b.ReportAllocs()
	for b.Loop() {
		buf.Reset()
		a.reg.WritePrometheus(&buf)
	}
	b.ReportMetric(float64(buf.Len()), "bytes")
}

// FuzzConns feeds two halves of arbitrary bytes to two connections at once,
// with a small shared buffer budget and a cap of 2 targets, so that the
// new paths of issue 13 (boot_in_use, the per-connection sequence
// baseline, too_many_targets, buffer_full) meet arbitrary input: nothing
// panics, every line is applied or counted, and once both connections
// end, the budget is whole again and no connection is counted open.
func FuzzConns(f *testing.F) {
	s := newSim(f, "fuzzfuzzfuzzfuzz", "m")
	r := typicalRequest("", 0).RequestBody
	both := append(s.hello(), s.request(r)...)
	f.Add(both, both)
	f.Add(append(s.hello(), bytes.Repeat([]byte("y"), 20000)...), s.hello())
	other := newSim(f, "0ther0ther0ther0", "m2")
	third := newSim(f, "thirdthirdthird3", "m3")
	f.Add(append(other.hello(), third.hello()...), append(s.hello(), s.request(r)...))
	f.Fuzz(func(t *testing.T, d1, d2 []byte) {
		const budgetBytes = 8 << 10
		a := NewAggregator(AggregatorOptions{MaxTargets: 2, MaxBufferedBytes: budgetBytes,
			BootInUseWait: 20 * time.Millisecond, Logger: discardLogger()})
		var wg sync.WaitGroup
		stats := make([]ConnStats, 2)
		for i, data := range [][]byte{d1, d2} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				server, client := net.Pipe()
				go func() { client.Write(data); client.Close() }()
				stats[i] = ServeConn(server, a, 64<<10, discardLogger())
				server.Close()
			}()
		}
		wg.Wait()
		var lines, applied, rejected int
		for _, st := range stats {
			if st.Lines != st.Applied+st.Rejected {
				t.Fatalf("%d lines, %d applied, %d rejected", st.Lines, st.Applied, st.Rejected)
			}
			lines, applied, rejected = lines+st.Lines, applied+st.Applied, rejected+st.Rejected
		}
		var selfApplied, selfRejected uint64
		for _, c := range a.self.events {
			selfApplied += c.c.Get()
		}
		for _, c := range a.self.decodeErrors {
			selfRejected += c.c.Get()
		}
		if selfApplied != uint64(applied) || selfRejected != uint64(rejected) {
			t.Fatalf("self-metrics %d applied %d rejected; stats %+v", selfApplied, selfRejected, stats)
		}
		if left := a.buffers.left.Load(); left != budgetBytes {
			t.Fatalf("budget %d after both connections ended, want %d", left, budgetBytes)
		}
		if got := a.self.connections.g.Get(); got != 0 {
			t.Fatalf("connections = %v after close", got)
		}
		if a.Targets() > 2 {
			t.Fatalf("%d targets, cap 2", a.Targets())
		}
		exposition(a)
	})
}

// BenchmarkScrapeGzip is BenchmarkScrapeAtCaps' exposition gzipped, as a
// scraper that sends Accept-Encoding: gzip would have it (Prometheus
// does), at the fastest level and the default one: the sidecar does not
// compress, because this costs more than writing the text (see
// docs/ARCHITECTURE.md, Bounds).
func BenchmarkScrapeGzip(b *testing.B) {
	a, _ := capAggregator(64, 0)
	for i := range 64 {
		s := newSim(b, fmt.Sprintf("%016x", i+1), fmt.Sprintf("flood-model-%05d-%s", i, strings.Repeat("x", 180)))
		server, client := net.Pipe()
		go func() { client.Write(s.hello()); client.Close() }()
		ServeConn(server, a, 1<<20, discardLogger())
	}
	for _, level := range []int{gzip.BestSpeed, gzip.DefaultCompression} {
		b.Run(fmt.Sprintf("level=%d", level), func(b *testing.B) {
			var buf bytes.Buffer
			zw, _ := gzip.NewWriterLevel(&buf, level)
			b.ReportAllocs()
			for b.Loop() {
				buf.Reset()
				zw.Reset(&buf)
				a.reg.WritePrometheus(zw)
				zw.Close()
			}
			b.ReportMetric(float64(buf.Len()), "bytes")
		})
	}
}
