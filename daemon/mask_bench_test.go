package daemon

// BenchmarkMask is issue 26's mask figure per token, where
// BenchmarkConstrained gives the mean: one constrained request at a time
// (batch 1, sampled at temperature 1, a seed per request, requests
// replaced as they finish) on Llama 3's 128k vocabulary and the
// smollm2-135m shape, under agent-like JSON schemas compiled by
// constraint/. After every engine step the snapshot's mask counters give
// that step's one mask: its time, and whether the engine's mask cache hit.
// It reports the median and p90 mask time over all tokens (mask_p50_us,
// mask_p90_us), the median of cache misses alone (cold_p50_us: a mask
// computed by walking the vocabulary), the cache hit rate, and the median
// step time beside them (step_p50_us; mask_share = mask_p50/step_p50).
// The engine and its cache persist across the go test rounds of one
// sub-benchmark, as a server's would across requests.

import (
	"slices"
	"testing"
	"time"

	"github.com/picometer/picometer/constraint"
	"github.com/picometer/picometer/native"
)

// maskSchemas: benchSchema (an extraction record: 8 typed properties, an
// enum, a nested object, a string array) and a tool call's arguments of
// the kind agents send (an enum, bounded integers, a nested array of
// objects).
var maskSchemas = map[string]string{
	"record": benchSchema,
	"tool_args": `{
  "type": "object",
  "properties": {
    "action": {"type": "string", "enum": ["search", "open", "summarize", "close"]},
    "query": {"type": "string", "maxLength": 60},
    "limit": {"type": "integer", "minimum": 1, "maximum": 50},
    "filters": {"type": "array", "maxItems": 4, "items": {
      "type": "object",
      "properties": {
        "field": {"type": "string", "enum": ["date", "author", "site"]},
        "op": {"type": "string", "enum": ["eq", "lt", "gt"]},
        "value": {"type": "string", "maxLength": 24}
      },
      "required": ["field", "op", "value"],
      "additionalProperties": false
    }},
    "confirm": {"type": "boolean"}
  },
  "required": ["action", "query", "limit", "filters", "confirm"],
  "additionalProperties": false
}`,
}

func BenchmarkMask(b *testing.B) {
	path := constrainedModel(b)
	c, err := loadCodec(path, "")
	if err != nil {
		b.Fatal(err)
	}
	if c.tk == nil {
		b.Fatalf("%s: not a Hugging Face vocabulary", path)
	}
	prompt := c.tk.Encode([]int32{c.tk.BOS()}, "Call the tool with JSON arguments:", false)
	for _, name := range []string{"record", "tool_args"} {
		gbnf, err := constraint.FromJSONSchema([]byte(maskSchemas[name]), constraint.DefaultLimits)
		if err != nil {
			b.Fatal(err)
		}
		g, err := native.CompileGrammar(gbnf)
		if err != nil {
			b.Fatalf("CompileGrammar: %v", err)
		}
		var e *native.Engine
		b.Run("vocab=llama3-128k/schema="+name, func(b *testing.B) {
			if e == nil {
				e = openConstrained(b, path, 1)
				if err := e.SetTokenBytes(c.tokenBytes(e.Info().Vocab)); err != nil {
					b.Fatal(err)
				}
			}
			p := native.Params{MaxTokens: constrainedMaxTokens, Temperature: 1, StopTokens: c.stops, Grammar: g}
			var all, cold, steps []float64
			hits, seed := 0, uint64(0)
			var s0, s1 native.Snapshot
			e.Snapshot(&s0)
			running := false
			b.ResetTimer()
			for len(all) < b.N {
				if !running {
					seed++
					p.Seed = seed
					if _, err := e.Submit(prompt, p); err != nil {
						b.Fatal(err)
					}
					running = true
				}
				t0 := time.Now()
				outs, err := e.Step()
				ns := time.Since(t0).Nanoseconds()
				if err != nil {
					b.Fatal(err)
				}
				for _, o := range outs {
					if o.Finish != "" {
						running = false
					}
				}
				e.Snapshot(&s1)
				n := s1.MaskCount - s0.MaskCount
				if n > 1 {
					b.Fatalf("one step at batch 1 computed %d masks", n)
				}
				if n == 1 {
					us := (s1.MaskTimeSum - s0.MaskTimeSum) * 1e6
					all = append(all, us)
					steps = append(steps, float64(ns)/1e3)
					if s1.MaskCacheHits > s0.MaskCacheHits {
						hits++
					} else {
						cold = append(cold, us)
					}
				}
				s0 = s1
			}
			b.StopTimer()
			p50, p90 := quantile(all, 0.5), quantile(all, 0.9)
			b.ReportMetric(p50, "mask_p50_us")
			b.ReportMetric(p90, "mask_p90_us")
			if len(cold) > 0 {
				b.ReportMetric(quantile(cold, 0.5), "cold_p50_us")
			}
			b.ReportMetric(float64(hits)/float64(len(all)), "hit_rate")
			sp := quantile(steps, 0.5)
			b.ReportMetric(sp, "step_p50_us")
			b.ReportMetric(p50/sp, "mask_share")
		})
		if e != nil {
			e.Close()
		}
		g.Free()
	}
}

func quantile(v []float64, q float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}
