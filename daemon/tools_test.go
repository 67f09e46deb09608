package daemon

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/picometer/picometer/native"
	"github.com/picometer/picometer/schema"
)

// scripted returns a fake engine script that writes text, then <|end|>.
func scripted(text string) func([]int32) []int32 {
	return func([]int32) []int32 {
		out := make([]int32, 0, len(text)+1)
		for i := 0; i < len(text); i++ {
			out = append(out, int32(text[i]))
		}
		return append(out, native.TokEnd)
	}
}

const weatherTool = `[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}}}]`

// TestToolCallsResponse: an answer in picometer's tool-call format comes
// back as OpenAI tool_calls (ids, finish_reason "tool_calls", content
// null), whole and streamed (delta.tool_calls: index, id, name, then
// argument fragments that join to the arguments); the Responses API
// gives function_call items. The fake engine writes the answer; the
// grammar that makes a real model write it is tested in constraint/.
func TestToolCallsResponse(t *testing.T) {
	eng := newFakeEngine(4096)
	args := `{"city": "Paris, the one in France, not Texas"}`
	eng.gen = scripted(`<tool_call>{"name": "get_weather", "arguments": ` + args + `}</tool_call>`)
	ts := startServer(t, eng, nil)
	body := `{"messages":[{"role":"user","content":"weather?"}],"tools":` + weatherTool + `,"tool_choice":"required"}`

	r := ts.post("/v1/chat/completions", body)
	var resp struct {
		Choices []struct {
			Message struct {
				Content   *string `json:"content"`
				ToolCalls []struct {
					ID       string `json:"id"`
					Type     string `json:"type"`
					Function struct{ Name, Arguments string }
				} `json:"tool_calls"`
			}
			FinishReason string `json:"finish_reason"`
		}
	}
	if err := json.Unmarshal(r.body, &resp); err != nil || r.status != 200 {
		t.Fatalf("%d %s: %v", r.status, r.body, err)
	}
	c := resp.Choices[0]
	if c.FinishReason != "tool_calls" || c.Message.Content != nil || len(c.Message.ToolCalls) != 1 {
		t.Fatalf("%s", r.body)
	}
	tc := c.Message.ToolCalls[0]
	if !strings.HasPrefix(tc.ID, "call_") || len(tc.ID) != 29 || tc.Type != "function" || tc.Function.Name != "get_weather" || tc.Function.Arguments != args {
		t.Errorf("tool call %+v", tc)
	}

	// streamed
	hr, err := testClient.Post(ts.url+"/v1/chat/completions", "application/json", strings.NewReader(strings.Replace(body, `{"messages"`, `{"stream":true,"messages"`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	defer hr.Body.Close()
	var gotArgs, id, name, finish string
	fragments := 0
	sc := bufio.NewScanner(hr.Body)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || line == "[DONE]" {
			continue
		}
		var ch struct {
			Choices []struct {
				Delta struct {
					Content   *string `json:"content"`
					ToolCalls []struct {
						Index    *int   `json:"index"`
						ID       string `json:"id"`
						Function struct {
							Name      string  `json:"name"`
							Arguments *string `json:"arguments"`
						} `json:"function"`
					} `json:"tool_calls"`
				}
				FinishReason *string `json:"finish_reason"`
			}
		}
		if err := json.Unmarshal([]byte(line), &ch); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		for _, d := range ch.Choices[0].Delta.ToolCalls {
			if d.Index == nil || *d.Index != 0 || d.Function.Arguments == nil {
				t.Errorf("delta %s", line)
				continue
			}
			if d.ID != "" {
				id, name = d.ID, d.Function.Name
			} else {
				fragments++
			}
			gotArgs += *d.Function.Arguments
		}
		if f := ch.Choices[0].FinishReason; f != nil {
			finish = *f
		}
	}
	if gotArgs != args || !strings.HasPrefix(id, "call_") || name != "get_weather" || finish != "tool_calls" || fragments < 2 {
		t.Errorf("stream: args %q id %q name %q finish %q in %d fragments", gotArgs, id, name, finish, fragments)
	}

	// the Responses API
	r = ts.post("/v1/responses", `{"input":"weather?","tool_choice":"required","tools":[{"type":"function","name":"get_weather","parameters":{"type":"object"}}]}`)
	var rr struct {
		Output []struct {
			Type, CallID, Name, Arguments, Status string
		}
		ToolChoice string `json:"tool_choice"`
	}
	json.Unmarshal(r.body, &rr)
	if r.status != 200 || len(rr.Output) != 1 || rr.Output[0].Type != "function_call" || rr.Output[0].Name != "get_weather" || rr.Output[0].Arguments != args || rr.ToolChoice != "required" {
		t.Errorf("responses: %d %s", r.status, r.body)
	}

	// text answers stay text
	eng.gen = scripted("It is sunny.")
	r = ts.post("/v1/chat/completions", strings.Replace(body, `"tool_choice":"required"`, `"tool_choice":"auto"`, 1))
	resp.Choices = nil
	json.Unmarshal(r.body, &resp)
	if c := resp.Choices[0]; c.FinishReason != "stop" || c.Message.Content == nil || *c.Message.Content != "It is sunny." || len(c.Message.ToolCalls) != 0 {
		t.Errorf("text answer: %s", r.body)
	}
}

// TestToolMessagesByteModel: tool results and earlier calls are rendered
// in picometer's format for the byte model (what the engine prefills).
func TestToolMessagesByteModel(t *testing.T) {
	var r genRequest
	body := `{"messages":[{"role":"user","content":"w?"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Oslo\"}"}}]},{"role":"tool","tool_call_id":"c1","content":"-3C"}],"tools":` + weatherTool + `}`
	if e := decodeChat([]byte(body), &r); e != nil {
		t.Fatal(e.Message)
	}
	var sb strings.Builder
	for _, tok := range r.Prompt {
		switch {
		case native.IsByte(tok):
			sb.WriteByte(byte(tok))
		default:
			sb.WriteString(native.ControlTokens[tok-256])
		}
	}
	want := `<|bos|><|system|># Tools
Call a tool as <tool_call>{"name": NAME, "arguments": {…}}</tool_call>. The tools:
{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}}<|end|><|user|>w?<|end|><|assistant|><tool_call>{"name": "get_weather", "arguments": {"city":"Oslo"}}</tool_call><|end|><|user|><tool_response>-3C</tool_response><|end|><|assistant|>`
	if got := sb.String(); got != want {
		t.Errorf("prompt\n got %q\nwant %q", got, want)
	}
}

// TestConstraintFields: each server's constraint field sets the right
// kind of constraint; two are refused; a bad one is a 400 naming the
// field and the keyword.
func TestConstraintFields(t *testing.T) {
	ok := func(body, kind string) {
		t.Helper()
		var r genRequest
		if e := decodeChat([]byte(`{"messages":[{"role":"user","content":"x"}],`+body+`}`), &r); e != nil {
			t.Errorf("%s: %s", body, e.Message)
			return
		}
		if got := ""; r.Constraint != nil {
			got = r.Constraint.kind
			if got != kind {
				t.Errorf("%s: kind %q, want %q", body, got, kind)
			}
		} else if kind != "" {
			t.Errorf("%s: no constraint, want %q", body, kind)
		}
	}
	ok(`"response_format":{"type":"json_object"}`, schema.ConstraintJSONObject)
	ok(`"response_format":{"type":"text"}`, "")
	ok(`"response_format":{"type":"json_schema","json_schema":{"name":"x","strict":true,"schema":{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"],"additionalProperties":false}}}`, schema.ConstraintJSONSchema)
	ok(`"response_format":{"type":"json_object","schema":{"type":"integer"}}`, schema.ConstraintJSONSchema) // llama.cpp
	ok(`"guided_json":{"type":"string"}`, schema.ConstraintJSONSchema)
	ok(`"guided_json":"{\"type\":\"string\"}"`, schema.ConstraintJSONSchema)
	ok(`"guided_regex":"[a-z]+"`, schema.ConstraintRegex)
	ok(`"guided_choice":["yes","no"]`, schema.ConstraintChoice)
	ok(`"guided_grammar":"root ::= \"a\""`, schema.ConstraintGrammar)
	ok(`"grammar":"root ::= \"a\""`, schema.ConstraintGrammar)
	ok(`"grammar":{"type":"regex","value":"a+"}`, schema.ConstraintRegex) // TGI
	ok(`"json_schema":{"type":"boolean"}`, schema.ConstraintJSONSchema)
	ok(`"regex":"a|b"`, schema.ConstraintRegex)        // SGLang
	ok(`"format":"json"`, schema.ConstraintJSONObject) // Ollama
	ok(`"structured_outputs":{"choice":["a"]}`, schema.ConstraintChoice)
	ok(`"min_p":0.1`, "")
	ok(`"tools":`+weatherTool+`,"tool_choice":"none"`, "")

	bad := func(body, param, contains string) {
		t.Helper()
		var r genRequest
		e := decodeChat([]byte(`{"messages":[{"role":"user","content":"x"}],`+body+`}`), &r)
		if e == nil {
			t.Errorf("%s: accepted", body)
			return
		}
		if e.Param != param || !strings.Contains(e.Message, contains) || e.Status != 400 {
			t.Errorf("%s: %d param %q %q, want param %q containing %q", body, e.Status, e.Param, e.Message, param, contains)
		}
	}
	bad(`"guided_json":{"type":"string"},"guided_regex":"a"`, "guided_regex", "already constrains")
	bad(`"guided_json":{"type":"string","format":"email"}`, "guided_json", "'format'")
	bad(`"guided_json":{"oneOf":[{}]}`, "guided_json", "'oneOf'")
	bad(`"guided_regex":"a\\bb"`, "guided_regex", `\b`)
	bad(`"guided_choice":[]`, "guided_choice", "at least one")
	bad(`"guided_grammar":7`, "guided_grammar", "GBNF")
	bad(`"min_p":2`, "min_p", "[0, 1]")
	bad(`"structured_outputs":{"whitespace_pattern":" "}`, "structured_outputs.whitespace_pattern", "not supported")
}

// TestForeignFields: every other server's field in the list is a 400
// naming it, unless sent with its default; no honoured field is listed.
func TestForeignFields(t *testing.T) {
	honoured := map[string]bool{}
	for _, h := range honouredFields {
		honoured[h] = true
	}
	for _, f := range foreignFields {
		if honoured[f.name] {
			t.Errorf("%s is both honoured and refused", f.name)
		}
		var r genRequest
		e := decodeCompletion([]byte(`{"prompt":"x","`+f.name+`":12345}`), &r)
		if e == nil || e.Param != f.name || !strings.Contains(e.Message, "'"+f.name+"'") || e.Code != "unsupported_parameter" {
			t.Errorf("%s: %+v", f.name, e)
		}
		for _, d := range f.defaults {
			if e := decodeCompletion([]byte(`{"prompt":"x","`+f.name+`":`+d+`}`), &r); e != nil {
				t.Errorf("%s: %s (its default) refused: %s", f.name, d, e.Message)
			}
		}
	}
}

// TestRejectedConstraintEvent: a constraint that does not translate is a
// 400 whose request event carries its kind (the rejected outcome).
func TestRejectedConstraintEvent(t *testing.T) {
	ts := startServer(t, newFakeEngine(256), nil)
	r := ts.post("/v1/completions", `{"prompt":"x","guided_json":{"type":"string","format":"email"}}`)
	e := decodeError(t, r.body)
	if r.status != 400 || e.Param == nil || *e.Param != "guided_json" || !strings.Contains(e.Message, "'format'") {
		t.Fatalf("%d %s", r.status, r.body)
	}
	var ev schema.Event
	waitFor(t, 5*time.Second, "the request event", func() bool {
		evs := ts.sink.requests()
		if len(evs) == 0 {
			return false
		}
		ev = evs[len(evs)-1]
		return true
	})
	if ev.Constraint != schema.ConstraintJSONSchema || schema.ConstraintOutcome(&ev.RequestBody) != schema.OutcomeRejected || ev.ErrorType != schema.ErrInvalidRequest {
		t.Errorf("event %+v", ev.RequestBody)
	}
}

// TestREADMEForeignFields holds the README's table of other servers'
// fields to foreignFields: the same fields in the same order, each with
// the servers that read it and the values accepted ("—": none), and the
// honoured ones named in the paragraph above it.
func TestREADMEForeignFields(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	start := strings.Index(text, "**Other servers' fields.**")
	if start < 0 {
		t.Fatal("README: no \"**Other servers' fields.**\" paragraph")
	}
	text = text[start:]
	if end := strings.Index(text, "\n## "); end >= 0 {
		text = text[:end]
	}
	var got []string
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "| `") {
			got = append(got, line)
		}
	}
	var want []string
	for _, f := range foreignFields {
		acc := "—"
		if len(f.defaults) > 0 {
			acc = "`" + strings.Join(f.defaults, "`, `") + "`"
		}
		want = append(want, fmt.Sprintf("| `%s` | %s | %s |", f.name, f.servers, acc))
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("README's table of other servers' fields:\n%s\nwant (daemon/foreign.go):\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	para := text[:strings.Index(text, "| field |")]
	for _, h := range []string{"top_k", "min_p", "repetition_penalty", "seed", "stop", "return_token_ids"} {
		if !strings.Contains(para, "`"+h+"`") {
			t.Errorf("README: honoured field %s not named before the table", h)
		}
	}
	for _, h := range honouredFields {
		if !strings.Contains(string(b), "`"+h+"`") {
			t.Errorf("README: honoured field %s is nowhere", h)
		}
	}
}
