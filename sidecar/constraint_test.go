package sidecar

import (
	"bytes"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/picometer/picometer/schema"
)

// TestConstraintSeries: constrained requests show up in
// picometer_constraint_requests_total by kind and outcome, tool calls by
// format, compile and mask times in their histograms; a new sidecar that
// gets only the daemon's totals event exports the same numbers; OTLP
// agrees with /metrics.
func TestConstraintSeries(t *testing.T) {
	const model = "constraint-model"
	rng := rand.New(rand.NewPCG(5, 6))
	daemon := schema.NewTotals()
	var reqs []schema.RequestBody
	for i := range 30 {
		r := randomRequest(rng, i)
		switch i % 3 {
		case 0:
			r.Constraint = schema.ConstraintJSONSchema
			r.FinishReason, r.ErrorType = schema.FinishStop, ""
			r.Grammar, r.CompileUS, r.MaskUS, r.MaskedTokens = schema.GrammarComplete, 1500, 40*int64(r.CompletionTokens), r.CompletionTokens
		case 1:
			r.Constraint = schema.ConstraintTools
			r.FinishReason, r.ErrorType = schema.FinishStop, ""
			r.Grammar, r.ToolCalls, r.ToolFormat = schema.GrammarComplete, 2, "hermes"
		}
		daemon.Add(&r, testBlockSize)
		reqs = append(reqs, r)
	}
	ct := daemon.Constraints
	no := len(schema.ConstraintOutcomes)
	if ct.Requests[0*no+0] != 10 || ct.Requests[5*no+0] != 10 || ct.ToolCalls[1] != 20 {
		t.Fatalf("daemon totals %+v", ct)
	}

	check := func(a *Aggregator, what string) map[string]float64 {
		t.Helper()
		prom := parseExposition(t, exposition(a))
		base := map[string]string{"gen_ai_request_model": model, "engine": "picometer"}
		with := func(kv ...string) map[string]string {
			m := map[string]string{}
			for k, v := range base {
				m[k] = v
			}
			for i := 0; i < len(kv); i += 2 {
				m[kv[i]] = kv[i+1]
			}
			return m
		}
		for key, want := range map[string]float64{
			seriesKey("picometer_constraint_requests_total", with("constraint", "json_schema", "outcome", "valid")): 10,
			seriesKey("picometer_constraint_requests_total", with("constraint", "tools", "outcome", "valid")):       10,
			seriesKey("picometer_constraint_requests_total", with("constraint", "regex", "outcome", "length")):      0,
			seriesKey("picometer_tool_calls_total", with("tool_format", "hermes")):                                  20,
			seriesKey("picometer_constraint_compile_duration_seconds_count", with("constraint", "json_schema")):     10,
			seriesKey("picometer_constraint_mask_duration_seconds_count", with()):                                   float64(ct.Mask.Count()),
		} {
			if got, ok := prom[key]; !ok || got != want {
				t.Errorf("%s: %s = %v (present %v), want %v", what, key, got, ok, want)
			}
		}
		if d := diffSeries(otelSeries(t, collect(t, a)), prom); d != "" {
			t.Errorf("%s: OTel differs from the exposition:\n%s", what, d)
		}
		return prom
	}

	// events
	a := newTestAggregator(true)
	s := newSim(t, "c0ffee00c0ffee00", model)
	var data bytes.Buffer
	data.Write(s.hello())
	for _, r := range reqs {
		data.Write(s.request(r))
	}
	if st := feed(t, a, data.Bytes()); st.Err != nil || st.Rejected != 0 {
		t.Fatalf("stats %+v", st)
	}
	check(a, "from request events")
	h := newHistory(a)
	mux := http.NewServeMux()
	mux.HandleFunc("/api/v1/status", h.ServeStatus)
	h.sample(a.now())
	doc := getStatus(t, mux)
	if len(doc.Targets) != 1 || doc.Targets[0].Totals.Constrained != 20 || doc.Targets[0].Totals.ConstrainedValid != 20 || doc.Targets[0].Totals.ToolCalls != 20 {
		t.Errorf("status: %+v", doc.Targets)
	}
	// Every JSON-schema request masked 40 µs per token and compiled in 1.5 ms.
	if cm := doc.Targets[0].ConstraintMeans; math.Abs(cm.MaskPerToken-40e-6) > 1e-9 || math.Abs(cm.Compile-1.5e-3) > 1e-9 {
		t.Errorf("status constraint_mean_seconds %+v, want mask 40µs per token, compile 1.5ms", cm)
	}
	mux.HandleFunc("/", h.ServePage)
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	for _, want := range []string{`<dd data-total="constrained_requests">20</dd>`, `<dd data-total="tool_calls">20</dd>`,
		`<dd data-mean="constraint_mask_mean">40 µs</dd>`, `<dd data-mean="constraint_compile_mean">1.5 ms</dd>`} {
		if !strings.Contains(rec.Body.String(), want) {
			t.Errorf("status page: no %s", want)
		}
	}

	// totals alone (a sidecar that restarted)
	b := newTestAggregator(true)
	s2 := newSim(t, "c0ffee00c0ffee01", model)
	data.Reset()
	data.Write(s2.hello())
	data.Write(s2.totals(daemon))
	if st := feed(t, b, data.Bytes()); st.Err != nil || st.Rejected != 0 {
		t.Fatalf("stats %+v", st)
	}
	check(b, "from a totals event")
}
