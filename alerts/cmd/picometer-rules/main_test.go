package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/picometer/picometer/alerts"
	"github.com/picometer/picometer/internal/testenv"
)

const testdata = "../../../testdata/slo"

// An operator's SLO file end to end: TOML → picometer-rules → promtool
// check rules → promtool unit tests of its objectives' burn-rate alerts.
func TestCustomSLOFileEndToEnd(t *testing.T) {
	promtool := testenv.Promtool(t)
	dir := t.TempDir()
	slo := filepath.Join(testdata, "custom.toml")
	rules := filepath.Join(dir, "rules.yml")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"--slo", slo, "-o", rules}, &stdout, &stderr); code != 0 {
		t.Fatalf("picometer-rules exited %d: %s", code, stderr.String())
	}
	out, err := exec.Command(promtool, "check", "rules", rules).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "SUCCESS") {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	data, err := os.ReadFile(rules)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`slo: 'chat_availability'`, `slo: 'chat_tpot'`,
		`record: 'slo:sli_error:ratio_rate28d'`, `record: 'slo:sli_error:ratio_rate7d'`,
		`gen_ai_request_model="picometer-tiny"`, `le="0.1"`,
		`expr: 'slo:sli_error:ratio_rate1h{slo="chat_availability"} > 0.0288 and slo:sli_error:ratio_rate5m{slo="chat_availability"} > 0.0288'`,
		`expr: 'picometer_engine_kv_cache_usage_ratio > 0.8'`,
	} {
		if !strings.Contains(string(data), want) {
			t.Errorf("generated rules lack %s", want)
		}
	}
	if strings.Contains(string(data), `slo: 'ttft'`) {
		t.Error("the custom file's objectives did not replace the defaults")
	}

	cfg, err := alerts.LoadConfig(slo)
	if err != nil {
		t.Fatal(err)
	}
	const day = 24 * 60
	h := func(m int) time.Duration { return time.Duration(m) * time.Minute }
	scenarios := []alerts.SLOScenario{
		{
			// 0.3% bad on a 0.2% budget (99.8%): 1.5×. The 1× ticket (3d and
			// 6h ratios above 0.2%) fires after its for: of 3h and stays; the
			// 3× ticket (0.6%) and the pages (1.2%, 2.88%) never do.
			Name: "slow burn (0.3% bad for 3 days) opens a ticket and never pages", Objective: "chat_availability",
			Traffic: []alerts.Segment{alerts.Bad(3*day, 0.003)},
			Evals: []alerts.SLOEval{
				{At: h(120)}, {At: h(4 * 60), Fires: []int{alerts.TierTicket3d}},
				{At: h(day), Fires: []int{alerts.TierTicket3d}}, {At: h(3 * day), Fires: []int{alerts.TierTicket3d}},
			},
		},
		{
			// The selector picks picometer-tiny: another model failing every
			// request spends none of this objective's budget.
			Name: "another model's errors are not selected", Objective: "chat_availability", Model: "other-model",
			Traffic: []alerts.Segment{alerts.Bad(3*60, 1)},
			Evals:   alerts.QuietEvery(10, 3*60, 10),
		},
		{
			Name: "no traffic fires nothing", Objective: "chat_tpot", Flat: 3 * 60,
			Evals: alerts.QuietEvery(10, 3*60, 30),
		},
	}
	tests := filepath.Join(dir, "rules_test.yml")
	if err := os.WriteFile(tests, alerts.RenderSLOTests(cfg, "rules.yml", scenarios), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = exec.Command(promtool, "test", "rules", tests).CombinedOutput()
	if err != nil || strings.Contains(string(out), "FAILED") {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
}

// --format prometheusrule wraps exactly the groups of the rule file.
func TestPrometheusRuleFormat(t *testing.T) {
	var rules, obj, stderr bytes.Buffer
	if code := run(nil, &rules, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if code := run([]string{"--format", "prometheusrule", "--namespace", "monitoring"}, &obj, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	o := obj.String()
	for _, want := range []string{"apiVersion: monitoring.coreos.com/v1\n", "kind: PrometheusRule\n", "  name: 'picometer'\n", "  namespace: 'monitoring'\n", "spec:\n  groups:\n"} {
		if !strings.Contains(o, want) {
			t.Errorf("PrometheusRule lacks %q", want)
		}
	}
	_, groups, ok := strings.Cut(o, "spec:\n  groups:\n")
	_, want, ok2 := strings.Cut(rules.String(), "groups:\n")
	if !ok || !ok2 {
		t.Fatal("no groups")
	}
	var dedented []string
	for _, l := range strings.SplitAfter(groups, "\n") {
		dedented = append(dedented, strings.TrimPrefix(l, "  "))
	}
	if strings.Join(dedented, "") != want {
		t.Error("the PrometheusRule's spec.groups differ from the rule file's groups")
	}
	if !strings.Contains(want, "alert: 'PicometerErrorBudgetBurn'") {
		t.Error("no burn-rate alert in the default rules")
	}
}

func TestBadFileAndFlags(t *testing.T) {
	var stdout, stderr bytes.Buffer
	bad := filepath.Join(testdata, "bad_target_not_bound.toml")
	if code := run([]string{"--slo", bad}, &stdout, &stderr); code != 1 {
		t.Errorf("a bad file: exit %d, want 1", code)
	}
	want := "picometer-rules: " + bad + `: objective "ttft": target: 1.5s is not a bucket bound of ttft; the nearest bounds are 1s and 2.5s` + "\n"
	if stderr.String() != want {
		t.Errorf("stderr %q, want %q", stderr.String(), want)
	}
	stderr.Reset()
	if code := run([]string{"--format", "yaml"}, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), `--format "yaml"`) {
		t.Errorf("a bad format: exit %d, %q", code, stderr.String())
	}
	stdout.Reset()
	if code := run([]string{"--slo", filepath.Join(testdata, "custom.toml"), "--check"}, &stdout, &stderr); code != 0 ||
		!strings.Contains(stdout.String(), "OK, 2 objectives") || !strings.Contains(stdout.String(), "chat_availability        99.8% over 28d (budget 0.2%)") {
		t.Errorf("--check: exit %d, %q", code, stdout.String())
	}
	stdout.Reset()
	if code := run([]string{"--print-defaults"}, &stdout, &stderr); code != 0 || stdout.String() != string(alerts.DefaultSLOText()) {
		t.Errorf("--print-defaults: exit %d", code)
	}
}
