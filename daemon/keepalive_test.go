package daemon

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/picometer/picometer/internal/testenv"
)

// busyEngine is a one-slot fake engine whose steps take 20 ms; startBusy
// starts a request on it that holds the slot for about 1.5 s, so a request
// submitted next waits in the engine's queue.
func busyEngine() *fakeEngine {
	eng := newFakeEngine(256)
	eng.cfg.BMax = 1
	eng.stepDelay = 20 * time.Millisecond
	eng.gen = forever
	return eng
}

func startBusy(t *testing.T, ts *testServer, eng *fakeEngine) chan httpResult {
	first := make(chan httpResult, 1)
	go func() { first <- ts.post("/v1/completions", `{"prompt":"hold","max_tokens":75}`) }()
	waitFor(t, 5*time.Second, "the first request running", func() bool { r, _ := eng.Load(); return r == 1 })
	return first
}

// TestStreamKeepAlive: a stream queued in the engine behind a running
// request gets an SSE comment every stream_keepalive while it waits, then
// its chunks and [DONE]; with stream_keepalive "0s" it gets none.
func TestStreamKeepAlive(t *testing.T) {
	for _, c := range []struct {
		name  string
		every time.Duration
	}{{"200ms", 200 * time.Millisecond}, {"off", 0}} {
		t.Run(c.name, func(t *testing.T) {
			eng := busyEngine()
			ts := startServer(t, eng, func(cfg *Config) { cfg.StreamKeepAlive = c.every; cfg.Metrics.Socket = "" })
			first := startBusy(t, ts, eng)
			resp, err := testClient.Post(ts.url+"/v1/chat/completions", "application/json",
				strings.NewReader(`{"messages":[{"role":"user","content":"hi"}],"max_tokens":4,"stream":true}`))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var comments, data []string
			content := false // a chunk after the role chunk arrived
			queuedAtFirstComment := -1
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				l := sc.Text()
				switch {
				case strings.HasPrefix(l, ":"):
					if !content {
						comments = append(comments, l)
					}
					if queuedAtFirstComment < 0 {
						_, queuedAtFirstComment = eng.Load()
					}
				case strings.HasPrefix(l, "data: "):
					data = append(data, l)
					content = len(data) > 1
				}
			}
			if r := <-first; r.status != 200 {
				t.Errorf("first request: %d %s", r.status, r.body)
			}
			switch {
			case c.every > 0 && (len(comments) < 2 || queuedAtFirstComment != 1):
				t.Errorf("%d keep-alive comments before the first token at %v (waiting at the first: %d): %q",
					len(comments), c.every, queuedAtFirstComment, comments)
			case c.every == 0 && len(comments) != 0:
				t.Errorf("keep-alive off, got %q", comments)
			}
			for _, l := range comments {
				if l != ": keep-alive" {
					t.Errorf("comment %q", l)
				}
			}
			if len(data) < 3 || data[len(data)-1] != "data: [DONE]" {
				t.Errorf("stream: %q", data)
			}
			testenv.Report(t, "stream_keepalive %v: %d keep-alive comments while queued, then %d data lines", c.every, len(comments), len(data))
		})
	}
}

// TestStreamKeepAliveOpenAISDK: the npm openai client parses a stream that
// held keep-alive comments before its first chunk, and its content equals
// that of the same stream read raw.
func TestStreamKeepAliveOpenAISDK(t *testing.T) {
	node := testenv.Node(t)
	testenv.NPMPackage(t, "openai")
	eng := busyEngine()
	ts := startServer(t, eng, func(cfg *Config) { cfg.StreamKeepAlive = 100 * time.Millisecond; cfg.Metrics.Socket = "" })
	first := startBusy(t, ts, eng)
	cmd := exec.Command(node, "testdata/keepalive.cjs", ts.url+"/v1")
	cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(testenv.NPMDir(), "node_modules"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("keepalive.cjs: %v\n%s", err, stderr.String())
	}
	if r := <-first; r.status != 200 {
		t.Errorf("first request: %d %s", r.status, r.body)
	}
	var got struct {
		Text         string `json:"text"`
		Chunks       int    `json:"chunks"`
		FinishReason string `json:"finish_reason"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		t.Fatalf("%v: %s", err, stdout.String())
	}
	// The same chat, raw, with nothing held.
	s := ts.stream("/v1/chat/completions", `{"messages":[{"role":"user","content":"keep me alive"}],"max_tokens":8,"stream":true}`)
	var want strings.Builder
	for _, d := range s.data {
		var c completion
		if json.Unmarshal([]byte(d), &c) == nil && len(c.Choices) > 0 && c.Choices[0].Delta != nil && c.Choices[0].Delta.Content != nil {
			want.WriteString(*c.Choices[0].Delta.Content)
		}
	}
	if got.Text != want.String() || got.Text == "" || got.FinishReason == "" {
		t.Errorf("openai SDK: %+v; raw stream content %q", got, want.String())
	}
	testenv.Report(t, "openai SDK parsed a stream with keep-alives: %d chunks, %q, finish %s", got.Chunks, got.Text, got.FinishReason)
}
