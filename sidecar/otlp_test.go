package sidecar

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	collpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricpb "go.opentelemetry.io/proto/otlp/metrics/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/picometer/picometer/schema"
)

// receiver collects OTLP export requests (over HTTP or gRPC).
type receiver struct {
	collpb.UnimplementedMetricsServiceServer
	mu      sync.Mutex
	reqs    []*collpb.ExportMetricsServiceRequest
	headers []map[string]string
	fail    bool
}

func (r *receiver) record(req *collpb.ExportMetricsServiceRequest, h map[string]string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail {
		return false
	}
	r.reqs = append(r.reqs, req)
	r.headers = append(r.headers, h)
	return true
}

func (r *receiver) last(t *testing.T) (*collpb.ExportMetricsServiceRequest, map[string]string) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.reqs) == 0 {
		t.Fatal("no export received")
	}
	return r.reqs[len(r.reqs)-1], r.headers[len(r.headers)-1]
}

func (r *receiver) setFail(v bool) { r.mu.Lock(); r.fail = v; r.mu.Unlock() }

// ServeHTTP is an OTLP/HTTP protobuf endpoint.
func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	var m collpb.ExportMetricsServiceRequest
	if req.URL.Path != "/v1/metrics" || req.Header.Get("Content-Type") != "application/x-protobuf" || proto.Unmarshal(body, &m) != nil {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	h := map[string]string{}
	for k := range req.Header {
		h[strings.ToLower(k)] = req.Header.Get(k)
	}
	if !r.record(&m, h) {
		http.Error(w, "refused by the test", http.StatusBadRequest) // not retryable
		return
	}
	out, _ := proto.Marshal(&collpb.ExportMetricsServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

// Export is the OTLP/gRPC endpoint.
func (r *receiver) Export(ctx context.Context, req *collpb.ExportMetricsServiceRequest) (*collpb.ExportMetricsServiceResponse, error) {
	h := map[string]string{}
	md, _ := metadata.FromIncomingContext(ctx)
	for k, v := range md {
		h[k] = strings.Join(v, ",")
	}
	if !r.record(req, h) {
		return nil, errRefused
	}
	return &collpb.ExportMetricsServiceResponse{}, nil
}

var errRefused = status.Error(codes.InvalidArgument, "refused by the test") // not retryable

// protoSeries translates an export request into Prometheus series like
// parseExposition, with the resource attributes on the side.
func protoSeries(t *testing.T, req *collpb.ExportMetricsServiceRequest) (map[string]float64, map[string]string) {
	t.Helper()
	if len(req.ResourceMetrics) != 1 {
		t.Fatalf("%d resources", len(req.ResourceMetrics))
	}
	rm := req.ResourceMetrics[0]
	res := kvMap(rm.Resource.Attributes)
	byName := map[string]*schema.Family{}
	for _, f := range schema.Families {
		byName[f.Name] = f
	}
	out := map[string]float64{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != ScopeName {
			t.Fatalf("scope %q", sm.Scope.Name)
		}
		for _, m := range sm.Metrics {
			f := byName[m.Name]
			if f == nil || m.Unit != f.Unit || m.Description != f.Help {
				t.Fatalf("metric %q (unit %q) is not its schema family", m.Name, m.Unit)
			}
			name := f.PromName()
			labels := func(kvs []*commonpb.KeyValue) map[string]string {
				l := map[string]string{}
				for k, v := range kvMap(kvs) {
					l[schema.PromLabel(k)] = v
				}
				return l
			}
			switch d := m.Data.(type) {
			case *metricpb.Metric_Histogram:
				if d.Histogram.AggregationTemporality != metricpb.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE {
					t.Fatalf("%s: %v", m.Name, d.Histogram.AggregationTemporality)
				}
				for _, p := range d.Histogram.DataPoints {
					l := labels(p.Attributes)
					if len(p.ExplicitBounds) != len(f.Buckets) {
						t.Fatalf("%s: bounds %v", m.Name, p.ExplicitBounds)
					}
					cum := uint64(0)
					for i, b := range p.ExplicitBounds {
						if b != f.Buckets[i] {
							t.Fatalf("%s: bound %d is %v, schema %v", m.Name, i, b, f.Buckets[i])
						}
						cum += p.BucketCounts[i]
						out[seriesKey(name+"_bucket", with(l, "le", strconv.FormatFloat(b, 'g', -1, 64)))] = float64(cum)
					}
					out[seriesKey(name+"_bucket", with(l, "le", "+Inf"))] = float64(p.Count)
					out[seriesKey(name+"_sum", l)] = p.GetSum()
					out[seriesKey(name+"_count", l)] = float64(p.Count)
				}
			case *metricpb.Metric_Sum:
				if d.Sum.AggregationTemporality != metricpb.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE || d.Sum.IsMonotonic != (f.Kind == schema.KindCounter) {
					t.Fatalf("%s: %v monotonic %v", m.Name, d.Sum.AggregationTemporality, d.Sum.IsMonotonic)
				}
				for _, p := range d.Sum.DataPoints {
					out[seriesKey(name, labels(p.Attributes))] = numberValue(p)
				}
			case *metricpb.Metric_Gauge:
				for _, p := range d.Gauge.DataPoints {
					out[seriesKey(name, labels(p.Attributes))] = numberValue(p)
				}
			default:
				t.Fatalf("%s: %T", m.Name, m.Data)
			}
		}
	}
	return out, res
}

func numberValue(p *metricpb.NumberDataPoint) float64 {
	if v, ok := p.Value.(*metricpb.NumberDataPoint_AsInt); ok {
		return float64(v.AsInt)
	}
	return p.GetAsDouble()
}

func kvMap(kvs []*commonpb.KeyValue) map[string]string {
	out := map[string]string{}
	for _, kv := range kvs {
		out[kv.Key] = kv.Value.GetStringValue()
	}
	return out
}

// otlpSidecar builds a sidecar exporting to endpoint and feeds it the golden
// stream "all".
func otlpSidecar(t *testing.T, file OTLPConfig, env map[string]string) *Sidecar {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Socket = "/tmp/picometer-otlp-test.sock"
	cfg.OTLP = file
	s, err := New(t.Context(), cfg, Options{Now: newFakeClock(testNow).now, Logger: discardLogger(),
		Getenv: func(k string) string { return env[k] }})
	if err != nil {
		t.Fatal(err)
	}
	if s.push == nil {
		t.Fatal("OTLP is off")
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.push.Shutdown(ctx)
	})
	feed(t, s.Agg, goldenStreamNamed(t, "all"))
	return s
}

func checkExport(t *testing.T, s *Sidecar, got map[string]float64) {
	t.Helper()
	if d := diffSeries(got, parseExposition(t, exposition(s.Agg))); d != "" {
		t.Fatalf("exported points differ from the exposition:\n%s", d)
	}
}

// TestOTLPHTTP exports over http/protobuf to an in-test receiver: schema
// names, bounds, cumulative points equal to /metrics, the resource and the
// configured headers.
func TestOTLPHTTP(t *testing.T) {
	t.Setenv("OTEL_SERVICE_NAME", "")
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment.name=test,service.namespace=picometer")
	rcv := &receiver{}
	srv := httptest.NewServer(rcv)
	t.Cleanup(srv.Close)
	s := otlpSidecar(t, OTLPConfig{Endpoint: srv.URL + "/v1/metrics", Headers: map[string]string{"x-picometer-test": "yes"}}, nil)
	if err := s.FlushOTLP(t.Context()); err != nil {
		t.Fatal(err)
	}
	req, headers := rcv.last(t)
	got, res := protoSeries(t, req)
	checkExport(t, s, got)
	if headers["x-picometer-test"] != "yes" {
		t.Errorf("headers %v", headers)
	}
	if res["service.name"] != "picometer-sidecar" || res["service.instance.id"] == "" || res["host.name"] == "" ||
		res["deployment.environment.name"] != "test" || res["service.namespace"] != "picometer" {
		t.Errorf("resource %v", res)
	}
}

// TestOTLPGRPC exports over gRPC, with the protocol and service name from
// the environment.
func TestOTLPGRPC(t *testing.T) {
	t.Setenv("OTEL_SERVICE_NAME", "sidecar-under-test")
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "")
	rcv := &receiver{}
	gs := grpc.NewServer()
	collpb.RegisterMetricsServiceServer(gs, rcv)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go gs.Serve(ln)
	t.Cleanup(gs.Stop) // after the sidecar's last export (cleanups run last first)
	s := otlpSidecar(t, OTLPConfig{Endpoint: "http://" + ln.Addr().String()},
		map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})
	if s.OTLPSettings().Protocol != "grpc" {
		t.Fatalf("protocol %q", s.OTLPSettings().Protocol)
	}
	if err := s.FlushOTLP(t.Context()); err != nil {
		t.Fatal(err)
	}
	req, _ := rcv.last(t)
	got, res := protoSeries(t, req)
	checkExport(t, s, got)
	if res["service.name"] != "sidecar-under-test" {
		t.Errorf("resource %v", res)
	}
}

// TestOTLPEnvEndpoint: with no endpoint in the file, OTEL_EXPORTER_OTLP_ENDPOINT
// (read by the exporter itself) decides where metrics go, with /v1/metrics
// appended, and OTEL_EXPORTER_OTLP_HEADERS is sent.
func TestOTLPEnvEndpoint(t *testing.T) {
	rcv := &receiver{}
	srv := httptest.NewServer(rcv)
	t.Cleanup(srv.Close)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-from-env=1")
	s := otlpSidecar(t, OTLPConfig{}, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": srv.URL})
	if err := s.FlushOTLP(t.Context()); err != nil {
		t.Fatal(err)
	}
	req, headers := rcv.last(t)
	if headers["x-from-env"] != "1" {
		t.Errorf("headers %v", headers)
	}
	got, _ := protoSeries(t, req)
	checkExport(t, s, got)
}

// TestOTLPExportFailure: a refused export is counted and is not fatal; the
// next export carries the cumulative values, the failure count included.
func TestOTLPExportFailure(t *testing.T) {
	rcv := &receiver{}
	rcv.setFail(true)
	srv := httptest.NewServer(rcv)
	t.Cleanup(srv.Close)
	s := otlpSidecar(t, OTLPConfig{Endpoint: srv.URL + "/v1/metrics", Timeout: 5 * time.Second}, nil)
	for range 2 {
		if err := s.FlushOTLP(t.Context()); err == nil {
			t.Fatal("a refused export reported success")
		}
	}
	failures := seriesKey("picometer_sidecar_otlp_export_failures_total", nil)
	if got := parseExposition(t, exposition(s.Agg))[failures]; got != 2 {
		t.Fatalf("export failures on /metrics = %v, want 2", got)
	}
	rcv.setFail(false)
	if err := s.FlushOTLP(t.Context()); err != nil {
		t.Fatal(err)
	}
	req, _ := rcv.last(t)
	got, _ := protoSeries(t, req)
	if got[failures] != 2 {
		t.Fatalf("export failures over OTLP = %v, want 2", got[failures])
	}
	checkExport(t, s, got)
}

// TestOTLPUnreachable: an endpoint nobody listens on only produces counted
// failures; ingestion goes on.
func TestOTLPUnreachable(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	s := otlpSidecar(t, OTLPConfig{Endpoint: "http://" + addr + "/v1/metrics", Timeout: time.Second}, nil)
	if err := s.FlushOTLP(t.Context()); err == nil {
		t.Fatal("export to a closed port succeeded")
	}
	if got := s.Agg.self.exportFailures.c.Get(); got != 1 {
		t.Fatalf("failures %d", got)
	}
	if st := feed(t, s.Agg, goldenStreamNamed(t, "stream_gaps")); st.Applied == 0 {
		t.Fatalf("ingestion stopped: %+v", st)
	}
}
