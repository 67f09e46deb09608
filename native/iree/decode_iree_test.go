//go:build iree && cgo

package iree

import (
	"math"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/picometer/picometer/modelgen"
	"github.com/picometer/picometer/native"
	"github.com/picometer/picometer/native/internal/reference"
)

// ropeMatrix returns the block-diagonal rotation of n values (heads of hd)
// that ropes adjacent pairs at pos, as the reference's rope does.
func ropeMatrix(n, hd, pos int, theta float64) Tensor {
	r := make([]float32, n*n)
	for h := 0; h < n; h += hd {
		for i := 0; i < hd/2; i++ {
			sin, cos := math.Sincos(float64(pos) * math.Pow(theta, -2*float64(i)/float64(hd)))
			j, k := h+2*i, h+2*i+1
			r[j*n+j], r[j*n+k] = float32(cos), float32(-sin)
			r[k*n+j], r[k*n+k] = float32(sin), float32(cos)
		}
	}
	return Tensor{Dims: []int64{int64(n), int64(n)}, Data: r}
}

func tensor(data []float32, dims ...int) Tensor {
	td := make([]int64, len(dims))
	for i, v := range dims {
		td[i] = int64(v)
	}
	return Tensor{Dims: td, Data: data}
}

// stepper runs one sequence of the tiny model through the compiled decode
// step, a token per call, the caches round-tripping through the host.
type stepper struct {
	path   string // the tiny model's GGUF
	m      *reference.Model
	mod    *Module
	caches []Tensor
	pos    int
}

func newStepper(tb testing.TB) *stepper {
	tb.Helper()
	lib, compiler := needRuntime(tb)
	dir := tb.TempDir()
	path := filepath.Join(dir, "tiny.gguf")
	if err := modelgen.Write(path, modelgen.Tiny); err != nil {
		tb.Fatal(err)
	}
	m, err := loadReference(path)
	if err != nil {
		tb.Fatal(err)
	}
	c := m.Config
	if c.RopeNeox || c.RopeScale != 1 || m.RopeFactors != nil || m.Layers[0].Bq != nil || m.Layers[0].QNorm != nil || m.Layers[0].Act.Q != 0 || m.OutputAct != 0 {
		tb.Fatalf("the tiny model is not a plain F32 Llama: %+v", c)
	}
	src, err := DecodeStepMLIR(Shape{Dim: c.Dim, Layers: c.Layers, Heads: c.Heads, KVHeads: c.KVHeads, HeadDim: c.HeadDim,
		FFN: c.FFN, Vocab: c.Vocab, Context: c.Context, RMSEps: c.RMSEps})
	if err != nil {
		tb.Fatal(err)
	}
	mlir := filepath.Join(dir, "decode.mlir")
	if err := os.WriteFile(mlir, []byte(src), 0o644); err != nil {
		tb.Fatal(err)
	}
	rt, err := Load(lib)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(rt.Close)
	mod, err := rt.Open(compileFile(tb, compiler, mlir), 1)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(mod.Close)
	s := &stepper{path: path, m: m, mod: mod}
	s.reset()
	return s
}

// reset empties the caches: the next token is at position 0.
func (s *stepper) reset() {
	c := s.m.Config
	k := c.KVHeads * c.HeadDim
	s.caches = make([]Tensor, 2*c.Layers)
	for i := range s.caches {
		s.caches[i] = tensor(make([]float32, c.Context*k), c.Context, k)
	}
	s.pos = 0
}

// forward runs tok at the next position and returns the logits.
func (s *stepper) forward(tb testing.TB, tok int32) []float32 {
	m, c, pos := s.m, s.m.Config, s.pos
	q, k, ctx, d := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim, c.Context, c.Dim
	mask, onehot := make([]float32, ctx), make([]float32, ctx)
	for i := range mask {
		if i > pos {
			mask[i] = -1e30
		}
	}
	onehot[pos] = 1
	in := []Tensor{tensor(m.TokEmbd[int(tok)*d:int(tok+1)*d], d), tensor(mask, ctx), tensor(onehot, ctx),
		ropeMatrix(q, c.HeadDim, pos, c.RopeTheta), ropeMatrix(k, c.HeadDim, pos, c.RopeTheta)}
	for l, L := range m.Layers {
		in = append(in, tensor(L.AttnNorm, d), tensor(L.Wq, q, d), tensor(L.Wk, k, d), tensor(L.Wv, k, d), tensor(L.Wo, d, q),
			tensor(L.FFNNorm, d), tensor(L.WGate, c.FFN, d), tensor(L.WUp, c.FFN, d), tensor(L.WDown, d, c.FFN),
			s.caches[2*l], s.caches[2*l+1])
	}
	in = append(in, tensor(m.OutNorm, d), tensor(m.Output, c.Vocab, d))
	out, err := s.mod.Call("module.decode", in, 1+2*c.Layers)
	if err != nil {
		tb.Fatalf("pos %d: %v", pos, err)
	}
	copy(s.caches, out[1:])
	s.pos++
	return out[0].Data
}

// TestDecodeStepMatchesReference runs the tiny model's decode step, as
// DecodeStepMLIR generates it and iree-compile compiles it, token by token
// through IREE's runtime, and checks greedy decoding against the Go
// reference forward pass on the same weights: the same tokens, and logits
// within float32 rounding of the reference's float64.
func TestDecodeStepMatchesReference(t *testing.T) {
	s := newStepper(t)
	prompt := []int32{256, 'H', 'e', 'l', 'l', 'o'}
	const gen = 24
	want, err := s.m.Greedy(prompt, gen)
	if err != nil {
		t.Fatal(err)
	}
	ref := s.m.NewState()
	seq := append([]int32(nil), prompt...)
	var got []int32
	maxDiff := 0.0
	for pos := 0; pos < len(prompt)+gen-1; pos++ {
		logits := s.forward(t, seq[pos])
		wantLogits, err := ref.Forward(seq[pos])
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range logits {
			maxDiff = math.Max(maxDiff, math.Abs(float64(v-wantLogits[i])))
		}
		if pos >= len(prompt)-1 {
			next := reference.Argmax(logits)
			got = append(got, next)
			seq = append(seq, next)
		}
	}
	t.Logf("greedy %v; max |logit - reference| %.3g over %d steps", got, maxDiff, len(seq)-1)
	if len(got) != gen {
		t.Fatalf("%d tokens, want %d", len(got), gen)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("token %d: %d, reference %d\ngot  %v\nwant %v", i, got[i], want[i], got, want)
		}
	}
	if maxDiff > 1e-3 {
		t.Errorf("max |logit - reference| = %g, want <= 1e-3", maxDiff)
	}
}

// BenchmarkDecodeStepVsNative: one sequence of the tiny model, greedy, a
// BOS prompt and 32 tokens, through the IREE decode step and through the C
// engine (b_max 1, no speculation, one thread on both sides), alternating
// for 12 rounds; it reports each side's median time per token and their
// ratio. The IREE side copies every weight and both caches into device
// buffers on every call (Module.Call), which the C engine never does: this
// measures the check's program, not an IREE engine.
func BenchmarkDecodeStepVsNative(b *testing.B) {
	s := newStepper(b)
	cfg := native.DefaultConfig()
	cfg.BMax, cfg.SpecK, cfg.Threads = 1, 0, 1
	eng, err := native.Open(s.path, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer eng.Close()
	const tokens = 32
	ireeRun := func() time.Duration {
		s.reset()
		t0 := time.Now()
		tok := int32(256)
		for i := 0; i < tokens; i++ {
			tok = reference.Argmax(s.forward(b, tok))
		}
		return time.Since(t0) / tokens
	}
	nativeRun := func() time.Duration {
		t0 := time.Now()
		if _, err := eng.Submit([]int32{256}, native.Params{MaxTokens: tokens}); err != nil {
			b.Fatal(err)
		}
		n := 0
		for done := false; !done; {
			outs, err := eng.Step()
			if err != nil {
				b.Fatal(err)
			}
			for _, o := range outs {
				n += len(o.Tokens)
				done = done || o.Finish != ""
			}
		}
		return time.Since(t0) / time.Duration(n)
	}
	median := func(d []time.Duration) time.Duration {
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		return d[len(d)/2]
	}
	for i := 0; i < b.N; i++ {
		var ir, nr []time.Duration
		for r := 0; r < 12; r++ {
			ir = append(ir, ireeRun())
			nr = append(nr, nativeRun())
		}
		mi, mn := median(ir), median(nr)
		b.ReportMetric(float64(mi.Nanoseconds()), "iree-ns/token")
		b.ReportMetric(float64(mn.Nanoseconds()), "native-ns/token")
		b.ReportMetric(float64(mi)/float64(mn), "iree/native")
	}
}

// loadReference reads the GGUF file at path (through the C parser) into
// the Go reference model.
func loadReference(path string) (*reference.Model, error) {
	f, err := native.ReadGGUF(path)
	if err != nil {
		return nil, err
	}
	return reference.Load(f)
}
