package dashboards

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/picometer/picometer/alerts"
	"github.com/picometer/picometer/dashboards/internal/promql"
	"github.com/picometer/picometer/schema"
)

// prometheusSeries are series Prometheus itself writes for every target.
var prometheusSeries = map[string]bool{"up": true}

// knownNames maps every name a query may use to where it comes from: a
// series the sidecar exposes (schema families' Exposed(), with the exact
// _bucket/_sum/_count/_total suffixes), a recording rule of alerts/, or a
// series Prometheus writes.
func knownNames() map[string]string {
	known := map[string]string{}
	for _, f := range schema.Families {
		for _, s := range f.Exposed() {
			known[s] = "sidecar"
		}
	}
	for _, r := range alerts.RecordedNames() {
		known[r] = "recording rule"
	}
	for s := range prometheusSeries {
		known[s] = "prometheus"
	}
	return known
}

// query is a PromQL expression and where it was found.
type query struct{ where, expr string }

// dashboardQueries returns every PromQL expression of the committed
// dashboards (each target's expr) and the metric selector of every
// label_values() variable.
func dashboardQueries(t *testing.T) []query {
	t.Helper()
	files, err := filepath.Glob("*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no dashboards (%v)", err)
	}
	var out []query
	labelValues := regexp.MustCompile(`^label_values\((.*), *[a-zA-Z_][a-zA-Z0-9_]*\)$`)
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var d map[string]any
		if err := json.Unmarshal(data, &d); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		var walk func(path string, v any)
		walk = func(path string, v any) {
			switch v := v.(type) {
			case map[string]any:
				if title, ok := v["title"].(string); ok {
					path += "[" + title + "]"
				} else if name, ok := v["name"].(string); ok {
					path += "[" + name + "]"
				}
				keys := make([]string, 0, len(v))
				for k := range v {
					keys = append(keys, k)
				}
				sort.Strings(keys)
				for _, k := range keys {
					s, _ := v[k].(string)
					switch k {
					case "expr":
						out = append(out, query{path + ".expr", s})
					case "definition":
						m := labelValues.FindStringSubmatch(s)
						if m == nil {
							t.Errorf("%s: variable definition %q is not label_values(<selector>, <label>)", path, s)
							continue
						}
						out = append(out, query{path + ".definition", m[1]})
					default:
						walk(path+"."+k, v[k])
					}
				}
			case []any:
				for i, x := range v {
					walk(path+"["+strconv.Itoa(i)+"]", x)
				}
			}
		}
		walk(file, d)
	}
	return out
}

// ruleExpressions returns every expr of the committed rule files and checks
// that their count matches the generated rules (so a format change cannot
// hide expressions from this test).
func ruleExpressions(t *testing.T) []query {
	t.Helper()
	files, err := filepath.Glob("../alerts/*.rules.yml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no rule files (%v)", err)
	}
	var out []query
	name := regexp.MustCompile(`^ +- (?:record|alert): '(.*)'$`)
	expr := regexp.MustCompile(`^ +expr: '(.*)'$`)
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		rule := ""
		for i, line := range strings.Split(string(data), "\n") {
			if m := name.FindStringSubmatch(line); m != nil {
				rule = m[1]
			}
			if strings.Contains(line, " expr:") {
				m := expr.FindStringSubmatch(line)
				if m == nil {
					t.Fatalf("%s:%d: cannot read %q (expected a single-quoted expr)", file, i+1, line)
				}
				out = append(out, query{file + ":" + strconv.Itoa(i+1) + " " + rule, strings.ReplaceAll(m[1], "''", "'")})
			}
		}
	}
	want := 0
	for _, g := range alerts.Groups(alerts.Default()) {
		want += len(g.Rules)
	}
	if len(out) != want {
		t.Fatalf("read %d rule expressions from %v, the generator has %d rules", len(out), files, want)
	}
	return out
}

// Item 4 of issue 6: every metric name in a dashboard query or a rule
// expression is exposed by the sidecar (as declared in schema/, exact
// suffixes included), recorded by a rule in alerts/, or written by
// Prometheus — anything else fails.
func TestQueriesUseOnlyKnownNames(t *testing.T) {
	known := knownNames()
	used := map[string]bool{}
	check := func(where, expr string) {
		names, err := promql.Names(expr)
		if err != nil {
			t.Errorf("%s: %v in %q", where, err, expr)
			return
		}
		if len(names) == 0 {
			t.Errorf("%s: no metric name in %q", where, expr)
		}
		for _, n := range names {
			used[n] = true
			if _, ok := known[n]; !ok {
				t.Errorf("%s: %s is not exposed by the sidecar (schema/), recorded in alerts/, or written by Prometheus (expr %q)", where, n, expr)
			}
		}
	}
	dq := dashboardQueries(t)
	if len(dq) < 20 {
		t.Fatalf("found only %d dashboard queries", len(dq))
	}
	for _, q := range append(dq, ruleExpressions(t)...) {
		check(q.where, q.expr)
	}
	// The recording rules exist to be used: each is read by a dashboard or
	// an alert.
	for _, r := range alerts.RecordedNames() {
		if !used[r] {
			t.Errorf("recording rule %s is used by no dashboard query and no alert", r)
		}
	}
}

// The checker itself catches a wrong suffix and an unknown name.
func TestNameCheckerRejects(t *testing.T) {
	known := knownNames()
	f := func(expr, bad string) {
		t.Helper()
		names, err := promql.Names(expr)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			if n == bad {
				if _, ok := known[n]; ok {
					t.Errorf("%s is accepted but the sidecar does not expose it", n)
				}
				return
			}
		}
		t.Errorf("%s not extracted from %q", bad, expr)
	}
	f(`rate(picometer_prompt_tokens[5m])`, "picometer_prompt_tokens") // missing _total
	f(`rate(gen_ai_server_time_to_first_token_seconds[5m])`, "gen_ai_server_time_to_first_token_seconds")
	f(`vllm:num_requests_running`, "vllm:num_requests_running")
	f(`picometer_engine_kv_cache_usage`, "picometer_engine_kv_cache_usage") // missing _ratio
}

// Beyond schema/: every sidecar series a dashboard or rule uses appears in
// the sidecar's own golden expositions (testdata/sidecar/*.prom, written by
// its end-to-end tests from the golden events), so the check follows what
// the sidecar really writes, exact suffixes included.
func TestQueriesUseNamesInSidecarGoldens(t *testing.T) {
	files, err := filepath.Glob("../testdata/sidecar/*.prom")
	if err != nil || len(files) == 0 {
		// The goldens are committed: their absence is a broken checkout
		// (or a moved directory), never a reason to skip the check.
		t.Fatalf("no sidecar golden expositions under testdata/sidecar (%v)", err)
	}
	written := map[string]bool{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(data), "\n") {
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			if i := strings.IndexAny(line, "{ "); i > 0 {
				written[line[:i]] = true
			}
		}
	}
	known := knownNames()
	for _, q := range append(dashboardQueries(t), ruleExpressions(t)...) {
		names, err := promql.Names(q.expr)
		if err != nil {
			t.Fatalf("%s: %v", q.where, err)
		}
		for _, n := range names {
			if known[n] == "sidecar" && !written[n] {
				t.Errorf("%s: %s is declared in schema/ but no sidecar golden exposition (testdata/sidecar/*.prom) has it", q.where, n)
			}
		}
	}
}
