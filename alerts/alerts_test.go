package alerts

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/picometer/picometer/internal/testenv"
)

var update = flag.Bool("update", false, "rewrite the generated files under alerts/")

// The rule file and its unit tests are generated; this fails when a
// committed copy is stale.
func TestGeneratedFilesUpToDate(t *testing.T) {
	testenv.CheckGenerated(t, Files(), *update, "`make generate` (or go test ./alerts -update)")
}

// promtool is Debian's promtool: a missing one skips the test, except under
// PICOMETER_LIVE=1, where it fails it.
func promtool(t *testing.T) string { return testenv.Promtool(t) }

func TestPromtoolCheckRules(t *testing.T) {
	out, err := exec.Command(promtool(t), "check", "rules", RulesFile).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "SUCCESS") {
		t.Fatalf("promtool check rules did not report SUCCESS:\n%s", out)
	}
}

func TestPromtoolTestRules(t *testing.T) {
	files, err := filepath.Glob("tests/*.yml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no unit test files under alerts/tests (%v)", err)
	}
	out, err := exec.Command(promtool(t), append([]string{"test", "rules"}, files...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
	if strings.Contains(string(out), "FAILED") {
		t.Fatalf("promtool test rules:\n%s", out)
	}
}

// Every alert has a unit test in which it stays quiet, and every severity
// tier of it has one in which it fires.
func TestEveryAlertFiresAndStaysQuiet(t *testing.T) {
	quiet := map[string]bool{}
	fires := map[string]bool{} // alert + "/" + severity
	for _, tc := range UnitTests() {
		if len(tc.Fires) == 0 {
			quiet[tc.Alert] = true
		}
		for _, s := range tc.Fires {
			fires[tc.Alert+"/"+s] = true
		}
	}
	for _, r := range Alerts(Default()) {
		if r.Alert == AlertErrorBudgetBurn {
			continue // TestEveryBurnTierFiresAndStaysQuiet
		}
		if !quiet[r.Alert] {
			t.Errorf("%s: no unit test where it stays quiet", r.Alert)
		}
		if k := r.Alert + "/" + r.Label("severity"); !fires[k] {
			t.Errorf("%s: no unit test where its %s tier fires", r.Alert, r.Label("severity"))
		}
	}
}

func TestAlertsHaveForSeveritySummaryDescriptionRunbook(t *testing.T) {
	rs := Alerts(Default())
	if len(rs) == 0 {
		t.Fatal("no alerts")
	}
	for _, r := range rs {
		if r.For <= 0 {
			t.Errorf("%s: no for:", r.Alert)
		}
		if s := r.Label("severity"); s != SeverityWarning && s != SeverityCritical {
			t.Errorf("%s: severity %q", r.Alert, s)
		}
		if r.Annotation("summary") == "" {
			t.Errorf("%s: no summary", r.Alert)
		}
		if d := r.Annotation("description"); !strings.Contains(d, "{{ $labels.") && !strings.Contains(d, "{{ $value") {
			t.Errorf("%s: description is not templated: %q", r.Alert, d)
		}
		if u, want := r.Annotation("runbook_url"), RunbookBase+"#"+RunbookAnchor(r.Alert); u != want {
			t.Errorf("%s: runbook_url %q, want %q", r.Alert, u, want)
		}
	}
}

// githubAnchor is the anchor GitHub gives a Markdown heading.
func githubAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestGithubAnchor(t *testing.T) {
	f := func(in, want string) {
		t.Helper()
		if got := githubAnchor(in); got != want {
			t.Errorf("githubAnchor(%q) = %q, want %q", in, got, want)
		}
	}
	f("PicometerTTFTHigh", "picometerttfthigh")
	f("What to do", "what-to-do")
	f("Alerts: an index", "alerts-an-index")
}

// Every runbook_url points at a section of RUNBOOK.md, and every alert
// section of RUNBOOK.md belongs to an alert.
func TestRunbookHasSectionForEveryAlert(t *testing.T) {
	md, err := os.ReadFile("RUNBOOK.md")
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^#{1,6} (.+)$`).FindAllStringSubmatch(string(md), -1) {
		anchors[githubAnchor(m[1])] = true
	}
	names := map[string]bool{}
	for _, r := range Alerts(Default()) {
		names[r.Alert] = true
		a := strings.TrimPrefix(r.Annotation("runbook_url"), RunbookBase+"#")
		if !anchors[a] {
			t.Errorf("%s: RUNBOOK.md has no section with anchor #%s", r.Alert, a)
		}
	}
	for _, m := range regexp.MustCompile(`(?m)^## (Picometer\w+)`).FindAllStringSubmatch(string(md), -1) {
		if !names[m[1]] {
			t.Errorf("RUNBOOK.md has a section for %s, which is not an alert", m[1])
		}
	}
}

// Thresholds are declared once: a changed Thresholds value changes the
// rendered expressions and for: durations.
func TestGroupsUseThresholds(t *testing.T) {
	th := Default()
	th.KVCacheUsage.Warning = Tier{Threshold: 0.001, For: time.Second}
	th.Job = "other-job"
	out := string(Render(Groups(th)))
	for _, want := range []string{` > 0.001'`, "for: 1s", `or on (job, instance) up{job="other-job"} == 0`} {
		if !strings.Contains(out, want) {
			t.Errorf("rules built from modified thresholds lack %q", want)
		}
	}
	if strings.Contains(out, Job) {
		t.Errorf("rules built with job other-job still name %s", Job)
	}
}

func TestThresholdsValidate(t *testing.T) {
	d := Default()
	if err := d.Validate(); err != nil {
		t.Fatalf("Default().Validate() = %v", err)
	}
	f := func(name string, mod func(*Thresholds), want string) {
		t.Helper()
		th := Default().Thresholds
		mod(&th)
		err := th.Validate()
		if err == nil || err.Error() != want {
			t.Errorf("%s: Validate() = %v, want %q", name, err, want)
		}
	}
	f("empty job", func(t *Thresholds) { t.Job = "" }, "job: empty")
	f("critical below warning", func(t *Thresholds) { t.WaitingPerSlot.Critical.Threshold = 0.5 },
		"thresholds.waiting_per_slot: critical threshold 0.5 is not above warning 1")
	f("no for", func(t *Thresholds) { t.KVCacheUsage.Warning.For = 0 }, "thresholds.kv_cache_usage: both tiers need a positive for")
	f("negative", func(t *Thresholds) { t.EventsLostRatio.Warning.Threshold = -1 }, "thresholds.events_lost_ratio: warning threshold -1 < 0")
	f("fraction over 1", func(t *Thresholds) { t.KVCacheUsage.Critical.Threshold = 1.5 },
		"thresholds.kv_cache_usage: threshold 1.5 is a fraction and cannot exceed 1")
	f("unknown error type", func(t *Thresholds) { t.ServerErrorTypes = []string{"boom"} },
		`server_error_types: "boom" is not an error type of schema.ErrorTypes`)
	f("no error types", func(t *Thresholds) { t.ServerErrorTypes = nil }, "server_error_types: empty")
	f("single tier without for", func(t *Thresholds) { t.TargetAbsent.For = 0 }, "thresholds.target_absent: for must be positive")
	f("negative draft rate", func(t *Thresholds) { t.SpecMinDraftRate = -1 }, "thresholds.spec_acceptance.min_draft_rate: -1 < 0")
}

func TestPromDuration(t *testing.T) {
	f := func(d time.Duration, want string) {
		t.Helper()
		if got := PromDuration(d); got != want {
			t.Errorf("PromDuration(%v) = %q, want %q", d, got, want)
		}
	}
	f(0, "0s")
	f(time.Second, "1s")
	f(90*time.Second, "90s")
	f(5*time.Minute, "5m")
	f(2*time.Hour, "2h")
	f(24*time.Hour, "1d")
	f(30*24*time.Hour, "30d")
	f(36*time.Hour, "36h")
	f(1500*time.Millisecond, "1500ms")
}

func TestYAMLString(t *testing.T) {
	f := func(in, want string) {
		t.Helper()
		if got := yamlString(in); got != want {
			t.Errorf("yamlString(%q) = %s, want %s", in, got, want)
		}
	}
	f(`up{job="x"} == 0`, `'up{job="x"} == 0'`)
	f("it's", `'it''s'`)
	f("a\nb", `"a\nb"`)
	f("back`tick", "\"back`tick\"")
	f("", "''")
}

func TestExpandTemplate(t *testing.T) {
	lbls := []KV{{"instance", "h:1"}, {"job", "j"}}
	f := func(in, want string) {
		t.Helper()
		if got := expandTemplate(in, lbls, "4.975s"); got != want {
			t.Errorf("expandTemplate(%q) = %q, want %q", in, got, want)
		}
	}
	f("on {{ $labels.instance }} ({{ $labels.job }})", "on h:1 (j)")
	f("is {{ $value | humanizeDuration }}", "is 4.975s")
	f("no actions", "no actions")
	defer func() {
		if r := recover(); r == nil || !strings.HasPrefix(r.(string), "BUG:") {
			t.Errorf("an unsupported action did not panic with BUG: %v", r)
		}
	}()
	expandTemplate("{{ $value | printf \"%.2f\" }}", lbls, "x")
}

// Recording rule names follow level:metric:operations and are unique per
// label set; no recorded name collides with a schema series.
func TestRecordedNames(t *testing.T) {
	re := regexp.MustCompile(`^[a-z_]+:[a-z0-9_]+:[a-z0-9_]+$`)
	for _, n := range RecordedNames() {
		if !re.MatchString(n) {
			t.Errorf("recording rule %q is not level:metric:operations", n)
		}
	}
	seen := map[string]bool{}
	for _, g := range Groups(Default()) {
		for _, r := range g.Rules {
			if r.Record == "" {
				continue
			}
			k := r.Record + "/" + r.Label(LabelQuantile) + "/" + r.Label(LabelSLO)
			if seen[k] {
				t.Errorf("recording rule %s defined twice with the same labels", k)
			}
			seen[k] = true
		}
	}
}

// Every burn-rate tier fires in some scenario of the default objectives, and
// some evaluation expects quiet; the fast-burn scenario fires by the
// workbook's detection time.
func TestEveryBurnTierFiresAndStaysQuiet(t *testing.T) {
	fires := map[int]bool{}
	quiet := false
	for _, sc := range DefaultSLOScenarios() {
		for _, ev := range sc.Evals {
			quiet = quiet || len(ev.Fires) == 0
			for _, i := range ev.Fires {
				fires[i] = true
			}
		}
	}
	for i, br := range BurnRates {
		if !fires[i] {
			t.Errorf("burn tier %d (%s %s/%s %v×) fires in no scenario", i, br.Severity, PromDuration(br.Long), PromDuration(br.Short), br.Factor)
		}
	}
	if !quiet {
		t.Error("no scenario expects the burn-rate alerts to stay quiet")
	}
}

// The fast-burn scenario's first firing evaluation is within the workbook
// detection time (budget / bad share × long window × factor) plus for: and
// one evaluation step of slack per window boundary.
func TestFastBurnWithinDetectionTime(t *testing.T) {
	d := Default()
	o := d.objective("availability")
	br := BurnRates[tierPage1h]
	detect := time.Duration(o.Budget() / 0.10 * float64(br.Long) * br.Factor)
	if got, want := detect.Round(time.Second), 43*time.Minute+12*time.Second; got != want {
		t.Fatalf("detection time %v, want %v", got, want)
	}
	for _, sc := range DefaultSLOScenarios() {
		if !strings.HasPrefix(sc.Name, "fast burn (10% bad") {
			continue
		}
		start := sc.Traffic[0].Minutes
		for _, ev := range sc.Evals {
			firing := len(ev.Fires) > 0
			limit := mins(start) + detect + br.For + 2*time.Minute
			if ev.At > limit && !firing {
				t.Errorf("at %v (> %v) the page is expected quiet", ev.At, limit)
			}
			if ev.At < mins(start)+detect && firing {
				t.Errorf("at %v the page fires before the detection time", ev.At)
			}
		}
		return
	}
	t.Fatal("no fast-burn scenario")
}

// RUNBOOK.md's burn-rate table matches BurnRates.
func TestRunbookBurnTable(t *testing.T) {
	md, err := os.ReadFile("RUNBOOK.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, br := range BurnRates {
		row := fmt.Sprintf("| %s | %s | %s× | %s |", PromDuration(br.Long), PromDuration(br.Short), num(br.Factor), PromDuration(br.For))
		if !strings.Contains(string(md), row) {
			t.Errorf("RUNBOOK.md has no row %q", row)
		}
	}
}
