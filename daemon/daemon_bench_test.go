package daemon

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/picometer/picometer/native"
	"github.com/picometer/picometer/schema"
)

// Benchmarks. The serving benchmarks run 16 concurrent clients sending
// max_tokens 16 requests over loopback HTTP, streamed and not, and report
// req/s and p50/p99 latency; on the default model (PICOMETER_DEFAULT_MODEL,
// skipped when missing) they measure the product, on the fake engine the
// daemon's own overhead. BenchmarkEmitter runs the same load on two daemons
// side by side, one emitting events to a real unix socket reader and one
// with the emitter off, alternating rounds, and reports the ratio.

const (
	benchClients   = 16
	benchMaxTokens = 16
)

// benchEngine opens the engine named by which: "default" (the default
// model, skipped when missing) or "fake".
func benchEngine(b *testing.B, which string) Engine {
	b.Helper()
	if which == "fake" {
		eng := newFakeEngine(512)
		eng.gen = forever
		return eng
	}
	path := os.Getenv("PICOMETER_DEFAULT_MODEL")
	if path == "" {
		b.Skip("PICOMETER_DEFAULT_MODEL unset (make bench sets it)")
	}
	if _, err := os.Stat(path); err != nil {
		b.Skipf("default model: %v (make models creates it)", err)
	}
	eng, err := native.Open(path, native.DefaultConfig())
	if errors.Is(err, native.ErrNoCgo) {
		b.Skip(err)
	}
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { eng.Close() })
	return eng
}

// benchServer starts a daemon on eng; with emit, its events go to a unix
// socket reader that discards them (a sidecar that keeps up).
func benchServer(b *testing.B, eng Engine, emit bool) *testServer {
	b.Helper()
	cfg := testConfig(b)
	cfg.Metrics.SnapshotInterval = time.Second
	if !emit {
		cfg.Metrics.Socket = ""
	} else {
		ln, err := net.Listen("unix", cfg.Metrics.Socket)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go func() { io.Copy(io.Discard, c); c.Close() }()
			}
		}()
	}
	d := New(cfg, eng, Deps{Logger: slog.New(slog.DiscardHandler)})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go d.Serve(ln)
	b.Cleanup(func() { d.Shutdown(time.Second) })
	return &testServer{d: d, url: "http://" + ln.Addr().String()}
}

// load sends n requests from benchClients concurrent clients and returns
// each request's latency (to the last byte) and the wall time.
func load(b *testing.B, url, body string, stream bool, n int) ([]time.Duration, time.Duration) {
	lat := make([]time.Duration, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range benchClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				t0 := time.Now()
				resp, err := testClient.Post(url+"/v1/completions", "application/json", strings.NewReader(body))
				if err != nil {
					b.Error(err)
					return
				}
				data, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != 200 || (stream && !strings.HasSuffix(string(data), sseDone)) {
					b.Errorf("status %d, %v: %.200s", resp.StatusCode, err, data)
					return
				}
				lat[i] = time.Since(t0)
			}
		}()
	}
	wg.Wait()
	return lat, time.Since(start)
}

func percentile(lat []time.Duration, p float64) time.Duration {
	s := slices.Clone(lat)
	slices.Sort(s)
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

func benchBody(stream bool) string {
	return fmt.Sprintf(`{"prompt":"Hello, picometer! Tell me a story.","max_tokens":%d,"temperature":0,"stream":%v}`, benchMaxTokens, stream)
}

func BenchmarkServe(b *testing.B) {
	for _, which := range []string{"fake", "default"} {
		for _, stream := range []bool{false, true} {
			b.Run(fmt.Sprintf("engine=%s/stream=%v", which, stream), func(b *testing.B) {
				ts := benchServer(b, benchEngine(b, which), true)
				body := benchBody(stream)
				load(b, ts.url, body, stream, benchClients) // warm up connections
				b.ResetTimer()
				lat, wall := load(b, ts.url, body, stream, b.N)
				b.StopTimer()
				b.ReportMetric(float64(b.N)/wall.Seconds(), "req/s")
				b.ReportMetric(float64(percentile(lat, 0.50).Microseconds())/1e3, "p50_ms")
				b.ReportMetric(float64(percentile(lat, 0.99).Microseconds())/1e3, "p99_ms")
			})
		}
	}
}

// BenchmarkEmitter measures throughput with the emitter on (events to a
// real unix socket reader) against off, on two daemons side by side in
// alternating rounds, and reports on/off (target ≥ 0.99): the median over
// rounds of on's throughput over off's in the same round, so a burst of
// other load on the machine spoils a round, not the figure. Each round
// runs each side for at least minRound, so the emitter's writing of one
// side's events (batched, a millisecond behind) is not counted in the
// other side's time. It also reports the process CPU time per request on
// each side (load generator, daemon and the reader standing in for the
// sidecar, all in this process) and their median ratio cpu_off/on: the
// emitter's real cost, less sensitive to other load than wall time.
func BenchmarkEmitter(b *testing.B) {
	const minRound, minRounds = 20 * time.Millisecond, 16
	for _, which := range []string{"fake", "default"} {
		b.Run("engine="+which, func(b *testing.B) {
			on := benchServer(b, benchEngine(b, which), true)
			off := benchServer(b, benchEngine(b, which), false)
			body := benchBody(false)
			load(b, on.url, body, false, benchClients)
			_, w := load(b, off.url, body, false, 4*benchClients)
			round := benchClients * max(1, int(minRound/(w/4)))
			var tOn, tOff time.Duration
			var nOn, nOff int
			var ratios, cpuRatios []float64
			b.ResetTimer()
			// Alternate which side goes first, and run at least minRounds
			// rounds so that a slow model still alternates often enough.
			for done, r := 0, 0; done < b.N || r < minRounds; r++ {
				first, second := on, off
				if r%2 == 1 {
					first, second = off, on
				}
				c0 := cpuTime()
				_, w1 := load(b, first.url, body, false, round)
				c1 := cpuTime()
				_, w2 := load(b, second.url, body, false, round)
				c2 := cpuTime()
				wOn, wOff, cOn, cOff := w1, w2, c1-c0, c2-c1
				if first == off {
					wOn, wOff, cOn, cOff = w2, w1, c2-c1, c1-c0
				}
				tOn, tOff = tOn+wOn, tOff+wOff
				ratios = append(ratios, wOff.Seconds()/wOn.Seconds())
				cpuRatios = append(cpuRatios, cOff.Seconds()/cOn.Seconds())
				nOn, nOff = nOn+round, nOff+round
				done += round
			}
			b.StopTimer()
			b.ReportMetric(float64(nOn)/tOn.Seconds(), "on_req/s")
			b.ReportMetric(float64(nOff)/tOff.Seconds(), "off_req/s")
			b.ReportMetric(median(ratios), "on/off")
			b.ReportMetric(median(cpuRatios), "cpu_off/on")
			if d := on.d.Emitter().Dropped(); d != 0 {
				b.Errorf("%d events dropped with a sidecar that keeps up", d)
			}
		})
	}
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// cpuTime returns the CPU time (user and system) this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// --- hot paths ---

func BenchmarkDecodeCompletion(b *testing.B) {
	body := []byte(`{"model":"picometer-default","prompt":"Hello, picometer! Tell me a story about a robot.","max_tokens":16,"temperature":0.7,"top_p":0.9,"stop":["\n\n"],"stream":true,"stream_options":{"include_usage":true}}`)
	b.ReportAllocs()
	var r genRequest
	for b.Loop() {
		if e := decodeCompletion(body, &r); e != nil {
			b.Fatal(e.Message)
		}
	}
}

func BenchmarkDecodeChat(b *testing.B) {
	body := []byte(`{"model":"picometer-default","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Tell me a story about a robot."}],"max_tokens":16,"stream":true}`)
	b.ReportAllocs()
	var r genRequest
	for b.Loop() {
		if e := decodeChat(body, &r); e != nil {
			b.Fatal(e.Message)
		}
	}
}

func benchMeta(op string) *respMeta {
	return &respMeta{id: "chatcmpl-9f1c2e7a5b3d4c611f", op: op, model: "picometer-default", created: 1795000000,
		promptTokens: 12, includeUsage: true}
}

// BenchmarkChunk is the per-run work of a stream: text through the UTF-8
// hold-back and a stop matcher, then one SSE chunk.
func BenchmarkChunk(b *testing.B) {
	m := benchMeta(schema.OpChat)
	run := []byte("Once upon a time, \xe2\x82")
	var h utf8Hold
	sm := newStopMatcher([]string{"\n\n", "THE END"})
	text := make([]byte, 0, 64)
	out := make([]byte, 0, 64)
	buf := make([]byte, 0, 512)
	b.ReportAllocs()
	for b.Loop() {
		text = h.Append(text[:0], run)
		out, _ = sm.Append(out[:0], text)
		buf = m.appendChunk(buf[:0], out, nil, "", 5)
	}
}

func TestChunkAllocs(t *testing.T) {
	for _, op := range []string{schema.OpChat, schema.OpTextCompletion} {
		m := benchMeta(op)
		m.tokenIDs, m.continuousUsage = true, true
		buf := make([]byte, 0, 1024)
		text, toks := []byte(`a "quoted" run, €`), []int32{97, 34, 0xe2}
		if a := testing.AllocsPerRun(100, func() { buf = m.appendChunk(buf[:0], text, toks, "", 3) }); a != 0 {
			t.Errorf("%s: appendChunk allocates %v times, want 0", op, a)
		}
	}
}
