package daemon

import (
	"strings"
	"testing"

	"github.com/picometer/picometer/native"
)

// script turns a string into scripted output tokens: its bytes, with
// "<eos>", "<end>" and "<user>" standing for control tokens.
func script(s string) []int32 {
	var out []int32
	for len(s) > 0 {
		switch {
		case strings.HasPrefix(s, "<eos>"):
			out, s = append(out, native.TokEOS), s[5:]
		case strings.HasPrefix(s, "<end>"):
			out, s = append(out, native.TokEnd), s[5:]
		case strings.HasPrefix(s, "<user>"):
			out, s = append(out, native.TokUser), s[6:]
		default:
			out, s = append(out, int32(s[0])), s[1:]
		}
	}
	return out
}

// TestStopEdgeCases runs the stop-string, token-count and UTF-8 hold-back
// interplay through the whole server, streamed and not: the text ends
// right before the first stop string, nothing of a stop string is ever
// streamed, streamed text equals the non-streamed text, and the token ids
// returned add up to usage.completion_tokens.
func TestStopEdgeCases(t *testing.T) {
	for _, tc := range []struct {
		name   string
		chat   bool
		runLen int
		out    string // the model's output, then 'z' forever
		params string // stop, max_tokens…
		text   string
		finish string
		tokens int
	}{
		{"stop at the very first token", false, 1, "Sxyz<eos>", `"stop":"S"`, "", "stop", 1},
		{"stop at the first token of a speculative run", false, 4, "Sxyz<eos>", `"stop":"S"`, "", "stop", 4},
		{"stop string longer than the output", false, 1, "ab<eos>", `"stop":"abcdef"`, "ab", "stop", 3},
		{"stop prefix held at max_tokens", false, 1, "abcz", `"stop":"abcdef","max_tokens":3`, "abc", "length", 3},
		{"max_tokens in the step that completes the stop", false, 3, "xxSTOPyy", `"stop":"STOP","max_tokens":6`, "xx", "stop", 6},
		{"EOS in the step that completes the stop", false, 3, "aSTOP<eos>", `"stop":"STOP"`, "a", "stop", 6},
		{"stop across runs after a held partial character", false, 2, "a\xe2\x82\xac!b<eos>", `"stop":"€!"`, "a", "stop", 6},
		{"partial character held at max_tokens", false, 2, "ab\xe2\x82\xac", `"max_tokens":4`, "ab\uFFFD", "length", 4},
		{"first of several stop strings wins", false, 2, "hello world<eos>", `"stop":["world","lo w"]`, "hel", "stop", 8},
		{"no stop string matches", false, 3, "abc<eos>", `"stop":["x","yz"]`, "abc", "stop", 4},
		{"chat: control tokens mid-stream make no text", true, 1, "ab<user>cd<end>", ``, "abcd", "stop", 6},
		{"chat: stop across a control token", true, 1, "ab<user>cd<end>", `"stop":"bc"`, "a", "stop", 4},
		{"chat: control token inside a character", true, 1, "\xc3<user>\xa9<end>", ``, "é", "stop", 4},
		{"chat: stop before <|end|>", true, 2, "one. two<end>", `"stop":"."`, "one", "stop", 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eng := newFakeEngine(256)
			eng.runLen = tc.runLen
			out := script(tc.out)
			eng.gen = func([]int32) []int32 { return out }
			ts := startServer(t, eng, nil)
			path, body := "/v1/completions", `{"prompt":"p"`
			if tc.chat {
				path, body = "/v1/chat/completions", `{"messages":[{"role":"user","content":"p"}]`
			}
			if !strings.Contains(tc.params, "max_tokens") {
				body += `,"max_tokens":50`
			}
			if tc.params != "" {
				body += "," + tc.params
			}
			body += `,"return_token_ids":true`

			r := ts.post(path, body+"}")
			if r.status != 200 {
				t.Fatalf("%d %s", r.status, r.body)
			}
			c := decodeCompletionResponse(t, r.body)
			if c.text() != tc.text || c.finish() != tc.finish || c.Usage.CompletionTokens != tc.tokens || len(c.Choices[0].TokenIDs) != tc.tokens {
				t.Errorf("got %q %s, %d tokens (%d ids); want %q %s, %d tokens", c.text(), c.finish(), c.Usage.CompletionTokens, len(c.Choices[0].TokenIDs), tc.text, tc.finish, tc.tokens)
			}
			checkUsage(t, c.Usage, ts.sink.request(c.ID))

			s := ts.stream(path, body+`,"stream":true,"stream_options":{"include_usage":true}}`)
			ids, fin := 0, ""
			for i, ch := range s.chunks {
				if len(ch.Choices) == 0 {
					continue
				}
				ids += len(ch.Choices[0].TokenIDs)
				if ch.finish() != "" {
					fin = ch.finish()
				}
				// What has been streamed is always a prefix of the final
				// text: no part of a stop string ever goes out.
				if txt := ch.text(); txt != "" && !strings.HasPrefix(tc.text, s.textUpTo(i)) {
					t.Errorf("chunk %d %q: streamed text %q is not a prefix of %q", i, txt, s.textUpTo(i), tc.text)
				}
			}
			u := s.chunks[len(s.chunks)-1].Usage
			if s.text() != tc.text || fin != tc.finish || ids != tc.tokens || u == nil || u.CompletionTokens != tc.tokens || len(s.errs) != 0 {
				t.Errorf("stream: %q %s, %d token ids, usage %+v; want %q %s %d\n%s", s.text(), fin, ids, u, tc.text, tc.finish, tc.tokens, strings.Join(s.data, "\n"))
			}
		})
	}
}

// textUpTo joins the text of chunks 0..i.
func (s *sse) textUpTo(i int) string {
	var b strings.Builder
	for _, c := range s.chunks[:i+1] {
		if len(c.Choices) > 0 {
			b.WriteString(c.text())
		}
	}
	return b.String()
}
