package daemon

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/picometer/picometer/schema"
)

// responseJSON is a decoded Responses object.
type responseJSON struct {
	ID                string  `json:"id"`
	Object            string  `json:"object"`
	CreatedAt         int64   `json:"created_at"`
	Status            string  `json:"status"`
	Model             string  `json:"model"`
	Instructions      *string `json:"instructions"`
	MaxOutputTokens   *int    `json:"max_output_tokens"`
	Temperature       float64 `json:"temperature"`
	TopP              float64 `json:"top_p"`
	Store             bool    `json:"store"`
	IncompleteDetails *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
	Output []struct {
		ID        string `json:"id"`
		Type      string `json:"type"`
		Status    string `json:"status"`
		Role      string `json:"role"`
		CallID    string `json:"call_id"`   // function_call
		Name      string `json:"name"`      // function_call
		Arguments string `json:"arguments"` // function_call
		Content   []struct {
			Type        string `json:"type"`
			Text        string `json:"text"`
			Annotations []any  `json:"annotations"`
		} `json:"content"`
	} `json:"output"`
	Usage *struct {
		InputTokens  int                `json:"input_tokens"`
		OutputTokens int                `json:"output_tokens"`
		TotalTokens  int                `json:"total_tokens"`
		Extra        map[string]float64 `json:"extra"`
	} `json:"usage"`
}

func decodeResponseObject(t testing.TB, b []byte) *responseJSON {
	t.Helper()
	var r responseJSON
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("response %s: %v", b, err)
	}
	return &r
}

// text is the output message's text.
func (r *responseJSON) text(t testing.TB) string {
	t.Helper()
	if len(r.Output) != 1 || r.Output[0].Type != "message" || r.Output[0].Role != "assistant" ||
		len(r.Output[0].Content) != 1 || r.Output[0].Content[0].Type != "output_text" || r.Output[0].Content[0].Annotations == nil {
		t.Fatalf("output %+v", r.Output)
	}
	return r.Output[0].Content[0].Text
}

// responseEvent is one decoded event of a Responses stream.
type responseEvent struct {
	event string // the SSE event: line
	Type  string `json:"type"`
	Seq   *int   `json:"sequence_number"`
	Delta string `json:"delta"`
	Text  string `json:"text"`

	ItemID      string        `json:"item_id"`
	OutputIndex *int          `json:"output_index"`
	Name        string        `json:"name"`      // function_call_arguments.done
	Arguments   string        `json:"arguments"` // function_call_arguments.done
	Response    *responseJSON `json:"response"`
	Part        *struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"part"`
	Item *struct {
		ID        string `json:"id"`
		Type      string `json:"type"`
		Status    string `json:"status"`
		CallID    string `json:"call_id"`
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"item"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

// readResponseEvents reads a Responses stream, checking its framing:
// every event is an "event: " line, a "data: " line whose type is the
// event's, and a blank line.
func readResponseEvents(t testing.TB, r io.Reader) []responseEvent {
	t.Helper()
	br := bufio.NewReader(r)
	var evs []responseEvent
	for {
		line, err := br.ReadString('\n')
		if err == io.EOF && line == "" {
			return evs
		}
		name, ok := strings.CutPrefix(line, "event: ")
		if err != nil || !ok {
			t.Fatalf("bad SSE line %q (%v)", line, err)
		}
		data, _ := br.ReadString('\n')
		payload, ok := strings.CutPrefix(data, "data: ")
		if !ok {
			t.Fatalf("event %q followed by %q", line, data)
		}
		if blank, _ := br.ReadString('\n'); blank != "\n" {
			t.Fatalf("event %q not followed by a blank line but %q", line, blank)
		}
		var ev responseEvent
		if err := json.Unmarshal([]byte(payload), &ev); err != nil {
			t.Fatalf("event data %q: %v", payload, err)
		}
		ev.event = strings.TrimSuffix(name, "\n")
		if ev.Type != ev.event {
			t.Fatalf("event %q carries type %q", ev.event, ev.Type)
		}
		evs = append(evs, ev)
	}
}

func (ts *testServer) streamResponses(body string) []responseEvent {
	ts.t.Helper()
	resp, err := testClient.Post(ts.url+"/v1/responses", "application/json", strings.NewReader(body))
	if err != nil {
		ts.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		b, _ := io.ReadAll(resp.Body)
		ts.t.Fatalf("stream: %d %s", resp.StatusCode, b)
	}
	return readResponseEvents(ts.t, resp.Body)
}

// checkResponseStream checks the documented event sequence, the sequence
// numbers, and that the deltas, the done events and the final response
// agree; it returns the final response.
func checkResponseStream(t *testing.T, evs []responseEvent, final string) *responseJSON {
	t.Helper()
	var types []string
	var deltas strings.Builder
	for i, ev := range evs {
		if ev.Seq == nil || *ev.Seq != i {
			t.Fatalf("event %d (%s) has sequence_number %v", i, ev.Type, ev.Seq)
		}
		if ev.Type == "response.output_text.delta" {
			deltas.WriteString(ev.Delta)
			if len(types) > 0 && types[len(types)-1] == ev.Type {
				continue
			}
		}
		types = append(types, ev.Type)
	}
	want := []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
		"response.output_text.delta", "response.output_text.done", "response.content_part.done", "response.output_item.done", final}
	if strings.Join(types, " ") != strings.Join(want, " ") {
		t.Fatalf("events %v\nwant   %v", types, want)
	}
	n := len(evs)
	last := evs[n-1].Response
	text := last.text(t)
	if evs[n-4].Text != deltas.String() || evs[n-3].Part.Text != text || text != deltas.String() {
		t.Errorf("deltas %q, output_text.done %q, content_part.done %q, response %q", deltas.String(), evs[n-4].Text, evs[n-3].Part.Text, text)
	}
	if c := evs[0].Response; c.Status != "in_progress" || c.ID != last.ID || c.Usage != nil || len(c.Output) != 0 {
		t.Errorf("response.created %+v", c)
	}
	msg := last.Output[0].ID
	if evs[2].Item.ID != msg || evs[4].ItemID != msg || evs[n-2].Item.ID != msg || evs[n-2].Item.Status != last.Status {
		t.Errorf("item ids or status disagree: %+v", evs)
	}
	return last
}

func TestResponses(t *testing.T) {
	eng := newFakeEngine(256)
	ts := startServer(t, eng, nil)

	body := `{"model":"fake-model","instructions":"Be brief.","input":"Hi!","temperature":0,"top_p":0.5`
	r := ts.post("/v1/responses", body+"}")
	if r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	resp := decodeResponseObject(t, r.body)
	// <|bos|><|system|>Be brief.<|end|><|user|>Hi!<|end|><|assistant|>
	wantPrompt := len(renderChat(nil, []chatMessage{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Hi!"}}))
	if resp.Object != "response" || !strings.HasPrefix(resp.ID, "resp_") || resp.Status != "completed" || resp.Model != "fake-model" ||
		resp.Instructions == nil || *resp.Instructions != "Be brief." || resp.MaxOutputTokens != nil || resp.TopP != 0.5 || resp.Store ||
		resp.IncompleteDetails != nil || resp.CreatedAt == 0 {
		t.Errorf("response %s", r.body)
	}
	// The fake engine echoes the prompt's bytes, then <|end|>.
	if got := resp.text(t); got != "Be brief.Hi!" {
		t.Errorf("text %q", got)
	}
	u := resp.Usage
	if u == nil || u.InputTokens != wantPrompt || u.OutputTokens != len("Be brief.Hi!")+1 || u.TotalTokens != u.InputTokens+u.OutputTokens ||
		u.Extra["e2e_s"] <= 0 || u.Extra["decode_tokens"] != float64(u.OutputTokens-1) {
		t.Errorf("usage %+v", u)
	}
	ev := ts.sink.request(resp.ID)
	if ev.Operation != schema.OpChat || ev.PromptTokens != wantPrompt || ev.CompletionTokens != u.OutputTokens || ev.FinishReason != schema.FinishStop {
		t.Errorf("request event %+v", ev.RequestBody)
	}

	// Streamed: the same text and usage, in the documented sequence.
	evs := ts.streamResponses(body + `,"stream":true}`)
	last := checkResponseStream(t, evs, "response.completed")
	if last.text(t) != "Be brief.Hi!" || last.Usage == nil || last.Usage.OutputTokens != u.OutputTokens || last.Usage.Extra["e2e_s"] <= 0 {
		t.Errorf("streamed response %+v", last)
	}

	// Message items with text parts, and max_output_tokens: incomplete.
	items := `{"input":[{"role":"developer","content":"D"},{"type":"message","role":"user","content":[{"type":"input_text","text":"ab"},{"type":"input_text","text":"cd"}]},{"role":"assistant","content":[{"type":"output_text","text":"ok"}]},{"role":"user","content":"more"}],"max_output_tokens":3`
	r = ts.post("/v1/responses", items+"}")
	resp = decodeResponseObject(t, r.body)
	if r.status != 200 || resp.Status != "incomplete" || resp.IncompleteDetails == nil || resp.IncompleteDetails.Reason != "max_output_tokens" ||
		resp.MaxOutputTokens == nil || *resp.MaxOutputTokens != 3 || resp.text(t) != "Dab" || resp.Usage.OutputTokens != 3 || resp.Instructions != nil {
		t.Errorf("%d %s", r.status, r.body)
	}
	wantPrompt = len(renderChat(nil, []chatMessage{{Role: "system", Content: "D"}, {Role: "user", Content: "ab\ncd"}, {Role: "assistant", Content: "ok"}, {Role: "user", Content: "more"}}))
	if resp.Usage.InputTokens != wantPrompt {
		t.Errorf("input_tokens %d, want %d", resp.Usage.InputTokens, wantPrompt)
	}
	last = checkResponseStream(t, ts.streamResponses(items+`,"stream":true}`), "response.incomplete")
	if last.Status != "incomplete" || last.text(t) != "Dab" {
		t.Errorf("streamed %+v", last)
	}

	// No stored responses.
	if r := ts.do("GET", "/v1/responses/"+resp.ID, ""); r.status != 404 || decodeError(t, r.body).Code == nil || *decodeError(t, r.body).Code != "response_not_found" {
		t.Errorf("GET a response: %d %s", r.status, r.body)
	}
}

// TestResponsesErrors: what picometer cannot honour is a 400 naming it.
func TestResponsesErrors(t *testing.T) {
	ts := startServer(t, newFakeEngine(64), nil)
	f := func(body, param, code string) {
		t.Helper()
		r := ts.post("/v1/responses", body)
		e := decodeError(t, r.body)
		gotParam, gotCode := "", ""
		if e.Param != nil {
			gotParam = *e.Param
		}
		if e.Code != nil {
			gotCode = *e.Code
		}
		if r.status != 400 || gotParam != param || gotCode != code || e.Type != "invalid_request_error" {
			t.Errorf("%s: %d %s, want param %q code %q", body, r.status, r.body, param, code)
		}
	}
	f(`{}`, "input", "missing_required_parameter")
	f(`{"input":[]}`, "input", "invalid_value")
	f(`{"input":7}`, "input", "invalid_type")
	f(`{"input":"x","tools":[{"type":"function"}]}`, "tools[0].name", "missing_required_parameter")
	f(`{"input":"x","tool_choice":"required"}`, "tool_choice", "invalid_value")
	f(`{"input":"x","previous_response_id":"resp_1"}`, "previous_response_id", "unsupported_parameter")
	f(`{"input":"x","conversation":"c"}`, "conversation", "unsupported_parameter")
	f(`{"input":"x","reasoning":{"effort":"high"}}`, "reasoning", "unsupported_parameter")
	f(`{"input":"x","background":true}`, "background", "unsupported_parameter")
	f(`{"input":"x","include":["message.output_text.logprobs"]}`, "include", "unsupported_parameter")
	f(`{"input":"x","top_logprobs":2}`, "top_logprobs", "unsupported_parameter")
	f(`{"input":"x","truncation":"auto"}`, "truncation", "unsupported_parameter")
	f(`{"input":"x","text":{"format":{"type":"json_schema"}}}`, "text.format.schema", "missing_required_parameter")
	f(`{"input":"x","text":{"format":{"type":"json_schema","schema":{"oneOf":[]}}}}`, "text.format.schema", "invalid_value")
	f(`{"input":[{"role":"user","content":[{"type":"input_image","image_url":"http://x"}]}]}`, "input[0].content[0].type", "unsupported_parameter")
	f(`{"input":[{"type":"function_call_output","output":"o"}]}`, "input[0].call_id", "missing_required_parameter")
	f(`{"input":[{"type":"reasoning","summary":[]}]}`, "input[0].type", "unsupported_parameter")
	f(`{"input":[{"role":"tool","content":"x"}]}`, "input[0].role", "unsupported_parameter") // as in chat: no tool calling
	f(`{"input":[{"content":"x"}]}`, "input[0].role", "missing_required_parameter")
	f(`{"input":"x","max_output_tokens":0}`, "max_output_tokens", "invalid_value")
	f(`{"input":"x","max_output_tokens":1000}`, "max_output_tokens", "context_length_exceeded")
	f(`{"input":"x","temperature":3}`, "temperature", "invalid_value")
	f(`{"input":"`+strings.Repeat("x", 100)+`"}`, "input", "context_length_exceeded")
	// Accepted without effect.
	for _, body := range []string{
		`{"input":"x","store":true,"tools":[],"tool_choice":"auto","reasoning":{},"include":[],"parallel_tool_calls":true,"truncation":"disabled","text":{"format":{"type":"text"}},"metadata":{"a":"b"},"user":"u"}`,
	} {
		if r := ts.post("/v1/responses", body); r.status != 200 || decodeResponseObject(t, r.body).Store {
			t.Errorf("%s: %d %s", body, r.status, r.body)
		}
	}
}
