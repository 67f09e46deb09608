package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/picometer/picometer/internal/testenv"
	"github.com/picometer/picometer/tokenizer/jinja"
)

// corpusTools is the tool list the corpus conversations offer (OpenAI
// shape, key order as a client sends it).
const corpusTools = `[{"type": "function", "function": {"name": "get_weather", "description": "Get the current weather in a city.", "parameters": {"type": "object", "properties": {"location": {"type": "string", "description": "City name, e.g. Paris"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["location"]}}}]`

// corpusChat is one conversation of the corpus test.
type corpusChat struct {
	name string
	chat Chat
}

// corpusChats are the conversations every template of the corpus renders:
// one user message; system and multi-turn with unicode; tools offered; a
// tool call and its result in the history.
func corpusChats() []corpusChat {
	u := func(s string) Message { return Message{Role: "user", Content: s} }
	weather := u("What's the weather in Paris?")
	return []corpusChat{
		{"user", Chat{Messages: []Message{u("Hello! What can you do?")}, AddGenerationPrompt: true}},
		{"multi-turn", Chat{Messages: []Message{
			{Role: "system", Content: "You are a helpful assistant. Réponds brièvement."},
			u("Bonjour 👋 — 你好?"),
			{Role: "assistant", Content: "Salut! ¿Qué tal? 😊"},
			u("Écris «naïve» en majuscules."),
		}, AddGenerationPrompt: true}},
		{"tools", Chat{Messages: []Message{weather}, Tools: json.RawMessage(corpusTools), AddGenerationPrompt: true}},
		{"tool-call", Chat{Messages: []Message{
			weather,
			{Role: "assistant", ToolCalls: []ToolCall{{ID: "call00001", Type: "function", Name: "get_weather",
				Arguments: `{"location": "Paris", "unit": "celsius"}`}}},
			{Role: "tool", ToolCallID: "call00001", Content: `{"temperature": 22, "condition": "sunny"}`},
		}, Tools: json.RawMessage(corpusTools), AddGenerationPrompt: true}},
	}
}

// oracleJSON is c as the oracle gets it: what vLLM passes a template, with
// each tool call's arguments already parsed into an object.
func (c Chat) oracleJSON(bos, eos string) json.RawMessage {
	type fn struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	type call struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function fn     `json:"function"`
	}
	type msg struct {
		Role       string `json:"role"`
		Content    string `json:"content"`
		Name       string `json:"name,omitempty"`
		ToolCalls  []call `json:"tool_calls,omitempty"`
		ToolCallID string `json:"tool_call_id,omitempty"`
	}
	ms := make([]msg, len(c.Messages))
	for i, m := range c.Messages {
		ms[i] = msg{Role: m.Role, Content: m.Content, Name: m.Name, ToolCallID: m.ToolCallID}
		for _, tc := range m.ToolCalls {
			ms[i].ToolCalls = append(ms[i].ToolCalls, call{tc.ID, tc.Type, fn{tc.Name, json.RawMessage(tc.Arguments)}})
		}
	}
	v := struct {
		Messages            []msg           `json:"messages"`
		Tools               json.RawMessage `json:"tools"`
		AddGenerationPrompt bool            `json:"add_generation_prompt"`
		BOS                 string          `json:"bos_token"`
		EOS                 string          `json:"eos_token"`
	}{ms, c.Tools, c.AddGenerationPrompt, bos, eos}
	b, err := json.Marshal(v)
	if err != nil {
		panic("BUG: " + err.Error())
	}
	return b
}

// knownDifferences are the (template, conversation) pairs where
// picometer's rendering and @huggingface/jinja's are known to differ, with
// the reason. The test fails on any other difference, and on an entry
// that no longer differs.
var knownDifferences = map[string]string{
	// {% set _ = ids.append(x) %}: Hugging Face has no list methods and
	// transformers' immutable sandbox refuses append; we render the call
	// the template makes (llama.cpp's minja does too).
	"Kimi-K2-Instruct/tool-call": "list.append: both references raise, we render",
	"Kimi-K2-Thinking/tool-call": "list.append: both references raise, we render",
}

type corpusResult struct {
	Out string `json:"out"`
	Err string `json:"err"`
}

// runCorpusOracle runs an oracle script on the corpus input.
func runCorpusOracle(t *testing.T, cmd *exec.Cmd, in []byte, n int) [][]corpusResult {
	t.Helper()
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, stderr.String())
	}
	var o struct{ Results [][]corpusResult }
	if err := json.Unmarshal(out, &o); err != nil || len(o.Results) != n {
		t.Fatalf("%s: %d results, %v", strings.Join(cmd.Args, " "), len(o.Results), err)
	}
	return o.Results
}

// pythonJinja returns python3 when it has jinja2 (Debian's python3-jinja2),
// else "" (a failure under PICOMETER_LIVE=1).
func pythonJinja(t *testing.T) string {
	py, err := exec.LookPath("python3")
	if err == nil {
		err = exec.Command(py, "-c", "import jinja2").Run()
	}
	if err != nil {
		testenv.Missing(t, "python3 with jinja2 (make deps installs python3-jinja2): %v", err)
		return ""
	}
	return py
}

// TestTemplateCorpus renders every chat template of llama.cpp's corpus
// (build/llama.cpp/models/templates, from scripts/pypi.sh) on the corpus
// conversations in-process, with @huggingface/jinja (the reference) and
// with Python Jinja2 as transformers configures it (what vLLM renders
// with), and compares: byte-identical wherever Hugging Face renders, an
// error wherever it raises, except where Hugging Face raises for a
// feature it lacks and Jinja2 renders: there, byte-identical with Jinja2.
func TestTemplateCorpus(t *testing.T) {
	root, err := testenv.Root()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "build", "llama.cpp", "models", "templates")
	paths, _ := filepath.Glob(filepath.Join(dir, "*.jinja"))
	if len(paths) == 0 {
		testenv.Missing(t, "no chat templates in %s (make deps runs scripts/pypi.sh)", dir)
		return
	}
	node := testenv.Node(t)
	testenv.NPMPackage(t, "@huggingface/jinja")
	py := pythonJinja(t)
	const bos, eos = "<s>", "</s>"
	chats := corpusChats()
	now := time.Now().UTC().Truncate(time.Second)
	type tplIn struct {
		Name   string `json:"name"`
		Source string `json:"source"`
	}
	var in struct {
		Templates []tplIn           `json:"templates"`
		Chats     []json.RawMessage `json:"chats"`
	}
	for _, p := range paths {
		src, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		in.Templates = append(in.Templates, tplIn{strings.TrimSuffix(filepath.Base(p), ".jinja"), string(src)})
	}
	for _, c := range chats {
		in.Chats = append(in.Chats, c.chat.oracleJSON(bos, eos))
	}
	body, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, "testdata/jinja_corpus.cjs")
	cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(testenv.NPMDir(), "node_modules"), "TZ=UTC")
	hf := runCorpusOracle(t, cmd, body, len(in.Templates))
	var pyRes [][]corpusResult
	if py != "" {
		cmd := exec.Command(py, "testdata/jinja_corpus.py")
		cmd.Env = append(os.Environ(), fmt.Sprintf("PICOMETER_NOW=%d", now.Unix()))
		pyRes = runCorpusOracle(t, cmd, body, len(in.Templates))
	}
	if now.Format("2006-01-02") != time.Now().UTC().Format("2006-01-02") {
		t.Skip("the date changed while the oracle ran (strftime_now)")
	}

	var table strings.Builder
	fmt.Fprintf(&table, "| template | %s |\n|---|%s\n", joinNames(chats), strings.Repeat("---|", len(chats)))
	counts := map[string]int{}
	allSame := 0
	for i, tin := range in.Templates {
		tpl := NewTemplate(tin.Source, bos, eos)
		var cells []string
		rowSame := true
		for j, c := range chats {
			c.chat.Now = now
			got, err := tpl.RenderChat(c.chat)
			ref := hf[i][j]
			var pyr *corpusResult
			if pyRes != nil {
				pyr = &pyRes[i][j]
			}
			key := tin.Name + "/" + c.name
			cell, why := classify(got, err, ref, pyr)
			counts[cell]++
			if cell == "identical" && pyr != nil {
				if pyr.Err == "" && pyr.Out == got {
					counts["jinja2 too"]++
				} else if pyr.Err != "" {
					t.Logf("%s: identical to Hugging Face; Jinja2 raises %s", key, pyr.Err)
				} else {
					i := firstDiff(got, pyr.Out)
					t.Logf("%s: identical to Hugging Face; Jinja2 differs at byte %d: %q", key, i, clip(pyr.Out, i))
				}
			}
			if cell == "differs" {
				rowSame = false
			}
			known, isKnown := knownDifferences[key]
			switch {
			case cell == "differs" && !isKnown:
				t.Errorf("%s: %s", key, why)
			case cell != "differs" && isKnown:
				t.Errorf("%s: listed in knownDifferences (%s) but %s now", key, known, cell)
			case why != "" && cell != "differs":
				t.Logf("%s: %s", key, why)
			}
			cells = append(cells, cell)
		}
		if rowSame {
			allSame++
		}
		fmt.Fprintf(&table, "| %s | %s |\n", tin.Name, strings.Join(cells, " | "))
	}
	t.Logf("per template:\n%s", table.String())
	testenv.Report(t, "chat template corpus: %d templates × %d conversations against @huggingface/jinja (and Python Jinja2 where it raises): %d identical (%d of them identical to Jinja2 too), %d both error, %d identical to Jinja2 where Hugging Face raises, %d differ (%d known); %d templates without a difference",
		len(in.Templates), len(chats), counts["identical"], counts["jinja2 too"], counts["both error"], counts["= Jinja2 (HF raises)"], counts["differs"], len(knownDifferences), allSame)
}

// classify compares our rendering (got, err) with Hugging Face's (hf) and,
// where that raises, with Jinja2's (py, nil when not run).
func classify(got string, err error, hf corpusResult, py *corpusResult) (cell, why string) {
	diff := func(want string) string {
		i := firstDiff(got, want)
		return fmt.Sprintf("output differs at byte %d:\n got %q\nwant %q", i, clip(got, i), clip(want, i))
	}
	switch {
	case hf.Err == "" && err == nil && got == hf.Out:
		return "identical", ""
	case hf.Err == "" && err != nil:
		if py != nil {
			return "differs", fmt.Sprintf("we fail (%v), Hugging Face renders, Jinja2: %q", err, py.Err)
		}
		return "differs", fmt.Sprintf("we fail (%v), Hugging Face renders", err)
	case hf.Err == "":
		return "differs", diff(hf.Out)
	case py != nil && py.Err == "":
		switch {
		case err == nil && got == py.Out:
			return "= Jinja2 (HF raises)", fmt.Sprintf("Hugging Face raises (%s); Jinja2 renders as we do", hf.Err)
		case err != nil:
			return "differs", fmt.Sprintf("we fail (%v); Hugging Face fails (%s) but Jinja2 renders", err, hf.Err)
		}
		return "differs", fmt.Sprintf("Hugging Face fails (%s); Jinja2 renders: %s", hf.Err, diff(py.Out))
	case err != nil:
		var r *jinja.Raised
		if errors.As(err, &r) && !strings.Contains(hf.Err, r.Message) {
			return "both error", fmt.Sprintf("both raise, messages differ: we %q, Hugging Face %q", r.Message, hf.Err)
		}
		return "both error", ""
	}
	if py != nil {
		return "differs", fmt.Sprintf("Hugging Face fails (%s), Jinja2 fails (%s), we render", hf.Err, py.Err)
	}
	return "differs", fmt.Sprintf("Hugging Face fails (%s), we render", hf.Err)
}

func joinNames(cs []corpusChat) string {
	var names []string
	for _, c := range cs {
		names = append(names, c.name)
	}
	return strings.Join(names, " | ")
}

func firstDiff(a, b string) int {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	return i
}

// clip returns the part of s around byte i.
func clip(s string, i int) string {
	lo, hi := max(0, i-80), min(len(s), i+80)
	return s[lo:hi]
}
