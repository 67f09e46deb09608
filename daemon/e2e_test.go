package daemon

// End-to-end tests: the daemon over real loopback HTTP on the real C engine
// and the tiny model (PICOMETER_TINY_MODEL, or generated with modelgen into
// a temporary directory). They skip when the engine cannot run here (built
// without cgo), except under PICOMETER_LIVE=1, where that is a failure.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/picometer/picometer/modelgen"
	"github.com/picometer/picometer/native"
	"github.com/picometer/picometer/schema"

	"github.com/picometer/picometer/internal/testenv"
)

var tinyPath struct {
	once sync.Once
	path string
	err  error
}

// tinyModel returns the tiny model: PICOMETER_TINY_MODEL when set (it must
// exist under PICOMETER_LIVE=1), else one written once per test binary.
func tinyModel(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("PICOMETER_TINY_MODEL"); p != "" {
		if _, err := os.Stat(p); err == nil {
			return p
		} else if testenv.Live() {
			t.Fatalf("PICOMETER_TINY_MODEL: %v (make models creates it)", err)
		}
	}
	tinyPath.once.Do(func() {
		dir, err := os.MkdirTemp("", "picometerd-test-")
		if err != nil {
			tinyPath.err = err
			return
		}
		tinyPath.path = filepath.Join(dir, "tiny.gguf")
		tinyPath.err = modelgen.Write(tinyPath.path, modelgen.Tiny)
	})
	if tinyPath.err != nil {
		t.Fatal(tinyPath.err)
	}
	return tinyPath.path
}

func TestMain(m *testing.M) {
	code := m.Run()
	if tinyPath.path != "" {
		os.RemoveAll(filepath.Dir(tinyPath.path))
	}
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// openTiny opens the real engine on the tiny model with cfg's engine
// settings; the engine closes after the daemon has shut down.
func openTiny(t *testing.T, mod func(*Config)) (*native.Engine, func(*Config)) {
	t.Helper()
	path := tinyModel(t)
	cfg := testConfig(t)
	cfg.Model = path
	if mod != nil {
		mod(&cfg)
	}
	eng, err := native.Open(path, cfg.NativeConfig())
	if errors.Is(err, native.ErrNoCgo) {
		testenv.Missing(t, "engine unavailable: %v", err)
	}
	if err != nil {
		var ne *native.Error
		if errors.As(err, &ne) && strings.Contains(ne.Msg, "not implemented") {
			testenv.Missing(t, "engine is a placeholder: %v", err)
		}
		t.Fatalf("open %s: %v", path, err)
	}
	t.Cleanup(func() { eng.Close() })
	return eng, func(c *Config) {
		c.Model = path
		if mod != nil {
			mod(c)
		}
	}
}

func startTiny(t *testing.T, mod func(*Config)) *testServer {
	t.Helper()
	eng, m := openTiny(t, mod)
	return startServer(t, eng, m)
}

// pacedEngine is the real engine with a pause before every step. The tiny
// model can generate a whole context in a few milliseconds, too fast for
// tests of what happens while a request runs (client disconnect, queue
// full, deadline, shutdown); pacing makes them deterministic while the real
// engine still does all the work.
type pacedEngine struct {
	*native.Engine
	pause time.Duration
}

func (e pacedEngine) Step() ([]native.Output, error) {
	time.Sleep(e.pause)
	return e.Engine.Step()
}

// startPacedTiny is startTiny with every step taking at least a millisecond.
func startPacedTiny(t *testing.T, mod func(*Config)) *testServer {
	t.Helper()
	eng, m := openTiny(t, mod)
	return startServer(t, pacedEngine{eng, time.Millisecond}, m)
}

// greedy is a deterministic request body.
func greedy(prompt string, maxTokens int, extra string) string {
	return fmt.Sprintf(`{"prompt":%q,"max_tokens":%d,"temperature":0,"return_token_ids":true%s}`, prompt, maxTokens, extra)
}

// textOf decodes token ids as the daemon does: byte tokens through the
// UTF-8 hold-back (unit-tested on its own), control tokens as nothing.
func textOf(ids []int32) string {
	var h utf8Hold
	var b []byte
	for _, id := range ids {
		if native.IsByte(id) {
			b = append(b, byte(id))
		}
	}
	return string(h.Flush(h.Append(nil, b)))
}

var longPrompt struct {
	mu     sync.Mutex
	prompt string
}

// findLongPrompt returns a prompt whose greedy continuation fills the
// context without EOS (the tiny model's EOS comes often), so requests on it
// run as long as the tiny model allows. It asks the engine directly, once
// per test binary.
func findLongPrompt(t *testing.T) string {
	t.Helper()
	longPrompt.mu.Lock()
	defer longPrompt.mu.Unlock()
	if longPrompt.prompt != "" {
		return longPrompt.prompt
	}
	eng, _ := openTiny(t, nil)
	ctx := eng.Info().ContextLength
	for i := range 200 {
		p := fmt.Sprintf("story %d:", i)
		id, err := eng.Submit(tokenizeText(nil, p), native.Params{MaxTokens: ctx - 1 - len(p), TopP: 1, ArrivalNS: native.Now()})
		if err != nil {
			t.Fatal(err)
		}
		finish := ""
		for finish == "" {
			outs, err := eng.Step()
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range outs {
				if o.ID == id {
					finish = o.Finish
				}
			}
		}
		if finish == native.FinishLength {
			longPrompt.prompt = p
			return p
		}
	}
	t.Fatal("no prompt runs to the context limit without EOS")
	return ""
}

func TestE2ECompletions(t *testing.T) {
	ts := startTiny(t, nil)
	for _, prompt := range []string{"Hello, picometer", "é€😀 ", "a"} {
		// Non-streamed.
		start := time.Now()
		r := ts.post("/v1/completions", greedy(prompt, 40, ""))
		wall := time.Since(start).Seconds()
		if r.status != 200 {
			t.Fatalf("%d %s", r.status, r.body)
		}
		c := decodeCompletionResponse(t, r.body)
		ids := c.Choices[0].TokenIDs
		u := c.Usage
		if u.CompletionTokens != len(ids) || u.CompletionTokens < 1 || u.PromptTokens != 1+len(prompt) || u.TotalTokens != u.PromptTokens+u.CompletionTokens {
			t.Errorf("%q: usage %+v, %d token ids", prompt, u, len(ids))
		}
		if c.text() != textOf(ids) || !utf8.ValidString(c.text()) {
			t.Errorf("%q: text %q is not the text of its token ids %v", prompt, c.text(), ids)
		}
		switch c.finish() {
		case "length":
			if len(ids) != 40 {
				t.Errorf("finish length after %d tokens", len(ids))
			}
		case "stop":
			if ids[len(ids)-1] != native.TokEOS {
				t.Errorf("finish stop without EOS: %v", ids)
			}
		default:
			t.Errorf("finish %q", c.finish())
		}
		x := u.Extra
		if x["ttft_s"] <= 0 || x["e2e_s"] < x["ttft_s"] || x["queue_s"] < 0 || x["prefill_tokens"] < float64(u.PromptTokens) ||
			x["accepted_tokens"] > x["draft_tokens"] || x["decode_tokens"] < float64(u.CompletionTokens-1) {
			t.Errorf("%q: usage.extra %v", prompt, x)
		}
		if x["e2e_s"] > wall {
			t.Errorf("%q: e2e_s %v, but the client waited %vs", prompt, x["e2e_s"], wall)
		}
		ev := ts.sink.request(c.ID)
		if ev.FinishReason != c.finish() || len(ev.ITLUS) >= ev.CompletionTokens {
			t.Errorf("%q: event %+v does not match the response", prompt, ev.RequestBody)
		}
		checkUsage(t, u, ev)

		// Streamed, same greedy request: same tokens, same text.
		s := ts.stream("/v1/completions", greedy(prompt, 40, `,"stream":true,"stream_options":{"include_usage":true}`))
		var sids []int32
		for _, ch := range s.chunks {
			if len(ch.Choices) > 0 {
				sids = append(sids, ch.Choices[0].TokenIDs...)
			}
		}
		usage := s.chunks[len(s.chunks)-1].Usage
		if !slices.Equal(sids, ids) || s.text() != c.text() || usage == nil || usage.CompletionTokens != len(sids) || s.data[len(s.data)-1] != "[DONE]" {
			t.Fatalf("%q: stream gave %d tokens %q (usage %+v), non-stream %d tokens %q", prompt, len(sids), s.text(), usage, len(ids), c.text())
		}
		checkUsage(t, usage, ts.sink.request(s.chunks[0].ID))
	}
}

func TestE2EChat(t *testing.T) {
	ts := startTiny(t, nil)
	body := `{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi!"}],"max_tokens":30,"temperature":0,"return_token_ids":true`
	r := ts.post("/v1/chat/completions", body+"}")
	c := decodeCompletionResponse(t, r.body)
	ids := c.Choices[0].TokenIDs
	// <|bos|><|system|>Be brief.<|end|><|user|>Hi!<|end|><|assistant|>
	if r.status != 200 || c.Object != "chat.completion" || c.Usage.PromptTokens != 1+1+9+1+1+3+1+1 || c.Usage.CompletionTokens != len(ids) {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if c.finish() == "stop" && !slices.Contains([]int32{native.TokEnd, native.TokEOS}, ids[len(ids)-1]) {
		t.Errorf("chat stopped without <|end|> or EOS: %v", ids)
	}
	if c.text() != textOf(ids) {
		t.Errorf("content %q, token text %q", c.text(), textOf(ids))
	}
	s := ts.stream("/v1/chat/completions", body+`,"stream":true,"stream_options":{"include_usage":true}}`)
	if s.text() != c.text() || s.chunks[len(s.chunks)-1].Usage.CompletionTokens != len(ids) || s.chunks[0].Choices[0].Delta.Role == nil {
		t.Errorf("stream %q vs %q", s.data, c.text())
	}
	if ev := ts.sink.request(c.ID); ev.Operation != schema.OpChat || ev.CompletionTokens != len(ids) {
		t.Errorf("event %+v", ev.RequestBody)
	}
}

func TestE2EStopString(t *testing.T) {
	ts := startTiny(t, nil)
	p := findLongPrompt(t)
	full := decodeCompletionResponse(t, ts.post("/v1/completions", greedy(p, 100, "")).body)
	text := full.text()
	// A stop string from the middle of the greedy output, on character
	// boundaries; the answer must end right before its first occurrence.
	runes := []rune(text)
	stop := string(runes[len(runes)/2 : len(runes)/2+2])
	want := text[:strings.Index(text, stop)]
	for _, stream := range []bool{false, true} {
		body := greedy(p, 100, fmt.Sprintf(`,"stop":[%q],"stream":%v`, stop, stream))
		var got, finish string
		var ids int
		if stream {
			s := ts.stream("/v1/completions", body)
			got, finish = s.text(), s.chunks[len(s.chunks)-1].finish()
			for _, ch := range s.chunks {
				ids += len(ch.Choices[0].TokenIDs)
			}
		} else {
			c := decodeCompletionResponse(t, ts.post("/v1/completions", body).body)
			got, finish, ids = c.text(), c.finish(), len(c.Choices[0].TokenIDs)
			if c.Usage.CompletionTokens != ids {
				t.Errorf("usage %d, %d token ids", c.Usage.CompletionTokens, ids)
			}
		}
		if got != want || finish != "stop" || ids >= 100 {
			t.Errorf("stream=%v stop %q: got %q (%s, %d tokens), want %q", stream, stop, got, finish, ids, want)
		}
	}
}

// TestE2EBatching: 8 concurrent requests are decoded in batches (the
// snapshot's decode_time_by_batch_size has a batch size above 1). Steps are
// paced to at least 1 ms, so each request lasts 200 ms or more and they
// overlap even when a loaded machine starts the clients late; on the bare
// tiny model one can finish before the next arrives.
func TestE2EBatching(t *testing.T) {
	ts := startPacedTiny(t, func(c *Config) { c.Engine.SpecK = 0 })
	p := findLongPrompt(t)
	var wg sync.WaitGroup
	resps := make([]*completion, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resps[i] = decodeCompletionResponse(t, ts.post("/v1/completions", greedy(p, 200, "")).body)
		}()
	}
	wg.Wait()
	for i, c := range resps {
		if n := c.Usage.CompletionTokens; n != 200 {
			t.Errorf("request %d: %d tokens, want 200 (batching changed a greedy output?)", i, n)
		}
		// Without speculation every step emits one token: 199 ITL gaps,
		// whose mean is the time per output token (up to µs truncation).
		ev := ts.sink.request(c.ID)
		checkUsage(t, c.Usage, ev)
		x := c.Usage.Extra
		if len(ev.ITLUS) != 199 || math.Abs(x["itl_mean_s"]-x["time_per_output_token_s"]) > 2e-6 {
			t.Errorf("request %d: %d ITL gaps, itl_mean_s %v, time_per_output_token_s %v", i, len(ev.ITLUS), x["itl_mean_s"], x["time_per_output_token_s"])
		}
	}
	r := ts.do("GET", "/debug/engine_metrics", "")
	var m schema.EngineBody
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatal(err)
	}
	maxBatch := 0
	for n, c := range m.DecodeTimeByBatchSize {
		if c.Count > 0 {
			maxBatch = n
		}
	}
	if maxBatch < 2 {
		t.Errorf("no decode step at batch size > 1: %s", r.body)
	}
	t.Logf("largest decode batch %d", maxBatch)
}

// TestE2EDisconnect: a streaming client that leaves cancels its request in
// the engine.
func TestE2EDisconnect(t *testing.T) {
	ts := startPacedTiny(t, nil)
	p := findLongPrompt(t)
	resp, err := testClient.Post(ts.url+"/v1/completions", "application/json", strings.NewReader(greedy(p, 240, `,"stream":true`)))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 128)
	if _, err := io.ReadAtLeast(resp.Body, buf, 64); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	ev := ts.sink.request(between(string(buf), `"id":"`, `"`))
	if ev.FinishReason != schema.FinishAbort || ev.ErrorType != schema.ErrCancelled || ev.CompletionTokens >= 240 {
		t.Errorf("event %+v", ev.RequestBody)
	}
}

// TestE2EDisconnectNonStream: a client that leaves while its non-streamed
// request runs cancels it in the engine.
func TestE2EDisconnectNonStream(t *testing.T) {
	ts := startPacedTiny(t, nil)
	p := findLongPrompt(t)
	conn := rawRequest(t, ts, "/v1/completions", greedy(p, 240, ""))
	waitFor(t, 5*time.Second, "the request to run", func() bool {
		var m schema.EngineBody
		json.Unmarshal(ts.do("GET", "/debug/engine_metrics", "").body, &m)
		return m.Running == 1
	})
	conn.Close()
	var ev schema.Event
	waitFor(t, 5*time.Second, "a cancelled request event", func() bool {
		for _, e := range ts.sink.requests() {
			ev = e
			return true
		}
		return false
	})
	if ev.FinishReason != schema.FinishAbort || ev.ErrorType != schema.ErrCancelled || ev.CompletionTokens >= 240 {
		t.Errorf("event %+v", ev.RequestBody)
	}
}

func TestE2EQueueFull(t *testing.T) {
	ts := startPacedTiny(t, func(c *Config) { c.Engine.BMax, c.Engine.MaxWaiting = 1, 0 })
	p := findLongPrompt(t)
	resp, err := testClient.Post(ts.url+"/v1/completions", "application/json", strings.NewReader(greedy(p, 240, `,"stream":true`)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, err := resp.Body.Read(make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	// The one slot is busy and no request may wait.
	r := ts.post("/v1/completions", greedy("x", 5, ""))
	if e := decodeError(t, r.body); r.status != 429 || *e.Code != "queue_full" {
		t.Errorf("got %d %s", r.status, r.body)
	}
}

func TestE2EDeadline(t *testing.T) {
	ts := startPacedTiny(t, func(c *Config) { c.RequestTimeout = 20 * time.Millisecond })
	p := findLongPrompt(t) // 240 paced steps: at least 240 ms
	r := ts.post("/v1/completions", greedy(p, 240, ""))
	if e := decodeError(t, r.body); r.status != 504 || *e.Code != "timeout" {
		t.Errorf("got %d %s", r.status, r.body)
	}
}

// TestE2EShutdown: SIGTERM-style shutdown lets a running stream finish and
// flushes the final snapshot.
func TestE2EShutdown(t *testing.T) {
	ts := startPacedTiny(t, noPeriodicSnapshots)
	p := findLongPrompt(t)
	_, wait := startStream(t, ts, greedy(p, 200, `,"stream":true`))
	ts.shutdown()
	s := wait()
	if s.chunks[len(s.chunks)-1].finish() != "length" || s.data[len(s.data)-1] != "[DONE]" {
		t.Errorf("stream cut by shutdown: %q", s.data[len(s.data)-2:])
	}
	ts.sink.drained()
	checkFinalSnapshot(t, ts.sink.events(), 1)
}

// TestE2EDebugKernel: /debug/engine_metrics says which kernel path the
// engine computes with, the one engine.kernel named (each path this CPU
// runs), and auto's choice.
func TestE2EDebugKernel(t *testing.T) {
	for _, k := range append([]string{"auto"}, native.CPUKernels()...) {
		ts := startTiny(t, func(c *Config) { c.Engine.Kernel = k })
		var m struct {
			Kernel        string `json:"kernel"`
			F16PanelBytes *int64 `json:"f16_panel_bytes"`
			KX8Bytes      *int64 `json:"kx8_bytes"`
			Q32X8Bytes    *int64 `json:"q32x8_bytes"`
			RowCopyBytes  *int64 `json:"row_copy_bytes"`
			LLCBytes      *int64 `json:"llc_bytes"`
			StepBytes     *int64 `json:"step_weight_bytes"`
			BeyondLLC     *bool  `json:"weights_beyond_llc"`
		}
		if err := json.Unmarshal(ts.do("GET", "/debug/engine_metrics", "").body, &m); err != nil {
			t.Fatal(err)
		}
		want := k
		if k == "auto" {
			want = ts.d.info.Kernel
		}
		if m.Kernel != want || !slices.Contains(native.CPUKernels(), m.Kernel) {
			t.Errorf("engine.kernel %q: /debug/engine_metrics kernel %q, want %q", k, m.Kernel, want)
		}
		if m.F16PanelBytes == nil || *m.F16PanelBytes != ts.d.info.F16PanelBytes {
			t.Errorf("engine.kernel %q: /debug/engine_metrics f16_panel_bytes %v, want %d", k, m.F16PanelBytes, ts.d.info.F16PanelBytes)
		}
		if m.KX8Bytes == nil || *m.KX8Bytes != ts.d.info.KX8Bytes {
			t.Errorf("engine.kernel %q: /debug/engine_metrics kx8_bytes %v, want %d", k, m.KX8Bytes, ts.d.info.KX8Bytes)
		}
		if m.Q32X8Bytes == nil || *m.Q32X8Bytes != ts.d.info.Q32X8Bytes {
			t.Errorf("engine.kernel %q: /debug/engine_metrics q32x8_bytes %v, want %d", k, m.Q32X8Bytes, ts.d.info.Q32X8Bytes)
		}
		if m.RowCopyBytes == nil || *m.RowCopyBytes != ts.d.info.RowCopyBytes {
			t.Errorf("engine.kernel %q: /debug/engine_metrics row_copy_bytes %v, want %d", k, m.RowCopyBytes, ts.d.info.RowCopyBytes)
		}
		if m.LLCBytes == nil || *m.LLCBytes != ts.d.info.LLCBytes || m.StepBytes == nil || *m.StepBytes != ts.d.info.StepWeightBytes ||
			m.BeyondLLC == nil || *m.BeyondLLC != (ts.d.info.LLCBytes > 0 && ts.d.info.StepWeightBytes > ts.d.info.LLCBytes) {
			t.Errorf("engine.kernel %q: /debug/engine_metrics llc_bytes %v, step_weight_bytes %v, weights_beyond_llc %v; want %d, %d",
				k, m.LLCBytes, m.StepBytes, m.BeyondLLC, ts.d.info.LLCBytes, ts.d.info.StepWeightBytes)
		}
		ts.shutdown()
	}
}
