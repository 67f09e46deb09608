package daemon

import (
	"strings"
	"testing"
)

// TestResponsesStreamToolCalls: a streamed /v1/responses request with
// tools gets its calls as function_call items (output_item.added in
// progress with empty arguments, argument deltas that join to the
// arguments, function_call_arguments.done, output_item.done completed),
// numbered on from the message when there is text, and the same call ids
// in response.completed; a text answer to a tools request streams as a
// message, held back until the answer ended.
func TestResponsesStreamToolCalls(t *testing.T) {
	eng := newFakeEngine(4096)
	args := `{"city": "Paris, the one in France, not Texas, nor Ontario"}`
	eng.gen = scripted(`Checking. <tool_call>{"name": "get_weather", "arguments": ` + args + `}</tool_call><tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>`)
	ts := startServer(t, eng, nil)
	const tools = `"tools":[{"type":"function","name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}]`
	evs := ts.streamResponses(`{"input":"weather?","stream":true,"tool_choice":"auto",` + tools + `}`)

	var types []string
	deltas := map[int]string{}
	for i, ev := range evs {
		if ev.Seq == nil || *ev.Seq != i {
			t.Fatalf("event %d (%s) has sequence_number %v", i, ev.Type, ev.Seq)
		}
		if ev.Type == "response.function_call_arguments.delta" {
			deltas[*ev.OutputIndex] += ev.Delta
			if len(ev.Delta) > argFragment+3 {
				t.Errorf("argument delta of %d bytes", len(ev.Delta))
			}
			if types[len(types)-1] == ev.Type {
				continue
			}
		}
		types = append(types, ev.Type)
	}
	call := []string{"response.output_item.added", "response.function_call_arguments.delta", "response.function_call_arguments.done", "response.output_item.done"}
	want := append([]string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
		"response.output_text.delta", "response.output_text.done", "response.content_part.done", "response.output_item.done"}, call...)
	want = append(append(want, call...), "response.completed")
	if strings.Join(types, " ") != strings.Join(want, " ") {
		t.Fatalf("events %v\nwant   %v", types, want)
	}
	last := evs[len(evs)-1].Response
	if len(last.Output) != 3 || last.Output[0].Type != "message" || last.Output[0].Content[0].Text != "Checking." ||
		last.Output[1].Type != "function_call" || last.Output[2].Type != "function_call" {
		t.Fatalf("final output %+v", last.Output)
	}
	wantArgs := []string{args, `{"city": "Oslo"}`}
	for k, o := range last.Output[1:] {
		idx := k + 1
		var added, done, argsDone *responseEvent
		for i := range evs {
			ev := &evs[i]
			if ev.OutputIndex == nil || *ev.OutputIndex != idx {
				continue
			}
			switch ev.Type {
			case "response.output_item.added":
				added = ev
			case "response.output_item.done":
				done = ev
			case "response.function_call_arguments.done":
				argsDone = ev
			}
		}
		if added == nil || done == nil || argsDone == nil {
			t.Fatalf("call %d: events missing", idx)
		}
		if !strings.HasPrefix(o.CallID, "call_") || o.ID != "fc_"+strings.TrimPrefix(o.CallID, "call_") || o.Name != "get_weather" || o.Arguments != wantArgs[k] || o.Status != "completed" {
			t.Errorf("final item %d: %+v", idx, o)
		}
		if a := added.Item; a.Type != "function_call" || a.Status != "in_progress" || a.Arguments != "" || a.CallID != o.CallID || a.ID != o.ID || a.Name != o.Name {
			t.Errorf("output_item.added %d: %+v", idx, a)
		}
		if d := done.Item; d.Status != "completed" || d.Arguments != o.Arguments || d.CallID != o.CallID || d.ID != o.ID {
			t.Errorf("output_item.done %d: %+v", idx, d)
		}
		if argsDone.ItemID != o.ID || argsDone.Arguments != o.Arguments || argsDone.Name != o.Name || deltas[idx] != o.Arguments {
			t.Errorf("call %d: arguments.done %+v, deltas %q, want %q", idx, argsDone, deltas[idx], o.Arguments)
		}
	}

	// A text answer to a request with tools: one message, as without tools.
	eng.gen = scripted("It is sunny.")
	evs = ts.streamResponses(`{"input":"weather?","stream":true,"tool_choice":"auto",` + tools + `}`)
	if r := checkResponseStream(t, evs, "response.completed"); r.text(t) != "It is sunny." {
		t.Errorf("text answer %q", r.text(t))
	}
}
