package daemon

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/picometer/picometer/native"
)

type tokenizeJSON struct {
	Count       int      `json:"count"`
	MaxModelLen int      `json:"max_model_len"`
	Tokens      []int32  `json:"tokens"`
	TokenStrs   []string `json:"token_strs"`
}

func (ts *testServer) tokenize(body string) tokenizeJSON {
	ts.t.Helper()
	r := ts.post("/tokenize", body)
	var out tokenizeJSON
	if err := json.Unmarshal(r.body, &out); r.status != 200 || err != nil || out.Count != len(out.Tokens) {
		ts.t.Fatalf("/tokenize %s: %d %s", body, r.status, r.body)
	}
	return out
}

func (ts *testServer) detokenize(body string) string {
	ts.t.Helper()
	r := ts.post("/detokenize", body)
	var out struct {
		Prompt *string `json:"prompt"`
	}
	if err := json.Unmarshal(r.body, &out); r.status != 200 || err != nil || out.Prompt == nil {
		ts.t.Fatalf("/detokenize %s: %d %s", body, r.status, r.body)
	}
	return *out.Prompt
}

// TestTokenizeEndpoints: vLLM's /tokenize and /detokenize on picometer's
// byte vocabulary; the defaults count what the generation endpoints report
// as usage.prompt_tokens.
func TestTokenizeEndpoints(t *testing.T) {
	ts := startServer(t, newFakeEngine(256), nil)
	got := ts.tokenize(`{"prompt":"hi"}`)
	if !slices.Equal(got.Tokens, []int32{native.TokBOS, 'h', 'i'}) || got.MaxModelLen != 256 || got.TokenStrs != nil {
		t.Errorf("prompt: %+v", got)
	}
	got = ts.tokenize(`{"model":"fake-model","prompt":"hi","add_special_tokens":false,"return_token_strs":true}`)
	if !slices.Equal(got.Tokens, []int32{'h', 'i'}) || !slices.Equal(got.TokenStrs, []string{"<0x68>", "<0x69>"}) {
		t.Errorf("prompt without specials: %+v", got)
	}
	c := decodeCompletionResponse(t, ts.post("/v1/completions", `{"prompt":"héllo","max_tokens":1}`).body)
	if got := ts.tokenize(`{"prompt":"héllo"}`); got.Count != c.Usage.PromptTokens {
		t.Errorf("/tokenize counts %d, /v1/completions %d", got.Count, c.Usage.PromptTokens)
	}

	msgs := `"messages":[{"role":"system","content":"S"},{"role":"user","content":"hi"}]`
	chat := decodeCompletionResponse(t, ts.post("/v1/chat/completions", `{`+msgs+`,"max_tokens":1}`).body)
	want := renderChat(nil, []chatMessage{{Role: "system", Content: "S"}, {Role: "user", Content: "hi"}})
	got = ts.tokenize(`{` + msgs + `,"return_token_strs":true}`)
	if !slices.Equal(got.Tokens, want) || got.Count != chat.Usage.PromptTokens || got.TokenStrs[0] != "<|bos|>" || got.TokenStrs[len(want)-1] != "<|assistant|>" {
		t.Errorf("chat: %+v, want %v (chat usage %d)", got, want, chat.Usage.PromptTokens)
	}
	if got := ts.tokenize(`{` + msgs + `,"add_generation_prompt":false}`); !slices.Equal(got.Tokens, want[:len(want)-1]) {
		t.Errorf("chat without the generation prompt: %v", got.Tokens)
	}

	if s := ts.detokenize(`{"tokens":[256,104,105,255,262]}`); s != "<|bos|>hi\uFFFD<|end|>" {
		t.Errorf("detokenize %q", s)
	}
	if s := ts.detokenize(`{"tokens":[]}`); s != "" {
		t.Errorf("detokenize [] %q", s)
	}

	f := func(path, body string, status int, param string) {
		t.Helper()
		r := ts.post(path, body)
		e := decodeError(t, r.body)
		p := ""
		if e.Param != nil {
			p = *e.Param
		}
		if r.status != status || p != param {
			t.Errorf("%s %s: %d %s, want %d param %q", path, body, r.status, r.body, status, param)
		}
	}
	f("/tokenize", `{}`, 400, "prompt")
	f("/tokenize", `{"prompt":1}`, 400, "prompt")
	f("/tokenize", `{"prompt":"a","messages":[]}`, 400, "prompt")
	f("/tokenize", `{"messages":[{"role":"tool","content":"x"}]}`, 400, "messages[0].tool_call_id")
	f("/tokenize", `{"messages":[{"role":"function","content":"x"}]}`, 400, "messages[0].role")
	f("/tokenize", `{"messages":[{"role":"user","content":"x"}],"continue_final_message":true}`, 400, "continue_final_message")
	f("/tokenize", `{"messages":[{"role":"user","content":"x"}],"chat_template":"{{x}}"}`, 400, "chat_template")
	f("/tokenize", `{"prompt":"a","model":"other"}`, 404, "model")
	f("/detokenize", `{}`, 400, "tokens")
	f("/detokenize", `{"tokens":[264]}`, 400, "tokens")
	f("/detokenize", `{"tokens":[-1]}`, 400, "tokens")
	f("/detokenize", `{"tokens":["a"]}`, 400, "tokens")
	f("/detokenize", `{"tokens":[1],"model":"other"}`, 404, "model")
	if r := ts.do("GET", "/tokenize", ""); r.status != 405 || r.header.Get("Allow") != "POST" {
		t.Errorf("GET /tokenize: %d %v", r.status, r.header)
	}
}

// TestTokenizeEndpointsRealVocab: with real vocabularies and chat
// templates (Llama 3's, Qwen3's), /tokenize counts what the generation
// endpoints report, token_strs are the vocabulary's, and /detokenize
// inverts /tokenize.
func TestTokenizeEndpointsRealVocab(t *testing.T) {
	for _, name := range []string{"llama3", "qwen3"} {
		t.Run(name, func(t *testing.T) { testTokenizeRealVocab(t, name) })
	}
}

func testTokenizeRealVocab(t *testing.T, name string) {
	ts := startRealVocab(t, name)
	text := "Hello, world! 你好 ☃ `x := 1`"
	body, _ := json.Marshal(map[string]any{"prompt": text, "max_tokens": 1})
	c := decodeCompletionResponse(t, ts.post("/v1/completions", string(body)).body)
	p, _ := json.Marshal(text)
	got := ts.tokenize(`{"prompt":` + string(p) + `,"return_token_strs":true}`)
	if got.Count != c.Usage.PromptTokens {
		t.Errorf("/tokenize %+v, /v1/completions prompt_tokens %d", got, c.Usage.PromptTokens)
	}
	v := ts.d.codec.tk.Vocab()
	for i, id := range got.Tokens {
		if got.TokenStrs[i] != v.Tokens[id] {
			t.Errorf("token_strs[%d] %q, vocabulary %q", i, got.TokenStrs[i], v.Tokens[id])
		}
	}
	plain := ts.tokenize(`{"prompt":` + string(p) + `,"add_special_tokens":false}`)
	ids, _ := json.Marshal(plain.Tokens)
	if s := ts.detokenize(`{"tokens":` + string(ids) + `}`); s != text {
		t.Errorf("detokenize(tokenize(%q)) = %q", text, s)
	}
	msgs := `"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi ☃"}]`
	chat := decodeCompletionResponse(t, ts.post("/v1/chat/completions", `{`+msgs+`,"max_tokens":1}`).body)
	withGen, without := ts.tokenize(`{`+msgs+`}`), ts.tokenize(`{`+msgs+`,"add_generation_prompt":false}`)
	// Llama 3's template (this one) opens the assistant turn whatever
	// add_generation_prompt says; Qwen3's honours it.
	if withGen.Count != chat.Usage.PromptTokens || name == "qwen3" && without.Count >= withGen.Count || !slices.Equal(without.Tokens, withGen.Tokens[:without.Count]) {
		t.Errorf("chat: %d tokens (%d without the generation prompt), /v1/chat/completions %d", withGen.Count, without.Count, chat.Usage.PromptTokens)
	}
}

// TestTokenizeToolsBytes: on the byte vocabulary, /tokenize renders tools,
// tool calls and tool results in picometer's own format, as chat does
// (renderChatTools), so it counts what chat reports as prompt_tokens.
func TestTokenizeToolsBytes(t *testing.T) {
	ts := startServer(t, newFakeEngine(4096), nil)
	tools := `[{"type":"function","function":{"name":"w","parameters":{"type":"object","properties":{"c":{"type":"string"}},"required":["c"]}}}]`
	for _, msgs := range []string{
		`[{"role":"user","content":"weather?"}]`,
		`[{"role":"user","content":"weather?"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"w","arguments":"{\"c\": \"Oslo\"}"}}]},{"role":"tool","tool_call_id":"call_1","content":"-3 C"}]`,
	} {
		r := ts.post("/v1/chat/completions", `{"messages":`+msgs+`,"tools":`+tools+`,"tool_choice":"none","max_tokens":1}`)
		if r.status != 200 {
			t.Fatalf("chat: %d %s", r.status, r.body)
		}
		chat := decodeCompletionResponse(t, r.body)
		got := ts.tokenize(`{"messages":` + msgs + `,"tools":` + tools + `}`)
		if got.Count != chat.Usage.PromptTokens || got.Count < 100 {
			t.Errorf("/tokenize counts %d, chat prompt_tokens %d (messages %s)", got.Count, chat.Usage.PromptTokens, msgs)
		}
		if s := ts.detokenize(`{"tokens":` + jsonInts(got.Tokens) + `}`); !strings.Contains(s, "# Tools") {
			t.Errorf("/tokenize with tools does not render them: %q", s)
		}
	}
}

func jsonInts(v []int32) string {
	b, _ := json.Marshal(v)
	return string(b)
}
