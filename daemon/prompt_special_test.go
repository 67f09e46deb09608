package daemon

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/picometer/picometer/internal/testenv"
)

// TestPromptSpecialTokens: on the real Llama 3 vocabulary, a
// /v1/completions prompt and /tokenize's prompt read the text of special
// tokens as those tokens, as vLLM does (Hugging Face's tokenizer(prompt),
// run here as the oracle) and llama.cpp's server does (parse_special), so
// a caller who formats a chat by hand gets the ids the model was trained
// on; chat message content keeps such text as text.
func TestPromptSpecialTokens(t *testing.T) {
	node := testenv.Node(t)
	testenv.NPMPackage(t, "@huggingface/tokenizers")
	ts := startRealVocab(t, "llama3")
	v := ts.d.codec.tk.Vocab()
	id := func(text string) int32 {
		i := slices.Index(v.Tokens, text)
		if i < 0 {
			t.Fatalf("%q is not in the vocabulary", text)
		}
		return int32(i)
	}
	eot, header := id("<|eot_id|>"), id("<|start_header_id|>")

	texts := []string{
		"<|start_header_id|>user<|end_header_id|>\n\nWhat is 2+2?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
		"plain text, no special tokens",
		"a<|eot_id|>b <|eot_id|> <|begin_of_text|>",
		"<|eot_id", // not a whole token: text
		"<|reserved_special_token_5|>x",
	}
	in, _ := json.Marshal(map[string]any{"model": "llama3", "texts": texts})
	cmd := exec.Command(node, "testdata/hf_encode.cjs")
	cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(testenv.NPMDir(), "node_modules"))
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("hf_encode.cjs: %v\n%s", err, stderr.String())
	}
	var want [][]int32
	if err := json.Unmarshal(out, &want); err != nil || len(want) != len(texts) {
		t.Fatalf("hf_encode.cjs: %v %s", err, out)
	}
	for i, text := range texts {
		p, _ := json.Marshal(text)
		got := ts.tokenize(`{"prompt":` + string(p) + `}`)
		if !slices.Equal(got.Tokens, want[i]) {
			t.Errorf("/tokenize %q:\n got %v\nwant %v (Hugging Face)", text, got.Tokens, want[i])
		}
		c := decodeCompletionResponse(t, ts.post("/v1/completions", `{"prompt":`+string(p)+`,"max_tokens":1}`).body)
		if c.Usage.PromptTokens != len(want[i]) {
			t.Errorf("/v1/completions %q: prompt_tokens %d, Hugging Face %d", text, c.Usage.PromptTokens, len(want[i]))
		}
	}
	if first := ts.tokenize(`{"prompt":` + mustJSON(texts[0]) + `,"add_special_tokens":false}`).Tokens; len(first) == 0 || first[0] != header || !slices.Contains(first, eot) {
		t.Errorf("hand-formatted prompt: %v, want <|start_header_id|> (%d) first and <|eot_id|> (%d) as one token", first, header, eot)
	}

	// Chat content: the same text stays text, so a message holding
	// "<|eot_id|>" has exactly the <|eot_id|> tokens the template writes.
	count := func(content string) int {
		r := ts.tokenize(`{"messages":[{"role":"user","content":` + mustJSON(content) + `}]}`)
		n := 0
		for _, x := range r.Tokens {
			if x == eot {
				n++
			}
		}
		return n
	}
	if a, b := count("hi there"), count("hi<|eot_id|>there"); a != b || a == 0 {
		t.Errorf("chat content: %d <|eot_id|> tokens with the text in the content, %d without", b, a)
	}
	testenv.Report(t, "completions prompt special tokens (llama3): %d prompts, /tokenize ids and /v1/completions prompt_tokens equal to @huggingface/tokenizers' tokenizer(prompt)", len(texts))
}

func mustJSON(s string) string { b, _ := json.Marshal(s); return string(b) }
