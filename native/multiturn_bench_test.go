//go:build cgo

package native

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/picometer/picometer/modelgen"
)

// BenchmarkMultiTurn is issue 27's figure: a conversation of 8 turns, each
// turn's prompt the whole conversation so far (a 400-token system prompt,
// then every earlier question and answer) plus a new 120-token question,
// served by two engines side by side, prefix caching on and off, turn by
// turn alternately. It reports each turn's time to first token on both
// (ttft_on_tN_ms, ttft_off_tN_ms), the cached prompt tokens with caching on
// (cached_tN), and the ratio over all 8 turns (ttft_on/off). Greedy answers
// of 32 tokens; the two engines' answers must be identical (a cached prefix
// changes nothing). The model is the smollm2-135m shape in Q4_0 (random
// weights; PICOMETER_MULTITURN_MODEL, else written under the benchmark's
// temp dir), one thread, context 4096. One run is the figure
// (scripts/bench.sh runs it once).
func BenchmarkMultiTurn(b *testing.B) {
	path := os.Getenv("PICOMETER_MULTITURN_MODEL")
	if path == "" {
		path = filepath.Join(b.TempDir(), "smollm2-135m-q4_0.gguf")
		p := modelgen.SmolLM2135M
		p.Type, p.Context = "q4_0", 4096
		if err := modelgen.Write(path, p); err != nil {
			b.Fatal(err)
		}
	}
	open := func(noCache bool) *Engine {
		return benchEngine(b, path, func(c *Config) { c.Context, c.BMax, c.NoPrefixCache = 4096, 1, noCache })
	}
	on, off := open(false), open(true)
	const turns, system, question, answer = 8, 400, 120, 32
	text := func(seed, n int) []int32 {
		t := make([]int32, n)
		for i := range t {
			t[i] = int32('a' + (i*7+seed*13)%26)
			if i%6 == 5 {
				t[i] = ' '
			}
		}
		return t
	}
	// turn serves prompt on e and returns its time to first token and answer.
	turn := func(e *Engine, prompt []int32) (time.Duration, []int32, RequestStats) {
		start := time.Now()
		id, err := e.Submit(prompt, Params{MaxTokens: answer})
		if err != nil {
			b.Fatal(err)
		}
		var ttft time.Duration
		var out []int32
		for {
			outs, err := e.Step()
			if err != nil {
				b.Fatal(err)
			}
			for _, o := range outs {
				if o.ID != id {
					continue
				}
				if ttft == 0 && len(o.Tokens) > 0 {
					ttft = time.Since(start)
				}
				out = append(out, o.Tokens...)
				if o.Finish != "" {
					return ttft, out, *o.Stats
				}
			}
		}
	}
	for range b.N {
		conv := append([]int32{TokBOS}, text(0, system)...)
		var sumOn, sumOff time.Duration
		for t := 1; t <= turns; t++ {
			conv = append(conv, text(t, question)...)
			ttOn, outOn, st := turn(on, conv)
			ttOff, outOff, _ := turn(off, conv)
			if !slices.Equal(outOn, outOff) {
				b.Fatalf("turn %d: cached answer %v, cold answer %v", t, outOn, outOff)
			}
			sumOn += ttOn
			sumOff += ttOff
			b.ReportMetric(float64(ttOn.Microseconds())/1e3, fmt.Sprintf("ttft_on_t%d_ms", t))
			b.ReportMetric(float64(ttOff.Microseconds())/1e3, fmt.Sprintf("ttft_off_t%d_ms", t))
			b.ReportMetric(float64(st.CachedTokens), fmt.Sprintf("cached_t%d", t))
			if k := slices.Index(outOn, TokEOS); k >= 0 {
				outOn = outOn[:k]
			}
			conv = append(conv, outOn...)
		}
		b.ReportMetric(float64(sumOn)/float64(sumOff), "ttft_on/off")
	}
}
