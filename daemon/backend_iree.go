//go:build iree

package daemon

import (
	"fmt"

	"github.com/picometer/picometer/native/iree"
)

// ireeBuilt reports whether this binary carries the IREE backend.
const ireeBuilt = true

// openIREE loads IREE's runtime library, which proves the C API picometer
// calls is there, and then refuses: native/iree's decode step runs one
// sequence reference-exact in its tests, but the engine that would serve
// with it (batched slots sharing a KV cache held on the device, the
// engine's metrics) is not written yet (issue 33, docs/IREE.md). The error
// says which of the two is missing.
func openIREE(cfg Config) (ownedEngine, error) {
	rt, err := iree.Load(cfg.Engine.IREERuntime)
	if err != nil {
		return nil, fmt.Errorf("engine.backend %q: %w", BackendIREE, err)
	}
	rt.Close()
	return nil, fmt.Errorf("engine.backend %q: the IREE runtime %s loads and exports every function picometer calls, "+
		"but picometer has no IREE engine yet: its decode step runs only in native/iree's tests (issue 33; docs/IREE.md)", BackendIREE, cfg.Engine.IREERuntime)
}
