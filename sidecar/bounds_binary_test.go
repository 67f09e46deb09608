package sidecar

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/picometer/picometer/internal/testenv"
	"github.com/picometer/picometer/schema"
)

// TestLiveHelloFlood reproduces finding 2 on the built binary: hellos for
// 10,000 model names (RSS 15 → 633 MiB, 40–55 s scrapes, SIGTERM ignored
// for 20 s+). Now past max_targets (64) hellos are refused; peak RSS stays
// under 64 MiB, the median scrape over HTTP, during the flood and at the
// caps after it, under 100 ms, and SIGTERM under a request flood ends the
// process within a second.
func TestLiveHelloFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	bin := sidecarBinary(t)
	dir := t.TempDir()
	sock, addr := filepath.Join(dir, "s.sock"), testenv.FreeAddr(t)
	cmd := exec.Command(bin, "--socket", sock, "--listen", addr)
	cmd.Env = append(os.Environ(), "OTEL_EXPORTER_OTLP_ENDPOINT=", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=")
	var log bytes.Buffer
	cmd.Stderr = &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		cmd.Process.Kill()
		if t.Failed() {
			t.Logf("sidecar log:\n%s", log.String())
		}
	}()
	waitFor(t, func() bool { _, err := os.Stat(sock); return err == nil && vsUp(addr) })

	const hellos, workers = 10_000, 8
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= hellos {
					return
				}
				c, err := net.Dial("unix", sock)
				if err != nil {
					t.Error(err)
					return
				}
				s := newSim(t, fmt.Sprintf("%016x", i+1), fmt.Sprintf("flood-%05d-%s", i, strings.Repeat("m", 200)))
				c.Write(s.hello())
				c.(*net.UnixConn).CloseWrite()
				io.Copy(io.Discard, c) // until the sidecar closes or the test does
				c.Close()
			}
		}()
	}
	// A hello connection ends when the sidecar refuses it; the 64 accepted
	// ones stay open until SIGTERM.
	//
	// timed is a scrape as Prometheus makes one: the whole body read, timed
	// from the request to its last byte (the test does not keep or parse it).
	timed := func() (time.Duration, int64) {
		start := time.Now()
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			t.Errorf("scrape: %v", err)
			return 0, 0
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Errorf("scrape: %v", err)
		}
		return time.Since(start), n
	}
	// Scrapes during the flood, back to back with a 50 ms pause, until the
	// last hello has been sent.
	var during []time.Duration
	var largest int64
	for next.Load() < hellos {
		took, n := timed()
		during = append(during, took)
		largest = max(largest, n)
		time.Sleep(50 * time.Millisecond)
	}
	scrape := func() map[string]float64 {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return nil
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return parseExposition(t, string(body))
	}
	reason := func(p map[string]float64, r string) float64 {
		return p[seriesKey("picometer_sidecar_decode_errors_total", map[string]string{"reason": r})]
	}
	var p map[string]float64
	waitWithin(t, 3*time.Minute, func() bool {
		p = scrape()
		return p != nil && reason(p, schema.ReasonTooManyTargets)+reason(p, schema.ReasonTooManyConnections) >= hellos-64
	})
	// And at the caps, the flood over: 64 targets, ~10 MB of text. The
	// sidecar's CPU time over these scrapes is what they cost it, whatever
	// else the machine runs (10 ms ticks, so 21 of them).
	var after []time.Duration
	cpu := vsCPU(t, cmd.Process.Pid)
	for range 21 {
		took, n := timed()
		after = append(after, took)
		largest = max(largest, n)
	}
	cpu = (vsCPU(t, cmd.Process.Pid) - cpu) / time.Duration(len(after))
	_, hwm, _, _ := procStatus(t, cmd.Process.Pid)
	t.Logf("10,000 hellos: too_many_targets %v, too_many_connections %v, peak RSS %.1f MiB; /metrics up to %.1f MB",
		reason(p, schema.ReasonTooManyTargets), reason(p, schema.ReasonTooManyConnections), float64(hwm)/1024, float64(largest)/1e6)
	t.Logf("scrapes during the flood (%d): median %v, %v; at the caps after it: median %v, %v, sidecar CPU %v per scrape",
		len(during), median(during), sorted(during), median(after), sorted(after), cpu)
	if hwm > 64*1024 {
		t.Errorf("peak RSS %.1f MiB, want < 64 MiB", float64(hwm)/1024)
	}
	// The bound of issue 13: a scrape of a sidecar at its caps under
	// 100 ms (the finding was 40–55 s; before the exposition was written
	// from the values, 184–258 ms here). The render takes ~2 ms of CPU
	// (BenchmarkScrapeAtCaps) and allocates nothing, so the collector does
	// not run during it even at the 8 MiB memory limit; the rest is 10 MB
	// over loopback. The median is asserted, not the slowest: one scrape
	// can lose its core to another process on a shared machine, the
	// median of several cannot without the machine being overloaded.
	if len(during) < 3 {
		t.Logf("the flood ended after %d scrapes; the scrapes after it decide", len(during))
	} else if m := median(during); m >= 100*time.Millisecond {
		t.Errorf("median scrape during the flood took %v, want < 100ms", m)
	}
	if m := median(after); m >= 100*time.Millisecond {
		t.Errorf("median scrape at the caps took %v, want < 100ms", m)
	}

	// SIGTERM while daemons flood it with requests.
	stop := make(chan struct{})
	var flood sync.WaitGroup
	for d := range 4 {
		flood.Add(1)
		go func() {
			defer flood.Done()
			c, err := net.Dial("unix", sock)
			if err != nil {
				return
			}
			defer c.Close()
			boot := fmt.Sprintf("f1f1f1f1%08x", d)
			prefix, suffix := seqTemplate(t, typicalRequest(boot, 7), 7)
			c.Write(newSim(t, boot, fmt.Sprintf("flood-%05d-%s", d, strings.Repeat("m", 200))).hello())
			for seq := uint64(2); ; seq += 1000 {
				buf := appendRequests(nil, prefix, suffix, seq, 1000)
				select {
				case <-stop:
					return
				default:
				}
				if _, err := c.Write(buf); err != nil {
					return
				}
			}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	start := time.Now()
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
		took := time.Since(start)
		t.Logf("SIGTERM under load: exited in %v", took)
		if took > time.Second {
			t.Errorf("exit took %v after SIGTERM, want ≤ 1s", took)
		}
	case <-time.After(20 * time.Second):
		t.Errorf("no exit 20 s after SIGTERM")
	}
	close(stop)
	flood.Wait()
	wg.Wait()
}

// sorted returns a sorted copy of ds.
func sorted(ds []time.Duration) []time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s
}

// median returns the median of ds (the upper one of an even count), 0 for
// none.
func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	return sorted(ds)[len(ds)/2]
}
