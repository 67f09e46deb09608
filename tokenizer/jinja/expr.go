package jinja

import (
	"math/big"
	"strconv"
)

// Expression nodes (evaluated in eval.go).
type node interface{ eval(c *ctx) (any, error) }

type (
	lit      struct{ v any }
	nameNode struct {
		name string
		line int32
	}
	listNode struct {
		items []node
		tuple bool
	}
	dictNode struct{ kv [][2]node }
	condNode struct{ c, a, b node } // b nil: undefined
	andNode  struct{ a, b node }
	orNode   struct{ a, b node }
	notNode  struct{ a node }
	negNode  struct {
		a   node
		neg bool
	}
	binNode struct {
		op   string
		a, b node
	}
	compareNode struct {
		first node
		ops   []string
		rest  []node
	}
	attrNode struct {
		x    node
		name string
	}
	itemNode  struct{ x, key node }
	sliceNode struct {
		x     node
		parts [3]node
	}
	callNode struct {
		f    node
		args callArgs
		line int32
	}
	filterNode struct {
		name string
		x    node // nil in {% filter %} and block set: the body
		args callArgs
		line int32
	}
	testNode struct {
		name string
		x    node
		args callArgs
		neg  bool
		line int32
	}
)

type kwArg struct {
	name string
	e    node
}

type callArgs struct {
	pos         []node
	kw          []kwArg
	star, dstar node // *args, **kwargs
}

// tuple: an expression, or several separated by commas (a tuple).
func (p *parser) tuple() (node, error) {
	e, err := p.expr()
	if err != nil || !p.isOp(",") {
		return e, err
	}
	items := []node{e}
	for p.isOp(",") {
		p.next()
		if !p.startsExpr() {
			break
		}
		x, err := p.expr()
		if err != nil {
			return nil, err
		}
		items = append(items, x)
	}
	return listNode{items, true}, nil
}

func (p *parser) startsExpr() bool {
	t := p.peek()
	switch t.kind {
	case tName, tString, tInt, tFloat:
		return true
	case tOp:
		return t.s == "(" || t.s == "[" || t.s == "{" || t.s == "-" || t.s == "+"
	}
	return false
}

// expr: a conditional expression "A if C else B" (else optional).
func (p *parser) expr() (node, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	a, err := p.or()
	if err != nil || !p.isName("if") {
		return a, err
	}
	p.next()
	c, err := p.or()
	if err != nil {
		return nil, err
	}
	var b node
	if p.isName("else") {
		p.next()
		if b, err = p.expr(); err != nil {
			return nil, err
		}
	}
	return condNode{c, a, b}, nil
}

func (p *parser) or() (node, error) {
	a, err := p.and()
	for err == nil && p.isName("or") {
		p.next()
		var b node
		if b, err = p.and(); err == nil {
			a = orNode{a, b}
		}
	}
	return a, err
}

func (p *parser) and() (node, error) {
	a, err := p.not()
	for err == nil && p.isName("and") {
		p.next()
		var b node
		if b, err = p.not(); err == nil {
			a = andNode{a, b}
		}
	}
	return a, err
}

func (p *parser) not() (node, error) {
	if p.isName("not") {
		p.next()
		if err := p.enter(); err != nil {
			return nil, err
		}
		defer p.leave()
		a, err := p.not()
		return notNode{a}, err
	}
	return p.compare()
}

func (p *parser) compare() (node, error) {
	a, err := p.math1()
	if err != nil {
		return nil, err
	}
	cn := compareNode{first: a}
	for {
		t := p.peek()
		op := ""
		switch {
		case t.kind == tOp && (t.s == "==" || t.s == "!=" || t.s == "<" || t.s == ">" || t.s == "<=" || t.s == ">="):
			op = t.s
			p.next()
		case t.kind == tName && t.s == "in":
			op = "in"
			p.next()
		case t.kind == tName && t.s == "not" && p.peekAt(1).kind == tName && p.peekAt(1).s == "in":
			op = "not in"
			p.next()
			p.next()
		}
		if op == "" {
			break
		}
		b, err := p.math1()
		if err != nil {
			return nil, err
		}
		cn.ops = append(cn.ops, op)
		cn.rest = append(cn.rest, b)
	}
	if len(cn.ops) == 0 {
		return a, nil
	}
	return cn, nil
}

// binary parses a left-associative run of next joined by ops.
func (p *parser) binary(next func() (node, error), ops ...string) (node, error) {
	a, err := next()
	for err == nil {
		t := p.peek()
		if t.kind != tOp || !contains(ops, t.s) {
			break
		}
		p.next()
		var b node
		if b, err = next(); err == nil {
			a = binNode{t.s, a, b}
		}
	}
	return a, err
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func (p *parser) math1() (node, error)  { return p.binary(p.concat, "+", "-") }
func (p *parser) concat() (node, error) { return p.binary(p.math2, "~") }
func (p *parser) math2() (node, error)  { return p.binary(p.pow, "*", "/", "//", "%") }
func (p *parser) pow() (node, error)    { return p.binary(p.unary, "**") }

func (p *parser) unary() (node, error) {
	if p.isOp("-") || p.isOp("+") {
		neg := p.next().s == "-"
		if err := p.enter(); err != nil {
			return nil, err
		}
		defer p.leave()
		a, err := p.unaryNoFilter()
		if err != nil {
			return nil, err
		}
		return p.filters(negNode{a, neg})
	}
	a, err := p.primary()
	if err != nil {
		return nil, err
	}
	if a, err = p.postfix(a); err != nil {
		return nil, err
	}
	return p.filters(a)
}

func (p *parser) unaryNoFilter() (node, error) {
	if p.isOp("-") || p.isOp("+") {
		neg := p.next().s == "-"
		if err := p.enter(); err != nil {
			return nil, err
		}
		defer p.leave()
		a, err := p.unaryNoFilter()
		return negNode{a, neg}, err
	}
	a, err := p.primary()
	if err != nil {
		return nil, err
	}
	return p.postfix(a)
}

// postfix: .attr, [subscript or slice], (call).
func (p *parser) postfix(a node) (node, error) {
	for {
		switch {
		case p.isOp("."):
			p.next()
			t := p.next()
			switch t.kind {
			case tName:
				a = attrNode{a, t.s}
			case tInt:
				n, _ := strconv.ParseInt(t.s, 10, 64)
				a = itemNode{a, lit{n}}
			default:
				return nil, p.errorf("expected a name after '.', found %s", t)
			}
		case p.isOp("["):
			p.next()
			var parts [3]node
			colons := 0
			for !p.isOp("]") {
				if p.peek().kind == tEOF || p.peek().kind == tVarEnd || p.peek().kind == tBlockEnd {
					return nil, p.errorf("'[' is not closed")
				}
				if p.isOp(":") {
					p.next()
					if colons++; colons > 2 {
						return nil, p.errorf("a slice has at most 3 parts")
					}
					continue
				}
				if parts[colons] != nil {
					return nil, p.errorf("unexpected %s in a subscript", p.peek())
				}
				e, err := p.tuple()
				if err != nil {
					return nil, err
				}
				parts[colons] = e
			}
			p.next()
			switch {
			case colons > 0:
				a = sliceNode{a, parts}
			case parts[0] == nil:
				return nil, p.errorf("empty subscript []")
			default:
				a = itemNode{a, parts[0]}
			}
		case p.isOp("("):
			line := p.peek().line
			args, err := p.callArgs()
			if err != nil {
				return nil, err
			}
			a = &callNode{a, args, line}
		default:
			return a, nil
		}
	}
}

// filters: "| name(args)" and "is [not] test args", in any number.
func (p *parser) filters(a node) (node, error) {
	for {
		switch {
		case p.isOp("|"):
			p.next()
			f, err := p.filterCall(a)
			if err != nil {
				return nil, err
			}
			a = f
		case p.isName("is"):
			p.next()
			t := testNode{x: a, line: p.peek().line}
			if p.isName("not") {
				p.next()
				t.neg = true
			}
			name, err := p.expectName()
			if err != nil {
				return nil, err
			}
			t.name = name
			for p.isOp(".") { // dotted test names
				p.next()
				n, err := p.expectName()
				if err != nil {
					return nil, err
				}
				t.name += "." + n
			}
			switch nt := p.peek(); {
			case p.isOp("("):
				if t.args, err = p.callArgs(); err != nil {
					return nil, err
				}
			case nt.kind == tString || nt.kind == tInt || nt.kind == tFloat || p.isOp("[") || p.isOp("{") ||
				nt.kind == tName && nt.s != "else" && nt.s != "or" && nt.s != "and" && nt.s != "if" && nt.s != "in" && nt.s != "not" && nt.s != "is":
				arg, err := p.primary()
				if err != nil {
					return nil, err
				}
				if arg, err = p.postfix(arg); err != nil {
					return nil, err
				}
				t.args.pos = []node{arg}
			}
			a = t
		default:
			return a, nil
		}
	}
}

func (p *parser) filterCall(x node) (*filterNode, error) {
	line := p.peek().line
	name, err := p.expectName()
	if err != nil {
		return nil, err
	}
	for p.isOp(".") {
		p.next()
		n, err := p.expectName()
		if err != nil {
			return nil, err
		}
		name += "." + n
	}
	f := &filterNode{name: name, x: x, line: line}
	if p.isOp("(") {
		if f.args, err = p.callArgs(); err != nil {
			return nil, err
		}
	}
	return f, nil
}

func (p *parser) callArgs() (callArgs, error) {
	var a callArgs
	if err := p.enter(); err != nil {
		return a, err
	}
	defer p.leave()
	p.next() // (
	for !p.isOp(")") {
		switch {
		case p.isOp("*"):
			p.next()
			e, err := p.expr()
			if err != nil {
				return a, err
			}
			a.star = e
		case p.isOp("**"):
			p.next()
			e, err := p.expr()
			if err != nil {
				return a, err
			}
			a.dstar = e
		case p.peek().kind == tName && p.peekAt(1).kind == tOp && p.peekAt(1).s == "=":
			name := p.next().s
			p.next()
			e, err := p.expr()
			if err != nil {
				return a, err
			}
			for _, k := range a.kw {
				if k.name == name {
					return a, p.errorf("keyword argument %s repeated", name)
				}
			}
			a.kw = append(a.kw, kwArg{name, e})
		default:
			e, err := p.expr()
			if err != nil {
				return a, err
			}
			if len(a.kw) > 0 {
				return a, p.errorf("positional argument follows keyword argument")
			}
			a.pos = append(a.pos, e)
		}
		if !p.isOp(",") {
			break
		}
		p.next()
	}
	return a, p.expectOp(")")
}

func (p *parser) primary() (node, error) {
	t := p.next()
	switch t.kind {
	case tString:
		s := t.s
		for p.peek().kind == tString { // adjacent literals concatenate
			s += p.next().s
		}
		return lit{s}, nil
	case tInt:
		if n, err := strconv.ParseInt(t.s, 10, 64); err == nil {
			return lit{n}, nil
		}
		b, _ := new(big.Int).SetString(t.s, 10)
		return lit{b}, nil
	case tFloat:
		f, err := strconv.ParseFloat(t.s, 64)
		if err != nil {
			return nil, p.errorf("bad number %s", t.s)
		}
		return lit{f}, nil
	case tName:
		switch t.s {
		case "true", "True":
			return lit{true}, nil
		case "false", "False":
			return lit{false}, nil
		case "none", "None":
			return lit{nil}, nil
		}
		return nameNode{t.s, t.line}, nil
	case tOp:
		switch t.s {
		case "(":
			if p.isOp(")") { // empty tuple
				p.next()
				return listNode{nil, true}, nil
			}
			e, err := p.tuple()
			if err != nil {
				return nil, err
			}
			return e, p.expectOp(")")
		case "[":
			var items []node
			for !p.isOp("]") {
				e, err := p.expr()
				if err != nil {
					return nil, err
				}
				items = append(items, e)
				if !p.isOp(",") {
					break
				}
				p.next()
			}
			return listNode{items, false}, p.expectOp("]")
		case "{":
			var d dictNode
			for !p.isOp("}") {
				k, err := p.expr()
				if err != nil {
					return nil, err
				}
				if err := p.expectOp(":"); err != nil {
					return nil, err
				}
				v, err := p.expr()
				if err != nil {
					return nil, err
				}
				d.kv = append(d.kv, [2]node{k, v})
				if !p.isOp(",") {
					break
				}
				p.next()
			}
			return d, p.expectOp("}")
		}
	case tEOF, tVarEnd, tBlockEnd:
		if t.kind != tEOF {
			p.pos--
		}
		return nil, p.errorf("unexpected %s: an expression is incomplete", t)
	}
	return nil, p.errorf("unexpected %s in an expression", t)
}
