package daemon

import (
	"fmt"
	"strings"

	json "github.com/goccy/go-json"

	"github.com/picometer/picometer/native"
)

// chatMessage is one decoded chat message.
type chatMessage struct {
	Role    string // "system", "user" or "assistant" ("developer" is read as "system")
	Content string
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

// decodeMessages reads the messages of a chat request.
func decodeMessages(raw json.RawMessage) ([]chatMessage, *apiError) {
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
		role, err := decodeRole(d, p)
		if err != nil {
			return nil, err
		}
		if _, ok := d.get("tool_calls"); ok {
			return nil, badRequest(p+".tool_calls", "unsupported_parameter", "Unsupported parameter '%s.tool_calls': tool calling is not supported.", p)
		}
		if _, _, err := d.str("name"); err != nil {
			return nil, err
		}
		content, err := decodeContent(d, p, chatPartType)
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, chatMessage{Role: role, Content: content})
	}
	return msgs, nil
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
