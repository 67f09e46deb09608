//go:build !cgo

package native

// ModelFile is what the C loader read from a GGUF file (see model_cgo.go;
// declared identically there).
type ModelFile struct {
	Info       ModelInfo
	HeadDim    int
	RMSEps     float32
	RopeTheta  float32
	TiedOutput bool
	F16        bool
	Alignment  uint32
	Tensors    int
	Meta       []MetaKV
}

// MetaKV is one metadata entry as the C loader found it (see model_cgo.go).
type MetaKV struct {
	Key   string
	Type  uint32
	Value []byte
}

// ReadModelFile returns ErrNoCgo: the loader is C.
func ReadModelFile(path string) (*ModelFile, error) { return nil, ErrNoCgo }

// ParseModel returns ErrNoCgo: the loader is C.
func ParseModel(b []byte) (*ModelFile, error) { return nil, ErrNoCgo }

// LoadModelInfo returns ErrNoCgo: the loader is C.
func LoadModelInfo(path string) (ModelInfo, error) { return ModelInfo{}, ErrNoCgo }

// ReadModelWeights returns ErrNoCgo: the loader is C.
func ReadModelWeights(path string) (map[string][]float32, error) { return nil, ErrNoCgo }
