//go:build !cgo

package native

// Grammar is unavailable without cgo; see the cgo build for its contract.
type Grammar struct{}

// CompileGrammar returns ErrNoCgo: the grammar compiler is C.
func CompileGrammar(gbnf string) (*Grammar, error) { return nil, ErrNoCgo }

// Free does nothing.
func (g *Grammar) Free() {}
