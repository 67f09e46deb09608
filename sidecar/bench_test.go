package sidecar

import (
	"bytes"
	"net"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	json "github.com/goccy/go-json"
	"golang.org/x/sys/unix"

	"github.com/picometer/picometer/schema"
)

// typicalRequest is a request event with 64 output tokens (63 ITL gaps).
func typicalRequest(boot string, seq uint64) *schema.Request {
	r := &schema.Request{Header: schema.Header{V: schema.Version, Kind: schema.KindRequest, Boot: boot, Seq: seq, TimeUnixNano: 1795000000123456789}}
	r.ID = "chatcmpl-0123456789abcdef"
	r.Operation = schema.OpChat
	r.Stream = true
	r.AdmittedUS, r.FirstTokenUS = 150, 12000
	r.PromptTokens, r.PrefillTokens, r.DecodeTokens, r.CompletionTokens = 100, 100, 63, 64
	for i := range 63 {
		r.ITLUS = append(r.ITLUS, int64(3000+i*37))
	}
	r.LastTokenUS = r.FirstTokenUS + 63*4152
	r.FinishUS = r.LastTokenUS + 50
	r.FinishReason = schema.FinishLength
	return r
}

func testHello(boot string, seq uint64, model string) *schema.Hello {
	return &schema.Hello{Header: schema.Header{V: schema.Version, Kind: schema.KindHello, Boot: boot, Seq: seq, TimeUnixNano: 1795000000123456789},
		HelloBody: schema.HelloBody{PID: 4242, Model: model, Engine: "picometer", Daemon: "0.1.0",
			Config: schema.EngineConfig{BMax: 8, ContextLength: 512, BlockSize: testBlockSize, KVBlocks: 256, SpecK: 4, PrefillChunk: 64}}}
}

// testBlockSize is the KV-cache block size of testHello's engine.
const testBlockSize = 16

func mustAppend(tb testing.TB, dst []byte, ev any) []byte {
	tb.Helper()
	out, err := schema.Append(dst, ev)
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// seqTemplate splits an encoded event line around its seq value so that
// lines with any seq can be written without encoding.
func seqTemplate(tb testing.TB, ev any, seq uint64) (prefix, suffix []byte) {
	line := mustAppend(tb, nil, ev)
	marker := []byte(`"seq":` + strconv.FormatUint(seq, 10) + `,`)
	i := bytes.Index(line, marker)
	if i < 0 {
		tb.Fatalf("no %s in %s", marker, line)
	}
	return line[:i+6], line[i+len(marker)-1:]
}

// BenchmarkIngest measures request events (64 output tokens) from a real
// unix socket to updated histograms on one connection, next to the bare
// goccy/go-json decode of the same lines into a schema.Event. Both run on a
// locked OS thread whose CPU time is measured, so "per core" means per
// CPU-second of that thread, whatever else the shared machine runs:
// events/cpu-s (target ≥ 250,000), bare-events/cpu-s and their ratio
// (target ≥ 0.5). events/s is the wall-clock rate, writer included;
// B/op and allocs/op are the ingest path's. The ingest side decodes with
// the connection's decoder (request lines take schema.Decoder's fast path,
// which yields what schema.Decode yields); the bare side
// is goccy/go-json's Unmarshal, the baseline the issue names (schema.Decode
// uses encoding/json, which keeps goccy out of the sidecar binary).
// BenchmarkApply shows the two decoders and the apply path apart.
func BenchmarkIngest(b *testing.B) {
	for _, otlp := range []bool{false, true} {
		b.Run("otlp="+strconv.FormatBool(otlp), func(b *testing.B) { benchIngest(b, otlp) })
	}
}

// threadCPU is the CPU time of the calling OS thread.
func threadCPU(tb testing.TB) time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ts.Nano())
}

func benchIngest(b *testing.B, otlp bool) {
	const boot = "b0000000000000001"
	prefix, suffix := seqTemplate(b, typicalRequest(boot, 7), 7)
	a := NewAggregator(AggregatorOptions{OTLP: otlp, Logger: discardLogger()})
	sock := filepath.Join(b.TempDir(), "s.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	type result struct {
		st  ConnStats
		cpu time.Duration
	}
	done := make(chan result)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		c, err := ln.Accept()
		if err != nil {
			done <- result{st: ConnStats{Err: err}}
			return
		}
		defer c.Close()
		start := threadCPU(b)
		st := ServeConn(c, a, 1<<20, discardLogger())
		done <- result{st, threadCPU(b) - start}
	}()
	client, err := net.Dial("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	hello := mustAppend(b, nil, testHello(boot, 1, "bench-model"))
	b.SetBytes(int64(len(prefix) + len(suffix) + 7))
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	go func() {
		defer client.Close()
		buf := append(make([]byte, 0, 128<<10), hello...)
		for seq := 0; seq < b.N; seq += 64 {
			buf = appendRequests(buf, prefix, suffix, uint64(seq+2), min(64, b.N-seq))
			if _, err := client.Write(buf); err != nil {
				return
			}
			buf = buf[:0]
		}
	}()
	r := <-done
	wall := time.Since(start)
	b.StopTimer()
	if r.st.Err != nil || r.st.Applied != b.N+1 {
		b.Fatalf("applied %d of %d lines: %+v", r.st.Applied, b.N+1, r.st)
	}

	// The bare decode of the same lines, as many, on a locked thread.
	lines := make([][]byte, 4096)
	for i := range lines {
		lines[i] = append(strconv.AppendUint(append([]byte(nil), prefix...), uint64(i+2), 10), suffix[:len(suffix)-1]...)
	}
	bare := make(chan time.Duration)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		var ev schema.Event
		start := threadCPU(b)
		for i := range b.N {
			if err := json.Unmarshal(lines[i%len(lines)], &ev); err != nil {
				panic(err)
			}
		}
		bare <- threadCPU(b) - start
	}()
	bareCPU := <-bare
	rate := float64(b.N) / r.cpu.Seconds()
	bareRate := float64(b.N) / bareCPU.Seconds()
	b.ReportMetric(float64(b.N)/wall.Seconds(), "events/s")
	b.ReportMetric(rate, "events/cpu-s")
	b.ReportMetric(bareRate, "bare-events/cpu-s")
	b.ReportMetric(rate/bareRate, "ratio")
}

// appendRequests appends n event lines made of prefix, seq and suffix, with
// seq first, first+1, …
func appendRequests(buf, prefix, suffix []byte, first uint64, n int) []byte {
	for i := range n {
		buf = append(buf, prefix...)
		buf = strconv.AppendUint(buf, first+uint64(i), 10)
		buf = append(buf, suffix...)
	}
	return buf
}

// populate connects n daemons and gives every family series: both
// operations, every finish reason and error type, engine snapshots with every
// batch phase at several batch sizes, speculative positions and step records.
func populate(tb testing.TB, a *Aggregator, n int) {
	tb.Helper()
	for d := range n {
		s := newSim(tb, strconv.FormatInt(int64(0x1000000000000000+d), 16), "model-"+strconv.Itoa(d))
		var buf []byte
		buf = append(buf, s.hello()...)
		for i, fr := range schema.FinishReasons {
			for j, op := range schema.AttrOperation.Values {
				r := typicalRequest(s.boot, 0).RequestBody
				r.Operation, r.FinishReason = op, fr
				for k, et := range schema.ErrorTypes {
					if fr == schema.FinishError || fr == schema.FinishAbort {
						r.ErrorType = et
					} else if k > 0 {
						break
					}
					r.PromptTokens = 10 * (i + j + k + 1)
					switch (i + j + k) % 3 { // every cache outcome (blocks of 16)
					case 0:
						r.CachedTokens = 0 // miss
					case 1:
						r.CachedTokens = r.PromptTokens - 1 // hit
					case 2:
						r.CachedTokens = 1 // partial: 29 and more recomputed
					}
					buf = append(buf, s.request(r)...)
				}
			}
		}
		tbs := func(scale int64) schema.TimeByBatchSize {
			t := make(schema.TimeByBatchSize, 9)
			for bs := 1; bs <= 8; bs++ {
				t[bs] = schema.TimeCost{Count: scale * int64(bs), Sum: float64(scale*int64(bs)) * 0.004}
			}
			return t
		}
		for k := int64(1); k <= 3; k++ {
			e := snapshot(k, k, 0, 0, []int64{40 * k, 30 * k, 20 * k, 10 * k}, []int64{30 * k, 20 * k, 10 * k, 5 * k}, 3, 20, 64)
			e.StepsDropped = k
			e.PrefixQueries, e.PrefixHits = 100*k, 60*k
			e.DecodeTimeByBatchSize, e.DraftTimeByBatchSize, e.VerifyTimeByBatchSize = tbs(k), tbs(k), tbs(k)
			for _, ph := range schema.AttrPhase.Values {
				for bs := 1; bs <= 8; bs++ {
					e.Steps = append(e.Steps, schema.StepRecord{Phase: ph, BatchSize: bs, Tokens: 4 * bs, DurationUS: int64(300 * bs)})
				}
			}
			buf = append(buf, s.engine(e)...)
		}
		if st := feed(tb, a, buf); st.Rejected != 0 {
			tb.Fatalf("populate: %+v", st)
		}
	}
}

// BenchmarkRender measures writing /metrics for 8 daemons with every family
// populated (SetBytes is the exposition's size), and collecting the same
// state for OTLP through the Producer.
func BenchmarkRender(b *testing.B) {
	a := newTestAggregator(true)
	populate(b, a, 8)
	var buf bytes.Buffer
	a.reg.WritePrometheus(&buf)
	series := bytes.Count(buf.Bytes(), []byte("\n")) - 2*len(schema.Families)
	b.Run("prometheus", func(b *testing.B) {
		b.SetBytes(int64(buf.Len()))
		b.ReportAllocs()
		for b.Loop() {
			buf.Reset()
			a.reg.WritePrometheus(&buf)
		}
		b.ReportMetric(float64(series), "series")
	})
	b.Run("otlp_produce", func(b *testing.B) {
		p := a.Producer()
		b.ReportAllocs()
		for b.Loop() {
			if _, err := p.Produce(b.Context()); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkApply splits the per-event cost of a typical request (64 output
// tokens, 71 histogram observations: queue, TTFT, prefill, decode, time per
// output token, 63 ITL gaps, duration and two lengths): "request" is the
// whole apply path after decoding; "prom_updates" the 71
// leHistogram.Update calls alone (a mutex each, as
// metrics.PrometheusHistogram.Update); "shadow_updates" the same
// observations into a plain bucket array, for comparison; "decode" is a connection's decoder
// (the request fast path) and "decode_schema" schema.Decode of the same line.
func BenchmarkApply(b *testing.B) {
	line := bytes.TrimSuffix(mustAppend(b, nil, typicalRequest("b1", 2)), []byte("\n"))
	var ev schema.Event
	if err := decodeLine(line, &ev); err != nil {
		b.Fatal(err)
	}
	// queue, TTFT, prefill, decode, time per output token, duration, prompt
	// and generation length, then the ITL gaps.
	obs := []float64{0.00015, 0.012, 0.01185, 0.2496, 0.0039, 0.2616, 100, 64}
	for _, g := range ev.ITLUS {
		obs = append(obs, seconds(g))
	}
	b.Run("decode", func(b *testing.B) {
		var e schema.Event
		var d schema.Decoder
		b.ReportAllocs()
		for b.Loop() {
			if err := d.Decode(line, &e); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode_schema", func(b *testing.B) {
		var e schema.Event
		b.ReportAllocs()
		for b.Loop() {
			if err := schema.Decode(line, &e); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, otlp := range []bool{false, true} {
		b.Run("request/otlp="+strconv.FormatBool(otlp), func(b *testing.B) { benchApplyRequest(b, ev, otlp) })
	}
	b.Run("prom_updates", func(b *testing.B) {
		r := newRegistry()
		h := r.newHist(schema.IDInterTokenLatency, testNow, false)
		for b.Loop() {
			for _, v := range obs {
				h.prom.Update(v)
			}
		}
		b.ReportMetric(float64(len(obs)), "observations")
	})
	b.Run("shadow_updates", func(b *testing.B) {
		r := newRegistry()
		h := r.newHist(schema.IDInterTokenLatency, testNow, true)
		for b.Loop() {
			for _, v := range obs {
				h.shadow.observe(h.fam.f.Buckets, v) // observe's shadow half, without the leHistogram call
			}
		}
		b.ReportMetric(float64(len(obs)), "observations")
	})
}

// benchApplyRequest applies ev (a typical request) again and again, with
// the OTLP histogram shadows or without.
func benchApplyRequest(b *testing.B, ev schema.Event, otlp bool) {
	a := NewAggregator(AggregatorOptions{Logger: discardLogger(), OTLP: otlp})
	c := a.Connect()
	var h schema.Event
	if err := decodeLine(bytes.TrimSuffix(mustAppend(b, nil, testHello("b1", 1, "m")), []byte("\n")), &h); err != nil {
		b.Fatal(err)
	}
	if err := c.Apply(&h); err != nil {
		b.Fatal(err)
	}
	seq := uint64(1)
	b.ReportAllocs()
	for b.Loop() {
		seq++
		ev.Seq = seq
		if err := c.Apply(&ev); err != nil {
			b.Fatal(err)
		}
	}
}
