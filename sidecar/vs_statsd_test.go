package sidecar

import (
	"slices"
	"strings"
	"testing"

	"github.com/picometer/picometer/schema"
)

// TestStatsdLinesCarrySchemaLabels checks, without statsd_exporter, that
// the DogStatsD lines BenchmarkVsStatsdExporter sends for a request tag
// every observation with exactly its family's labels, and that every
// request family the sidecar fills for such a request has a line. The
// benchmark compares both expositions series by series, and `make test`
// does not run benchmarks: a label added to a family (as cache was to the
// time to first token) must fail here, not first in `make bench`.
func TestStatsdLinesCarrySchemaLabels(t *testing.T) {
	for _, packed := range []bool{false, true} {
		lines := statsdRequestLines(nil, &typicalRequest("", 0).RequestBody, "m", "picometer", testBlockSize, packed)
		seen := map[string]bool{}
		for _, line := range strings.Split(strings.TrimSuffix(string(lines), "\n"), "\n") {
			name, rest, ok := strings.Cut(line, ":")
			_, tags, ok2 := strings.Cut(rest, "|#")
			if !ok || !ok2 {
				t.Fatalf("malformed line %q", line)
			}
			var f *schema.Family
			for _, g := range schema.Families {
				if g.Name == name {
					f = g
				}
			}
			if f == nil || f.Source != schema.SourceRequest {
				t.Fatalf("line %q: %q is not a request family", line, name)
			}
			seen[f.ID] = true
			var got, want []string
			for _, kv := range strings.Split(tags, ",") {
				k, _, _ := strings.Cut(kv, ":")
				got = append(got, k)
			}
			for _, a := range f.Attrs {
				want = append(want, schema.PromLabel(a.Key))
			}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("packed=%v: %s is tagged %v; its family has labels %v", packed, name, got, want)
			}
		}
		for _, id := range []string{schema.IDTTFT, schema.IDRequestDuration, schema.IDInterTokenLatency, schema.IDRequestsFinished} {
			if !seen[id] {
				t.Errorf("packed=%v: no line for %s", packed, id)
			}
		}
	}
}
