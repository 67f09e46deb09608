package e2e

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/picometer/picometer/internal/testenv"
)

// TestLiveExemplars runs picometerd and the sidecar with spans exported to
// a real OTLP receiver and Debian's Prometheus, with exemplar storage on,
// scraping the sidecar (it asks for OpenMetrics): the TTFT and request
// duration buckets' exemplars that Prometheus stores name traces the
// clients were told of (traceresponse) and whose SERVER spans the receiver
// got, with the span's own id and the request's own TTFT. VictoriaMetrics
// scrapes the same sidecar: it asks for the 0.0.4 text, gets it, and counts
// the same requests. Both scrape through a proxy that records what each
// asked for and got.
func TestLiveExemplars(t *testing.T) {
	sidecarBin := testenv.Binary(t, "picometer-sidecar")
	daemonBin := testenv.Binary(t, "picometerd")
	model := testenv.File(t, "tiny model (PICOMETER_TINY_MODEL; make models)", os.Getenv("PICOMETER_TINY_MODEL"))
	testenv.Prometheus(t)
	dir := t.TempDir()
	sock := filepath.Join(dir, "picometer.sock")
	sidecarAddr, daemonAddr := testenv.FreeAddr(t), testenv.FreeAddr(t)
	httpc := &http.Client{Timeout: 10 * time.Second}

	rcv := &spanReceiver{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: rcv}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	sidecar := startEnv(t, dir, "sidecar", []string{
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://" + ln.Addr().String() + "/v1/traces",
	}, sidecarBin, "--socket", sock, "--listen", sidecarAddr)
	waitFor(t, 15*time.Second, "sidecar /health", sidecar, func() error { return getOK(httpc, "http://"+sidecarAddr+"/health") })
	daemon := start(t, dir, "daemon", daemonBin, "--model", model, "--listen", daemonAddr, "--metrics-socket", sock)
	waitFor(t, 30*time.Second, "daemon /health", daemon, func() error { return getOK(httpc, "http://"+daemonAddr+"/health") })
	waitConnected(t, httpc, sidecarAddr, sidecar, 15*time.Second)
	// The scrapers' proxy: what each asked for (Accept) and got
	// (Content-Type), by User-Agent.
	var seenMu sync.Mutex
	seen := map[string]string{}
	target, _ := url.Parse("http://" + sidecarAddr)
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.ModifyResponse = func(resp *http.Response) error {
		ua, _, _ := strings.Cut(resp.Request.Header.Get("User-Agent"), "/")
		seenMu.Lock()
		seen[ua] = resp.Request.Header.Get("Accept") + " -> " + resp.Header.Get("Content-Type")
		seenMu.Unlock()
		return nil
	}
	pln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	psrv := &http.Server{Handler: rp}
	go psrv.Serve(pln)
	t.Cleanup(func() { psrv.Close() })
	prom, api := startPrometheusFlags(t, dir, pln.Addr().String(), []string{"--enable-feature=exemplar-storage"})
	vmCfg := filepath.Join(dir, "vm-scrape.yml")
	if err := os.WriteFile(vmCfg, []byte("scrape_configs:\n  - job_name: picometer\n    scrape_interval: 1s\n    static_configs: [{targets: ['"+pln.Addr().String()+"']}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	vmProc, vm := startVictoriaMetricsFlags(t, dir, "-promscrape.config="+vmCfg)

	// Requests with and without a caller's traceparent; the ids each
	// client was told (traceresponse: 00-trace-span-flags).
	told := map[string]string{} // trace id → span id
	for i := 0; i < 6; i++ {
		hdr := map[string]string{}
		if i%2 == 0 {
			hdr["traceparent"] = fmt.Sprintf("00-%032x-%016x-01", 0xe0e0+i, 0xabc+i)
		}
		r := post(t, daemonAddr, "/v1/completions", fmt.Sprintf(`{"prompt":"exemplar %d","max_tokens":%d,"temperature":0}`, i, 4+4*i), hdr)
		parts := strings.Split(r.traceresponse, "-")
		if r.status != 200 || len(parts) != 4 || parts[3] != "01" {
			t.Fatalf("request %d: status %d, traceresponse %q", i, r.status, r.traceresponse)
		}
		told[parts[1]] = parts[2]
	}

	type exemplar struct {
		Labels    map[string]string `json:"labels"`
		Value     string            `json:"value"`
		Timestamp float64           `json:"timestamp"`
	}
	exemplars := func(metric string) ([]exemplar, error) {
		now := time.Now()
		data, err := api.get("/api/v1/query_exemplars", url.Values{"query": {metric + `{gen_ai_operation_name="text_completion"}`},
			"start": {strconv.FormatInt(now.Add(-10*time.Minute).Unix(), 10)}, "end": {strconv.FormatInt(now.Add(time.Minute).Unix(), 10)}})
		if err != nil {
			return nil, err
		}
		var res []struct {
			SeriesLabels map[string]string `json:"seriesLabels"`
			Exemplars    []exemplar        `json:"exemplars"`
		}
		if err := json.Unmarshal(data, &res); err != nil {
			return nil, err
		}
		var out []exemplar
		for _, r := range res {
			out = append(out, r.Exemplars...)
		}
		return out, nil
	}
	var ttft, dur []exemplar
	waitFor(t, 30*time.Second, "exemplars in Prometheus", prom, func() error {
		if ttft, err = exemplars("gen_ai_server_time_to_first_token_seconds_bucket"); err != nil {
			return err
		}
		if dur, err = exemplars("gen_ai_server_request_duration_seconds_bucket"); err != nil {
			return err
		}
		if len(ttft) == 0 || len(dur) == 0 {
			return fmt.Errorf("%d TTFT and %d duration exemplars", len(ttft), len(dur))
		}
		return nil
	})
	// The scrape is healthy (OpenMetrics parsed whole) and gives the same
	// counts as the 0.0.4 text would.
	waitFor(t, 20*time.Second, "the request count through Prometheus", prom, func() error {
		v, err := api.query(`sum(gen_ai_server_request_duration_seconds_count{gen_ai_operation_name="text_completion"})`)
		if err != nil || len(v) != 1 || v[0].Value != 6 {
			return fmt.Errorf("%v %v, want 6", v, err)
		}
		up, err := api.query(`up`)
		if err != nil || len(up) != 1 || up[0].Value != 1 {
			return fmt.Errorf("up = %v %v", up, err)
		}
		return nil
	})
	waitFor(t, 30*time.Second, "the request count through VictoriaMetrics", vmProc, func() error {
		if err := vm.flush(); err != nil {
			return err
		}
		v, err := vm.query(`sum(gen_ai_server_request_duration_seconds_count{gen_ai_operation_name="text_completion"})`)
		if err != nil || len(v) != 1 || v[0].Value != 6 {
			return fmt.Errorf("%v %v, want 6", v, err)
		}
		return nil
	})
	seenMu.Lock()
	promSaw, vmSaw := seen["Prometheus"], seen["vm_promscrape"]
	seenMu.Unlock()
	if !strings.HasSuffix(promSaw, "-> application/openmetrics-text; version=1.0.0; charset=utf-8") {
		t.Errorf("Prometheus: %q, want OpenMetrics", promSaw)
	}
	if !strings.HasSuffix(vmSaw, "-> text/plain; version=0.0.4; charset=utf-8") {
		t.Errorf("VictoriaMetrics: %q, want the 0.0.4 text (scrapers: %v)", vmSaw, seen)
	}
	t.Logf("Prometheus asked %s", promSaw)
	t.Logf("VictoriaMetrics asked %s", vmSaw)
	waitFor(t, 20*time.Second, "the sidecar's spans", sidecar, func() error {
		rcv.mu.Lock()
		defer rcv.mu.Unlock()
		if n := len(rcv.spans); n < 6*4 {
			return fmt.Errorf("%d spans", n)
		}
		return nil
	})
	servers := map[string]map[string]float64{} // trace → span id → TTFT attribute
	rcv.mu.Lock()
	for _, sp := range rcv.spans {
		if a := attrs(sp); a["gen_ai.operation.name"] == "text_completion" && a["gen_ai.response.id"] != "" {
			tid := hex.EncodeToString(sp.TraceId)
			if servers[tid] == nil {
				servers[tid] = map[string]float64{}
			}
			v, _ := strconv.ParseFloat(a["gen_ai.server.time_to_first_token"], 64)
			servers[tid][hex.EncodeToString(sp.SpanId)] = v
		}
	}
	rcv.mu.Unlock()
	check := func(kind string, exs []exemplar, ttftValue bool) {
		for _, e := range exs {
			tid, sid := e.Labels["trace_id"], e.Labels["span_id"]
			if told[tid] != sid {
				t.Errorf("%s exemplar %v: no client was told trace %s span %s", kind, e.Labels, tid, sid)
				continue
			}
			got, ok := servers[tid][sid]
			if !ok {
				t.Errorf("%s exemplar %v: the receiver has no SERVER span %s of trace %s", kind, e.Labels, sid, tid)
				continue
			}
			if v, _ := strconv.ParseFloat(e.Value, 64); ttftValue && v != got {
				t.Errorf("%s exemplar of span %s: value %v, the span's TTFT %v", kind, sid, v, got)
			}
			if age := time.Since(time.Unix(0, int64(e.Timestamp*1e9))); age < 0 || age > 5*time.Minute {
				t.Errorf("%s exemplar timestamp %v is %v old", kind, e.Timestamp, age)
			}
		}
	}
	check("TTFT", ttft, true)
	check("duration", dur, false)
	t.Logf("Prometheus stored %d TTFT and %d duration exemplars, each a SERVER span the receiver got", len(ttft), len(dur))
}
