package modelgen

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/picometer/picometer/gguf"
	"github.com/picometer/picometer/native"
)

var update = flag.Bool("update", false, "rewrite testdata/sha256.golden.json")

func encode(t testing.TB, p Preset) []byte {
	t.Helper()
	f, err := Build(p)
	if err != nil {
		t.Fatal(err)
	}
	b, err := f.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestGolden pins the bytes of each preset (SHA-256 in
// testdata/sha256.golden.json, refreshed with -update): the same preset
// must always give the same file, since the engine's golden tests depend
// on the weights.
func TestGolden(t *testing.T) {
	tiedF16 := Tiny
	tiedF16.Tied, tiedF16.F16 = true, true
	seed2 := Tiny
	seed2.Seed = 2
	presets := map[string]Preset{"tiny": Tiny, "tiny-tied-f16": tiedF16, "tiny-seed-2": seed2, "default": Default}
	for _, name := range []string{"tiny-llama3", "tiny-qwen2", "tiny-qwen3"} {
		presets[name] = shapes[name]
	}
	if testing.Short() {
		delete(presets, "default")
	}
	got := map[string]string{}
	for name, p := range presets {
		b := encode(t, p)
		sum := sha256.Sum256(b)
		got[name] = hex.EncodeToString(sum[:])
		if again := encode(t, p); !reflect.DeepEqual(b, again) {
			t.Errorf("%s: two builds differ", name)
		}
	}
	if got["tiny"] == got["tiny-seed-2"] {
		t.Errorf("the seed does not change the weights")
	}
	path := filepath.Join("testdata", "sha256.golden.json")
	if *update {
		b, _ := json.MarshalIndent(got, "", "\t")
		if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]string
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	for name, sum := range got {
		if want[name] != sum {
			t.Errorf("%s: sha256 %s, want %s (go test ./modelgen -update if the change is intended)", name, sum, want[name])
		}
	}
}

func TestMetadata(t *testing.T) {
	f, err := native.ParseGGUF(encode(t, Tiny))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"general.architecture":                   "llama",
		"general.name":                           "picometer-tiny",
		"general.alignment":                      uint32(32),
		"general.file_type":                      uint32(0),
		"picometer.seed":                         uint64(1),
		"llama.context_length":                   uint32(256),
		"llama.embedding_length":                 uint32(64),
		"llama.block_count":                      uint32(2),
		"llama.feed_forward_length":              uint32(172),
		"llama.attention.head_count":             uint32(4),
		"llama.attention.head_count_kv":          uint32(2),
		"llama.attention.layer_norm_rms_epsilon": float32(1e-5),
		"llama.rope.dimension_count":             uint32(16),
		"llama.rope.freq_base":                   float32(10000),
		"llama.vocab_size":                       uint32(264),
		"tokenizer.ggml.model":                   "picometer-bytes",
		"tokenizer.ggml.bos_token_id":            uint32(256),
		"tokenizer.ggml.eos_token_id":            uint32(257),
		"tokenizer.ggml.padding_token_id":        uint32(258),
		"tokenizer.ggml.unknown_token_id":        uint32(263),
		"tokenizer.ggml.add_bos_token":           true,
		"tokenizer.ggml.add_eos_token":           false,
		"tokenizer.chat_template":                ChatTemplate,
	}
	for k, v := range want {
		if got, ok := f.Get(k); !ok || !reflect.DeepEqual(got, v) {
			t.Errorf("%s = %#v, want %#v", k, got, v)
		}
	}
	toks, _ := f.Get("tokenizer.ggml.tokens")
	texts := toks.([]string)
	types, _ := f.Get("tokenizer.ggml.token_type")
	tt := types.([]int32)
	f2 := func(id int, text string, typ int32) {
		t.Helper()
		if texts[id] != text || tt[id] != typ {
			t.Errorf("token %d = %q type %d, want %q type %d", id, texts[id], tt[id], text, typ)
		}
	}
	f2(0, "<0x00>", 6)
	f2('A', "<0x41>", 6)
	f2(255, "<0xFF>", 6)
	f2(TokBOS, "<|bos|>", 3)
	f2(TokEOS, "<|eos|>", 3)
	f2(TokPad, "<|pad|>", 3)
	f2(TokSystem, "<|system|>", 3)
	f2(TokUser, "<|user|>", 3)
	f2(TokAssistant, "<|assistant|>", 3)
	f2(TokEnd, "<|end|>", 3)
	f2(TokUnk, "<|unk|>", 2)
	if len(texts) != VocabSize || len(tt) != VocabSize {
		t.Errorf("%d tokens, %d types", len(texts), len(tt))
	}
	// tensors: 1 + 9 per layer + output_norm + output, in llama.cpp's order
	names := []string{}
	for _, tn := range f.Tensors {
		names = append(names, tn.Name)
	}
	if len(names) != 1+9*2+2 || names[0] != "token_embd.weight" || names[1] != "blk.0.attn_norm.weight" ||
		names[len(names)-1] != "output.weight" {
		t.Errorf("tensors %v", names)
	}
	if tn := f.Tensor("blk.1.ffn_down.weight"); !reflect.DeepEqual(tn.Dims, []uint64{172, 64}) || tn.Type != gguf.F32 {
		t.Errorf("ffn_down: %v %s", tn.Dims, tn.Type)
	}
	if tn := f.Tensor("blk.0.attn_k.weight"); !reflect.DeepEqual(tn.Dims, []uint64{64, 32}) {
		t.Errorf("attn_k: %v", tn.Dims)
	}
}

func TestTiedF16(t *testing.T) {
	p := Tiny
	p.Tied, p.F16 = true, true
	f, err := native.ParseGGUF(encode(t, p))
	if err != nil {
		t.Fatal(err)
	}
	if f.Tensor("output.weight") != nil {
		t.Errorf("tied model has output.weight")
	}
	if ft, _ := f.Get("general.file_type"); ft != uint32(1) {
		t.Errorf("file_type %v", ft)
	}
	for _, tn := range f.Tensors {
		want := gguf.F16
		if strings.HasSuffix(tn.Name, "norm.weight") {
			want = gguf.F32
		}
		if tn.Type != want {
			t.Errorf("%s is %s, want %s", tn.Name, tn.Type, want)
		}
	}
}

// TestWeightScale checks each tensor's statistics against what Build
// promises: matrices with standard deviation gain/sqrt(fan-in), norms
// uniform on 0.9..1.1.
func TestWeightScale(t *testing.T) {
	f, err := Build(Default)
	if err != nil {
		t.Fatal(err)
	}
	for _, tn := range f.Tensors {
		w, err := tn.Float32s()
		if err != nil {
			t.Fatal(err)
		}
		mean, sq := 0.0, 0.0
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, v := range w {
			mean += float64(v)
			lo, hi = math.Min(lo, float64(v)), math.Max(hi, float64(v))
		}
		mean /= float64(len(w))
		for _, v := range w {
			sq += (float64(v) - mean) * (float64(v) - mean)
		}
		std := math.Sqrt(sq / float64(len(w)))
		if strings.HasSuffix(tn.Name, "norm.weight") {
			if lo < 0.9 || hi > 1.1 || math.Abs(mean-1) > 0.02 {
				t.Errorf("%s: min %g max %g mean %g, want uniform on 0.9..1.1", tn.Name, lo, hi, mean)
			}
			continue
		}
		want := 1 / math.Sqrt(float64(tn.Dims[0]))
		switch {
		case tn.Name == "token_embd.weight":
			want = 1
		case strings.HasSuffix(tn.Name, "attn_q.weight"), strings.HasSuffix(tn.Name, "attn_k.weight"):
			want *= 2
		}
		if math.Abs(std/want-1) > 0.02 || math.Abs(mean) > 0.02*want || hi > want*math.Sqrt(3) || lo < -want*math.Sqrt(3) {
			t.Errorf("%s: std %g mean %g range %g..%g, want uniform with std %g", tn.Name, std, mean, lo, hi, want)
		}
	}
}

func TestSizes(t *testing.T) {
	f := func(p Preset, params int) {
		t.Helper()
		g, err := Build(p)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, tn := range g.Tensors {
			n += int(tn.Elements())
		}
		if n != params {
			t.Errorf("%s: %d parameters, want %d", p.Name, n, params)
		}
	}
	layer := func(dim, kv, ffn int) int { return 2*dim + 2*dim*dim + 2*dim*kv + 3*dim*ffn }
	f(Default, 2*264*512+6*layer(512, 128, 1376)+512) // 16.9M floats: about 64 MiB
	f(Tiny, 2*264*64+2*layer(64, 32, 172)+64)
}

func TestValidate(t *testing.T) {
	f := func(edit func(p *Preset), want string) {
		t.Helper()
		p := Tiny
		edit(&p)
		err := p.Validate()
		if err == nil || err.Error() != want {
			t.Errorf("got %v, want %q", err, want)
		}
		if _, err := Build(p); err == nil || err.Error() != "modelgen: preset picometer-tiny: "+want {
			t.Errorf("Build: %v", err)
		}
	}
	f(func(p *Preset) { p.Dim = 0 }, "dim 0 < 1")
	f(func(p *Preset) { p.Layers = 65 }, "layers 65 not in 1..64")
	f(func(p *Preset) { p.Heads = 3 }, "heads 3 does not divide dim 64")
	f(func(p *Preset) { p.Heads = 64 }, "head dim 1 is odd (RoPE rotates pairs)")
	f(func(p *Preset) { p.KVHeads = 3 }, "kv heads 3 does not divide heads 4")
	f(func(p *Preset) { p.FFN = 0 }, "ffn 0 < 1")
	f(func(p *Preset) { p.Context = 0 }, "context 0 < 1")
	f(func(p *Preset) { p.RMSEps = 0 }, "rms eps 0 is not positive and finite")
	f(func(p *Preset) { p.RopeTheta = float32(math.Inf(1)) }, "rope theta +Inf is not positive and finite")
	if err := Default.Validate(); err != nil {
		t.Error(err)
	}
}

func TestLookup(t *testing.T) {
	if p, ok := Lookup("default"); !ok || p.Name != "picometer-default" {
		t.Errorf("default: %v %v", p, ok)
	}
	if p, ok := Lookup("tiny"); !ok || p.Name != "picometer-tiny" {
		t.Errorf("tiny: %v %v", p, ok)
	}
	if _, ok := Lookup("huge"); ok {
		t.Errorf("huge: found")
	}
}

func TestWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := Write(path, Tiny); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(b, encode(t, Tiny)) {
		t.Errorf("Write and Build+Encode differ")
	}
	bad := Tiny
	bad.Dim = 0
	if err := Write(filepath.Join(t.TempDir(), "bad.gguf"), bad); err == nil {
		t.Errorf("Write of an invalid preset: no error")
	}
}

// BenchmarkWriteDefault measures writing the default model (about 64 MiB):
// generating the weights and writing the file, synced.
func BenchmarkWriteDefault(b *testing.B) {
	path := filepath.Join(b.TempDir(), "default.gguf")
	b.ReportAllocs()
	for b.Loop() {
		if err := Write(path, Default); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBuildDefault is the generation part of BenchmarkWriteDefault.
func BenchmarkBuildDefault(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Build(Default); err != nil {
			b.Fatal(err)
		}
	}
}

// TestTypes: every file type builds, keeps 1-D tensors F32, and places
// the types as llama.cpp's quantize does (the _M mixes, the output, the
// shape fallbacks).
func TestTypes(t *testing.T) {
	want := map[string]map[string]gguf.TensorType{
		// tiny-k: 2 layers, so useMoreBits holds for layer 0 (< 2/8 is false;
		// >= 7*2/8 = 1 is false; (0-0)%3 == 2 false) → no; layer 1: 1 >= 1 → yes.
		"q4_k_m": {"blk.0.attn_v.weight": gguf.Q4_K, "blk.1.attn_v.weight": gguf.Q6_K,
			"blk.0.ffn_down.weight": gguf.Q4_K, "blk.1.ffn_down.weight": gguf.Q6_K,
			"blk.0.attn_q.weight": gguf.Q4_K, "output.weight": gguf.Q6_K, "token_embd.weight": gguf.Q4_K},
		"q5_k_m": {"blk.1.attn_v.weight": gguf.Q6_K, "blk.0.ffn_up.weight": gguf.Q5_K, "output.weight": gguf.Q6_K},
		"q4_0":   {"blk.0.attn_q.weight": gguf.Q4_0, "output.weight": gguf.Q6_K, "token_embd.weight": gguf.Q4_0},
		"q8_0":   {"blk.0.attn_q.weight": gguf.Q8_0, "output.weight": gguf.Q8_0},
		"q4_1":   {"blk.0.ffn_gate.weight": gguf.Q4_1},
		"q6_k":   {"blk.0.ffn_gate.weight": gguf.Q6_K},
		"bf16":   {"blk.0.ffn_gate.weight": gguf.BF16, "output.weight": gguf.BF16},
		"f16":    {"blk.0.ffn_gate.weight": gguf.F16},
	}
	for _, typ := range Types {
		p := TinyK
		p.Type = typ
		f, err := Build(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, ts := range f.Tensors {
			if len(ts.Dims) == 1 && ts.Type != gguf.F32 {
				t.Errorf("%s: %s is %s", typ, ts.Name, ts.Type)
			}
			if _, err := ts.Float32s(); err != nil {
				t.Errorf("%s: %v", typ, err)
			}
		}
		for name, w := range want[typ] {
			if got := f.Tensor(name).Type; got != w {
				t.Errorf("%s: %s is %s, want %s", typ, name, got, w)
			}
		}
	}
	// The tiny shape: rows of 64 and 172 fall back (Q4_K → Q5_0; 172 is not
	// a multiple of 32 → F16), and a tied output of rows of 64 is Q8_0.
	p := Tiny
	p.Type, p.Tied = "q4_k_m", true
	f, err := Build(p)
	if err != nil {
		t.Fatal(err)
	}
	for name, w := range map[string]gguf.TensorType{"blk.0.attn_q.weight": gguf.Q5_0,
		"blk.0.ffn_down.weight": gguf.F16, "token_embd.weight": gguf.Q8_0} {
		if got := f.Tensor(name).Type; got != w {
			t.Errorf("tiny q4_k_m: %s is %s, want %s", name, got, w)
		}
	}
	// useMoreBits over 30 layers (smollm2-135m), as llama.cpp picks them.
	var more []int
	for l := 0; l < 30; l++ {
		if useMoreBits(l, 30) {
			more = append(more, l)
		}
	}
	if fmt.Sprint(more) != "[0 1 2 5 8 11 14 17 20 23 26 27 28 29]" {
		t.Errorf("useMoreBits(·, 30) = %v", more)
	}
}
