package iree

import (
	"debug/elf"
	"os"
	"regexp"
	"strings"
	"testing"
)

// The facts docs/IREE.md rests on, re-checked on the pinned wheels when
// scripts/iree.sh has unpacked them (the test skips otherwise): PyPI's IREE
// runtime wheel exports none of IREE's C API, and shortfin's library
// exports every function runtime.c resolves.

const (
	runtimeExt = "../../build/iree/runtime/iree/_runtime_libs/_runtime.cpython-311-x86_64-linux-gnu.so"
	shortfin   = "../../build/iree/lib/libshortfin.so"
)

// exported returns the names of the defined dynamic symbols of an ELF file,
// without their version suffix.
func exported(t *testing.T, path string) map[string]bool {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		if os.IsNotExist(err) {
			t.Skipf("%v (run scripts/iree.sh)", err)
		}
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.DynamicSymbols()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, s := range syms {
		if s.Section != elf.SHN_UNDEF {
			names[s.Name] = true
		}
	}
	return names
}

var capi = regexp.MustCompile(`^iree_(runtime|hal|vm)_`)

func TestInventoryRuntimeWheelExportsNoCAPI(t *testing.T) {
	names := exported(t, runtimeExt)
	if !names["PyInit__runtime"] {
		t.Fatalf("%s: no PyInit__runtime; is it the Python extension?", runtimeExt)
	}
	for n := range names {
		if capi.MatchString(n) {
			t.Errorf("%s exports %s: the inventory in docs/IREE.md is out of date", runtimeExt, n)
		}
	}
}

func TestInventoryShortfinExportsABI(t *testing.T) {
	names := exported(t, shortfin)
	src, err := os.ReadFile("runtime.c")
	if err != nil {
		t.Fatal(err)
	}
	rows := regexp.MustCompile(`(?m)^\s+X\((iree_\w+),`).FindAllStringSubmatch(string(src), -1)
	if len(rows) < 30 {
		t.Fatalf("runtime.c: found %d symbol rows, want the whole PM_IREE_SYMBOLS table", len(rows))
	}
	var missing []string
	for _, r := range rows {
		if !names[r[1]] {
			missing = append(missing, r[1])
		}
	}
	if len(missing) > 0 {
		t.Fatalf("%s lacks %s", shortfin, strings.Join(missing, ", "))
	}
}
