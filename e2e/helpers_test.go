package e2e

import (
	"math"
	"strings"
	"testing"
)

func TestExpandGrafana(t *testing.T) {
	vars := map[string]string{"model": `m\\.1`, "instance": ".*", "__rate_interval": "1m", "datasource": ""}
	f := func(in, want string) {
		t.Helper()
		got, err := expandGrafana(in, vars)
		if err != nil || got != want {
			t.Errorf("expandGrafana(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	f(`rate(x{a=~"$model", i=~"${instance}"}[$__rate_interval])`, `rate(x{a=~"m\\.1", i=~".*"}[1m])`)
	f(`x{a=~"${model:regex}"}`, `x{a=~"m\\.1"}`)
	f(`no variables`, `no variables`)
	if _, err := expandGrafana(`x[$__range] + $other`, vars); err == nil || err.Error() != "query uses variables with no value here: __range, other" {
		t.Errorf("unknown variables: err = %v", err)
	}
}

func TestRegexValue(t *testing.T) {
	f := func(in, want string) {
		t.Helper()
		if got := regexValue(in); got != want {
			t.Errorf("regexValue(%q) = %q, want %q", in, got, want)
		}
	}
	f("picometer-tiny", "picometer-tiny")
	f("127.0.0.1:9464", `127\\.0\\.0\\.1:9464`)
	f("a+b", `a\\+b`)
}

func TestParseExposition(t *testing.T) {
	m, err := parseExposition("# HELP x y\n# TYPE x counter\nx_total{a=\"1\",b=\"2\"} 3\nx_total{a=\"2\",b=\"2\"} 4\ny 1.5\n")
	if err != nil {
		t.Fatal(err)
	}
	f := func(name string, match map[string]string, want float64) {
		t.Helper()
		if got := m.sum(name, match); got != want {
			t.Errorf("sum(%s, %v) = %v, want %v", name, match, got, want)
		}
	}
	f("x_total", nil, 7)
	f("x_total", map[string]string{"a": "2"}, 4)
	f("x_total", map[string]string{"a": "3"}, 0)
	f("y", nil, 1.5)
	for _, bad := range []string{"x{a=\"1\" 3", "x", "x abc"} {
		if _, err := parseExposition(bad); err == nil {
			t.Errorf("parseExposition(%q) accepted a bad line", bad)
		}
	}
}

func TestWaves(t *testing.T) {
	reqs := traffic("m")
	warmup, rest := waves(reqs, 3)
	kinds := map[string]bool{}
	for _, r := range warmup {
		if kinds[r.kind] {
			t.Errorf("warm-up has two requests of kind %q", r.kind)
		}
		kinds[r.kind] = true
	}
	n := len(warmup)
	for i, w := range rest {
		n += len(w)
		if len(w) < 8 {
			t.Errorf("wave %d has only %d requests", i, len(w))
		}
	}
	if n != len(reqs) {
		t.Errorf("warm-up and waves hold %d requests, traffic has %d", n, len(reqs))
	}
	for _, r := range reqs {
		if !kinds[r.kind] {
			t.Errorf("kind %q has no warm-up request", r.kind)
		}
	}
}

func TestSameSeries(t *testing.T) {
	nan := math.NaN()
	s := func(v float64, kv ...string) promSample {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return promSample{Metric: m, Value: v}
	}
	f := func(name string, prom, vm []promSample, wantErr string) {
		t.Helper()
		err := sameSeries(prom, vm)
		if (err == nil) != (wantErr == "") || err != nil && !strings.Contains(err.Error(), wantErr) {
			t.Errorf("%s: sameSeries = %v, want error containing %q", name, err, wantErr)
		}
	}
	f("target and resource labels are ignored",
		[]promSample{s(1, "gen_ai_request_model", "m", "instance", "a:1", "job", "j")},
		[]promSample{s(2, "gen_ai_request_model", "m", "service_name", "x", "host_name", "h")}, "")
	f("NaN in Prometheus may be missing from VictoriaMetrics",
		[]promSample{s(1, "le", "1"), s(nan, "le", "2")}, []promSample{s(1, "le", "1")}, "")
	f("a series only scraped",
		[]promSample{s(1, "le", "1"), s(1, "le", "2")}, []promSample{s(1, "le", "1")}, "only scraped: {le=2}")
	f("a series only via OTLP",
		[]promSample{s(1, "le", "1")}, []promSample{s(1, "le", "1"), s(1, "le", "1e+05")}, "only via OTLP: {le=1e+05}")
	f("nothing with a value", []promSample{s(nan)}, nil, "no series with a value")
}
