//go:build !iree || !cgo

package iree

// Runtime is a loaded IREE runtime library; without -tags iree there is none.
type Runtime struct{}

// Module is a compiled program; without -tags iree there is none.
type Module struct{}

// Load returns [ErrNotBuilt]: this binary has no IREE binding.
func Load(path string) (*Runtime, error) { return nil, ErrNotBuilt }

// Close does nothing.
func (r *Runtime) Close() {}

// Open returns [ErrNotBuilt].
func (r *Runtime) Open(vmfb []byte, threads int) (*Module, error) { return nil, ErrNotBuilt }

// Call returns [ErrNotBuilt].
func (m *Module) Call(fn string, in []Tensor, nOut int) ([]Tensor, error) { return nil, ErrNotBuilt }

// Close does nothing.
func (m *Module) Close() {}
