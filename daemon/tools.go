package daemon

import (
	"crypto/rand"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	json "github.com/goccy/go-json"

	"github.com/picometer/picometer/constraint"
	"github.com/picometer/picometer/schema"
	"github.com/picometer/picometer/tokenizer"
)

// This file is tool calling: a request's tools, tool_choice and
// parallel_tool_calls (chat's nested function objects, or the Responses
// API's flat ones), the grammar that holds the model to its own
// tool-call format (constraint.ToolGrammar, the format read from the
// model's chat template by constraint.DetectToolFormat), and the answer
// parsed back into calls (constraint.ParseToolCalls).
//
// tool_choice "none" (or no tools): the tools are rendered by the
// template, nothing is constrained and the answer is text. "auto": the
// answer is text or calls; an answer that begins like a call (the
// format's first character: '<' for <tool_call>, '{' for Llama 3, '[' for
// Mistral) is held to the calls' grammar, and a text answer cannot begin
// with that character. "required" or a named function: the answer is
// calls, by the grammar, so any weights produce a valid call.
// parallel_tool_calls false: at most one call; true (the default): up to
// constraint.MaxParallelCalls.

// toolsReq is a request's tools.
type toolsReq struct {
	raw       json.RawMessage // chat's tools array, for the chat template
	flatRaw   json.RawMessage // the Responses API's tools as sent
	choiceRaw json.RawMessage // tool_choice as sent (nil: not sent)
	tools     []constraint.Tool
	choice    constraint.ToolChoice // Mode "none", "auto", "required" or "function"
	parallel  bool
}

// active reports whether the answer may hold calls.
func (t *toolsReq) active() bool { return t != nil && t.choice.Mode != "none" }

// decodeToolsReq reads tools, tool_choice and parallel_tool_calls. flat:
// the Responses API's tool objects ({"type":"function","name",…}).
func (d *decoder) decodeToolsReq(r *genRequest, flat bool) *apiError {
	raw, ok := d.get("tools")
	t := &toolsReq{choice: constraint.ToolChoice{Mode: "auto"}, parallel: true}
	if ok {
		var items []json.RawMessage
		if raw[0] != '[' || json.Unmarshal(raw, &items) != nil {
			return badRequest("tools", "invalid_type", "Invalid type for 'tools': expected an array of tools, but got %s instead.", kindOf(raw))
		}
		var chatTools []json.RawMessage
		for i, it := range items {
			p := fmt.Sprintf("tools[%d]", i)
			td, err := newDecoderPrefixed(it, p+".")
			if err != nil {
				return err
			}
			typ, _, err := td.str("type")
			if err != nil {
				return err
			}
			if typ != "function" {
				return badRequest(p+".type", "invalid_value", "Invalid value for '%s.type': only \"function\" tools are supported, but got %s.", p, strconv.Quote(typ))
			}
			fd, fp := td, p
			if !flat {
				fraw, ok := td.get("function")
				if !ok {
					return badRequest(p+".function", "missing_required_parameter", "Missing required parameter: '%s.function'.", p)
				}
				fp = p + ".function"
				if fd, err = newDecoderPrefixed(fraw, fp+"."); err != nil {
					return err
				}
			}
			name, ok, err := fd.str("name")
			if err != nil {
				return err
			}
			if !ok || name == "" {
				return badRequest(fp+".name", "missing_required_parameter", "Missing required parameter: '%s.name'.", fp)
			}
			if _, _, err := fd.str("description"); err != nil {
				return err
			}
			if _, _, err := fd.boolean("strict"); err != nil {
				return err
			}
			params, _ := fd.get("parameters")
			if params != nil && params[0] != '{' {
				return badRequest(fp+".parameters", "invalid_type", "Invalid type for '%s.parameters': expected a JSON schema (an object), but got %s instead.", fp, kindOf(params))
			}
			for _, o := range t.tools {
				if o.Name == name {
					return badRequest(fp+".name", "invalid_value", "Invalid '%s.name': two tools are named %q.", fp, name)
				}
			}
			t.tools = append(t.tools, constraint.Tool{Name: name, Parameters: params})
			if flat { // the template reads chat's shape
				fn, _ := json.Marshal(map[string]any{"type": "function", "function": json.RawMessage(it)})
				chatTools = append(chatTools, fn)
			}
		}
		if flat {
			t.raw, _ = json.Marshal(chatTools)
			t.flatRaw = raw
		} else {
			t.raw = raw
		}
	}
	if craw, ok := d.get("tool_choice"); ok {
		t.choiceRaw = craw
		switch string(craw) {
		case `"none"`, `"auto"`, `"required"`:
			t.choice.Mode = strings.Trim(string(craw), `"`)
		default:
			cd, err := newDecoderPrefixed(craw, "tool_choice.")
			if err != nil {
				return badRequest("tool_choice", "invalid_value", "Invalid 'tool_choice': expected \"none\", \"auto\", \"required\" or a named function.")
			}
			if typ, _, err := cd.str("type"); err != nil {
				return err
			} else if typ != "function" {
				return badRequest("tool_choice.type", "invalid_value", "Invalid value for 'tool_choice.type': only \"function\" is supported, but got %s.", strconv.Quote(typ))
			}
			nd, np := cd, "tool_choice"
			if !flat {
				fraw, ok := cd.get("function")
				if !ok {
					return badRequest("tool_choice.function", "missing_required_parameter", "Missing required parameter: 'tool_choice.function'.")
				}
				np = "tool_choice.function"
				if nd, err = newDecoderPrefixed(fraw, np+"."); err != nil {
					return err
				}
			}
			name, ok, err := nd.str("name")
			if err != nil {
				return err
			}
			if !ok {
				return badRequest(np+".name", "missing_required_parameter", "Missing required parameter: '%s.name'.", np)
			}
			t.choice = constraint.ToolChoice{Mode: "function", Name: name}
		}
	}
	if v, ok, err := d.boolean("parallel_tool_calls"); err != nil {
		return err
	} else if ok {
		t.parallel = v
	}
	if len(t.tools) == 0 {
		if t.choice.Mode == "required" || t.choice.Mode == "function" {
			return badRequest("tool_choice", "invalid_value", "Invalid 'tool_choice': %q needs tools, and the request has none.", t.choice.Mode)
		}
		return nil
	}
	if t.choice.Mode == "function" {
		found := false
		for _, x := range t.tools {
			found = found || x.Name == t.choice.Name
		}
		if !found {
			return badRequest("tool_choice", "invalid_value", "Invalid 'tool_choice': no tool is named %q.", t.choice.Name)
		}
	}
	r.Tools = t
	return nil
}

// toolConstraint builds the grammar of r's tools in the model's format.
func (c *codec) toolConstraint(r *genRequest) *apiError {
	t := r.Tools
	if !t.active() {
		return nil
	}
	if r.Constraint != nil {
		return badRequest(r.Constraint.param, "invalid_value", "Invalid '%s': an output constraint cannot be combined with tools unless tool_choice is \"none\".", r.Constraint.param)
	}
	if c.toolFormat == "" {
		return badRequest("tools", "invalid_value", "Invalid 'tools': the model's chat template has no tool-call format this server can read (supported: Hermes/Qwen <tool_call>, Llama 3 JSON, Mistral [TOOL_CALLS]); send tool_choice \"none\" to render the tools without calls.")
	}
	g, err := constraint.ToolGrammar(c.toolFormat, t.tools, t.choice, t.parallel, constraint.DefaultLimits)
	if err != nil {
		return constraintErr("tools", schema.ConstraintTools, err)
	}
	r.Constraint = &constraintSpec{kind: schema.ConstraintTools, param: "tools", gbnf: g}
	return nil
}

// toolsMeta is what a response needs to write calls.
type toolsMeta struct {
	format constraint.ToolFormat
}

// parsedCall is a call with its id, as the response writes it.
type parsedCall struct {
	id, name, args string
}

// parseCalls reads the calls out of an answer (nil: the answer is text).
// An answer that finished with finish reason length keeps its complete
// calls when the limit cut the last one (constraint.ParseTruncatedToolCalls);
// the finish reason stays length.
func (t *toolsMeta) parseCalls(answer []byte, finish string) (text []byte, calls []parsedCall) {
	txt, cs, ok := parseToolCalls(t.format, string(answer), finish)
	if !ok {
		return answer, nil
	}
	calls = make([]parsedCall, len(cs))
	for i, c := range cs {
		calls[i] = parsedCall{id: newCallID(), name: c.Name, args: c.Arguments}
	}
	return []byte(txt), calls
}

// parseToolCalls parses an answer that finished with finish: a truncated
// one (length) keeps its complete calls.
func parseToolCalls(format constraint.ToolFormat, answer, finish string) (string, []constraint.ToolCall, bool) {
	if finish == schema.FinishLength {
		return constraint.ParseTruncatedToolCalls(format, answer)
	}
	return constraint.ParseToolCalls(format, answer)
}

// newCallID is a fresh tool call id, "call_" and 24 random characters.
func newCallID() string {
	const alpha = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	var b [24]byte
	rand.Read(b[:])
	for i := range b {
		b[i] = alpha[int(b[i])%len(alpha)]
	}
	return "call_" + string(b[:])
}

// appendToolCalls appends chat's "tool_calls":[…] field (after a comma).
func appendToolCalls(dst []byte, calls []parsedCall) []byte {
	dst = append(dst, `,"tool_calls":[`...)
	for i, c := range calls {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"id":`...)
		dst = appendJSONString(dst, c.id)
		dst = append(dst, `,"type":"function","function":{"name":`...)
		dst = appendJSONString(dst, c.name)
		dst = append(dst, `,"arguments":`...)
		dst = appendJSONString(dst, c.args)
		dst = append(dst, "}}"...)
	}
	return append(dst, ']')
}

// toolMessages rewrites a conversation with tools into picometer's own
// chat format (the byte vocabulary's, and a real vocabulary's without a
// template): the tools are a system message ("# Tools" and one JSON
// function per line) before the rest, an assistant's calls are appended
// to its content in FormatPicometer, and a tool result is a user message
// "<tool_response>{content}</tool_response>".
func toolMessages(msgs []chatMessage, tools json.RawMessage) []chatMessage {
	var out []chatMessage
	if len(tools) > 0 {
		var items []struct {
			Function json.RawMessage `json:"function"`
		}
		json.Unmarshal(tools, &items)
		var sb strings.Builder
		sb.WriteString("# Tools\nCall a tool as <tool_call>{\"name\": NAME, \"arguments\": {…}}</tool_call>. The tools:")
		for _, it := range items {
			sb.WriteByte('\n')
			sb.Write(it.Function)
		}
		out = append(out, chatMessage{Role: "system", Content: sb.String()})
	}
	for _, m := range msgs {
		switch {
		case m.Role == "tool":
			m = chatMessage{Role: "user", Content: "<tool_response>" + m.Content + "</tool_response>"}
		case len(m.ToolCalls) > 0:
			var sb strings.Builder
			sb.WriteString(m.Content)
			for _, c := range m.ToolCalls {
				sb.WriteString(`<tool_call>{"name": `)
				b, _ := json.Marshal(c.Name)
				sb.Write(b)
				sb.WriteString(`, "arguments": `)
				sb.WriteString(c.Arguments)
				sb.WriteString("}</tool_call>")
			}
			m = chatMessage{Role: "assistant", Content: sb.String()}
		}
		out = append(out, m)
	}
	return out
}

var _ = tokenizer.ToolCall{}

// finishToolCalls is chat's finish_reason for an answer that calls tools
// (the request event keeps "stop").
const finishToolCalls = "tool_calls"

// argFragment is the most argument bytes one streamed chunk carries.
const argFragment = 32

// appendToolCallChunks appends a streamed answer's calls as chat chunks,
// as OpenAI streams them: per call, a first delta with its index, id,
// type and name (arguments ""), then its arguments in fragments.
func (m *respMeta) appendToolCallChunks(dst []byte, calls []parsedCall, completion int) []byte {
	for i, c := range calls {
		dst = m.appendToolDelta(dst, i, &c, "", true, completion)
		for a := c.args; len(a) > 0; {
			n := min(len(a), argFragment)
			for n < len(a) && !utf8.RuneStart(a[n]) { // whole characters
				n++
			}
			dst = m.appendToolDelta(dst, i, &c, a[:n], false, completion)
			a = a[n:]
		}
	}
	return dst
}

// appendToolDelta appends one chunk with a delta.tool_calls entry.
func (m *respMeta) appendToolDelta(dst []byte, index int, c *parsedCall, args string, first bool, completion int) []byte {
	dst = append(dst, "data: "...)
	dst = m.appendHead(dst, "chat.completion.chunk")
	dst = append(dst, `,"choices":[{"index":0,"delta":{"tool_calls":[{"index":`...)
	dst = strconv.AppendInt(dst, int64(index), 10)
	if first {
		dst = append(dst, `,"id":`...)
		dst = appendJSONString(dst, c.id)
		dst = append(dst, `,"type":"function","function":{"name":`...)
		dst = appendJSONString(dst, c.name)
		dst = append(dst, `,"arguments":""}`...)
	} else {
		dst = append(dst, `,"function":{"arguments":`...)
		dst = appendJSONString(dst, args)
		dst = append(dst, '}')
	}
	dst = append(dst, `}]},"logprobs":null,"finish_reason":null}]`...)
	switch {
	case m.continuousUsage:
		dst = append(dst, `,"usage":`...)
		dst = appendRunningUsage(dst, m.promptTokens, completion)
	case m.includeUsage:
		dst = append(dst, `,"usage":null`...)
	}
	return append(dst, "}\n\n"...)
}
