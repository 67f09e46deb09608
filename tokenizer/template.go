package tokenizer

import (
	"errors"
	"fmt"
	"strings"

	"github.com/nikolalohinski/gonja/v2"
	"github.com/nikolalohinski/gonja/v2/config"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/loaders"
)

// Message is one chat message as a chat template sees it.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Template is a model's chat template (tokenizer.chat_template), rendered
// by gonja (github.com/nikolalohinski/gonja/v2, a Go Jinja) with the
// settings Hugging Face uses: trim_blocks and lstrip_blocks, no
// autoescape, and the variables messages, add_generation_prompt,
// bos_token, eos_token and the function raise_exception. Templates cannot
// include or import other files.
type Template struct {
	tpl      *exec.Template
	parseErr error
	bos, eos string
}

// hfConfig is Hugging Face's Jinja environment (transformers'
// ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)).
var hfConfig = func() *config.Config {
	c := config.New()
	c.TrimBlocks = true
	c.LeftStripBlocks = true
	c.AutoEscape = false
	return c
}()

// NewTemplate parses src; bos and eos are the texts of the BOS and EOS
// tokens ("" when the vocabulary has none). A template gonja cannot parse
// is kept: every Render reports the parse error, so a model with such a
// template still serves completions.
func NewTemplate(src, bos, eos string) *Template {
	t := &Template{bos: bos, eos: eos}
	loader, err := loaders.NewMemoryLoader(map[string]string{"/chat_template": src})
	if err == nil {
		t.tpl, err = exec.NewTemplate("/chat_template", hfConfig, loader, gonja.DefaultEnvironment)
	}
	if err != nil {
		t.parseErr = fmt.Errorf("chat template: %s", oneLine(err.Error()))
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
	ms := make([]map[string]any, len(msgs))
	for i, m := range msgs {
		ms[i] = map[string]any{"role": m.Role, "content": m.Content}
	}
	var raised string
	ctx := exec.NewContext(map[string]any{
		"messages":              ms,
		"add_generation_prompt": addGenerationPrompt,
		"bos_token":             t.bos,
		"eos_token":             t.eos,
		"raise_exception": func(msg string) (string, error) {
			raised = msg
			return "", fmt.Errorf("%w: %s", errRaised, msg)
		},
	})
	out, err := t.tpl.ExecuteToString(ctx)
	if raised != "" {
		return "", fmt.Errorf("chat template: raise_exception: %s", raised)
	}
	if err != nil {
		return "", fmt.Errorf("chat template: %s", oneLine(err.Error()))
	}
	return out, nil
}

// oneLine keeps an error message to its first line (gonja quotes the
// whole template source in parse errors).
func oneLine(s string) string {
	if strings.HasPrefix(s, "failed to parse template '") {
		if i := strings.LastIndex(s, "': "); i >= 0 {
			s = "failed to parse: " + s[i+3:]
		}
	}
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}
