//go:build iree

package daemon

import (
	"fmt"

	"github.com/picometer/picometer/native/iree"
)

// ireeBuilt reports whether this binary carries the IREE backend.
const ireeBuilt = true

// openIREE loads IREE's runtime library, which proves the C API picometer
// calls is there, and then refuses: the decode step that would run the
// model on it (a program compiled by iree-compile, batched slots sharing a
// KV cache) is not written yet (issue 33, docs/IREE.md). The error says
// which of the two is missing.
func openIREE(cfg Config) (ownedEngine, error) {
	rt, err := iree.Load(cfg.Engine.IREERuntime)
	if err != nil {
		return nil, fmt.Errorf("engine.backend %q: %w", BackendIREE, err)
	}
	rt.Close()
	return nil, fmt.Errorf("engine.backend %q: the IREE runtime %s loads and exports every function picometer calls, "+
		"but picometer has no IREE decode step yet (issue 33; docs/IREE.md)", BackendIREE, cfg.Engine.IREERuntime)
}
