package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/picometer/picometer/alerts"
	"github.com/picometer/picometer/schema"

	"github.com/picometer/picometer/internal/testenv"
)

// clientTruth is what the clients received, per operation: the ground
// truth of issue 13's finding 1.
type clientTruth struct {
	mu       sync.Mutex
	finished map[[2]string]float64 // (operation, finish_reason) → requests
	failed   map[string]float64    // operation → 400s (invalid_request)
	prompt   map[string]float64    // operation → usage.prompt_tokens of successes
	gen      map[string]float64    // operation → usage.completion_tokens of successes
	ok       map[string]float64    // operation → successes
	total    int
}

// steadyClient sends requests until stop is closed: completions and chats
// with a few output tokens, and every 7th a 400 (max_tokens -1). It
// records what it received.
func steadyClient(t *testing.T, addr string, id int, truth *clientTruth, stop <-chan struct{}) {
	c := &http.Client{Timeout: 60 * time.Second}
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		op, path := schema.OpTextCompletion, "/v1/completions"
		body := fmt.Sprintf(`{"prompt":"client %d request %d says","max_tokens":%d}`, id, i, 1+(i+id)%8)
		if i%2 == 1 {
			op, path = schema.OpChat, "/v1/chat/completions"
			body = fmt.Sprintf(`{"messages":[{"role":"user","content":"client %d asks %d"}],"max_tokens":%d}`, id, i, 1+(i*3+id)%8)
		}
		bad := i%7 == 3
		if bad {
			body = strings.Replace(body, `"max_tokens":`, `"max_tokens":-1,"x":`, 1)
		}
		resp, err := c.Post("http://"+addr+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Errorf("client %d: %v", id, err)
			return
		}
		var r struct {
			Choices []struct {
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
			Usage struct {
				PromptTokens     int `json:"prompt_tokens"`
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
		}
		err = json.NewDecoder(resp.Body).Decode(&r)
		resp.Body.Close()
		truth.mu.Lock()
		truth.total++
		switch {
		case bad && resp.StatusCode == 400:
			truth.failed[op]++
			truth.finished[[2]string{op, schema.FinishError}]++
		case !bad && resp.StatusCode == 200 && err == nil && len(r.Choices) == 1:
			truth.finished[[2]string{op, r.Choices[0].FinishReason}]++
			truth.ok[op]++
			truth.prompt[op] += float64(r.Usage.PromptTokens)
			truth.gen[op] += float64(r.Usage.CompletionTokens)
		default:
			truth.mu.Unlock()
			t.Errorf("client %d request %d (%s): HTTP %d, %v, %+v", id, i, body, resp.StatusCode, err, r)
			return
		}
		truth.mu.Unlock()
	}
}

// TestLiveSidecarCrash is issue 13's finding 1 with real binaries: 4
// clients run steady traffic; the sidecar is stopped (SIGSTOP) for 4 s,
// then killed (SIGKILL) and restarted on the same socket. Once traffic has
// stopped and the daemon's next totals event has arrived, every request
// counter and request histogram _count/_sum on the new sidecar's /metrics
// equals what the clients received: requests by operation and finish
// reason, failures, prompt and completion tokens (from the usage the
// clients got). Before the totals events, the new sidecar counted only what
// reached it after its start, and every loss counter read 0.
func TestLiveSidecarCrash(t *testing.T) {
	sidecarBin := testenv.Binary(t, "picometer-sidecar")
	daemonBin := testenv.Binary(t, "picometerd")
	model := testenv.File(t, "tiny model (PICOMETER_TINY_MODEL; make models)", os.Getenv("PICOMETER_TINY_MODEL"))
	dir := t.TempDir()
	sock := filepath.Join(dir, "picometer.sock")
	sidecarAddr, daemonAddr := testenv.FreeAddr(t), testenv.FreeAddr(t)
	httpc := &http.Client{Timeout: 10 * time.Second}

	first := start(t, dir, "sidecar", sidecarBin, "--socket", sock, "--listen", sidecarAddr)
	waitFor(t, 15*time.Second, "sidecar /metrics", first, func() error { _, err := scrape(httpc, sidecarAddr); return err })
	daemon := start(t, dir, "daemon", daemonBin, "--model", model, "--listen", daemonAddr, "--metrics-socket", sock)
	waitFor(t, 30*time.Second, "daemon /health", daemon, func() error { return getOK(httpc, "http://"+daemonAddr+"/health") })
	waitConnected(t, httpc, sidecarAddr, first, 20*time.Second)

	truth := &clientTruth{finished: map[[2]string]float64{}, failed: map[string]float64{},
		prompt: map[string]float64{}, gen: map[string]float64{}, ok: map[string]float64{}}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for id := range 4 {
		wg.Add(1)
		go func() { defer wg.Done(); steadyClient(t, daemonAddr, id, truth, stop) }()
	}
	time.Sleep(3 * time.Second)
	if err := first.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(4 * time.Second)
	if err := first.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-first.done
	truth.mu.Lock()
	atCrash := truth.total
	truth.mu.Unlock()
	second := start(t, dir, "sidecar2", sidecarBin, "--socket", sock, "--listen", sidecarAddr)
	waitConnected(t, httpc, sidecarAddr, second, 20*time.Second)
	time.Sleep(3 * time.Second)
	close(stop)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("clients received %d answers (%d when the first sidecar was killed)", truth.total, atCrash)

	// The daemon sends its totals with every engine snapshot (every 1 s):
	// wait until the new sidecar's count reaches the clients'.
	finished := alerts.Series(schema.IDRequestsFinished, "")
	var m metricsText
	waitFor(t, 20*time.Second, "the sidecar's requests_finished reached the clients' count", second, func() error {
		var err error
		if m, err = scrape(httpc, sidecarAddr); err != nil {
			return err
		}
		if got := m.sum(finished, nil); got < float64(truth.total) {
			return fmt.Errorf("%s sums to %v, want %d", finished, got, truth.total)
		}
		return nil
	})
	time.Sleep(1500 * time.Millisecond) // one more totals: nothing may move past the truth
	m, err := scrape(httpc, sidecarAddr)
	if err != nil {
		t.Fatal(err)
	}

	opl := func(op string) map[string]string { return map[string]string{"gen_ai_operation_name": op} }
	check := func(what string, got, want float64) {
		t.Helper()
		if got != want {
			t.Errorf("%s = %v, want %v (what the clients received)", what, got, want)
		}
	}
	check(finished, m.sum(finished, nil), float64(truth.total))
	for _, op := range schema.AttrOperation.Values {
		for _, fr := range schema.FinishReasons {
			check(fmt.Sprintf("%s{%s,%s}", finished, op, fr),
				m.sum(finished, map[string]string{"gen_ai_operation_name": op, alerts.LabelFinishReason: fr}), truth.finished[[2]string{op, fr}])
		}
		failed := alerts.Series(schema.IDRequestsFailed, "")
		check(failed+"{"+op+"}", m.sum(failed, opl(op)), truth.failed[op])
		check(failed+"{"+op+",invalid_request}", m.sum(failed, map[string]string{"gen_ai_operation_name": op, alerts.LabelErrorType: schema.ErrInvalidRequest}), truth.failed[op])
		check("prompt tokens "+op, m.sum(alerts.Series(schema.IDPromptTokens, ""), opl(op)), truth.prompt[op])
		check("generation tokens "+op, m.sum(alerts.Series(schema.IDGenerationTokens, ""), opl(op)), truth.gen[op])
		// Histogram counts: one observation per success (duration without
		// error.type, TTFT, lengths), per 400 (duration with error.type).
		dur := alerts.Series(schema.IDRequestDuration, "_count")
		check(dur+"{"+op+", all}", m.sum(dur, opl(op)), truth.ok[op]+truth.failed[op])
		check(dur+"{"+op+", invalid_request}", m.sum(dur, map[string]string{"gen_ai_operation_name": op, alerts.LabelErrorType: schema.ErrInvalidRequest}), truth.failed[op])
		for _, id := range []string{schema.IDTTFT, schema.IDQueueDuration, schema.IDPrefillDuration, schema.IDDecodeDuration,
			schema.IDRequestPromptLength, schema.IDRequestGenLength} {
			check(alerts.Series(id, "_count")+"{"+op+"}", m.sum(alerts.Series(id, "_count"), opl(op)), truth.ok[op])
		}
		check(alerts.Series(schema.IDRequestPromptLength, "_sum")+"{"+op+"}", m.sum(alerts.Series(schema.IDRequestPromptLength, "_sum"), opl(op)), truth.prompt[op])
		check(alerts.Series(schema.IDRequestGenLength, "_sum")+"{"+op+"}", m.sum(alerts.Series(schema.IDRequestGenLength, "_sum"), opl(op)), truth.gen[op])
	}
	recovered := m.sum(alerts.Series(schema.IDSidecarEventsRecovered, ""), nil)
	received := m.sum(alerts.Series(schema.IDSidecarEvents, ""), map[string]string{alerts.LabelKind: schema.KindRequest})
	t.Logf("the new sidecar received %v request events and recovered %v from the daemon's totals (of %d served)", received, recovered, truth.total)
	if recovered < 1 || received+recovered != float64(truth.total) {
		t.Errorf("received %v + recovered %v request events, want %d in all, some recovered", received, recovered, truth.total)
	}
}
