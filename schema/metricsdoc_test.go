package schema

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// METRICS.md is generated; this fails when it is stale.
func TestMetricsDocUpToDate(t *testing.T) {
	want := MetricsDoc()
	if *update {
		if err := os.WriteFile("METRICS.md", want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile("METRICS.md")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("schema/METRICS.md is stale: run `make generate`")
	}
	for _, f := range Families {
		for _, s := range f.Exposed() {
			if !strings.Contains(string(want), "`"+s+"`") {
				t.Errorf("METRICS.md does not list %s", s)
			}
		}
	}
}
