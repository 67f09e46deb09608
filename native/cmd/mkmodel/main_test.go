package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/picometer/picometer/native/gguf"
	"github.com/picometer/picometer/native/gguf/modelgen"
)

func TestRun(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tiny.gguf")
	if err := run("tiny", path, 0, false, false); err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(dir, "want.gguf")
	if err := modelgen.Write(want, modelgen.Tiny); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(path)
	b, _ := os.ReadFile(want)
	if len(a) == 0 || !bytes.Equal(a, b) {
		t.Errorf("-preset tiny wrote %d bytes that differ from modelgen.Tiny's %d", len(a), len(b))
	}

	// -seed, -tied and -f16 reach the preset
	if err := run("tiny", path, 9, true, true); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := f.Get("picometer.seed")
	if seed != uint64(9) || f.Tensor("output.weight") != nil || f.Tensor("token_embd.weight").Type != gguf.F16 {
		t.Errorf("seed %v, output %v, token_embd %s", seed, f.Tensor("output.weight") != nil, f.Tensor("token_embd.weight").Type)
	}

	f2 := func(preset, out, want string) {
		t.Helper()
		if err := run(preset, out, 0, false, false); err == nil || err.Error() != want {
			t.Errorf("run(%q, %q): %v, want %q", preset, out, err, want)
		}
	}
	f2("huge", path, `-preset "huge": want default or tiny`)
	f2("tiny", "", "-o FILE is required")
	if err := run("tiny", filepath.Join(dir, "missing", "x.gguf"), 0, false, false); err == nil {
		t.Errorf("writing into a missing directory: no error")
	}
}
