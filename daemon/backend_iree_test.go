//go:build iree

package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// With -tags iree the iree backend validates, and opening it names what is
// missing: the runtime library when it is absent, the engine when the
// library loads (build/iree from make iree; skipped without it).
func TestBackendIREE(t *testing.T) {
	c := DefaultConfig()
	c.Engine.Backend = BackendIREE
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	c.Engine.IREERuntime = ""
	if err := c.Validate(); err == nil || !strings.HasPrefix(err.Error(), "engine.iree_runtime: empty") {
		t.Fatalf("Validate with no runtime: %v", err)
	}

	c.Engine.IREERuntime = filepath.Join(t.TempDir(), "libmissing.so")
	if eng, err := openEngine(c); eng != nil || err == nil || !strings.Contains(err.Error(), "libmissing.so") {
		t.Fatalf("openEngine with no library: %v, %v; want an error naming the library", eng, err)
	}

	lib := filepath.Join("..", DefaultIREERuntime)
	if _, err := os.Stat(lib); err != nil {
		t.Skipf("%v (make iree)", err)
	}
	c.Engine.IREERuntime = lib
	eng, err := openEngine(c)
	if eng != nil || err == nil || !strings.Contains(err.Error(), "no IREE engine yet") {
		t.Fatalf("openEngine with the runtime: %v, %v; want the missing engine named", eng, err)
	}
}
