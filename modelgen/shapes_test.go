package modelgen

import (
	"math"
	"os"
	"testing"
)

// TestShapeWeights: the real-shape presets have exactly the parameter
// counts of the checkpoints whose shapes they copy (as their model cards
// and config.json give them), so every dimension, head count, head size,
// tie and bias is right without generating gigabytes.
func TestShapeWeights(t *testing.T) {
	f := func(p Preset, want int64) {
		t.Helper()
		if got := p.Weights(); got != want {
			t.Errorf("%s: %d weights, want %d", p.Name, got, want)
		}
		if err := p.Validate(); err != nil {
			t.Errorf("%s: %v", p.Name, err)
		}
	}
	f(SmolLM2135M, 134_515_008)
	f(Qwen2505B, 494_032_768)
	f(Llama321B, 1_235_814_400+32) // + rope_freqs, which the HF checkpoint computes instead of storing
}

// TestLlama3RopeFactors checks the rule on a hand-worked case: head size 4,
// base 10000, original context 1000, low/high frequency factors 1 and 4,
// factor 8. Pair 0 has wavelength 2π < 1000/4: kept (1). Pair 1 has
// frequency 10000^(-1/2) = 0.01, wavelength 628.32, between 250 and 1000:
// smooth = (1000/628.32 - 1)/3 = 0.197183, divisor 1/((1-smooth)/8 + smooth)
// = 3.360946.
func TestLlama3RopeFactors(t *testing.T) {
	r := Llama3Rope{Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OrigContext: 1000}
	got := r.Factors(4, 10000)
	if len(got) != 2 || got[0] != 1 || math.Abs(float64(got[1])-3.360946) > 1e-6 {
		t.Errorf("factors %v, want [1 3.360946]", got)
	}
	// Llama 3.2: the highest frequencies kept, the lowest divided by 32, and
	// a monotone blend between.
	got = Llama321B.Llama3Rope.Factors(64, 500000)
	if got[0] != 1 || got[31] != 32 {
		t.Errorf("llama 3.2 factors %v", got)
	}
	for i := 1; i < len(got); i++ {
		if got[i] < got[i-1] {
			t.Errorf("llama 3.2 factors not monotone at %d: %v", i, got)
		}
	}
}

func TestShapeValidate(t *testing.T) {
	f := func(edit func(p *Preset), want string) {
		t.Helper()
		p := TinyQwen2
		edit(&p)
		if err := p.Validate(); err == nil || err.Error() != want {
			t.Errorf("got %v, want %q", err, want)
		}
	}
	f(func(p *Preset) { p.Arch = "gpt2" }, `arch "gpt2": want llama, qwen2 or qwen3`)
	f(func(p *Preset) { p.QKVBias = false }, "arch qwen2 has q/k/v biases")
	f(func(p *Preset) { p.Arch = "qwen3" }, "arch qwen3 has q/k norms and no biases")
	f(func(p *Preset) { p.Arch, p.QKNorm = "llama", true }, "arch llama has no q/k norms")
	f(func(p *Preset) { p.Vocab = 100 }, "vocab 100 not 0 or in 264..16777216")
	f(func(p *Preset) { p.HeadDim = 7 }, "head dim 7 is odd (RoPE rotates pairs)")
}

// TestPaddedVocabulary: a real-size vocabulary keeps the byte vocabulary's
// ids and pads with reserved tokens.
func TestPaddedVocabulary(t *testing.T) {
	g, err := Build(TinyLlama3)
	if err != nil {
		t.Fatal(err)
	}
	v, _ := g.Get("tokenizer.ggml.tokens")
	toks := v.([]string)
	if len(toks) != 300 || toks[0] != "<0x00>" || toks[TokEOS] != "<|eos|>" || toks[264] != "<|reserved_264|>" || toks[299] != "<|reserved_299|>" {
		t.Errorf("%d tokens: %q %q %q", len(toks), toks[0], toks[TokEOS], toks[264:])
	}
	if n, _ := g.Get("llama.vocab_size"); n != uint32(300) {
		t.Errorf("llama.vocab_size %v", n)
	}
	if e := g.Tensor("token_embd.weight"); e == nil || e.Dims[1] != 300 || g.Tensor("output.weight") != nil {
		t.Errorf("token_embd %v, output %v", e, g.Tensor("output.weight") != nil)
	}
}

// TestWriteProgress: progress rises to Weights() and the bytes are Write's.
func TestWriteProgress(t *testing.T) {
	dir := t.TempDir()
	var calls []int64
	var total int64
	if err := WriteProgress(dir+"/a.gguf", TinyQwen3, func(done, tot int64) {
		calls = append(calls, done)
		total = tot
	}); err != nil {
		t.Fatal(err)
	}
	if total != TinyQwen3.Weights() || len(calls) < 10 || calls[len(calls)-1] != total {
		t.Fatalf("total %d (want %d), %d calls ending at %v", total, TinyQwen3.Weights(), len(calls), calls[len(calls)-1:])
	}
	for i := 1; i < len(calls); i++ {
		if calls[i] < calls[i-1] {
			t.Fatalf("progress went back: %v", calls)
		}
	}
	if err := Write(dir+"/b.gguf", TinyQwen3); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(dir + "/a.gguf")
	b, _ := os.ReadFile(dir + "/b.gguf")
	if len(a) == 0 || string(a) != string(b) {
		t.Fatal("WriteProgress and Write wrote different bytes")
	}
}
