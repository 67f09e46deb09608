//go:build iree && cgo

package daemon

import (
	"fmt"
	"os"

	"github.com/picometer/picometer/native/iree"
)

// ireeBuilt reports whether this binary carries the IREE backend.
const ireeBuilt = true

var _ Engine = (*iree.Engine)(nil)

// openIREE opens the model on IREE's engine (native/iree; docs/IREE.md):
// the runtime library engine.iree_runtime, the iree-compile that
// scripts/iree.sh puts beside it (or $PICOMETER_IREE_COMPILE) to compile
// the model's step for its shape and engine.b_max, cached under the user
// cache directory (picometer/iree) by a hash of the program, the compiler
// and the CPU. Errors name what is missing: the library, the compiler, or
// the part of the model the IREE step does not compute.
func openIREE(cfg Config) (ownedEngine, error) {
	o := iree.Options{
		Runtime:  cfg.Engine.IREERuntime,
		Compiler: os.Getenv("PICOMETER_IREE_COMPILE"),
		CacheDir: iree.DefaultCacheDir(),
		Config:   cfg.NativeConfig(),
	}
	eng, err := iree.OpenEngine(cfg.Model, o)
	if err != nil {
		return nil, fmt.Errorf("engine.backend %q: %w", BackendIREE, err)
	}
	return eng, nil
}
