package daemon

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"testing"
	"time"

	"github.com/picometer/picometer/internal/testenv"
)

// corsPage fetches the daemon's chat endpoint with a JSON body (a request
// that needs a preflight) and reports the outcome to its own origin.
const corsPage = `<!doctype html><title>cors</title><script>
fetch(%q, {method: "POST", headers: {"Content-Type": "application/json"},
  body: JSON.stringify({messages: [{role: "user", content: "hi"}], max_tokens: 2})})
  .then(r => r.json().then(j => "ok " + r.status + " " + j.object))
  .catch(e => "refused " + e.name + ": " + e.message)
  .then(s => fetch("/result", {method: "POST", body: s}));
</script>`

// pageServer serves corsPage on a loopback origin and sends what the page
// reports on results.
func pageServer(t *testing.T, api string, results chan<- string) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/result" {
			b, _ := io.ReadAll(r.Body)
			results <- string(b)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, corsPage, api)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

// TestCORSChromium: in Debian's headless Chromium, a page served from
// another loopback origin fetches /v1/chat/completions: from the origin
// in cors_origins the preflight passes and the page reads the completion;
// from another origin the browser refuses it (TypeError) and the request
// never reaches the engine.
func TestCORSChromium(t *testing.T) {
	browser := testenv.Program(t, "chromium", "PICOMETER_CHROMIUM_BIN", "make deps; Debian package chromium")
	results := make(chan string, 4)
	eng := newFakeEngine(128)
	var allowed string
	// The daemon's address must be known to the pages, the allowed
	// page's origin to the daemon: listen for the pages first.
	apiLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	api := "http://" + apiLn.Addr().String() + "/v1/chat/completions"
	allowed = pageServer(t, api, results)
	other := pageServer(t, api, results)
	apiLn.Close()
	ts := startServer(t, eng, func(c *Config) {
		c.CORSOrigins = []string{allowed}
		c.Metrics.Socket = ""
	})
	// startServer serves a port of its own; serve the pages' one too.
	ln, err := net.Listen("tcp", apiLn.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	go ts.d.Serve(ln)

	for _, c := range []struct{ page, want string }{
		{allowed, "ok 200 chat.completion"},
		{other, "refused TypeError: Failed to fetch"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		cmd := exec.CommandContext(ctx, browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
			"--disable-background-networking", "--disable-component-update", "--disable-sync",
			"--user-data-dir="+t.TempDir(), "--virtual-time-budget=10000", "--dump-dom", c.page+"/")
		var errb bytes.Buffer
		cmd.Stderr = &errb
		if err := cmd.Run(); err != nil {
			cancel()
			t.Fatalf("chromium %s: %v\n%s", c.page, err, errb.String())
		}
		cancel()
		select {
		case got := <-results:
			if got != c.want {
				t.Errorf("page at %s (cors_origins %s): %q, want %q", c.page, allowed, got, c.want)
			} else {
				testenv.Report(t, "chromium, page at %s, cors_origins [%s]: %s", c.page, allowed, got)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("page at %s reported nothing\n%s", c.page, errb.String())
		}
	}
	eng.mu.Lock()
	submitted := eng.submitted
	eng.mu.Unlock()
	if submitted != 1 {
		t.Errorf("%d requests reached the engine, want 1 (the refused origin's must not)", submitted)
	}
}
