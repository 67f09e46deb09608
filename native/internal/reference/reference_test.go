package reference

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/picometer/picometer/gguf"
	"github.com/picometer/picometer/modelgen"
	"github.com/picometer/picometer/native"
)

var update = flag.Bool("update", false, "rewrite testdata/greedy.golden.json")

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-12*math.Max(1, math.Abs(b)) }

func TestRMSNorm(t *testing.T) {
	f := func(x []float64, w []float32, eps float64, want []float64) {
		t.Helper()
		out := make([]float64, len(x))
		rmsnorm(out, x, w, eps)
		for i := range want {
			if !near(out[i], want[i]) {
				t.Errorf("rmsnorm(%v, %v, %g) = %v, want %v", x, w, eps, out, want)
				return
			}
		}
	}
	f([]float64{3, 4}, []float32{1, 1}, 0, []float64{3 / math.Sqrt(12.5), 4 / math.Sqrt(12.5)})
	f([]float64{3, 4}, []float32{2, -1}, 0, []float64{6 / math.Sqrt(12.5), -4 / math.Sqrt(12.5)})
	f([]float64{1, 1, 1, 1}, []float32{1, 1, 1, 1}, 1, []float64{1 / math.Sqrt(2), 1 / math.Sqrt(2), 1 / math.Sqrt(2), 1 / math.Sqrt(2)})
	f([]float64{0, 0}, []float32{1, 1}, 1e-5, []float64{0, 0})
}

func TestRope(t *testing.T) {
	f := func(x []float64, pos, hd int, theta float64, want []float64) {
		t.Helper()
		got := append([]float64(nil), x...)
		rope(got, pos, hd, theta)
		for i := range want {
			if !near(got[i], want[i]) {
				t.Errorf("rope(%v, pos %d, hd %d, theta %g) = %v, want %v", x, pos, hd, theta, got, want)
				return
			}
		}
	}
	c1, s1 := math.Cos(1), math.Sin(1)
	f([]float64{1, 2, 3, 4}, 0, 4, 10000, []float64{1, 2, 3, 4})            // position 0: identity
	f([]float64{1, 0}, 1, 2, 10000, []float64{c1, s1})                      // pair 0 turns by pos radians
	f([]float64{0, 1}, 1, 2, 10000, []float64{-s1, c1})                     // counter-clockwise
	f([]float64{1, 0, 1, 0}, 1, 2, 10000, []float64{c1, s1, c1, s1})        // every head alike
	f([]float64{1, 0, 1, 0}, 3, 4, 100, []float64{math.Cos(3), math.Sin(3), // pair 1: 3·100^(-2/4) = 0.3 rad
		math.Cos(0.3), math.Sin(0.3)})
	f([]float64{1, 0, 0, 1}, 2, 4, 10000, []float64{math.Cos(2), math.Sin(2), -math.Sin(0.02), math.Cos(0.02)})
}

// TestRopeExt: NEOX pairs, linear scale and per-pair factors (Llama 3).
func TestRopeExt(t *testing.T) {
	f := func(x []float64, pos, hd int, theta, scale float64, factors []float32, neox bool, want []float64) {
		t.Helper()
		got := append([]float64(nil), x...)
		ropeExt(got, pos, hd, theta, scale, factors, neox)
		for i := range want {
			if !near(got[i], want[i]) {
				t.Errorf("ropeExt(%v, pos %d, hd %d, theta %g, scale %g, factors %v, neox %v) = %v, want %v",
					x, pos, hd, theta, scale, factors, neox, got, want)
				return
			}
		}
	}
	c1, s1 := math.Cos(1), math.Sin(1)
	// NEOX pairs (x[i], x[i+hd/2]): pair 0 is (x0, x2) and turns by pos; pair 1 (x1, x3) by pos/100
	f([]float64{1, 0, 0, 1}, 1, 4, 10000, 1, nil, true, []float64{c1, -math.Sin(0.01), s1, math.Cos(0.01)})
	f([]float64{1, 0, 0, 0}, 1, 4, 10000, 1, nil, true, []float64{c1, 0, s1, 0})
	f([]float64{0, 1, 0, 0}, 2, 4, 100, 1, nil, true, []float64{0, math.Cos(0.2), 0, math.Sin(0.2)})
	// linear scale 1/4: position 4 turns pair 0 by 1 radian
	f([]float64{1, 0}, 4, 2, 10000, 0.25, nil, false, []float64{c1, s1})
	// factors divide each pair's angle: pair 1 of base 100 at pos 3 is 0.3 rad, / 3 = 0.1
	f([]float64{1, 0, 1, 0}, 3, 4, 100, 1, []float32{1, 3}, false, []float64{math.Cos(3), math.Sin(3), math.Cos(0.1), math.Sin(0.1)})
}

func TestHeadNormAndBias(t *testing.T) {
	x := []float64{3, 4, 1, 1}
	addBias(x, []float32{1, -1, 0, 1})
	if !slices.Equal(x, []float64{4, 3, 1, 2}) {
		t.Fatalf("addBias: %v", x)
	}
	addBias(x, nil)
	headNorm(x, 2, []float32{1, 2}, 0) // heads (4, 3) and (1, 2), each to unit RMS, then * (1, 2)
	want := []float64{4 / math.Sqrt(12.5), 6 / math.Sqrt(12.5), 1 / math.Sqrt(2.5), 4 / math.Sqrt(2.5)}
	for i := range want {
		if !near(x[i], want[i]) {
			t.Fatalf("headNorm: %v, want %v", x, want)
		}
	}
}

func TestSoftmax(t *testing.T) {
	f := func(x, want []float64) {
		t.Helper()
		got := append([]float64(nil), x...)
		softmax(got)
		for i := range want {
			if !near(got[i], want[i]) {
				t.Errorf("softmax(%v) = %v, want %v", x, got, want)
				return
			}
		}
	}
	f([]float64{0}, []float64{1})
	f([]float64{5, 5}, []float64{0.5, 0.5})
	f([]float64{0, math.Log(3)}, []float64{0.25, 0.75})
	f([]float64{1000, 1000 + math.Log(3)}, []float64{0.25, 0.75}) // no overflow
}

func TestArgmax(t *testing.T) {
	f := func(x []float32, want int32) {
		t.Helper()
		if got := Argmax(x); got != want {
			t.Errorf("Argmax(%v) = %d, want %d", x, got, want)
		}
	}
	f([]float32{1}, 0)
	f([]float32{1, 3, 2}, 1)
	f([]float32{2, 3, 3}, 1) // lowest id on ties
	f([]float32{-1, -0.5}, 1)
}

// handModel is a dim-2, one-head, one-layer model whose logits are worked
// out by hand in TestHandComputed.
func handModel(wq, wk, wv, wo, gate, up, down []float32) *gguf.File {
	f32 := func(name string, dims []uint64, v []float32) gguf.Tensor {
		return gguf.Tensor{Name: name, Dims: dims, Type: gguf.F32, Data: gguf.Float32Bytes(v)}
	}
	return &gguf.File{
		KV: []gguf.KV{
			{Key: "general.architecture", Value: "llama"},
			{Key: "llama.embedding_length", Value: uint32(2)},
			{Key: "llama.block_count", Value: uint32(1)},
			{Key: "llama.attention.head_count", Value: uint32(1)},
			{Key: "llama.feed_forward_length", Value: uint32(1)},
			{Key: "llama.context_length", Value: uint32(4)},
			{Key: "llama.attention.layer_norm_rms_epsilon", Value: float32(0.25)},
		},
		Tensors: []gguf.Tensor{
			f32("token_embd.weight", []uint64{2, 2}, []float32{3, 4, 1, 0}),
			f32("blk.0.attn_norm.weight", []uint64{2}, []float32{1, 1}),
			f32("blk.0.attn_q.weight", []uint64{2, 2}, wq),
			f32("blk.0.attn_k.weight", []uint64{2, 2}, wk),
			f32("blk.0.attn_v.weight", []uint64{2, 2}, wv),
			f32("blk.0.attn_output.weight", []uint64{2, 2}, wo),
			f32("blk.0.ffn_norm.weight", []uint64{2}, []float32{1, 1}),
			f32("blk.0.ffn_gate.weight", []uint64{2, 1}, gate),
			f32("blk.0.ffn_up.weight", []uint64{2, 1}, up),
			f32("blk.0.ffn_down.weight", []uint64{1, 2}, down),
			f32("output_norm.weight", []uint64{2}, []float32{1, 1}),
			// no output.weight: tied to token_embd
		},
	}
}

// TestHandComputed checks the forward pass against formulas written out
// independently: RMSNorm, the KV cache, RoPE, the attention scale, SwiGLU,
// the residuals and tied logits.
func TestHandComputed(t *testing.T) {
	const eps = 0.25
	n := func(x [2]float64) [2]float64 {
		s := 1 / math.Sqrt((x[0]*x[0]+x[1]*x[1])/2+eps)
		return [2]float64{x[0] * s, x[1] * s}
	}
	add := func(a, b [2]float64) [2]float64 { return [2]float64{a[0] + b[0], a[1] + b[1]} }
	scale := func(a [2]float64, s float64) [2]float64 { return [2]float64{a[0] * s, a[1] * s} }
	rot := func(a [2]float64, angle float64) [2]float64 {
		return [2]float64{a[0]*math.Cos(angle) - a[1]*math.Sin(angle), a[0]*math.Sin(angle) + a[1]*math.Cos(angle)}
	}
	silu := func(x float64) float64 { return x / (1 + math.Exp(-x)) }
	logits := func(x [2]float64) [2]float64 { // tied: rows of token_embd are [3 4] and [1 0]
		h := n(x)
		return [2]float64{3*h[0] + 4*h[1], h[0]}
	}
	emb := [][2]float64{{3, 4}, {1, 0}}
	I := []float32{1, 0, 0, 1}

	t.Run("attention and ffn", func(t *testing.T) {
		// q = k = 0: uniform attention. v, o = I. ffn: gate = h0, up = h1, down = [1 0].
		m, err := Load(handModel([]float32{0, 0, 0, 0}, []float32{0, 0, 0, 0}, I, I, []float32{1, 0}, []float32{0, 1}, []float32{1, 0}))
		if err != nil {
			t.Fatal(err)
		}
		ffn := func(x [2]float64) [2]float64 {
			h := n(x)
			return add(x, [2]float64{silu(h[0]) * h[1], 0})
		}
		x0 := ffn(add(emb[0], n(emb[0])))                             // position 0 attends to itself
		x1 := ffn(add(emb[1], scale(add(n(emb[0]), n(emb[1])), 0.5))) // position 1: the mean of both values
		check(t, m, []int32{0, 1}, [][2]float64{logits(x0), logits(x1)})
	})

	t.Run("rope", func(t *testing.T) {
		// q = k = v = o = I, no ffn (down = 0): the scores depend on RoPE.
		m, err := Load(handModel(I, I, I, I, []float32{0, 0}, []float32{0, 0}, []float32{0, 0}))
		if err != nil {
			t.Fatal(err)
		}
		h0, h1 := n(emb[0]), n(emb[1])
		q1, k0, k1 := rot(h1, 1), h0, rot(h1, 1) // head dim 2: pair 0 turns by pos radians
		s0 := (q1[0]*k0[0] + q1[1]*k0[1]) / math.Sqrt(2)
		s1 := (q1[0]*k1[0] + q1[1]*k1[1]) / math.Sqrt(2)
		p0 := math.Exp(s0) / (math.Exp(s0) + math.Exp(s1))
		x0 := add(emb[0], h0)
		x1 := add(emb[1], add(scale(h0, p0), scale(h1, 1-p0)))
		check(t, m, []int32{0, 1}, [][2]float64{logits(x0), logits(x1)})
	})
}

func check(t *testing.T, m *Model, toks []int32, want [][2]float64) {
	t.Helper()
	got, err := m.Logits(toks)
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		for j := range want[i] {
			if math.Abs(float64(got[i][j])-want[i][j]) > 1e-6*math.Max(1, math.Abs(want[i][j])) {
				t.Errorf("position %d: logits %v, want %v", i, got[i], want[i])
				break
			}
		}
	}
}

// TestGQA checks grouped-query attention: the tiny model (4 heads, 2 KV
// heads) must give the same logits as the same model with each KV head
// duplicated into 4 KV heads (head j uses KV head j/2).
func TestGQA(t *testing.T) {
	f, err := modelgen.Build(modelgen.Tiny)
	if err != nil {
		t.Fatal(err)
	}
	m, err := Load(f)
	if err != nil {
		t.Fatal(err)
	}
	wide := *m
	wide.KVHeads = m.Heads
	wide.Layers = append([]Layer(nil), m.Layers...)
	group, hd, dim := m.Heads/m.KVHeads, m.HeadDim, m.Dim
	dup := func(w []float32) []float32 {
		var out []float32
		for j := 0; j < m.Heads; j++ { // rows of KV head j/group
			kvh := j / group
			out = append(out, w[kvh*hd*dim:(kvh+1)*hd*dim]...)
		}
		return out
	}
	for l := range wide.Layers {
		wide.Layers[l].Wk = dup(m.Layers[l].Wk)
		wide.Layers[l].Wv = dup(m.Layers[l].Wv)
	}
	toks := []int32{modelgen.TokBOS, 'G', 'Q', 'A', '!', 3}
	a, err := m.Logits(toks)
	if err != nil {
		t.Fatal(err)
	}
	b, err := wide.Logits(toks)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Errorf("grouped and duplicated KV heads give different logits")
	}
}

func TestForwardErrors(t *testing.T) {
	m, err := Load(handModel(make([]float32, 4), make([]float32, 4), make([]float32, 4), make([]float32, 4),
		make([]float32, 2), make([]float32, 2), make([]float32, 2)))
	if err != nil {
		t.Fatal(err)
	}
	s := m.NewState()
	if _, err := s.Forward(2); err == nil || err.Error() != "reference: token 2 not in 0..1" {
		t.Errorf("token out of range: %v", err)
	}
	for i := 0; i < 4; i++ {
		if _, err := s.Forward(0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Forward(0); err == nil || err.Error() != "reference: position 4 is past the context length 4" {
		t.Errorf("past the context: %v", err)
	}
	got, err := m.Greedy([]int32{0, 1}, 10) // stops at the context limit
	if err != nil || len(got) != 3 {
		t.Errorf("Greedy at the context limit: %v, %v (want 3 tokens)", got, err)
	}
	if _, err := m.Greedy(nil, 1); err == nil {
		t.Errorf("Greedy with an empty prompt: no error")
	}
}

func TestLoadErrors(t *testing.T) {
	f := func(name string, edit func(f *gguf.File), want string) {
		t.Helper()
		g, err := modelgen.Build(modelgen.Tiny)
		if err != nil {
			t.Fatal(err)
		}
		edit(g)
		if _, err := Load(g); err == nil || err.Error() != want {
			t.Errorf("%s: got %v, want %q", name, err, want)
		}
	}
	f("arch", func(g *gguf.File) { g.KV[0].Value = "gpt2" }, "reference: general.architecture gpt2, want llama, qwen2 or qwen3")
	f("missing tensor", func(g *gguf.File) { g.Tensors = append(g.Tensors[:3], g.Tensors[4:]...) },
		"reference: tensor blk.0.attn_k.weight: missing")
	f("shape", func(g *gguf.File) { g.Tensor("blk.1.ffn_down.weight").Dims = []uint64{64, 172} },
		"reference: tensor blk.1.ffn_down.weight: shape [64 172] want [172 64]")
	f("missing key", func(g *gguf.File) {
		for i := range g.KV {
			if g.KV[i].Key == "llama.block_count" {
				g.KV = append(g.KV[:i], g.KV[i+1:]...)
				break
			}
		}
	}, "reference: missing key llama.block_count")
}

// prompts are the inputs of the greedy golden test.
var prompts = []struct {
	name string
	toks []int32
}{
	{"bos", []int32{modelgen.TokBOS}},
	{"hello", append([]int32{modelgen.TokBOS}, bytesOf("Hello, world")...)},
	{"chat", append(append([]int32{modelgen.TokBOS, modelgen.TokUser}, bytesOf("What is 2+2?")...),
		modelgen.TokEnd, modelgen.TokAssistant)},
	{"digits", append([]int32{modelgen.TokBOS}, bytesOf("0123456789")...)},
}

func bytesOf(s string) []int32 {
	out := make([]int32, len(s))
	for i := 0; i < len(s); i++ {
		out[i] = int32(s[i])
	}
	return out
}

// TestGreedyGolden checks that greedy decoding of the generated models is
// deterministic (golden token ids in testdata/greedy.golden.json, refreshed
// with -update) and varied: not a constant token, not a 2-cycle, and
// different for different prompts. This is what the weight scaling in
// modelgen is for.
func TestGreedyGolden(t *testing.T) {
	const n = 32
	presets := []modelgen.Preset{modelgen.Tiny, modelgen.Default}
	if testing.Short() {
		presets = presets[:1]
	}
	golden := map[string]map[string][]int32{}
	path := filepath.Join("testdata", "greedy.golden.json")
	if !*update {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &golden); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]map[string][]int32{}
	for _, p := range presets {
		f, err := modelgen.Build(p)
		if err != nil {
			t.Fatal(err)
		}
		m, err := Load(f)
		if err != nil {
			t.Fatal(err)
		}
		got[p.Name] = map[string][]int32{}
		seen := map[string]string{}
		for _, pr := range prompts {
			out, err := m.Greedy(pr.toks, n)
			if err != nil {
				t.Fatal(err)
			}
			got[p.Name][pr.name] = out
			if err := varied(out); err != nil {
				t.Errorf("%s %s: %v: %v", p.Name, pr.name, err, out)
			}
			key := fmt.Sprint(out)
			if other, dup := seen[key]; dup {
				t.Errorf("%s: prompts %s and %s give the same output %v", p.Name, other, pr.name, out)
			}
			seen[key] = pr.name
			if want, ok := golden[p.Name][pr.name]; !*update && (!ok || !reflect.DeepEqual(out, want)) {
				t.Errorf("%s %s: got %v, want %v (go test ./native/internal/reference -update)", p.Name, pr.name, out, want)
			}
		}
	}
	if *update {
		b, err := json.MarshalIndent(got, "", "\t")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// varied fails for an output that is constant or settles into a cycle of
// length 1 or 2, or uses fewer than 4 distinct tokens.
func varied(out []int32) error {
	distinct := map[int32]bool{}
	for _, tok := range out {
		distinct[tok] = true
	}
	if len(distinct) < 4 {
		return fmt.Errorf("only %d distinct tokens", len(distinct))
	}
	tail := out[len(out)/2:]
	for period := 1; period <= 2; period++ {
		cyc := true
		for i := period; i < len(tail); i++ {
			cyc = cyc && tail[i] == tail[i-period]
		}
		if cyc {
			return fmt.Errorf("ends in a cycle of length %d", period)
		}
	}
	return nil
}

// TestLoadFileTied checks LoadFile on a written file and a tied model.
func TestLoadFileTied(t *testing.T) {
	p := modelgen.Tiny
	p.Tied, p.F16 = true, true
	path := filepath.Join(t.TempDir(), "tied.gguf")
	if err := modelgen.Write(path, p); err != nil {
		t.Fatal(err)
	}
	m, err := loadFile(path)
	if errors.Is(err, native.ErrNoCgo) {
		t.Skip("reading a GGUF file needs the C parser (cgo)")
	}
	if err != nil {
		t.Fatal(err)
	}
	if !m.Tied || &m.Output[0] != &m.TokEmbd[0] || m.Vocab != modelgen.VocabSize || m.HeadDim != 16 {
		t.Errorf("tied %v vocab %d head dim %d", m.Tied, m.Vocab, m.HeadDim)
	}
	if _, err := m.Greedy([]int32{modelgen.TokBOS}, 4); err != nil {
		t.Error(err)
	}
}

func BenchmarkForwardTiny(b *testing.B) {
	f, err := modelgen.Build(modelgen.Tiny)
	if err != nil {
		b.Fatal(err)
	}
	m, err := Load(f)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	s := m.NewState()
	for b.Loop() {
		if s.Pos == m.Context {
			s = m.NewState()
		}
		if _, err := s.Forward(65); err != nil {
			b.Fatal(err)
		}
	}
}

// loadFile reads a GGUF file with the project's GGUF parser (C's, through
// native: reference itself stays pure Go) and loads its model.
func loadFile(path string) (*Model, error) {
	f, err := native.ReadGGUF(path)
	if err != nil {
		return nil, err
	}
	return Load(f)
}
