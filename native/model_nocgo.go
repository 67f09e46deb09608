//go:build !cgo

package native

// ReadModelFile returns ErrNoCgo: the loader is C.
func ReadModelFile(path string) (*ModelFile, error) { return nil, ErrNoCgo }

// ParseModel returns ErrNoCgo: the loader is C.
func ParseModel(b []byte) (*ModelFile, error) { return nil, ErrNoCgo }

// LoadModelInfo returns ErrNoCgo: the loader is C.
func LoadModelInfo(path string) (ModelInfo, error) { return ModelInfo{}, ErrNoCgo }

// ReadModelWeights returns ErrNoCgo: the loader is C.
func ReadModelWeights(path string) (map[string][]float32, error) { return nil, ErrNoCgo }
