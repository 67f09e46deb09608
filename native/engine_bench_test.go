//go:build cgo

package native

// Benchmarks on the default model (PICOMETER_DEFAULT_MODEL; create it with
// `go run ./modelgen/cmd/mkmodel -preset default -o build/models/default.gguf`),
// one compute thread. Targets on the 2-core reference machine: batch 1 >= 200
// tok/s, batch 8 >= 3x batch 1, metrics on/off >= 0.99. Ratios are measured
// side by side inside one benchmark (alternating), because the machine is
// shared and absolute figures drift between runs.

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/picometer/picometer/gguf"
	"github.com/picometer/picometer/modelgen"

	"github.com/picometer/picometer/internal/testenv"
)

// defaultModel returns the default model's path, skipping (or failing under
// PICOMETER_LIVE=1) when it is missing.
func defaultModel(tb testing.TB) string {
	tb.Helper()
	return testenv.File(tb, "default model (PICOMETER_DEFAULT_MODEL; make models)", os.Getenv("PICOMETER_DEFAULT_MODEL"))
}

// benchEngine opens path with openBenchEngine and closes it when b ends.
func benchEngine(b *testing.B, path string, mod func(*Config)) *Engine {
	b.Helper()
	e := openBenchEngine(b, path, mod)
	b.Cleanup(func() { e.Close() })
	return e
}

// openBenchEngine opens path with the benchmarks' defaults (one thread, no
// speculation) as mod changes them; the caller closes it.
func openBenchEngine(b *testing.B, path string, mod func(*Config)) *Engine {
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

// BenchmarkPrefill256: prefill tokens/s for a 256-token prompt (one op =
// submit, prefill in chunks, first token), with the default chunk of 64 and
// with the whole prompt in one chunk. Every op submits the same prompt, so
// the prefix cache is off: with it, every op after the first computed only
// the prompt's last block (a reuse, BenchmarkMultiTurn's subject).
func BenchmarkPrefill256(b *testing.B) {
	path := defaultModel(b)
	pr := bytesPrompt(strings.Repeat("The quick brown fox jumps over the lazy dog. ", 6)[:255])
	for _, chunk := range []int{64, 256} {
		b.Run(fmt.Sprintf("chunk=%d", chunk), func(b *testing.B) {
			e := benchEngine(b, path, func(c *Config) { c.BMax = 1; c.PrefillChunk = chunk; c.NoPrefixCache = true })
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				if _, err := e.Submit(pr, Params{MaxTokens: 1}); err != nil {
					b.Fatal(err)
				}
				for done := false; !done; {
					outs, err := e.Step()
					if err != nil {
						b.Fatal(err)
					}
					for _, o := range outs {
						done = done || o.Finish != ""
					}
				}
			}
			b.ReportMetric(float64(len(pr)*b.N)/time.Since(start).Seconds(), "tok/s")
		})
	}
}

// specRun generates one request to completion and returns what its decode
// phase produced: the tokens after the first, the steps and the time after
// the first token (speculation does not change the prefill), and its stats.
func specRun(b *testing.B, e *Engine, pr []int32, p Params) (tokens, steps int, d time.Duration, st RequestStats) {
	if _, err := e.Submit(pr, p); err != nil {
		b.Fatal(err)
	}
	var first time.Time
	for {
		outs, err := e.Step()
		if err != nil {
			b.Fatal(err)
		}
		if !first.IsZero() {
			steps++
		}
		for _, o := range outs {
			if first.IsZero() {
				first = time.Now()
				tokens--
			}
			tokens += len(o.Tokens)
			if o.Finish != "" {
				return tokens, steps, time.Since(first), *o.Stats
			}
		}
	}
}

// BenchmarkSpec: n-gram speculation (k = 4) on vs off, batch 1, greedy;
// one op = one generation on each engine, alternating. Reports both decode
// rates (tokens after the first per second after the first token: the
// prefill is the same either way), their ratio, the mean acceptance length
// (tokens emitted per decode/verify step with speculation on) and the
// acceptance rate of draft tokens.
//
// model=default is the default model on a repetitive prompt. Its random
// weights never copy their context, so drafts are (correctly) rejected and
// the figure shows what speculation costs when it cannot help. model=counting
// has the default model's shapes and weight traffic, but its output is the
// last token + 1 and the prompt holds the continuation, so every draft is
// accepted: the figure shows what verification buys when drafts are right.
func BenchmarkSpec(b *testing.B) {
	path := defaultModel(b)
	b.Run("model=default", func(b *testing.B) {
		benchSpec(b, path, bytesPrompt(strings.Repeat("one two three, ", 8)), 256)
	})
	b.Run("model=counting", func(b *testing.B) {
		counting := filepath.Join(b.TempDir(), "counting.gguf")
		if err := writeCountingModel(counting); err != nil {
			b.Fatal(err)
		}
		var pr []int32
		for t := int32(1); t <= 200; t++ {
			pr = append(pr, t)
		}
		benchSpec(b, counting, append(pr, 0), 180) // continues 1, 2, 3, ...
	})
}

func benchSpec(b *testing.B, path string, pr []int32, maxTokens int) {
	off := benchEngine(b, path, func(c *Config) { c.BMax = 1; c.SpecK = 0 })
	on := benchEngine(b, path, func(c *Config) { c.BMax = 1; c.SpecK = 4 })
	p := Params{MaxTokens: maxTokens}
	var tOff, tOn time.Duration
	var nOff, nOn, stepsOn, drafted, accepted int
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		n, _, d, _ := specRun(b, off, pr, p)
		tOff += d
		nOff += n
		n, steps, d, st := specRun(b, on, pr, p)
		tOn += d
		nOn += n
		stepsOn += steps
		drafted += st.DraftTokens
		accepted += st.AcceptedTokens
	}
	rOff, rOn := float64(nOff)/tOff.Seconds(), float64(nOn)/tOn.Seconds()
	b.ReportMetric(rOff, "tok/s_off")
	b.ReportMetric(rOn, "tok/s_on")
	b.ReportMetric(rOn/rOff, "x_on/off")
	b.ReportMetric(float64(nOn)/float64(stepsOn), "accept_len")
	rate := 0.0
	if drafted > 0 {
		rate = float64(accepted) / float64(drafted)
	}
	b.ReportMetric(rate, "accept_rate")
}

// writeCountingModel writes a model with the default preset's shapes whose
// greedy output is the previous token + 1 (mod 256): one-hot embeddings, an
// output matrix mapping token t to t+1, and the attention and FFN weights of
// the default model scaled down 1000x, so they cost the same to run but do
// not change the argmax.
func writeCountingModel(path string) error {
	p := modelgen.Default
	f, err := modelgen.Build(p)
	if err != nil {
		return err
	}
	for i := range f.Tensors {
		t := &f.Tensors[i]
		w := make([]float32, t.Elements())
		switch {
		case t.Name == "token_embd.weight":
			for tok := 0; tok < VocabSize; tok++ {
				w[tok*p.Dim+tok] = 1
			}
		case t.Name == "output.weight":
			for tok := 0; tok < VocabSize; tok++ {
				w[((tok+1)%256)*p.Dim+tok] = 1
			}
		case strings.HasSuffix(t.Name, "attn_output.weight"), strings.HasSuffix(t.Name, "ffn_down.weight"):
			for k := range w {
				w[k] = math.Float32frombits(binary.LittleEndian.Uint32(t.Data[4*k:])) / 1000
			}
		default:
			continue
		}
		t.Type = gguf.F32
		t.Data = gguf.Float32Bytes(w)
	}
	return gguf.WriteFile(path, f)
}

// BenchmarkMetricsOverhead: what recording metrics costs in the step loop,
// on the default configuration (8 slots, speculation on) decoding 8
// requests. One engine alternates recording on and off from step to step
// (two engines differ by their memory layout: an A/A pair of identical
// engines measured 0.98-1.03 apart). x_on/off is the median over adjacent
// on/off step pairs of the on/off rate ratio (target >= 0.99): a pair shares
// the machine's state, so interference from other processes cancels.
func BenchmarkMetricsOverhead(b *testing.B) {
	path := defaultModel(b)
	e := benchEngine(b, path, func(c *Config) { c.SpecK = 4 })
	l := newDecodeLoad(b, e, 8, bytesPrompt("Once upon a time, once upon a time"), Params{MaxTokens: 1 << 20})
	ratios := make([]float64, 0, b.N)
	var tOn, tOff time.Duration
	var nOn, nOff int
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var rate [2]float64 // [off, on]
		for _, off := range [2]bool{i%2 == 0, i%2 == 1} {
			e.setNoMetrics(off)
			l.tokens = 0
			s := time.Now()
			l.step(b)
			d := time.Since(s)
			if off {
				tOff, nOff, rate[0] = tOff+d, nOff+l.tokens, float64(l.tokens)/d.Seconds()
			} else {
				tOn, nOn, rate[1] = tOn+d, nOn+l.tokens, float64(l.tokens)/d.Seconds()
			}
		}
		ratios = append(ratios, rate[1]/rate[0])
	}
	b.StopTimer()
	slices.Sort(ratios)
	b.ReportMetric(float64(nOn)/tOn.Seconds(), "tok/s_on")
	b.ReportMetric(float64(nOff)/tOff.Seconds(), "tok/s_off")
	b.ReportMetric(ratios[len(ratios)/2], "x_on/off")
}
