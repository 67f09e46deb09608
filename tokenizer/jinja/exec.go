package jinja

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Render budgets: a template is code from a model file, so a rendering is
// bounded in what it writes and how long it runs.
const (
	maxOutput     = 16 << 20  // bytes of output, and of any one string or list
	maxIterations = 200_000   // loop iterations in one rendering
	maxSteps      = 5_000_000 // statements, calls and items filtered in one rendering
	maxCallDepth  = 64        // nested macro calls
)

var errOutput = fmt.Errorf("output over %d bytes", maxOutput)

// Options adjust a rendering.
type Options struct {
	// Now is the time strftime_now formats (in UTC); zero is time.Now().
	Now time.Time
}

// Raised is the error of raise_exception(message).
type Raised struct{ Message string }

func (r *Raised) Error() string { return "raise_exception: " + r.Message }

// Render renders the template with vars (Go values: string, bool, int,
// int64, float64, nil, []any, map[string]any, Func, or values built with
// ParseJSON, NewDict and NewList).
func (t *Template) Render(vars map[string]any) (string, error) {
	return t.Execute(vars, Options{})
}

// Execute is Render with options.
func (t *Template) Execute(vars map[string]any, o Options) (string, error) {
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	var sb strings.Builder
	st := &state{out: &sb, now: o.Now.UTC()}
	g := &ctx{st: st, vars: map[string]any{}}
	for k, v := range vars {
		g.vars[k] = toValue(v)
	}
	c := g.child()
	if err := runAll(c, t.body); err != nil {
		if l, ok := err.(loopCtl); ok {
			return "", fmt.Errorf("{%% %s %%} outside a loop", string(l))
		}
		return "", err
	}
	return sb.String(), nil
}

type state struct {
	out     *strings.Builder
	written int // bytes written to any buffer (captures count again)
	steps   int
	iters   int
	calls   int
	now     time.Time
}

// ctx is a scope: variables set here, then the enclosing scopes.
type ctx struct {
	st     *state
	vars   map[string]any
	parent *ctx
}

func (c *ctx) child() *ctx { return &ctx{st: c.st, vars: map[string]any{}, parent: c} }

func (c *ctx) lookup(name string) (any, bool) {
	for s := c; s != nil; s = s.parent {
		if v, ok := s.vars[name]; ok {
			return v, true
		}
	}
	if g, ok := globals[name]; ok {
		return g, true
	}
	return nil, false
}

func (c *ctx) write(s string) error {
	c.st.written += len(s)
	if c.st.written > maxOutput || c.st.out.Len()+len(s) > maxOutput {
		return errOutput
	}
	c.st.out.WriteString(s)
	return nil
}

func (c *ctx) step() error {
	if c.st.steps++; c.st.steps > maxSteps {
		return fmt.Errorf("rendering took over %d steps", maxSteps)
	}
	return nil
}

// capture runs body writing into a buffer of its own.
func (c *ctx) capture(body []stmt) (string, error) {
	saved := c.st.out
	var sb strings.Builder
	c.st.out = &sb
	err := runAll(c, body)
	c.st.out = saved
	return sb.String(), err
}

// lineError is a render error with the template line it happened on.
type lineError struct {
	line int32
	err  error
}

func (e *lineError) Error() string { return fmt.Sprintf("line %d: %v", e.line, e.err) }
func (e *lineError) Unwrap() error { return e.err }

func atLine(line int32, err error) error {
	if err == nil {
		return nil
	}
	if _, ok := err.(loopCtl); ok {
		return err
	}
	var le *lineError
	if errors.As(err, &le) || line == 0 {
		return err
	}
	return &lineError{line, err}
}

type stmt interface{ run(c *ctx) error }

func runAll(c *ctx, body []stmt) error {
	for _, s := range body {
		if err := c.step(); err != nil {
			return err
		}
		if err := s.run(c); err != nil {
			return err
		}
	}
	return nil
}

type textStmt string

func (t textStmt) run(c *ctx) error { return c.write(string(t)) }

type outputStmt struct {
	e    node
	line int32
}

func (t outputStmt) run(c *ctx) error {
	v, err := t.e.eval(c)
	if err != nil {
		return atLine(t.line, err)
	}
	return c.write(str(v))
}

// blockStmt is a body run in place ({% generation %}).
type blockStmt []stmt

func (b blockStmt) run(c *ctx) error { return runAll(c, b) }

type ifStmt struct {
	conds  []node
	bodies [][]stmt
	els    []stmt
	line   int32
}

func (t ifStmt) run(c *ctx) error {
	for i, cond := range t.conds {
		v, err := cond.eval(c)
		if err != nil {
			return atLine(t.line, err)
		}
		if truthy(v) {
			return runAll(c, t.bodies[i])
		}
	}
	return runAll(c, t.els)
}

// loopCtl is {% break %} or {% continue %}: run returns it as an error that
// the enclosing loop consumes.
type loopCtl string

func (l loopCtl) run(*ctx) error { return l }
func (l loopCtl) Error() string  { return "{% " + string(l) + " %} outside a loop" }

type forStmt struct {
	vars      []string
	iter      node
	cond      node // for … if cond
	body, els []stmt
	line      int32
}

func (t forStmt) run(c *ctx) error {
	v, err := t.iter.eval(c)
	if err != nil {
		return atLine(t.line, err)
	}
	all, err := iterate(v)
	if err != nil {
		return atLine(t.line, fmt.Errorf("{%% for %%}: %v", err))
	}
	all = append([]any(nil), all...) // the body may change the list
	lc := c.child()
	items := all
	if t.cond != nil {
		items = items[:0:0]
		for _, it := range all {
			if err := t.bind(lc, it); err != nil {
				return err
			}
			ok, err := t.cond.eval(lc)
			if err != nil {
				return atLine(t.line, err)
			}
			if truthy(ok) {
				items = append(items, it)
			}
		}
	}
	if len(items) == 0 {
		return runAll(c, t.els)
	}
	for i, it := range items {
		if c.st.iters++; c.st.iters > maxIterations {
			return atLine(t.line, fmt.Errorf("over %d loop iterations", maxIterations))
		}
		lc.vars["loop"] = &loopVal{items: items, i: i}
		if err := t.bind(lc, it); err != nil {
			return err
		}
		err := runAll(lc, t.body)
		if err == loopCtl("break") {
			break
		}
		if err != nil && err != loopCtl("continue") {
			return err
		}
	}
	return nil
}

// loopVal is the loop variable of one iteration; its attributes are
// computed when read.
type loopVal struct {
	items []any
	i     int
}

func (l *loopVal) attr(name string) any {
	i, n := l.i, len(l.items)
	switch name {
	case "index":
		return int64(i + 1)
	case "index0":
		return int64(i)
	case "revindex":
		return int64(n - i)
	case "revindex0":
		return int64(n - i - 1)
	case "first":
		return i == 0
	case "last":
		return i == n-1
	case "length":
		return int64(n)
	case "depth":
		return int64(1)
	case "depth0":
		return int64(0)
	case "previtem":
		if i > 0 {
			return l.items[i-1]
		}
	case "nextitem":
		if i+1 < n {
			return l.items[i+1]
		}
	case "cycle":
		return ctxFunc(func(_ *ctx, args []any, _ *Dict) (any, error) {
			if len(args) == 0 {
				return nil, fmt.Errorf("loop.cycle needs at least one value")
			}
			return args[i%len(args)], nil
		})
	}
	return Undefined{"loop." + name}
}

func (t forStmt) bind(c *ctx, it any) error {
	if len(t.vars) == 1 {
		c.vars[t.vars[0]] = it
		return nil
	}
	return atLine(t.line, unpack(c, t.vars, it))
}

func unpack(c *ctx, names []string, v any) error {
	items, err := iterate(v)
	if err != nil {
		return fmt.Errorf("cannot unpack %s", typeName(v))
	}
	if _, ok := v.(string); ok || len(items) != len(names) {
		if len(items) < len(names) {
			return fmt.Errorf("not enough values to unpack (expected %d, got %d)", len(names), len(items))
		}
		if len(items) > len(names) {
			return fmt.Errorf("too many values to unpack (expected %d)", len(names))
		}
	}
	for i, n := range names {
		c.vars[n] = items[i]
	}
	return nil
}

type setStmt struct {
	vars     []string // one name, or a tuple to unpack
	ns, attr string   // {% set ns.attr = … %}
	value    node
	isBlock  bool // {% set x %}…{% endset %}
	body     []stmt
	filters  []*filterNode
	line     int32
}

func (t setStmt) run(c *ctx) error {
	var v any
	if t.isBlock {
		s, err := c.capture(t.body)
		if err != nil {
			return err
		}
		v = s
		for _, f := range t.filters {
			if v, err = f.apply(c, v); err != nil {
				return atLine(t.line, err)
			}
		}
	} else {
		var err error
		if v, err = t.value.eval(c); err != nil {
			return atLine(t.line, err)
		}
	}
	switch {
	case t.ns != "":
		x, _ := c.lookup(t.ns)
		ns, ok := x.(*Namespace)
		if !ok {
			return atLine(t.line, fmt.Errorf("cannot set %s.%s: %s is a %s, not a namespace", t.ns, t.attr, t.ns, typeName(x)))
		}
		ns.d.Set(t.attr, v)
	case len(t.vars) == 1:
		c.vars[t.vars[0]] = v
	default:
		return atLine(t.line, unpack(c, t.vars, v))
	}
	return nil
}

// A macro: {% macro name(a, b=default) %}…{% endmacro %}.
type macroDef struct {
	name   string
	params []param
	body   []stmt
}

type param struct {
	name string
	def  node
}

type macro struct {
	def     *macroDef
	closure *ctx   // the scope it was defined in
	caller  *macro // {% call %}'s body, as caller()
}

type macroStmt struct{ def *macroDef }

func (t macroStmt) run(c *ctx) error {
	c.vars[t.def.name] = &macro{def: t.def, closure: c}
	return nil
}

// call binds arguments as Python Jinja does: positional, then keywords,
// then defaults; extra positional arguments are varargs, extra keywords
// kwargs.
func (m *macro) call(c *ctx, args []any, kw *Dict) (any, error) {
	st := c.st
	if st.calls >= maxCallDepth {
		return nil, fmt.Errorf("macro %s: calls nested deeper than %d", m.def.name, maxCallDepth)
	}
	st.calls++
	defer func() { st.calls-- }()
	mc := m.closure.child()
	mc.st = st
	kw = kw.copy()
	for i, p := range m.def.params {
		switch v, ok := kw.Get(p.name); {
		case i < len(args):
			if ok {
				return nil, fmt.Errorf("macro %s got multiple values for argument %s", m.def.name, p.name)
			}
			mc.vars[p.name] = args[i]
		case ok:
			mc.vars[p.name] = v
			kw.delete(p.name)
		case p.def != nil:
			dv, err := p.def.eval(mc)
			if err != nil {
				return nil, err
			}
			mc.vars[p.name] = dv
		default:
			mc.vars[p.name] = Undefined{p.name}
		}
	}
	var extra []any
	if len(args) > len(m.def.params) {
		extra = args[len(m.def.params):]
	}
	mc.vars["varargs"] = &List{items: append([]any{}, extra...), tuple: true}
	if cv, ok := kw.Get("caller"); ok {
		mc.vars["caller"] = cv
		kw.delete("caller")
	} else if m.caller != nil {
		mc.vars["caller"] = m.caller
	}
	mc.vars["kwargs"] = kw
	return mc.capture(m.def.body)
}

type callStmt struct {
	call   *callNode
	caller *macroDef
}

func (t callStmt) run(c *ctx) error {
	f, err := t.call.f.eval(c)
	if err != nil {
		return atLine(t.call.line, err)
	}
	m, ok := f.(*macro)
	if !ok {
		return atLine(t.call.line, fmt.Errorf("{%% call %%} needs a macro, not %s", typeName(f)))
	}
	args, kw, err := t.call.args.eval(c)
	if err != nil {
		return atLine(t.call.line, err)
	}
	kw.Set("caller", &macro{def: t.caller, closure: c})
	v, err := m.call(c, args, kw)
	if err != nil {
		return atLine(t.call.line, err)
	}
	return c.write(str(v))
}

type filterStmt struct {
	filters []*filterNode
	body    []stmt
}

func (t filterStmt) run(c *ctx) error {
	s, err := c.capture(t.body)
	if err != nil {
		return err
	}
	var v any = s
	for _, f := range t.filters {
		if v, err = f.apply(c, v); err != nil {
			return atLine(f.line, err)
		}
	}
	return c.write(str(v))
}
