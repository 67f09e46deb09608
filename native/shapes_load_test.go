package native_test

// The C loader's errors for the shape features (architectures, key_length,
// biases, q/k norms, RoPE scaling), on edited tiny shape models.

import (
	"testing"

	"github.com/picometer/picometer/gguf"
	"github.com/picometer/picometer/modelgen"
	"github.com/picometer/picometer/native"
)

func delTensor(f *gguf.File, name string) {
	for i := range f.Tensors {
		if f.Tensors[i].Name == name {
			f.Tensors = append(f.Tensors[:i], f.Tensors[i+1:]...)
			return
		}
	}
	panic("no tensor " + name)
}

func TestShapeLoadErrors(t *testing.T) {
	needCgo(t)
	f := func(name string, p modelgen.Preset, edit func(f *gguf.File), want string) {
		t.Helper()
		_, err := native.ParseModel(encode(t, p, edit))
		if err == nil || err.Error() != "native: "+want {
			t.Errorf("%s: got %v, want %q", name, err, want)
		}
	}
	q2, q3, l3 := modelgen.TinyQwen2, modelgen.TinyQwen3, modelgen.TinyLlama3
	f("unknown architecture", q2, func(f *gguf.File) { setKV(f, "general.architecture", "mamba") },
		`general.architecture: "mamba" is not supported (want one of llama, qwen2, qwen3)`)
	f("keys under another prefix", q2, func(f *gguf.File) { setKV(f, "general.architecture", "qwen3") },
		"missing key qwen3.embedding_length")
	f("qwen2 without a bias", q2, func(f *gguf.File) { delTensor(f, "blk.1.attn_k.bias") },
		"tensor blk.1.attn_k.bias: missing")
	f("qwen2 bias shape", q2, func(f *gguf.File) { f.Tensor("blk.0.attn_q.bias").Dims = []uint64{32, 2} },
		"tensor blk.0.attn_q.bias: shape [32 2] want [64]")
	f("qwen3 without a q norm", q3, func(f *gguf.File) { delTensor(f, "blk.0.attn_q_norm.weight") },
		"tensor blk.0.attn_q_norm.weight: missing")
	f("llama with only some biases", l3, func(f *gguf.File) {
		f.Tensors = append(f.Tensors, gguf.Tensor{Name: "blk.0.attn_q.bias", Dims: []uint64{128}, Type: gguf.F32,
			Data: make([]byte, 4*128)})
	}, "blk.0: attn_q/k/v.bias must all be present or all absent")
	f("value length", q3, func(f *gguf.File) { setKV(f, "qwen3.attention.value_length", uint32(16)) },
		"qwen3.attention.value_length: 16, want the key length 32 (different value and key head sizes are not supported)")
	f("odd key length", q3, func(f *gguf.File) {
		setKV(f, "qwen3.attention.key_length", uint32(31))
	}, "qwen3.attention.key_length: 31 is odd; RoPE rotates pairs")
	f("yarn", q2, func(f *gguf.File) { setKV(f, "qwen2.rope.scaling.type", "yarn") },
		`qwen2.rope.scaling.type: "yarn" is not supported (want "none" or "linear")`)
	f("scaling factor", q2, func(f *gguf.File) { setKV(f, "qwen2.rope.scaling.factor", float32(-2)) },
		"qwen2.rope.scaling.factor: -2 is not positive and finite")
	f("rope_freqs shape", l3, func(f *gguf.File) { f.Tensor("rope_freqs.weight").Dims = []uint64{8, 2} },
		"tensor rope_freqs.weight: shape [8 2] want [16]")
	f("rope_freqs value", l3, func(f *gguf.File) { copy(f.Tensor("rope_freqs.weight").Data, []byte{0, 0, 0, 0}) },
		"tensor rope_freqs.weight: element 0 is 0, want a positive finite factor")

	// "none" keeps the factor from applying, as in llama.cpp
	m, err := native.ParseModel(encode(t, q2, func(f *gguf.File) { setKV(f, "qwen2.rope.scaling.type", "none") }))
	if err != nil || m.RopeFreqScale != 1 {
		t.Errorf("scaling type none: %v, freq scale %v", err, m)
	}
}

// seedShapeModel is seedModel as a qwen2 model with the shape features the
// loader parses beyond Llama's: q/k/v biases, attention.key_length, linear
// RoPE scaling and a rope_freqs tensor (a FuzzLoad seed).
func seedShapeModel() *gguf.File {
	f := seedModel(false)
	for i := range f.KV {
		if k := f.KV[i].Key; len(k) > 6 && k[:6] == "llama." {
			f.KV[i].Key = "qwen2." + k[6:]
		}
	}
	f.KV[0].Value = "qwen2"
	f.KV = append(f.KV, gguf.KV{Key: "qwen2.attention.key_length", Value: uint32(2)},
		gguf.KV{Key: "qwen2.rope.scaling.type", Value: "linear"},
		gguf.KV{Key: "qwen2.rope.scaling.factor", Value: float32(4)})
	vec := func(name string, v ...float32) gguf.Tensor {
		return gguf.Tensor{Name: name, Dims: []uint64{uint64(len(v))}, Type: gguf.F32, Data: gguf.Float32Bytes(v)}
	}
	f.Tensors = append(f.Tensors, vec("blk.0.attn_q.bias", 1, 2), vec("blk.0.attn_k.bias", 3, 4),
		vec("blk.0.attn_v.bias", 5, 6), vec("rope_freqs.weight", 2))
	return f
}

func TestSeedShapeModelLoads(t *testing.T) {
	needCgo(t)
	b, err := seedShapeModel().Encode()
	if err != nil {
		t.Fatal(err)
	}
	m, err := native.ParseModel(b)
	if err != nil {
		t.Fatal(err)
	}
	if m.Info.Arch != "qwen2" || m.HeadDim != 2 || !m.RopeNeox || m.RopeFreqScale != 0.25 || len(m.RopeFactors) != 1 || m.RopeFactors[0] != 2 {
		t.Errorf("%+v", m)
	}
}
