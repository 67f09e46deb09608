//go:build iree && cgo

package daemon

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/picometer/picometer/internal/testenv"
	"github.com/picometer/picometer/native/iree"
	"github.com/picometer/picometer/schema"
)

// ireeLib returns the runtime library make iree puts under build/iree,
// absolute; the test skips without it (fails under PICOMETER_LIVE=1).
func ireeLib(t *testing.T) string {
	t.Helper()
	lib, err := filepath.Abs(filepath.Join("..", DefaultIREERuntime))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(lib); err != nil {
		testenv.Missing(t, "%v (make iree)", err)
	}
	return lib
}

// With -tags iree the iree backend validates, and opening it names what is
// missing: the runtime library, or the compiler.
func TestBackendIREE(t *testing.T) {
	c := DefaultConfig()
	c.Engine.Backend = BackendIREE
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	c.Engine.IREERuntime = ""
	if err := c.Validate(); err == nil || !strings.HasPrefix(err.Error(), "engine.iree_runtime: empty") {
		t.Fatalf("Validate with no runtime: %v", err)
	}
	c.Model = tinyModel(t)
	c.Engine.BMax = 4
	dir := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", ireeCache(t)) // shared with TestIREEBinary: one compile
	t.Setenv("PICOMETER_IREE_COMPILE", "")
	c.Engine.IREERuntime = filepath.Join(dir, "lib", "libmissing.so")
	want := filepath.Join(dir, "compiler", "iree", "compiler", "_mlir_libs", "iree-compile")
	if eng, err := openEngine(c); eng != nil || err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("openEngine with no compiler: %v, %v; want an error naming %s", eng, err, want)
	}
	t.Setenv("PICOMETER_IREE_COMPILE", iree.CompilerBeside(ireeLib(t)))
	if eng, err := openEngine(c); eng != nil || err == nil || !strings.Contains(err.Error(), "libmissing.so") {
		t.Fatalf("openEngine with no library: %v, %v; want an error naming the library", eng, err)
	}
}

// ireeCache is an XDG_CACHE_HOME beside the tiny model (removed with it by
// TestMain), so the tests compile the step once.
func ireeCache(t *testing.T) string {
	return filepath.Join(filepath.Dir(tinyModel(t)), "cache")
}

// TestIREEBinary runs picometerd built with -tags iree on the iree backend
// (a config file: engine.backend, engine.iree_runtime) with a real sidecar
// socket, and checks against the C engine serving the same model in process:
// greedy completions and chats give the same tokens, text and usage;
// concurrent requests (more than the 4 slots) give what each gives alone;
// the step program is cached; and the events are complete: every request's
// event with its times, the final snapshot's counters equal to the sums of
// the requests' usage, step records of both phases.
func TestIREEBinary(t *testing.T) {
	lib := ireeLib(t)
	model := tinyModel(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "picometerd")
	if out, err := exec.Command("go", "build", "-tags", "iree", "-o", bin, "./cmd/picometerd").CombinedOutput(); err != nil {
		t.Fatalf("go build -tags iree: %v\n%s", err, out)
	}
	conf := filepath.Join(dir, "picometerd.toml")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf("[engine]\nbackend = \"iree\"\niree_runtime = %q\nb_max = 4\nprefill_chunk = 4\n", lib)), 0o644); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(socketDir(t), "events.sock")
	sink := listenSink(t, sock)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--config", conf, "--model", model, "--listen", "127.0.0.1:0", "--metrics-socket", sock)
	cache := ireeCache(t)
	cmd.Env = append(os.Environ(), "XDG_CACHE_HOME="+cache, "PICOMETER_IREE_COMPILE=")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var logBuf bytes.Buffer
	var logMu sync.Mutex
	addrCh := make(chan string, 1)
	logDone := make(chan struct{})
	go func() {
		defer close(logDone)
		re := regexp.MustCompile(`level=INFO msg=serving url=http://([0-9.]+:[0-9]+) `)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			logMu.Lock()
			logBuf.WriteString(sc.Text() + "\n")
			logMu.Unlock()
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				addrCh <- m[1]
			}
		}
	}()
	var addr string
	select {
	case addr = <-addrCh:
	case <-logDone:
		cmd.Wait()
		t.Fatalf("picometerd exited before serving: %v\n%s", cmd.ProcessState, logBuf.String())
	case <-time.After(2 * time.Minute):
		t.Fatalf("picometerd did not log its address\n%s", logBuf.String())
	}
	srv := &testServer{t: t, url: "http://" + addr, sink: sink}
	c := startTiny(t, func(c *Config) { c.Metrics.Socket = ""; c.Engine.BMax = 4 })

	bodies := []string{
		greedy("Hello", 24, ""),
		greedy("The quick brown fox", 24, ""),
		greedy("1234567890", 24, ""),
		`{"messages":[{"role":"user","content":"Hi there"}],"max_tokens":16,"temperature":0,"return_token_ids":true}`,
		greedy("a", 40, ""),
		greedy("Once upon a time, in a land far away", 8, ""),
	}
	path := func(b string) string {
		if strings.Contains(b, `"messages"`) {
			return "/v1/chat/completions"
		}
		return "/v1/completions"
	}
	alone := make([]*completion, len(bodies))
	for i, b := range bodies {
		got := decodeCompletionResponse(t, srv.post(path(b), b).body)
		want := decodeCompletionResponse(t, c.post(path(b), b).body)
		if !slices.Equal(got.Choices[0].TokenIDs, want.Choices[0].TokenIDs) || got.text() != want.text() ||
			got.finish() != want.finish() || got.Usage.PromptTokens != want.Usage.PromptTokens ||
			got.Usage.CompletionTokens != want.Usage.CompletionTokens || got.Usage.TotalTokens != want.Usage.TotalTokens {
			t.Errorf("%s\niree     %v %q %s %+v\nC engine %v %q %s %+v", b, got.Choices[0].TokenIDs, got.text(), got.finish(), *got.Usage,
				want.Choices[0].TokenIDs, want.text(), want.finish(), *want.Usage)
		}
		if len(got.Choices[0].TokenIDs) == 0 || got.Usage.Extra["ttft_s"] <= 0 || got.Usage.Extra["decode_tokens"] != float64(got.Usage.CompletionTokens-1) {
			t.Errorf("%s: usage %+v", b, got.Usage)
		}
		alone[i] = got
	}
	var wg sync.WaitGroup
	together := make([]*completion, len(bodies))
	for i, b := range bodies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			together[i] = decodeCompletionResponse(t, srv.post(path(b), b).body)
		}()
	}
	wg.Wait()
	for i := range bodies {
		if !slices.Equal(together[i].Choices[0].TokenIDs, alone[i].Choices[0].TokenIDs) {
			t.Errorf("%s: concurrent %v, alone %v", bodies[i], together[i].Choices[0].TokenIDs, alone[i].Choices[0].TokenIDs)
		}
	}
	if r := srv.post("/v1/completions", `{"prompt":"x","max_tokens":2,"logprobs":3}`); r.status != 200 {
		t.Errorf("logprobs: %d %s", r.status, r.body)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-logDone
	if err := cmd.Wait(); err != nil {
		t.Fatalf("picometerd exited with %v\n%s", err, logBuf.String())
	}
	if vmfbs, _ := filepath.Glob(filepath.Join(cache, "picometer", "iree", "*.vmfb")); len(vmfbs) != 1 {
		t.Errorf("compile cache holds %v, want one program", vmfbs)
	}
	sink.drained()
	lines := sink.lines()
	if len(lines) != 1 {
		t.Fatalf("%d connections to the sidecar, want 1", len(lines))
	}
	evs := checkConnection(t, lines[0], sink.events()[0].Boot)
	h := evs[0]
	if h.Config.BMax != 4 || h.Config.ContextLength != 256 || h.Config.SpecK != 0 || h.Config.KVBlocks != 4*256/16 || h.Config.PrefillChunk != 4 {
		t.Errorf("hello %+v", h.HelloBody)
	}
	n := 2*len(bodies) + 1
	var prompt, completion int64
	var reqs int
	for _, ev := range evs {
		if ev.Kind != schema.KindRequest {
			continue
		}
		reqs++
		r := ev.RequestBody
		prompt += int64(r.PromptTokens)
		completion += int64(r.CompletionTokens)
		if !(0 < r.AdmittedUS && r.AdmittedUS < r.FirstTokenUS && r.FirstTokenUS <= r.LastTokenUS && r.LastTokenUS <= r.FinishUS) ||
			len(r.ITLUS) != r.CompletionTokens-1 || r.PrefillTokens != r.PromptTokens || r.DecodeTokens != r.CompletionTokens-1 {
			t.Errorf("request event %+v", r)
		}
	}
	last, tot := finalSnapshot(t, evs)
	if reqs != n || last.RequestsFinished != int64(n) || tot.Requests() != int64(n) ||
		last.PromptTokensSum != prompt || last.CompletionTokensSum != completion ||
		last.PrefillTokensSum != prompt || last.DecodeTokensSum != completion-int64(n) ||
		last.EnginePrefillTimeSum <= 0 || last.EngineDecodeTimeSum <= 0 || last.Slots != 4 || last.KVBlocksTotal != 64 {
		t.Errorf("%d request events (want %d); last snapshot %+v", reqs, n, last.EngineBody)
	}
	phases := map[string]int{}
	for _, ev := range evs {
		if ev.Kind == schema.KindEngine {
			for _, s := range ev.Steps {
				phases[s.Phase] += s.Tokens
			}
		}
	}
	if phases[schema.PhasePrefill] != int(prompt) || phases[schema.PhaseDecode] != int(completion)-n {
		t.Errorf("step records carry %v tokens, want prefill %d and decode %d", phases, prompt, completion-int64(n))
	}
}
