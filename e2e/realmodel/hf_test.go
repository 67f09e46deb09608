package realmodel

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/picometer/picometer/internal/testenv"
)

// hfPython is the venv's python that has transformers and tokenizers
// (scripts/hfvenv.sh): PICOMETER_HF_PYTHON, else build/pyvenv/bin/python.
func hfPython(tb testing.TB) string {
	tb.Helper()
	p := os.Getenv("PICOMETER_HF_PYTHON")
	if p == "" {
		p = repoPath(tb, "build", "pyvenv", "bin", "python")
	}
	return testenv.File(tb, "the Hugging Face oracle's python (PICOMETER_HF_PYTHON; make deps runs scripts/hfvenv.sh)", p)
}

// hfCounts is what testdata/hf_oracle.py answers.
type hfCounts struct {
	ChatTokens []int             `json:"chat_tokens"`
	TextTokens []int             `json:"text_tokens"`
	Versions   map[string]string `json:"versions"`
}

func hfOracle(tb testing.TB, model string, chats [][]message, texts []string) hfCounts {
	tb.Helper()
	in, _ := json.Marshal(map[string]any{"model": model, "chats": chats, "texts": texts})
	cmd := exec.Command(hfPython(tb), "testdata/hf_oracle.py")
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		tb.Fatalf("hf_oracle.py: %v\n%s", err, stderr.Bytes())
	}
	var c hfCounts
	if err := json.Unmarshal(out, &c); err != nil {
		tb.Fatalf("hf_oracle.py answered %q: %v", out, err)
	}
	if len(c.ChatTokens) != len(chats) || len(c.TextTokens) != len(texts) {
		tb.Fatalf("hf_oracle.py answered %d/%d counts for %d/%d inputs", len(c.ChatTokens), len(c.TextTokens), len(chats), len(texts))
	}
	return c
}

// completion sends a raw-text greedy completion of max 1 token and returns
// usage.prompt_tokens.
func completionPromptTokens(c *http.Client, addr, text string) (int, error) {
	body, _ := json.Marshal(map[string]any{"prompt": text, "max_tokens": 1, "temperature": 0})
	resp, err := c.Post("http://"+addr+"/v1/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var r struct {
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return r.Usage.PromptTokens, json.NewDecoder(resp.Body).Decode(&r)
}

// TestLiveRealUsageVsHF holds picometerd's usage counts to Hugging Face's on
// the trained model:
//   - chat: usage.prompt_tokens equals the token count of transformers'
//     apply_chat_template rendering (the GGUF's own template, generation
//     prompt added); usage.completion_tokens equals the count of the answer's
//     text, plus the <|im_end|> that ended it when finish_reason is "stop";
//   - raw completions: usage.prompt_tokens of text (multilingual, code,
//     whitespace runs, digits, emoji) equals its token count. A special
//     token's text in a raw prompt is that special token, for picometer
//     (daemon/doc.go) as for Hugging Face, vLLM and llama-server (6 tokens,
//     not 18, for "<|im_start|>user\nHi<|im_end|>\n").
func TestLiveRealUsageVsHF(t *testing.T) {
	if testing.Short() {
		t.Skip("short: starts picometerd on the 98 MB model and the HF oracle")
	}
	prompts := readPrompts(t)
	texts := []string{
		"The capital of France is Paris.",
		"  leading spaces,\ttabs\tand\n\nnewlines\r\n",
		"Numbers 1234567890 and 3.14159, 1,000,000.",
		"Ünïcödé: naïve café, 日本語のテキスト, Здравствуйте, 🙂👍🏽",
		"def f(x):\n    return {'a': [x**2 for _ in range(3)]}\n",
		"<|im_start|>user\nHi<|im_end|>\n",
		"don't won't I'll we've THEY'RE",
	}
	model := realModel(t)
	d := startDaemon(t)
	c := &http.Client{Timeout: 2 * time.Minute}

	var chats [][]message
	answers := make([]chatResult, len(prompts))
	for i, p := range prompts {
		chats = append(chats, p.Messages)
		r, err := chat(c, d.addr, p.Messages, p.MaxTokens)
		if err != nil {
			t.Fatalf("%s: %v", p.Name, err)
		}
		answers[i] = r
	}
	var answerTexts []string
	for _, a := range answers {
		answerTexts = append(answerTexts, a.Content)
	}
	hf := hfOracle(t, model, chats, append(answerTexts, texts...))
	compared := 0
	for i, p := range prompts {
		if got, want := answers[i].PromptTokens, hf.ChatTokens[i]; got != want {
			t.Errorf("%s: usage.prompt_tokens %d, Hugging Face's chat template and tokenizer %d", p.Name, got, want)
		}
		want := hf.TextTokens[i]
		if answers[i].FinishReason == "stop" {
			want++ // the <|im_end|> that stopped it is a generated token
		}
		if got := answers[i].CompletionTokens; got != want {
			t.Errorf("%s: usage.completion_tokens %d, Hugging Face counts %d for %q (finish %s)", p.Name, got, want, answers[i].Content, answers[i].FinishReason)
		}
		compared += 2
	}
	for i, text := range texts {
		got, err := completionPromptTokens(c, d.addr, text)
		if err != nil {
			t.Fatalf("completion %q: %v", text, err)
		}
		if want := hf.TextTokens[len(prompts)+i]; got != want {
			t.Errorf("completion %q: usage.prompt_tokens %d, Hugging Face's tokenizer %d", text, got, want)
		}
		compared++
	}
	testenv.Report(t, "realmodel: %d usage counts equal Hugging Face's (transformers %s, tokenizers %s, jinja2 %s)",
		compared, hf.Versions["transformers"], hf.Versions["tokenizers"], hf.Versions["jinja2"])
}
