//go:build iree && cgo

package iree

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Where scripts/iree.sh puts the pinned runtime library and compiler.
const (
	defaultLib     = "../../build/iree/lib/libshortfin.so"
	defaultCompile = "../../build/iree/compiler/iree/compiler/_mlir_libs/iree-compile"
)

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// needRuntime returns the runtime library and compiler paths, skipping
// when scripts/iree.sh has not been run (PICOMETER_LIVE=1 makes it fail).
func needRuntime(t testing.TB) (lib, compiler string) {
	t.Helper()
	lib = envOr("PICOMETER_IREE_LIB", defaultLib)
	compiler = envOr("PICOMETER_IREE_COMPILE", defaultCompile)
	for _, p := range []string{lib, compiler} {
		if _, err := os.Stat(p); err != nil {
			if os.Getenv("PICOMETER_LIVE") == "1" {
				t.Fatalf("%v (run scripts/iree.sh)", err)
			}
			t.Skipf("%v (run scripts/iree.sh)", err)
		}
	}
	return lib, compiler
}

// compile compiles testdata/NAME.mlir for llvm-cpu with iree-compile.
func compile(t *testing.T, compiler, name string, extra ...string) []byte {
	t.Helper()
	return compileFile(t, compiler, filepath.Join("testdata", name+".mlir"), extra...)
}

// compileFile compiles the MLIR file src for llvm-cpu with iree-compile.
func compileFile(t testing.TB, compiler, src string, extra ...string) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), filepath.Base(src)+".vmfb")
	args := append([]string{
		"--iree-hal-target-device=local",
		"--iree-hal-local-target-device-backends=llvm-cpu",
		"--iree-llvmcpu-target-cpu=host",
	}, extra...)
	args = append(args, src, "-o", out)
	cmd := exec.Command(compiler, args...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("iree-compile %s: %v\n%s", src, err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestMatvec(t *testing.T) {
	lib, compiler := needRuntime(t)
	rt, err := Load(lib)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	m, err := rt.Open(compile(t, compiler, "matvec"), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	x := Tensor{Dims: []int64{1, 4}, Data: []float32{1, 2, 3, 4}}
	w := Tensor{Dims: []int64{4, 3}, Data: []float32{1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 1}}
	out, err := m.Call("module.matvec", []Tensor{x, w}, 1)
	if err != nil {
		t.Fatal(err)
	}
	want := []float32{5, 6, 7}
	if len(out) != 1 || len(out[0].Dims) != 2 || out[0].Dims[0] != 1 || out[0].Dims[1] != 3 {
		t.Fatalf("result shape %+v", out)
	}
	for i, v := range want {
		if out[0].Data[i] != v {
			t.Fatalf("result %v, want %v", out[0].Data, want)
		}
	}
}

func TestLoadMissing(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "libnone.so"))
	if err == nil || !strings.Contains(err.Error(), "libnone.so") {
		t.Fatalf("Load of a missing library: %v, want an error naming it", err)
	}
}

// A call that does not match the function's signature is an error from the
// runtime, and the module stays usable.
func TestCallBadInput(t *testing.T) {
	lib, compiler := needRuntime(t)
	rt, err := Load(lib)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	m, err := rt.Open(compile(t, compiler, "matvec"), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	x := Tensor{Dims: []int64{1, 4}, Data: []float32{1, 2, 3, 4}}
	bad := []struct {
		name string
		fn   string
		in   []Tensor
		want string
	}{
		{"shape", "module.matvec", []Tensor{x, {Dims: []int64{3, 3}, Data: make([]float32, 9)}}, "module.matvec"},
		{"arity", "module.matvec", []Tensor{x}, "module.matvec"},
		{"name", "module.nope", []Tensor{x, x}, "module.nope"},
		{"data", "module.matvec", []Tensor{{Dims: []int64{1, 4}, Data: []float32{1}}, x}, "1 values for dims [1 4]"},
	}
	for _, c := range bad {
		if _, err := m.Call(c.fn, c.in, 1); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want one containing %q", c.name, err, c.want)
		}
	}
	w := Tensor{Dims: []int64{4, 3}, Data: []float32{1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 1}}
	if out, err := m.Call("module.matvec", []Tensor{x, w}, 1); err != nil || out[0].Data[2] != 7 {
		t.Fatalf("after bad calls: %v %v", out, err)
	}
}
