package native_test

// Tests of the C GGUF loader (gguf.c) through model_cgo.go. The package is
// native_test because the files come from modelgen, which native's
// own tests (package native) must be able to import as well.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/picometer/picometer/gguf"
	"github.com/picometer/picometer/modelgen"
	"github.com/picometer/picometer/native"

	"github.com/picometer/picometer/internal/testenv"
)

// micro is a model small enough that every byte prefix of its file can be
// loaded in a test (about 80 KB).
var micro = modelgen.Preset{Name: "picometer-micro", Dim: 32, Layers: 1, Heads: 2, KVHeads: 1,
	FFN: 40, Context: 32, RMSEps: 1e-5, RopeTheta: 10000, Seed: 7}

// needCgo skips when native was built without cgo (the loader is C).
func needCgo(t testing.TB) {
	t.Helper()
	if _, err := native.ParseModel(nil); errors.Is(err, native.ErrNoCgo) {
		t.Skip("built without cgo")
	}
}

// encode builds p's model, lets edit change it, and encodes it.
func encode(t testing.TB, p modelgen.Preset, edit func(f *gguf.File)) []byte {
	t.Helper()
	f, err := modelgen.Build(p)
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(f)
	}
	b, err := f.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// afterName returns the offset just past the first GGUF string s in b (the
// value type of a metadata key, or the n_dims of a tensor info).
func afterName(t testing.TB, b []byte, s string) int {
	t.Helper()
	pat := binary.LittleEndian.AppendUint64(nil, uint64(len(s)))
	pat = append(pat, s...)
	i := bytes.Index(b, pat)
	if i < 0 {
		t.Fatalf("%q not found", s)
	}
	return i + len(pat)
}

func setKV(f *gguf.File, key string, v any) {
	for i := range f.KV {
		if f.KV[i].Key == key {
			f.KV[i].Value = v
			return
		}
	}
	f.KV = append(f.KV, gguf.KV{Key: key, Value: v})
}

func delKV(f *gguf.File, key string) {
	for i := range f.KV {
		if f.KV[i].Key == key {
			f.KV = append(f.KV[:i], f.KV[i+1:]...)
			return
		}
	}
	panic("no key " + key)
}

func TestVocabularyMatchesModelgen(t *testing.T) {
	f := func(name string, got, want int) {
		t.Helper()
		if got != want {
			t.Errorf("%s: modelgen %d, native %d", name, got, want)
		}
	}
	f("VocabSize", modelgen.VocabSize, native.VocabSize)
	f("TokBOS", modelgen.TokBOS, native.TokBOS)
	f("TokEOS", modelgen.TokEOS, native.TokEOS)
	f("TokPad", modelgen.TokPad, native.TokPad)
	f("TokSystem", modelgen.TokSystem, native.TokSystem)
	f("TokUser", modelgen.TokUser, native.TokUser)
	f("TokAssistant", modelgen.TokAssistant, native.TokAssistant)
	f("TokEnd", modelgen.TokEnd, native.TokEnd)
	f("TokUnk", modelgen.TokUnk, native.TokUnk)
	if modelgen.ControlTokens != native.ControlTokens {
		t.Errorf("ControlTokens: modelgen %q, native %q", modelgen.ControlTokens, native.ControlTokens)
	}
}

// allTypes is metadata of every GGUF value type, including empty and
// nested arrays, that the loader must skip correctly.
var allTypes = []gguf.KV{
	{Key: "test.uint8", Value: uint8(200)},
	{Key: "test.int8", Value: int8(-5)},
	{Key: "test.uint16", Value: uint16(60000)},
	{Key: "test.int16", Value: int16(-30000)},
	{Key: "test.uint32", Value: uint32(4000000000)},
	{Key: "test.int32", Value: int32(-2000000000)},
	{Key: "test.float32", Value: float32(3.5)},
	{Key: "test.bool", Value: true},
	{Key: "test.string", Value: "h\xc3\xa9llo\x00world"},
	{Key: "test.uint64", Value: uint64(1<<63 + 5)},
	{Key: "test.int64", Value: int64(-1 << 62)},
	{Key: "test.float64", Value: 2.718281828459045},
	{Key: "test.array.uint8", Value: []uint8{1, 2, 255}},
	{Key: "test.array.int8", Value: []int8{-1, 0, 1}},
	{Key: "test.array.uint16", Value: []uint16{1, 65535}},
	{Key: "test.array.int16", Value: []int16{-32768, 32767}},
	{Key: "test.array.uint32", Value: []uint32{7}},
	{Key: "test.array.int32", Value: []int32{-7, 7}},
	{Key: "test.array.float32", Value: []float32{0.5, -0.25}},
	{Key: "test.array.bool", Value: []bool{true, false, true}},
	{Key: "test.array.string", Value: []string{"", "a", "bc"}},
	{Key: "test.array.uint64", Value: []uint64{1 << 40}},
	{Key: "test.array.int64", Value: []int64{-1 << 40}},
	{Key: "test.array.float64", Value: []float64{1e300}},
	{Key: "test.array.empty", Value: []string{}},
	{Key: "test.array.nested", Value: []any{[]int32{1, 2}, []string{"x"}, []any{[]bool{true}, []any{}}}},
}

func TestLoadRoundTrip(t *testing.T) {
	needCgo(t)
	withExtra := func(f *gguf.File) {
		// Unknown keys of every type before, between and after the ones
		// the loader reads: a wrong skip would derail the rest.
		kv := append([]gguf.KV{}, allTypes[:13]...)
		kv = append(kv, f.KV[:10]...)
		kv = append(kv, allTypes[13:]...)
		f.KV = append(kv, f.KV[10:]...)
	}
	tiedF16 := modelgen.Tiny
	tiedF16.Tied, tiedF16.F16 = true, true
	cases := []struct {
		name string
		p    modelgen.Preset
		edit func(*gguf.File)
	}{
		{"tiny", modelgen.Tiny, nil},
		{"tiny tied f16", tiedF16, nil},
		{"micro with every value type", micro, withExtra},
		{"micro alignment 64", micro, func(f *gguf.File) { setKV(f, gguf.KeyAlignment, uint32(64)) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, err := modelgen.Build(c.p)
			if err != nil {
				t.Fatal(err)
			}
			if c.edit != nil {
				c.edit(f)
			}
			path := filepath.Join(t.TempDir(), "m.gguf")
			if err := gguf.WriteFile(path, f); err != nil {
				t.Fatal(err)
			}
			m, err := native.ReadModelFile(path)
			if err != nil {
				t.Fatal(err)
			}
			p := c.p
			texts, _ := modelgen.Tokens()
			align, _ := f.Alignment()
			want := native.ModelInfo{Name: p.Name, Arch: "llama", Dim: p.Dim, Layers: p.Layers,
				Heads: p.Heads, KVHeads: p.KVHeads, FFN: p.FFN, Vocab: modelgen.VocabSize,
				ContextLength: p.Context, BOS: native.TokBOS, EOS: native.TokEOS, Pad: native.TokPad,
				Tokens: texts, ChatTemplate: modelgen.ChatTemplate}
			if !reflect.DeepEqual(m.Info, want) {
				t.Errorf("info:\n got %+v\nwant %+v", m.Info, want)
			}
			if m.HeadDim != p.Dim/p.Heads || m.RMSEps != p.RMSEps || m.RopeTheta != p.RopeTheta ||
				m.TiedOutput != p.Tied || m.F16 != p.F16 || m.Alignment != align || m.Tensors != len(f.Tensors) {
				t.Errorf("got head dim %d eps %g theta %g tied %v f16 %v alignment %d tensors %d",
					m.HeadDim, m.RMSEps, m.RopeTheta, m.TiedOutput, m.F16, m.Alignment, m.Tensors)
			}
			// Every key the file holds, in order, with the value bytes the
			// loader delimited decoding to exactly what was written.
			if len(m.Meta) != len(f.KV) {
				t.Fatalf("loader read %d metadata entries, file has %d", len(m.Meta), len(f.KV))
			}
			for i, kv := range f.KV {
				got := m.Meta[i]
				typ, _, _ := gguf.TypeOf(kv.Value)
				if got.Key != kv.Key || got.Type != uint32(typ) {
					t.Errorf("entry %d: %q type %d, want %q type %d", i, got.Key, got.Type, kv.Key, typ)
					continue
				}
				v, n, err := gguf.DecodeValue(gguf.ValueType(got.Type), got.Value)
				if err != nil || n != len(got.Value) || !reflect.DeepEqual(v, kv.Value) {
					t.Errorf("%s: decoded %#v (%d of %d bytes, %v), want %#v", kv.Key, v, n, len(got.Value), err, kv.Value)
				}
			}
			// Every weight the engine will use is the tensor's data.
			w, err := native.ReadModelWeights(path)
			if err != nil {
				t.Fatal(err)
			}
			if len(w) != len(f.Tensors) {
				t.Errorf("loader exposes %d weights, file has %d tensors", len(w), len(f.Tensors))
			}
			for _, tn := range f.Tensors {
				data, err := tn.Float32s()
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(w[tn.Name], data) {
					t.Errorf("tensor %s: loader's %d floats differ from the file's %d", tn.Name, len(w[tn.Name]), len(data))
				}
			}
			info, err := native.LoadModelInfo(path)
			if err != nil || !reflect.DeepEqual(info, m.Info) {
				t.Errorf("LoadModelInfo: %+v, %v", info, err)
			}
		})
	}
}

// TestLoadErrors checks the exact message for each malformed file. Cases
// marked format are malformed GGUF: ParseGGUF (the parser alone) must give
// the same message, and accept the others, so the model loader adds model
// checks only and never a format rule of its own.
func TestLoadErrors(t *testing.T) {
	needCgo(t)
	valid := encode(t, micro, nil)
	g, err := native.ParseGGUF(valid)
	if err != nil {
		t.Fatal(err)
	}
	size := len(valid)
	le := binary.LittleEndian
	patch := func(edit func(b []byte) []byte) []byte { return edit(append([]byte(nil), valid...)) }
	rebuild := func(edit func(f *gguf.File)) []byte { return encode(t, micro, edit) }
	tensorInfo := func(b []byte, name string) int { return afterName(t, b, name) } // at n_dims
	data := int(g.DataOffset)
	embd := g.Tensor("token_embd.weight")
	last := g.Tensors[len(g.Tensors)-1]

	type tc struct {
		name   string
		b      []byte
		status native.Status
		format bool
		msg    string
	}
	cases := []tc{
		{"empty", nil, native.StatusFormat, true, "truncated: header needs 4 bytes at offset 0, file has 0 bytes"},
		{"wrong magic", patch(func(b []byte) []byte { copy(b, "GGML"); return b }), native.StatusFormat, true,
			"bad magic 0x4c4d4747, not a GGUF file"},
		{"ELF", []byte("\x7fELF\x02\x01\x01\x00"), native.StatusFormat, true, "bad magic 0x464c457f, not a GGUF file"},
		{"version 2", patch(func(b []byte) []byte { le.PutUint32(b[4:], 2); return b }), native.StatusFormat, true,
			"unsupported GGUF version 2"},
		{"truncated header: magic", valid[:3], native.StatusFormat, true,
			"truncated: header needs 4 bytes at offset 0, file has 3 bytes"},
		{"truncated header: counts", valid[:20], native.StatusFormat, true,
			"truncated: header needs 8 bytes at offset 16, file has 20 bytes"},
		{"huge tensor count", patch(func(b []byte) []byte { le.PutUint64(b[8:], ^uint64(0)); return b }),
			native.StatusFormat, true, fmt.Sprintf("tensor count 18446744073709551615 is more than a %d-byte file can hold", size)},
		{"huge metadata count", patch(func(b []byte) []byte { le.PutUint64(b[16:], 1<<60); return b }),
			native.StatusFormat, true, fmt.Sprintf("metadata count 1152921504606846976 is more than a %d-byte file can hold", size)},
		// (Cuts before byte 24+32*tensors hit the tensor count check, so
		// these cut the last metadata entry.)
		{"truncated metadata: key", valid[:afterName(t, valid, "tokenizer.chat_template")-3], native.StatusFormat, true,
			fmt.Sprintf("truncated: metadata key #25 needs 23 bytes at offset %d, file has %d bytes",
				afterName(t, valid, "tokenizer.chat_template")-23, afterName(t, valid, "tokenizer.chat_template")-3)},
		{"truncated metadata: value", valid[:afterName(t, valid, "tokenizer.chat_template")+4+8+5], native.StatusFormat, true,
			fmt.Sprintf("truncated: metadata tokenizer.chat_template needs %d bytes at offset %d, file has %d bytes",
				len(modelgen.ChatTemplate), afterName(t, valid, "tokenizer.chat_template")+12, afterName(t, valid, "tokenizer.chat_template")+17)},
		{"truncated metadata: array", valid[:afterName(t, valid, "tokenizer.ggml.tokens")+100], native.StatusFormat, true,
			fmt.Sprintf("truncated: metadata tokenizer.ggml.tokens: array of 264 string at offset %d does not fit in a %d-byte file",
				afterName(t, valid, "tokenizer.ggml.tokens")+16, afterName(t, valid, "tokenizer.ggml.tokens")+100)},
		{"huge string length", patch(func(b []byte) []byte {
			le.PutUint64(b[afterName(t, b, "general.name")+4:], ^uint64(0))
			return b
		}), native.StatusFormat, true, fmt.Sprintf("truncated: metadata general.name needs 18446744073709551615 bytes at offset %d, file has %d bytes",
			afterName(t, valid, "general.name")+12, size)},
		{"huge array length", patch(func(b []byte) []byte {
			le.PutUint64(b[afterName(t, b, "tokenizer.ggml.tokens")+8:], 1<<62)
			return b
		}), native.StatusFormat, true, fmt.Sprintf("truncated: metadata tokenizer.ggml.tokens: array of 4611686018427387904 string at offset %d does not fit in a %d-byte file",
			afterName(t, valid, "tokenizer.ggml.tokens")+16, size)},
		{"unknown metadata type", patch(func(b []byte) []byte {
			le.PutUint32(b[afterName(t, b, "general.name"):], 13)
			return b
		}), native.StatusFormat, true, "metadata general.name: unknown value type 13"},
		{"unknown array element type", patch(func(b []byte) []byte {
			le.PutUint32(b[afterName(t, b, "tokenizer.ggml.tokens")+4:], 99)
			return b
		}), native.StatusFormat, true, "metadata tokenizer.ggml.tokens: unknown array element type 99"},
		{"bad bool", patch(func(b []byte) []byte {
			b[afterName(t, b, "tokenizer.ggml.add_bos_token")+4] = 2
			return b
		}), native.StatusFormat, true, "metadata tokenizer.ggml.add_bos_token: bool value 2 (want 0 or 1)"},
		{"arrays nested too deep", nested(9), native.StatusFormat, true, "metadata deep: arrays nested deeper than 8"},
		{"arrays nested 8 deep", nested(7), native.StatusModel, false, "missing key general.architecture"},
		{"duplicate key", patch(func(b []byte) []byte {
			i := afterName(t, b, "general.file_type")
			copy(b[i-len("general.file_type"):], "general.alignment")
			return b
		}), native.StatusFormat, true, "duplicate metadata general.alignment"},
		{"alignment not a power of two", patch(func(b []byte) []byte {
			le.PutUint32(b[afterName(t, b, gguf.KeyAlignment)+4:], 48)
			return b
		}), native.StatusFormat, true, "general.alignment: 48 is not a power of two"},
		{"alignment zero", patch(func(b []byte) []byte {
			le.PutUint32(b[afterName(t, b, gguf.KeyAlignment)+4:], 0)
			return b
		}), native.StatusFormat, true, "general.alignment: 0 is not a power of two"},
		{"alignment wrong type", patch(func(b []byte) []byte {
			le.PutUint32(b[afterName(t, b, gguf.KeyAlignment):], uint32(gguf.TypeInt32))
			return b
		}), native.StatusFormat, true, "general.alignment: type int32, want uint32"},
		{"truncated tensor info", valid[:g.InfoOffset+4], native.StatusFormat, true,
			fmt.Sprintf("truncated: tensor info #0 needs 8 bytes at offset %d, file has %d bytes", g.InfoOffset, g.InfoOffset+4)},
		{"truncated tensor info: dims", valid[:tensorInfo(valid, "blk.0.attn_q.weight")+15], native.StatusFormat, true,
			fmt.Sprintf("truncated: tensor blk.0.attn_q.weight needs 8 bytes at offset %d, file has %d bytes",
				tensorInfo(valid, "blk.0.attn_q.weight")+12, tensorInfo(valid, "blk.0.attn_q.weight")+15)},
		{"truncated tensor info: name", valid[:tensorInfo(valid, "output.weight")-5], native.StatusFormat, true,
			fmt.Sprintf("truncated: tensor info #%d needs 13 bytes at offset %d, file has %d bytes", len(g.Tensors)-1,
				tensorInfo(valid, "output.weight")-13, tensorInfo(valid, "output.weight")-5)},
		{"truncated tensor data: first", valid[:data+100], native.StatusFormat, true,
			fmt.Sprintf("truncated: tensor data of token_embd.weight ends at %d, file has %d bytes", data+len(embd.Data), data+100)},
		{"truncated tensor data: last byte", valid[:size-1], native.StatusFormat, true,
			fmt.Sprintf("truncated: tensor data of %s ends at %d, file has %d bytes", last.Name, size, size-1)},
		{"five dimensions", patch(func(b []byte) []byte {
			le.PutUint32(b[tensorInfo(b, "token_embd.weight"):], 5)
			return b
		}), native.StatusFormat, true, "tensor token_embd.weight: 5 dimensions (want 1..4)"},
		{"element count overflow", patch(func(b []byte) []byte {
			i := tensorInfo(b, "token_embd.weight")
			le.PutUint64(b[i+4:], 1<<40)
			le.PutUint64(b[i+12:], 1<<40)
			return b
		}), native.StatusFormat, true, "tensor token_embd.weight: element count overflows"},
		{"unknown tensor type", patch(func(b []byte) []byte {
			le.PutUint32(b[tensorInfo(b, "token_embd.weight")+4+16:], 99)
			return b
		}), native.StatusFormat, true, "tensor token_embd.weight: unknown type 99"},
		{"misaligned offset", patch(func(b []byte) []byte {
			le.PutUint64(b[tensorInfo(b, "output_norm.weight")+4+8+4:], 4)
			return b
		}), native.StatusFormat, true, "tensor output_norm.weight: offset 4 is not a multiple of the alignment 32"},
		{"offset beyond the file", patch(func(b []byte) []byte {
			le.PutUint64(b[tensorInfo(b, "output_norm.weight")+4+8+4:], 1<<40)
			return b
		}), native.StatusFormat, true, fmt.Sprintf("tensor output_norm.weight: offset 1099511627776 is beyond the end of the file (%d bytes)", size)},
		{"duplicate tensor", patch(func(b []byte) []byte {
			i := tensorInfo(b, "blk.0.attn_k.weight")
			copy(b[i-len("blk.0.attn_k.weight"):], "blk.0.attn_q.weight")
			return b
		}), native.StatusFormat, true, "duplicate tensor blk.0.attn_q.weight"},

		// Valid GGUF, but not a model the engine runs.
		{"missing tensor", rebuild(func(f *gguf.File) { dropTensor(f, "blk.0.ffn_up.weight") }),
			native.StatusModel, false, "tensor blk.0.ffn_up.weight: missing"},
		{"missing output_norm", rebuild(func(f *gguf.File) { dropTensor(f, "output_norm.weight") }),
			native.StatusModel, false, "tensor output_norm.weight: missing"},
		{"wrong shape", rebuild(func(f *gguf.File) {
			tn := f.Tensor("token_embd.weight")
			tn.Dims[1] = 263
			tn.Data = tn.Data[:32*263*4]
		}), native.StatusModel, false, "tensor token_embd.weight: shape [32 263] want [32 264]"},
		{"wrong rank", rebuild(func(f *gguf.File) {
			tn := f.Tensor("blk.0.ffn_norm.weight")
			tn.Dims = []uint64{8, 4}
		}), native.StatusModel, false, "tensor blk.0.ffn_norm.weight: shape [8 4] want [32]"},
		{"wrong tensor type", rebuild(func(f *gguf.File) {
			tn := f.Tensor("blk.0.attn_q.weight")
			tn.Type = gguf.I8
			tn.Data = make([]byte, 32*32)
		}), native.StatusModel, false, "tensor blk.0.attn_q.weight: type i8 is not supported (want f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, q4_K, q5_K or q6_K)"},
		{"quantized norm", rebuild(func(f *gguf.File) {
			tn := f.Tensor("blk.0.ffn_norm.weight")
			tn.Type = gguf.Q8_0
			tn.Data = make([]byte, 34)
		}), native.StatusModel, false, "tensor blk.0.ffn_norm.weight: type q8_0 is not supported for a 1-D tensor (want f32, f16 or bf16)"},
		{"missing key", rebuild(func(f *gguf.File) { delKV(f, "llama.block_count") }),
			native.StatusModel, false, "missing key llama.block_count"},
		{"missing architecture", rebuild(func(f *gguf.File) { delKV(f, "general.architecture") }),
			native.StatusModel, false, "missing key general.architecture"},
		{"wrong architecture", rebuild(func(f *gguf.File) { setKV(f, "general.architecture", "gpt2") }),
			native.StatusModel, false, `general.architecture: "gpt2" is not supported (want one of llama, qwen2, qwen3)`},
		{"architecture not a string", rebuild(func(f *gguf.File) { setKV(f, "general.architecture", uint32(1)) }),
			native.StatusModel, false, "general.architecture: type uint32, want string"},
		{"integer key of wrong type", rebuild(func(f *gguf.File) { setKV(f, "llama.block_count", "2") }),
			native.StatusModel, false, "llama.block_count: type string, want an integer"},
		{"too many layers", rebuild(func(f *gguf.File) { setKV(f, "llama.block_count", uint32(65)) }),
			native.StatusModel, false, "llama.block_count: 65 not in 1..64"},
		{"negative dim", rebuild(func(f *gguf.File) { setKV(f, "llama.embedding_length", int32(-32)) }),
			native.StatusModel, false, "llama.embedding_length: -32 not in 1..65536"},
		{"huge context", rebuild(func(f *gguf.File) { setKV(f, "llama.context_length", ^uint64(0)) }),
			native.StatusModel, false, "llama.context_length: 18446744073709551615 not in 1..1048576"},
		{"heads do not divide dim", rebuild(func(f *gguf.File) { setKV(f, "llama.attention.head_count", uint32(3)) }),
			native.StatusModel, false, "llama.attention.head_count: 3 does not divide llama.embedding_length 32"},
		{"kv heads do not divide heads", rebuild(func(f *gguf.File) {
			setKV(f, "llama.attention.head_count", uint32(4))
			setKV(f, "llama.attention.head_count_kv", uint32(3))
		}), native.StatusModel, false, "llama.attention.head_count_kv: 3 does not divide llama.attention.head_count 4"},
		{"kv heads above heads", rebuild(func(f *gguf.File) { setKV(f, "llama.attention.head_count_kv", uint32(4)) }),
			native.StatusModel, false, "llama.attention.head_count_kv: 4 not in 1..2"},
		{"odd head dim", rebuild(func(f *gguf.File) { setKV(f, "llama.attention.head_count", uint32(32)) }),
			native.StatusModel, false, "head dim 1 (llama.embedding_length / llama.attention.head_count) is odd; RoPE rotates pairs"},
		{"partial rope", rebuild(func(f *gguf.File) { setKV(f, "llama.rope.dimension_count", uint32(8)) }),
			native.StatusModel, false, "llama.rope.dimension_count: 8, want the head dim 16 (partial RoPE is not supported)"},
		{"bad epsilon", rebuild(func(f *gguf.File) { setKV(f, "llama.attention.layer_norm_rms_epsilon", float32(-1)) }),
			native.StatusModel, false, "llama.attention.layer_norm_rms_epsilon: -1 is not positive and finite"},
		{"epsilon of wrong type", rebuild(func(f *gguf.File) { setKV(f, "llama.attention.layer_norm_rms_epsilon", "1e-5") }),
			native.StatusModel, false, "llama.attention.layer_norm_rms_epsilon: type string, want a float"},
		{"infinite rope theta", rebuild(func(f *gguf.File) { setKV(f, "llama.rope.freq_base", 1e300) }),
			native.StatusModel, false, "llama.rope.freq_base: 1e+300 is not positive and finite"},
		{"vocab size mismatch", rebuild(func(f *gguf.File) { setKV(f, "llama.vocab_size", uint32(300)) }),
			native.StatusModel, false, "llama.vocab_size: 300, but tokenizer.ggml.tokens has 264 tokens"},
		{"tokens of wrong type", rebuild(func(f *gguf.File) { setKV(f, "tokenizer.ggml.tokens", []int32{1}) }),
			native.StatusModel, false, "tokenizer.ggml.tokens: array of int32, want an array of string"},
		{"tokens not an array", rebuild(func(f *gguf.File) { setKV(f, "tokenizer.ggml.tokens", "abc") }),
			native.StatusModel, false, "tokenizer.ggml.tokens: type string, want an array of string"},
		{"bos out of range", rebuild(func(f *gguf.File) { setKV(f, "tokenizer.ggml.bos_token_id", uint32(300)) }),
			native.StatusModel, false, "tokenizer.ggml.bos_token_id: 300 not in 0..263"},
		{"template not a string", rebuild(func(f *gguf.File) { setKV(f, "tokenizer.chat_template", []string{"x"}) }),
			native.StatusModel, false, "tokenizer.chat_template: type array, want string"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := native.ParseModel(c.b)
			var ne *native.Error
			if !errors.As(err, &ne) {
				t.Fatalf("got %v, want *native.Error %q", err, c.msg)
			}
			if ne.Msg != c.msg || ne.Status != c.status {
				t.Errorf("got status %d %q\nwant status %d %q", ne.Status, ne.Msg, c.status, c.msg)
			}
			_, gerr := native.ParseGGUF(c.b)
			switch {
			case c.format && (gerr == nil || gerr.Error() != "native: "+c.msg):
				t.Errorf("ParseGGUF: got %v, want %q", gerr, "native: "+c.msg)
			case !c.format && gerr != nil:
				t.Errorf("ParseGGUF rejects a valid GGUF file: %v", gerr)
			}
		})
	}
}

// nested is a GGUF file whose one metadata value is an array nested depth
// deep.
func nested(depth int) []byte {
	le := binary.LittleEndian
	b := le.AppendUint32(nil, gguf.Magic)
	b = le.AppendUint32(b, gguf.Version)
	b = le.AppendUint64(b, 0)
	b = le.AppendUint64(b, 1)
	b = le.AppendUint64(b, 4)
	b = append(b, "deep"...)
	b = le.AppendUint32(b, uint32(gguf.TypeArray))
	for i := 0; i < depth; i++ {
		b = le.AppendUint32(b, uint32(gguf.TypeArray))
		b = le.AppendUint64(b, 1)
	}
	return append(b, make([]byte, 12)...)
}

func dropTensor(f *gguf.File, name string) {
	for i := range f.Tensors {
		if f.Tensors[i].Name == name {
			f.Tensors = append(f.Tensors[:i], f.Tensors[i+1:]...)
			return
		}
	}
	panic("no tensor " + name)
}

// TestLoadEveryPrefix loads every prefix of a valid file (each byte up to
// the tensor data, then a stride and each tensor's end): each must fail
// with ParseGGUF's message, never crash; the whole file must load.
func TestLoadEveryPrefix(t *testing.T) {
	needCgo(t)
	valid := encode(t, micro, nil)
	g, err := native.ParseGGUF(valid)
	if err != nil {
		t.Fatal(err)
	}
	cuts := map[int]bool{}
	for n := 0; n <= int(g.DataOffset)+64; n++ {
		cuts[n] = true
	}
	for n := int(g.DataOffset); n < len(valid); n += 97 {
		cuts[n] = true
	}
	for _, tn := range g.Tensors {
		end := int(g.DataOffset) + int(tn.Offset) + len(tn.Data)
		cuts[end-1], cuts[end], cuts[min(end+1, len(valid))] = true, true, true
	}
	cuts[len(valid)] = true
	for n := range cuts {
		_, err := native.ParseModel(valid[:n])
		_, gerr := native.ParseGGUF(valid[:n])
		switch {
		case gerr != nil && err == nil:
			t.Errorf("prefix %d: loaded, ParseGGUF says %v", n, gerr)
		case gerr != nil && err.Error() != gerr.Error():
			t.Errorf("prefix %d: loader %q, ParseGGUF %q", n, err, gerr)
		case gerr == nil && err != nil:
			t.Errorf("prefix %d: %v (ParseGGUF accepts it)", n, err)
		}
		if n == len(valid) && err != nil {
			t.Errorf("whole file: %v", err)
		}
	}
}

// TestLoadFileErrors checks the path-prefixed messages of the file loader.
func TestLoadFileErrors(t *testing.T) {
	needCgo(t)
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.gguf")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.gguf")
	noTensor := filepath.Join(dir, "notensor.gguf")
	if err := os.WriteFile(noTensor, encode(t, micro, func(f *gguf.File) { dropTensor(f, "blk.0.attn_v.weight") }), 0o644); err != nil {
		t.Fatal(err)
	}
	f := func(path string, status native.Status, msg string) {
		t.Helper()
		_, err := native.ReadModelFile(path)
		var ne *native.Error
		if !errors.As(err, &ne) || ne.Status != status || ne.Msg != msg {
			t.Errorf("%s: got %v, want status %d %q", path, err, status, msg)
		}
	}
	f(missing, native.StatusIO, missing+": No such file or directory")
	f(dir, native.StatusIO, dir+": not a regular file")
	f(empty, native.StatusFormat, empty+": truncated: header needs 4 bytes at offset 0, file has 0 bytes")
	f(noTensor, native.StatusModel, noTensor+": tensor blk.0.attn_v.weight: missing")
	if _, err := native.LoadModelInfo(missing); err == nil {
		t.Errorf("LoadModelInfo(%s): no error", missing)
	}
}

// TestLoadTinyModel loads the tiny model make and run.sh create
// (PICOMETER_TINY_MODEL); it must exist under PICOMETER_LIVE=1.
func TestLoadTinyModel(t *testing.T) {
	needCgo(t)
	path := testenv.File(t, "tiny model (PICOMETER_TINY_MODEL; make models)", os.Getenv("PICOMETER_TINY_MODEL"))
	info, err := native.LoadModelInfo(path)
	if err != nil {
		t.Fatal(err)
	}
	if info.Name != modelgen.Tiny.Name || info.Dim != modelgen.Tiny.Dim || info.Vocab != native.VocabSize {
		t.Errorf("got %s dim %d vocab %d, want the tiny preset", info.Name, info.Dim, info.Vocab)
	}
}

// FuzzLoad feeds arbitrary bytes to the C loader and to ParseGGUF (the C
// parser and the Go decoding of what it found): neither may crash; the
// loader rejects whatever ParseGGUF rejects, and accepts only what it
// accepts; ParseGGUF never reports a bug (a value the parser accepted that
// Go cannot decode).
//
// The seeds are a hand-made two-dimensional model of about 1 KB and its
// variations: Go's fuzzer minimizes every new input it finds, which takes
// long enough on a model of a few KB to stall it (golang/go#48820).
func FuzzLoad(f *testing.F) {
	valid, err := seedModel(false).Encode()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(valid)
	f16, err := seedModel(true).Encode()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(f16)
	shape, err := seedShapeModel().Encode()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(shape)
	for _, n := range []int{0, 3, 8, 24, 40, 300, len(valid) / 2, len(valid) - 1} {
		f.Add(valid[:n])
	}
	f.Add(nested(9))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := native.ParseModel(b)
		if errors.Is(err, native.ErrNoCgo) {
			t.Skip("built without cgo")
		}
		_, gerr := native.ParseGGUF(b)
		if errors.Is(gerr, &native.Error{Status: native.StatusInternal}) {
			t.Fatal(gerr)
		}
		if err == nil && gerr != nil {
			t.Fatalf("loader accepted what ParseGGUF rejects: %v", gerr)
		}
		if gerr != nil {
			return
		}
		if err != nil {
			var ne *native.Error
			if !errors.As(err, &ne) || ne.Status != native.StatusModel && ne.Status != native.StatusFormat {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		if m.Info.Vocab < 1 || m.Info.Dim < 1 || len(m.Info.Tokens) != 0 && len(m.Info.Tokens) != m.Info.Vocab {
			t.Fatalf("loaded an inconsistent model: %+v", m.Info)
		}
	})
}

// seedModel is a minimal valid model: dim 2, one head, one layer, FFN 1,
// three tokens, tied output, alignment 8; its weights are F16 when f16.
func seedModel(f16 bool) *gguf.File {
	w := func(name string, dims []uint64, v ...float32) gguf.Tensor {
		if f16 {
			return gguf.Tensor{Name: name, Dims: dims, Type: gguf.F16, Data: gguf.Float16Bytes(v)}
		}
		return gguf.Tensor{Name: name, Dims: dims, Type: gguf.F32, Data: gguf.Float32Bytes(v)}
	}
	vec, mat, col, row := []uint64{2}, []uint64{2, 2}, []uint64{2, 1}, []uint64{1, 2}
	return &gguf.File{
		KV: []gguf.KV{
			{Key: "general.architecture", Value: "llama"},
			{Key: gguf.KeyAlignment, Value: uint32(8)},
			{Key: "llama.embedding_length", Value: uint32(2)},
			{Key: "llama.block_count", Value: uint8(1)},
			{Key: "llama.attention.head_count", Value: int32(1)},
			{Key: "llama.feed_forward_length", Value: uint64(1)},
			{Key: "llama.context_length", Value: uint16(4)},
			{Key: "llama.rope.freq_base", Value: 1e4},
			{Key: "tokenizer.ggml.tokens", Value: []string{"a", "b", "c"}},
			{Key: "tokenizer.ggml.bos_token_id", Value: uint32(0)},
			{Key: "tokenizer.chat_template", Value: "t"},
			{Key: "x", Value: []any{[]bool{true}, []int8{-1}}},
		},
		Tensors: []gguf.Tensor{
			w("token_embd.weight", []uint64{2, 3}, 1, 2, 3, 4, 5, 6),
			w("blk.0.attn_norm.weight", vec, 1, 1),
			w("blk.0.attn_q.weight", mat, 1, 0, 0, 1),
			w("blk.0.attn_k.weight", mat, 1, 0, 0, 1),
			w("blk.0.attn_v.weight", mat, 1, 0, 0, 1),
			w("blk.0.attn_output.weight", mat, 1, 0, 0, 1),
			w("blk.0.ffn_norm.weight", vec, 1, 1),
			w("blk.0.ffn_gate.weight", col, 1, 2),
			w("blk.0.ffn_up.weight", col, 2, 1),
			w("blk.0.ffn_down.weight", row, 1, 1),
			w("output_norm.weight", vec, 1, 1),
		},
	}
}

func TestSeedModelLoads(t *testing.T) {
	needCgo(t)
	for _, f16 := range []bool{false, true} {
		b, err := seedModel(f16).Encode()
		if err != nil {
			t.Fatal(err)
		}
		m, err := native.ParseModel(b)
		if err != nil {
			t.Fatalf("f16 %v: %v", f16, err)
		}
		if m.Info.Vocab != 3 || m.Info.Dim != 2 || !m.TiedOutput || m.F16 != f16 || m.Alignment != 8 || m.Info.BOS != 0 || m.Info.EOS != -1 {
			t.Errorf("f16 %v: %+v", f16, m)
		}
	}
}

// BenchmarkLoadModel loads the default model (PICOMETER_DEFAULT_MODEL, or
// one generated into a temporary directory): with mmap it should take
// milliseconds, whatever the file size.
func BenchmarkLoadModel(b *testing.B) {
	needCgo(b)
	path := os.Getenv("PICOMETER_DEFAULT_MODEL")
	if _, err := os.Stat(path); path == "" || err != nil {
		path = filepath.Join(b.TempDir(), "default.gguf")
		if err := modelgen.Write(path, modelgen.Default); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := native.LoadModelInfo(path); err != nil {
			b.Fatal(err)
		}
	}
}
