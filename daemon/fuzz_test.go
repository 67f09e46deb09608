package daemon

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"testing"
	"unicode/utf8"

	"github.com/valyala/fasthttp"

	"github.com/picometer/picometer/native"
)

// FuzzHandler drives the whole handler (routing, decoding, context checks,
// the engine loop over the fake engine, response and SSE encoding) with
// arbitrary bodies: whatever comes in, the answer is a well-formed
// response with a status from the documented set.
func FuzzHandler(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(uint8(0), []byte(s))
		f.Add(uint8(1), []byte(s))
		f.Add(uint8(2), []byte(s))
	}
	f.Add(uint8(2), []byte(`{"input":[{"role":"user","content":[{"type":"input_text","text":"é\xff"}]}],"instructions":"i","stream":true,"max_output_tokens":4}`))
	f.Add(uint8(2), []byte(`{"input":"hi","stream":true,"model":"fake-model"}`))
	f.Add(uint8(0), []byte(`{"prompt":"é\xff€","stream":true,"stop":["€"],"return_token_ids":true,"stream_options":{"include_usage":true,"continuous_usage_stats":true}}`))
	f.Add(uint8(1), []byte(`{"messages":[{"role":"user","content":"hi"}],"stream":true,"model":"fake-model"}`))
	// constraints and tools (issue 26)
	f.Add(uint8(1), []byte(`{"messages":[{"role":"user","content":"w"},{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"1"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"type":"integer","minimum":-3,"maximum":70}},"required":["a"]}}}],"tool_choice":"required","stream":true}`))
	f.Add(uint8(1), []byte(`{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"n","strict":true,"schema":{"$defs":{"n":{"anyOf":[{"$ref":"#/$defs/n"},{"type":"null"}]}},"$ref":"#/$defs/n"}}}}`))
	f.Add(uint8(0), []byte(`{"prompt":"x","guided_regex":"(a|b){2,5}[^c]?","min_p":0.2}`))
	f.Add(uint8(0), []byte(`{"prompt":"x","guided_choice":["a","b"],"structured_outputs":{"json":{}}}`))
	f.Add(uint8(2), []byte(`{"input":[{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"1"}],"tools":[{"type":"function","name":"f"}],"text":{"format":{"type":"json_object"}}}`))
	eng := newFakeEngine(128)
	eng.runLen = 3
	cfg := testConfig(f)
	cfg.Metrics.Socket = ""
	log := &testLog{}
	d := New(cfg, eng, Deps{Logger: log.logger(slog.LevelDebug)})
	f.Cleanup(func() { d.Shutdown(0) })
	// A real net.Conn (stream writers set write deadlines on it); nothing
	// is written to it, responses are read from the RequestCtx.
	c1, c2 := net.Pipe()
	f.Cleanup(func() { c1.Close(); c2.Close() })
	f.Fuzz(func(t *testing.T, route uint8, body []byte) {
		path := [...]string{pathCompletions, pathChat, pathResponses}[route%3]
		var req fasthttp.Request
		req.Header.SetMethod("POST")
		req.SetRequestURI(path)
		req.SetBody(body)
		var ctx fasthttp.RequestCtx
		ctx.Init2(c1, nil, false)
		req.CopyTo(&ctx.Request)
		d.handle(&ctx)
		status := ctx.Response.StatusCode()
		var out []byte
		if s := ctx.Response.BodyStream(); s != nil {
			var err error
			if out, err = io.ReadAll(s); err != nil {
				t.Fatal(err)
			}
		} else {
			out = ctx.Response.Body()
		}
		switch {
		case status == 200 && path == pathResponses && ctx.Response.IsBodyStream():
			evs := readResponseEvents(t, bytes.NewReader(out))
			last := evs[len(evs)-1]
			if last.Type != "response.completed" && last.Type != "response.incomplete" && last.Type != "error" {
				t.Fatalf("stream %q", out)
			}
			if last.Response != nil && (last.Response.Usage == nil || !utf8.ValidString(last.Response.text(t))) {
				t.Fatalf("stream %q", out)
			}
		case status == 200 && path == pathResponses:
			r := decodeResponseObject(t, out)
			if r.Usage == nil || r.Usage.OutputTokens < 1 || !utf8.ValidString(r.text(t)) {
				t.Fatalf("response %s", out)
			}
		case status == 200 && ctx.Response.IsBodyStream():
			var s sse
			readSSE(t, bytes.NewReader(out), &s)
			if len(s.data) == 0 || s.data[len(s.data)-1] != "[DONE]" || len(s.errs) != 0 {
				t.Fatalf("stream %q", out)
			}
			if !utf8.ValidString(s.text()) {
				t.Fatalf("invalid UTF-8 streamed: %q", s.text())
			}
		case status == 200:
			c := decodeCompletionResponse(t, out)
			if c.Usage == nil || c.Usage.CompletionTokens < 1 || !utf8.ValidString(c.text()) {
				t.Fatalf("response %s", out)
			}
		case status == 400 || status == 404:
			decodeError(t, out)
		default:
			t.Fatalf("status %d for %q: %s", status, body, out)
		}
		if log.contains("BUG") {
			t.Fatalf("daemon logged a bug: %v", log.all())
		}
	})
}

// FuzzDecodeResponses: no body crashes the /v1/responses decoder; one it
// accepts has a prompt, sampling parameters in range and chat roles only.
func FuzzDecodeResponses(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"input":"hi","instructions":"be brief","max_output_tokens":5,"temperature":0.5,"top_p":0.9,"stream":true}`))
	f.Add([]byte(`{"input":[{"type":"message","role":"developer","content":[{"type":"input_text","text":"a"},{"type":"output_text","text":"b"}]},{"role":"assistant","content":"c"}]}`))
	f.Add([]byte(`{"input":[{"role":"user","content":[{"type":"input_image"}]}],"tools":[{}],"reasoning":{"effort":"low"},"text":{"format":{"type":"json_object"}}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var r genRequest
		if e := decodeResponses(body, &r, native.VocabSize); e != nil {
			if e.Status != 400 || e.Message == "" {
				t.Fatalf("error %+v", e)
			}
			return
		}
		if len(r.Prompt) < 2 || r.Temperature < 0 || r.Temperature > 2 || r.TopP <= 0 || r.TopP > 1 || r.MaxTokens < 0 || !r.Responses {
			t.Fatalf("accepted %q as %+v", body, r)
		}
		for _, m := range r.Messages {
			if m.Role != "system" && m.Role != "user" && m.Role != "assistant" {
				t.Fatalf("role %q", m.Role)
			}
		}
	})
}

// FuzzDecodeTokenize: no body crashes the /tokenize and /detokenize
// decoders or the byte vocabulary's codec; what /detokenize accepts
// decodes to valid UTF-8, and /tokenize's tokens are in the vocabulary.
func FuzzDecodeTokenize(f *testing.F) {
	f.Add([]byte(`{"prompt":"hi","add_special_tokens":false,"return_token_strs":true}`))
	f.Add([]byte(`{"messages":[{"role":"user","content":"x"}],"add_generation_prompt":false}`))
	f.Add([]byte(`{"tokens":[256,104,255,263]}`))
	f.Add([]byte(`{"tokens":[1e3,-1,"a"]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var r tokenizeRequest
		if e := decodeTokenize(body, &r); e == nil {
			toks, e := bytesCodec.tokens(&r)
			if e != nil {
				t.Fatalf("byte codec failed: %v", e)
			}
			for _, id := range toks {
				if id < 0 || id >= native.VocabSize || bytesCodec.tokenStr(id) == "" {
					t.Fatalf("token %d", id)
				}
			}
		} else if e.Status != 400 {
			t.Fatalf("error %+v", e)
		}
		if _, toks, e := decodeDetokenize(body, native.VocabSize); e == nil {
			if s := bytesCodec.detokenize(nil, toks); !utf8.Valid(s) {
				t.Fatalf("detokenized %q", s)
			}
		} else if e.Status != 400 {
			t.Fatalf("error %+v", e)
		}
	})
}

// FuzzParseConfig: no TOML document crashes the config parser, and one
// that parses and validates has every key in range.
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte("listen = \"127.0.0.1:1\"\n[engine]\nb_max = 2\n"))
	f.Add([]byte("[metrics]\nqueue = 0\n"))
	f.Add([]byte("request_timeout = \"1s\"\napi_keys = [\"a\"]\n"))
	f.Add([]byte("[engine\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig(data)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		if c.Validate() != nil {
			return
		}
		nc := c.NativeConfig()
		if nc.Validate() != nil || c.Metrics.Queue < 1 || c.RequestTimeout <= 0 || c.MaxBodyBytes < 1024 {
			t.Fatalf("validated config out of range: %+v", c)
		}
	})
}

// TestSeqText checks the loop's per-run text pipeline: tokens → UTF-8
// hold-back → stop strings, across run boundaries.
func TestSeqText(t *testing.T) {
	f := func(stops []string, runs []string, want string, wantMatch bool) {
		t.Helper()
		s := newSeq()
		s.stop = newStopMatcher(stops)
		matched := false
		for _, r := range runs {
			var toks []int32
			for i := 0; i < len(r); i++ {
				toks = append(toks, int32(r[i]))
			}
			if r == "<eos>" {
				toks = []int32{native.TokEOS}
			}
			matched = s.consume(toks, nil)
		}
		if !matched {
			s.flushText()
		}
		var out outBuf
		s.take(&out)
		if string(out.text) != want || matched != wantMatch {
			t.Errorf("stops %q runs %q: text %q matched %v, want %q %v", stops, runs, out.text, matched, want, wantMatch)
		}
	}
	// A multi-byte stop string split mid-character across runs.
	f([]string{"€y"}, []string{"x\xe2", "\x82", "\xacy tail"}, "x", true)
	// A held partial character that never completes becomes U+FFFD at the end.
	f([]string{"zz"}, []string{"a\xe2\x82", "<eos>"}, "a\uFFFD", false)
	// Control tokens make no text and do not break a character.
	f(nil, []string{"\xc3", "<eos>", "\xa9"}, "é", false)
	// A stop-string prefix held at the end is released.
	f([]string{"end!"}, []string{"the en"}, "the en", false)
	// U+FFFD from invalid bytes can be part of a stop string.
	f([]string{"\uFFFD!"}, []string{"ok\xff!"}, "ok", true)
}
