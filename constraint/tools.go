package constraint

import (
	"encoding/json"
	"fmt"
	"strings"
)

// ToolFormat is the way a model writes tool calls, read from its chat
// template (DetectToolFormat), never from its name.
type ToolFormat string

// The tool-call formats.
const (
	// FormatPicometer is picometer's byte-level models' own format (they
	// have no template): each call is
	//	<tool_call>{"name": NAME, "arguments": {…}}</tool_call>
	// in UTF-8 bytes, calls one after another (whitespace between), after
	// optional text. The prompt side is daemon/chat.go's renderChat.
	FormatPicometer ToolFormat = "picometer"
	// FormatHermes is Hermes' and Qwen's: the same tags and object, with
	// newlines inside the tags ("<tool_call>\n{…}\n</tool_call>").
	FormatHermes ToolFormat = "hermes"
	// FormatLlama3 is Llama 3.1–3.3's JSON tool calls:
	// {"name": NAME, "parameters": {…}}, after <|python_tag|> or bare;
	// several are separated by "; ".
	FormatLlama3 ToolFormat = "llama3_json"
	// FormatMistral is Mistral's [TOOL_CALLS][{"name": NAME, "arguments": {…}}, …].
	FormatMistral ToolFormat = "mistral"
	// FormatMistralArgs is Mistral's later [TOOL_CALLS]NAME[ARGS]{…}.
	FormatMistralArgs ToolFormat = "mistral_args"
)

// ToolFormats lists every format (the metric label's values).
var ToolFormats = []ToolFormat{FormatPicometer, FormatHermes, FormatLlama3, FormatMistral, FormatMistralArgs}

// DetectToolFormat reads the tool-call format from a chat template's
// text: "" when the template renders no tool calls picometer can read.
func DetectToolFormat(template string) ToolFormat {
	switch {
	case strings.Contains(template, "[TOOL_CALLS]") && strings.Contains(template, "[ARGS]"):
		return FormatMistralArgs
	case strings.Contains(template, "[TOOL_CALLS]"):
		return FormatMistral
	case strings.Contains(template, "<tool_call>"):
		return FormatHermes
	case strings.Contains(template, "<|python_tag|>"), strings.Contains(template, `"parameters": dictionary of argument name`):
		return FormatLlama3
	}
	return ""
}

// Tool is a function tool: its name and its parameters' JSON schema (nil:
// any object).
type Tool struct {
	Name       string
	Parameters json.RawMessage
}

// ToolChoice says which calls the grammar holds the model to.
type ToolChoice struct {
	Mode string // "auto", "required" or "function"
	Name string // Mode "function": the one tool
}

// MaxParallelCalls bounds the calls of one answer (parallel_tool_calls).
const MaxParallelCalls = 8

// ToolGrammar is the grammar of a model's answer with tools, in format:
// with choice "required", one call (or up to MaxParallelCalls when
// parallel) of any tool with arguments valid against its schema; with a
// named function, calls of that one only; with "auto", either such calls
// or a text answer that does not begin with the format's first character
// of a call (so an answer that starts a call is held to the grammar).
func ToolGrammar(format ToolFormat, tools []Tool, choice ToolChoice, parallel bool, lim Limits) (string, error) {
	b := newBuilder(lim)
	root := b.fresh("root")
	b.useJSON("")
	nameKey, open, sep, close, argsKey := lit(`"name"`), "", `ws`, "", lit(`"arguments"`)
	switch format {
	case FormatPicometer, FormatHermes:
		open, close = `"<tool_call>" ws "{" ws`, `ws "}" ws "</tool_call>"`
	case FormatLlama3:
		open, close, sep, argsKey = `"{" ws`, `ws "}"`, `ws ";" ws`, lit(`"parameters"`)
	case FormatMistral:
		open, close, sep = `"{" ws`, `ws "}"`, `ws "," ws`
	case FormatMistralArgs:
	default:
		return "", &Error{Keyword: "tools", Msg: fmt.Sprintf("tool-call format %q is not supported", format)}
	}
	var alts []string
	for i, t := range tools {
		if choice.Mode == "function" && t.Name != choice.Name {
			continue
		}
		args := "json-object"
		if len(t.Parameters) > 0 {
			v, err := decodeJSON(t.Parameters)
			if err != nil {
				return "", &Error{Keyword: "parameters", Path: fmt.Sprintf("tools[%d]", i), Msg: "not valid JSON: " + err.Error()}
			}
			name := b.fresh(ruleName("args-" + t.Name))
			c := &schemaCompiler{b: b, root: v, refs: map[string]string{"#": name}}
			body := c.compile(v, "", 0)
			if b.err != nil {
				b.err.Path = fmt.Sprintf("tools[%d].function.parameters%s", i, b.err.Path)
				return "", b.err
			}
			b.set(name, body)
			args = name
		}
		if format == FormatMistralArgs {
			alts = append(alts, lit(t.Name)+` "[ARGS]" `+args)
		} else {
			alts = append(alts, nameKey+` ws ":" ws `+lit(quoteJSON(t.Name))+` ws "," ws `+argsKey+` ws ":" ws `+args)
		}
	}
	if len(alts) == 0 {
		return "", &Error{Keyword: "tool_choice", Msg: fmt.Sprintf("no tool is named %q", choice.Name)}
	}
	call := b.define("tool-call", strings.TrimSpace(open+" ("+strings.Join(alts, " | ")+") "+close))
	calls := call
	if parallel {
		calls = call + " (" + sep + " " + call + "){0," + fmt.Sprint(MaxParallelCalls-1) + "}"
	}
	switch format {
	case FormatMistral:
		calls = `"[TOOL_CALLS]" "[" ` + calls + ` "]"`
	case FormatMistralArgs:
		calls = `"[TOOL_CALLS]" ` + call
		if parallel {
			calls = `("[TOOL_CALLS]" ` + call + "){1," + fmt.Sprint(MaxParallelCalls) + "}"
		}
	}
	b.define("tool-calls", calls)
	body := "tool-calls"
	if choice.Mode == "auto" {
		first := "<"
		switch format {
		case FormatLlama3:
			first = "{"
		case FormatMistral, FormatMistralArgs:
			first = "["
		}
		b.define("free-text", "(["+"^"+escRune(rune(first[0]), ']')+"] [^\\x00]*)?")
		body = "tool-calls | free-text"
	}
	b.set(root, body)
	if b.err != nil {
		return "", b.err
	}
	return b.text(), nil
}

// ToolCall is a call parsed from a model's answer.
type ToolCall struct {
	Name      string
	Arguments string // a JSON object, as the model wrote it
}

// ParseToolCalls splits a model's answer in format into its text and its
// calls. ok is false when the answer holds no well-formed call; then the
// whole answer is text. Control tokens the detokenizer dropped
// (<|python_tag|>, [TOOL_CALLS]) may be present or absent.
func ParseToolCalls(format ToolFormat, answer string) (text string, calls []ToolCall, ok bool) {
	switch format {
	case FormatPicometer, FormatHermes:
		i := strings.Index(answer, "<tool_call>")
		if i < 0 {
			return answer, nil, false
		}
		rest := answer[i:]
		for {
			rest = strings.TrimLeft(rest, " \t\r\n")
			if rest == "" {
				break
			}
			body, ok := strings.CutPrefix(rest, "<tool_call>")
			if !ok {
				return answer, nil, false
			}
			// The call is one JSON value: read it as such, so a
			// "</tool_call>" inside an argument string does not end it.
			d := json.NewDecoder(strings.NewReader(body))
			var raw json.RawMessage
			if d.Decode(&raw) != nil {
				return answer, nil, false
			}
			c, ok := parseCall(string(raw), "arguments")
			if !ok {
				return answer, nil, false
			}
			after, ok := strings.CutPrefix(strings.TrimLeft(body[d.InputOffset():], " \t\r\n"), "</tool_call>")
			if !ok {
				return answer, nil, false
			}
			calls = append(calls, c)
			rest = after
		}
		return strings.TrimSpace(answer[:i]), calls, true
	case FormatLlama3:
		s := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(answer), "<|python_tag|>"))
		if !strings.HasPrefix(s, "{") {
			return answer, nil, false
		}
		d := json.NewDecoder(strings.NewReader(s))
		for {
			var raw json.RawMessage
			if err := d.Decode(&raw); err != nil {
				return answer, nil, false
			}
			c, ok := parseCall(string(raw), "parameters")
			if !ok {
				if c, ok = parseCall(string(raw), "arguments"); !ok {
					return answer, nil, false
				}
			}
			calls = append(calls, c)
			rest := strings.TrimSpace(s[d.InputOffset():])
			if rest == "" {
				return "", calls, true
			}
			if !strings.HasPrefix(rest, ";") {
				return answer, nil, false
			}
			s = strings.TrimSpace(rest[1:])
			d = json.NewDecoder(strings.NewReader(s))
		}
	case FormatMistral:
		s := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(answer), "[TOOL_CALLS]"))
		var items []json.RawMessage
		if !strings.HasPrefix(s, "[") || json.Unmarshal([]byte(s), &items) != nil || len(items) == 0 {
			return answer, nil, false
		}
		for _, it := range items {
			c, ok := parseCall(string(it), "arguments")
			if !ok {
				return answer, nil, false
			}
			calls = append(calls, c)
		}
		return "", calls, true
	case FormatMistralArgs:
		s := strings.TrimSpace(answer)
		for _, part := range strings.Split(s, "[TOOL_CALLS]") {
			if part == "" {
				continue
			}
			name, args, ok := strings.Cut(part, "[ARGS]")
			var obj map[string]json.RawMessage
			if !ok || name == "" || json.Unmarshal([]byte(args), &obj) != nil {
				return answer, nil, false
			}
			calls = append(calls, ToolCall{Name: name, Arguments: strings.TrimSpace(args)})
		}
		if len(calls) == 0 {
			return answer, nil, false
		}
		return "", calls, true
	}
	return answer, nil, false
}

// maxCuts bounds how many cut points ParseTruncatedToolCalls tries.
const maxCuts = 2 * MaxParallelCalls

// ParseTruncatedToolCalls is ParseToolCalls for an answer the token limit
// cut: when the whole answer holds no well-formed calls, it keeps the
// complete calls before the cut and drops the one the limit interrupted
// (as vLLM's parsers keep the complete <tool_call> blocks). It tries the
// ends of complete calls from the last one back, at most maxCuts of them,
// so an answer of any length costs a bounded number of parses.
func ParseTruncatedToolCalls(format ToolFormat, answer string) (text string, calls []ToolCall, ok bool) {
	if text, calls, ok = ParseToolCalls(format, answer); ok {
		return text, calls, ok
	}
	// Each cut is a prefix of the answer (plus a suffix closing it) that a
	// complete answer of format could be.
	type cutRule struct {
		mark   string
		keep   bool   // keep the mark in the prefix (it ends a call) or not (it starts the next)
		suffix string // appended to the prefix
	}
	var r cutRule
	switch format {
	case FormatPicometer, FormatHermes:
		r = cutRule{mark: "</tool_call>", keep: true}
	case FormatLlama3:
		r = cutRule{mark: ";"}
	case FormatMistral:
		r = cutRule{mark: "}", keep: true, suffix: "]"}
	case FormatMistralArgs:
		r = cutRule{mark: "[TOOL_CALLS]"}
	default:
		return answer, nil, false
	}
	end := len(answer)
	for range maxCuts {
		i := strings.LastIndex(answer[:end], r.mark)
		if i < 0 {
			break
		}
		cut := answer[:i]
		if r.keep {
			cut = answer[:i+len(r.mark)]
		}
		if t, cs, ok := ParseToolCalls(format, cut+r.suffix); ok && len(cs) > 0 {
			return t, cs, true
		}
		end = i
	}
	return answer, nil, false
}

// parseCall reads {"name": …, argsKey: {…}}.
func parseCall(s, argsKey string) (ToolCall, bool) {
	var c struct {
		Name *string                    `json:"name"`
		Args map[string]json.RawMessage `json:"-"`
	}
	var m map[string]json.RawMessage
	if json.Unmarshal([]byte(strings.TrimSpace(s)), &m) != nil || json.Unmarshal(m["name"], &c.Name) != nil || c.Name == nil {
		return ToolCall{}, false
	}
	args, ok := m[argsKey]
	var obj map[string]json.RawMessage
	if !ok || json.Unmarshal(args, &obj) != nil {
		return ToolCall{}, false
	}
	return ToolCall{Name: *c.Name, Arguments: string(args)}, true
}
