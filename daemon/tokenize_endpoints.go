package daemon

import (
	"fmt"
	"strconv"

	json "github.com/goccy/go-json"
	"github.com/valyala/fasthttp"

	"github.com/picometer/picometer/native"
)

// This file is POST /tokenize and POST /detokenize in vLLM's request and
// response shapes, with the model's tokenizer (the codec of tokenize.go):
//
//	/tokenize    {"prompt": "...", "add_special_tokens": true, "return_token_strs": false}
//	          or {"messages": [...], "add_generation_prompt": true, "add_special_tokens": false,
//	              "return_token_strs": false}
//	          →  {"count": n, "max_model_len": ctx, "tokens": [...], "token_strs": [...] | null}
//	/detokenize  {"tokens": [...]}  →  {"prompt": "..."}
//
// A prompt with add_special_tokens gets the BOS (and EOS) its vocabulary
// adds, as /v1/completions does; a chat is rendered by the chat template
// as /v1/chat/completions does, so the defaults count what those endpoints
// report as usage.prompt_tokens. token_strs are the vocabulary's token
// strings (byte tokens of picometer's byte vocabulary are <0xXX>). The
// detokenized text includes control tokens' text (skip_special_tokens
// false, as vLLM's default), and bytes that are no UTF-8 character become
// U+FFFD. These are not generation requests: they send no request event.
// tokenize_endpoints_test.go covers them.

// tokenizeRequest is a decoded /tokenize body.
type tokenizeRequest struct {
	Model      string
	Chat       bool
	Text       string
	Messages   []chatMessage
	Tools      json.RawMessage // OpenAI tool definitions for the chat template; nil: none
	AddSpecial bool
	AddGen     bool
	TokenStrs  bool
}

// decodeTokenize decodes a /tokenize body.
func decodeTokenize(body []byte, r *tokenizeRequest) *apiError {
	*r = tokenizeRequest{AddGen: true}
	d, err := newDecoder(body)
	if err != nil {
		return err
	}
	if r.Model, _, err = d.str("model"); err != nil {
		return err
	}
	if r.TokenStrs, _, err = d.boolean("return_token_strs"); err != nil {
		return err
	}
	raw, isChat := d.get("messages")
	_, isPrompt := d.get("prompt")
	switch {
	case isChat && isPrompt:
		return badRequest("prompt", "invalid_value", "Invalid request: send either 'prompt' or 'messages', not both.")
	case isChat:
		r.Chat = true
		if r.Messages, err = decodeMessages(raw, true); err != nil {
			return err
		}
		if v, ok, err := d.boolean("add_generation_prompt"); err != nil {
			return err
		} else if ok {
			r.AddGen = v
		}
		if v, _, err := d.boolean("continue_final_message"); err != nil {
			return err
		} else if v {
			return badRequest("continue_final_message", "unsupported_parameter", "Unsupported value for 'continue_final_message': true is not supported.")
		}
		if _, ok := d.get("chat_template"); ok {
			return badRequest("chat_template", "unsupported_parameter", "Unsupported parameter 'chat_template': the model's chat template (or the daemon's chat_template file) is used.")
		}
		if raw, ok := d.get("tools"); ok {
			if r.Tools, err = decodeTools(raw); err != nil {
				return err
			}
		}
	case isPrompt:
		r.AddSpecial = true
		s, _, err := d.str("prompt")
		if err != nil {
			return err
		}
		r.Text = s
	default:
		return badRequest("prompt", "missing_required_parameter", "Missing required parameter: 'prompt' (or 'messages').")
	}
	if v, ok, err := d.boolean("add_special_tokens"); err != nil {
		return err
	} else if ok {
		r.AddSpecial = v
	}
	return nil
}

// decodeDetokenize decodes a /detokenize body: its token ids, each in the
// vocabulary of size tokens.
func decodeDetokenize(body []byte, size int) (string, []int32, *apiError) {
	d, err := newDecoder(body)
	if err != nil {
		return "", nil, err
	}
	model, _, err := d.str("model")
	if err != nil {
		return "", nil, err
	}
	raw, ok := d.get("tokens")
	if !ok {
		return "", nil, badRequest("tokens", "missing_required_parameter", "Missing required parameter: 'tokens'.")
	}
	var ids []json.RawMessage
	if raw[0] != '[' || json.Unmarshal(raw, &ids) != nil {
		return "", nil, badRequest("tokens", "invalid_type", "Invalid type for 'tokens': expected an array of token ids, but got %s instead.", kindOf(raw))
	}
	toks := make([]int32, len(ids))
	for i, x := range ids {
		v, err := strconv.ParseInt(string(x), 10, 64)
		if err != nil {
			return "", nil, badRequest("tokens", "invalid_type", "Invalid type for 'tokens[%d]': expected an integer, but got %s instead.", i, kindOf(x))
		}
		if v < 0 || v >= int64(size) {
			return "", nil, badRequest("tokens", "invalid_value", "Invalid 'tokens[%d]': token id %d is not in the vocabulary (0..%d).", i, v, size-1)
		}
		toks[i] = int32(v)
	}
	return model, toks, nil
}

// tokens tokenizes r with the model's tokenizer.
func (c *codec) tokens(r *tokenizeRequest) ([]int32, *apiError) {
	var out []int32
	if r.AddSpecial && (c.tk == nil || c.tk.AddBOS() && c.tk.BOS() >= 0) {
		out = append(out, c.bos())
	}
	switch {
	case r.Chat && c.tk == nil: // tools in picometer's own format, as chat renders them
		out = renderChatTools(out, r.Messages, r.Tools)
		if !r.AddGen {
			out = out[:len(out)-1] // the trailing <|assistant|>
		}
	case r.Chat:
		text, plain, err := c.render(r.Messages, r.Tools, r.AddGen)
		if err != nil {
			return nil, badRequest("messages", "invalid_value", "Invalid 'messages': the model's chat template failed: %v", err)
		}
		out = c.tk.EncodeRendered(out, text, plain)
	case c.tk == nil:
		for i := 0; i < len(r.Text); i++ {
			out = append(out, int32(r.Text[i]))
		}
	default: // special-token text is the token, as in a completions prompt
		out = c.tk.Encode(out, r.Text, true)
		if r.AddSpecial && c.tk.AddEOS() && c.tk.EOS() >= 0 {
			out = append(out, c.tk.EOS())
		}
	}
	return out, nil
}

func (c *codec) bos() int32 {
	if c.tk == nil {
		return native.TokBOS
	}
	return c.tk.BOS()
}

// tokenStr is the vocabulary's string of token id.
func (c *codec) tokenStr(id int32) string {
	if c.tk == nil {
		if native.IsByte(id) {
			return fmt.Sprintf("<0x%02X>", id)
		}
		return native.ControlTokens[id-256]
	}
	if v := c.tk.Vocab(); int(id) < len(v.Tokens) {
		return v.Tokens[id]
	}
	return ""
}

// detokenize appends the text of ids, control tokens included, as valid
// UTF-8.
func (c *codec) detokenize(dst []byte, ids []int32) []byte {
	var raw []byte
	if c.tk == nil {
		for _, id := range ids {
			if native.IsByte(id) {
				raw = append(raw, byte(id))
			} else {
				raw = append(raw, native.ControlTokens[id-256]...)
			}
		}
	} else {
		raw = c.tk.Decode(raw, ids)
	}
	var h utf8Hold
	dst = h.Append(dst, raw)
	return h.Flush(dst)
}

// tokenizeEndpoint serves POST /tokenize and POST /detokenize.
func (d *Daemon) tokenizeEndpoint(ctx *fasthttp.RequestCtx, detok bool) {
	if !ctx.IsPost() {
		errMethod(ctx.Method(), "POST").write(ctx)
		ctx.Response.Header.Set("Allow", "POST")
		return
	}
	if !d.authorized(ctx) {
		return
	}
	fail := func(e *apiError) { e.write(ctx) }
	var b []byte
	if detok {
		model, toks, e := decodeDetokenize(ctx.PostBody(), d.codec.size)
		if e != nil {
			fail(e)
			return
		}
		if model != "" && model != d.model {
			fail(errModelNotFound(model, d.model))
			return
		}
		b = append(b, `{"prompt":`...)
		b = appendJSONString(b, d.codec.detokenize(nil, toks))
		b = append(b, '}')
	} else {
		var r tokenizeRequest
		if e := decodeTokenize(ctx.PostBody(), &r); e != nil {
			fail(e)
			return
		}
		if r.Model != "" && r.Model != d.model {
			fail(errModelNotFound(r.Model, d.model))
			return
		}
		toks, e := d.codec.tokens(&r)
		if e != nil {
			fail(e)
			return
		}
		b = append(b, `{"count":`...)
		b = strconv.AppendInt(b, int64(len(toks)), 10)
		b = append(b, `,"max_model_len":`...)
		b = strconv.AppendInt(b, int64(d.ctxLen), 10)
		b = append(b, `,"tokens":`...)
		b = appendTokenIDs(b, toks)
		b = append(b, `,"token_strs":`...)
		if r.TokenStrs {
			b = append(b, '[')
			for i, id := range toks {
				if i > 0 {
					b = append(b, ',')
				}
				b = appendJSONString(b, d.codec.tokenStr(id))
			}
			b = append(b, ']')
		} else {
			b = append(b, "null"...)
		}
		b = append(b, '}')
	}
	ctx.SetContentType("application/json")
	ctx.SetBody(b)
}
