// Package testenv is what the tests of several packages need from the
// machine: the programs the live checks run (promtool, prometheus,
// VictoriaMetrics, the built binaries, the generated models) and free
// loopback addresses.
//
// Something missing skips the test, except under PICOMETER_LIVE=1 (which
// make test sets), where it fails it: CI must not pass by skipping.
package testenv

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Live reports whether missing programs and files fail tests
// (PICOMETER_LIVE=1) rather than skip them.
func Live() bool { return os.Getenv("PICOMETER_LIVE") == "1" }

// Missing skips tb, or fails it under PICOMETER_LIVE=1, with the message.
func Missing(tb testing.TB, format string, args ...any) {
	tb.Helper()
	msg := fmt.Sprintf(format, args...)
	if Live() {
		tb.Fatalf("%s (PICOMETER_LIVE=1 requires it)", msg)
	}
	tb.Skip(msg)
}

// File returns the absolute form of path when it names an existing file,
// and otherwise calls Missing, naming what it is and how to get it.
func File(tb testing.TB, what, path string) string {
	tb.Helper()
	if path == "" {
		Missing(tb, "%s: not found", what)
		return ""
	}
	if _, err := os.Stat(path); err != nil {
		Missing(tb, "%s: %v", what, err)
		return ""
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		tb.Fatal(err)
	}
	return abs
}

// Program returns the program named by environment variable env when it is
// set, else name's path on PATH; hint says how to install it.
func Program(tb testing.TB, name, env, hint string) string {
	tb.Helper()
	what := fmt.Sprintf("%s (PATH or %s; %s)", name, env, hint)
	if p := os.Getenv(env); p != "" {
		return File(tb, what, p)
	}
	p, err := exec.LookPath(name)
	if err != nil {
		Missing(tb, "%s: %v", what, err)
		return ""
	}
	return p
}

// Promtool is Debian's promtool (package prometheus).
func Promtool(tb testing.TB) string {
	tb.Helper()
	return Program(tb, "promtool", "PICOMETER_PROMTOOL_BIN", "apt-get install prometheus")
}

// Prometheus is Debian's prometheus server.
func Prometheus(tb testing.TB) string {
	tb.Helper()
	return Program(tb, "prometheus", "PICOMETER_PROMETHEUS_BIN", "apt-get install prometheus")
}

// Node is the node program (Debian's nodejs) that runs the npm oracles.
func Node(tb testing.TB) string {
	tb.Helper()
	return Program(tb, "node", "PICOMETER_NODE_BIN", "make deps")
}

// NPMDir is where make deps installs tools/npm/package.json's packages:
// PICOMETER_NPM_DIR, else the repository's build/npm. Its node_modules
// holds the pinned oracles and clients.
func NPMDir() string {
	if d := os.Getenv("PICOMETER_NPM_DIR"); d != "" {
		return d
	}
	if root, err := Root(); err == nil {
		return filepath.Join(root, "build", "npm")
	}
	return ""
}

// NPMPackage returns the directory of an installed npm package (for
// example "@huggingface/jinja") under NPMDir()/node_modules, and otherwise
// calls Missing.
func NPMPackage(tb testing.TB, pkg string) string {
	tb.Helper()
	dir := NPMDir()
	if dir == "" {
		Missing(tb, "npm package %s: no build/npm (make deps)", pkg)
		return ""
	}
	p := filepath.Join(dir, "node_modules", pkg)
	if _, err := os.Stat(filepath.Join(p, "package.json")); err != nil {
		Missing(tb, "npm package %s (make deps): %v", pkg, err)
		return ""
	}
	return p
}

// VictoriaMetrics is the single-node VictoriaMetrics the live OTLP checks
// push to: PICOMETER_VM_BIN, else the repository's bin/victoria-metrics.
func VictoriaMetrics(tb testing.TB) string {
	tb.Helper()
	p := os.Getenv("PICOMETER_VM_BIN")
	if p == "" {
		if root, err := Root(); err == nil {
			p = filepath.Join(root, "bin", "victoria-metrics")
		}
	}
	return File(tb, "victoria-metrics (PICOMETER_VM_BIN; make bin/victoria-metrics)", p)
}

// Binary is one of the project's programs as make build writes them:
// PICOMETER_BIN_DIR/name.
func Binary(tb testing.TB, name string) string {
	tb.Helper()
	dir := os.Getenv("PICOMETER_BIN_DIR")
	if dir == "" {
		Missing(tb, "%s: PICOMETER_BIN_DIR is not set (make build, then set it to bin/)", name)
		return ""
	}
	return File(tb, name+" (make build)", filepath.Join(dir, name))
}

// Root is the repository's root: the nearest directory at or above the
// working directory (a test's package directory) holding go.mod.
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod at or above the working directory")
		}
		dir = parent
	}
}

// FreeAddr returns a loopback address whose port was free a moment ago.
func FreeAddr(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// CheckGenerated fails tb for every file (a path relative to the test's
// package directory) whose committed bytes differ from what the generator
// makes now; with update it rewrites them first. regen is the command that
// rewrites them, for the message.
func CheckGenerated(tb testing.TB, files map[string][]byte, update bool, regen string) {
	tb.Helper()
	for name, want := range files {
		if update {
			if err := os.WriteFile(name, want, 0o644); err != nil {
				tb.Fatal(err)
			}
		}
		got, err := os.ReadFile(name)
		if err != nil {
			tb.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			dir, _ := os.Getwd()
			tb.Errorf("%s/%s is stale: run %s", filepath.Base(dir), name, regen)
		}
	}
}

// Report records a line a test wants in the output of make test (counts
// of what an oracle test compared): go test shows nothing of a passing
// package, so make test-go sets PICOMETER_REPORT_DIR and prints the lines
// after the run. The line is also logged (shown with -v or on failure).
func Report(tb testing.TB, format string, args ...any) {
	tb.Helper()
	line := fmt.Sprintf(format, args...)
	tb.Log(line)
	dir := os.Getenv("PICOMETER_REPORT_DIR")
	if dir == "" {
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "report.txt"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	if _, err := fmt.Fprintln(f, line); err != nil {
		tb.Fatal(err)
	}
}
