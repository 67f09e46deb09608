package daemon

import (
	"fmt"
	"strconv"
	"strings"

	json "github.com/goccy/go-json"

	"github.com/picometer/picometer/schema"
	"github.com/picometer/picometer/tokenizer"
)

// This file is POST /v1/responses, the text subset of OpenAI's Responses
// API: its request decoder (decodeResponses) and its response object
// (appendResponseObject). responses_stream.go streams it. A Responses
// request is a chat: its input items and instructions become chat
// messages, rendered by the model's chat template, and its request event
// has gen_ai.operation.name "chat", the GenAI semantic conventions'
// predefined value for a chat completion (they name no other for this
// API, and tell instrumentations to use the applicable predefined one).
// responses_test.go covers it over real HTTP, fuzz_test.go fuzzes the
// decoder, and testdata/clients.mjs drives it with the npm clients.

// responsesMeta is what a Responses object repeats of its request.
type responsesMeta struct {
	msgID         string // the output message's id
	instructions  string
	hasInstr      bool
	maxOutput     int // max_output_tokens as sent; 0: null
	temperature   float32
	topP          float32
	user          string
	textFormat    json.RawMessage // text.format as sent (nil: text)
	toolChoice    string          // "none", "auto", "required" or "function"
	toolChoiceRaw json.RawMessage // tool_choice as sent (nil: not sent)
	tools         json.RawMessage // the tools as sent
	parallel      bool
}

// decodeResponses decodes a /v1/responses body into r for a vocabulary
// of vocab tokens. input is a string (one user message) or a list of
// message items; instructions, when sent, is a system message before
// them. Fields of a capability picometer lacks (tools, previous_response_id,
// reasoning, background, conversation, prompt templates, images, files,
// non-text output formats, include) are a 400 naming the field.
func decodeResponses(body []byte, r *genRequest, vocab int) *apiError {
	*r = genRequest{Op: schema.OpChat, Responses: true, PromptParam: "input", Temperature: 1, TopP: 1,
		MaxTokensParam: "max_output_tokens"}
	d, err := newDecoder(body)
	if err != nil {
		return err
	}
	if r.Model, _, err = d.str("model"); err != nil {
		return err
	}
	if r.User, _, err = d.str("user"); err != nil {
		return err
	}
	var msgs []chatMessage
	if s, ok, err := d.str("instructions"); err != nil {
		return err
	} else if ok {
		r.Instructions, r.HasInstructions = s, true
		msgs = append(msgs, chatMessage{Role: "system", Content: s})
	}
	raw, ok := d.get("input")
	if !ok {
		return badRequest("input", "missing_required_parameter", "Missing required parameter: 'input'.")
	}
	in, err := decodeInput(raw)
	if err != nil {
		return err
	}
	msgs = append(msgs, in...)
	if err := d.decodeToolsReq(r, true); err != nil {
		return err
	}
	r.Messages = msgs
	r.Prompt = renderChatTools(nil, msgs, r.toolsRaw())

	if _, err := d.maxTokens("max_output_tokens", &r.MaxTokens); err != nil {
		return err
	}
	if err := d.temperatureTopP(r); err != nil {
		return err
	}
	if r.Stream, _, err = d.boolean("stream"); err != nil {
		return err
	}
	// Accepted and without effect: picometer keeps no responses (store is
	// answered false in the object; GET /v1/responses/{id} is a 404),
	// runs one request at a time per slot, and has one service tier.
	if _, _, err := d.boolean("store"); err != nil {
		return err
	}
	if v, _, err := d.boolean("background"); err != nil {
		return err
	} else if v {
		return badRequest("background", "unsupported_parameter", "Unsupported value for 'background': background responses are not supported.")
	}
	if v, ok, err := d.str("truncation"); err != nil {
		return err
	} else if ok && v != "disabled" {
		return badRequest("truncation", "unsupported_parameter", "Unsupported value for 'truncation': only \"disabled\" is supported, but got %s.", strconv.Quote(v))
	}
	for _, k := range []string{"previous_response_id", "conversation", "prompt"} {
		if _, ok := d.get(k); ok {
			return badRequest(k, "unsupported_parameter", "Unsupported parameter '%s': this server keeps no responses, conversations or prompt templates; send the whole conversation in 'input'.", k)
		}
	}
	if raw, ok := d.get("reasoning"); ok && !isEmptyObject(raw) {
		return badRequest("reasoning", "unsupported_parameter", "Unsupported parameter 'reasoning': this model does not reason.")
	}
	if raw, ok := d.get("include"); ok && !isEmptyArray(raw) {
		return badRequest("include", "unsupported_parameter", "Unsupported parameter 'include': no additional output data is available.")
	}
	if _, ok := d.get("top_logprobs"); ok {
		return badRequest("top_logprobs", "unsupported_parameter", "Unsupported parameter 'top_logprobs': this server does not return log probabilities.")
	}
	if raw, ok := d.get("text"); ok {
		td, err := newDecoderPrefixed(raw, "text.")
		if err != nil {
			return err
		}
		if fraw, ok := td.get("format"); ok {
			c, err := decodeResponseFormat(fraw, "text.format", true)
			if err != nil {
				return err
			}
			if c != nil {
				r.Constraint = c
				r.TextFormat = fraw
			}
		}
	}
	if err := d.decodeConstraints(r); err != nil {
		return err
	}
	if err := d.refuseForeign(); err != nil {
		return err
	}
	return nil
}

// decodeInput reads a Responses input: a string (one user message) or a
// list of message items.
func decodeInput(raw json.RawMessage) ([]chatMessage, *apiError) {
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, badRequest("input", "invalid_type", "Invalid 'input': %v", err)
		}
		return []chatMessage{{Role: "user", Content: s}}, nil
	}
	var items []json.RawMessage
	if raw[0] != '[' || json.Unmarshal(raw, &items) != nil {
		return nil, badRequest("input", "invalid_type", "Invalid type for 'input': expected a string or an array of input items, but got %s instead.", kindOf(raw))
	}
	if len(items) == 0 {
		return nil, badRequest("input", "invalid_value", "Invalid 'input': expected a string or an array with at least one item, but got an empty array.")
	}
	msgs := make([]chatMessage, 0, len(items))
	for i, it := range items {
		p := fmt.Sprintf("input[%d]", i)
		d, err := newDecoderPrefixed(it, p+".")
		if err != nil {
			return nil, err
		}
		typ, ok, err := d.str("type")
		if err != nil {
			return nil, err
		}
		switch {
		case typ == "function_call":
			c, err := decodeFunctionCallItem(d, p)
			if err != nil {
				return nil, err
			}
			if n := len(msgs); n > 0 && msgs[n-1].Role == "assistant" && len(msgs[n-1].ToolCalls) > 0 {
				msgs[n-1].ToolCalls = append(msgs[n-1].ToolCalls, c)
			} else {
				msgs = append(msgs, chatMessage{Role: "assistant", ToolCalls: []tokenizer.ToolCall{c}})
			}
			continue
		case typ == "function_call_output":
			id, ok, err := d.str("call_id")
			if err != nil {
				return nil, err
			}
			if !ok {
				return nil, badRequest(p+".call_id", "missing_required_parameter", "Missing required parameter: '%s.call_id'.", p)
			}
			out, ok, err := d.str("output")
			if err != nil {
				return nil, err
			}
			if !ok {
				return nil, badRequest(p+".output", "missing_required_parameter", "Missing required parameter: '%s.output'.", p)
			}
			msgs = append(msgs, chatMessage{Role: "tool", Content: out, ToolCallID: id})
			continue
		case ok && typ != "message":
			return nil, badRequest(p+".type", "unsupported_parameter", "Unsupported value for '%s.type': only \"message\", \"function_call\" and \"function_call_output\" items are supported (no reasoning items or item references), but got %s.", p, strconv.Quote(typ))
		}
		role, err := decodeRole(d, p)
		if err != nil {
			return nil, err
		}
		content, err := decodeContent(d, p, inputPartType)
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, chatMessage{Role: role, Content: content})
	}
	return msgs, nil
}

// decodeFunctionCallItem reads a function_call input item (a call the
// model made earlier): call_id, name and arguments.
func decodeFunctionCallItem(d *decoder, p string) (tokenizer.ToolCall, *apiError) {
	c := tokenizer.ToolCall{Type: "function"}
	var ok bool
	var err *apiError
	for _, f := range []struct {
		key string
		dst *string
	}{{"call_id", &c.ID}, {"name", &c.Name}, {"arguments", &c.Arguments}} {
		if *f.dst, ok, err = d.str(f.key); err != nil {
			return c, err
		} else if !ok {
			return c, badRequest(p+"."+f.key, "missing_required_parameter", "Missing required parameter: '%s.%s'.", p, f.key)
		}
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal([]byte(c.Arguments), &obj) != nil {
		return c, badRequest(p+".arguments", "invalid_value", "Invalid '%s.arguments': expected a string holding a JSON object.", p)
	}
	return c, nil
}

// inputPartType accepts the Responses API's text parts (input_text,
// output_text) and names the media ones it cannot read.
func inputPartType(pp, typ string) *apiError {
	switch typ {
	case "input_text", "output_text":
		return nil
	case "input_image", "input_file", "input_audio":
		return badRequest(pp+".type", "unsupported_parameter", "Unsupported value for '%s.type': %s; this model reads text only (input_text or output_text parts).", pp, strconv.Quote(typ))
	default:
		return badRequest(pp+".type", "unsupported_parameter", "Unsupported value for '%s.type': only \"input_text\" and \"output_text\" parts are supported, but got %s.", pp, strconv.Quote(typ))
	}
}

// Response statuses.
const (
	statusInProgress = "in_progress"
	statusCompleted  = "completed"
	statusIncomplete = "incomplete"
)

// responseStatus is the status of a finished response: completed when the
// model stopped by itself, incomplete when it hit max_output_tokens or the
// context.
func responseStatus(finish string) string {
	if finish == schema.FinishLength {
		return statusIncomplete
	}
	return statusCompleted
}

// appendResponseObject appends a Responses object. b nil is a response in
// progress (empty output, usage null); otherwise output is one assistant
// message holding text as output_text and usage has picometer's metrics
// in usage.extra (as the other endpoints' usage does).
func (m *respMeta) appendResponseObject(dst, text []byte, finish string, b *schema.RequestBody) []byte {
	var calls []parsedCall
	if b != nil && m.tools != nil {
		text, calls = m.tools.parseCalls(text)
	}
	return m.appendResponseCalls(dst, text, calls, finish, b)
}

// appendResponseCalls is appendResponseObject for an answer already split
// into text and calls (a stream's events and its final object must name
// the same call ids).
func (m *respMeta) appendResponseCalls(dst, text []byte, calls []parsedCall, finish string, b *schema.RequestBody) []byte {
	r := m.resp
	status := statusInProgress
	if b != nil {
		status = responseStatus(finish)
	}
	dst = append(dst, `{"id":`...)
	dst = appendJSONString(dst, m.id)
	dst = append(dst, `,"object":"response","created_at":`...)
	dst = strconv.AppendInt(dst, m.created, 10)
	dst = append(dst, `,"status":"`...)
	dst = append(dst, status...)
	dst = append(dst, `","background":false,"error":null,"incomplete_details":`...)
	if status == statusIncomplete {
		dst = append(dst, `{"reason":"max_output_tokens"}`...)
	} else {
		dst = append(dst, "null"...)
	}
	dst = append(dst, `,"instructions":`...)
	if r.hasInstr {
		dst = appendJSONString(dst, r.instructions)
	} else {
		dst = append(dst, "null"...)
	}
	dst = append(dst, `,"max_output_tokens":`...)
	if r.maxOutput > 0 {
		dst = strconv.AppendInt(dst, int64(r.maxOutput), 10)
	} else {
		dst = append(dst, "null"...)
	}
	dst = append(dst, `,"model":`...)
	dst = appendJSONString(dst, m.model)
	dst = append(dst, `,"output":[`...)
	if b != nil {
		if len(text) > 0 || len(calls) == 0 {
			dst = m.appendOutputMessage(dst, text, status)
			if len(calls) > 0 {
				dst = append(dst, ',')
			}
		}
		for i := range calls {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendFunctionCallItem(dst, &calls[i], calls[i].args, statusCompleted)
		}
	}
	dst = append(dst, `],"parallel_tool_calls":`...)
	dst = strconv.AppendBool(dst, r.parallel)
	dst = append(dst, `,"previous_response_id":null,"reasoning":{"effort":null,"summary":null},"service_tier":"default","store":false,"temperature":`...)
	dst = appendFloat(dst, float64(r.temperature))
	dst = append(dst, `,"text":{"format":`...)
	if len(r.textFormat) > 0 {
		dst = append(dst, r.textFormat...)
	} else {
		dst = append(dst, `{"type":"text"}`...)
	}
	dst = append(dst, `},"tool_choice":`...)
	if len(r.toolChoiceRaw) > 0 {
		dst = append(dst, r.toolChoiceRaw...)
	} else {
		dst = appendJSONString(dst, r.toolChoice)
	}
	dst = append(dst, `,"tools":`...)
	if len(r.tools) > 0 {
		dst = append(dst, r.tools...)
	} else {
		dst = append(dst, "[]"...)
	}
	dst = append(dst, `,"top_p":`...)
	dst = appendFloat(dst, float64(r.topP))
	dst = append(dst, `,"truncation":"disabled","usage":`...)
	if b != nil {
		dst = appendResponsesUsage(dst, b)
	} else {
		dst = append(dst, "null"...)
	}
	dst = append(dst, `,"user":`...)
	dst = appendJSONNullString(dst, r.user)
	return append(dst, `,"metadata":{}}`...)
}

// appendFunctionCallItem appends a function_call output item with the
// given arguments and status.
func appendFunctionCallItem(dst []byte, c *parsedCall, args, status string) []byte {
	dst = append(dst, `{"id":`...)
	dst = appendJSONString(dst, c.itemID())
	dst = append(dst, `,"type":"function_call","status":"`...)
	dst = append(dst, status...)
	dst = append(dst, `","call_id":`...)
	dst = appendJSONString(dst, c.id)
	dst = append(dst, `,"name":`...)
	dst = appendJSONString(dst, c.name)
	dst = append(dst, `,"arguments":`...)
	dst = appendJSONString(dst, args)
	return append(dst, '}')
}

// itemID is the Responses item id of a call: "fc_" and its call id's
// random part.
func (c *parsedCall) itemID() string { return "fc_" + strings.TrimPrefix(c.id, "call_") }

// appendOutputMessage appends the output message item.
func (m *respMeta) appendOutputMessage(dst, text []byte, status string) []byte {
	dst = append(dst, `{"id":`...)
	dst = appendJSONString(dst, m.resp.msgID)
	dst = append(dst, `,"type":"message","status":"`...)
	dst = append(dst, status...)
	dst = append(dst, `","role":"assistant","content":[`...)
	dst = appendOutputText(dst, text)
	return append(dst, "]}"...)
}

// appendOutputText appends an output_text content part.
func appendOutputText(dst, text []byte) []byte {
	dst = append(dst, `{"type":"output_text","text":`...)
	dst = appendJSONString(dst, text)
	return append(dst, `,"annotations":[],"logprobs":[]}`...)
}

// appendResponsesUsage appends a Responses usage object: input, output and
// total tokens, their details, and usage.extra (see appendUsage).
func appendResponsesUsage(dst []byte, b *schema.RequestBody) []byte {
	dst = append(dst, `{"input_tokens":`...)
	dst = strconv.AppendInt(dst, int64(b.PromptTokens), 10)
	dst = append(dst, `,"input_tokens_details":{"cached_tokens":`...)
	dst = strconv.AppendInt(dst, int64(b.CachedTokens), 10)
	dst = append(dst, `},"output_tokens":`...)
	dst = strconv.AppendInt(dst, int64(b.CompletionTokens), 10)
	dst = append(dst, `,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":`...)
	dst = strconv.AppendInt(dst, int64(b.PromptTokens+b.CompletionTokens), 10)
	dst = appendUsageExtra(dst, b)
	return append(dst, '}')
}

// newResponsesMeta is the responsesMeta of a decoded request, before
// fitContext resolves its max_output_tokens.
func newResponsesMeta(id string, r *genRequest) *responsesMeta {
	rm := &responsesMeta{msgID: "msg_" + strings.TrimPrefix(id, "resp_"), instructions: r.Instructions,
		hasInstr: r.HasInstructions, maxOutput: r.MaxTokens, temperature: r.Temperature, topP: r.TopP, user: r.User,
		textFormat: r.TextFormat, toolChoice: "none"}
	if r.Tools != nil {
		rm.toolChoice, rm.tools, rm.parallel = r.Tools.choice.Mode, r.Tools.flatRaw, r.Tools.parallel
		rm.toolChoiceRaw = r.Tools.choiceRaw
	}
	return rm
}
