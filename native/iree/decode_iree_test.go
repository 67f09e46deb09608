//go:build iree && cgo

package iree

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/picometer/picometer/native/gguf/modelgen"
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

// TestDecodeStepMatchesReference runs the tiny model's decode step, as
// DecodeStepMLIR generates it and iree-compile compiles it, token by token
// through IREE's runtime, and checks greedy decoding against the Go
// reference forward pass on the same weights: the same tokens, and logits
// within float32 rounding of the reference's float64.
func TestDecodeStepMatchesReference(t *testing.T) {
	lib, compiler := needRuntime(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "tiny.gguf")
	if err := modelgen.Write(path, modelgen.Tiny); err != nil {
		t.Fatal(err)
	}
	m, err := reference.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	c := m.Config
	if c.RopeNeox || c.RopeScale != 1 || m.RopeFactors != nil || m.Layers[0].Bq != nil || m.Layers[0].QNorm != nil || m.Layers[0].Act.Q != 0 || m.OutputAct != 0 {
		t.Fatalf("the tiny model is not a plain F32 Llama: %+v", c)
	}
	shape := Shape{Dim: c.Dim, Layers: c.Layers, Heads: c.Heads, KVHeads: c.KVHeads, HeadDim: c.HeadDim,
		FFN: c.FFN, Vocab: c.Vocab, Context: c.Context, RMSEps: c.RMSEps}
	src, err := DecodeStepMLIR(shape)
	if err != nil {
		t.Fatal(err)
	}
	mlir := filepath.Join(dir, "decode.mlir")
	if err := os.WriteFile(mlir, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	rt, err := Load(lib)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	mod, err := rt.Open(compileFile(t, compiler, mlir), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer mod.Close()

	q, k, ctx, d := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim, c.Context, c.Dim
	t2 := func(data []float32, dims ...int) Tensor {
		td := make([]int64, len(dims))
		for i, v := range dims {
			td[i] = int64(v)
		}
		return Tensor{Dims: td, Data: data}
	}
	caches := make([]Tensor, 2*c.Layers)
	for i := range caches {
		caches[i] = t2(make([]float32, ctx*k), ctx, k)
	}
	prompt := []int32{256, 'H', 'e', 'l', 'l', 'o'}
	const gen = 24
	want, err := m.Greedy(prompt, gen)
	if err != nil {
		t.Fatal(err)
	}
	ref := m.NewState()
	seq := append([]int32(nil), prompt...)
	var got []int32
	maxDiff := 0.0
	for pos := 0; pos < len(prompt)+gen-1; pos++ {
		tok := seq[pos]
		mask, onehot := make([]float32, ctx), make([]float32, ctx)
		for i := range mask {
			if i > pos {
				mask[i] = -1e30
			}
		}
		onehot[pos] = 1
		in := []Tensor{t2(m.TokEmbd[int(tok)*d:int(tok+1)*d], d), t2(mask, ctx), t2(onehot, ctx),
			ropeMatrix(q, c.HeadDim, pos, c.RopeTheta), ropeMatrix(k, c.HeadDim, pos, c.RopeTheta)}
		for l, L := range m.Layers {
			in = append(in, t2(L.AttnNorm, d), t2(L.Wq, q, d), t2(L.Wk, k, d), t2(L.Wv, k, d), t2(L.Wo, d, q),
				t2(L.FFNNorm, d), t2(L.WGate, c.FFN, d), t2(L.WUp, c.FFN, d), t2(L.WDown, d, c.FFN),
				caches[2*l], caches[2*l+1])
		}
		in = append(in, t2(m.OutNorm, d), t2(m.Output, c.Vocab, d))
		out, err := mod.Call("module.decode", in, 1+2*c.Layers)
		if err != nil {
			t.Fatalf("pos %d: %v", pos, err)
		}
		copy(caches, out[1:])
		wantLogits, err := ref.Forward(tok)
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range out[0].Data {
			maxDiff = math.Max(maxDiff, math.Abs(float64(v-wantLogits[i])))
		}
		if pos >= len(prompt)-1 {
			next := reference.Argmax(out[0].Data)
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
