//go:build !cgo

package native

// Engine is unavailable without cgo; see the cgo build for its contract.
type Engine struct{}

// Open returns ErrNoCgo: the engine needs cgo.
func Open(path string, cfg Config) (*Engine, error) { return nil, ErrNoCgo }

// Info is unavailable without cgo.
func (e *Engine) Info() ModelInfo { return ModelInfo{} }

// Config is unavailable without cgo.
func (e *Engine) Config() Config { return Config{} }

// Submit returns ErrNoCgo.
func (e *Engine) Submit(prompt []int32, p Params) (ID, error) { return 0, ErrNoCgo }

// Step returns ErrNoCgo.
func (e *Engine) Step() ([]Output, error) { return nil, ErrNoCgo }

// Cancel returns ErrNoCgo.
func (e *Engine) Cancel(id ID) (*RequestStats, error) { return nil, ErrNoCgo }

// Load returns zeros.
func (e *Engine) Load() (running, waiting int) { return 0, 0 }

// Snapshot does nothing.
func (e *Engine) Snapshot(dst *Snapshot) {}

// Close does nothing.
func (e *Engine) Close() error { return nil }

// SetTokenBytes returns ErrNoCgo.
func (e *Engine) SetTokenBytes(tokens [][]byte) error { return ErrNoCgo }
