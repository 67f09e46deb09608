package daemon

import (
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestNoGoroutineLeak serves every kind of request (good, streamed, bad,
// too large, queue full, timed out, disconnected, stalled, aborted at
// shutdown), shuts down, and checks that the goroutine count returns to
// what it was: the loop, the emitter, every handler and stream writer,
// every waiter has ended.
func TestNoGoroutineLeak(t *testing.T) {
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	before := goroutines()
	func() {
		eng := newFakeEngine(1 << 16)
		eng.gen = forever
		eng.stepDelay = time.Millisecond
		eng.cfg.BMax, eng.cfg.MaxWaiting = 2, 1
		ts := startServer(t, eng, func(c *Config) {
			c.MaxBodyBytes = 2048
			c.RequestTimeout = 300 * time.Millisecond
			c.StreamStallTimeout = 200 * time.Millisecond
		})
		post := func(path, body string) {
			resp, err := client.Post(ts.url+path, "application/json", strings.NewReader(body))
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}
		var wg sync.WaitGroup
		for i := range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				post("/v1/completions", fmt.Sprintf(`{"prompt":"n%d","max_tokens":20}`, i))
				post("/v1/chat/completions", `{"messages":[{"role":"user","content":"s"}],"max_tokens":20,"stream":true}`)
				post("/v1/completions", `{"prompt":`)
				post("/v1/completions", `{"prompt":"`+strings.Repeat("a", 8192)+`"}`)
				post("/v1/completions", `{"prompt":"t","max_tokens":60000}`) // times out
			}()
		}
		wg.Wait()
		// A client that leaves a stream, one that leaves a non-streamed
		// request, one that stops reading, and two still running at shutdown.
		rawRequest(t, ts, "/v1/completions", `{"prompt":"a","max_tokens":60000,"stream":true}`).Close()
		rawRequest(t, ts, "/v1/completions", `{"prompt":"b","max_tokens":60000}`).Close()
		rawRequest(t, ts, "/v1/completions", `{"prompt":"c","max_tokens":60000,"stream":true}`)
		time.Sleep(100 * time.Millisecond)
		rawRequest(t, ts, "/v1/completions", `{"prompt":"d","max_tokens":60000}`)
		ts.shutdown()
	}()
	client.CloseIdleConnections()
	testClient.CloseIdleConnections()
	deadline := time.Now().Add(5 * time.Second)
	for {
		after := goroutines()
		if len(after) <= len(before) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines before, %d after shutdown:\n%s", len(before), len(after), strings.Join(after, "\n\n"))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// goroutines returns the stacks of the goroutines that matter for a leak:
// not the test's own, not the in-test sidecar's (it lives until cleanup),
// not fasthttp's process-wide date updater, nor its worker-pool cleaner
// (it sleeps out MaxIdleWorkerDuration before it sees the server stop).
func goroutines() []string {
	buf := make([]byte, 4<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		switch {
		case strings.Contains(g, "TestNoGoroutineLeak"), strings.Contains(g, "testing.(*T).Run"),
			strings.Contains(g, "testing.runTests"), strings.Contains(g, "socketSink"),
			strings.Contains(g, "fasthttp.updateServerDate"), strings.Contains(g, "fasthttp.(*workerPool).Start.func2"),
			strings.Contains(g, "os/signal.signal_recv"), strings.Contains(g, "runtime/trace"):
			continue
		}
		out = append(out, g)
	}
	return out
}
