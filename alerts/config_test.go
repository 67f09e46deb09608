package alerts

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const sloTestdata = "../testdata/slo"

// Every bad_*.toml under testdata/slo fails with exactly this error (after
// the path prefix), and every such file is listed here.
var badSLOFiles = map[string]string{
	"bad_unknown_key.toml":            `unknown key "objective.targt"`,
	"bad_objective_above_100.toml":    `objective "availability": objective: 100.5 is not a percentage between 0 and 100 (exclusive)`,
	"bad_objective_zero.toml":         `objective "availability": objective: 0 is not a percentage between 0 and 100 (exclusive)`,
	"bad_target_not_bound.toml":       `objective "ttft": target: 1.5s is not a bucket bound of ttft; the nearest bounds are 1s and 2.5s`,
	"bad_target_above_buckets.toml":   `objective "itl": target: 120s is not a bucket bound of inter_token_latency; the largest bound is 80s`,
	"bad_histogram.toml":              `objective "tokens": histogram: "prompt_tokens" is not a latency histogram of schema/ (one of ttft, time_per_output_token, request_duration, inter_token_latency, queue_duration, prefill_duration, decode_duration, constraint_compile, constraint_mask, step_duration)`,
	"bad_window.toml":                 `objective "availability": window: "30 days" is not a duration (e.g. "5m", "1h", "30d")`,
	"bad_selector_label.toml":         `objective "availability": selector: "model" is not a label of the availability series (labels: gen_ai_request_model, engine, gen_ai_operation_name)`,
	"bad_sli.toml":                    `objective "availability": sli: "uptime" is not "availability" or "latency"`,
	"bad_duplicate_name.toml":         `objective[1]: name: "ttft" is used twice`,
	"bad_name.toml":                   `objective[0]: name: "TTFT p99" is not a lower-case identifier ([a-z][a-z0-9_]*)`,
	"bad_target_on_availability.toml": `objective "availability": target: only a latency objective has one`,
	"bad_objective_missing.toml":      `objective "availability": objective: missing (a percentage, e.g. 99.5)`,
	"bad_threshold_for.toml":          `thresholds.kv_cache_usage.warning_for: "soon" is not a duration (e.g. "5m", "1h", "30d")`,
	"bad_threshold_order.toml":        `thresholds.waiting_per_slot: critical threshold 0.5 is not above warning 1`,
	"bad_threshold_key.toml":          `unknown key "thresholds.no_daemon.warning"`,
	"bad_objective_type.toml":         `line 4 (last key "objective.objective"): incompatible types: TOML value has type string; destination has type float`,
	"bad_prefix_cache_drop.toml":      `thresholds.prefix_cache_collapse.warning: 50 is not a fraction of the baseline between 0 and 1 (exclusive)`,
	"bad_prefix_cache_baseline.toml":  `thresholds.prefix_cache_collapse.min_baseline: 1.5 is not a ratio between 0 and 1`,
}

func TestBadSLOFiles(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(sloTestdata, "bad_*.toml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no bad_*.toml under %s (%v)", sloTestdata, err)
	}
	for _, f := range files {
		want, ok := badSLOFiles[filepath.Base(f)]
		if !ok {
			t.Errorf("%s: no expected error listed", f)
			continue
		}
		_, err := LoadConfig(f)
		if err == nil {
			t.Errorf("%s: LoadConfig succeeded", f)
			continue
		}
		if got := strings.TrimPrefix(err.Error(), f+": "); got != want {
			t.Errorf("%s:\n got  %s\n want %s", filepath.Base(f), got, want)
		}
	}
	if len(files) != len(badSLOFiles) {
		t.Errorf("%d bad files, %d expected errors", len(files), len(badSLOFiles))
	}
}

// The custom file replaces the objectives, overrides one threshold and
// keeps every other default.
func TestCustomSLOFile(t *testing.T) {
	c, err := LoadConfig(filepath.Join(sloTestdata, "custom.toml"))
	if err != nil {
		t.Fatal(err)
	}
	d := Default()
	if len(c.Objectives) != 2 || c.Objectives[0].Name != "chat_availability" || c.Objectives[1].Name != "chat_tpot" {
		t.Fatalf("objectives %+v", c.Objectives)
	}
	a, l := c.Objectives[0], c.Objectives[1]
	if a.Objective != 99.8 || a.Window != 28*24*time.Hour || a.Budget() != 0.002 ||
		len(a.Selector) != 1 || a.Selector[0] != (KV{LabelModel, "picometer-tiny"}) {
		t.Errorf("availability objective %+v", a)
	}
	if l.Target != 0.1 || l.Histogram != "time_per_output_token" || l.Window != 7*24*time.Hour || l.Budget() != 0.1 {
		t.Errorf("latency objective %+v", l)
	}
	if c.KVCacheUsage.Warning.Threshold != 0.8 || c.KVCacheUsage.Warning.For != d.KVCacheUsage.Warning.For ||
		c.KVCacheUsage.Critical != d.KVCacheUsage.Critical || c.WaitingPerSlot != d.WaitingPerSlot || c.Job != d.Job {
		t.Errorf("thresholds not merged over the defaults: %+v", c.Thresholds)
	}
}

// The default file round-trips: decoding it over its own decoded values
// changes nothing, and an empty file is the defaults.
func TestDefaultSLOFile(t *testing.T) {
	d := Default()
	if len(d.Objectives) != 4 {
		t.Fatalf("%d default objectives", len(d.Objectives))
	}
	want := map[string]float64{"availability": 99.5, "ttft": 99, "time_per_output_token": 95, "inter_token_latency": 99}
	targets := map[string]float64{"ttft": 1, "time_per_output_token": 0.05, "inter_token_latency": 0.1}
	for _, o := range d.Objectives {
		if o.Objective != want[o.Name] || o.Target != targets[o.Name] || o.Window != 30*24*time.Hour {
			t.Errorf("default objective %+v", o)
		}
	}
	e, err := ParseConfig(nil, d)
	if err != nil {
		t.Fatal(err)
	}
	if string(Render(Groups(e))) != string(Render(Groups(d))) {
		t.Error("an empty file over the defaults changes the rules")
	}
	if _, err := ParseConfig([]byte(""), Config{}); err == nil || err.Error() != "thresholds.waiting_per_slot.warning: missing" {
		t.Errorf("an empty file over nothing: %v, want the first missing key", err)
	}
	text, err := os.ReadFile(SLOFile)
	if err != nil || string(text) != string(DefaultSLOText()) {
		t.Errorf("embedded slo.toml differs from the file (%v)", err)
	}
}

func TestParsePromDuration(t *testing.T) {
	ok := map[string]time.Duration{"5m": 5 * time.Minute, "30d": 30 * 24 * time.Hour, "1h30m": 90 * time.Minute, "1w": 7 * 24 * time.Hour, "500ms": 500 * time.Millisecond}
	for s, want := range ok {
		if got, err := ParsePromDuration(s); err != nil || got != want {
			t.Errorf("ParsePromDuration(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	for _, s := range []string{"", "5", "m", "1.5h", "30m1h", "0s", "-5m", "99999999999999999999d"} {
		if _, err := ParsePromDuration(s); err == nil {
			t.Errorf("ParsePromDuration(%q) succeeded", s)
		}
	}
}

// FuzzParseConfig: no input crashes the decoder; whatever it accepts
// generates rules.
func FuzzParseConfig(f *testing.F) {
	f.Add(DefaultSLOText())
	files, _ := filepath.Glob(filepath.Join(sloTestdata, "*.toml"))
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	base := Default()
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig(data, base)
		if err != nil {
			return
		}
		_ = Render(Groups(c))
	})
}
