package sidecar

import (
	"bytes"
	"encoding/hex"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/picometer/picometer/schema"
)

// Accept headers of real scrapers.
const (
	acceptPrometheus2 = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
	acceptPrometheus3 = "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.6,application/openmetrics-text;version=0.0.1;q=0.5,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2"
	acceptVM          = "text/plain;version=0.0.4;q=1,*/*;q=0.1"
)

func TestNegotiate(t *testing.T) {
	f := func(accept, want string) {
		t.Helper()
		ct, om := negotiate(accept)
		if ct != want || om != (ct != ContentType) {
			t.Errorf("negotiate(%q) = %q, %v; want %q", accept, ct, om, want)
		}
	}
	om1 := "application/openmetrics-text; version=1.0.0; charset=utf-8"
	f(acceptPrometheus2, om1)
	f(acceptPrometheus3, om1)
	f(acceptVM, ContentType)
	f("", ContentType)
	f("*/*", ContentType)
	f("application/openmetrics-text", om1)
	f("Application/OpenMetrics-Text; version=0.0.1", "application/openmetrics-text; version=0.0.1; charset=utf-8")
	f("application/openmetrics-text;version=2.0.0", ContentType)          // a version this server does not write
	f("text/plain;q=0.9,application/openmetrics-text;q=0.5", ContentType) // the scraper's preference
	f("text/plain,application/openmetrics-text", ContentType)             // a tie: the earliest
	f("application/openmetrics-text;q=0", ContentType)
	f("application/json", ContentType)
}

// exemplarSetup feeds a traced aggregator a sampled chat request (TTFT
// 5 ms, TPOT 4/3 ms, duration 9.1 ms), an unsampled one and a failed
// sampled one.
func exemplarSetup(t *testing.T, otlp bool) *Aggregator {
	a := newTestAggregator(otlp)
	withSpans(a, tracetest.NewInMemoryExporter(), discardLogger(), false)
	s := newSim(t, "b1", "m")
	unsampled := tracedRequest("chatcmpl-2")
	unsampled.Sampled, unsampled.TraceID = false, "11111111111111111111111111111111"
	unsampled.FirstTokenUS = 3000 // another bucket than the sampled one's: no exemplar there
	failed := schema.RequestBody{ID: "cmpl-4", Operation: schema.OpTextCompletion, AdmittedUS: -1, FirstTokenUS: -1, LastTokenUS: -1,
		FinishUS: 40, FinishReason: schema.FinishError, ErrorType: schema.ErrInvalidRequest, ITLUS: []int64{},
		TraceID: "0af7651916cd43dd8448eb211c80319c", SpanID: "b7ad6b7169203331", Sampled: true, StartUnixNano: 1795000000000000000}
	data := s.hello()
	for _, r := range []schema.RequestBody{tracedRequest("chatcmpl-1"), unsampled, failed} {
		data = append(data, s.request(r)...)
	}
	feed(t, a, data)
	return a
}

// TestOpenMetrics: a scraper that asks for OpenMetrics gets the 0.0.4
// text's series line for line, with counter metadata without "_total",
// exemplars on the request histograms' buckets of sampled requests, and
// "# EOF"; one that does not gets the 0.0.4 text unchanged.
func TestOpenMetrics(t *testing.T) {
	a := exemplarSetup(t, false)
	scrape := func(accept string) (string, string) {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/metrics", nil)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		a.reg.ServeHTTP(rec, req)
		return rec.Header().Get("Content-Type"), rec.Body.String()
	}
	ct, text := scrape(acceptVM)
	if ct != ContentType || text != exposition(a) || strings.Contains(text, "# {") || strings.Contains(text, "# EOF") {
		t.Fatalf("0.0.4 scrape changed: %s\n%s", ct, text)
	}
	if _, plain := scrape(""); plain != text {
		t.Error("a scrape without Accept differs from the 0.0.4 one")
	}
	ct, om := scrape(acceptPrometheus2)
	if ct != OpenMetricsType || !strings.HasSuffix(om, "\n# EOF\n") {
		t.Fatalf("OpenMetrics scrape: %s, ends %q", ct, om[max(0, len(om)-40):])
	}

	// The exemplars: TTFT 0.005 in its bucket (which the unsampled 3 ms
	// shares), TPOT, the chat duration and the failed completion's duration
	// (with its error type); nothing for the unsampled request.
	ts := "1795000000.009" // start + 9.1 ms, to the millisecond
	ex := `# {trace_id="4bf92f3577b34da6a3ce929d0e0e4736",span_id="53995c3f42cd8ad8"} `
	want := []string{
		`gen_ai_server_time_to_first_token_seconds_bucket{gen_ai_request_model="m",engine="picometer",gen_ai_operation_name="chat",cache="miss",le="0.005"} 2 ` + ex + "0.005 " + ts,
		`gen_ai_server_time_per_output_token_seconds_bucket{gen_ai_request_model="m",engine="picometer",gen_ai_operation_name="chat",le="0.01"} 2 ` + ex + "0.0013333333333333333 " + ts,
		`gen_ai_server_request_duration_seconds_bucket{gen_ai_request_model="m",engine="picometer",gen_ai_operation_name="chat",le="0.01"} 2 ` + ex + "0.0091 " + ts,
		`gen_ai_server_request_duration_seconds_bucket{gen_ai_request_model="m",engine="picometer",gen_ai_operation_name="text_completion",error_type="invalid_request",le="0.001"} 1 # {trace_id="0af7651916cd43dd8448eb211c80319c",span_id="b7ad6b7169203331"} 4e-05 1795000000.000`,
	}
	var got []string
	for _, line := range strings.Split(om, "\n") {
		if strings.Contains(line, " # {") {
			got = append(got, line)
		}
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("exemplar lines:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if strings.Contains(om, "11111111111111111111111111111111") {
		t.Error("an unsampled request is an exemplar")
	}

	// Everything else is the 0.0.4 text: drop the exemplars and "# EOF",
	// give counters their "_total" back, and the two agree byte for byte.
	back := regexp.MustCompile(` # \{[^}]*\} \S+ \S+\n`).ReplaceAllString(strings.TrimSuffix(om, "# EOF\n"), "\n")
	for _, f := range schema.Families {
		if f.Kind == schema.KindCounter {
			base := strings.TrimSuffix(f.PromName(), "_total")
			back = strings.ReplaceAll(back, "# TYPE "+base+" counter\n", "# TYPE "+f.PromName()+" counter\n")
			back = strings.ReplaceAll(back, "# HELP "+base+" ", "# HELP "+f.PromName()+" ")
		}
		back = strings.ReplaceAll(back, strings.ReplaceAll(f.Help, `"`, `\"`), f.Help)
	}
	if back != text {
		t.Errorf("OpenMetrics minus its differences is not the 0.0.4 text")
	}
}

// TestOpenMetricsNames: every family's OpenMetrics name is distinct, and a
// counter's samples are its name plus "_total", as the format requires.
func TestOpenMetricsNames(t *testing.T) {
	seen := map[string]string{}
	for _, f := range schema.Families {
		h := omHeader(f)
		name := strings.Fields(strings.SplitN(h, "\n", 2)[1])[2]
		if prev, dup := seen[name]; dup {
			t.Errorf("%s and %s share the OpenMetrics name %s", prev, f.ID, name)
		}
		seen[name] = f.ID
		if f.Kind == schema.KindCounter && name+"_total" != f.PromName() {
			t.Errorf("counter %s: samples %s are not %s_total", f.ID, f.PromName(), name)
		}
	}
}

// TestOTLPExemplars: the OTLP histogram points carry the same exemplars.
func TestOTLPExemplars(t *testing.T) {
	a := exemplarSetup(t, true)
	rm := collect(t, a)
	found := map[string]metricdata.Exemplar[float64]{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			h, ok := m.Data.(metricdata.Histogram[float64])
			if !ok {
				continue
			}
			for _, dp := range h.DataPoints {
				for _, e := range dp.Exemplars {
					op, _ := dp.Attributes.Value("gen_ai.operation.name")
					if _, dup := found[m.Name+" "+op.AsString()]; dup {
						t.Errorf("%s: two exemplars", m.Name)
					}
					found[m.Name+" "+op.AsString()] = e
				}
			}
		}
	}
	f := func(key, trace string, v float64) {
		t.Helper()
		e, ok := found[key]
		if !ok || hex.EncodeToString(e.TraceID) != trace || e.Value != v || len(e.SpanID) != 8 {
			t.Errorf("%s: exemplar %+v (found %v), want trace %s value %v", key, e, ok, trace, v)
		}
	}
	f("gen_ai.server.time_to_first_token chat", "4bf92f3577b34da6a3ce929d0e0e4736", 0.005)
	f("gen_ai.server.time_per_output_token chat", "4bf92f3577b34da6a3ce929d0e0e4736", 0.004/3)
	f("gen_ai.server.request.duration chat", "4bf92f3577b34da6a3ce929d0e0e4736", 0.0091)
	f("gen_ai.server.request.duration text_completion", "0af7651916cd43dd8448eb211c80319c", 0.00004)
	if len(found) != 4 {
		t.Errorf("%d exemplars: %v", len(found), found)
	}
}

// TestNoExemplarsWithoutSpans: without span export no exemplar is kept
// (it would name a trace no backend has).
func TestNoExemplarsWithoutSpans(t *testing.T) {
	a := newTestAggregator(false)
	s := newSim(t, "b1", "m")
	feed(t, a, append(s.hello(), s.request(tracedRequest("chatcmpl-1"))...))
	var b bytes.Buffer
	a.reg.WriteOpenMetrics(&b)
	if strings.Contains(b.String(), "# {") {
		t.Error("exemplars without span export")
	}
}

// FuzzNegotiate: any Accept header picks one of the formats this server
// writes, without panicking.
func FuzzNegotiate(f *testing.F) {
	for _, s := range []string{acceptPrometheus2, acceptPrometheus3, acceptVM, "", "application/openmetrics-text;q=", ";;,=,"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, accept string) {
		ct, om := negotiate(accept)
		switch {
		case !om && ct == ContentType:
		case om && (ct == OpenMetricsType || ct == "application/openmetrics-text; version=0.0.1; charset=utf-8"):
		default:
			t.Fatalf("negotiate(%q) = %q, %v", accept, ct, om)
		}
	})
}

// TestExemplarByCache: a cached request's exemplar is on the TTFT series of
// its cache outcome.
func TestExemplarByCache(t *testing.T) {
	a := newTestAggregator(false)
	withSpans(a, tracetest.NewInMemoryExporter(), discardLogger(), false)
	s := newSim(t, "b1", "m")
	r := tracedRequest("chatcmpl-1")
	r.PromptTokens, r.CachedTokens = 40, 32 // 8 recomputed: a hit
	feed(t, a, append(s.hello(), s.request(r)...))
	var b bytes.Buffer
	a.reg.WriteOpenMetrics(&b)
	var lines []string
	for _, l := range strings.Split(b.String(), "\n") {
		if strings.HasPrefix(l, "gen_ai_server_time_to_first_token_seconds_bucket") && strings.Contains(l, "# {") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 || !strings.Contains(lines[0], `cache="hit",le="0.005"`) {
		t.Errorf("TTFT exemplar lines %q, want one on the cache=\"hit\" series", lines)
	}
}
