package modelgen

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/picometer/picometer/gguf"
)

// Real-model shapes with deterministic random weights, and the tiny models
// the tests use to exercise each shape feature the real ones have.
//
// The real-shape presets copy the hyperparameters of the public
// checkpoints' config.json (shapes, heads, head size, FFN, vocabulary size,
// RoPE base and scaling, RMSNorm epsilon, tied embeddings); their weights
// are random, and their vocabulary is picometer's byte vocabulary padded
// with reserved tokens up to the real size, so the daemon's byte-level
// tokenizer serves them (ids 0..263 mean what they mean in every preset).
// The tied presets' embeddings have std 0.2 (EmbedStd): with unit
// embeddings a random tied model repeats its input token; with 0.2 the tiny
// tied models' greedy output has ~20 distinct tokens in 32.
var (
	// SmolLM2135M has the shape of HuggingFaceTB/SmolLM2-135M (about
	// 0.54 GB as F32).
	SmolLM2135M = Preset{Name: "picometer-smollm2-135m", Arch: "llama", Dim: 576, Layers: 30, Heads: 9,
		KVHeads: 3, HeadDim: 64, FFN: 1536, Context: 8192, RMSEps: 1e-5, RopeTheta: 100000, Seed: 1,
		Tied: true, Vocab: 49152, EmbedStd: 0.2}

	// Qwen2505B has the shape of Qwen/Qwen2.5-0.5B: arch qwen2 with q/k/v
	// biases, NEOX RoPE (about 2.0 GB as F32).
	Qwen2505B = Preset{Name: "picometer-qwen2.5-0.5b", Arch: "qwen2", Dim: 896, Layers: 24, Heads: 14,
		KVHeads: 2, HeadDim: 64, FFN: 4864, Context: 32768, RMSEps: 1e-6, RopeTheta: 1000000, Seed: 1,
		Tied: true, Vocab: 151936, QKVBias: true, EmbedStd: 0.2}

	// Llama321B has the shape of meta-llama/Llama-3.2-1B, with its Llama 3
	// RoPE scaling (factor 32, low/high frequency factors 1 and 4, original
	// context 8192) as the rope_freqs tensor (about 5.0 GB as F32).
	Llama321B = Preset{Name: "picometer-llama-3.2-1b", Arch: "llama", Dim: 2048, Layers: 16, Heads: 32,
		KVHeads: 8, HeadDim: 64, FFN: 8192, Context: 131072, RMSEps: 1e-5, RopeTheta: 500000, Seed: 1,
		Tied: true, Vocab: 128256, EmbedStd: 0.2,
		Llama3Rope: &Llama3Rope{Factor: 32, LowFreqFactor: 1, HighFreqFactor: 4, OrigContext: 8192}}

	// TinyLlama3 is a test model with Llama 3.2's features: GQA 4:1, a head
	// size (32) that is not Dim/Heads (16), Llama 3 RoPE scaling whose
	// original context (64) puts the head's frequencies in all three bands
	// of the rule, a large RoPE base, tied embeddings and a vocabulary past
	// the byte vocabulary.
	TinyLlama3 = Preset{Name: "picometer-tiny-llama3", Arch: "llama", Dim: 64, Layers: 2, Heads: 4,
		KVHeads: 1, HeadDim: 32, FFN: 172, Context: 8192, RMSEps: 1e-5, RopeTheta: 500000, Seed: 1,
		Tied: true, Vocab: 300, EmbedStd: 0.2,
		Llama3Rope: &Llama3Rope{Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OrigContext: 64}}

	// TinyQwen2 is a test model with Qwen2's features: q/k/v biases, NEOX
	// RoPE, base 1e6, 8 query heads of 8 over 2 KV heads, and linear RoPE
	// scaling (factor 2). Its heads span Dim exactly, as llama.cpp's qwen2
	// loader requires (it sizes attn_q by embedding_length).
	TinyQwen2 = Preset{Name: "picometer-tiny-qwen2", Arch: "qwen2", Dim: 64, Layers: 2, Heads: 8,
		KVHeads: 2, HeadDim: 8, FFN: 172, Context: 512, RMSEps: 1e-6, RopeTheta: 1000000, Seed: 1,
		QKVBias: true, RopeLinear: 2}

	// TinyQwen3 is a test model with Qwen3's features: RMSNorm of every
	// query and key head, NEOX RoPE, head size 32 over Dim 64 and 4 heads,
	// tied embeddings.
	TinyQwen3 = Preset{Name: "picometer-tiny-qwen3", Arch: "qwen3", Dim: 64, Layers: 2, Heads: 4,
		KVHeads: 2, HeadDim: 32, FFN: 172, Context: 512, RMSEps: 1e-6, RopeTheta: 1000000, Seed: 1,
		Tied: true, QKNorm: true, EmbedStd: 0.2}
)

// shapes are the presets Lookup finds besides default, tiny and tiny-k.
var shapes = map[string]Preset{
	"smollm2-135m": SmolLM2135M,
	"qwen2.5-0.5b": Qwen2505B,
	"llama-3.2-1b": Llama321B,
	"tiny-llama3":  TinyLlama3,
	"tiny-qwen2":   TinyQwen2,
	"tiny-qwen3":   TinyQwen3,
}

// ShapePresets lists the names of the real-shape and tiny-shape presets.
var ShapePresets = []string{"smollm2-135m", "qwen2.5-0.5b", "llama-3.2-1b", "tiny-llama3", "tiny-qwen2", "tiny-qwen3"}

// Llama3Rope is Llama 3.1+'s RoPE scaling (config.json rope_scaling with
// rope_type "llama3"). llama.cpp's converter turns it into the rope_freqs
// tensor: one divisor per rotated pair, applied to the pair's frequency.
type Llama3Rope struct {
	Factor         float64 // divisor of the low frequencies (32 for Llama 3.2)
	LowFreqFactor  float64 // 1
	HighFreqFactor float64 // 4
	OrigContext    int     // original_max_position_embeddings (8192)
}

// Factors returns the per-pair divisors for a head of headDim dimensions
// and RoPE base: pair i has frequency base^(-2i/headDim) and wavelength
// 2π/frequency. Wavelengths shorter than OrigContext/HighFreqFactor keep
// their frequency (divisor 1), longer than OrigContext/LowFreqFactor are
// divided by Factor, and those between are blended smoothly, as Meta's
// reference implementation defines the rule.
func (r *Llama3Rope) Factors(headDim int, base float64) []float32 {
	orig := float64(r.OrigContext)
	lowWave, highWave := orig/r.LowFreqFactor, orig/r.HighFreqFactor
	out := make([]float32, headDim/2)
	for i := range out {
		freq := math.Pow(base, -2*float64(i)/float64(headDim))
		wave := 2 * math.Pi / freq
		switch {
		case wave < highWave:
			out[i] = 1
		case wave > lowWave:
			out[i] = float32(r.Factor)
		default:
			smooth := (orig/wave - r.LowFreqFactor) / (r.HighFreqFactor - r.LowFreqFactor)
			out[i] = float32(1 / ((1-smooth)/r.Factor + smooth))
		}
	}
	return out
}

func ropeFreqsTensor(factors []float32) gguf.Tensor {
	data := make([]byte, 4*len(factors))
	for i, v := range factors {
		binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(v))
	}
	return gguf.Tensor{Name: "rope_freqs.weight", Dims: []uint64{uint64(len(factors))}, Type: gguf.F32, Data: data}
}

func (p *Preset) headDim() int {
	if p.HeadDim != 0 {
		return p.HeadDim
	}
	if p.Heads < 1 {
		return 0
	}
	return p.Dim / p.Heads
}

func (p *Preset) vocab() int {
	if p.Vocab != 0 {
		return p.Vocab
	}
	return VocabSize
}

func (p *Preset) arch() string {
	if p.Arch == "" {
		return "llama"
	}
	return p.Arch
}

// validateShape checks the shape features against the architecture, as
// the loaders will.
func (p *Preset) validateShape() error {
	switch a := p.arch(); {
	case a != "llama" && a != "qwen2" && a != "qwen3":
		return fmt.Errorf("arch %q: want llama, qwen2 or qwen3", p.Arch)
	case p.Vocab != 0 && (p.Vocab < VocabSize || p.Vocab > 1<<24):
		return fmt.Errorf("vocab %d not 0 or in %d..%d", p.Vocab, VocabSize, 1<<24)
	case a == "qwen2" && !p.QKVBias:
		return fmt.Errorf("arch qwen2 has q/k/v biases")
	case a == "qwen3" && (!p.QKNorm || p.QKVBias):
		return fmt.Errorf("arch qwen3 has q/k norms and no biases")
	case a == "llama" && p.QKNorm:
		return fmt.Errorf("arch llama has no q/k norms")
	case p.RopeLinear < 0 || math.IsInf(float64(p.RopeLinear), 0) || math.IsNaN(float64(p.RopeLinear)):
		return fmt.Errorf("rope linear factor %v is not positive and finite", p.RopeLinear)
	case p.Llama3Rope != nil && !(p.Llama3Rope.Factor > 0 && p.Llama3Rope.HighFreqFactor > p.Llama3Rope.LowFreqFactor &&
		p.Llama3Rope.LowFreqFactor > 0 && p.Llama3Rope.OrigContext > 0):
		return fmt.Errorf("llama3 rope %+v: want factor > 0, 0 < low < high, original context > 0", *p.Llama3Rope)
	}
	return nil
}

// shapeKV is the metadata of the shape features (none for plain presets,
// so their bytes do not change).
func (p *Preset) shapeKV() []gguf.KV {
	var kv []gguf.KV
	a := p.arch()
	if p.HeadDim != 0 {
		kv = append(kv, gguf.KV{Key: a + ".attention.key_length", Value: uint32(p.HeadDim)},
			gguf.KV{Key: a + ".attention.value_length", Value: uint32(p.HeadDim)})
	}
	if p.RopeLinear != 0 {
		kv = append(kv, gguf.KV{Key: a + ".rope.scaling.type", Value: "linear"},
			gguf.KV{Key: a + ".rope.scaling.factor", Value: p.RopeLinear})
	}
	return kv
}

// reservedScale scales the token_embd and output rows of the reserved
// tokens (ids from VocabSize on): their logits stay well below the byte
// and control tokens', so a real-vocabulary preset served through the
// byte-level tokenizer mostly generates bytes (text) rather than reserved
// tokens, which have no text. The matmuls' cost is the same.
const reservedScale = 1.0 / 8

// tokenTypeUnused is llama.cpp's LLAMA_TOKEN_TYPE_UNUSED.
const tokenTypeUnused = 5

// paddedTokens is Tokens padded to n with "<|reserved_N|>" tokens of type
// unused (N is the id).
func paddedTokens(n int) (texts []string, types []int32) {
	texts, types = Tokens()
	for id := VocabSize; id < n; id++ {
		texts = append(texts, fmt.Sprintf("<|reserved_%d|>", id))
		types = append(types, tokenTypeUnused)
	}
	return texts, types
}
