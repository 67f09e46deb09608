package tokenizer

import (
	"errors"
	"fmt"

	"github.com/picometer/picometer/tokenizer/jinja"
)

// Message is one chat message as a chat template sees it.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Template is a model's chat template (tokenizer.chat_template), rendered
// by package jinja (the subset of Jinja chat templates use) with Hugging
// Face's settings (trim_blocks, lstrip_blocks, no autoescape) and the
// variables messages, add_generation_prompt, bos_token, eos_token and the
// function raise_exception.
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

// TemplateFor returns the chat template of the vocabulary (nil when it
// has none).
func (t *Tokenizer) TemplateFor() *Template {
	v := t.v
	if v.ChatTemplate == "" {
		return nil
	}
	name := func(id int32) string {
		if id < 0 || int(id) >= len(v.Tokens) {
			return ""
		}
		return v.Tokens[id]
	}
	return NewTemplate(v.ChatTemplate, name(v.BOS), name(v.EOS))
}

// errRaised marks raise_exception's error.
var errRaised = errors.New("raise_exception")

// Render renders the conversation. addGenerationPrompt opens the
// assistant's turn. The error names the template's problem: its parse
// error, a raise_exception message, or an evaluation error.
func (t *Template) Render(msgs []Message, addGenerationPrompt bool) (string, error) {
	if t.parseErr != nil {
		return "", t.parseErr
	}
	ms := make([]any, len(msgs))
	for i, m := range msgs {
		ms[i] = map[string]any{"role": m.Role, "content": m.Content}
	}
	out, err := t.tpl.Render(map[string]any{
		"messages":              ms,
		"add_generation_prompt": addGenerationPrompt,
		"bos_token":             t.bos,
		"eos_token":             t.eos,
		"raise_exception": jinja.Func(func(args []any, _ map[string]any) (any, error) {
			msg := ""
			if len(args) > 0 {
				msg, _ = args[0].(string)
			}
			return nil, fmt.Errorf("%w: %s", errRaised, msg)
		}),
	})
	if err != nil {
		return "", fmt.Errorf("chat template: %v", err)
	}
	return out, nil
}
