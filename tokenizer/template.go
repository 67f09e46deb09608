package tokenizer

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/picometer/picometer/tokenizer/jinja"
)

// Message is one chat message as a chat template sees it.
type Message struct {
	Role string `json:"role"`
	// Content is the text ("" for an assistant turn that only calls tools
	// and was sent with "content": null, as vLLM passes it to a template
	// that takes string content).
	Content string `json:"content"`
	Name    string `json:"name,omitempty"`
	// ToolCalls are an assistant message's calls; ToolCallID is the call a
	// "tool" message answers.
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

// ToolCall is one OpenAI tool call of an assistant message.
type ToolCall struct {
	ID   string
	Type string // "function"
	Name string
	// Arguments is the JSON text the client sent; the template gets it
	// parsed into an object, as vLLM passes it.
	Arguments string
}

// Chat is what a chat template renders: the variables vLLM passes.
type Chat struct {
	Messages []Message
	// Tools is the request's "tools" array (OpenAI tool definitions) as
	// sent, passed to the template with its key order; nil: no tools.
	Tools               json.RawMessage
	AddGenerationPrompt bool
	// Now is the time strftime_now formats; zero is the current time.
	Now time.Time
}

// Template is a model's chat template (tokenizer.chat_template, or the
// file given with --chat-template), rendered by package jinja with
// Hugging Face's settings and the variables vLLM passes: messages, tools,
// add_generation_prompt, bos_token, eos_token (and the globals
// raise_exception, strftime_now, range, namespace).
type Template struct {
	tpl      *jinja.Template
	parseErr error
	bos, eos string
}

// NewTemplate parses src; bos and eos are the texts of the BOS and EOS
// tokens ("" when the vocabulary has none). A template that does not parse
// is kept: every Render reports the parse error, so a model with such a
// template still serves completions.
func NewTemplate(src, bos, eos string) *Template {
	t := &Template{bos: bos, eos: eos}
	var err error
	if t.tpl, err = jinja.Parse(src); err != nil {
		t.parseErr = fmt.Errorf("chat template: failed to parse: %v", err)
	}
	return t
}

// Err is the template's parse error (nil when it parsed).
func (t *Template) Err() error { return t.parseErr }

// TemplateFor returns the chat template of the vocabulary (nil when it
// has none).
func (t *Tokenizer) TemplateFor() *Template {
	if t.v.ChatTemplate == "" {
		return nil
	}
	return t.TemplateFrom(t.v.ChatTemplate)
}

// TemplateFrom returns src as a chat template with this vocabulary's BOS
// and EOS texts (for a template that overrides the model file's).
func (t *Tokenizer) TemplateFrom(src string) *Template {
	v := t.v
	name := func(id int32) string {
		if id < 0 || int(id) >= len(v.Tokens) {
			return ""
		}
		return v.Tokens[id]
	}
	return NewTemplate(src, name(v.BOS), name(v.EOS))
}

// Render renders the conversation. addGenerationPrompt opens the
// assistant's turn. The error names the template's problem: its parse
// error, a raise_exception message, or an evaluation error.
func (t *Template) Render(msgs []Message, addGenerationPrompt bool) (string, error) {
	return t.RenderChat(Chat{Messages: msgs, AddGenerationPrompt: addGenerationPrompt})
}

// RenderChat renders a chat with tools. A tool call's arguments that are
// not JSON, or tools that are not a JSON array, are an error.
func (t *Template) RenderChat(c Chat) (string, error) {
	if t.parseErr != nil {
		return "", t.parseErr
	}
	vars, err := c.vars()
	if err != nil {
		return "", err
	}
	vars["bos_token"] = t.bos
	vars["eos_token"] = t.eos
	out, err := t.tpl.Execute(vars, jinja.Options{Now: c.Now})
	if err != nil {
		return "", fmt.Errorf("chat template: %v", err)
	}
	return out, nil
}

// vars builds the template variables as vLLM does: each message a mapping
// (role, content, then name, tool_calls and tool_call_id when set), each
// tool call's arguments parsed from JSON.
func (c Chat) vars() (map[string]any, error) {
	ms := make([]any, len(c.Messages))
	for i, m := range c.Messages {
		d := jinja.NewDict()
		d.Set("role", m.Role)
		d.Set("content", m.Content)
		if m.Name != "" {
			d.Set("name", m.Name)
		}
		if len(m.ToolCalls) > 0 {
			calls := make([]any, len(m.ToolCalls))
			for j, tc := range m.ToolCalls {
				args, err := jinja.ParseJSON([]byte(tc.Arguments))
				if err != nil {
					return nil, fmt.Errorf("messages[%d].tool_calls[%d].function.arguments is not JSON: %v", i, j, err)
				}
				fn := jinja.NewDict()
				fn.Set("name", tc.Name)
				fn.Set("arguments", args)
				call := jinja.NewDict()
				call.Set("id", tc.ID)
				call.Set("type", tc.Type)
				call.Set("function", fn)
				calls[j] = call
			}
			d.Set("tool_calls", jinja.NewList(calls...))
		}
		if m.ToolCallID != "" {
			d.Set("tool_call_id", m.ToolCallID)
		}
		ms[i] = d
	}
	vars := map[string]any{
		"messages":              jinja.NewList(ms...),
		"add_generation_prompt": c.AddGenerationPrompt,
		"tools":                 nil, // as vLLM passes it when a request has none
	}
	if len(c.Tools) > 0 {
		tools, err := jinja.ParseJSON(c.Tools)
		if err != nil {
			return nil, fmt.Errorf("tools is not JSON: %v", err)
		}
		if _, ok := tools.(*jinja.List); !ok {
			return nil, fmt.Errorf("tools is not an array")
		}
		vars["tools"] = tools
	}
	return vars, nil
}
