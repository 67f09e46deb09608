package deploy

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// live reports whether missing programs and files are failures
// (PICOMETER_LIVE=1, set by make test) rather than reasons to skip.
func live() bool { return os.Getenv("PICOMETER_LIVE") == "1" }

func missing(t testing.TB, format string, args ...any) {
	t.Helper()
	if live() {
		t.Fatalf("PICOMETER_LIVE=1: "+format, args...)
	}
	t.Skipf(format, args...)
}

// binary returns the path of a built binary in PICOMETER_BIN_DIR (make
// build), or ../bin.
func binary(t testing.TB, name string) string {
	t.Helper()
	dir := os.Getenv("PICOMETER_BIN_DIR")
	if dir == "" {
		dir = filepath.Join("..", "bin")
	}
	p, err := filepath.Abs(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		missing(t, "%s: %v (make build creates it)", name, err)
	}
	return p
}

// modelFile returns a model file: PICOMETER_DEFAULT_MODEL or
// ../build/models/default.gguf when which is "default",
// PICOMETER_TINY_MODEL or ../build/models/tiny.gguf when "tiny".
func modelFile(t testing.TB, which string) string {
	t.Helper()
	env := map[string]string{"default": "PICOMETER_DEFAULT_MODEL", "tiny": "PICOMETER_TINY_MODEL"}[which]
	p := os.Getenv(env)
	if p == "" {
		p = filepath.Join("..", "build", "models", which+".gguf")
	}
	p, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		missing(t, "%s model: %v (make models creates it)", which, err)
	}
	return p
}

// freeAddr returns a loopback address no one listens on now.
func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// start runs a command until the end of the test, with its output in the
// test log when the test fails.
func start(t testing.TB, name string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(name, args...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("%s output:\n%s", filepath.Base(name), out.String())
		}
	})
	return cmd
}

// waitHealthy polls url until it answers 200 or the timeout passes.
func waitHealthy(t testing.TB, url string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
			last = fmt.Sprint(resp.Status)
		} else {
			last = err.Error()
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s not healthy after %v: %s", url, timeout, last)
}
