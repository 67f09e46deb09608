package dashboards

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/picometer/picometer/internal/testenv"
)

var update = flag.Bool("update", false, "rewrite the generated dashboards")

// The dashboards are generated; this fails when a committed copy is stale.
func TestGeneratedFilesUpToDate(t *testing.T) {
	testenv.CheckGenerated(t, Files(), *update, "`make dashboards` (or go test ./dashboards -update)")
}

// The committed JSON decodes into the model with no unknown fields, so the
// file is exactly what the structs describe.
func TestCommittedJSONMatchesModel(t *testing.T) {
	data, err := os.ReadFile(OverviewFile)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var d Dashboard
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("%s: %v", OverviewFile, err)
	}
	if d.UID == "" || d.Title == "" || len(d.Panels) == 0 {
		t.Fatalf("%s: uid %q, title %q, %d panels", OverviewFile, d.UID, d.Title, len(d.Panels))
	}
}

func TestOverviewVariables(t *testing.T) {
	d := Overview()
	if d.SchemaVersion < 39 {
		t.Errorf("schemaVersion %d < 39", d.SchemaVersion)
	}
	vars := map[string]Variable{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v
	}
	ds, ok := vars[DatasourceVar]
	if !ok || ds.Type != "datasource" || ds.Query != "prometheus" {
		t.Errorf("datasource variable: %+v, want type datasource, query prometheus", ds)
	}
	for name, label := range map[string]string{"model": "gen_ai_request_model", "instance": "instance"} {
		v, ok := vars[name]
		if !ok {
			t.Errorf("no %s variable", name)
			continue
		}
		q, _ := v.Query.(VariableQuery)
		if v.Type != "query" || !strings.HasPrefix(q.Query, "label_values(") || !strings.HasSuffix(q.Query, ", "+label+")") ||
			v.Definition != q.Query || v.Datasource == nil || v.Datasource.UID != "${datasource}" {
			t.Errorf("%s variable: %+v, want a label_values(…, %s) query on ${datasource}", name, v, label)
		}
	}
}

// grafanaUnits are the built-in Grafana unit ids the dashboards use
// (Grafana's valueFormats registry): seconds, requests/s, 0..1 as percent,
// plain numbers with SI suffixes, booleans as Yes/No.
var grafanaUnits = map[string]bool{"s": true, "reqps": true, "percentunit": true, "short": true, "bool_yes_no": true}

// Every panel is importable: a known type, a unit, a description, the
// datasource variable, queries with unique refIds, and a place on the grid
// that overlaps no other panel.
func TestOverviewPanels(t *testing.T) {
	d := Overview()
	if len(d.Panels) == 0 || d.Panels[0].Type != "row" {
		t.Fatal("the dashboard does not start with a row")
	}
	ids := map[int]bool{}
	var cells [][24]string
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("%q: duplicate id %d", p.Title, p.ID)
		}
		ids[p.ID] = true
		g := p.GridPos
		if g.W < 1 || g.H < 1 || g.X < 0 || g.X+g.W > 24 || g.Y < 0 {
			t.Errorf("%q: gridPos %+v off the 24-column grid", p.Title, g)
			continue
		}
		for y := g.Y; y < g.Y+g.H; y++ {
			for len(cells) <= y {
				cells = append(cells, [24]string{})
			}
			for x := g.X; x < g.X+g.W; x++ {
				if o := cells[y][x]; o != "" {
					t.Errorf("%q overlaps %q at (%d,%d)", p.Title, o, x, y)
				}
				cells[y][x] = p.Title
			}
		}
	}
	for _, p := range AllPanels(d) {
		switch p.Type {
		case "timeseries", "heatmap", "stat", "bargauge":
		default:
			t.Errorf("%q: panel type %q", p.Title, p.Type)
		}
		if p.Description == "" {
			t.Errorf("%q: no description", p.Title)
		}
		if p.FieldConfig == nil || p.FieldConfig.Defaults.Unit == "" {
			t.Errorf("%q: no fieldConfig.defaults.unit", p.Title)
		} else if u := p.FieldConfig.Defaults.Unit; !grafanaUnits[u] && !strings.HasPrefix(u, "suffix:") {
			t.Errorf("%q: unit %q is not a Grafana unit id used here nor a suffix: custom unit", p.Title, u)
		}
		if p.Datasource == nil || p.Datasource.Type != "prometheus" || p.Datasource.UID != "${datasource}" {
			t.Errorf("%q: datasource %+v", p.Title, p.Datasource)
		}
		if len(p.Targets) == 0 {
			t.Errorf("%q: no queries", p.Title)
		}
		refs := map[string]bool{}
		for _, tg := range p.Targets {
			if tg.RefID == "" || refs[tg.RefID] {
				t.Errorf("%q: refId %q missing or repeated", p.Title, tg.RefID)
			}
			refs[tg.RefID] = true
			if tg.Datasource == nil || tg.Datasource.UID != "${datasource}" || tg.Expr == "" || tg.LegendFormat == "" {
				t.Errorf("%q: target %+v", p.Title, tg)
			}
			if tg.Range == tg.Instant {
				t.Errorf("%q: target %s is neither range nor instant (or both)", p.Title, tg.RefID)
			}
			if !strings.Contains(tg.Expr, `=~"$instance"`) && !strings.HasPrefix(tg.Expr, "slo:") {
				// SLO series are per model, summed over instances.
				t.Errorf("%q: query %s ignores the instance variable", p.Title, tg.RefID)
			}
		}
		if p.Type == "heatmap" {
			for _, tg := range p.Targets {
				if tg.Format != "heatmap" || !strings.Contains(tg.Expr, "_bucket{") || !strings.HasPrefix(tg.Expr, "sum by (le)") {
					t.Errorf("%q: heatmap target %q (format %q) is not a sum by (le) of _bucket series", p.Title, tg.Expr, tg.Format)
				}
			}
		}
	}
}

// The overview has a panel for everything issue 6 lists.
func TestOverviewHasRequiredPanels(t *testing.T) {
	titles := map[string]*Panel{}
	for _, p := range AllPanels(Overview()) {
		if titles[p.Title] != nil {
			t.Errorf("two panels titled %q", p.Title)
		}
		titles[p.Title] = p
	}
	for _, want := range []struct{ title, typ string }{
		{"Request rate by finish reason", "timeseries"},
		{"Errors by type", "timeseries"},
		{"Prompt token throughput", "timeseries"},
		{"Generation token throughput", "timeseries"},
		{"Time to first token", "timeseries"},
		{"Inter-token latency", "timeseries"},
		{"Time per output token", "timeseries"},
		{"End-to-end request time", "timeseries"},
		{"Queue time", "timeseries"},
		{"Prefill time", "timeseries"},
		{"Decode time", "timeseries"},
		{"Running and waiting requests", "timeseries"},
		{"KV-cache usage", "timeseries"},
		{"Batch occupancy (mean decode batch size)", "timeseries"},
		{"Decode step time by batch size", "bargauge"},
		{"Draft acceptance rate", "timeseries"},
		{"Mean acceptance length", "timeseries"},
		{"Acceptance by position", "bargauge"},
		{"TTFT by cache outcome", "timeseries"},
		{"Prompt length", "heatmap"},
		{"Generation length", "heatmap"},
		{"Events lost", "timeseries"},
		{"Decode errors by reason", "timeseries"},
		{"Daemon connections", "stat"},
		{"Seconds since last event", "stat"},
	} {
		p := titles[want.title]
		if p == nil {
			t.Errorf("no panel %q", want.title)
			continue
		}
		if p.Type != want.typ {
			t.Errorf("%q: type %s, want %s", want.title, p.Type, want.typ)
		}
	}
	// Latency panels show p50, p90, p99 and the mean.
	for _, title := range []string{"Time to first token", "Inter-token latency", "Time per output token"} {
		var legends []string
		for _, tg := range titles[title].Targets {
			legends = append(legends, strings.Fields(tg.LegendFormat)[0])
		}
		if got := strings.Join(legends, ","); got != "p50,p90,p99,mean" {
			t.Errorf("%q: series %s, want p50,p90,p99,mean", title, got)
		}
	}
}

func TestProvisioningFiles(t *testing.T) {
	f := func(path string, wants ...string) {
		t.Helper()
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range wants {
			if !strings.Contains(string(data), w) {
				t.Errorf("%s lacks %q", path, w)
			}
		}
		if strings.Contains(string(data), "\t") {
			t.Errorf("%s contains a tab (YAML forbids tabs for indentation)", path)
		}
	}
	f("provisioning/datasources/picometer.yml", "apiVersion: 1", "datasources:", "type: prometheus", "url: ")
	f("provisioning/dashboards/picometer.yml", "apiVersion: 1", "providers:", "type: file", "path: ")
}
