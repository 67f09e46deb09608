//go:build cgo

package native

// Tests of the real-model shape features (architectures llama/qwen2/qwen3,
// GQA, key_length != dim/heads, q/k/v biases, q/k norms, NEOX RoPE, linear
// and Llama 3 RoPE scaling, tied embeddings, a vocabulary past the byte
// vocabulary, configured context) on tiny models that have them, against
// the Go reference forward pass.

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/picometer/picometer/gguf"
	"github.com/picometer/picometer/modelgen"
	"github.com/picometer/picometer/native/internal/reference"
)

var shapeModels sync.Map // preset name -> *shapeModel

type shapeModel struct {
	once sync.Once
	path string
	ref  *reference.Model
	err  error
}

// shapePresets are the tiny models with real-model features.
var shapePresets = map[string]modelgen.Preset{
	"tiny-llama3": modelgen.TinyLlama3,
	"tiny-qwen2":  modelgen.TinyQwen2,
	"tiny-qwen3":  modelgen.TinyQwen3,
}

// shapeFile writes preset name once per test binary (in tiny's temporary
// directory) and loads its reference model.
func shapeFile(t testing.TB, name string) (string, *reference.Model) {
	t.Helper()
	tinyModel(t) // creates the temporary directory TestMain removes
	v, _ := shapeModels.LoadOrStore(name, &shapeModel{})
	s := v.(*shapeModel)
	s.once.Do(func() {
		s.path = filepath.Join(tiny.dir, name+".gguf")
		if s.err = modelgen.Write(s.path, shapePresets[name]); s.err != nil {
			return
		}
		s.ref, s.err = loadReference(s.path)
	})
	if s.err != nil {
		t.Fatal(s.err)
	}
	return s.path, s.ref
}

func openShape(t testing.TB, name string, mod func(*Config)) *Engine {
	t.Helper()
	path, _ := shapeFile(t, name)
	return openFile(t, path, mod)
}

// worstDiff is the largest |a - b| over the logits of every position.
// quantTolerance is TestShapesQuantized's bound on |logit - reference|
// relative to the largest logit: 4e-6 (float32 against float64
// arithmetic), or 0.012 when a type in mask computes with int8 activations
// (reference.ActBlock): there a value within float32 rounding of a code
// boundary takes the neighbouring code in the engine (see typeTolerance).
// Measured 0.0063 (0.041 on logits up to 6.39, tiny-qwen3 q8_0); 0.012
// leaves 1.9x.
func quantTolerance(mask uint64) float64 {
	for t := 0; t < 64; t++ {
		if mask&(1<<t) != 0 && reference.ActBlock(gguf.TensorType(t)) != 0 {
			return 0.012
		}
	}
	return 4e-6
}

func worstDiff(got []float32, want [][]float32, vocab int) float64 {
	worst := 0.0
	for i := range want {
		for v := 0; v < vocab; v++ {
			worst = max(worst, math.Abs(float64(got[i*vocab+v]-want[i][v])))
		}
	}
	return worst
}

// maxAbs is the largest |v| over every position's logits.
func maxAbs(rows [][]float32) float64 {
	m := 0.0
	for _, row := range rows {
		for _, v := range row {
			m = max(m, math.Abs(float64(v)))
		}
	}
	return m
}

func TestShapesLoad(t *testing.T) {
	for _, name := range []string{"tiny-llama3", "tiny-qwen2", "tiny-qwen3"} {
		t.Run(name, func(t *testing.T) {
			path, ref := shapeFile(t, name)
			p := shapePresets[name]
			f, err := ReadModelFile(path)
			if err != nil {
				t.Fatal(err)
			}
			in := f.Info
			if in.Arch != p.Arch || in.Heads != p.Heads || in.KVHeads != p.KVHeads || f.HeadDim != p.HeadDim ||
				in.Vocab != ref.Vocab || in.ContextLength != p.Context || f.TiedOutput != p.Tied ||
				f.RopeNeox != (p.Arch != "llama") || f.RopeTheta != p.RopeTheta {
				t.Fatalf("model file %+v, info %+v, preset %+v", f, in, p)
			}
			wantScale := float32(1)
			if p.RopeLinear != 0 {
				wantScale = 1 / p.RopeLinear
			}
			if f.RopeFreqScale != wantScale {
				t.Errorf("rope freq scale %g, want %g", f.RopeFreqScale, wantScale)
			}
			if p.Llama3Rope != nil {
				want := p.Llama3Rope.Factors(p.HeadDim, float64(p.RopeTheta))
				if !slices.Equal(f.RopeFactors, want) || !slices.Equal(ref.RopeFactors, want) {
					t.Errorf("rope factors: loader %v, reference %v, want %v", f.RopeFactors, ref.RopeFactors, want)
				}
				// the tiny model's factors cover the rule's three bands
				ones, full, blended := 0, 0, 0
				for _, v := range want {
					switch {
					case v == 1:
						ones++
					case v == float32(p.Llama3Rope.Factor):
						full++
					default:
						blended++
					}
				}
				if ones == 0 || full == 0 || blended == 0 {
					t.Errorf("rope factors %v do not cover all three bands", want)
				}
			} else if f.RopeFactors != nil {
				t.Errorf("rope factors %v, want none", f.RopeFactors)
			}
			w, err := ReadModelWeights(path)
			if err != nil {
				t.Fatal(err)
			}
			// every tensor the loader found is the file's, and the optional
			// ones are there exactly when the preset has them
			g, err := ReadGGUF(path)
			if err != nil {
				t.Fatal(err)
			}
			for name, got := range w {
				want, err := g.Tensor(name).Float32s()
				if err != nil || !slices.Equal(got, want) {
					t.Errorf("%s: loader and file differ (%v)", name, err)
				}
			}
			if _, ok := w["blk.1.attn_v.bias"]; ok != p.QKVBias {
				t.Errorf("attn_v.bias loaded %v, preset has it %v", ok, p.QKVBias)
			}
			if _, ok := w["blk.1.attn_k_norm.weight"]; ok != p.QKNorm {
				t.Errorf("attn_k_norm loaded %v, preset has it %v", ok, p.QKNorm)
			}
		})
	}
}

// TestShapesLogitsMatchReference: the engine's logits on each shape match
// the float64 reference within the float32 error measured on the plain
// tiny model; and the shape features matter (the reference without them
// is far off), so the match is not an accident.
func TestShapesLogitsMatchReference(t *testing.T) {
	for _, name := range []string{"tiny-llama3", "tiny-qwen2", "tiny-qwen3"} {
		_, ref := shapeFile(t, name)
		toks := prompt(5, 90)
		want, err := ref.Logits(toks)
		if err != nil {
			t.Fatal(err)
		}
		for _, kernel := range CPUKernels() { // every path this CPU runs (auto is one of them)
			t.Run(name+"/"+kernel, func(t *testing.T) {
				e := openShape(t, name, func(c *Config) { c.Kernel = kernel; c.PrefillChunk = 7 })
				got, err := e.score(toks)
				if err != nil {
					t.Fatal(err)
				}
				worst, scale := worstDiff(got, want, ref.Vocab), maxAbs(want)
				// Measured (float32 kernels against the float64
				// reference): 2.6e-6 (qwen2, largest logit 3.8) .. 1.2e-5
				// (the tied models, largest logit ~7): 0.7e-6 .. 1.8e-6 of
				// the largest logit. The plain tiny model: ~2.5e-6.
				if worst > 4e-6*max(1, scale) {
					t.Fatalf("%s: logits (largest %.3g) differ from the reference by %g", e.Info().Kernel, scale, worst)
				}
				t.Logf("%s: max |logit - reference| = %.2g, largest |logit| %.3g", e.Info().Kernel, worst, scale)
			})
		}
		// Each feature changes the logits far beyond that tolerance.
		t.Run(name+"/features-matter", func(t *testing.T) {
			off := map[string]func(m *reference.Model){
				"neox":       func(m *reference.Model) { m.RopeNeox = !m.RopeNeox },
				"rope_scale": func(m *reference.Model) { m.RopeScale = 1 },
				"rope_freqs": func(m *reference.Model) { m.RopeFactors = nil },
				"biases":     func(m *reference.Model) { m.Layers[0].Bq, m.Layers[0].Bk, m.Layers[0].Bv = nil, nil, nil },
				"qk_norm":    func(m *reference.Model) { m.Layers[0].QNorm, m.Layers[0].KNorm = nil, nil },
				"theta":      func(m *reference.Model) { m.RopeTheta = 10000 },
			}
			for feature, edit := range off {
				m := *ref
				m.Layers = slices.Clone(ref.Layers)
				before := fmt.Sprintf("%v %v %v %v %v %v", m.RopeNeox, m.RopeScale, m.RopeFactors != nil,
					m.Layers[0].Bq != nil, m.Layers[0].QNorm != nil, m.RopeTheta)
				edit(&m)
				after := fmt.Sprintf("%v %v %v %v %v %v", m.RopeNeox, m.RopeScale, m.RopeFactors != nil,
					m.Layers[0].Bq != nil, m.Layers[0].QNorm != nil, m.RopeTheta)
				if before == after {
					continue // the model does not have this feature
				}
				other, err := m.Logits(toks)
				if err != nil {
					t.Fatal(err)
				}
				flat := make([]float32, 0, len(toks)*ref.Vocab)
				for _, row := range other {
					flat = append(flat, row...)
				}
				if d := worstDiff(flat, want, ref.Vocab); d < 1e-3 {
					t.Errorf("%s: without it the logits move only %g", feature, d)
				}
			}
		})
	}
}

// TestShapesGreedyAndBatching: on each shape, requests batched with
// staggered admission, with and without speculation, produce exactly the
// reference's greedy tokens.
func TestShapesGreedyAndBatching(t *testing.T) {
	for _, name := range []string{"tiny-llama3", "tiny-qwen2", "tiny-qwen3"} {
		_, ref := shapeFile(t, name)
		const n = 7
		mk := func(i int) *request {
			p := prompt(i, 3+(i*11)%60)
			if i%2 == 1 {
				p = repetitive(i, 10+(i*7)%50)
			}
			return &request{prompt: p, p: Params{MaxTokens: 10 + (i*17)%30}}
		}
		want := make([][]int32, n)
		for i := range want {
			r := mk(i)
			want[i] = refGreedy(t, ref, r.prompt, r.p.MaxTokens)
		}
		for _, specK := range []int{0, 4} {
			for _, threads := range []int{1, 2} {
				t.Run(fmt.Sprintf("%s/spec=%d/threads=%d", name, specK, threads), func(t *testing.T) {
					e := openShape(t, name, func(c *Config) { c.BMax = 3; c.SpecK = specK; c.PrefillChunk = 16; c.Threads = threads })
					distinct := map[int32]bool{}
					for _, r := range runWant(t, e, mk, want) {
						for _, tok := range r.out {
							distinct[tok] = true
						}
					}
					if len(distinct) < 10 {
						t.Errorf("only %d distinct tokens: a degenerate model proves little", len(distinct))
					}
				})
			}
		}
	}
}

// TestContext: the engine's context is configured (default: the file's,
// at most DefaultContext), sizes the KV cache, and may not exceed the
// file's; a request fills exactly that context.
func TestContext(t *testing.T) {
	path, _ := shapeFile(t, "tiny-llama3") // context_length 8192
	f := func(ctx, wantCtx int, wantErr string) {
		t.Helper()
		cfg := DefaultConfig()
		cfg.Context, cfg.BMax = ctx, 2
		e, err := Open(path, cfg)
		if wantErr != "" {
			if err == nil {
				e.Close()
				t.Fatalf("context %d: no error", ctx)
			}
			if !errors.Is(err, ErrArg) || err.Error() != wantErr {
				t.Fatalf("context %d: got %v, want %q", ctx, err, wantErr)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		if got := e.Info().ContextLength; got != wantCtx || e.Config().Context != wantCtx {
			t.Fatalf("context %d: engine context %d / %d, want %d", ctx, got, e.Config().Context, wantCtx)
		}
		if kv := e.Config().KVBlocks; kv != 2*((wantCtx+15)/16) {
			t.Fatalf("context %d: %d KV blocks, want %d", ctx, kv, 2*((wantCtx+15)/16))
		}
		// a prompt of context-1 tokens is accepted and ends at the limit; one more is refused
		p := prompt(1, wantCtx-1)
		r := solo(t, e, p, Params{MaxTokens: 10})
		if r.finish != FinishLength || len(r.out) != 1 {
			t.Fatalf("context %d: finish %q after %d tokens, want length after 1", ctx, r.finish, len(r.out))
		}
		if _, err := e.Submit(prompt(1, wantCtx), Params{MaxTokens: 1}); !errors.Is(err, ErrArg) {
			t.Fatalf("context %d: a prompt of %d tokens: %v", ctx, wantCtx, err)
		}
	}
	f(0, DefaultContext, "")
	f(300, 300, "")
	f(8192, 8192, "")
	f(8193, 0, "native: ctx: 8193 exceeds the model's context_length 8192")
	f(1, 0, "native: context: 1 not 0 or in 2..4194304")
	if in, err := LoadModelInfo(path); err != nil || in.ContextLength != 8192 {
		t.Fatalf("file context: %v %v", in.ContextLength, err)
	}
}

// TestLongContextMatchesReference scores 8192 tokens (the whole context) on
// a small Llama 3-scaled model and compares every position's logits with
// the reference: RoPE with rope_freqs at positions far past the scaling's
// original context.
func TestLongContextMatchesReference(t *testing.T) {
	if testing.Short() {
		t.Skip("scores 8192 positions")
	}
	p := modelgen.TinyLlama3
	p.Name, p.Dim, p.Layers, p.Heads, p.KVHeads, p.HeadDim, p.FFN, p.Vocab = "long", 16, 1, 2, 1, 8, 24, 0
	path := filepath.Join(t.TempDir(), "long.gguf")
	if err := modelgen.Write(path, p); err != nil {
		t.Fatal(err)
	}
	ref, err := loadReference(path)
	if err != nil {
		t.Fatal(err)
	}
	toks := prompt(9, 8192)
	want, err := ref.Logits(toks)
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Context, cfg.BMax = 8192, 1
	e, err := Open(path, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	got, err := e.score(toks)
	if err != nil {
		t.Fatal(err)
	}
	// Measured: ~1e-5 (attention sums over thousands of positions in float32).
	worst := worstDiff(got, want, ref.Vocab)
	if worst > 1e-4 {
		t.Fatalf("logits over 8192 positions differ from the reference by %g", worst)
	}
	t.Logf("max |logit - reference| over 8192 positions = %.2g", worst)
}

// TestShapesQuantized: the shape features compose with quantized files
// (rows of 64 and 72 take llama.cpp's fallbacks: Q5_0, Q8_0, F16): logits
// match the reference, which dequantizes the same bytes, and batched greedy
// tokens match solo ones.
func TestShapesQuantized(t *testing.T) {
	for _, name := range []string{"tiny-llama3", "tiny-qwen2", "tiny-qwen3"} {
		for _, typ := range []string{"q8_0", "q4_k_m"} {
			t.Run(name+"/"+typ, func(t *testing.T) {
				p := shapePresets[name]
				p.Type = typ
				path := filepath.Join(t.TempDir(), name+"-"+typ+".gguf")
				if err := modelgen.Write(path, p); err != nil {
					t.Fatal(err)
				}
				ref, err := loadReference(path)
				if err != nil {
					t.Fatal(err)
				}
				f, err := ReadModelFile(path)
				if err != nil {
					t.Fatal(err)
				}
				if f.TypeMask&^(1<<gguf.F32|1<<gguf.F16) == 0 {
					t.Fatalf("type mask %#x: nothing is quantized", f.TypeMask)
				}
				toks := prompt(2, 50)
				want, err := ref.Logits(toks)
				if err != nil {
					t.Fatal(err)
				}
				e, err := Open(path, DefaultConfig())
				if err != nil {
					t.Fatal(err)
				}
				defer e.Close()
				got, err := e.score(toks)
				if err != nil {
					t.Fatal(err)
				}
				worst, scale := worstDiff(got, want, ref.Vocab), maxAbs(want)
				if worst > quantTolerance(f.TypeMask)*max(1, scale) {
					t.Fatalf("logits (largest %.3g) differ from the reference by %g", scale, worst)
				}
				t.Logf("max |logit - reference| = %.2g (largest %.3g)", worst, scale)
				var reqs []*request
				for i := 0; i < 4; i++ {
					reqs = append(reqs, &request{prompt: prompt(i, 5+9*i), p: Params{MaxTokens: 20}})
				}
				run(t, e, reqs, 1)
				for i, r := range reqs {
					if w := refGreedy(t, ref, r.prompt, 20); !slices.Equal(r.out, w) {
						t.Errorf("request %d: batched %v\nreference %v", i, r.out, w)
					}
				}
			})
		}
	}
}
