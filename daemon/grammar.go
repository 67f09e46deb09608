package daemon

import (
	"github.com/picometer/picometer/constraint"
	"github.com/picometer/picometer/native"
)

// This file hands a request's constraint to the engine: its GBNF text
// compiled by native.CompileGrammar, cached by text in a bounded LRU. A
// compiled grammar is immutable and shared by any number of requests; one
// evicted while a handler holds it is freed by its finalizer once nothing
// refers to it, never explicitly here, so a handler that got it from the
// cache can still submit it. The engine gets the token bytes grammars
// match against once, before the loop starts (setupGrammars).

// grammarCacheSize is how many compiled grammars are kept.
const grammarCacheSize = 128

// tokenByteSetter is the part of an engine constrained decoding needs.
type tokenByteSetter interface {
	SetTokenBytes(tokens [][]byte) error
}

// tokenBytes lists the bytes of each of vocab tokens as grammars match
// them: a token's text, nil for a control token (never allowed by a
// grammar; the engine allows EOS and the chat's stop tokens where the
// grammar may end).
func (c *codec) tokenBytes(vocab int) [][]byte {
	out := make([][]byte, vocab)
	for i := range out {
		id := int32(i)
		switch {
		case c.tk == nil:
			if native.IsByte(id) {
				out[i] = []byte{byte(i)}
			}
		case i < c.size && !c.tk.IsControl(id):
			out[i] = c.tk.Piece(id)
		}
	}
	return out
}

// setupGrammars gives the engine its token bytes; an engine that cannot
// take them serves no constrained request (each is a 400 saying so). It
// runs before the engine loop starts (the loop owns the engine after).
func (d *Daemon) setupGrammars(eng Engine) {
	d.grammars = constraint.NewCache[*native.Grammar](grammarCacheSize)
	s, ok := eng.(tokenByteSetter)
	if !ok {
		d.grammarErr = "this engine has no constrained decoding, so the constraint would not be enforced"
		return
	}
	if err := s.SetTokenBytes(d.codec.tokenBytes(d.info.Vocab)); err != nil {
		d.grammarErr = "constrained decoding is unavailable: " + err.Error() // each constrained request's 400 says so
	}
}

// compileConstraint compiles (or finds cached) the grammar of c; compileNS
// is the time compiling took (0 when cached).
func (d *Daemon) compileConstraint(c *constraintSpec) (g *native.Grammar, compileNS int64, e *apiError) {
	if c == nil {
		return nil, 0, nil
	}
	if d.grammarErr != "" {
		return nil, 0, badRequest(c.param, "unsupported_parameter", "Unsupported parameter '%s': %s.", c.param, d.grammarErr)
	}
	if g, ok := d.grammars.Get(c.gbnf); ok {
		return g, 0, nil
	}
	t0 := d.clock()
	g, err := native.CompileGrammar(c.gbnf)
	if err != nil {
		return nil, 0, badRequest(c.param, "invalid_value", "Invalid '%s': %v", c.param, err)
	}
	compileNS = max(d.clock()-t0, 1)
	d.grammars.Add(c.gbnf, g)
	return g, compileNS, nil
}
