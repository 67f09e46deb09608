package e2e

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/picometer/picometer/alerts"
	"github.com/picometer/picometer/dashboards"
	"github.com/picometer/picometer/schema"

	"github.com/picometer/picometer/internal/testenv"
)

// TestLiveOTLPOnly runs the stack as an OTLP-only deployment: the sidecar
// pushes OTLP to VictoriaMetrics every second and nothing scrapes it (so
// there is no up series). Every dashboard query returns data (a query over
// a recorded series through its recording rule's expression, what a rule
// evaluator such as vmalert records from the same data; the constraint
// compile, mask and tool-call panels only when the engine enforces
// constraints, constrained_traffic_test.go); the sidecar
// liveness alerts' conditions do not hold while it runs (no alert would
// even be pending) and do hold once it has stopped. For the last part the
// production expressions run with their 3m staleness shortened to
// liveStale, so the run waits seconds, not minutes; the rest of each
// expression is the generated one.
func TestLiveOTLPOnly(t *testing.T) {
	const liveStale = 8 * time.Second
	sidecarBin := testenv.Binary(t, "picometer-sidecar")
	daemonBin := testenv.Binary(t, "picometerd")
	dir := t.TempDir()
	model := liveModel(t, dir) // the tiny model with room for tools (constrained_traffic_test.go)
	sock := filepath.Join(dir, "picometer.sock")
	sidecarAddr, daemonAddr := testenv.FreeAddr(t), testenv.FreeAddr(t)
	httpc := &http.Client{Timeout: 10 * time.Second}

	vmProc, vm, otlpEndpoint := startVictoriaMetrics(t, dir)
	sidecar := startEnv(t, dir, "sidecar", []string{
		"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=" + otlpEndpoint, "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL=http/protobuf",
		"OTEL_METRIC_EXPORT_INTERVAL=1000",
	}, sidecarBin, "--socket", sock, "--listen", sidecarAddr)
	waitFor(t, 15*time.Second, "sidecar /health", sidecar, func() error { return getOK(httpc, "http://"+sidecarAddr+"/health") })
	daemon := start(t, dir, "daemon", daemonBin, "--model", model, "--listen", daemonAddr, "--metrics-socket", sock)
	waitFor(t, 30*time.Second, "daemon /health", daemon, func() error { return getOK(httpc, "http://"+daemonAddr+"/health") })
	modelName := servedModel(t, httpc, daemonAddr)

	enforced, whyNot := constraintsEnforced(t, httpc, daemonAddr, modelName)
	warmup, rest := waves(append(traffic(modelName), constrainedTraffic(modelName, enforced)...), 3)
	results := drive(daemonAddr, warmup, 12)
	for _, wave := range rest {
		time.Sleep(1500 * time.Millisecond)
		results = append(results, drive(daemonAddr, wave, 12)...)
	}
	wantEvents := 0
	for _, r := range results {
		if r.req.event {
			wantEvents++
		}
		if r.err != nil || r.status != r.req.wantStatus {
			t.Errorf("request %q: HTTP %d (want %d), err %v", r.req.name, r.status, r.req.wantStatus, r.err)
		}
	}
	finished := alerts.Series(schema.IDRequestsFinished, "")
	waitFor(t, 30*time.Second, "every request event arrived over OTLP", vmProc, func() error {
		if err := vm.flush(); err != nil {
			return err
		}
		s, err := vm.query(fmt.Sprintf("sum(%s)", finished))
		if err == nil && (len(s) == 0 || s[0].Value < float64(wantEvents)) {
			err = fmt.Errorf("VictoriaMetrics has %v, %d sent", s, wantEvents)
		}
		return err
	})
	if s, err := vm.query("up"); err != nil || len(s) != 0 {
		t.Fatalf("up = %v, %v: something scrapes in an OTLP-only run", s, err)
	}

	// ---- every dashboard query returns data ---------------------------------
	vars := map[string]string{"model": regexValue(modelName), "instance": ".*", dashboards.DatasourceVar: ""}
	for k, v := range builtinVars {
		vars[k] = v
	}
	recording := map[string][]string{}
	for _, g := range alerts.Groups(alerts.Default()) {
		for _, r := range g.Rules {
			if r.Record != "" {
				recording[r.Record] = append(recording[r.Record], r.Expr)
			}
		}
	}
	var table []string
	for _, panel := range dashboards.AllPanels(dashboards.Overview()) {
		var parts []string
		ok := false
		if !enforced && needsEnforcement(panel.Targets[0].Expr) {
			t.Logf("panel %q not held to data: the engine refuses constraints: %s", panel.Title, whyNot)
			continue
		}
		for _, tg := range panel.Targets {
			exprs := []string{tg.Expr}
			var via []string
			if tg.Inline != "" { // an SLO panel: the same query over the exported series
				exprs, via = []string{tg.Inline}, []string{"its inline form"}
			}
			for name, rexprs := range recording {
				if tg.Inline == "" && strings.Contains(tg.Expr, name) {
					exprs, via = rexprs, append(via, name)
				}
			}
			if len(via) > 1 {
				t.Fatalf("panel %q %s reads several recorded series %v: check each", panel.Title, tg.RefID, via)
			}
			for _, e := range exprs {
				expr, err := expandGrafana(e, vars)
				if err != nil {
					t.Fatalf("panel %q %s: %v", panel.Title, tg.RefID, err)
				}
				var s []promSample
				waitFor(t, 10*time.Second, "panel "+panel.Title, vmProc, func() error {
					var err error
					if s, err = vm.query(expr); err == nil && !finite(s) {
						err = fmt.Errorf("no data: %s", expr)
					}
					return err
				})
				ok = ok || finite(s)
				how := ""
				if len(via) > 0 {
					how = " via " + via[0]
				}
				parts = append(parts, fmt.Sprintf("%s: %d series%s%s", tg.RefID, len(s), firstValue(s), how))
			}
		}
		table = append(table, fmt.Sprintf("  %-42s %s", panel.Title, strings.Join(parts, "; ")))
		if !ok {
			t.Errorf("panel %q returned no data over OTLP only", panel.Title)
		}
	}
	t.Logf("dashboard panels over OTLP only (VictoriaMetrics, no scrape):\n%s", strings.Join(table, "\n"))

	// ---- sidecar liveness alerts ----------------------------------------------
	stale := strconv.Itoa(int(alerts.HeartbeatStale.Seconds()))
	short := func(r alerts.Rule) string {
		e := r.Expr
		for _, rep := range [][2]string{
			{"[" + alerts.PromDuration(alerts.HeartbeatStale) + "]", "[" + alerts.PromDuration(liveStale) + "]"},
			{"> " + stale + " ", "> " + strconv.Itoa(int(liveStale.Seconds())) + " "},
		} {
			e = strings.ReplaceAll(e, rep[0], rep[1])
		}
		if e == r.Expr {
			t.Fatalf("%s: no %s staleness to shorten in %s", r.Alert, alerts.PromDuration(alerts.HeartbeatStale), r.Expr)
		}
		return e
	}
	var liveness []alerts.Rule
	for _, r := range alerts.Alerts(alerts.Default()) {
		if r.Alert == "PicometerSidecarDown" || r.Alert == "PicometerSidecarAbsent" {
			liveness = append(liveness, r)
		}
	}
	if len(liveness) != 2 {
		t.Fatalf("found %d sidecar liveness alerts, want PicometerSidecarDown and PicometerSidecarAbsent", len(liveness))
	}
	for _, r := range liveness {
		for _, expr := range []string{r.Expr, short(r)} {
			if s, err := vm.query(expr); err != nil || len(s) != 0 {
				t.Errorf("%s would be pending while the sidecar pushes OTLP: %v %v\n  expr: %s", r.Alert, s, err, expr)
			}
		}
	}
	if s, err := vm.query(fmt.Sprintf(`absent(up{job=%q})`, alerts.Job)); err == nil && len(s) == 1 {
		t.Logf("the up-based rule this replaces, absent(up{job=%q}), would fire here", alerts.Job)
	}

	if err := daemon.stop(t); err != nil {
		t.Errorf("picometerd did not exit cleanly: %v", err)
	}
	if err := sidecar.stop(t); err != nil {
		t.Errorf("picometer-sidecar did not exit cleanly: %v", err)
	}
	stopped := time.Now()
	for _, r := range liveness {
		expr := short(r)
		var s []promSample
		waitFor(t, 3*liveStale+10*time.Second, r.Alert+" condition after the sidecar stopped", vmProc, func() error {
			var err error
			if err = vm.flush(); err == nil {
				if s, err = vm.query(expr); err == nil && len(s) == 0 {
					err = fmt.Errorf("not yet")
				}
			}
			return err
		})
		t.Logf("%s holds %v after the sidecar stopped (%v; for: then fires it): %s", r.Alert,
			time.Since(stopped).Round(100*time.Millisecond), s, expr)
	}
}
