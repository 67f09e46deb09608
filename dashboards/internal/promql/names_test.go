package promql

import (
	"reflect"
	"strings"
	"testing"
)

func TestNames(t *testing.T) {
	f := func(expr string, want ...string) {
		t.Helper()
		got, err := Names(expr)
		if err != nil {
			t.Fatalf("Names(%q): %v", expr, err)
		}
		if len(got) == 0 && len(want) == 0 {
			return
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("Names(%q) = %q, want %q", expr, got, want)
		}
	}
	f("up", "up")
	f(`up{job="picometer-sidecar"} == 0`, "up")
	f(`absent(up{job="x"})`, "up")
	f(`histogram_quantile(0.99, sum by (job, instance, le) (rate(a_seconds_bucket{x=~"$model"}[5m])))`, "a_seconds_bucket")
	f(`sum(rate(a_total[$__rate_interval])) by (le) / sum without (x) (b_total)`, "a_total", "b_total")
	f(`SUM BY (le) (a)`, "a")
	f(`a:b:rate5m{quantile="0.99"} > 2`, "a:b:rate5m")
	f(`x < 0.1 and y > 1e-9 or z unless w`, "x", "y", "z", "w")
	f(`a / on (job) group_left (model) b`, "a", "b")
	f(`a / ignoring(x) group_right b`, "a", "b")
	f(`a offset 5m + b @ start()`, "a", "b")
	f(`rate(a[5m:1m])`, "a")
	f(`{__name__="from_matcher", job="x"}`, "from_matcher")
	f(`count_values("v", a) + topk(3, b) + quantile(0.9, c)`, "a", "b", "c")
	f(`a{l="with } brace and \" quote"} + b`, "a", "b")
	f(`0 * a + 1.5 + .5 + 0x1f + inf - NaN`, "a")
	f(`a # comment b
+ c`, "a", "c")
	f(`a + a`, "a")
}

func TestNamesErrors(t *testing.T) {
	f := func(expr, want string) {
		t.Helper()
		_, err := Names(expr)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Names(%q) error = %v, want one containing %q", expr, err, want)
		}
	}
	f(`a{x="y`, "unterminated string")
	f(`a{x="y"`, "unterminated {")
	f(`rate(a[5m)`, "unterminated [")
	f(`sum by (le`, "unterminated label list")
	f(`a{x=y}`, "want a quoted value")
	f(`"abc`, "unterminated string")
	f(`a{${datasource}="x"}`, "unexpected '$' in label matchers")
}

func FuzzNames(f *testing.F) {
	for _, s := range []string{`up`, `sum by (le) (rate(a{b="c"}[5m]))`, `a{`, `"`, `$x`, `1e-`, `{__name__="n"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, expr string) {
		names, err := Names(expr)
		if err != nil {
			return
		}
		for _, n := range names {
			if n == "" && !strings.Contains(expr, `__name__`) {
				t.Errorf("Names(%q) returned an empty name", expr)
			}
		}
	})
}
