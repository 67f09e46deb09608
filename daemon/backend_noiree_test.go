//go:build !iree || !cgo

package daemon

import "testing"

// Without -tags iree the iree backend is refused by name, by Validate (so
// --check-config and startup exit 2 with the key) and by openEngine.
func TestBackendIREENotBuilt(t *testing.T) {
	c := DefaultConfig()
	c.Engine.Backend = BackendIREE
	const want = `engine.backend: "iree" needs picometerd built with -tags iree (docs/IREE.md)`
	if err := c.Validate(); err == nil || err.Error() != want {
		t.Fatalf("Validate: %v, want %q", err, want)
	}
	if eng, err := openEngine(c); eng != nil || err == nil || err.Error() != want {
		t.Fatalf("openEngine: %v, %v, want %q", eng, err, want)
	}
}
