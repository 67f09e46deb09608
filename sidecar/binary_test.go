package sidecar

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/picometer/picometer/internal/testenv"
	"github.com/picometer/picometer/schema"
)

var built struct {
	once sync.Once
	dir  string
	path string
	err  error
	out  []byte
}

// sidecarBinary returns PICOMETER_BIN_DIR/picometer-sidecar, or builds it
// once per test run.
func sidecarBinary(t testing.TB) string {
	t.Helper()
	if os.Getenv("PICOMETER_BIN_DIR") != "" {
		return testenv.Binary(t, "picometer-sidecar")
	}
	built.once.Do(func() {
		built.dir, built.err = os.MkdirTemp("", "picometer-sidecar-test")
		if built.err != nil {
			return
		}
		built.path = filepath.Join(built.dir, "picometer-sidecar")
		cmd := exec.Command("go", "build", "-o", built.path, "./cmd/picometer-sidecar")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0") // the sidecar needs no cgo; a static binary maps no libc
		built.out, built.err = cmd.CombinedOutput()
	})
	if built.err != nil {
		t.Fatalf("go build: %v\n%s", built.err, built.out)
	}
	return built.path
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// procStatus reads VmRSS, VmHWM, RssAnon and RssFile (kB) of a process.
func procStatus(t testing.TB, pid int) (rss, hwm, anon, file int) {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), ":")
		n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
		switch k {
		case "VmRSS":
			rss = n
		case "VmHWM":
			hwm = n
		case "RssAnon":
			anon = n
		case "RssFile":
			file = n
		}
	}
	return rss, hwm, anon, file
}

// TestLiveRSS runs the built binary, feeds it 8 daemons at once (64-token
// requests and engine snapshots) and reports its resident memory, peak
// included. The aim is 15 MiB; more than statsd_exporter's 22 MiB fails.
func TestLiveRSS(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	bin := sidecarBinary(t)
	rcv := &receiver{}
	otlpSrv := httptest.NewServer(rcv)
	defer otlpSrv.Close()
	// Spans (issue 28) go to a receiver that takes and drops them; their
	// budget is 4 MiB of peak RSS over the run without them.
	spanSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer spanSrv.Close()
	peak := map[string]int{}
	for _, mode := range []string{"otlp=false", "otlp=true", "spans=true"} {
		otlp, spans := mode == "otlp=true", mode == "spans=true"
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			sock, addr := filepath.Join(dir, "s.sock"), testenv.FreeAddr(t)
			cmd := exec.Command(bin, "--socket", sock, "--listen", addr)
			cmd.Env = append(os.Environ(), "OTEL_EXPORTER_OTLP_ENDPOINT=", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=")
			if otlp {
				cmd.Env = append(cmd.Env, "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT="+otlpSrv.URL+"/v1/metrics", "OTEL_METRIC_EXPORT_INTERVAL=500")
			}
			if spans {
				cmd.Env = append(cmd.Env, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT="+spanSrv.URL+"/v1/traces")
			}
			var log bytes.Buffer
			cmd.Stderr = &log
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() {
				cmd.Process.Kill()
				cmd.Wait()
				if t.Failed() {
					t.Logf("sidecar log:\n%s", log.String())
				}
			}()
			// The socket file appears at bind, before listen: a dial in between
			// is refused. /metrics answers only after both listeners are up.
			waitFor(t, func() bool { _, err := os.Stat(sock); return err == nil && vsUp(addr) })
			idle, _, idleAnon, idleFile := procStatus(t, cmd.Process.Pid)

			const daemons = 8
			events := 40000
			if spans {
				// Building and encoding four spans per request costs ~15×
				// the rest of ingest (BenchmarkSpansCost): 5,000 requests
				// a daemon keep the run short and still overflow the span
				// queue many times over.
				events = 5000
			}
			var wg sync.WaitGroup
			for d := range daemons {
				wg.Add(1)
				go func() {
					defer wg.Done()
					c, err := net.Dial("unix", sock)
					if err != nil {
						t.Error(err)
						return
					}
					defer c.Close()
					boot := fmt.Sprintf("%016x", d+1)
					req := typicalRequest(boot, 7)
					if spans { // sampled, with a parent: four spans each
						req.TraceID, req.SpanID, req.ParentSpanID, req.Sampled = fmt.Sprintf("%032x", d+1), "53995c3f42cd8ad8", "00f067aa0ba902b7", true
						req.StartUnixNano, req.MaxTokens, req.Temperature, req.TopP = time.Now().UnixNano(), 64, 0.7, 0.95
					}
					prefix, suffix := seqTemplate(t, req, 7)
					s := newSim(t, boot, "rss-model-"+strconv.Itoa(d))
					buf := s.hello()
					for seq := 0; seq < events; {
						buf = appendRequests(buf, prefix, suffix, s.seq+1, 1000)
						s.seq += 1000
						seq += 1000
						buf = append(buf, s.engine(snapshot(int64(seq/1000), 0, int64(seq), float64(seq)/1000,
							[]int64{int64(seq), 3}, []int64{int64(seq / 2), 1}, 4, 32, 64))...)
						if _, err := c.Write(buf); err != nil {
							t.Error(err)
							return
						}
						buf = buf[:0]
					}
				}()
			}
			wg.Wait()
			// 320,000 events take about a second on an idle core; a shared
			// machine under make test can be much slower.
			total := 0.0
			defer func() {
				if t.Failed() {
					t.Logf("the sidecar had counted %v of %d request events", total, daemons*events)
				}
			}()
			waitWithin(t, 3*time.Minute, func() bool {
				resp, err := http.Get("http://" + addr + "/metrics")
				if err != nil {
					return false
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				prom := parseExposition(t, string(body))
				total = prom[seriesKey("picometer_sidecar_events_total", map[string]string{"kind": "request"})]
				return total == float64(daemons*events)
			})
			if otlp {
				time.Sleep(time.Second) // a couple of exports
			}
			// The status page counts too: wait for a history sample with
			// every daemon in it (a 5 s ticker), and render the page.
			waitWithin(t, 4*HistoryStep, func() bool { return pageTargets(t, addr) == daemons })
			rss, hwm, anon, file := procStatus(t, cmd.Process.Pid)
			mib := func(kb int) float64 { return float64(kb) / 1024 }
			t.Logf("RSS idle %.1f MiB (anon %.1f, file %.1f); after %d daemons × %d events: %.1f MiB (anon %.1f, file %.1f), peak %.1f MiB (aim ≤ 15 MiB)",
				mib(idle), mib(idleAnon), mib(idleFile), daemons, events, mib(rss), mib(anon), mib(file), mib(hwm))
			peak[mode] = hwm
			if spans {
				// Issue 28's budget is 4 MiB. With the SDK's tracer spans took
				// +7.5 MiB in a fresh-clone make test on a quiet machine.
				// Built without it (eventspan.go) they take +1.5, +1.5 and
				// +1.7 MiB on a quiet machine (load 1.5) and +2.0–2.9 MiB at
				// load 15, of which ~1.1 MiB is the exporter's code paged in
				// (file-backed), not heap.
				if grown := hwm - peak["otlp=false"]; peak["otlp=false"] > 0 && grown > 4*1024 {
					t.Fatalf("spans take peak RSS %.1f MiB above the run without them, over issue 28's budget of 4 MiB", float64(grown)/1024)
				}
				t.Logf("spans take peak RSS %.1f MiB above the run without them (issue 28's budget: 4 MiB)", float64(hwm-peak["otlp=false"])/1024)
				return
			}
			if hwm > 22*1024 {
				t.Fatalf("peak RSS %.1f MiB is more than statsd_exporter's 22 MiB", float64(hwm)/1024)
			}
		})
	}
}

// withoutPSINotice drops the line VictoriaMetrics/metrics logs from its
// package initialisation on a kernel or cgroup without pressure stall
// information ("INFO: metrics: disable exposing PSI metrics …", seen in a
// Debian 12 chroot): it comes before main, so the sidecar cannot silence it.
func withoutPSINotice(stderr string) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(stderr, "\n") {
		if !strings.Contains(line, "INFO: metrics: disable exposing PSI metrics") {
			b.WriteString(line)
		}
	}
	return b.String()
}

// TestBinaryFlags runs the built binary: --check-config on good and bad
// files and environment, flags over the file, and a second sidecar refused
// on a live socket.
func TestBinaryFlags(t *testing.T) {
	bin := sidecarBinary(t)
	run := func(env []string, args ...string) (string, string, int) {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "OTEL_EXPORTER_OTLP_ENDPOINT=", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=", "OTEL_EXPORTER_OTLP_PROTOCOL=")
		cmd.Env = append(cmd.Env, env...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return out.String(), withoutPSINotice(errb.String()), code
	}
	good := filepath.Join(configDir, "good.toml")
	out, _, code := run(nil, "--config", good, "--check-config", "--listen", "127.0.0.1:1234")
	if code != 0 || !strings.HasPrefix(out, "# picometer-sidecar: configuration OK\n") || !strings.Contains(out, "listen = \"127.0.0.1:1234\"") ||
		!strings.Contains(out, "# otlp: grpc https://otel.example:4318/v1/metrics every 15s") {
		t.Fatalf("--check-config good.toml: exit %d\n%s", code, out)
	}
	// What --check-config prints is TOML that reads back to the effective
	// configuration (the flag included; headers are not shown).
	printed := filepath.Join(t.TempDir(), "printed.toml")
	if err := os.WriteFile(printed, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	back, err := LoadConfig(printed)
	want, _ := LoadConfig(good)
	want.Listen, want.OTLP.Headers = "127.0.0.1:1234", nil
	if err != nil || !reflect.DeepEqual(back, want) {
		t.Fatalf("--check-config output reads back as %+v, %v; want %+v", back, err, want)
	}
	out, _, code = run(nil, "--check-config")
	if code != 0 || !strings.Contains(out, "socket = \""+schema.DefaultSocketPath(os.Getenv, os.Geteuid())+"\"") || !strings.Contains(out, "socket_mode = \"0660\"") || !strings.Contains(out, "# otlp: off") {
		t.Fatalf("--check-config defaults: exit %d\n%s", code, out)
	}
	bad := filepath.Join(configDir, "bad_unknown_key.toml")
	_, stderr, code := run(nil, "--config", bad, "--check-config")
	if want := "picometer-sidecar: config: " + bad + `: unknown key "otlp.endpiont"` + "\n"; code != 2 || stderr != want {
		t.Fatalf("bad config: exit %d, stderr %q, want %q", code, stderr, want)
	}
	_, stderr, code = run(nil, "--check-config", "--listen", "metrics.example:9464")
	if want := `picometer-sidecar: config: listen: host "metrics.example" is not an IP address or localhost` + "\n"; code != 2 || stderr != want {
		t.Fatalf("bad flag: exit %d, stderr %q, want %q", code, stderr, want)
	}
	_, stderr, code = run([]string{"OTEL_EXPORTER_OTLP_PROTOCOL=http/json"}, "--check-config")
	if want := `picometer-sidecar: config: OTEL_EXPORTER_OTLP_PROTOCOL: "http/json" is not one of http/protobuf, grpc` + "\n"; code != 2 || stderr != want {
		t.Fatalf("bad environment: exit %d, stderr %q", code, stderr)
	}
	out, _, code = run([]string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://collector:4318", "OTEL_METRIC_EXPORT_INTERVAL=10000"}, "--check-config")
	if code != 0 || !strings.Contains(out, "# otlp: http/protobuf (from OTEL_EXPORTER_OTLP_[METRICS_]ENDPOINT) every 10s") {
		t.Fatalf("--check-config with OTEL_* variables: exit %d\n%s", code, out)
	}

	// A second sidecar on a live socket is refused with a clear error.
	sock := filepath.Join(t.TempDir(), "s.sock")
	ln, err := ListenSocket(sock, 0o660)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, stderr, code = run(nil, "--socket", sock, "--listen", testenv.FreeAddr(t))
	if code != 1 || !strings.Contains(stderr, "another process is listening on it") {
		t.Fatalf("second sidecar: exit %d, stderr %q", code, stderr)
	}
}

// pageTargets GETs the status page and /api/v1/status from a running
// sidecar and returns how many targets have history.
func pageTargets(t testing.TB, addr string) int {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET /: HTTP %d", resp.StatusCode)
	}
	resp, err = http.Get("http://" + addr + "/api/v1/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc statusDoc
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatalf("/api/v1/status: %v", err)
	}
	n := 0
	for _, tg := range doc.Targets {
		if tg.Series != nil {
			n++
		}
	}
	return n
}
