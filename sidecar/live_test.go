package sidecar

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/picometer/picometer/schema"

	"github.com/picometer/picometer/internal/testenv"
)

// startSidecar serves a sidecar on a temp socket and a free port, stopped
// when the test ends.
func startSidecar(t *testing.T, cfg Config, env map[string]string) (*Sidecar, string) {
	t.Helper()
	s, addr, stop := serveSidecar(t, cfg, env)
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("sidecar: %v", err)
		}
	})
	return s, addr
}

// serveSidecar serves a sidecar through Sidecar.Serve on a temp socket
// (cfg.Socket is replaced) and a free port; stop ends Serve and returns its
// error.
func serveSidecar(t *testing.T, cfg Config, env map[string]string) (s *Sidecar, addr string, stop func() error) {
	t.Helper()
	cfg.Socket = filepath.Join(t.TempDir(), "s.sock")
	s, err := New(t.Context(), cfg, Options{Logger: discardLogger(), Getenv: func(k string) string { return env[k] }})
	if err != nil {
		t.Fatal(err)
	}
	sock, err := ListenSocket(cfg.Socket, 0o660)
	if err != nil {
		t.Fatal(err)
	}
	web, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, sock, web) }()
	return s, web.Addr().String(), func() error {
		cancel()
		return <-done
	}
}

// send writes data to the sidecar's socket on a new connection.
func send(t *testing.T, socket string, data []byte) {
	t.Helper()
	c, err := net.Dial("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(data); err != nil {
		t.Fatal(err)
	}
}

// TestLivePromtool runs promtool check metrics on a live scrape of a sidecar
// fed every golden stream, over a real socket and real HTTP.
func TestLivePromtool(t *testing.T) {
	promtool := testenv.Promtool(t)
	s, addr := startSidecar(t, DefaultConfig(), nil)
	lines := 0
	for _, gs := range goldenStreams(t) {
		send(t, s.cfg.Socket, gs.data)
		lines += bytes.Count(gs.data, []byte("\n"))
	}
	waitFor(t, func() bool {
		n := 0
		for _, c := range append(append([]*counterSeries(nil), s.Agg.self.events...), s.Agg.self.decodeErrors...) {
			n += int(c.c.Get())
		}
		return n == lines
	})
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.Header.Get("Content-Type") != ContentType {
		t.Fatalf("Content-Type %q", resp.Header.Get("Content-Type"))
	}
	// Every family of the schema must be in this exposition.
	prom := parseExposition(t, string(body))
	for _, f := range schema.Families {
		found := false
		for k := range prom {
			name, _, _ := strings.Cut(k, "{")
			if schema.ByPromName(name) == f {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("family %s is not exposed", f.PromName())
		}
	}
	promtoolCheck(t, promtool, "a live scrape", body)
}

// vm is a VictoriaMetrics single-node process.
type vm struct {
	base string
	cmd  *exec.Cmd
	log  *bytes.Buffer
}

func startVM(t *testing.T, bin, addr, scrapeTarget string) *vm {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "scrape.yml")
	yml := fmt.Sprintf("scrape_configs:\n  - job_name: scrape\n    scrape_interval: 1s\n    static_configs:\n      - targets: [%q]\n", scrapeTarget)
	if err := os.WriteFile(cfg, []byte(yml), 0o644); err != nil {
		t.Fatal(err)
	}
	v := &vm{base: "http://" + addr, log: &bytes.Buffer{}}
	v.cmd = exec.Command(bin, "-httpListenAddr="+addr, "-storageDataPath="+filepath.Join(dir, "data"),
		"-promscrape.config="+cfg, "-opentelemetry.usePrometheusNaming", "-search.latencyOffset=0s",
		"-search.disableCache", "-loggerLevel=ERROR")
	v.cmd.Stdout, v.cmd.Stderr = v.log, v.log
	if err := v.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		v.cmd.Process.Kill()
		v.cmd.Wait()
		if t.Failed() {
			t.Logf("victoria-metrics output:\n%s", v.log)
		}
	})
	waitFor(t, func() bool {
		resp, err := http.Get(v.base + "/health")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	return v
}

func (v *vm) flush(t *testing.T) {
	t.Helper()
	resp, err := http.Get(v.base + "/internal/force_flush")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}

// sample is one element of an instant-query vector.
type sample struct {
	labels map[string]string
	value  float64
}

func (v *vm) query(t *testing.T, q string, at time.Time) []sample {
	t.Helper()
	resp, err := http.Get(v.base + "/api/v1/query?" + url.Values{"query": {q}, "time": {strconv.FormatInt(at.Unix(), 10)}}.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Status string
		Error  string
		Data   struct {
			Result []struct {
				Metric map[string]string
				Value  [2]any
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || r.Status != "success" {
		t.Fatalf("query %s: %v %s", q, err, r.Error)
	}
	var out []sample
	for _, x := range r.Data.Result {
		f, _ := strconv.ParseFloat(x.Value[1].(string), 64)
		out = append(out, sample{x.Metric, f})
	}
	sort.Slice(out, func(i, j int) bool { return fmt.Sprint(out[i].labels) < fmt.Sprint(out[j].labels) })
	return out
}

// TestLiveVictoriaMetrics: a real VictoriaMetrics scrapes the sidecar's
// /metrics (job="scrape") and receives its OTLP push
// (-opentelemetry.usePrometheusNaming; resource attributes become labels,
// service.name → service_name). Both paths must answer the same PromQL with
// the same series names and values: TTFT p99, token rate, finish reasons.
func TestLiveVictoriaMetrics(t *testing.T) {
	bin := testenv.VictoriaMetrics(t)
	vmAddr := testenv.FreeAddr(t)
	const service = "picometer-sidecar-live"
	t.Setenv("OTEL_SERVICE_NAME", service)
	cfg := DefaultConfig()
	cfg.OTLP.Endpoint = "http://" + vmAddr + "/opentelemetry/v1/metrics"
	cfg.OTLP.Interval = time.Hour // pushes are forced below
	s, addr := startSidecar(t, cfg, nil)
	v := startVM(t, bin, vmAddr, addr)

	// Two phases, each seen by a scrape and pushed over OTLP: increase()
	// over a window starting between them is the second phase on both paths.
	rng := rand.New(rand.NewPCG(7, 8))
	d := newSim(t, "1ec0ffee1ec0ffee", "live-model")
	scrape := `{job="scrape"}`
	otlp := `{service_name="` + service + `"}`
	var applied uint64
	phase := func(n int) (tokens int) {
		var b bytes.Buffer
		b.Write(d.hello()) // every connection starts with one
		for i := range n {
			r := randomRequest(rng, i)
			tokens += r.CompletionTokens
			b.Write(d.request(r))
			if i%50 == 0 {
				k := int64(applied) + int64(i)
				b.Write(d.engine(snapshot(k/50, 0, k, float64(k)/100, []int64{k, 1}, []int64{k / 2, 0}, i%8, i%64, 64)))
			}
		}
		send(t, s.cfg.Socket, b.Bytes())
		applied += uint64(n)
		waitFor(t, func() bool { return s.Agg.self.events[kindRequest].c.Get() == applied })
		deadline := time.Now().Add(30 * time.Second)
		for {
			v.flush(t)
			got := v.query(t, `picometer_sidecar_events_total{job="scrape",kind="request"}`, time.Now())
			if len(got) == 1 && got[0].value == float64(applied) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("VictoriaMetrics did not scrape the phase's values: %v", got)
			}
			time.Sleep(200 * time.Millisecond)
		}
		if err := s.FlushOTLP(t.Context()); err != nil {
			t.Fatalf("OTLP push to VictoriaMetrics: %v", err)
		}
		v.flush(t)
		return tokens
	}
	phase(300)
	time.Sleep(1100 * time.Millisecond)
	mid := time.Now()
	time.Sleep(1100 * time.Millisecond)
	tokens2 := phase(400)
	at := time.Now().Add(time.Second)
	time.Sleep(1100 * time.Millisecond)
	v.flush(t)
	windowMS := at.Sub(mid).Milliseconds()
	windowS := strconv.FormatFloat(float64(windowMS)/1000, 'f', -1, 64)
	const n = 700

	// The same series names on both paths.
	names := func(match string) []string {
		var out []string
		for _, x := range v.query(t, `count by (__name__) ({__name__=~"(gen_ai|picometer)_.+",`+match+`})`, at) {
			out = append(out, x.labels["__name__"])
		}
		return out
	}
	sn, on := names(`job="scrape"`), names(`service_name="`+service+`"`)
	if len(sn) < 20 || strings.Join(sn, " ") != strings.Join(on, " ") {
		t.Fatalf("series names differ:\nscrape %v\notlp   %v", sn, on)
	}
	for _, f := range []string{"gen_ai_server_time_to_first_token_seconds_bucket", "picometer_generation_tokens_total", "picometer_requests_finished_total"} {
		if !contains(sn, f) {
			t.Fatalf("%s missing from %v", f, sn)
		}
	}

	// The same answers, query for query.
	w := strconv.FormatInt(windowMS, 10) + "ms"
	ttft := `histogram_quantile(0.99, sum by (le) (increase(gen_ai_server_time_to_first_token_seconds_bucket%s[` + w + `])))`
	tokenRate := `sum(increase(picometer_generation_tokens_total%s[` + w + `])) / ` + windowS
	queries := []string{
		ttft,
		tokenRate,
		`histogram_quantile(0.99, sum by (le) (gen_ai_server_time_to_first_token_seconds_bucket%s))`,
		`sum by (gen_ai_operation_name) (increase(picometer_generation_tokens_total%s[` + w + `]))`,
		`sum by (finish_reason) (picometer_requests_finished_total%s)`,
		`sum by (error_type) (picometer_requests_failed_total%s)`,
		`sum(picometer_request_inter_token_latency_seconds_count%s)`,
		`sum(picometer_engine_batch_time_seconds_total%s)`,
		`max(picometer_engine_kv_cache_usage_ratio%s)`,
	}
	for _, q := range queries {
		a, b := v.query(t, fmt.Sprintf(q, scrape), at), v.query(t, fmt.Sprintf(q, otlp), at)
		if len(a) == 0 || fmt.Sprint(a) != fmt.Sprint(b) {
			t.Errorf("%s\n scrape %v\n otlp   %v", q, a, b)
		} else {
			t.Logf("%s = %v", fmt.Sprintf(q, "{…}"), a)
		}
	}
	// And they are the events' numbers.
	fin := v.query(t, fmt.Sprintf(`sum(picometer_requests_finished_total%s)`, otlp), at)
	if len(fin) != 1 || fin[0].value != n {
		t.Fatalf("finished requests over OTLP = %v, want %d", fin, n)
	}
	rate := v.query(t, fmt.Sprintf(tokenRate, otlp), at)
	if want := float64(tokens2) / (float64(windowMS) / 1000); len(rate) != 1 || rate[0].value != want {
		t.Fatalf("token rate over the second phase = %v, want %d tokens / %s s = %v", rate, tokens2, windowS, want)
	}
	if p := v.query(t, fmt.Sprintf(ttft, otlp), at); len(p) != 1 || !(p[0].value > 0) {
		t.Fatalf("TTFT p99 over the second phase = %v", p)
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
