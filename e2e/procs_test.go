package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/picometer/picometer/alerts"
	"github.com/picometer/picometer/schema"
)

// proc is a child process whose output goes to a log file.
type proc struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	err     error
}

// start runs bin with args, logging to dir/name.log, and registers a
// cleanup that stops it and, when the test failed, prints its log's tail.
func start(t *testing.T, dir, name, bin string, args ...string) *proc {
	t.Helper()
	return startEnv(t, dir, name, nil, bin, args...)
}

// startEnv is start with extra environment variables ("K=V").
func startEnv(t *testing.T, dir, name string, env []string, bin string, args ...string) *proc {
	t.Helper()
	logPath := filepath.Join(dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlive the test binary
	if err := cmd.Start(); err != nil {
		f.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	p := &proc{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	t.Logf("started %s (pid %d): %s %s", name, cmd.Process.Pid, bin, strings.Join(args, " "))
	t.Cleanup(func() {
		p.stop(t)
		if t.Failed() {
			t.Logf("---- %s log (last 40 lines) ----\n%s", name, p.tail(40))
		}
	})
	return p
}

// running reports whether the process has not exited.
func (p *proc) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// stop sends SIGTERM and waits up to 15s, then SIGKILL. It returns the
// exit error of a process that was still running (nil for a clean exit).
func (p *proc) stop(t *testing.T) error {
	t.Helper()
	if !p.running() {
		return p.err
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		t.Errorf("%s did not exit 15s after SIGTERM; killing it", p.name)
		p.cmd.Process.Kill()
		<-p.done
	}
	return p.err
}

func (p *proc) tail(n int) string {
	data, err := os.ReadFile(p.logPath)
	if err != nil {
		return err.Error()
	}
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// waitFor polls check every 200ms until it returns nil, the process that
// must serve it exits, or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, p *proc, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var err error
	for {
		if err = check(); err == nil {
			return
		}
		if p != nil && !p.running() {
			t.Fatalf("%s: %s exited (%v) while waiting; log:\n%s", what, p.name, p.err, p.tail(40))
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached after %v: %v", what, timeout, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

var errNotYet = errors.New("not yet")

// getOK GETs url and fails unless the answer is 200 OK.
func getOK(c *http.Client, url string) error {
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: HTTP %d", url, resp.StatusCode)
	}
	return nil
}

// waitConnected waits until the sidecar at addr (process p) counts exactly
// one daemon connection.
func waitConnected(t *testing.T, httpc *http.Client, addr string, p *proc, timeout time.Duration) {
	t.Helper()
	connections := alerts.Series(schema.IDSidecarConnections, "")
	waitFor(t, timeout, "the daemon connected to "+p.name, p, func() error {
		m, err := scrape(httpc, addr)
		if err != nil {
			return err
		}
		if got := m.sum(connections, nil); got != 1 {
			return fmt.Errorf("%s = %v", connections, got)
		}
		return nil
	})
}
