package sidecar

import (
	"bytes"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	json "github.com/goccy/go-json"

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
	r.Metrics = r.MLCMetrics()
	return r
}

func testHello(boot string, seq uint64, model string) *schema.Hello {
	return &schema.Hello{Header: schema.Header{V: schema.Version, Kind: schema.KindHello, Boot: boot, Seq: seq, TimeUnixNano: 1795000000123456789},
		HelloBody: schema.HelloBody{PID: 4242, Model: model, Engine: "picometer", Daemon: "0.1.0",
			Config: schema.EngineConfig{BMax: 8, ContextLength: 512, BlockSize: 16, KVBlocks: 256, SpecK: 4, PrefillChunk: 64}}}
}

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

// BenchmarkIngest measures request events (64 output tokens) from a real
// unix socket to updated histograms on one connection, and side by side the
// bare goccy/go-json decode of the same lines into a schema.Event. The two
// alternate in rounds of ingestRound events so that the shared machine's
// noise hits both alike. It reports events/s, bare-events/s and their ratio
// (targets: ≥ 250,000 events/s and ≥ 0.5); ns/op, B/op and allocs/op are
// those of the ingest path alone.
func BenchmarkIngest(b *testing.B) {
	for _, otlp := range []bool{false, true} {
		b.Run("otlp="+strconv.FormatBool(otlp), func(b *testing.B) { benchIngest(b, otlp) })
	}
}

const ingestRound = 2048

func benchIngest(b *testing.B, otlp bool) {
	const boot = "b0000000000000001"
	prefix, suffix := seqTemplate(b, typicalRequest(boot, 7), 7)
	a := NewAggregator(AggregatorOptions{OTLP: otlp})
	sock := filepath.Join(b.TempDir(), "s.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	done := make(chan ConnStats)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- ConnStats{Err: err}
			return
		}
		defer c.Close()
		done <- ServeConn(c, a, 1<<20, slog.New(slog.DiscardHandler))
	}()
	client, err := net.Dial("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := client.Write(mustAppend(b, nil, testHello(boot, 1, "bench-model"))); err != nil {
		b.Fatal(err)
	}
	applied := a.self.events[kindRequest].c
	var round []byte
	var ev schema.Event
	var ingest, bare time.Duration
	b.SetBytes(int64(len(prefix) + len(suffix) + 7))
	b.ReportAllocs()
	b.ResetTimer()
	for seq := 0; seq < b.N; seq += ingestRound {
		n := min(ingestRound, b.N-seq)
		// The writer's bytes are ready before the clock runs: only the
		// socket copy is left on the writer's side.
		b.StopTimer()
		round = appendRequests(round[:0], prefix, suffix, uint64(seq+2), n)
		b.StartTimer()
		start := time.Now()
		if _, err := client.Write(round); err != nil {
			b.Fatal(err)
		}
		for applied.Get() < uint64(seq+n) {
			time.Sleep(20 * time.Microsecond)
		}
		ingest += time.Since(start)
		b.StopTimer()
		start = time.Now()
		for rest := round; len(rest) > 0; {
			i := bytes.IndexByte(rest, '\n')
			if err := json.Unmarshal(rest[:i], &ev); err != nil {
				b.Fatal(err)
			}
			rest = rest[i+1:]
		}
		bare += time.Since(start)
		b.StartTimer()
	}
	b.StopTimer()
	client.Close()
	if st := <-done; st.Err != nil || st.Applied != b.N+1 {
		b.Fatalf("applied %d of %d lines: %+v", st.Applied, b.N+1, st)
	}
	rate := float64(b.N) / ingest.Seconds()
	bareRate := float64(b.N) / bare.Seconds()
	b.ReportMetric(rate, "events/s")
	b.ReportMetric(bareRate, "bare-events/s")
	b.ReportMetric(rate/bareRate, "ratio")
}
