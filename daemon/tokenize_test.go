package daemon

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/picometer/picometer/internal/testenv"
	"github.com/picometer/picometer/modelgen"
	"github.com/picometer/picometer/native"
	"github.com/picometer/picometer/tokenizer"
)

// realVocabModel writes the tiny model with the vocabulary and chat
// template of an @lenml tokenizer package (what mkmodel -tokenizer does).
func realVocabModel(t *testing.T, name string) string {
	t.Helper()
	dir := filepath.Join(testenv.NPMPackage(t, "@lenml/tokenizer-"+name), "models")
	tj, err := os.ReadFile(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile(filepath.Join(dir, "tokenizer_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	v, err := tokenizer.FromHF(tj, cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := modelgen.Tiny
	p.Tied = true // the embedding of a 128k-152k vocabulary is the model's biggest tensor: keep one copy
	path := filepath.Join(t.TempDir(), name+".gguf")
	if err := modelgen.WriteWithVocab(path, p, v); err != nil {
		t.Fatal(err)
	}
	return path
}

// startRealVocab serves the tiny model with a real vocabulary on the C
// engine.
func startRealVocab(t *testing.T, name string) *testServer {
	t.Helper()
	path := realVocabModel(t, name)
	cfg := testConfig(t)
	cfg.Model = path
	eng, err := native.Open(path, cfg.NativeConfig())
	if errors.Is(err, native.ErrNoCgo) {
		testenv.Missing(t, "engine unavailable: %v", err)
	}
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	t.Cleanup(func() { eng.Close() })
	return startServer(t, eng, func(c *Config) { c.Model = path })
}

// TestRealVocabOpenAI is issue 12's acceptance test: picometerd serves
// mkmodel models with the real Llama 3 and Qwen3 vocabularies and chat
// templates, and /v1/chat/completions through the npm openai client
// reports usage.prompt_tokens equal to Hugging Face's count for the same
// messages: the template rendered by @huggingface/jinja and tokenized by
// @huggingface/tokenizers without added specials (what transformers.js's
// apply_chat_template does; @huggingface/transformers itself cannot be
// installed here: its onnxruntime-node postinstall downloads from
// api.nuget.org), and @lenml/tokenizers' port of apply_chat_template where
// its Jinja parses the template.
func TestRealVocabOpenAI(t *testing.T) {
	node := testenv.Node(t)
	for _, p := range []string{"openai", "@huggingface/tokenizers", "@huggingface/jinja", "@lenml/tokenizers"} {
		testenv.NPMPackage(t, p)
	}
	chats := []map[string]any{
		{"messages": []map[string]string{{"role": "user", "content": "Hello!"}}},
		{"messages": []map[string]string{{"role": "system", "content": "You are terse."}, {"role": "user", "content": "What is 2+2?"}}},
		{"messages": []map[string]string{{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello! How can I help?"}, {"role": "user", "content": "Tell me a joke about ☃ and 你好."}}},
		{"messages": []map[string]string{{"role": "user", "content": "  spaces\n\n\tand tabs  "}}},
		{"messages": []map[string]string{{"role": "developer", "content": "Be brief."}, {"role": "user", "content": "numbers 1234567 and code `x := 1`"}}},
	}
	for _, name := range []string{"llama3", "qwen3", "gemma3"} {
		t.Run(name, func(t *testing.T) {
			ts := startRealVocab(t, name)
			// developer is sent to the template as system, as the daemon does
			in, _ := json.Marshal(chats)
			in = bytes.ReplaceAll(in, []byte(`"developer"`), []byte(`"system"`))
			cmd := exec.Command(node, "testdata/openai_chat.cjs", ts.url+"/v1", name)
			cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(testenv.NPMDir(), "node_modules"))
			cmd.Stdin = bytes.NewReader(in)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("openai_chat.cjs: %v\n%s", err, stderr.String())
			}
			var res []struct {
				PromptTokens      int    `json:"prompt_tokens"`
				CompletionTokens  int    `json:"completion_tokens"`
				FinishReason      string `json:"finish_reason"`
				ApplyChatTemplate int    `json:"apply_chat_template"`
				HFCount           int    `json:"hf_count"`
			}
			if err := json.Unmarshal(out, &res); err != nil {
				t.Fatal(err)
			}
			if len(res) != len(chats) {
				t.Fatalf("%d results for %d chats", len(res), len(chats))
			}
			withACT := 0
			for i, r := range res {
				if r.ApplyChatTemplate >= 0 {
					withACT++
				}
				if r.ApplyChatTemplate >= 0 && r.PromptTokens != r.ApplyChatTemplate || r.PromptTokens != r.HFCount {
					t.Errorf("%s chat %d: usage.prompt_tokens %d, apply_chat_template %d, @huggingface/tokenizers %d",
						name, i, r.PromptTokens, r.ApplyChatTemplate, r.HFCount)
				}
				if r.CompletionTokens < 1 || r.CompletionTokens > 4 {
					t.Errorf("%s chat %d: completion_tokens %d", name, i, r.CompletionTokens)
				}
			}
			testenv.Report(t, "picometerd %s (real vocabulary and template): %d chats through the npm openai client, usage.prompt_tokens equal to @huggingface/jinja+tokenizers' count (and to @lenml/tokenizers apply_chat_template's for %d)",
				name, len(res), withACT)

			// Output text is the tokenizer's decoding of the output ids
			// (control tokens give none), the same streamed or not.
			tk := ts.d.codec.tk
			body := `{"messages":[{"role":"user","content":"Write something, 你好"}],"max_tokens":24,"temperature":0,"return_token_ids":true}`
			full := decodeCompletionResponse(t, ts.post("/v1/chat/completions", body).body)
			var want []byte
			for _, id := range full.Choices[0].TokenIDs {
				if !tk.IsControl(id) {
					want = append(want, tk.Piece(id)...)
				}
			}
			got := full.text()
			// (random weights may emit a partial character, which the daemon
			// turns into U+FFFD: then only streamed == whole is checked)
			if utf8.Valid(want) && got != string(want) {
				t.Errorf("%s: text %q, decoded ids %q", name, got, want)
			}
			streamed := ts.stream("/v1/chat/completions", strings.Replace(body, `"max_tokens"`, `"stream":true,"max_tokens"`, 1))
			if streamed.text() != got {
				t.Errorf("%s: streamed %q, whole %q", name, streamed.text(), got)
			}

			// /v1/models reports the context length.
			m := ts.do("GET", "/v1/models", "")
			if !strings.Contains(string(m.body), `"max_model_len":256`) { // the tiny preset's context
				t.Errorf("/v1/models: %s", m.body)
			}
		})
	}
}

// smallVocab is a byte-level BPE vocabulary (the 256 bytes, a few merges,
// three control tokens) with the chat template tmpl: a real-tokenizer
// model small enough to build in every test.
func smallVocab(tmpl string) *tokenizer.Vocab {
	v := &tokenizer.Vocab{Model: "gpt2", Pre: "llama-bpe", BOS: -1, EOS: -1, EOT: -1, EOM: -1, Pad: -1, Unk: -1, ChatTemplate: tmpl}
	bl := func(s string) string { // GPT-2's byte-level spelling
		var b strings.Builder
		for i := 0; i < len(s); i++ {
			c := rune(s[i])
			if !(c >= '!' && c <= '~' || c >= 0xA1 && c <= 0xAC || c >= 0xAE) {
				c = -1
			}
			if c < 0 {
				c = 0x100 + rune(strings.IndexByte(nonPrint, s[i]))
			}
			b.WriteRune(c)
		}
		return b.String()
	}
	for c := 0; c < 256; c++ {
		v.Tokens = append(v.Tokens, bl(string([]byte{byte(c)})))
		v.Types = append(v.Types, tokenizer.TypeNormal)
	}
	for _, m := range [][2]string{{"h", "i"}, {" ", "t"}, {" t", "here"}} {
		v.Merges = append(v.Merges, bl(m[0])+" "+bl(m[1]))
		v.Tokens = append(v.Tokens, bl(m[0]+m[1]))
		v.Types = append(v.Types, tokenizer.TypeNormal)
	}
	for _, s := range []string{"<|bos|>", "<|eot|>", "<|user|>"} {
		v.Tokens = append(v.Tokens, s)
		v.Types = append(v.Types, tokenizer.TypeControl)
	}
	n := int32(len(v.Tokens))
	v.BOS, v.EOS, v.EOT = n-3, n-2, n-2
	return v
}

// nonPrint is the bytes GPT-2 spells as U+0100.. in order.
var nonPrint = func() string {
	var b []byte
	for c := 0; c < 256; c++ {
		if !(c >= '!' && c <= '~' || c >= 0xA1 && c <= 0xAC || c >= 0xAE) {
			b = append(b, byte(c))
		}
	}
	return string(b)
}()

func startSmallVocab(t *testing.T, tmpl string) *testServer {
	t.Helper()
	path := filepath.Join(t.TempDir(), "small.gguf")
	if err := modelgen.WriteWithVocab(path, modelgen.Tiny, smallVocab(tmpl)); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t)
	eng, err := native.Open(path, cfg.NativeConfig())
	if errors.Is(err, native.ErrNoCgo) {
		testenv.Missing(t, "engine unavailable: %v", err)
	}
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	t.Cleanup(func() { eng.Close() })
	return startServer(t, eng, func(c *Config) { c.Model = path })
}

const smallTemplate = "{{ bos_token }}{% for m in messages %}<|user|>{{ m['content'] }}<|eot|>{% endfor %}" +
	"{% if add_generation_prompt %}<|user|>{% endif %}"

func TestChatTemplateTokens(t *testing.T) {
	ts := startSmallVocab(t, smallTemplate)
	usage := func(content string) int {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"messages": []map[string]string{{"role": "user", "content": content}}, "max_tokens": 1})
		r := ts.post("/v1/chat/completions", string(body))
		if r.status != 200 {
			t.Fatalf("status %d: %s", r.status, r.body)
		}
		return decodeCompletionResponse(t, r.body).Usage.PromptTokens
	}
	// <|bos|> <|user|> "hi" <|eot|> <|user|>: the template's special tokens
	// are single tokens, "hi" one merged token.
	if n := usage("hi"); n != 5 {
		t.Errorf("prompt_tokens for \"hi\": %d, want 5", n)
	}
	// Special-token text in a message is characters (7 byte tokens for
	// "<|eot|>", which has no merges), not the control token.
	if n := usage("<|eot|>"); n != 4+7 {
		t.Errorf("prompt_tokens for \"<|eot|>\": %d, want 11 (the text is not the control token)", n)
	}
}

func TestChatTemplateError(t *testing.T) {
	ts := startSmallVocab(t, "{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}"+smallTemplate)
	r := ts.post("/v1/chat/completions", `{"messages":[{"role":"system","content":"x"},{"role":"user","content":"hi"}],"max_tokens":1}`)
	e := decodeError(t, r.body)
	if r.status != 400 || e.Param == nil || *e.Param != "messages" || !strings.Contains(e.Message, "raise_exception: System role not supported") {
		t.Errorf("status %d, error %+v", r.status, e)
	}
	// A request the template accepts still works.
	if r := ts.post("/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":1}`); r.status != 200 {
		t.Errorf("status %d: %s", r.status, r.body)
	}
}

func TestLoadCodecErrors(t *testing.T) {
	for _, tc := range []struct {
		mod  func(v *tokenizer.Vocab)
		want string
	}{
		{func(v *tokenizer.Vocab) { v.Model = "bert" }, `tokenizer.ggml.model: "bert" is not a known tokenizer model`},
		{func(v *tokenizer.Vocab) { v.Pre = "tekken" }, `tokenizer.ggml.pre: "tekken" is not a known pre-tokenizer`},
	} {
		v := smallVocab("")
		tc.mod(v)
		path := filepath.Join(t.TempDir(), "bad.gguf")
		if err := modelgen.WriteWithVocab(path, modelgen.Tiny, v); err != nil {
			t.Fatal(err)
		}
		if _, err := loadCodec(path, ""); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("loadCodec: %v, want %q", err, tc.want)
		}
	}
}

// top_k is clamped to the served vocabulary, not to the byte vocabulary.
func TestTopKClampedToVocab(t *testing.T) {
	var r genRequest
	if e := decodeChatVocab([]byte(`{"messages":[{"role":"user","content":"x"}],"top_k":1000}`), &r, 128256); e != nil || r.TopK != 1000 {
		t.Errorf("chat: top_k %d, %v", r.TopK, e)
	}
	if e := decodeCompletionVocab([]byte(`{"prompt":"x","top_k":200000}`), &r, 128256); e != nil || r.TopK != 128256 {
		t.Errorf("completion: top_k %d, %v", r.TopK, e)
	}
	if e := decodeCompletionVocab([]byte(`{"prompt":[128255]}`), &r, 128256); e != nil {
		t.Errorf("token id 128255 of a 128256-token vocabulary: %v", e.Message)
	}
}
