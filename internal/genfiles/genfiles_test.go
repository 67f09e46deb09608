package genfiles

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{"a.txt": []byte("a\n"), "sub/b.txt": []byte("b\n")}
	if err := Write(dir, files); err != nil {
		t.Fatal(err)
	}
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || string(got) != string(want) {
			t.Errorf("%s: %q, %v; want %q", name, got, err, want)
		}
	}
	if err := Write(dir, map[string][]byte{"missing/c.txt": nil}); err == nil {
		t.Error("writing into a missing directory: no error")
	}
}
