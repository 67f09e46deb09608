package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/BurntSushi/toml"
)

// TestREADMEDefaults holds the README's picometerd configuration table to
// what --check-config prints: every row whose keys and defaults pair up
// ("`a`, `b` | 1, 2") and whose default is a literal (a number, a
// duration, a quoted string, true/false, "none", "1 MiB", "65536 events",
// "0 (= …)") is compared; rows in prose (the socket path, the thread
// count) are checked by name below.
func TestREADMEDefaults(t *testing.T) {
	readme, err := os.ReadFile("../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	model := filepath.Join(t.TempDir(), "m.gguf")
	if err := os.WriteFile(model, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	// The model flag is the one override: --check-config needs a readable file.
	if code := run([]string{"--check-config", "--model", model}, fstest.MapFS{}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var doc map[string]any
	if _, err := toml.Decode(out.String(), &doc); err != nil {
		t.Fatal(err)
	}
	got := map[string]any{}
	var flatten func(prefix string, m map[string]any)
	flatten = func(prefix string, m map[string]any) {
		for k, v := range m {
			if sub, ok := v.(map[string]any); ok {
				flatten(prefix+k+".", sub)
				continue
			}
			got[prefix+k] = v
		}
	}
	flatten("", doc)

	// The daemon's table: from "**picometerd**" to "**picometer-sidecar**".
	text := string(readme)
	start, end := strings.Index(text, "**picometerd**"), strings.Index(text, "**picometer-sidecar**")
	if start < 0 || end < start {
		t.Fatal("README: no picometerd configuration table")
	}
	row := regexp.MustCompile("(?m)^\\| (`[^|]*) \\| ([^|]*) \\|")
	checked, documented := 0, map[string]bool{}
	for _, m := range row.FindAllStringSubmatch(text[start:end], -1) {
		keys, defs := splitRow(m[1], m[2])
		for _, k := range keys {
			documented[k] = true
		}
		if len(keys) != len(defs) {
			continue
		}
		for i, k := range keys {
			want, ok := literal(defs[i])
			if !ok || k == "model" { // model: the test's own file
				continue
			}
			v, present := got[k]
			if !present && want != "" {
				t.Errorf("README documents %q; --check-config has no such key", k)
				continue
			}
			if g := normalize(v); g != want {
				t.Errorf("%s: README says %q (%s), --check-config %q", k, want, defs[i], g)
			}
			checked++
		}
	}
	// Every key --check-config prints is documented.
	for k := range got {
		if !documented[k] && !documented[strings.TrimSuffix(k, "s")] {
			t.Errorf("--check-config prints %q, which the README's table lacks", k)
		}
	}
	if checked < 20 {
		t.Errorf("only %d defaults compared; the table's format changed?", checked)
	}
	// Prose rows.
	if !strings.Contains(text[start:end], "| `engine.threads` | the CPUs the process may use, or its cgroup CPU quota") {
		t.Error("README: engine.threads' default is not the CPU count / cgroup quota")
	}
	t.Logf("%d documented defaults equal --check-config's", checked)
}

// splitRow splits a row's keys and defaults: "`a`, `b`" and
// "`x_min`/`_max`" (x_min, x_max) with "1, 2" and "`1s`/`5s`".
func splitRow(keyCell, defCell string) (keys, defs []string) {
	for _, k := range strings.Split(keyCell, ", ") {
		k = strings.Trim(k, "` ")
		if a, b, ok := strings.Cut(k, "`/`"); ok && strings.HasPrefix(b, "_") {
			keys = append(keys, a, a[:strings.LastIndex(a, "_")]+b)
			continue
		}
		keys = append(keys, k)
	}
	for _, d := range strings.Split(defCell, ", ") {
		if a, b, ok := strings.Cut(d, "`/`"); ok {
			defs = append(defs, a+"`", "`"+b)
			continue
		}
		defs = append(defs, d)
	}
	return keys, defs
}

// literal returns a README default in normalize's form, or false for prose.
func literal(s string) (string, bool) {
	s = strings.TrimSpace(s)
	if i := strings.Index(s, " (="); i > 0 {
		s = s[:i]
	}
	s = strings.TrimSuffix(s, " events")
	switch {
	case strings.HasPrefix(s, "none"):
		return "", true
	case s == "1 MiB":
		return "1048576", true
	case s == "true" || s == "false":
		return s, true
	}
	s = strings.Trim(s, "`")
	if d, err := time.ParseDuration(s); err == nil && strings.ContainsAny(s, "smh") {
		return d.String(), true
	}
	if _, err := strconv.Atoi(s); err == nil {
		return s, true
	}
	if strings.ContainsAny(s, " `") || s == "" {
		return "", false
	}
	return s, true
}

// normalize writes a decoded TOML value as literal does.
func normalize(v any) string {
	switch v := v.(type) {
	case nil:
		return "" // absent: an empty list is not written
	case []any:
		if len(v) == 0 {
			return ""
		}
		return fmt.Sprint(v)
	case string:
		if d, err := time.ParseDuration(v); err == nil {
			return d.String()
		}
		return v
	}
	return fmt.Sprint(v)
}
