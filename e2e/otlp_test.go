package e2e

import (
	"fmt"
	"math"
	"net/http"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/picometer/picometer/schema"

	"github.com/picometer/picometer/internal/testenv"
)

// startVictoriaMetrics starts the VictoriaMetrics binary of
// PICOMETER_VM_BIN as an OTLP receiver with the standard
// OTLP→Prometheus naming, and returns its Prometheus query API and the
// OTLP metrics endpoint for the sidecar.
func startVictoriaMetrics(t *testing.T, dir string) (*proc, promAPI, string) {
	t.Helper()
	p, api := startVictoriaMetricsFlags(t, dir)
	return p, api, api.base + "/opentelemetry/v1/metrics"
}

// startVictoriaMetricsFlags is startVictoriaMetrics with extra flags.
func startVictoriaMetricsFlags(t *testing.T, dir string, flags ...string) (*proc, promAPI) {
	t.Helper()
	bin := testenv.VictoriaMetrics(t)
	addr := testenv.FreeAddr(t)
	p := start(t, dir, "victoria-metrics", bin, append([]string{"-httpListenAddr=" + addr, "-storageDataPath=" + filepath.Join(dir, "vm"),
		"-opentelemetry.usePrometheusNaming", "-search.latencyOffset=0", "-search.disableCache", "-loggerLevel=WARN"}, flags...)...)
	api := promAPI{base: "http://" + addr, c: &http.Client{Timeout: 10 * time.Second}}
	waitFor(t, 30*time.Second, "victoria-metrics ready", p, func() error { return getOK(api.c, api.base+"/health") })
	return p, api
}

// flush makes VictoriaMetrics' recently received samples searchable.
func (p promAPI) flush() error { return getOK(p.c, p.base+"/internal/force_flush") }

// schemaLabels are the labels that identify a series in both stores: every
// attribute label of schema/ plus le. Scrape-target labels (job, instance)
// and OTLP resource labels (service_name, host_name, …) differ by design
// and are not compared.
var schemaLabels = func() map[string]bool {
	m := map[string]bool{"le": true}
	for _, f := range schema.Families {
		for _, a := range f.AllAttrs() {
			m[a.PromLabel()] = true
		}
	}
	return m
}()

// seriesKeys returns the schema-label identity of each sample, split into
// those with a finite value and those without (NaN: VictoriaMetrics drops
// such series from results, Prometheus keeps them).
func seriesKeys(samples []promSample) (finiteKeys, nanKeys map[string]bool) {
	finiteKeys, nanKeys = map[string]bool{}, map[string]bool{}
	for _, s := range samples {
		var parts []string
		for k, v := range s.Metric {
			if schemaLabels[k] {
				parts = append(parts, k+"="+v)
			}
		}
		sort.Strings(parts)
		key := "{" + strings.Join(parts, ",") + "}"
		if math.IsNaN(s.Value) || math.IsInf(s.Value, 0) {
			nanKeys[key] = true
		} else {
			finiteKeys[key] = true
		}
	}
	return finiteKeys, nanKeys
}

// sameSeries compares the answers of Prometheus (scraped /metrics) and
// VictoriaMetrics (OTLP) to one query: every series with a value in one
// must be in the other (a series that is NaN in Prometheus may be missing
// from VictoriaMetrics, which drops NaN results).
func sameSeries(fromProm, fromVM []promSample) error {
	pf, pn := seriesKeys(fromProm)
	vf, vn := seriesKeys(fromVM)
	var diffs []string
	for k := range pf {
		if !vf[k] && !vn[k] {
			diffs = append(diffs, "only scraped: "+k)
		}
	}
	for k := range vf {
		if !pf[k] && !pn[k] {
			diffs = append(diffs, "only via OTLP: "+k)
		}
	}
	if len(pf)+len(vf) == 0 {
		diffs = append(diffs, fmt.Sprintf("no series with a value (%d NaN scraped, %d NaN via OTLP)", len(pn), len(vn)))
	}
	sort.Strings(diffs)
	if len(diffs) > 0 {
		return fmt.Errorf("%s", strings.Join(diffs, "; "))
	}
	return nil
}

// compareOTLP checks DESIGN decision 1 on the dashboards: every dashboard
// query over exported series, and every recording-rule expression, returns
// the same series from Prometheus (which scraped the sidecar) and from
// VictoriaMetrics (which received the sidecar's OTLP push). Queries over
// recorded series or Prometheus's own up are Prometheus-only and skipped.
func compareOTLP(t *testing.T, prom, vm promAPI, vmProc *proc, model string, counted float64, panels []panelQuery, rules []ruleQuery) {
	t.Helper()
	finished := schema.Lookup(schema.IDRequestsFinished).PromName()
	waitFor(t, 30*time.Second, "every request event arrived over OTLP", vmProc, func() error {
		if err := vm.flush(); err != nil {
			return err
		}
		s, err := vm.query(fmt.Sprintf("sum(%s)", finished))
		if err == nil && (len(s) == 0 || s[0].Value < counted) {
			err = fmt.Errorf("VictoriaMetrics has %v, the sidecar counted %v", s, counted)
		}
		return err
	})
	n, series := 0, 0
	// A series created in the last moments of the traffic may have one
	// sample in one store and two in the other (rate and increase need two
	// in Prometheus), so each query is compared until both agree, for at
	// most 10s; a real naming difference persists and fails.
	compare := func(where, expr string, mustHaveData bool) {
		var ps, vs []promSample
		var diff error
		for deadline := time.Now().Add(10 * time.Second); ; {
			var err error
			if ps, err = prom.query(expr); err != nil {
				t.Errorf("%s: Prometheus: %v", where, err)
				return
			}
			if err = vm.flush(); err == nil {
				vs, err = vm.query(expr)
			}
			if err != nil {
				t.Errorf("%s: VictoriaMetrics: %v\n  query: %s", where, err, expr)
				return
			}
			if diff = sameSeries(ps, vs); diff == nil || time.Now().After(deadline) {
				break
			}
			time.Sleep(500 * time.Millisecond)
		}
		if diff != nil {
			t.Errorf("%s: scraped and OTLP series differ: %v\n  query: %s", where, diff, expr)
		}
		if mustHaveData && (!finite(ps) || !finite(vs)) {
			t.Errorf("%s: no finite value scraped (%v) or over OTLP (%v)\n  query: %s", where, ps, vs, expr)
		}
		n++
		series += len(ps)
	}
	for _, q := range panels {
		compare(q.where, q.expr, q.mustHaveData)
	}
	for _, r := range rules {
		compare("recording rule "+r.name, r.expr, false)
	}
	t.Logf("%d dashboard queries and recording-rule expressions (%d series) return the same series scraped and over OTLP", n, series)
}

// panelQuery is a dashboard query with its variables substituted.
// mustHaveData: the panel must return a finite value from both stores (the
// SLO panels, whose inline query stands for recorded series).
type panelQuery struct {
	where, expr  string
	mustHaveData bool
}

// ruleQuery is a rule's name and expression.
type ruleQuery struct{ name, expr string }
