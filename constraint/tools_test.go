package constraint

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var weatherTools = []Tool{
	{Name: "get_weather", Parameters: []byte(`{"type":"object","properties":{"city":{"type":"string","maxLength":20},"unit":{"enum":["c","f"]}},"required":["city","unit"],"additionalProperties":false}`)},
	{Name: "now"},
}

func TestToolGrammar(t *testing.T) {
	f := func(format ToolFormat, choice ToolChoice, parallel bool, accept, reject []string) {
		t.Helper()
		text, err := ToolGrammar(format, weatherTools, choice, parallel, DefaultLimits)
		if err != nil {
			t.Fatal(err)
		}
		g := mustGram(t, text)
		for _, a := range accept {
			if !g.accepts(a) {
				t.Errorf("%s %+v: %q rejected\n%s", format, choice, a, text)
			}
			if _, calls, ok := ParseToolCalls(format, a); choice.Mode != "auto" && (!ok || len(calls) == 0) {
				t.Errorf("%s: %q accepted by the grammar but not parsed", format, a)
			}
		}
		for _, r := range reject {
			if g.accepts(r) {
				t.Errorf("%s %+v: %q accepted\n%s", format, choice, r, text)
			}
		}
	}
	req := ToolChoice{Mode: "required"}
	w := `{"name": "get_weather", "arguments": {"city": "Paris", "unit": "c"}}`
	f(FormatHermes, req, false,
		[]string{"<tool_call>\n" + w + "\n</tool_call>", `<tool_call>{"name":"now","arguments":{}}</tool_call>`},
		[]string{"hello", `<tool_call>{"name":"nope","arguments":{}}</tool_call>`, `<tool_call>{"name":"get_weather","arguments":{"city":"Paris"}}</tool_call>`,
			"<tool_call>" + w + "</tool_call><tool_call>" + w + "</tool_call>"})
	f(FormatPicometer, req, true, []string{"<tool_call>" + w + "</tool_call> <tool_call>" + w + "</tool_call>"}, []string{"x<tool_call>" + w + "</tool_call>"})
	f(FormatHermes, ToolChoice{Mode: "function", Name: "now"}, false,
		[]string{`<tool_call>{"name":"now","arguments":{"any":1}}</tool_call>`}, []string{"<tool_call>" + w + "</tool_call>"})
	f(FormatHermes, ToolChoice{Mode: "auto"}, false,
		[]string{"", "The weather is fine.", "<tool_call>" + w + "</tool_call>"},
		[]string{"<b>hi</b>", "<tool_call>{\"name\":\"x\"}"})
	f(FormatLlama3, req, true,
		[]string{`{"name": "get_weather", "parameters": {"city": "Oslo", "unit": "f"}}`, `{"name":"now","parameters":{}}; {"name":"now","parameters":{}}`},
		[]string{`{"name":"now","arguments":{}}`})
	f(FormatMistral, req, true,
		[]string{`[TOOL_CALLS][` + w + `, {"name":"now","arguments":{}}]`}, []string{`[TOOL_CALLS]` + w})
	f(FormatMistralArgs, req, false,
		[]string{`[TOOL_CALLS]get_weather[ARGS]{"city":"Rome","unit":"c"}`}, []string{`[TOOL_CALLS]now{}`})
	if _, err := ToolGrammar(FormatHermes, weatherTools, ToolChoice{Mode: "function", Name: "missing"}, false, DefaultLimits); err == nil {
		t.Error("a named function that is not a tool: accepted")
	}
	if _, err := ToolGrammar(FormatHermes, []Tool{{Name: "x", Parameters: []byte(`{"type":"object","properties":{"a":{"not":{}}}}`)}}, req, false, DefaultLimits); err == nil {
		t.Error("an unsupported keyword in a tool's parameters: accepted")
	} else if e := err.(*Error); e.Keyword != "not" || e.Path != "tools[0].function.parameters/properties/a" {
		t.Errorf("error %+v", e)
	}
}

func TestParseToolCalls(t *testing.T) {
	f := func(format ToolFormat, answer, text string, calls []ToolCall, ok bool) {
		t.Helper()
		gt, gc, gok := ParseToolCalls(format, answer)
		if gt != text || !reflect.DeepEqual(gc, calls) || gok != ok {
			t.Errorf("%s %q: got %q %+v %v, want %q %+v %v", format, answer, gt, gc, gok, text, calls, ok)
		}
	}
	f(FormatHermes, "Let me check.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>", "Let me check.", []ToolCall{{"f", `{"a": 1}`}}, true)
	f(FormatHermes, "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>\n<tool_call>{\"name\": \"g\", \"arguments\": {\"b\":[]}}</tool_call>", "", []ToolCall{{"f", `{}`}, {"g", `{"b":[]}`}}, true)
	f(FormatHermes, "<tool_call>{\"name\": \"f\"}</tool_call>", "<tool_call>{\"name\": \"f\"}</tool_call>", nil, false)
	f(FormatHermes, "<tool_call>{\"name\": \"f\", \"arguments\": {}}", "<tool_call>{\"name\": \"f\", \"arguments\": {}}", nil, false)
	f(FormatHermes, "plain", "plain", nil, false)
	f(FormatLlama3, `<|python_tag|>{"name": "f", "parameters": {"x": "y"}}`, "", []ToolCall{{"f", `{"x": "y"}`}}, true)
	f(FormatLlama3, `{"name": "f", "parameters": {}}; {"name": "g", "arguments": {"k": 2}}`, "", []ToolCall{{"f", `{}`}, {"g", `{"k": 2}`}}, true)
	f(FormatLlama3, `{"a": 1}`, `{"a": 1}`, nil, false)
	f(FormatMistral, `[TOOL_CALLS][{"name": "f", "arguments": {"q": 1}}]`, "", []ToolCall{{"f", `{"q": 1}`}}, true)
	f(FormatMistral, `[{"name": "f", "arguments": {}}]`, "", []ToolCall{{"f", `{}`}}, true)
	f(FormatMistralArgs, `[TOOL_CALLS]f[ARGS]{"q": 1}[TOOL_CALLS]g[ARGS]{}`, "", []ToolCall{{"f", `{"q": 1}`}, {"g", `{}`}}, true)
}

// TestDetectToolFormat reads the real templates llama.cpp ships (make deps
// puts them under build/llama.cpp).
func TestDetectToolFormat(t *testing.T) {
	dir := filepath.Join("..", "build", "llama.cpp", "models", "templates")
	if _, err := os.Stat(dir); err != nil {
		if os.Getenv("PICOMETER_LIVE") == "1" {
			t.Fatal(err)
		}
		t.Skip("no llama.cpp templates (make deps)")
	}
	for file, want := range map[string]ToolFormat{
		"Qwen-Qwen2.5-7B-Instruct.jinja":                    FormatHermes,
		"NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja": FormatHermes,
		"meta-llama-Llama-3.1-8B-Instruct.jinja":            FormatLlama3,
		"meta-llama-Llama-3.2-3B-Instruct.jinja":            FormatLlama3,
		"mistralai-Mistral-Nemo-Instruct-2407.jinja":        FormatMistral,
		"Mistral-Small-3.2-24B-Instruct-2506.jinja":         FormatMistralArgs,
		"google-gemma-2-2b-it.jinja":                        "",
		"microsoft-Phi-3.5-mini-instruct.jinja":             "",
	} {
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		if got := DetectToolFormat(string(b)); got != want {
			t.Errorf("%s: %q, want %q", file, got, want)
		}
	}
}

// FuzzParseToolCalls: a model's answer is untrusted bytes; parsing never
// panics, and a parsed call's arguments are a JSON object.
func FuzzParseToolCalls(f *testing.F) {
	f.Add("<tool_call>{\"name\":\"f\",\"arguments\":{}}</tool_call>", 0)
	f.Add(`{"name":"f","parameters":{"a":1}}; {"name":"g","parameters":{}}`, 2)
	f.Add(`[TOOL_CALLS][{"name":"f","arguments":{}}]`, 3)
	f.Add(`[TOOL_CALLS]f[ARGS]{}`, 4)
	f.Fuzz(func(t *testing.T, answer string, fi int) {
		format := ToolFormats[uint(fi)%uint(len(ToolFormats))]
		_, calls, ok := ParseToolCalls(format, answer)
		if ok != (len(calls) > 0) {
			t.Fatalf("ok %v with %d calls", ok, len(calls))
		}
		for _, c := range calls {
			if _, err := decodeJSON([]byte(c.Arguments)); err != nil || c.Arguments[0] != '{' {
				t.Fatalf("arguments %q", c.Arguments)
			}
		}
	})
}

// TestParseTruncatedToolCalls: an answer the token limit cut keeps its
// complete calls in every format and drops the interrupted one; an answer
// without a complete call stays text; a whole answer parses as
// ParseToolCalls does.
func TestParseTruncatedToolCalls(t *testing.T) {
	f := func(format ToolFormat, answer string, wantText string, wantArgs ...string) {
		t.Helper()
		text, calls, ok := ParseTruncatedToolCalls(format, answer)
		var args []string
		for _, c := range calls {
			args = append(args, c.Name+c.Arguments)
		}
		if ok != (len(wantArgs) > 0) || text != wantText || strings.Join(args, "|") != strings.Join(wantArgs, "|") {
			t.Errorf("%s %q: text %q calls %q ok %v; want text %q calls %q", format, answer, text, args, ok, wantText, wantArgs)
		}
	}
	a, b := `{"name": "f", "arguments": {"x": 1}}`, `{"name": "g", "arguments": {"y": "</tool_call>; }]"}}`
	f(FormatHermes, "hi <tool_call>\n"+a+"\n</tool_call>\n<tool_call>\n"+b+"\n</tool_call><tool_call>{\"name\": \"f\", \"argu", "hi", `f{"x": 1}`, `g{"y": "</tool_call>; }]"}`)
	f(FormatPicometer, "<tool_call>"+a+"</tool_call>  <tool_call>{\"name\"", "", `f{"x": 1}`)
	f(FormatPicometer, "<tool_call>"+a+"</tool_call>", "", `f{"x": 1}`)
	f(FormatPicometer, "<tool_call>{\"name\": \"f\", \"arguments\": {\"x\"", "<tool_call>{\"name\": \"f\", \"arguments\": {\"x\"")
	f(FormatPicometer, "plain text", "plain text")
	f(FormatLlama3, `<|python_tag|>{"name": "f", "parameters": {"x": 1}}; {"name": "g", "parameters": {"y": ";"}}; {"name": "f", "par`, "", `f{"x": 1}`, `g{"y": ";"}`)
	f(FormatMistral, `[TOOL_CALLS][{"name": "f", "arguments": {"x": 1}}, {"name": "g", "arguments": {"y": 2}}, {"name": "f", "arguments": {"x"`, "", `f{"x": 1}`, `g{"y": 2}`)
	f(FormatMistralArgs, `[TOOL_CALLS]f[ARGS]{"x": 1}[TOOL_CALLS]g[ARGS]{"y"`, "", `f{"x": 1}`)
}
