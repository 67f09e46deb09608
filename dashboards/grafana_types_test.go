package dashboards

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/picometer/picometer/internal/testenv"
)

// grafanaFills are the tsc errors the check accepts: properties Grafana's
// types require but Grafana itself fills in when it loads or saves a
// dashboard, so a dashboard file need not carry them. Each entry is a
// regular expression matched against one error message. Nothing else may
// fail.
//
// Besides these, a panel's options may lack any option its plugin's
// defaultOptions sets (read from @grafana/schema's own module): Grafana
// merges those into the panel when it loads it.
var grafanaFills = []string{
	// A variable's current selection (VariableModel.current: text and
	// value): Grafana sets it from the query result and the URL when the
	// dashboard loads; a provisioned file leaves it empty ({}).
	`^Type '\{\}' is missing the following properties from type '\{ properties\?: \{ \[x: string\]: string; \} \| undefined; selected\?: boolean \| undefined; text: string \| string\[\]; value: string \| string\[\]; \}': text, value$`,
}

// panelCfg maps a panel type to the module of its Options (and, when the
// plugin has one, FieldConfig) types in @grafana/schema.
var panelCfg = map[string]string{
	"stat":       "stat/panelcfg/x/StatPanelCfg_types.gen",
	"timeseries": "timeseries/panelcfg/x/TimeSeriesPanelCfg_types.gen",
	"bargauge":   "bargauge/panelcfg/x/BarGaugePanelCfg_types.gen",
	"heatmap":    "heatmap/panelcfg/x/HeatmapPanelCfg_types.gen",
}

// TestGrafanaTypes type-checks every dashboards/*.json with tsc against
// Grafana's own TypeScript types (@grafana/schema, pinned in
// tools/npm/package.json): the dashboard itself, every panel with the
// Options and FieldConfig of its panel type, every row, and every template
// variable, each as an object literal (so an unknown property is an error,
// at any depth). Grafana's string enums are compared by their values (JSON
// holds "value", the type BigValueColorMode.Value). Queries (targets) are
// data-source specific and @grafana/schema has no Prometheus query type:
// they are checked by the e2e tests against a live Prometheus instead.
func TestGrafanaTypes(t *testing.T) {
	node := testenv.Node(t)
	schemaDir := testenv.NPMPackage(t, "@grafana/schema")
	tsDir := testenv.NPMPackage(t, "typescript")
	files, err := filepath.Glob("*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no dashboards: %v", err)
	}
	dir := t.TempDir()
	if err := os.Symlink(filepath.Dir(filepath.Dir(schemaDir)), filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	tsconfig := `{"compilerOptions": {"strict": true, "noEmit": true, "module": "esnext", "moduleResolution": "bundler",
  "target": "es2022", "skipLibCheck": true, "types": []}, "files": [%s]}`
	var tsFiles []string
	checked := 0
	for _, f := range files {
		src, n := dashboardTS(t, f, schemaDir)
		checked += n
		name := strings.TrimSuffix(f, ".json") + ".ts"
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		tsFiles = append(tsFiles, fmt.Sprintf("%q", name))
	}
	if err := os.WriteFile(filepath.Join(dir, "tsconfig.json"), []byte(fmt.Sprintf(tsconfig, strings.Join(tsFiles, ", "))), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, filepath.Join(tsDir, "bin", "tsc"), "-p", "tsconfig.json", "--pretty", "false")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	var unexpected []string
	errLine := regexp.MustCompile(`^\S+\(\d+,\d+\): error TS\d+: `)
	for _, line := range strings.Split(string(out), "\n") {
		if !errLine.MatchString(line) {
			continue
		}
		msg := errLine.ReplaceAllString(line, "")
		allowed := false
		for _, re := range grafanaFills {
			allowed = allowed || regexp.MustCompile(re).MatchString(msg)
		}
		if !allowed {
			unexpected = append(unexpected, line)
		}
	}
	if len(unexpected) > 0 {
		t.Errorf("tsc finds %d errors against @grafana/schema:\n%s", len(unexpected), strings.Join(unexpected, "\n"))
	}
	if err != nil && len(unexpected) == 0 && !strings.Contains(string(out), "error TS") {
		t.Fatalf("tsc: %v\n%s", err, out)
	}
	t.Logf("tsc checked %d objects of %d dashboards against @grafana/schema", checked, len(files))
}

// dashboardTS renders one dashboard file as TypeScript: each part an
// object literal that must satisfy its Grafana type.
func dashboardTS(t *testing.T, file, schemaDir string) (string, int) {
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var d map[string]any
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("import type { Dashboard, FieldConfig, FieldConfigSource, Panel, RowPanel, VariableModel } from '@grafana/schema';\n")
	types := []string{}
	for typ := range panelCfg {
		types = append(types, typ)
	}
	sort.Strings(types)
	for _, typ := range types {
		fmt.Fprintf(&b, "import type * as %s from '@grafana/schema/dist/esm/raw/composable/%s';\n", ident(typ), panelCfg[typ])
	}
	b.WriteString(`
// JSON holds a string enum's values, not its members.
type JSONOf<T> = T extends string ? ` + "`${T}`" + ` : T extends number | boolean | null | undefined ? T :
	T extends Array<infer U> ? Array<JSONOf<U>> : T extends object ? { [K in keyof T]: JSONOf<T[K]> } : T;
// Grafana's Panel<TOptions, TCustom> leaves options a Record and custom
// field config open (custom?: TCustom & Record<string, unknown>), so a
// misspelt option would pass; PanelOf closes both.
// WithDefaults makes the options a plugin's defaultOptions sets optional.
type WithDefaults<O, K extends keyof O> = Omit<O, K> & Partial<Pick<O, K>>;
type PanelOf<O, F> = Omit<Panel, 'options' | 'fieldConfig'> & {
	options?: O;
	fieldConfig?: Omit<FieldConfigSource, 'defaults'> & { defaults: Omit<FieldConfig, 'custom'> & { custom?: F } };
};
`)
	n := 0
	filled := map[string][]string{}
	defer func() {
		for typ, keys := range filled {
			t.Logf("%s: options Grafana fills from the plugin's defaultOptions: %s", typ, strings.Join(keys, ", "))
		}
	}()
	lit := func(v any) string {
		out, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		return string(out)
	}
	var walk func(ps []any, where string)
	walk = func(ps []any, where string) {
		for i, p := range ps {
			pm := p.(map[string]any)
			typ, _ := pm["type"].(string)
			name := fmt.Sprintf("%s_%d", where, i)
			if typ == "row" {
				children, _ := pm["panels"].([]any)
				row := map[string]any{}
				for k, v := range pm {
					row[k] = v
				}
				row["panels"] = []any{}
				fmt.Fprintf(&b, "export const %s = %s satisfies JSONOf<RowPanel>;\n", name, lit(row))
				n++
				walk(children, name)
				continue
			}
			opts, fc := "Record<string, unknown>", "Record<string, unknown>"
			if mod, ok := panelCfg[typ]; ok {
				opts = ident(typ) + ".Options"
				if keys := pluginDefaults(t, schemaDir, mod); len(keys) > 0 {
					opts = fmt.Sprintf("WithDefaults<%s, %s>", opts, strings.Join(keys, " | "))
					filled[typ] = keys
				}
				dts, err := os.ReadFile(filepath.Join(schemaDir, "dist", "types", "raw", "composable", filepath.Dir(mod), "types.gen.d.ts"))
				if err != nil {
					t.Fatal(err)
				}
				if strings.Contains(string(dts), "export interface FieldConfig ") {
					fc = ident(typ) + ".FieldConfig"
				}
			} else {
				t.Errorf("panel %q: type %q has no options types in the check (add it to panelCfg)", pm["title"], typ)
			}
			fmt.Fprintf(&b, "export const %s = %s satisfies JSONOf<PanelOf<%s, %s>>;\n", name, lit(pm), opts, fc)
			n++
		}
	}
	panels, _ := d["panels"].([]any)
	walk(panels, "panel")
	if tm, ok := d["templating"].(map[string]any); ok {
		vars, _ := tm["list"].([]any)
		for i, v := range vars {
			fmt.Fprintf(&b, "export const variable_%d = %s satisfies JSONOf<VariableModel>;\n", i, lit(v))
			n++
		}
		d["templating"] = map[string]any{"list": []any{}}
	}
	d["panels"] = []any{}
	fmt.Fprintf(&b, "export const dashboard = %s satisfies JSONOf<Dashboard>;\n", lit(d))
	return b.String(), n + 1
}

func ident(panelType string) string { return "cfg_" + panelType }

// pluginDefaults returns the top-level keys of a panel plugin's
// defaultOptions in @grafana/schema's ES module, quoted for TypeScript.
func pluginDefaults(t *testing.T, schemaDir, mod string) []string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(schemaDir, "dist", "esm", "raw", "composable", filepath.Dir(mod), "types.gen.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	s := regexp.MustCompile(`(?s)/\*.*?\*/`).ReplaceAllString(string(src), "")
	i := strings.Index(s, "defaultOptions = {")
	if i < 0 {
		return nil
	}
	s = s[i+len("defaultOptions = {"):]
	var keys []string
	depth, start := 0, 0
	for j := 0; j < len(s) && depth >= 0; j++ {
		switch s[j] {
		case '{', '[', '(':
			depth++
		case '}', ']', ')':
			depth--
		case ':':
			if depth == 0 {
				key := strings.TrimSpace(s[start:j])
				keys = append(keys, fmt.Sprintf("%q", strings.Trim(key, `"'`)))
			}
		case ',':
			if depth == 0 {
				start = j + 1
			}
		}
	}
	if len(keys) == 0 {
		t.Fatalf("%s: no keys in defaultOptions", mod)
	}
	return keys
}
