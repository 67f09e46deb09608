package daemon

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/picometer/picometer/native"
	"github.com/picometer/picometer/schema"
)

// Unit tests of the HTTP API over real loopback HTTP, with the in-test
// fake engine. The same behaviour against the real engine is in
// e2e_test.go.

func TestCompletion(t *testing.T) {
	eng := newFakeEngine(128)
	ts := startServer(t, eng, nil)
	r := ts.post("/v1/completions", `{"prompt":"hello","max_tokens":50,"return_token_ids":true}`)
	if r.status != 200 || r.header.Get("Content-Type") != "application/json" {
		t.Fatalf("status %d %s: %s", r.status, r.header.Get("Content-Type"), r.body)
	}
	c := decodeCompletionResponse(t, r.body)
	if !strings.HasPrefix(c.ID, "cmpl-") || c.Object != "text_completion" || c.Model != "fake-model" || c.Created == 0 || len(c.Choices) != 1 {
		t.Errorf("envelope %+v", c)
	}
	// The fake echoes the prompt's bytes, then EOS: 6 tokens, "hello".
	if c.text() != "hello" || c.finish() != "stop" {
		t.Errorf("text %q finish %q", c.text(), c.finish())
	}
	wantIDs := []int32{'h', 'e', 'l', 'l', 'o', native.TokEOS}
	if !slices.Equal(c.Choices[0].TokenIDs, wantIDs) {
		t.Errorf("token_ids %v, want %v", c.Choices[0].TokenIDs, wantIDs)
	}
	u := c.Usage
	if u.PromptTokens != 6 || u.CompletionTokens != 6 || u.TotalTokens != 12 {
		t.Errorf("usage %+v", u)
	}
	for _, k := range []string{"ttft_s", "time_per_output_token_s", "e2e_s", "queue_s", "prefill_s", "decode_s",
		"prefill_tokens_per_s", "decode_tokens_per_s", "inter_token_latency_s", "prefill_tokens", "decode_tokens",
		"draft_tokens", "accepted_tokens", "accept_rate"} {
		if _, ok := u.Extra[k]; !ok {
			t.Errorf("usage.extra lacks %s: %v", k, u.Extra)
		}
	}
	x := u.Extra
	if x["ttft_s"] <= 0 || x["e2e_s"] < x["ttft_s"] || x["queue_s"] > x["ttft_s"] || x["prefill_tokens"] != 6 || x["decode_tokens"] != 5 {
		t.Errorf("usage.extra inconsistent: %v", x)
	}
	// The request event carries the same facts.
	ev := ts.sink.request(c.ID)
	if ev.Operation != schema.OpTextCompletion || ev.Stream || ev.FinishReason != "stop" || ev.CompletionTokens != 6 || ev.PromptTokens != 6 || len(ev.ITLUS) != 5 {
		t.Errorf("event %+v", ev.RequestBody)
	}
	if got := float64(ev.FinishUS) / 1e6; got != x["e2e_s"] {
		t.Errorf("usage e2e_s %v, event finish %v", x["e2e_s"], got)
	}
}

func TestCompletionLengthAndDefaults(t *testing.T) {
	eng := newFakeEngine(128)
	ts := startServer(t, eng, nil)
	f := func(body, wantText, wantFinish string, wantTokens int) {
		t.Helper()
		r := ts.post("/v1/completions", body)
		if r.status != 200 {
			t.Fatalf("%s: %d %s", body, r.status, r.body)
		}
		c := decodeCompletionResponse(t, r.body)
		if c.text() != wantText || c.finish() != wantFinish || c.Usage.CompletionTokens != wantTokens {
			t.Errorf("%s: text %q finish %q tokens %d, want %q %q %d", body, c.text(), c.finish(), c.Usage.CompletionTokens, wantText, wantFinish, wantTokens)
		}
	}
	f(`{"prompt":"hello world","max_tokens":3}`, "hel", "length", 3)
	// max_tokens absent: OpenAI's default of 16 for completions.
	f(`{"prompt":"abcdefghijklmnopqrstuvwxyz"}`, "abcdefghijklmnop", "length", 16)
	// The model served is accepted by name; token-id prompts are used as sent.
	f(`{"model":"fake-model","prompt":[256,65,66]}`, "AB", "stop", 3)
	f(`{"prompt":["xy"],"max_tokens":10}`, "xy", "stop", 3)
}

func TestChat(t *testing.T) {
	eng := newFakeEngine(128)
	ts := startServer(t, eng, nil)
	r := ts.post("/v1/chat/completions", `{"messages":[{"role":"user","content":"hi there"}]}`)
	if r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	c := decodeCompletionResponse(t, r.body)
	// The fake echoes "hi there" and ends the turn with <|end|>, which the
	// daemon passes as a stop token for chat; control tokens make no text.
	if !strings.HasPrefix(c.ID, "chatcmpl-") || c.Object != "chat.completion" || c.Choices[0].Message == nil ||
		c.Choices[0].Message.Role != "assistant" || c.text() != "hi there" || c.finish() != "stop" {
		t.Errorf("got %s", r.body)
	}
	// Prompt: <|bos|><|user|>hi there<|end|><|assistant|> = 12 tokens.
	if c.Usage.PromptTokens != 12 || c.Usage.CompletionTokens != 9 {
		t.Errorf("usage %+v", c.Usage)
	}
	if ev := ts.sink.request(c.ID); ev.Operation != schema.OpChat || ev.FinishReason != "stop" {
		t.Errorf("event %+v", ev.RequestBody)
	}
}

func TestStreamCompletion(t *testing.T) {
	eng := newFakeEngine(128)
	ts := startServer(t, eng, nil)
	s := ts.stream("/v1/completions", `{"prompt":"abc","stream":true,"stream_options":{"include_usage":true}}`)
	if s.status != 200 || s.header.Get("Content-Type") != "text/event-stream" || s.header.Get("Cache-Control") != "no-cache" {
		t.Fatalf("status %d headers %v", s.status, s.header)
	}
	// One chunk per run with text (a, b, c), the finish chunk (EOS makes no
	// text), the usage chunk, [DONE].
	if len(s.data) != 6 || s.data[5] != "[DONE]" {
		t.Fatalf("events %q", s.data)
	}
	for i, want := range []string{"a", "b", "c"} {
		c := s.chunks[i]
		if c.text() != want || c.finish() != "" || c.Object != "text_completion" || c.Usage != nil {
			t.Errorf("chunk %d: %s", i, s.data[i])
		}
		if !strings.Contains(s.data[i], `"usage":null`) {
			t.Errorf("chunk %d lacks usage:null with include_usage: %s", i, s.data[i])
		}
	}
	if fin := s.chunks[3]; fin.finish() != "stop" || fin.text() != "" {
		t.Errorf("finish chunk %s", s.data[3])
	}
	u := s.chunks[4]
	if len(u.Choices) != 0 || u.Usage == nil || u.Usage.CompletionTokens != 4 || u.Usage.PromptTokens != 4 || u.Usage.Extra["ttft_s"] <= 0 {
		t.Errorf("usage chunk %s", s.data[4])
	}
	ids := map[string]bool{}
	for _, c := range s.chunks {
		ids[c.ID] = true
	}
	if len(ids) != 1 {
		t.Errorf("chunks carry %d ids", len(ids))
	}
	if ev := ts.sink.request(s.chunks[0].ID); !ev.Stream || ev.CompletionTokens != 4 {
		t.Errorf("event %+v", ev.RequestBody)
	}
}

func TestStreamChat(t *testing.T) {
	eng := newFakeEngine(128)
	eng.runLen = 2 // runs of two tokens, as a speculative step emits
	ts := startServer(t, eng, nil)
	s := ts.stream("/v1/chat/completions", `{"messages":[{"role":"user","content":"wxyz"}],"stream":true}`)
	if s.status != 200 {
		t.Fatalf("status %d %v", s.status, s.errs)
	}
	// role chunk, "wx", "yz", then <|end|> alone (no text): finish chunk, [DONE].
	if len(s.data) != 5 || s.data[4] != "[DONE]" {
		t.Fatalf("events %q", s.data)
	}
	first := s.chunks[0].Choices[0].Delta
	if s.chunks[0].Object != "chat.completion.chunk" || first == nil || first.Role == nil || *first.Role != "assistant" || *first.Content != "" {
		t.Errorf("first chunk %s", s.data[0])
	}
	if s.chunks[1].text() != "wx" || s.chunks[2].text() != "yz" {
		t.Errorf("chunks %q", s.data)
	}
	if d := s.chunks[3].Choices[0].Delta; s.chunks[3].finish() != "stop" || d == nil || d.Content != nil {
		t.Errorf("finish chunk %s", s.data[3])
	}
	if strings.Contains(strings.Join(s.data, ""), "usage") {
		t.Errorf("usage sent without include_usage: %q", s.data)
	}
}

// TestStreamUTF8 streams multi-byte characters one byte per run: no chunk
// may carry a broken character, and with return_token_ids every run's
// tokens arrive, adding up to usage.completion_tokens.
func TestStreamUTF8(t *testing.T) {
	eng := newFakeEngine(128)
	ts := startServer(t, eng, nil)
	const text = "é€😀a"
	s := ts.stream("/v1/completions", `{"prompt":"`+text+`","max_tokens":100,"stream":true,"stream_options":{"include_usage":true}}`)
	var texts []string
	for _, c := range s.chunks {
		if len(c.Choices) > 0 && c.text() != "" {
			texts = append(texts, c.text())
		}
	}
	if !slices.Equal(texts, []string{"é", "€", "😀", "a"}) {
		t.Errorf("text chunks %q, want one per character", texts)
	}

	s = ts.stream("/v1/completions", `{"prompt":"`+text+`","stream":true,"return_token_ids":true,"stream_options":{"continuous_usage_stats":true,"include_usage":true}}`)
	var ids []int32
	for _, c := range s.chunks {
		if len(c.Choices) > 0 {
			ids = append(ids, c.Choices[0].TokenIDs...)
			if !utf8.ValidString(c.text()) || strings.ContainsRune(c.text(), utf8.RuneError) {
				t.Errorf("chunk with a broken character: %q", c.text())
			}
			if c.Usage == nil || c.Usage.CompletionTokens != len(ids) {
				t.Errorf("continuous usage %+v after %d tokens", c.Usage, len(ids))
			}
		}
	}
	last := s.chunks[len(s.chunks)-1]
	if s.text() != text || len(ids) != last.Usage.CompletionTokens || len(ids) != len(text)+1 {
		t.Errorf("text %q, %d token ids, usage %d", s.text(), len(ids), last.Usage.CompletionTokens)
	}
}

// TestInvalidUTF8Output: bytes that never form a character become U+FFFD
// when the stream ends, not held forever.
func TestInvalidUTF8Output(t *testing.T) {
	eng := newFakeEngine(128)
	eng.gen = func([]int32) []int32 { return []int32{'a', 0xff, 'b', 0xe2, 0x82, native.TokEOS} }
	ts := startServer(t, eng, nil)
	r := ts.post("/v1/completions", `{"prompt":"x"}`)
	if c := decodeCompletionResponse(t, r.body); c.text() != "a\uFFFDb\uFFFD" || c.Usage.CompletionTokens != 6 {
		t.Errorf("text %q usage %+v", c.text(), c.Usage)
	}
	s := ts.stream("/v1/completions", `{"prompt":"x","stream":true}`)
	if s.text() != "a\uFFFDb\uFFFD" {
		t.Errorf("streamed %q", s.data)
	}
}

func TestStopStrings(t *testing.T) {
	eng := newFakeEngine(128)
	eng.runLen = 3
	ts := startServer(t, eng, nil)
	// Runs "abc", " ST", "OP ", "def": the stop string spans two runs.
	const body = `{"prompt":"abc STOP def","stop":["STOP","zzz"],"return_token_ids":true`
	r := ts.post("/v1/completions", body+"}")
	c := decodeCompletionResponse(t, r.body)
	// Text stops before the stop string; the tokens the engine generated
	// (3 runs of 3) are all counted and returned.
	if c.text() != "abc " || c.finish() != "stop" || c.Usage.CompletionTokens != 9 || len(c.Choices[0].TokenIDs) != 9 {
		t.Errorf("text %q finish %q usage %+v ids %v", c.text(), c.finish(), c.Usage, c.Choices[0].TokenIDs)
	}
	var cancelled int
	eng.observe(func() { cancelled = len(eng.cancelled) })
	if cancelled != 1 {
		t.Errorf("the engine saw %d cancellations, want 1 (stop string)", cancelled)
	}
	if ev := ts.sink.request(c.ID); ev.FinishReason != "stop" || ev.ErrorType != "" || ev.CompletionTokens != 9 {
		t.Errorf("event %+v", ev.RequestBody)
	}

	s := ts.stream("/v1/completions", body+`,"stream":true}`)
	if s.text() != "abc " || s.chunks[len(s.chunks)-1].finish() != "stop" {
		t.Errorf("streamed %q", s.data)
	}
	for _, d := range s.data {
		if strings.Contains(d, `ST"`) {
			t.Errorf("part of the stop string was streamed: %s", d)
		}
	}
	// A chat stop string.
	r = ts.post("/v1/chat/completions", `{"messages":[{"role":"user","content":"one. two"}],"stop":"."}`)
	if c := decodeCompletionResponse(t, r.body); c.text() != "one" || c.finish() != "stop" {
		t.Errorf("chat: %s", r.body)
	}
}

func TestRoutesAndMethods(t *testing.T) {
	eng := newFakeEngine(128)
	ts := startServer(t, eng, nil)
	for _, tc := range []struct {
		method, path string
		status       int
		typ, code    string
		allow        string
	}{
		{"GET", "/v1/nope", 404, "not_found_error", "unknown_url", ""},
		{"POST", "/", 404, "not_found_error", "unknown_url", ""},
		{"GET", "/v1/completions", 405, "invalid_request_error", "method_not_allowed", "POST"},
		{"PUT", "/v1/chat/completions", 405, "invalid_request_error", "method_not_allowed", "POST"},
		{"POST", "/v1/models", 405, "invalid_request_error", "method_not_allowed", "GET, HEAD"},
		{"DELETE", "/health", 405, "invalid_request_error", "method_not_allowed", "GET, HEAD"},
		{"POST", "/debug/engine_metrics", 405, "invalid_request_error", "method_not_allowed", "GET, HEAD"},
		{"GET", "/v1/models/other", 404, "not_found_error", "model_not_found", ""},
	} {
		t.Run(tc.method+tc.path, func(t *testing.T) {
			r := ts.do(tc.method, tc.path, "")
			e := decodeError(t, r.body)
			if r.status != tc.status || e.Type != tc.typ || e.Code == nil || *e.Code != tc.code || r.header.Get("Allow") != tc.allow {
				t.Errorf("got %d %s allow %q", r.status, r.body, r.header.Get("Allow"))
			}
		})
	}
	r := ts.do("GET", "/v1/models", "")
	var list struct {
		Object string `json:"object"`
		Data   []struct {
			ID, Object, OwnedBy string
			MaxModelLen         int `json:"max_model_len"`
		} `json:"data"`
	}
	if err := json.Unmarshal(r.body, &list); err != nil || r.status != 200 || list.Object != "list" || len(list.Data) != 1 ||
		list.Data[0].ID != "fake-model" || list.Data[0].MaxModelLen != 128 {
		t.Errorf("models: %d %s", r.status, r.body)
	}
	if r := ts.do("GET", "/v1/models/fake-model", ""); r.status != 200 || !strings.Contains(string(r.body), `"id":"fake-model"`) {
		t.Errorf("model: %d %s", r.status, r.body)
	}
	if r := ts.do("GET", "/health", ""); r.status != 200 || string(r.body) != `{"status":"ok"}` {
		t.Errorf("health: %d %s", r.status, r.body)
	}
	// Failed completion requests are counted as request events.
	r = ts.do("GET", "/v1/completions", "")
	waitFor(t, 5*time.Second, "a method_not_allowed event", func() bool {
		for _, ev := range ts.sink.requests() {
			if ev.ErrorType == schema.ErrMethodNotAllowed && ev.FinishReason == schema.FinishError && ev.Operation == schema.OpTextCompletion {
				return true
			}
		}
		return false
	})
}

// TestBadInput sends each kind of bad input to both endpoints and checks
// the status, the whole OpenAI error shape and the request event.
func TestBadInput(t *testing.T) {
	eng := newFakeEngine(64)
	ts := startServer(t, eng, nil)
	long := strings.Repeat("x", 63) // 64 tokens with <|bos|>: no room left
	for _, tc := range []struct {
		name, path, body string
		param, code      string
	}{
		{"malformed JSON", "/v1/completions", `{"prompt":"x"`, "", "invalid_json"},
		{"body not an object", "/v1/chat/completions", `"hi"`, "", "invalid_json"},
		{"wrong type", "/v1/completions", `{"prompt":"x","max_tokens":"3"}`, "max_tokens", "invalid_type"},
		{"out of range", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"temperature":9}`, "temperature", "invalid_value"},
		{"n not 1", "/v1/completions", `{"prompt":"x","n":2}`, "n", "unsupported_parameter"},
		{"logprobs above 5", "/v1/completions", `{"prompt":"x","logprobs":9}`, "logprobs", "invalid_value"},
		{"chat top_logprobs above 20", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"logprobs":true,"top_logprobs":30}`, "top_logprobs", "invalid_value"},
		{"prompt longer than the context", "/v1/completions", `{"prompt":"` + long + `"}`, "prompt", "context_length_exceeded"},
		{"messages longer than the context", "/v1/chat/completions", `{"messages":[{"role":"user","content":"` + long + `"}]}`, "messages", "context_length_exceeded"},
		{"prompt plus max_tokens over the context", "/v1/completions", `{"prompt":"abc","max_tokens":61}`, "max_tokens", "context_length_exceeded"},
		{"chat max_completion_tokens over the context", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"max_completion_tokens":100}`, "max_completion_tokens", "context_length_exceeded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ts.post(tc.path, tc.body)
			e := decodeError(t, r.body)
			param := ""
			if e.Param != nil {
				param = *e.Param
			}
			if r.status != 400 || e.Type != "invalid_request_error" || param != tc.param || e.Code == nil || *e.Code != tc.code || e.Message == "" {
				t.Errorf("got %d %s", r.status, r.body)
			}
		})
	}
	// The longest prompt that fits gets exactly one token.
	r := ts.post("/v1/completions", `{"prompt":"`+long[1:]+`","max_tokens":1}`)
	if c := decodeCompletionResponse(t, r.body); r.status != 200 || c.Usage.CompletionTokens != 1 || c.finish() != "length" {
		t.Errorf("fitting prompt: %d %s", r.status, r.body)
	}
	r = ts.post("/v1/completions", `{"prompt":"x","model":"gpt-4"}`)
	if e := decodeError(t, r.body); r.status != 404 || e.Type != "not_found_error" || *e.Code != "model_not_found" || *e.Param != "model" {
		t.Errorf("unknown model: %d %s", r.status, r.body)
	}
	waitFor(t, 5*time.Second, "12 invalid_request and 1 not_found request events", func() bool {
		n400, n404 := 0, 0
		for _, ev := range ts.sink.requests() {
			switch {
			case ev.FinishReason == schema.FinishError && ev.ErrorType == schema.ErrInvalidRequest:
				n400++
			case ev.FinishReason == schema.FinishError && ev.ErrorType == schema.ErrNotFound:
				n404++
			}
		}
		return n400 == 11 && n404 == 1
	})
}

func TestAPIKeys(t *testing.T) {
	eng := newFakeEngine(128)
	ts := startServer(t, eng, func(c *Config) { c.APIKeys = []string{"k1", "secret-2"} })
	for _, tc := range []struct {
		name, path, auth string
		status           int
	}{
		{"no key", "/v1/completions", "", 401},
		{"wrong key", "/v1/completions", "Bearer nope", 401},
		{"not bearer", "/v1/completions", "Basic secret-2", 401},
		{"right key", "/v1/completions", "Bearer secret-2", 200},
		{"case-insensitive scheme", "/v1/chat/completions", "bearer k1", 200},
		{"models need a key", "/v1/models", "", 401},
		{"models with key", "/v1/models", "Bearer k1", 200},
		{"health is open", "/health", "", 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			method, body := "POST", `{"prompt":"x","messages":[{"role":"user","content":"x"}]}`
			if !strings.HasPrefix(tc.path, "/v1/c") {
				method, body = "GET", ""
			}
			var r httpResult
			if tc.auth == "" {
				r = ts.do(method, tc.path, body)
			} else {
				r = ts.do(method, tc.path, body, "Authorization", tc.auth)
			}
			if r.status != tc.status {
				t.Fatalf("status %d %s", r.status, r.body)
			}
			if tc.status == 401 {
				e := decodeError(t, r.body)
				if e.Type != "authentication_error" || *e.Code != "invalid_api_key" || r.header.Get("WWW-Authenticate") != "Bearer" {
					t.Errorf("401 body %s", r.body)
				}
				if strings.Contains(string(r.body), "nope") {
					t.Errorf("401 echoes the key: %s", r.body)
				}
			}
		})
	}
	waitFor(t, 5*time.Second, "3 unauthorized request events", func() bool {
		n := 0
		for _, ev := range ts.sink.requests() {
			if ev.ErrorType == schema.ErrUnauthorized {
				n++
			}
		}
		return n == 3
	})
}

// TestBodyTooLarge: a body over max_body_bytes gets an OpenAI-shaped 413
// and a request event, whatever its size and framing (the client must read
// the 413, not a connection reset), and at once when the client asks
// "Expect: 100-continue" (the body is never sent).
func TestBodyTooLarge(t *testing.T) {
	eng := newFakeEngine(128)
	ts := startServer(t, eng, func(c *Config) { c.MaxBodyBytes = 2048 })
	check := func(name string, status int, body []byte) {
		t.Helper()
		e := decodeError(t, body)
		if status != 413 || e.Type != "invalid_request_error" || *e.Code != "payload_too_large" || !strings.Contains(e.Message, "2048 bytes") {
			t.Errorf("%s: got %d %s", name, status, body)
		}
	}
	n := 0
	for _, size := range []int{4 << 10, 1 << 20, 8 << 20} {
		for _, chunked := range []bool{false, true} {
			name := fmt.Sprintf("%d bytes, chunked %v", size, chunked)
			body := `{"prompt":"` + strings.Repeat("a", size) + `"}`
			req, err := http.NewRequest("POST", ts.url+"/v1/completions", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			if chunked {
				req.ContentLength = -1
			}
			resp, err := testClient.Do(req)
			if err != nil {
				t.Errorf("%s: %v", name, err)
				continue
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			check(name, resp.StatusCode, b)
			n++
		}
	}
	// Expect: 100-continue with a body announced over the limit: the 413
	// comes without the body being sent.
	conn := rawConn(t, ts)
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n", 1<<30)
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	check("expect 100-continue", resp.StatusCode, b)
	n++
	waitFor(t, 5*time.Second, "a payload_too_large event per 413", func() bool {
		k := 0
		for _, ev := range ts.sink.requests() {
			if ev.ErrorType == schema.ErrPayloadTooLarge && ev.FinishReason == schema.FinishError {
				k++
			}
		}
		return k == n
	})
	// Expect: 100-continue with a body within the limit is served.
	conn = rawConn(t, ts)
	body := `{"prompt":"ok"}`
	fmt.Fprintf(conn, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n", len(body))
	br := bufio.NewReader(conn)
	if line, _ := br.ReadString('\n'); line != "HTTP/1.1 100 Continue\r\n" {
		t.Fatalf("got %q, want 100 Continue", line)
	}
	br.ReadString('\n')
	conn.Write([]byte(body))
	if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != 200 {
		t.Errorf("expect 100-continue within the limit: %v %v", resp, err)
	}
	// The server still serves.
	if r := ts.post("/v1/completions", `{"prompt":"ok"}`); r.status != 200 {
		t.Errorf("after a 413: %d %s", r.status, r.body)
	}
}

// rawConn dials the test server.
func rawConn(t *testing.T, ts *testServer) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(ts.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// TestQueueFull fills the one slot and the one waiting place, then expects
// a 429 with Retry-After.
func TestQueueFull(t *testing.T) {
	eng := newFakeEngine(1 << 20)
	eng.gen = forever
	eng.stepDelay = 2 * time.Millisecond
	eng.cfg.BMax, eng.cfg.MaxWaiting = 1, 1
	ts := startServer(t, eng, nil)
	var bodies []io.Closer
	for i := 0; i < 2; i++ {
		resp, err := testClient.Post(ts.url+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"x","max_tokens":100000,"stream":true}`))
		if err != nil {
			t.Fatal(err)
		}
		bodies = append(bodies, resp.Body)
		if i == 0 {
			waitFor(t, 5*time.Second, "the first request to run", func() bool { r, _ := eng.Load(); return r == 1 })
		}
	}
	waitFor(t, 5*time.Second, "one waiting request", func() bool { _, w := eng.Load(); return w == 1 })
	r := ts.post("/v1/completions", `{"prompt":"x"}`)
	e := decodeError(t, r.body)
	if r.status != 429 || e.Type != "rate_limit_error" || *e.Code != "queue_full" || r.header.Get("Retry-After") != "1" {
		t.Errorf("got %d %s %v", r.status, r.body, r.header)
	}
	if ev := ts.sink.request(firstErrorID(t, ts, schema.ErrQueueFull)); ev.FinishReason != schema.FinishError {
		t.Errorf("queue_full event %+v", ev.RequestBody)
	}
	for _, b := range bodies {
		b.Close()
	}
	// Both streams are cancelled once their clients are gone.
	waitFor(t, 5*time.Second, "the engine to be empty", func() bool { r, w := eng.Load(); return r+w == 0 })
}

// firstErrorID returns the id of the first request event with the
// given error type.
func firstErrorID(t *testing.T, ts *testServer, errType string) string {
	var id string
	waitFor(t, 5*time.Second, "a "+errType+" event", func() bool {
		for _, ev := range ts.sink.requests() {
			if ev.ErrorType == errType {
				id = ev.ID
				return true
			}
		}
		return false
	})
	return id
}

// TestEngineFailure: when the engine fails (an error from Step, or a panic
// in the loop), every in-flight request fails with a 500 engine_error (an
// error event on streams) and a request event, /health turns 503, later
// requests get the same 500, and the daemon keeps answering.
func TestEngineFailure(t *testing.T) {
	for _, how := range []string{"error", "panic"} {
		t.Run(how, func(t *testing.T) {
			eng := newFakeEngine(1 << 20)
			eng.gen = forever
			eng.stepDelay = time.Millisecond
			ts := startServer(t, eng, nil)
			var wg sync.WaitGroup
			results := make([]httpResult, 3)
			for i := range results {
				wg.Add(1)
				go func() {
					defer wg.Done()
					results[i] = ts.post("/v1/completions", fmt.Sprintf(`{"prompt":"r%d","max_tokens":1000000}`, i))
				}()
			}
			var s *sse
			wg.Add(1)
			go func() {
				defer wg.Done()
				s = ts.stream("/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"stream":true}`)
			}()
			waitFor(t, 5*time.Second, "4 running requests", func() bool { r, _ := eng.Load(); return r == 4 })
			eng.observe(func() {
				if how == "error" {
					eng.failAt = eng.stepCalls + 1
				} else {
					eng.panicAt = eng.stepCalls + 1
				}
			})
			wg.Wait()
			for i, r := range results {
				e := decodeError(t, r.body)
				if r.status != 500 || e.Type != "server_error" || *e.Code != "engine_error" || !strings.Contains(e.Message, map[string]string{"error": "injected failure", "panic": "injected panic"}[how]) {
					t.Errorf("request %d: %d %s", i, r.status, r.body)
				}
			}
			if s.status != 200 || len(s.errs) != 1 || *s.errs[0].Code != "engine_error" || s.data[len(s.data)-1] != "[DONE]" {
				t.Errorf("stream: %d %q", s.status, s.data)
			}
			if r := ts.do("GET", "/health", ""); r.status != 503 || string(r.body) != `{"status":"engine_failed"}` {
				t.Errorf("health after failure: %d %s", r.status, r.body)
			}
			if r := ts.post("/v1/completions", `{"prompt":"x"}`); r.status != 500 {
				t.Errorf("request after failure: %d %s", r.status, r.body)
			}
			if r := ts.do("GET", "/debug/engine_metrics", ""); r.status != 200 {
				t.Errorf("debug metrics after failure: %d %s", r.status, r.body)
			}
			waitFor(t, 5*time.Second, "5 engine_error events", func() bool {
				n := 0
				for _, ev := range ts.sink.requests() {
					if ev.ErrorType == schema.ErrEngine && ev.FinishReason == schema.FinishError {
						n++
					}
				}
				return n == 5
			})
			if !ts.log.contains(`level=ERROR msg="engine loop: the engine failed`) {
				t.Errorf("engine failure not logged")
			}
		})
	}
}

// TestSubmitPanic: a panic while a request is submitted answers it (500,
// one request event) and fails the engine like any engine failure.
func TestSubmitPanic(t *testing.T) {
	eng := newFakeEngine(128)
	eng.panicSub = true
	ts := startServer(t, eng, nil)
	r := ts.post("/v1/completions", `{"prompt":"x"}`)
	if e := decodeError(t, r.body); r.status != 500 || *e.Code != "engine_error" || !strings.Contains(e.Message, "panic in Submit") {
		t.Errorf("got %d %s", r.status, r.body)
	}
	if r := ts.do("GET", "/health", ""); r.status != 503 {
		t.Errorf("health: %d %s", r.status, r.body)
	}
	ts.shutdown()
	ts.sink.drained()
	if reqs := ts.sink.requests(); len(reqs) != 1 || reqs[0].ErrorType != schema.ErrEngine {
		t.Errorf("request events %+v, want one engine_error", reqs)
	}
}

// TestClientDisconnect: a streaming client that goes away cancels its
// request in the engine (finish reason abort, error type cancelled).
func TestClientDisconnect(t *testing.T) {
	eng := newFakeEngine(1 << 20)
	eng.gen = forever
	eng.stepDelay = time.Millisecond
	ts := startServer(t, eng, nil)
	resp, err := testClient.Post(ts.url+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"x","max_tokens":1000000,"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 256)
	if _, err := io.ReadAtLeast(resp.Body, buf, 100); err != nil {
		t.Fatal(err)
	}
	id := between(string(buf), `"id":"`, `"`)
	resp.Body.Close() // the transport closes the connection mid-body
	waitFor(t, 5*time.Second, "the engine to cancel", func() bool {
		n := 0
		eng.observe(func() { n = len(eng.cancelled) })
		return n == 1
	})
	ev := ts.sink.request(id)
	if ev.FinishReason != schema.FinishAbort || ev.ErrorType != schema.ErrCancelled || ev.CompletionTokens < 1 {
		t.Errorf("event %+v", ev.RequestBody)
	}
}

func between(s, a, b string) string {
	_, after, _ := strings.Cut(s, a)
	v, _, _ := strings.Cut(after, b)
	return v
}

// TestDeadline: the engine loop aborts a request at its deadline (504 or an
// error event), whatever the socket does.
func TestDeadline(t *testing.T) {
	eng := newFakeEngine(1 << 20)
	eng.gen = forever
	eng.stepDelay = time.Millisecond
	ts := startServer(t, eng, func(c *Config) { c.RequestTimeout = 150 * time.Millisecond })
	start := time.Now()
	r := ts.post("/v1/completions", `{"prompt":"x","max_tokens":1000000}`)
	e := decodeError(t, r.body)
	if r.status != 504 || e.Type != "server_error" || *e.Code != "timeout" || !strings.Contains(e.Message, "150ms") {
		t.Errorf("got %d %s", r.status, r.body)
	}
	if d := time.Since(start); d < 150*time.Millisecond || d > 3*time.Second {
		t.Errorf("answered after %s", d)
	}
	s := ts.stream("/v1/completions", `{"prompt":"x","max_tokens":1000000,"stream":true}`)
	if len(s.errs) != 1 || *s.errs[0].Code != "timeout" || s.data[len(s.data)-1] != "[DONE]" || s.text() == "" {
		t.Errorf("stream: %d errors, last %q", len(s.errs), s.data[len(s.data)-1])
	}
	waitFor(t, 5*time.Second, "2 timeout events", func() bool {
		n := 0
		for _, ev := range ts.sink.requests() {
			if ev.FinishReason == schema.FinishAbort && ev.ErrorType == schema.ErrTimeout {
				n++
			}
		}
		return n == 2
	})
}

// TestStalledClient: a client that stops reading a big stream does not stall
// other requests, and the stall timeout ends its stream (cancelled).
func TestStalledClient(t *testing.T) {
	eng := newFakeEngine(1 << 30)
	eng.gen = forever
	eng.runLen = 8192
	eng.stepDelay = time.Millisecond // about 8 MB/s: the socket buffers fill in a second or two
	ts := startServer(t, eng, func(c *Config) { c.StreamStallTimeout = 300 * time.Millisecond })
	conn, err := net.Dial("tcp", strings.TrimPrefix(ts.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"prompt":"x","max_tokens":1000000000,"stream":true}`
	fmt.Fprintf(conn, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	// Never read. Meanwhile other requests are served promptly.
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	for range 5 {
		if r := ts.post("/v1/completions", `{"prompt":"quick"}`); r.status != 200 {
			t.Fatalf("%d %s", r.status, r.body)
		}
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("5 requests took %s beside a stalled client", d)
	}
	waitFor(t, 10*time.Second, "the stalled stream to be cancelled", func() bool {
		for _, ev := range ts.sink.requests() {
			if ev.ErrorType == schema.ErrCancelled {
				return true
			}
		}
		return false
	})
}

// TestBatching: concurrent requests are decoded together.
func TestBatching(t *testing.T) {
	eng := newFakeEngine(1 << 20)
	eng.stepDelay = time.Millisecond
	eng.gen = forever
	ts := startServer(t, eng, nil)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := ts.post("/v1/completions", fmt.Sprintf(`{"prompt":"req %d","max_tokens":40}`, i))
			if r.status != 200 {
				t.Errorf("%d %s", r.status, r.body)
			}
		}()
	}
	wg.Wait()
	r := ts.do("GET", "/debug/engine_metrics", "")
	var m schema.EngineBody
	if err := json.Unmarshal(r.body, &m); err != nil || r.status != 200 {
		t.Fatalf("%d %s: %v", r.status, r.body, err)
	}
	batched := false
	for n := 2; n < len(m.DecodeTimeByBatchSize); n++ {
		batched = batched || m.DecodeTimeByBatchSize[n].Count > 0
	}
	if !batched || m.RequestsFinished != 8 || m.Slots != 8 {
		t.Errorf("debug metrics %s", r.body)
	}
	if !strings.Contains(string(r.body), `"events_dropped":0`) || !strings.Contains(string(r.body), `"steps":[]`) {
		t.Errorf("debug metrics lack events_dropped or steps: %s", r.body)
	}
}

// TestDebugSnapshotKeepsSteps: step records taken by /debug/engine_metrics
// still reach the sidecar in the next emitted snapshot.
func TestDebugSnapshotKeepsSteps(t *testing.T) {
	eng := newFakeEngine(128)
	ts := startServer(t, eng, func(c *Config) { c.Metrics.SnapshotInterval = time.Hour })
	ts.post("/v1/completions", `{"prompt":"abcd"}`) // 5 steps
	ts.do("GET", "/debug/engine_metrics", "")
	ts.post("/v1/completions", `{"prompt":"ab"}`) // 3 steps
	ts.shutdown()                                 // the final snapshot
	var steps, snapshots int
	waitFor(t, 5*time.Second, "the final snapshot", func() bool {
		steps, snapshots = 0, 0
		for _, ev := range ts.sink.events() {
			if ev.Kind == schema.KindEngine {
				steps += len(ev.Steps)
				snapshots++
			}
		}
		return snapshots == 1
	})
	if steps != 8 {
		t.Errorf("%d step records reached the sink, want 8", steps)
	}
}

// TestEngineOwnedMemory: the fake poisons what it returned on its next call;
// text and stats must not change afterwards.
func TestEngineOwnedMemory(t *testing.T) {
	eng := newFakeEngine(256)
	eng.runLen = 5
	ts := startServer(t, eng, nil)
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			want := fmt.Sprintf("request number %d with a longer text", i)
			r := ts.post("/v1/completions", `{"prompt":"`+want+`","max_tokens":100}`)
			c := decodeCompletionResponse(t, r.body)
			if c.text() != want || c.Usage.CompletionTokens != len(want)+1 || c.Usage.Extra["decode_tokens"] != float64(len(want)) {
				t.Errorf("got %q usage %+v", c.text(), c.Usage)
			}
		}()
	}
	wg.Wait()
}

// TestQuietLog: serving, good or bad, logs nothing per request at info
// level or above (a log line per request costs and floods); per-connection
// HTTP errors are debug records. The only record above debug is the
// emitter's connection.
func TestQuietLog(t *testing.T) {
	eng := newFakeEngine(128)
	ts := startServer(t, eng, func(c *Config) { c.MaxBodyBytes = 2048; c.APIKeys = []string{"k"} })
	auth := []string{"Authorization", "Bearer k"}
	for range 3 {
		ts.post("/v1/completions", `{"prompt":"hi"}`, auth...)
		ts.post("/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"stream":true}`, auth...)
		ts.post("/v1/completions", `{"prompt":"hi","stop":"i"}`, auth...)
		ts.post("/v1/completions", `{"prompt":`, auth...)
		ts.post("/v1/completions", `{"prompt":"hi"}`)
		ts.post("/v1/completions", `{"prompt":"`+strings.Repeat("a", 4096)+`"}`, auth...)
		ts.do("GET", "/nope", "")
		ts.do("DELETE", "/health", "")
		ts.do("GET", "/debug/engine_metrics", "")
	}
	conn, err := net.Dial("tcp", strings.TrimPrefix(ts.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "GARBAGE\r\n\r\n")
	io.ReadAll(conn)
	conn.Close()
	waitFor(t, 5*time.Second, "the requests' events", func() bool { return len(ts.sink.requests()) >= 18 })
	debug := 0
	for _, line := range ts.log.all() {
		switch {
		case strings.Contains(line, "level=DEBUG"):
			debug++
		case strings.Contains(line, `msg="emitter: connected"`):
		default:
			t.Errorf("logged while serving: %s", line)
		}
	}
	if debug == 0 {
		t.Errorf("no debug record for the bad HTTP requests")
	}
}

// TestStreamAfterLongSilence: a stream whose output pauses for longer than
// stream_stall_timeout, then resumes with more than a buffer's worth of
// text, is not cut: the stall timeout bounds a write to a client that does
// not read, not a silence of the engine.
func TestStreamAfterLongSilence(t *testing.T) {
	eng := newFakeEngine(1 << 16)
	eng.gen = forever
	eng.runLen = 8192
	eng.stepDelay = 250 * time.Millisecond
	ts := startServer(t, eng, func(c *Config) { c.StreamStallTimeout = 100 * time.Millisecond })
	for _, path := range []string{"/v1/chat/completions", "/v1/completions"} {
		s := ts.stream(path, `{"prompt":"x","messages":[{"role":"user","content":"x"}],"max_tokens":8192,"stream":true}`)
		if len(s.errs) != 0 || s.chunks[len(s.chunks)-1].finish() != "length" || len(s.text()) != 8192 {
			t.Errorf("%s: %d errors, %d bytes of text", path, len(s.errs), len(s.text()))
		}
	}
	// A later request on the same keep-alive connection, answered after
	// more than the stall timeout, is written.
	if r := ts.post("/v1/completions", `{"prompt":"x","max_tokens":8192}`); r.status != 200 {
		t.Errorf("non-streamed after a stream: %d", r.status)
	}
	time.Sleep(150 * time.Millisecond)
	if r := ts.do("GET", "/health", ""); r.status != 200 {
		t.Errorf("health on a connection idle longer than the stall timeout: %d", r.status)
	}
}

// TestNonStreamedStalledClient: a client that never reads a large
// non-streamed response does not hold its connection (and a server
// goroutine) forever: the write gives up after stream_stall_timeout.
func TestNonStreamedStalledClient(t *testing.T) {
	eng := newFakeEngine(1 << 23)
	eng.gen = forever
	eng.runLen = 1 << 16
	ts := startServer(t, eng, func(c *Config) { c.StreamStallTimeout = 200 * time.Millisecond })
	conn, err := net.Dial("tcp", strings.TrimPrefix(ts.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.(*net.TCPConn).SetReadBuffer(4096)
	// About 2 MB of text and 8 MB of token ids: more than the socket
	// buffers hold. The client never reads.
	body := `{"prompt":"x","max_tokens":2000000,"return_token_ids":true}`
	fmt.Fprintf(conn, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	waitFor(t, 5*time.Second, "the request to finish", func() bool { return len(ts.sink.requests()) == 1 })
	waitFor(t, 3*time.Second, "the server to give up writing to a client that does not read", func() bool {
		return ts.d.srv.GetOpenConnectionsCount() == 0
	})
}
