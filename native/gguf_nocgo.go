//go:build !cgo

package native

import "github.com/picometer/picometer/gguf"

// ParseGGUF returns ErrNoCgo: the parser is C.
func ParseGGUF(b []byte) (*gguf.File, error) { return nil, ErrNoCgo }

// ReadGGUF returns ErrNoCgo: the parser is C.
func ReadGGUF(path string) (*gguf.File, error) { return nil, ErrNoCgo }

// ReadGGUFMeta returns ErrNoCgo: the parser is C.
func ReadGGUFMeta(path string) (*gguf.File, error) { return nil, ErrNoCgo }
