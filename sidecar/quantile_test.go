package sidecar

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/picometer/picometer/internal/testenv"
	"github.com/picometer/picometer/schema"
)

// TestHistogramQuantilePromtool holds the page's quantiles to Prometheus'
// own: random TTFT and ITL histograms, read twice a minute apart, and
// histogram_quantile(q, h - h offset 1m) evaluated by promtool must equal
// histogramQuantile over bucketDelta of the same readings.
func TestHistogramQuantilePromtool(t *testing.T) {
	promtool := testenv.Promtool(t)
	rng := rand.New(rand.NewPCG(17, 5))
	var series, exprs strings.Builder
	cases := 0
	for _, id := range []string{schema.IDTTFT, schema.IDInterTokenLatency} {
		bounds := schema.Lookup(id).Buckets
		for c := range 12 {
			then, now := make([]uint64, len(bounds)+1), make([]uint64, len(bounds)+1)
			var a, b uint64
			for i := range then {
				// cumulative; some buckets empty, some cases all in one
				// bucket or beyond the last bound
				if c%4 != 0 || i == c%len(then) {
					a += uint64(rng.IntN(5))
					b += uint64(rng.IntN(40))
				}
				then[i], now[i] = a, a+b
			}
			if c == 3 {
				copy(now, then) // nothing in the window: NaN
			}
			name := fmt.Sprintf(`h{case="%d"`, cases)
			for i := range then {
				le := "+Inf"
				if i < len(bounds) {
					le = strconv.FormatFloat(bounds[i], 'g', -1, 64)
				}
				fmt.Fprintf(&series, "      - series: '%s,le=\"%s\"}'\n        values: '%d %d'\n", name, le, then[i], now[i])
			}
			d := make([]uint64, len(now))
			bucketDelta(d, now, then)
			for _, q := range []float64{0.5, 0.9, 0.99} {
				want := histogramQuantile(q, bounds, d)
				v := strconv.FormatFloat(want, 'g', -1, 64)
				expr := fmt.Sprintf(`histogram_quantile(%v, h{case="%d"} - h{case="%d"} offset 1m)`, q, cases, cases)
				if want != want {
					// NaN equals nothing, itself included: 1 when NaN
					v, expr = "1", expr+" != bool "+expr
				}
				fmt.Fprintf(&exprs, "      - expr: '%s'\n        eval_time: 1m\n", expr)
				fmt.Fprintf(&exprs, "        exp_samples:\n          - labels: '{case=\"%d\"}'\n            value: %s\n", cases, v)
			}
			cases++
		}
	}
	dir := t.TempDir()
	test := "tests:\n  - interval: 1m\n    input_series:\n" + series.String() + "    promql_expr_test:\n" + exprs.String()
	path := filepath.Join(dir, "quantile_test.yml")
	if err := os.WriteFile(path, []byte(test), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(promtool, "test", "rules", path).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "SUCCESS") {
		t.Fatalf("promtool test rules:\n%s", out)
	}
	t.Logf("%d histograms × 3 quantiles equal Prometheus' histogram_quantile", cases)
}
