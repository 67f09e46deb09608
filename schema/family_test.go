package schema

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/VictoriaMetrics/metrics"
)

var (
	promNameRE = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
	otelNameRE = regexp.MustCompile(`^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$`)
	otelKeyRE  = regexp.MustCompile(`^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$`)
)

// unitSuffix is the base-unit suffix each allowed unit must produce.
var unitSuffix = map[string]string{"s": "_seconds", "1": "_ratio", "": "", "By": "_bytes"}

func TestFamiliesNamingRules(t *testing.T) {
	for _, f := range Families {
		t.Run(f.ID, func(t *testing.T) {
			if !otelNameRE.MatchString(f.Name) {
				t.Errorf("OTel name %q is not lowercase dot-separated", f.Name)
			}
			if strings.Contains(f.Name, ":") {
				t.Errorf("OTel name %q has a colon", f.Name)
			}
			if f.Help == "" || !strings.HasSuffix(f.Help, ".") {
				t.Errorf("help %q must be a sentence", f.Help)
			}
			name := f.PromName()
			for _, s := range f.Exposed() {
				if !promNameRE.MatchString(s) {
					t.Errorf("series %q does not match %s", s, promNameRE)
				}
				var labels []string
				for _, a := range f.AllAttrs() {
					labels = append(labels, a.PromLabel()+`="x"`)
				}
				sel := s
				if len(labels) > 0 {
					sel += "{" + strings.Join(labels, ",") + "}"
				}
				if err := metrics.ValidateMetric(sel); err != nil {
					t.Errorf("VictoriaMetrics/metrics rejects %q: %v", sel, err)
				}
			}
			// _total only on counters, and always on them.
			if got := strings.HasSuffix(name, "_total"); got != (f.Kind == KindCounter) {
				t.Errorf("%q: _total suffix %v for kind %v", name, got, f.Kind)
			}
			// Base-unit suffix matches the unit.
			base := strings.TrimSuffix(name, "_total")
			switch {
			case strings.HasPrefix(f.Unit, "{"):
				for _, w := range []string{"_seconds", "_ratio", "_bytes"} {
					if strings.HasSuffix(base, w) {
						t.Errorf("%q has unit suffix %s but unit %s", name, w, f.Unit)
					}
				}
			default:
				want, ok := unitSuffix[f.Unit]
				if !ok {
					t.Fatalf("unit %q not allowed; use s, 1, By or a {annotation}", f.Unit)
				}
				if f.Unit == "1" && f.Kind != KindGauge && f.Kind != KindUpDownCounter {
					t.Errorf("unit 1 is only for gauges (it becomes _ratio)")
				}
				if !strings.HasSuffix(base, want) {
					t.Errorf("%q lacks suffix %q for unit %q", name, want, f.Unit)
				}
			}
			if f.Kind == KindInfo && !strings.HasSuffix(name, "_info") {
				t.Errorf("info family %q must end in _info", name)
			}
			// Attributes: valid keys, distinct labels, closed sets are non-empty and distinct.
			seen := map[string]bool{}
			for _, a := range f.AllAttrs() {
				if !otelKeyRE.MatchString(a.Key) {
					t.Errorf("attribute key %q is not lowercase dot-separated", a.Key)
				}
				l := a.PromLabel()
				if seen[l] || l == "le" || strings.HasPrefix(l, "__") {
					t.Errorf("label %q duplicated or reserved", l)
				}
				seen[l] = true
				if a.Doc == "" {
					t.Errorf("attribute %q has no doc", a.Key)
				}
				if a.Values != nil {
					vs := slices.Clone(a.Values)
					slices.Sort(vs)
					if len(slices.Compact(vs)) != len(a.Values) || len(a.Values) == 0 {
						t.Errorf("attribute %q: values must be distinct and non-empty", a.Key)
					}
				}
			}
			// Buckets only on histograms, strictly increasing and accepted by the library.
			if (f.Kind == KindHistogram) != (f.Buckets != nil) {
				t.Errorf("buckets %v on kind %v", f.Buckets, f.Kind)
			}
			if f.Buckets != nil {
				if err := metrics.ValidateBuckets(f.Buckets); err != nil {
					t.Errorf("buckets: %v", err)
				}
				for i := 1; i < len(f.Buckets); i++ {
					if !(f.Buckets[i] > f.Buckets[i-1]) {
						t.Errorf("buckets not strictly increasing at %d: %v", i, f.Buckets)
					}
				}
				if f.Buckets[0] <= 0 {
					t.Errorf("first bucket %v must be positive", f.Buckets[0])
				}
			}
			if f.Source == "" {
				t.Errorf("no source")
			}
		})
	}
}

func TestBucketsContainOTelAdvice(t *testing.T) {
	f := func(id string, advice []float64, n int) {
		t.Helper()
		b := Lookup(id).Buckets
		for _, v := range advice {
			if !slices.Contains(b, v) {
				t.Errorf("%s: buckets lack the OTel-advised bound %v", id, v)
			}
		}
		if len(b) != n {
			t.Errorf("%s: %d bounds, want %d", id, len(b), n)
		}
	}
	f(IDTTFT, OTelTTFTAdvice, 22)
	f(IDTimePerOutputToken, OTelTPOTAdvice, 19)
	f(IDInterTokenLatency, OTelTPOTAdvice, 19)
	f(IDRequestDuration, OTelRequestDurationAdvice, 22)
	for _, id := range []string{IDRequestDuration, IDQueueDuration, IDPrefillDuration, IDDecodeDuration} {
		if b := Lookup(id).Buckets; b[0] != 0.001 {
			t.Errorf("%s: request-phase buckets must start at 0.001 s, start at %v", id, b[0])
		}
	}
}

// TestBucketsAreTheSpecs pins the bounds to the published lists, written
// out here rather than taken from schema/ (where a typo in an advice list
// would also be "contained" in the buckets built next to it): the
// OpenTelemetry GenAI semantic conventions' ExplicitBucketBoundaries advice,
// and vLLM's TTFT (22) and inter-token latency (19) bounds (DESIGN.md
// decision 2).
func TestBucketsAreTheSpecs(t *testing.T) {
	f := func(name string, got, want []float64) {
		t.Helper()
		if !slices.Equal(got, want) {
			t.Errorf("%s:\n got %v\nwant %v", name, got, want)
		}
	}
	otelTTFT := []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0}
	otelTPOT := []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5}
	otelDuration := []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}
	vllmTTFT := []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
		20.0, 40.0, 80.0, 160.0, 640.0, 2560.0}
	vllmITL := []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0}
	f("OTelTTFTAdvice", OTelTTFTAdvice, otelTTFT)
	f("OTelTPOTAdvice", OTelTPOTAdvice, otelTPOT)
	f("OTelRequestDurationAdvice", OTelRequestDurationAdvice, otelDuration)
	f(IDTTFT, Lookup(IDTTFT).Buckets, vllmTTFT)
	f(IDTimePerOutputToken, Lookup(IDTimePerOutputToken).Buckets, vllmITL)
	f(IDInterTokenLatency, Lookup(IDInterTokenLatency).Buckets, vllmITL)
}

func TestBuckets125(t *testing.T) {
	got := Buckets125(600)
	want := []float64{1, 2, 5, 10, 20, 50, 100, 200, 500}
	if !slices.Equal(got, want) {
		t.Fatalf("Buckets125(600) = %v, want %v", got, want)
	}
	if b := LengthBuckets; b[len(b)-1] != 100000 {
		t.Fatalf("LengthBuckets end at %v", b[len(b)-1])
	}
}

func TestLookup(t *testing.T) {
	if f := Lookup(IDTTFT); f.Name != "gen_ai.server.time_to_first_token" {
		t.Fatalf("Lookup(ttft) = %q", f.Name)
	}
	if f := ByPromName("gen_ai_server_time_to_first_token_seconds_bucket"); f == nil || f.ID != IDTTFT {
		t.Fatalf("ByPromName(ttft bucket) = %v", f)
	}
	if ByPromName("gen_ai_server_time_to_first_token_seconds") != nil {
		t.Fatalf("a histogram's bare name is not an exposed series")
	}
	if Find("nope") != nil {
		t.Fatal("Find(nope) != nil")
	}
	defer func() {
		if r := recover(); r == nil || !strings.HasPrefix(r.(string), "BUG: ") {
			t.Fatalf("Lookup of an unknown id: recover() = %v", r)
		}
	}()
	Lookup("nope")
}

// The families the foundation issue requires, by Prometheus name: a rename
// is a breaking change for dashboards and alerts and must be deliberate.
func TestRequiredFamilies(t *testing.T) {
	want := map[string]string{
		IDTTFT:               "gen_ai_server_time_to_first_token_seconds",
		IDTimePerOutputToken: "gen_ai_server_time_per_output_token_seconds",
		IDRequestDuration:    "gen_ai_server_request_duration_seconds",
		IDInterTokenLatency:  "picometer_request_inter_token_latency_seconds",
		IDStepDuration:       "picometer_engine_step_duration_seconds",
		IDKVCacheUsage:       "picometer_engine_kv_cache_usage_ratio",
		IDRequestsFinished:   "picometer_requests_finished_total",
		IDSidecarEventsLost:  "picometer_sidecar_events_lost_total",
	}
	for id, name := range want {
		if got := Lookup(id).PromName(); got != name {
			t.Errorf("%s: %q, want %q", id, got, name)
		}
	}
	if len(Families) < 30 {
		t.Errorf("only %d families", len(Families))
	}
}
