package daemon

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"strings"

	json "github.com/goccy/go-json"

	"github.com/picometer/picometer/native"
	"github.com/picometer/picometer/schema"
)

// genRequest is a decoded and validated /v1/completions or
// /v1/chat/completions request, with its prompt already tokenized.
type genRequest struct {
	Op          string  // schema.OpTextCompletion or schema.OpChat
	Model       string  // as sent; "" means the served model
	Prompt      []int32 // the tokens the engine prefills
	PromptParam string  // "prompt" or "messages", for errors about the prompt

	// What the prompt was made from, for a model with its own tokenizer
	// (codec.prompt re-tokenizes): a chat's messages, or a completion's
	// text (IsText).
	Messages []chatMessage
	Text     string
	IsText   bool

	MaxTokens      int    // 0: not sent (the endpoint's default applies)
	MaxTokensParam string // "max_tokens" or "max_completion_tokens"
	Temperature    float32
	TopP           float32
	TopK           int
	Seed           uint64
	HasSeed        bool
	Stop           []string
	User           string

	PresencePenalty   float32 // -2..2 (OpenAI)
	FrequencyPenalty  float32 // -2..2 (OpenAI)
	RepetitionPenalty float32 // 0 (not sent) or > 0 (vLLM's extension; 1 = off)

	Logprobs    bool // chat logprobs: true; completions logprobs: 0..5 sent
	TopLogprobs int  // chat top_logprobs (0..20); completions logprobs

	Stream          bool
	IncludeUsage    bool // stream_options.include_usage: a final usage chunk
	ContinuousUsage bool // stream_options.continuous_usage_stats (vLLM): usage in every chunk
	ReturnTokenIDs  bool // return_token_ids (vLLM): token ids beside the text

	// POST /v1/responses (responses.go): a chat answered as a Responses
	// object, with its instructions echoed back.
	Responses       bool
	Instructions    string
	HasInstructions bool

	// Constraints (constraint.go, tools.go): the output's grammar (nil:
	// unconstrained), min_p, and the tools (nil: none).
	Constraint *constraintSpec
	MinP       float32
	Tools      *toolsReq
	TextFormat json.RawMessage // Responses: text.format as sent, echoed back
}

// Request limits.
const (
	maxStopStrings = 16  // stop: at most this many strings
	maxStopBytes   = 256 // each stop string at most this many bytes
)

// decodeCompletion decodes a /v1/completions body into r. Unknown fields
// are ignored, as OpenAI-compatible servers do; known fields of the wrong
// type, out of range or unsupported are a 400 naming the field.
//
// prompt is a string, a list of one string, a list of token ids or a list
// of one list of token ids. A string is tokenized byte by byte after
// <|bos|>; token ids are used as sent. Lists of several prompts are
// rejected (one prompt per request).
func decodeCompletion(body []byte, r *genRequest) *apiError {
	return decodeCompletionVocab(body, r, native.VocabSize)
}

// decodeCompletionVocab is decodeCompletion for a vocabulary of vocab
// tokens (token-id prompts are checked against it).
func decodeCompletionVocab(body []byte, r *genRequest, vocab int) *apiError {
	*r = genRequest{Op: schema.OpTextCompletion, PromptParam: "prompt", Temperature: 1, TopP: 1, MaxTokensParam: "max_tokens"}
	d, err := newDecoder(body)
	if err != nil {
		return err
	}
	raw, ok := d.get("prompt")
	if !ok {
		return badRequest("prompt", "missing_required_parameter", "Missing required parameter: 'prompt'.")
	}
	if r.Prompt, err = decodePrompt(raw, r, vocab); err != nil {
		return err
	}
	if err := d.common(r, vocab); err != nil {
		return err
	}
	if v, ok, err := d.integer("best_of"); err != nil {
		return err
	} else if ok && v != 1 {
		return badRequest("best_of", "unsupported_parameter", "Unsupported value for 'best_of': this server returns one choice per request, so best_of must be 1, but got %d.", v)
	}
	if v, ok, err := d.integer("logprobs"); err != nil {
		return err
	} else if ok {
		if v < 0 || v > 5 {
			return badRequest("logprobs", "invalid_value", "Invalid 'logprobs': expected a value in [0, 5], but got %d instead.", v)
		}
		r.Logprobs, r.TopLogprobs = true, int(v)
	}
	if v, _, err := d.boolean("echo"); err != nil {
		return err
	} else if v {
		return badRequest("echo", "unsupported_parameter", "Unsupported value for 'echo': true is not supported.")
	}
	if v, _, err := d.str("suffix"); err != nil {
		return err
	} else if v != "" {
		return badRequest("suffix", "unsupported_parameter", "Unsupported parameter 'suffix': insertion is not supported.")
	}
	return nil
}

// decodeChat decodes a /v1/chat/completions body into r and renders its
// messages with [renderChat].
func decodeChat(body []byte, r *genRequest) *apiError {
	return decodeChatVocab(body, r, native.VocabSize)
}

// decodeChatVocab is decodeChat for a vocabulary of vocab tokens (top_k is
// clamped to it).
func decodeChatVocab(body []byte, r *genRequest, vocab int) *apiError {
	*r = genRequest{Op: schema.OpChat, PromptParam: "messages", Temperature: 1, TopP: 1, MaxTokensParam: "max_tokens"}
	d, err := newDecoder(body)
	if err != nil {
		return err
	}
	raw, ok := d.get("messages")
	if !ok {
		return badRequest("messages", "missing_required_parameter", "Missing required parameter: 'messages'.")
	}
	msgs, err := decodeMessages(raw, true)
	if err != nil {
		return err
	}
	if err := d.decodeToolsReq(r, false); err != nil {
		return err
	}
	r.Messages = msgs
	r.Prompt = renderChatTools(nil, msgs, r.toolsRaw())
	if err := d.common(r, vocab); err != nil {
		return err
	}
	if set, err := d.maxTokens("max_completion_tokens", &r.MaxTokens); err != nil {
		return err
	} else if set {
		r.MaxTokensParam = "max_completion_tokens"
	}
	if r.Logprobs, _, err = d.boolean("logprobs"); err != nil {
		return err
	}
	if v, ok, err := d.integer("top_logprobs"); err != nil {
		return err
	} else if ok {
		if v < 0 || v > native.MaxTopLogprobs {
			return badRequest("top_logprobs", "invalid_value", "Invalid 'top_logprobs': expected a value in [0, %d], but got %d instead.", native.MaxTopLogprobs, v)
		}
		if v > 0 && !r.Logprobs {
			return badRequest("top_logprobs", "invalid_value", "Invalid 'top_logprobs': 'logprobs' must be true when 'top_logprobs' is set.")
		}
		r.TopLogprobs = int(v)
	}
	if r.Stream && r.Logprobs && r.Tools.active() {
		return badRequest("logprobs", "unsupported_parameter", "Unsupported parameter 'logprobs': a streamed answer that may call tools is held back until it is parsed, and its log probabilities are not streamed; send tool_choice \"none\" or stream false.")
	}
	for _, k := range []string{"functions", "function_call"} {
		if _, ok := d.get(k); ok {
			return badRequest(k, "unsupported_parameter", "Unsupported parameter '%s': the deprecated function calling is not supported; send 'tools' and 'tool_choice'.", k)
		}
	}
	if raw, ok := d.get("response_format"); ok {
		c, err := decodeResponseFormat(raw, "response_format", false)
		if err != nil {
			return err
		}
		if c != nil {
			if err := setConstraint(r, c); err != nil {
				return err
			}
		}
	}
	return nil
}

// toolsRaw is the tools array the chat template renders (nil: none).
func (r *genRequest) toolsRaw() json.RawMessage {
	if r.Tools == nil {
		return nil
	}
	return r.Tools.raw
}

// maxTokens reads an output-token limit named key (max_tokens,
// max_completion_tokens, max_output_tokens) into *dst: at least 1. It
// reports whether the request set it.
func (d *decoder) maxTokens(key string, dst *int) (bool, *apiError) {
	v, ok, err := d.integer(key)
	if err != nil || !ok {
		return false, err
	}
	if v < 1 || v > math.MaxInt32 {
		return false, badRequest(key, "invalid_value", "Invalid '%s': expected a value >= 1, but got %d instead.", key, v)
	}
	*dst = int(v)
	return true, nil
}

// temperatureTopP reads temperature ([0, 2]; 0 is greedy) and top_p ((0, 1]).
func (d *decoder) temperatureTopP(r *genRequest) *apiError {
	if v, ok, err := d.number("temperature"); err != nil {
		return err
	} else if ok {
		if v < 0 || v > 2 {
			return badRequest("temperature", "invalid_value", "Invalid 'temperature': expected a value in [0, 2], but got %v instead.", v)
		}
		r.Temperature = float32(v)
	}
	if v, ok, err := d.number("top_p"); err != nil {
		return err
	} else if ok {
		if v <= 0 || v > 1 {
			return badRequest("top_p", "invalid_value", "Invalid 'top_p': expected a value in (0, 1], but got %v instead.", v)
		}
		r.TopP = float32(v)
	}
	return nil
}

// common decodes the parameters both endpoints share; vocab is the
// vocabulary size top_k is clamped to.
func (d *decoder) common(r *genRequest, vocab int) *apiError {
	var err *apiError
	if r.Model, _, err = d.str("model"); err != nil {
		return err
	}
	if r.User, _, err = d.str("user"); err != nil {
		return err
	}
	if _, err := d.maxTokens("max_tokens", &r.MaxTokens); err != nil {
		return err
	}
	if err := d.temperatureTopP(r); err != nil {
		return err
	}
	if v, ok, err := d.integer("top_k"); err != nil {
		return err
	} else if ok {
		switch {
		case v == -1 || v == 0: // disabled (vLLM uses -1)
		case v < -1:
			return badRequest("top_k", "invalid_value", "Invalid 'top_k': expected -1, 0 (all tokens) or a value >= 1, but got %d instead.", v)
		default:
			r.TopK = int(min(v, int64(vocab)))
		}
	}
	if v, ok, err := d.integer("seed"); err != nil {
		return err
	} else if ok {
		r.Seed, r.HasSeed = uint64(v), true
	}
	if v, ok, err := d.integer("n"); err != nil {
		return err
	} else if ok && v != 1 {
		return badRequest("n", "unsupported_parameter", "Unsupported value for 'n': this server returns one choice per request, so n must be 1, but got %d.", v)
	}
	for _, k := range []string{"presence_penalty", "frequency_penalty"} {
		if v, ok, err := d.number(k); err != nil {
			return err
		} else if ok {
			if v < -2 || v > 2 {
				return badRequest(k, "invalid_value", "Invalid '%s': expected a value in [-2, 2], but got %v instead.", k, v)
			}
			if k == "presence_penalty" {
				r.PresencePenalty = float32(v)
			} else {
				r.FrequencyPenalty = float32(v)
			}
		}
	}
	if v, ok, err := d.number("repetition_penalty"); err != nil {
		return err
	} else if ok {
		if v <= 0 || v > 10 {
			return badRequest("repetition_penalty", "invalid_value", "Invalid 'repetition_penalty': expected a value in (0, 10], but got %v instead.", v)
		}
		r.RepetitionPenalty = float32(v)
	}
	if raw, ok := d.get("logit_bias"); ok {
		if raw[0] != '{' {
			return badRequest("logit_bias", "invalid_type", "Invalid type for 'logit_bias': expected an object, but got %s instead.", kindOf(raw))
		}
		if !isEmptyObject(raw) {
			return badRequest("logit_bias", "unsupported_parameter", "Unsupported parameter 'logit_bias': logit biases are not supported.")
		}
	}
	if raw, ok := d.get("stop"); ok {
		if r.Stop, err = decodeStop(raw); err != nil {
			return err
		}
	}
	if r.Stream, _, err = d.boolean("stream"); err != nil {
		return err
	}
	if r.ReturnTokenIDs, _, err = d.boolean("return_token_ids"); err != nil {
		return err
	}
	if err := d.decodeConstraints(r); err != nil {
		return err
	}
	if err := d.refuseForeign(); err != nil {
		return err
	}
	if raw, ok := d.get("stream_options"); ok {
		if !r.Stream {
			return badRequest("stream_options", "invalid_value", "Invalid 'stream_options': only allowed when 'stream' is true.")
		}
		so, err := newDecoderPrefixed(raw, "stream_options.")
		if err != nil {
			return err
		}
		if r.IncludeUsage, _, err = so.boolean("include_usage"); err != nil {
			return err
		}
		if r.ContinuousUsage, _, err = so.boolean("continuous_usage_stats"); err != nil {
			return err
		}
	}
	return nil
}

// decoder reads the fields of one JSON object. Values that are null count
// as absent.
type decoder struct {
	fields map[string]json.RawMessage
	prefix string // for parameter names in errors
}

func newDecoder(body []byte) (*decoder, *apiError) {
	return newDecoderPrefixed(body, "")
}

func newDecoderPrefixed(body []byte, prefix string) (*decoder, *apiError) {
	param := strings.TrimSuffix(prefix, ".")
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) == 0 {
		if prefix == "" {
			return nil, badRequest("", "invalid_json", "The request body is empty; expected a JSON object.")
		}
	}
	if !json.Valid(body) {
		return nil, badRequest(param, "invalid_json", "The request body is not valid JSON: %s", jsonSyntaxError(body))
	}
	if trimmed[0] != '{' {
		if prefix == "" {
			return nil, badRequest("", "invalid_json", "The request body must be a JSON object, but got %s.", kindOf(trimmed))
		}
		return nil, badRequest(param, "invalid_type", "Invalid type for '%s': expected an object, but got %s instead.", param, kindOf(trimmed))
	}
	d := &decoder{prefix: prefix}
	if err := json.Unmarshal(body, &d.fields); err != nil {
		return nil, badRequest(param, "invalid_json", "The request body is not valid JSON: %v", err)
	}
	return d, nil
}

// jsonSyntaxError describes why body is not JSON, with the byte offset.
func jsonSyntaxError(body []byte) string {
	var v any
	err := json.Unmarshal(body, &v)
	if se, ok := err.(*json.SyntaxError); ok {
		return fmt.Sprintf("%v (at byte %d)", se, se.Offset)
	}
	if err != nil {
		return err.Error()
	}
	return "invalid JSON"
}

func (d *decoder) get(key string) (json.RawMessage, bool) {
	raw, ok := d.fields[key]
	if !ok || string(raw) == "null" {
		return nil, false
	}
	return raw, true
}

func (d *decoder) typeErr(key, want string, raw []byte) *apiError {
	p := d.prefix + key
	return badRequest(p, "invalid_type", "Invalid type for '%s': expected %s, but got %s instead.", p, want, kindOf(raw))
}

func (d *decoder) str(key string) (string, bool, *apiError) {
	raw, ok := d.get(key)
	if !ok {
		return "", false, nil
	}
	var s string
	if raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", false, d.typeErr(key, "a string", raw)
	}
	return s, true, nil
}

func (d *decoder) boolean(key string) (bool, bool, *apiError) {
	raw, ok := d.get(key)
	if !ok {
		return false, false, nil
	}
	switch string(raw) {
	case "true":
		return true, true, nil
	case "false":
		return false, true, nil
	}
	return false, false, d.typeErr(key, "a boolean", raw)
}

func (d *decoder) integer(key string) (int64, bool, *apiError) {
	raw, ok := d.get(key)
	if !ok {
		return 0, false, nil
	}
	v, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		if isNumber(raw) && isIntegerLiteral(raw) {
			p := d.prefix + key
			return 0, false, badRequest(p, "invalid_value", "Invalid '%s': integer %s out of range.", p, raw)
		}
		return 0, false, d.typeErr(key, "an integer", raw)
	}
	return v, true, nil
}

func (d *decoder) number(key string) (float64, bool, *apiError) {
	raw, ok := d.get(key)
	if !ok {
		return 0, false, nil
	}
	if !isNumber(raw) {
		return 0, false, d.typeErr(key, "a number", raw)
	}
	v, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || math.IsInf(v, 0) {
		p := d.prefix + key
		return 0, false, badRequest(p, "invalid_value", "Invalid '%s': number %s out of range.", p, raw)
	}
	return v, true, nil
}

// kindOf names the JSON type of a valid JSON value, for error messages.
func kindOf(raw []byte) string {
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	if isIntegerLiteral(raw) {
		return "an integer"
	}
	return "a decimal"
}

func isNumber(raw []byte) bool {
	return len(raw) > 0 && (raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9'))
}

func isIntegerLiteral(raw []byte) bool {
	return isNumber(raw) && bytes.IndexAny(raw, ".eE") < 0
}

func isEmptyArray(raw []byte) bool {
	var a []json.RawMessage
	return raw[0] == '[' && json.Unmarshal(raw, &a) == nil && len(a) == 0
}

func isEmptyObject(raw []byte) bool {
	var m map[string]json.RawMessage
	return raw[0] == '{' && json.Unmarshal(raw, &m) == nil && len(m) == 0
}

// decodePrompt tokenizes a completions prompt.
func decodePrompt(raw json.RawMessage, r *genRequest, vocab int) ([]int32, *apiError) {
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, badRequest("prompt", "invalid_type", "Invalid 'prompt': %v", err)
		}
		r.Text, r.IsText = s, true
		return tokenizeText(nil, s), nil
	case '[':
	default:
		return nil, badRequest("prompt", "invalid_type", "Invalid type for 'prompt': expected a string, a list of strings or a list of token ids, but got %s instead.", kindOf(raw))
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, badRequest("prompt", "invalid_type", "Invalid 'prompt': %v", err)
	}
	if len(items) == 0 {
		return nil, badRequest("prompt", "invalid_value", "Invalid 'prompt': the list is empty.")
	}
	switch items[0][0] {
	case '"', '[':
		if len(items) > 1 {
			return nil, badRequest("prompt", "unsupported_parameter", "Unsupported 'prompt': a list of %d prompts; this server serves one prompt per request (send one request per prompt).", len(items))
		}
		if items[0][0] == '"' {
			return decodePrompt(items[0], r, vocab)
		}
		return decodeTokenIDs(items[0], "prompt[0]", vocab)
	}
	return decodeTokenIDs(raw, "prompt", vocab)
}

// decodeTokenIDs reads a non-empty list of token ids in the vocabulary.
func decodeTokenIDs(raw json.RawMessage, param string, vocab int) ([]int32, *apiError) {
	var items []json.RawMessage
	if raw[0] != '[' || json.Unmarshal(raw, &items) != nil {
		return nil, badRequest(param, "invalid_type", "Invalid type for '%s': expected a list of token ids, but got %s instead.", param, kindOf(raw))
	}
	if len(items) == 0 {
		return nil, badRequest(param, "invalid_value", "Invalid '%s': the list of token ids is empty.", param)
	}
	toks := make([]int32, len(items))
	for i, it := range items {
		v, err := strconv.ParseInt(string(it), 10, 64)
		if err != nil {
			return nil, badRequest(fmt.Sprintf("%s[%d]", param, i), "invalid_type", "Invalid type for '%s[%d]': expected a token id (an integer), but got %s instead.", param, i, kindOf(it))
		}
		if v < 0 || v >= int64(vocab) {
			return nil, badRequest(fmt.Sprintf("%s[%d]", param, i), "invalid_value", "Invalid '%s[%d]': token id %d is not in the vocabulary (0..%d).", param, i, v, vocab-1)
		}
		toks[i] = int32(v)
	}
	return toks, nil
}

// decodeStop reads stop: a string or a list of strings.
func decodeStop(raw json.RawMessage) ([]string, *apiError) {
	var stops []string
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, badRequest("stop", "invalid_type", "Invalid 'stop': %v", err)
		}
		stops = []string{s}
	case '[':
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			return nil, badRequest("stop", "invalid_type", "Invalid 'stop': %v", err)
		}
		if len(items) > maxStopStrings {
			return nil, badRequest("stop", "invalid_value", "Invalid 'stop': %d strings, at most %d are allowed.", len(items), maxStopStrings)
		}
		for i, it := range items {
			var s string
			if it[0] != '"' || json.Unmarshal(it, &s) != nil {
				return nil, badRequest(fmt.Sprintf("stop[%d]", i), "invalid_type", "Invalid type for 'stop[%d]': expected a string, but got %s instead.", i, kindOf(it))
			}
			stops = append(stops, s)
		}
	default:
		return nil, badRequest("stop", "invalid_type", "Invalid type for 'stop': expected a string or a list of strings, but got %s instead.", kindOf(raw))
	}
	for i, s := range stops {
		if s == "" || len(s) > maxStopBytes {
			return nil, badRequest("stop", "invalid_value", "Invalid 'stop': stop string %d has %d bytes; each must have 1 to %d.", i, len(s), maxStopBytes)
		}
	}
	return stops, nil
}

// tokenizeText appends the prompt of a text: <|bos|> and its UTF-8 bytes.
func tokenizeText(dst []int32, s string) []int32 {
	dst = append(dst, native.TokBOS)
	for i := 0; i < len(s); i++ {
		dst = append(dst, int32(s[i]))
	}
	return dst
}
