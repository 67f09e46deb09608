package daemon

import (
	"fmt"
	"strings"

	json "github.com/goccy/go-json"

	"github.com/picometer/picometer/native"
	"github.com/picometer/picometer/tokenizer"
)

// chatMessage is one decoded chat message.
type chatMessage struct {
	Role    string // "system", "user" or "assistant" ("developer" is read as "system"); "tool" on /tokenize
	Content string // "" for an assistant turn that only calls tools ("content": null)
	Name    string
	// ToolCalls (assistant) and ToolCallID (tool) are accepted on /tokenize,
	// which renders them with the model's chat template.
	ToolCalls  []tokenizer.ToolCall
	ToolCallID string
}

// templateMessages converts msgs for the chat template.
func templateMessages(msgs []chatMessage) []tokenizer.Message {
	tm := make([]tokenizer.Message, len(msgs))
	for i, m := range msgs {
		tm[i] = tokenizer.Message{Role: m.Role, Content: m.Content, Name: m.Name, ToolCalls: m.ToolCalls, ToolCallID: m.ToolCallID}
	}
	return tm
}

// hasTools reports whether a conversation holds tool calls or results.
func hasTools(msgs []chatMessage) bool {
	for _, m := range msgs {
		if m.Role == "tool" || len(m.ToolCalls) > 0 {
			return true
		}
	}
	return false
}

// renderChat appends the prompt of a conversation, using picometer's chat
// template for its byte-level models:
//
//	<|bos|>
//	for each message:  <|system|> | <|user|> | <|assistant|>   (by role; developer → <|system|>)
//	                   the UTF-8 bytes of its content
//	                   <|end|>
//	<|assistant|>                                              (the turn the model writes)
//
// The model's turn ends when it emits <|end|> (or <|eos|>): chat requests
// pass <|end|> to the engine as a stop token. Control tokens the model emits
// produce no text. A content given as a list of text parts is joined with
// "\n" (as vLLM does).
func renderChat(dst []int32, msgs []chatMessage) []int32 {
	return renderChatTools(dst, msgs, nil)
}

// renderChatTools is renderChat for a conversation that may have tools,
// tool calls and tool results: they are written in picometer's own format
// (toolMessages).
func renderChatTools(dst []int32, msgs []chatMessage, tools json.RawMessage) []int32 {
	if len(tools) > 0 || hasTools(msgs) {
		msgs = toolMessages(msgs, tools)
	}
	dst = append(dst, native.TokBOS)
	for _, m := range msgs {
		dst = append(dst, roleToken(m.Role))
		for i := 0; i < len(m.Content); i++ {
			dst = append(dst, int32(m.Content[i]))
		}
		dst = append(dst, native.TokEnd)
	}
	return append(dst, native.TokAssistant)
}

func roleToken(role string) int32 {
	switch role {
	case "system":
		return native.TokSystem
	case "user":
		return native.TokUser
	case "assistant":
		return native.TokAssistant
	}
	panic("BUG: daemon: renderChat: role " + role + " was not validated")
}

// decodeMessages reads the messages of a chat request. With tools (the
// /tokenize endpoints), assistant tool_calls and "tool" messages are
// read, as OpenAI's API sends them; otherwise they are refused, as tool
// calling is.
func decodeMessages(raw json.RawMessage, tools bool) ([]chatMessage, *apiError) {
	var items []json.RawMessage
	if raw[0] != '[' || json.Unmarshal(raw, &items) != nil {
		return nil, badRequest("messages", "invalid_type", "Invalid type for 'messages': expected an array of messages, but got %s instead.", kindOf(raw))
	}
	if len(items) == 0 {
		return nil, badRequest("messages", "invalid_value", "Invalid 'messages': expected an array with at least one message, but got an empty array.")
	}
	msgs := make([]chatMessage, 0, len(items))
	for i, it := range items {
		p := fmt.Sprintf("messages[%d]", i)
		d, err := newDecoderPrefixed(it, p+".")
		if err != nil {
			return nil, err
		}
		var m chatMessage
		if tools {
			if r, _, _ := d.str("role"); r == "tool" {
				m.Role = "tool"
			}
		}
		if m.Role == "" {
			if m.Role, err = decodeRole(d, p); err != nil {
				return nil, err
			}
		}
		if raw, ok := d.get("tool_calls"); ok && !isEmptyArray(raw) && string(raw) != "null" {
			if !tools {
				return nil, badRequest(p+".tool_calls", "unsupported_parameter", "Unsupported parameter '%s.tool_calls': tool calling is not supported.", p)
			}
			if m.Role != "assistant" {
				return nil, badRequest(p+".tool_calls", "invalid_value", "Invalid '%s.tool_calls': only assistant messages have tool calls.", p)
			}
			if m.ToolCalls, err = decodeToolCalls(raw, p+".tool_calls"); err != nil {
				return nil, err
			}
		}
		if m.Name, _, err = d.str("name"); err != nil {
			return nil, err
		}
		if m.Role == "tool" {
			id, ok, err := d.str("tool_call_id")
			if err != nil {
				return nil, err
			}
			if !ok {
				return nil, badRequest(p+".tool_call_id", "missing_required_parameter", "Missing required parameter: '%s.tool_call_id'.", p)
			}
			m.ToolCallID = id
		}
		if raw, ok := d.get("content"); len(m.ToolCalls) > 0 && (!ok || string(raw) == "null") {
			// an assistant turn that only calls tools: vLLM passes "" to a
			// template that takes string content
		} else if m.Content, err = decodeContent(d, p, chatPartType); err != nil {
			return nil, err
		}
		msgs = append(msgs, m)
	}
	return msgs, nil
}

// decodeToolCalls reads an assistant message's tool_calls (at path p):
// each {"id", "type": "function", "function": {"name", "arguments"}}, the
// arguments a string holding a JSON object, as OpenAI sends them.
func decodeToolCalls(raw json.RawMessage, p string) ([]tokenizer.ToolCall, *apiError) {
	var items []json.RawMessage
	if raw[0] != '[' || json.Unmarshal(raw, &items) != nil {
		return nil, badRequest(p, "invalid_type", "Invalid type for '%s': expected an array of tool calls, but got %s instead.", p, kindOf(raw))
	}
	calls := make([]tokenizer.ToolCall, len(items))
	for i, it := range items {
		pp := fmt.Sprintf("%s[%d]", p, i)
		d, err := newDecoderPrefixed(it, pp+".")
		if err != nil {
			return nil, err
		}
		c := &calls[i]
		if c.ID, _, err = d.str("id"); err != nil {
			return nil, err
		}
		typ, ok, err := d.str("type")
		if err != nil {
			return nil, err
		}
		if ok && typ != "function" {
			return nil, badRequest(pp+".type", "invalid_value", "Invalid value for '%s.type': only \"function\" is supported, but got %q.", pp, typ)
		}
		c.Type = "function"
		fraw, ok := d.get("function")
		if !ok {
			return nil, badRequest(pp+".function", "missing_required_parameter", "Missing required parameter: '%s.function'.", pp)
		}
		fd, err := newDecoderPrefixed(fraw, pp+".function.")
		if err != nil {
			return nil, err
		}
		if c.Name, ok, err = fd.str("name"); err != nil {
			return nil, err
		} else if !ok {
			return nil, badRequest(pp+".function.name", "missing_required_parameter", "Missing required parameter: '%s.function.name'.", pp)
		}
		if c.Arguments, ok, err = fd.str("arguments"); err != nil {
			return nil, err
		} else if !ok {
			return nil, badRequest(pp+".function.arguments", "missing_required_parameter", "Missing required parameter: '%s.function.arguments'.", pp)
		}
		var obj map[string]json.RawMessage
		if json.Unmarshal([]byte(c.Arguments), &obj) != nil {
			return nil, badRequest(pp+".function.arguments", "invalid_value", "Invalid '%s.function.arguments': expected a string holding a JSON object.", pp)
		}
	}
	return calls, nil
}

// decodeTools reads a request's tools: OpenAI function tool definitions,
// each {"type": "function", "function": {"name", …}}, kept as sent for the
// chat template.
func decodeTools(raw json.RawMessage) (json.RawMessage, *apiError) {
	var items []json.RawMessage
	if raw[0] != '[' || json.Unmarshal(raw, &items) != nil {
		return nil, badRequest("tools", "invalid_type", "Invalid type for 'tools': expected an array of tools, but got %s instead.", kindOf(raw))
	}
	for i, it := range items {
		p := fmt.Sprintf("tools[%d]", i)
		var t struct {
			Type     *string `json:"type"`
			Function *struct {
				Name *string `json:"name"`
			} `json:"function"`
		}
		if it[0] != '{' || json.Unmarshal(it, &t) != nil {
			return nil, badRequest(p, "invalid_type", "Invalid type for '%s': expected a tool object, but got %s instead.", p, kindOf(it))
		}
		switch {
		case t.Type == nil || *t.Type != "function":
			return nil, badRequest(p+".type", "invalid_value", "Invalid value for '%s.type': only \"function\" tools are supported.", p)
		case t.Function == nil || t.Function.Name == nil || *t.Function.Name == "":
			return nil, badRequest(p+".function.name", "missing_required_parameter", "Missing required parameter: '%s.function.name'.", p)
		}
	}
	if len(items) == 0 {
		return nil, nil
	}
	return raw, nil
}

// decodeRole reads a message's role: system, user or assistant, with
// developer read as system; tool and function messages are refused (no tool
// calling). Chat messages and Responses message items share it.
func decodeRole(d *decoder, p string) (string, *apiError) {
	role, ok, err := d.str("role")
	if err != nil {
		return "", err
	}
	if !ok {
		return "", badRequest(p+".role", "missing_required_parameter", "Missing required parameter: '%s.role'.", p)
	}
	switch role {
	case "system", "user", "assistant":
		return role, nil
	case "developer":
		return "system", nil
	case "tool", "function":
		return "", badRequest(p+".role", "unsupported_parameter", "Unsupported value for '%s.role': %q messages are not supported (no tool calling).", p, role)
	default:
		return "", badRequest(p+".role", "invalid_value", "Invalid value for '%s.role': %q is not one of system, developer, user or assistant.", p, role)
	}
}

// decodeContent reads a message's content: a string or a list of text
// parts, joined with "\n". partType checks each part's type (its path pp):
// chatPartType for chat's "text" parts, inputPartType for the Responses
// API's input_text/output_text parts.
func decodeContent(d *decoder, p string, partType func(pp, typ string) *apiError) (string, *apiError) {
	raw, ok := d.get("content")
	if !ok {
		return "", badRequest(p+".content", "missing_required_parameter", "Missing required parameter: '%s.content'.", p)
	}
	if raw[0] == '"' {
		s, _, err := d.str("content")
		return s, err
	}
	var parts []json.RawMessage
	if raw[0] != '[' || json.Unmarshal(raw, &parts) != nil {
		return "", d.typeErr("content", "a string or an array of text parts", raw)
	}
	var sb strings.Builder
	for j, part := range parts {
		pp := fmt.Sprintf("%s.content[%d]", p, j)
		pd, err := newDecoderPrefixed(part, pp+".")
		if err != nil {
			return "", err
		}
		typ, _, err := pd.str("type")
		if err != nil {
			return "", err
		}
		if err := partType(pp, typ); err != nil {
			return "", err
		}
		text, ok, err := pd.str("text")
		if err != nil {
			return "", err
		}
		if !ok {
			return "", badRequest(pp+".text", "missing_required_parameter", "Missing required parameter: '%s.text'.", pp)
		}
		if j > 0 {
			sb.WriteByte('\n')
		}
		sb.WriteString(text)
	}
	return sb.String(), nil
}

// chatPartType accepts chat's text parts.
func chatPartType(pp, typ string) *apiError {
	if typ != "text" {
		return badRequest(pp+".type", "unsupported_parameter", "Unsupported value for '%s.type': only \"text\" parts are supported, but got %q.", pp, typ)
	}
	return nil
}
