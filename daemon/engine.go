package daemon

import "github.com/picometer/picometer/native"

// Engine is what the daemon uses of *native.Engine (whose doc comments are
// the contract). Only the engine loop calls it, from one goroutine; tests
// substitute a fast in-process fake.
type Engine interface {
	Info() native.ModelInfo
	Config() native.Config
	Submit(prompt []int32, p native.Params) (native.ID, error)
	Step() ([]native.Output, error)
	Cancel(id native.ID) (*native.RequestStats, error)
	Load() (running, waiting int)
	Snapshot(dst *native.Snapshot)
}

var _ Engine = (*native.Engine)(nil)
