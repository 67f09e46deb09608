package realmodel

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/picometer/picometer/internal/testenv"
)

// realModelName is the file scripts/pypi.sh extracts under build/models.
const realModelName = "smollm2-135m-instruct-q4_1.gguf"

// repoPath is path under the repository's root.
func repoPath(tb testing.TB, path ...string) string {
	tb.Helper()
	root, err := testenv.Root()
	if err != nil {
		tb.Fatal(err)
	}
	return filepath.Join(append([]string{root}, path...)...)
}

// realModel is the trained GGUF: PICOMETER_REAL_MODEL, else
// build/models/smollm2-135m-instruct-q4_1.gguf.
func realModel(tb testing.TB) string {
	tb.Helper()
	p := os.Getenv("PICOMETER_REAL_MODEL")
	if p == "" {
		p = repoPath(tb, "build", "models", realModelName)
	}
	return testenv.File(tb, "the trained model (PICOMETER_REAL_MODEL; make deps runs scripts/pypi.sh)", p)
}

// daemonBin is bin/picometerd: PICOMETER_BIN_DIR, else the repository's bin/.
func daemonBin(tb testing.TB) string {
	tb.Helper()
	if os.Getenv("PICOMETER_BIN_DIR") != "" {
		return testenv.Binary(tb, "picometerd")
	}
	return testenv.File(tb, "picometerd (make build)", repoPath(tb, "bin", "picometerd"))
}

// server is a child process serving HTTP on addr, its output in log.
type server struct {
	addr string
	cmd  *exec.Cmd
	log  *bytes.Buffer
	done chan struct{}
}

// startServer runs bin with args (which make it listen on addr) and waits up
// to a minute for GET health to answer 200. The process is stopped when tb
// ends; its output is logged when tb failed.
func startServer(tb testing.TB, name, addr, health, bin string, args ...string) *server {
	tb.Helper()
	s := &server{addr: addr, log: &bytes.Buffer{}, done: make(chan struct{})}
	s.cmd = exec.Command(bin, args...)
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		tb.Fatalf("start %s: %v", name, err)
	}
	go func() { s.cmd.Wait(); close(s.done) }()
	tb.Cleanup(func() {
		s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(15 * time.Second):
			s.cmd.Process.Kill()
			<-s.done
		}
		if tb.Failed() {
			tb.Logf("---- %s output ----\n%s", name, tail(s.log.String(), 4000))
		}
	})
	c := &http.Client{Timeout: 2 * time.Second}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		select {
		case <-s.done:
			tb.Fatalf("%s exited before serving: %s", name, tail(s.log.String(), 4000))
		default:
		}
		resp, err := c.Get("http://" + addr + health)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s
			}
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s: %s did not answer 200 within a minute (%v)", name, health, err)
		}
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// startDaemon serves the real model with picometerd and extra flags.
func startDaemon(tb testing.TB, extra ...string) *server {
	tb.Helper()
	model, bin := realModel(tb), daemonBin(tb)
	addr := testenv.FreeAddr(tb)
	args := append([]string{"--model", model, "--listen", addr, "--metrics-socket", "off"}, extra...)
	return startServer(tb, "picometerd", addr, "/health", bin, args...)
}

// message is one chat message.
type message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// chatResult is what a non-streamed chat completion answered.
type chatResult struct {
	Content          string
	FinishReason     string
	PromptTokens     int
	CompletionTokens int
	Draft, Accepted  int
	DecodeTokens     int     // usage.extra.decode_tokens
	DecodeS, E2ES    float64 // usage.extra.decode_s, e2e_s
}

// chat sends a greedy chat completion of at most maxTokens tokens.
func chat(c *http.Client, addr string, msgs []message, maxTokens int) (chatResult, error) {
	body, _ := json.Marshal(map[string]any{"messages": msgs, "temperature": 0, "max_tokens": maxTokens})
	resp, err := c.Post("http://"+addr+"/v1/chat/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		return chatResult{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return chatResult{}, err
	}
	if resp.StatusCode != http.StatusOK {
		return chatResult{}, fmt.Errorf("HTTP %d: %s", resp.StatusCode, raw)
	}
	var r struct {
		Choices []struct {
			Message      message `json:"message"`
			FinishReason string  `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
			Extra            struct {
				DraftTokens    int     `json:"draft_tokens"`
				AcceptedTokens int     `json:"accepted_tokens"`
				DecodeTokens   int     `json:"decode_tokens"`
				DecodeS        float64 `json:"decode_s"`
				E2ES           float64 `json:"e2e_s"`
			} `json:"extra"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return chatResult{}, fmt.Errorf("%v: %s", err, raw)
	}
	if len(r.Choices) != 1 {
		return chatResult{}, fmt.Errorf("%d choices: %s", len(r.Choices), raw)
	}
	return chatResult{
		Content: r.Choices[0].Message.Content, FinishReason: r.Choices[0].FinishReason,
		PromptTokens: r.Usage.PromptTokens, CompletionTokens: r.Usage.CompletionTokens,
		Draft: r.Usage.Extra.DraftTokens, Accepted: r.Usage.Extra.AcceptedTokens,
		DecodeTokens: r.Usage.Extra.DecodeTokens, DecodeS: r.Usage.Extra.DecodeS, E2ES: r.Usage.Extra.E2ES,
	}, nil
}

// prompt is one conversation of testdata/prompts.json.
type prompt struct {
	Name      string    `json:"name"`
	Messages  []message `json:"messages"`
	MaxTokens int       `json:"max_tokens"`
}

func readPrompts(tb testing.TB) []prompt {
	tb.Helper()
	raw, err := os.ReadFile("testdata/prompts.json")
	if err != nil {
		tb.Fatal(err)
	}
	var ps []prompt
	if err := json.Unmarshal(raw, &ps); err != nil {
		tb.Fatalf("testdata/prompts.json: %v", err)
	}
	return ps
}

// testenvCPUs is the CPUs both servers get (every online one).
func testenvCPUs() int { return runtime.NumCPU() }
