package daemon

// This file hands a request's constraint to the engine. Until the engine's
// constrained decoding (native.CompileGrammar, native.Params.Grammar,
// Engine.SetTokenBytes; the grammar branch of issue 26) is merged, an
// engine without SetTokenBytes (the C engine today) refuses constrained
// requests by name: accepting a constraint and not enforcing it would be
// the silent ignoring issue 26 removes. The tests' fake engine, which
// writes scripted answers, has it.

// tokenByteSetter is the part of an engine constrained decoding needs.
type tokenByteSetter interface {
	SetTokenBytes(tokens [][]byte) error
}

// setupGrammars records whether eng can enforce constraints.
func (d *Daemon) setupGrammars(eng Engine) {
	if _, ok := eng.(tokenByteSetter); !ok {
		d.grammarErr = "this build's engine has no constrained decoding, so the constraint would not be enforced"
	}
}

// compileConstraint refuses a constraint the engine cannot enforce.
func (d *Daemon) compileConstraint(c *constraintSpec) *apiError {
	if c == nil || d.grammarErr == "" {
		return nil
	}
	e := badRequest(c.param, "unsupported_parameter", "Unsupported parameter '%s': %s.", c.param, d.grammarErr)
	e.Constraint = c.kind
	return e
}

// checkMinP refuses min_p, which the engine cannot apply yet (it arrives
// with the same branch as constrained decoding): 0 (off) is accepted.
func (d *Daemon) checkMinP(r *genRequest) *apiError {
	if r.MinP == 0 || d.grammarErr == "" {
		return nil
	}
	return badRequest("min_p", "unsupported_parameter", "Unsupported parameter 'min_p': this build's engine has no min-p sampling, so it would not be applied; send 0 or leave it out.")
}
