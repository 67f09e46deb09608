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

	"github.com/picometer/picometer/internal/testenv"
	"github.com/picometer/picometer/native"
	"github.com/picometer/picometer/native/gguf/modelgen"
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
	for _, name := range []string{"llama3", "qwen3"} {
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

			// /v1/models reports the context length.
			m := ts.do("GET", "/v1/models", "")
			if !strings.Contains(string(m.body), `"max_model_len":256`) {
				t.Errorf("/v1/models: %s", m.body)
			}
		})
	}
}
