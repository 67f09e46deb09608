package daemon

import (
	"fmt"

	"github.com/picometer/picometer/native"
)

// The engine backends engine.backend names. The native C engine is the
// default and the only one that serves today; "iree" is IREE's runtime
// (docs/IREE.md), present only in a picometerd built with -tags iree
// (backend_iree.go; backend_noiree.go refuses it by name otherwise).
const (
	BackendNative = "native"
	BackendIREE   = "iree"
)

// DefaultIREERuntime is where scripts/iree.sh (make iree) puts the IREE
// runtime library.
const DefaultIREERuntime = "build/iree/lib/libshortfin.so"

// ownedEngine is an Engine that Run opens and closes.
type ownedEngine interface {
	Engine
	Close() error
}

func (e *EngineConfig) validateBackend() error {
	switch e.Backend {
	case BackendNative:
		return nil
	case BackendIREE:
		if !ireeBuilt {
			return fmt.Errorf("engine.backend: %q needs picometerd built with -tags iree (docs/IREE.md)", e.Backend)
		}
		if e.IREERuntime == "" {
			return fmt.Errorf("engine.iree_runtime: empty; set IREE's runtime library (make iree puts one at %s)", DefaultIREERuntime)
		}
		return nil
	}
	return fmt.Errorf("engine.backend: %q is not %s or %s", e.Backend, BackendNative, BackendIREE)
}

// openEngine opens the model on the configured backend.
func openEngine(cfg Config) (ownedEngine, error) {
	if cfg.Engine.Backend == BackendIREE {
		return openIREE(cfg)
	}
	eng, err := native.Open(cfg.Model, cfg.NativeConfig())
	if err != nil {
		return nil, err
	}
	return eng, nil
}
