package daemon

import (
	"fmt"
	"os"
	"strings"

	json "github.com/goccy/go-json"

	"github.com/picometer/picometer/constraint"
	"github.com/picometer/picometer/gguf"
	"github.com/picometer/picometer/native"
	"github.com/picometer/picometer/schema"
	"github.com/picometer/picometer/tokenizer"
)

// codec is the model's text side: how prompts become tokens and tokens
// become text. It is built once from the model file's tokenizer.*
// metadata (see package tokenizer) and runs in the request handlers,
// before the engine and outside its step loop.
//
// A "picometer-bytes" model (or a daemon whose model file cannot be read,
// as with the tests' fake engines) keeps picometer's own byte vocabulary
// and chat format ([renderChat], [tokenizeText]). Any other vocabulary
// renders chats with the model's tokenizer.chat_template (Jinja); a model
// with a real vocabulary and no template gets picometer's chat format
// written as text.
type codec struct {
	tk    *tokenizer.Tokenizer // nil: picometer's byte vocabulary
	tpl   *tokenizer.Template  // nil: no chat template
	size  int                  // vocabulary size (token ids are 0..size-1)
	stops []int32              // a chat turn ends on these (besides the engine's EOS)

	toolFormat constraint.ToolFormat // how the model writes tool calls ("": none known)
}

// bytesCodec is picometer's byte vocabulary.
var bytesCodec = &codec{size: native.VocabSize, stops: []int32{native.TokEnd}, toolFormat: constraint.FormatPicometer}

// readChatTemplate reads and parses the chat_template file (config key
// chat_template, flag --chat-template); "" is none. Errors name the key.
func readChatTemplate(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("chat_template: %v", err)
	}
	if err := tokenizer.NewTemplate(string(b), "", "").Err(); err != nil {
		return "", fmt.Errorf("chat_template: %s: %v", path, err)
	}
	return string(b), nil
}

// loadCodec reads the tokenizer of the GGUF file at path; tmpl, when not
// "", replaces the file's chat template. An unknown tokenizer model or
// pre-tokenizer is an error naming the value. A chat template that does
// not parse is not an error here: the model serves completions and its
// chat requests get a 400 naming the template's problem.
func loadCodec(path, tmpl string) (*codec, error) {
	f, err := readGGUFMeta(path)
	if err != nil {
		return nil, err
	}
	v, err := tokenizer.FromGGUF(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if v.Model == "picometer-bytes" {
		if tmpl != "" {
			return nil, fmt.Errorf("chat_template: %s uses picometer's byte vocabulary, whose chat format is fixed", path)
		}
		return bytesCodec, nil
	}
	tk, err := tokenizer.New(v)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	c := &codec{tk: tk, tpl: tk.TemplateFor(), size: tk.Size(), toolFormat: constraint.FormatPicometer}
	if tmpl != "" {
		c.tpl = tk.TemplateFrom(tmpl)
	}
	if src := tmpl; c.tpl != nil {
		if src == "" {
			src = v.ChatTemplate
		}
		c.toolFormat = constraint.DetectToolFormat(src)
	}
	for _, id := range []int32{v.EOS, v.EOT, v.EOM} {
		if id >= 0 && !containsID(c.stops, id) {
			c.stops = append(c.stops, id)
		}
	}
	return c, nil
}

// codecFor is loadCodec for [New]: a file it cannot read (the tests' fake
// engines have none) keeps the byte vocabulary; [Run] has already refused
// a model file whose tokenizer is invalid.
func codecFor(path, tmplPath string) *codec {
	tmpl, err := readChatTemplate(tmplPath)
	if err != nil {
		return bytesCodec
	}
	c, err := loadCodec(path, tmpl)
	if err != nil {
		return bytesCodec
	}
	return c
}

func containsID(ids []int32, id int32) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// prompt tokenizes r's prompt with the model's tokenizer: the messages of
// a chat (rendered by the chat template), or the text of a completion
// (with BOS/EOS as the vocabulary says, and the text of a special token,
// "<|eot_id|>", read as that token: the prompt is the caller's own
// formatting, as vLLM, llama.cpp's server and Hugging Face's tokenizer
// read it). Token-id prompts and the byte vocabulary keep what decoding
// made. A template that fails to render is a 400 naming the template's
// error.
func (c *codec) prompt(r *genRequest) *apiError {
	if c.tk == nil {
		return nil
	}
	switch {
	case r.Op == schema.OpChat:
		text, plain, err := c.render(r.Messages, r.toolsRaw(), true)
		if err != nil {
			return badRequest("messages", "invalid_value", "Invalid 'messages': the model's chat template failed: %v", err)
		}
		r.Prompt = c.tk.EncodeRendered(r.Prompt[:0], text, plain)
	case r.IsText:
		r.Prompt = r.Prompt[:0]
		if c.tk.AddBOS() && c.tk.BOS() >= 0 {
			r.Prompt = append(r.Prompt, c.tk.BOS())
		}
		r.Prompt = c.tk.Encode(r.Prompt, r.Text, true)
		if c.tk.AddEOS() && c.tk.EOS() >= 0 {
			r.Prompt = append(r.Prompt, c.tk.EOS())
		}
	}
	if len(r.Prompt) == 0 {
		return badRequest(r.PromptParam, "invalid_value", "Invalid '%s': it has no tokens.", r.PromptParam)
	}
	return nil
}

// render renders a chat (and its tools, nil for none) with the model's
// template (else picometer's format as text), returning the spans holding
// the messages' contents. addGen adds the generation prompt (the assistant
// turn the model writes).
func (c *codec) render(msgs []chatMessage, tools json.RawMessage, addGen bool) (string, [][2]int, error) {
	contents := make([]string, len(msgs))
	for i, m := range msgs {
		contents[i] = m.Content
	}
	if c.tpl == nil {
		if len(tools) > 0 || hasTools(msgs) {
			msgs = toolMessages(msgs, tools)
		}
		var sb strings.Builder
		var plain [][2]int
		v := c.tk.Vocab()
		if v.BOS >= 0 {
			sb.WriteString(v.Tokens[v.BOS])
		}
		for _, m := range msgs {
			sb.WriteString("<|" + m.Role + "|>")
			plain = append(plain, [2]int{sb.Len(), sb.Len() + len(m.Content)})
			sb.WriteString(m.Content)
			sb.WriteString("<|end|>")
		}
		if addGen {
			sb.WriteString("<|assistant|>")
		}
		return sb.String(), plain, nil
	}
	text, err := c.tpl.RenderChat(tokenizer.Chat{Messages: templateMessages(msgs), Tools: tools, AddGenerationPrompt: addGen})
	if err != nil {
		return "", nil, err
	}
	return text, tokenizer.ContentSpans(text, contents), nil
}

// appendText appends the text of an output token: nothing for a control
// token, the bytes of any other (possibly part of a UTF-8 character; the
// caller holds those back).
func (c *codec) appendText(dst []byte, tok int32) []byte {
	if c.tk == nil {
		if native.IsByte(tok) {
			dst = append(dst, byte(tok))
		}
		return dst
	}
	if c.tk.IsControl(tok) {
		return dst
	}
	return append(dst, c.tk.Piece(tok)...)
}

// piece is the text of token id as logprobs show it: its bytes, a control
// token's text included.
func (c *codec) piece(id int32) []byte {
	if c.tk != nil {
		return c.tk.Piece(id)
	}
	switch {
	case native.IsByte(id):
		return byteStrings[id : id+1]
	case id >= 256 && id < native.VocabSize:
		return []byte(native.ControlTokens[id-256])
	}
	return nil
}

// byteStrings holds every byte value, for [codec.piece] to slice.
var byteStrings = func() []byte {
	b := make([]byte, 256)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}()

// readGGUFMeta reads the metadata of the GGUF file at path with the C
// parser (native.ReadGGUFMeta, the project's one): the file is mapped, the
// tensors are never touched, and the metadata comes back as Go values for
// the tokenizer.
func readGGUFMeta(path string) (*gguf.File, error) {
	return native.ReadGGUFMeta(path)
}
