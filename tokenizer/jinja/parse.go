package jinja

import (
	"fmt"
	"slices"
)

// Template is a parsed template.
type Template struct{ body []stmt }

// Parse parses a template. Errors name the line and the construct.
func Parse(src string) (*Template, error) {
	toks, err := lex(src)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks}
	body, end, err := p.block()
	if err != nil {
		return nil, err
	}
	if end != "" {
		return nil, p.errorf("unexpected {%% %s %%}", end)
	}
	return &Template{body: body}, nil
}

type parser struct {
	toks  []token
	pos   int
	depth int
}

func (p *parser) peek() token { return p.toks[p.pos] }

func (p *parser) peekAt(n int) token {
	if p.pos+n < len(p.toks) {
		return p.toks[p.pos+n]
	}
	return token{}
}

func (p *parser) next() token {
	t := p.toks[p.pos]
	if t.kind != tEOF {
		p.pos++
	}
	return t
}

func (p *parser) errorf(format string, args ...any) error {
	return fmt.Errorf("line %d: %s", p.peek().line, fmt.Sprintf(format, args...))
}

func (p *parser) isOp(s string) bool   { t := p.peek(); return t.kind == tOp && t.s == s }
func (p *parser) isName(s string) bool { t := p.peek(); return t.kind == tName && t.s == s }

func (p *parser) expectOp(s string) error {
	if !p.isOp(s) {
		return p.errorf("expected '%s', found %s", s, p.peek())
	}
	p.next()
	return nil
}

func (p *parser) expectName() (string, error) {
	t := p.peek()
	if t.kind != tName {
		return "", p.errorf("expected a name, found %s", t)
	}
	p.next()
	return t.s, nil
}

func (p *parser) expectBlockEnd(what string) error {
	if p.peek().kind != tBlockEnd {
		return p.errorf("unexpected %s in {%% %s %%}", p.peek(), what)
	}
	p.next()
	return nil
}

// enter counts one level of nesting; a template nested deeper than
// maxDepth is refused (a parse stays linear and the stack bounded).
func (p *parser) enter() error {
	p.depth++
	if p.depth > maxDepth {
		return p.errorf("template nested deeper than %d levels", maxDepth)
	}
	return nil
}

func (p *parser) leave() { p.depth-- }

// Block-ending tags: block returns when it meets one of these, having
// consumed "{%" and the tag's name.
var endTags = []string{"elif", "else", "endif", "endfor", "endset", "endmacro", "endcall", "endfilter", "endgeneration"}

// block parses statements up to an end tag (returned, "" at the end of
// the template).
func (p *parser) block() ([]stmt, string, error) {
	var body []stmt
	for {
		t := p.next()
		switch t.kind {
		case tEOF:
			return body, "", nil
		case tText:
			body = append(body, textStmt(t.s))
		case tVarBegin:
			e, err := p.expr()
			if err != nil {
				return nil, "", err
			}
			if p.peek().kind != tVarEnd {
				return nil, "", p.errorf("unexpected %s in {{ }}", p.peek())
			}
			p.next()
			body = append(body, outputStmt{e, t.line})
		case tBlockBegin:
			nt := p.peek()
			if nt.kind != tName {
				return nil, "", p.errorf("expected a statement name after {%%, found %s", nt)
			}
			if slices.Contains(endTags, nt.s) {
				p.next()
				return body, nt.s, nil
			}
			st, err := p.statement()
			if err != nil {
				return nil, "", err
			}
			if st != nil {
				body = append(body, st)
			}
		default:
			return nil, "", p.errorf("unexpected %s", t)
		}
	}
}

// blockUntil parses a body that must end with one of ends.
func (p *parser) blockUntil(what string, line int32, ends ...string) ([]stmt, string, error) {
	if err := p.enter(); err != nil {
		return nil, "", err
	}
	defer p.leave()
	body, end, err := p.block()
	if err != nil {
		return nil, "", err
	}
	if !slices.Contains(ends, end) {
		if end == "" {
			return nil, "", fmt.Errorf("line %d: {%% %s %%} is not closed: missing {%% %s %%}", line, what, ends[len(ends)-1])
		}
		return nil, "", p.errorf("unexpected {%% %s %%} in {%% %s %%} of line %d", end, what, line)
	}
	return body, end, nil
}

func (p *parser) statement() (stmt, error) {
	t := p.next()
	line := t.line
	switch t.s {
	case "if":
		return p.ifStmt(line)
	case "for":
		return p.forStmt(line)
	case "set":
		return p.setStmt(line)
	case "macro":
		return p.macroStmt(line)
	case "call":
		return p.callStmt(line)
	case "filter":
		return p.filterStmt(line)
	case "generation":
		if err := p.expectBlockEnd("generation"); err != nil {
			return nil, err
		}
		body, _, err := p.blockUntil("generation", line, "endgeneration")
		if err != nil {
			return nil, err
		}
		return blockStmt(body), p.expectBlockEnd("endgeneration")
	case "break", "continue":
		return loopCtl(t.s), p.expectBlockEnd(t.s)
	}
	return nil, fmt.Errorf("line %d: unknown statement {%% %s %%}", line, t.s)
}

func (p *parser) ifStmt(line int32) (stmt, error) {
	st := ifStmt{line: line}
	for {
		c, err := p.expr()
		if err != nil {
			return nil, err
		}
		if err := p.expectBlockEnd("if"); err != nil {
			return nil, err
		}
		body, end, err := p.blockUntil("if", line, "elif", "else", "endif")
		if err != nil {
			return nil, err
		}
		st.conds = append(st.conds, c)
		st.bodies = append(st.bodies, body)
		switch end {
		case "elif":
			continue
		case "else":
			if err := p.expectBlockEnd("else"); err != nil {
				return nil, err
			}
			if st.els, _, err = p.blockUntil("if", line, "endif"); err != nil {
				return nil, err
			}
		}
		return st, p.expectBlockEnd("endif")
	}
}

// targets parses assignment names: "a" or "a, b" or "(a, b)".
func (p *parser) targets() ([]string, error) {
	paren := p.isOp("(")
	if paren {
		p.next()
	}
	var names []string
	for {
		n, err := p.expectName()
		if err != nil {
			return nil, err
		}
		names = append(names, n)
		if !p.isOp(",") {
			break
		}
		p.next()
		if p.peek().kind != tName {
			break
		}
	}
	if paren {
		return names, p.expectOp(")")
	}
	return names, nil
}

func (p *parser) forStmt(line int32) (stmt, error) {
	st := forStmt{line: line}
	var err error
	if st.vars, err = p.targets(); err != nil {
		return nil, err
	}
	if !p.isName("in") {
		return nil, p.errorf("expected 'in' in {%% for %%}, found %s", p.peek())
	}
	p.next()
	if st.iter, err = p.or(); err != nil {
		return nil, err
	}
	if p.isName("if") {
		p.next()
		if st.cond, err = p.or(); err != nil {
			return nil, err
		}
	}
	if p.isName("recursive") {
		return nil, p.errorf("recursive for loops are not supported")
	}
	if err := p.expectBlockEnd("for"); err != nil {
		return nil, err
	}
	body, end, err := p.blockUntil("for", line, "else", "endfor")
	if err != nil {
		return nil, err
	}
	st.body = body
	if end == "else" {
		if err := p.expectBlockEnd("else"); err != nil {
			return nil, err
		}
		if st.els, _, err = p.blockUntil("for", line, "endfor"); err != nil {
			return nil, err
		}
	}
	return st, p.expectBlockEnd("endfor")
}

func (p *parser) setStmt(line int32) (stmt, error) {
	st := setStmt{line: line}
	if p.peek().kind == tName && p.peekAt(1).kind == tOp && p.peekAt(1).s == "." {
		st.ns = p.next().s
		p.next()
		attr, err := p.expectName()
		if err != nil {
			return nil, err
		}
		st.attr = attr
		st.vars = []string{st.ns}
	} else {
		var err error
		if st.vars, err = p.targets(); err != nil {
			return nil, err
		}
	}
	if p.isOp("=") {
		p.next()
		e, err := p.tuple()
		if err != nil {
			return nil, err
		}
		st.value = e
		return st, p.expectBlockEnd("set")
	}
	// block set: {% set x %}…{% endset %}, optionally filtered.
	if st.ns != "" || len(st.vars) != 1 {
		return nil, p.errorf("block {%% set %%} assigns one name")
	}
	for p.isOp("|") {
		p.next()
		f, err := p.filterCall(nil)
		if err != nil {
			return nil, err
		}
		st.filters = append(st.filters, f)
	}
	if err := p.expectBlockEnd("set"); err != nil {
		return nil, err
	}
	body, _, err := p.blockUntil("set", line, "endset")
	if err != nil {
		return nil, err
	}
	st.body = body
	st.isBlock = true
	return st, p.expectBlockEnd("endset")
}

// params parses a macro's or call block's parameter list.
func (p *parser) params() ([]param, error) {
	var ps []param
	if err := p.expectOp("("); err != nil {
		return nil, err
	}
	for !p.isOp(")") {
		n, err := p.expectName()
		if err != nil {
			return nil, err
		}
		for _, q := range ps {
			if q.name == n {
				return nil, p.errorf("duplicate parameter %s", n)
			}
		}
		pa := param{name: n}
		if p.isOp("=") {
			p.next()
			if pa.def, err = p.expr(); err != nil {
				return nil, err
			}
		}
		ps = append(ps, pa)
		if !p.isOp(",") {
			break
		}
		p.next()
	}
	return ps, p.expectOp(")")
}

func (p *parser) macroStmt(line int32) (stmt, error) {
	name, err := p.expectName()
	if err != nil {
		return nil, err
	}
	m := &macroDef{name: name}
	if m.params, err = p.params(); err != nil {
		return nil, err
	}
	if err := p.expectBlockEnd("macro"); err != nil {
		return nil, err
	}
	if m.body, _, err = p.blockUntil("macro", line, "endmacro"); err != nil {
		return nil, err
	}
	return macroStmt{m}, p.expectBlockEnd("endmacro")
}

func (p *parser) callStmt(line int32) (stmt, error) {
	caller := &macroDef{name: "caller"}
	var err error
	if p.isOp("(") {
		if caller.params, err = p.params(); err != nil {
			return nil, err
		}
	}
	e, err := p.expr()
	if err != nil {
		return nil, err
	}
	call, ok := e.(*callNode)
	if !ok {
		return nil, p.errorf("{%% call %%} needs a macro call")
	}
	if err := p.expectBlockEnd("call"); err != nil {
		return nil, err
	}
	if caller.body, _, err = p.blockUntil("call", line, "endcall"); err != nil {
		return nil, err
	}
	return callStmt{call: call, caller: caller}, p.expectBlockEnd("endcall")
}

func (p *parser) filterStmt(line int32) (stmt, error) {
	var fs []*filterNode
	for {
		f, err := p.filterCall(nil)
		if err != nil {
			return nil, err
		}
		fs = append(fs, f)
		if !p.isOp("|") {
			break
		}
		p.next()
	}
	if err := p.expectBlockEnd("filter"); err != nil {
		return nil, err
	}
	body, _, err := p.blockUntil("filter", line, "endfilter")
	if err != nil {
		return nil, err
	}
	return filterStmt{filters: fs, body: body}, p.expectBlockEnd("endfilter")
}
