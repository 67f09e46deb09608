package deploy

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/datalayer"
	giedl "sigs.k8s.io/gateway-api-inference-extension/pkg/epp/datalayer/metrics"
)

// The metric names GIE v1.0.0's endpoint picker reads by default
// (pkg/epp/server/runserver.go: DefaultTotalQueuedRequestsMetric,
// DefaultKvCacheUsagePercentageMetric, DefaultLoraInfoMetric; that package
// is not imported for them, it drags in Envoy's control plane), and the
// KV-cache name current vLLM and later GIE releases use.
const (
	gieQueued     = "vllm:num_requests_waiting"
	gieKVv100     = "vllm:gpu_cache_usage_perc"
	gieKVCurrent  = "vllm:kv_cache_usage_perc"
	gieLoRA       = "vllm:lora_requests_info"
	vllmRunning   = "vllm:num_requests_running"
	picometerKV   = "picometer_engine_kv_cache_usage_ratio"
	loadBMax      = 2
	loadRequests  = 6
	loadMaxTokens = 400
)

// engineState is what /debug/engine_metrics says now.
type engineState struct {
	Running      int     `json:"running"`
	Waiting      int     `json:"waiting"`
	KVCacheUsage float64 `json:"kv_cache_usage"`
}

func debugState(t *testing.T, base string) engineState {
	t.Helper()
	resp, err := http.Get(base + "/debug/engine_metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var s engineState
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestEndpointPicker loads a real picometerd (default model, 2 slots, 6
// long requests: 2 running, 4 waiting) and reads it with the endpoint
// picker's own code (GIE v1.0.0's data-layer metrics Extractor over the
// Prometheus text parser; see scrape), as it would every 50 ms: the
// queue size must be 4 and the KV-cache usage the engine's, between the
// engine's own readings just before and after (it only grows while the same
// requests run). Running, which v1.0.0's picker does not map, is read with
// the same parser.
func TestEndpointPicker(t *testing.T) {
	bin, mdl := binary(t, "picometerd"), modelFile(t, "default")
	addr := freeAddr(t)
	base := "http://" + addr
	start(t, bin, "-listen", addr, "-model", mdl, "-metrics-socket", "off", "-b-max", "2", "-spec-k", "0")
	waitHealthy(t, base+"/health", 60*time.Second)

	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); wg.Wait() }()
	for range loadRequests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := `{"prompt":"Once upon a time","max_tokens":400,"temperature":0}`
			req, _ := http.NewRequestWithContext(ctx, "POST", base+"/v1/completions", strings.NewReader(body))
			if resp, err := http.DefaultClient.Do(req); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	deadline := time.Now().Add(30 * time.Second)
	for s := debugState(t, base); s.Running != loadBMax || s.Waiting != loadRequests-loadBMax; s = debugState(t, base) {
		if time.Now().After(deadline) {
			t.Fatalf("engine never held %d running and %d waiting: %+v", loadBMax, loadRequests-loadBMax, s)
		}
		time.Sleep(5 * time.Millisecond)
	}

	for _, kvName := range []string{gieKVv100, gieKVCurrent} {
		ext, err := giedl.NewExtractor(gieQueued, kvName, gieLoRA)
		if err != nil {
			t.Fatal(err)
		}
		ep := datalayer.NewEndpoint()
		ep.UpdateMetrics(datalayer.NewMetrics())
		before := debugState(t, base)
		fams := scrape(t, base)
		after := debugState(t, base)
		if err := ext.Extract(ctx, giedl.PrometheusMetricMap(fams), ep); err != nil {
			t.Fatalf("%s: the endpoint picker's Extract: %v", kvName, err)
		}
		if after.Running != loadBMax || after.Waiting != loadRequests-loadBMax {
			t.Fatalf("the load changed during the scrape (%+v): make the requests longer", after)
		}
		got := ep.GetMetrics()
		t.Logf("%s: endpoint picker reads waiting %d, KV-cache usage %.4f (engine before %.4f, after %.4f), adapters %v/%v, max %d",
			kvName, got.WaitingQueueSize, got.KVCacheUsagePercent, before.KVCacheUsage, after.KVCacheUsage,
			got.ActiveModels, got.WaitingModels, got.MaxActiveModels)
		if got.WaitingQueueSize != loadRequests-loadBMax {
			t.Errorf("%s: waiting %d, want %d", kvName, got.WaitingQueueSize, loadRequests-loadBMax)
		}
		if kv := got.KVCacheUsagePercent; kv <= 0 || kv > 1 || kv < before.KVCacheUsage || kv > after.KVCacheUsage {
			t.Errorf("%s: KV-cache usage %v, want the engine's, in [%v, %v] and in (0, 1]", kvName, kv, before.KVCacheUsage, after.KVCacheUsage)
		}
		if len(got.ActiveModels) != 0 || len(got.WaitingModels) != 0 {
			t.Errorf("%s: LoRA adapters %v %v, want none", kvName, got.ActiveModels, got.WaitingModels)
		}
		if got.UpdateTime.IsZero() {
			t.Errorf("%s: the endpoint picker recorded no update", kvName)
		}
	}

	fams := scrape(t, base)
	running := fams[vllmRunning]
	if running == nil || len(running.Metric) != 1 || running.Metric[0].GetGauge().GetValue() != loadBMax {
		t.Errorf("%s: %v, want %d", vllmRunning, running, loadBMax)
	}
	if fams[picometerKV] == nil || fams[gieKVCurrent] == nil ||
		fams[picometerKV].Metric[0].GetGauge().GetValue() != fams[gieKVCurrent].Metric[0].GetGauge().GetValue() {
		t.Errorf("%s and %s differ in one scrape", picometerKV, gieKVCurrent)
	}
}

// scrape GETs base/metrics and parses it as the endpoint picker does
// (pkg/epp/datalayer/metrics/client.go): the Prometheus text parser of
// prometheus/common. GIE v1.0.0 uses a zero expfmt.TextParser, which with
// the prometheus/common its own go.mod pins (v0.65) validates names as
// UTF-8; the Kubernetes v0.37 modules here lift prometheus/common to v0.70,
// whose zero TextParser panics ("Invalid name validation scheme"), so this
// is the one step not taken from GIE: the parser is made with the scheme
// v0.65's zero value meant. Mapping, label matching, latest-series choice
// and LoRA parsing are GIE's Extractor.
func scrape(t *testing.T, base string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}
