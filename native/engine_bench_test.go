//go:build cgo

package native

// Benchmarks on the default model (PICOMETER_DEFAULT_MODEL; create it with
// `go run ./native/cmd/mkmodel -preset default -o build/models/default.gguf`),
// one compute thread. Targets on the 2-core reference machine: batch 1 >= 200
// tok/s, batch 8 >= 3x batch 1, metrics on/off >= 0.99. Ratios are measured
// side by side inside one benchmark (alternating), because the machine is
// shared and absolute figures drift between runs.

import (
	"fmt"
	"os"
	"testing"
	"time"
)

// defaultModel returns the default model's path, skipping (or failing under
// PICOMETER_LIVE=1) when it is missing.
func defaultModel(tb testing.TB) string {
	tb.Helper()
	p := os.Getenv("PICOMETER_DEFAULT_MODEL")
	if p == "" {
		missing(tb, "PICOMETER_DEFAULT_MODEL is not set")
	}
	if _, err := os.Stat(p); err != nil {
		missing(tb, "default model: "+err.Error())
	}
	return p
}

func missing(tb testing.TB, why string) {
	tb.Helper()
	if os.Getenv("PICOMETER_LIVE") == "1" {
		tb.Fatal(why)
	}
	tb.Skip(why)
}

func benchEngine(b *testing.B, path string, mod func(*Config)) *Engine {
	b.Helper()
	cfg := DefaultConfig()
	cfg.Threads = 1
	cfg.SpecK = 0
	if mod != nil {
		mod(&cfg)
	}
	e, err := Open(path, cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { e.Close() })
	return e
}

// decodeLoad keeps n requests decoding: short prompts, generation up to the
// context limit, a finished request replaced at once (its 8-token prefill is
// part of the measured time; one every ~500 steps).
type decodeLoad struct {
	e      *Engine
	prompt []int32
	p      Params
	tokens int // output tokens since the last reset
}

func newDecodeLoad(b *testing.B, e *Engine, n int, prompt []int32, p Params) *decodeLoad {
	l := &decodeLoad{e: e, prompt: prompt, p: p}
	for i := 0; i < n; i++ {
		l.p.Seed = uint64(i)
		if _, err := e.Submit(prompt, l.p); err != nil {
			b.Fatal(err)
		}
	}
	for { // until every request has its first token
		if r, _ := e.Load(); r == n {
			done := true
			for i := 0; i < 4 && done; i++ {
				done = l.step(b) >= n
			}
			if done {
				break
			}
		} else {
			l.step(b)
		}
	}
	return l
}

// step runs one engine step and returns how many requests emitted tokens.
func (l *decodeLoad) step(b *testing.B) int {
	outs, err := l.e.Step()
	if err != nil {
		b.Fatal(err)
	}
	for _, o := range outs {
		l.tokens += len(o.Tokens)
		if o.Finish != "" {
			if _, err := l.e.Submit(l.prompt, l.p); err != nil {
				b.Fatal(err)
			}
		}
	}
	return len(outs)
}

func bytesPrompt(s string) []int32 {
	p := []int32{TokBOS}
	for i := 0; i < len(s); i++ {
		p = append(p, int32(s[i]))
	}
	return p
}

// BenchmarkDecode: decode tokens/s with batch requests decoding at once
// (greedy, no speculation, contexts growing from 8 to 512 tokens).
func BenchmarkDecode(b *testing.B) {
	path := defaultModel(b)
	for _, n := range []int{1, 4, 8, 16} {
		b.Run(fmt.Sprintf("batch=%d", n), func(b *testing.B) {
			e := benchEngine(b, path, func(c *Config) { c.BMax = n })
			l := newDecodeLoad(b, e, n, bytesPrompt("Once up"), Params{MaxTokens: 1 << 20})
			b.ReportAllocs()
			l.tokens = 0
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				l.step(b)
			}
			b.ReportMetric(float64(l.tokens)/time.Since(start).Seconds(), "tok/s")
		})
	}
}

// BenchmarkBatchSpeedup measures batch 8 against batch 1 side by side:
// rounds of steps alternate between the two engines, and the ratio of their
// token rates is reported (target >= 3).
func BenchmarkBatchSpeedup(b *testing.B) {
	path := defaultModel(b)
	e1 := benchEngine(b, path, func(c *Config) { c.BMax = 1 })
	e8 := benchEngine(b, path, func(c *Config) { c.BMax = 8 })
	p := Params{MaxTokens: 1 << 20}
	l1 := newDecodeLoad(b, e1, 1, bytesPrompt("Once up"), p)
	l8 := newDecodeLoad(b, e8, 8, bytesPrompt("Once up"), p)
	var t1, t8 time.Duration
	l1.tokens, l8.tokens = 0, 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s := time.Now()
		l1.step(b)
		t1 += time.Since(s)
		s = time.Now()
		l8.step(b)
		t8 += time.Since(s)
	}
	r1 := float64(l1.tokens) / t1.Seconds()
	r8 := float64(l8.tokens) / t8.Seconds()
	b.ReportMetric(r1, "tok/s_batch1")
	b.ReportMetric(r8, "tok/s_batch8")
	b.ReportMetric(r8/r1, "x_batch8/batch1")
}
