package docs

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// rule is one row of the package map: a package prefix and the prefixes it
// may import.
type rule struct {
	pkg   string
	allow []string
}

var cell = regexp.MustCompile("`([^`]+)`")

// readMap reads the package map table of ARCHITECTURE.md.
func readMap(t *testing.T) []rule {
	data, err := os.ReadFile("ARCHITECTURE.md")
	if err != nil {
		t.Fatal(err)
	}
	var rules []rule
	in := false
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "| package | may import"):
			in = true
		case in && strings.HasPrefix(line, "|---"):
		case in && strings.HasPrefix(line, "| `"):
			cols := strings.Split(line, "|")
			pkg := cell.FindStringSubmatch(cols[1])
			if len(cols) < 4 || pkg == nil {
				t.Fatalf("ARCHITECTURE.md: malformed map row %q", line)
			}
			r := rule{pkg: pkg[1]}
			for _, m := range cell.FindAllStringSubmatch(cols[2], -1) {
				r.allow = append(r.allow, m[1])
			}
			rules = append(rules, r)
		case in:
			in = false
		}
	}
	if len(rules) < 5 {
		t.Fatalf("ARCHITECTURE.md: found %d package map rows", len(rules))
	}
	return rules
}

// under reports whether pkg is p or below it.
func under(pkg, p string) bool { return pkg == p || strings.HasPrefix(pkg, p+"/") }

// ruleFor returns the row with the longest prefix that covers pkg.
func ruleFor(rules []rule, pkg string) (rule, bool) {
	var best rule
	ok := false
	for _, r := range rules {
		if under(pkg, r.pkg) && len(r.pkg) >= len(best.pkg) {
			best, ok = r, true
		}
	}
	return best, ok
}

// violations returns "a imports b" for every import of ours (non-test) that
// the map forbids, and "a: in no row" for packages it lacks. imports maps a
// package (relative to the module) to its imports (relative; others
// dropped).
func violations(rules []rule, imports map[string][]string) []string {
	var out []string
	for pkg, imps := range imports {
		r, ok := ruleFor(rules, pkg)
		if !ok {
			out = append(out, pkg+": in no row of the package map (add one to docs/ARCHITECTURE.md)")
			continue
		}
		for _, imp := range imps {
			if under(imp, r.pkg) || slices.ContainsFunc(r.allow, func(a string) bool { return under(imp, a) }) {
				continue
			}
			out = append(out, pkg+" imports "+imp+" (row "+r.pkg+" allows "+strings.Join(r.allow, " ")+")")
		}
	}
	slices.Sort(out)
	return out
}

// TestPackageMap: every package of the module imports only what the package
// map of ARCHITECTURE.md allows (go list, non-test imports).
func TestPackageMap(t *testing.T) {
	rules := readMap(t)
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		if goBin, err = exec.LookPath("go"); err != nil {
			t.Fatal("no go command to list the packages with")
		}
	}
	cmd := exec.Command(goBin, "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./...")
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	mod, err := exec.Command(goBin, "list", "-m").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	prefix := strings.TrimSpace(string(mod)) + "/"
	imports := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg, ok := strings.CutPrefix(f[0], prefix)
		if !ok {
			continue
		}
		imports[pkg] = nil
		for _, imp := range f[1:] {
			if rel, ok := strings.CutPrefix(imp, prefix); ok {
				imports[pkg] = append(imports[pkg], rel)
			}
		}
	}
	if _, ok := imports["schema"]; !ok || len(imports) < 10 {
		t.Fatalf("go list found %d packages of ours: %v", len(imports), imports)
	}
	for _, v := range violations(rules, imports) {
		t.Error(v)
	}
}

// TestViolations checks the rule logic on a made-up module, so that the
// map test can fail.
func TestViolations(t *testing.T) {
	rules := []rule{{pkg: "schema"}, {pkg: "native"}, {pkg: "daemon", allow: []string{"schema", "native"}}, {pkg: "sidecar", allow: []string{"schema"}}}
	got := violations(rules, map[string][]string{
		"schema":                   nil,
		"native/gguf/modelgen":     {"native/gguf"},
		"native":                   {"schema"},
		"daemon/cmd/picometerd":    {"daemon", "native/gguf"},
		"sidecar":                  {"daemon", "schema"},
		"tokenizer":                {"schema"},
		"schemata":                 nil,
		"sidecar/cmd/picometer-sc": {"sidecar"},
	})
	want := []string{
		"native imports schema (row native allows )",
		"schemata: in no row of the package map (add one to docs/ARCHITECTURE.md)",
		"sidecar imports daemon (row sidecar allows schema)",
		"tokenizer: in no row of the package map (add one to docs/ARCHITECTURE.md)",
	}
	if !slices.Equal(got, want) {
		t.Errorf("violations:\n got %q\nwant %q", got, want)
	}
}
