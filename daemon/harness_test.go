package daemon

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/picometer/picometer/schema"
)

// testServer is a daemon serving real HTTP on a loopback port, with its
// emitter writing to a real unix socket listener (sink).
type testServer struct {
	t    *testing.T
	d    *Daemon
	url  string
	sink *socketSink
	log  *testLog
	stop sync.Once
}

// testLog collects the daemon's log records (every level) as slog text
// lines; the harness prints them only when the test failed. It is safe to
// use after the test ended.
type testLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *testLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	l.lines = append(l.lines, strings.TrimSuffix(string(p), "\n"))
	l.mu.Unlock()
	return len(p), nil
}

// logger returns a logger writing to l at level and above.
func (l *testLog) logger(level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: level}))
}

// all returns a copy of the lines logged so far.
func (l *testLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

func (l *testLog) contains(s string) bool {
	for _, line := range l.all() {
		if strings.Contains(line, s) {
			return true
		}
	}
	return false
}

// socketDir returns a short temporary directory (unix socket paths are
// limited to 107 bytes; t.TempDir can be longer).
func socketDir(t testing.TB) string {
	dir, err := os.MkdirTemp("", "pmd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func testConfig(t testing.TB) Config {
	cfg := DefaultConfig()
	cfg.Model = "fake-model.gguf" // served as "fake-model", the fake engine's general.name too
	cfg.Metrics.Socket = filepath.Join(socketDir(t), "events.sock")
	cfg.Metrics.BackoffMin, cfg.Metrics.BackoffMax = 5*time.Millisecond, 50*time.Millisecond
	cfg.Metrics.SnapshotInterval = 100 * time.Millisecond
	cfg.ShutdownGrace = 2 * time.Second
	return cfg
}

// startServer starts a daemon over eng with the test config modified by
// mod, and a sink listening on its socket (unless mod cleared the socket).
// It shuts down at the end of the test.
func startServer(t *testing.T, eng Engine, mod func(*Config)) *testServer {
	t.Helper()
	cfg := testConfig(t)
	if mod != nil {
		mod(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ts := &testServer{t: t}
	if cfg.Metrics.Socket != "" {
		ts.sink = listenSink(t, cfg.Metrics.Socket)
	}
	ts.log = &testLog{}
	t.Cleanup(func() {
		if t.Failed() {
			for _, l := range ts.log.all() {
				t.Log("daemon: " + l)
			}
		}
	})
	ts.d = New(cfg, eng, Deps{Logger: ts.log.logger(slog.LevelDebug)})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts.url = "http://" + ln.Addr().String()
	go ts.d.Serve(ln)
	t.Cleanup(ts.shutdown)
	return ts
}

func (ts *testServer) shutdown() {
	ts.stop.Do(func() { ts.d.Shutdown(ts.d.cfg.ShutdownGrace) })
}

// httpResult is a whole response.
type httpResult struct {
	status int
	header http.Header
	body   []byte
}

var testClient = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}

func (ts *testServer) do(method, path, body string, hdr ...string) httpResult {
	ts.t.Helper()
	req, err := http.NewRequest(method, ts.url+path, strings.NewReader(body))
	if err != nil {
		ts.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := testClient.Do(req)
	if err != nil {
		ts.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		ts.t.Fatalf("%s %s: reading body: %v", method, path, err)
	}
	return httpResult{resp.StatusCode, resp.Header, b}
}

func (ts *testServer) post(path, body string, hdr ...string) httpResult {
	ts.t.Helper()
	return ts.do("POST", path, body, hdr...)
}

// completion is a decoded non-streamed response (both endpoints).
type completion struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	Model   string `json:"model"`
	Choices []struct {
		Index   int     `json:"index"`
		Text    *string `json:"text"`
		Message *struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"message"`
		Delta *struct {
			Role    *string `json:"role"`
			Content *string `json:"content"`
		} `json:"delta"`
		Logprobs     any     `json:"logprobs"`
		FinishReason *string `json:"finish_reason"`
		TokenIDs     []int32 `json:"token_ids"`
	} `json:"choices"`
	Usage *usageJSON `json:"usage"`
}

type usageJSON struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
	Details          struct {
		CachedTokens *int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	Extra map[string]float64 `json:"extra"`
}

// text returns the choice's text (completions) or content (chat).
func (c *completion) text() string {
	ch := c.Choices[0]
	switch {
	case ch.Text != nil:
		return *ch.Text
	case ch.Message != nil:
		return ch.Message.Content
	case ch.Delta != nil && ch.Delta.Content != nil:
		return *ch.Delta.Content
	}
	return ""
}

func (c *completion) finish() string {
	if len(c.Choices) == 0 || c.Choices[0].FinishReason == nil {
		return ""
	}
	return *c.Choices[0].FinishReason
}

func decodeCompletionResponse(t testing.TB, b []byte) *completion {
	t.Helper()
	var c completion
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		t.Fatalf("response %s: %v", b, err)
	}
	return &c
}

// apiErrorJSON is an OpenAI error object, every key required.
type apiErrorJSON struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func decodeError(t testing.TB, b []byte) apiErrorJSON {
	t.Helper()
	var raw map[string]map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil || len(raw) != 1 || raw["error"] == nil {
		t.Fatalf("error body %s is not {\"error\":{…}}: %v", b, err)
	}
	for _, k := range []string{"message", "type", "param", "code"} {
		if _, ok := raw["error"][k]; !ok {
			t.Fatalf("error body %s lacks %q", b, k)
		}
	}
	var e struct{ Error apiErrorJSON }
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatal(err)
	}
	return e.Error
}

// sse is a streamed response read as server-sent events.
type sse struct {
	status int
	header http.Header
	data   []string // payloads of the data: lines, [DONE] included
	chunks []*completion
	errs   []apiErrorJSON
}

// readSSE reads events from r until EOF, checking the framing: every event
// is one "data: " line followed by a blank line.
func readSSE(t testing.TB, r io.Reader, s *sse) {
	t.Helper()
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadString('\n')
		if err == io.EOF && line == "" {
			return
		}
		if err != nil {
			t.Fatalf("reading stream: %v (after %q)", err, s.data)
		}
		payload, ok := strings.CutPrefix(line, "data: ")
		if !ok || !strings.HasSuffix(payload, "\n") {
			t.Fatalf("bad SSE line %q", line)
		}
		if blank, _ := br.ReadString('\n'); blank != "\n" {
			t.Fatalf("event %q not followed by a blank line but %q", line, blank)
		}
		payload = strings.TrimSuffix(payload, "\n")
		s.data = append(s.data, payload)
		switch {
		case payload == "[DONE]":
		case strings.HasPrefix(payload, `{"error"`):
			s.errs = append(s.errs, decodeError(t, []byte(payload)))
		default:
			s.chunks = append(s.chunks, decodeCompletionResponse(t, []byte(payload)))
		}
	}
}

func (ts *testServer) stream(path, body string) *sse {
	ts.t.Helper()
	resp, err := testClient.Post(ts.url+path, "application/json", strings.NewReader(body))
	if err != nil {
		ts.t.Fatal(err)
	}
	defer resp.Body.Close()
	s := &sse{status: resp.StatusCode, header: resp.Header}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		s.errs = append(s.errs, decodeError(ts.t, b))
		return s
	}
	readSSE(ts.t, resp.Body, s)
	return s
}

// streamedText joins the text of every chunk.
func (s *sse) text() string {
	var b strings.Builder
	for _, c := range s.chunks {
		if len(c.Choices) > 0 {
			b.WriteString(c.text())
		}
	}
	return b.String()
}

// socketSink is a real unix socket listener standing in for the sidecar:
// it records every line of every connection.
type socketSink struct {
	t     testing.TB
	path  string
	ln    net.Listener
	stall atomic.Bool // accept but do not read

	mu    sync.Mutex
	conns [][]string // lines per connection, in accept order
	open  []net.Conn
	ended int // connections read to their end
}

func listenSink(t testing.TB, path string) *socketSink {
	s := &socketSink{t: t, path: path}
	s.listen()
	t.Cleanup(s.close)
	return s
}

func (s *socketSink) listen() {
	ln, err := net.Listen("unix", s.path)
	if err != nil {
		s.t.Fatal(err)
	}
	s.ln = ln
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			idx := len(s.conns)
			s.conns = append(s.conns, nil)
			s.open = append(s.open, c)
			s.mu.Unlock()
			go s.read(c, idx)
		}
	}()
}

func (s *socketSink) read(c net.Conn, idx int) {
	for s.stall.Load() {
		time.Sleep(5 * time.Millisecond)
		if s.closed(c) {
			return
		}
	}
	sc := bufio.NewScanner(c)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		s.mu.Lock()
		s.conns[idx] = append(s.conns[idx], sc.Text())
		s.mu.Unlock()
	}
	s.mu.Lock()
	s.ended++
	s.mu.Unlock()
}

// drained waits until the emitter has connected and every connection has
// been read to its end (the emitter closed it, as it does once
// Daemon.Shutdown has flushed), so events() holds everything the daemon
// wrote.
func (s *socketSink) drained() {
	s.t.Helper()
	waitFor(s.t, 5*time.Second, "the emitter's connections to close", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.conns) > 0 && s.ended == len(s.conns)
	})
}

func (s *socketSink) closed(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, o := range s.open {
		if o == c {
			return false
		}
	}
	return true
}

// close stops the listener and closes every connection (a sidecar exit).
func (s *socketSink) close() {
	s.ln.Close()
	s.mu.Lock()
	for _, c := range s.open {
		c.Close()
	}
	s.open = nil
	s.mu.Unlock()
	os.Remove(s.path)
}

// lines returns a copy of the lines per connection.
func (s *socketSink) lines() [][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([][]string, len(s.conns))
	for i, c := range s.conns {
		out[i] = append([]string(nil), c...)
	}
	return out
}

// events decodes every line of every connection with schema.Decode,
// failing the test on any line that does not decode.
func (s *socketSink) events() []schema.Event {
	var out []schema.Event
	for _, conn := range s.lines() {
		for _, line := range conn {
			var ev schema.Event
			if err := schema.Decode([]byte(line), &ev); err != nil {
				s.t.Fatalf("event %s does not decode: %v", line, err)
			}
			out = append(out, ev)
		}
	}
	return out
}

// requests returns the decoded request events.
func (s *socketSink) requests() []schema.Event {
	var out []schema.Event
	for _, ev := range s.events() {
		if ev.Kind == schema.KindRequest {
			out = append(out, ev)
		}
	}
	return out
}

// request waits for the request event with the given response id.
func (s *socketSink) request(id string) schema.Event {
	s.t.Helper()
	var found schema.Event
	waitFor(s.t, 5*time.Second, "request event "+id, func() bool {
		for _, ev := range s.requests() {
			if ev.ID == id {
				found = ev
				return true
			}
		}
		return false
	})
	return found
}

// waitFor polls cond until it holds or the timeout passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
