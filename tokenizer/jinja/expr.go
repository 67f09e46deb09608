package jinja

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// token of an expression.
type tok struct {
	kind byte // 'n' name, 's' string, 'i' int, 'o' operator, 0 end
	s    string
	i    int64
}

func lex(src string) ([]tok, error) {
	var out []tok
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			j := i
			for j < len(src) && (src[j] == '_' || src[j] >= 'a' && src[j] <= 'z' || src[j] >= 'A' && src[j] <= 'Z' || src[j] >= '0' && src[j] <= '9') {
				j++
			}
			out = append(out, tok{kind: 'n', s: src[i:j]})
			i = j
		case c >= '0' && c <= '9':
			j := i
			for j < len(src) && src[j] >= '0' && src[j] <= '9' {
				j++
			}
			n, err := strconv.ParseInt(src[i:j], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("number %q: %v", src[i:j], err)
			}
			out = append(out, tok{kind: 'i', i: n})
			i = j
		case c == '\'' || c == '"':
			var sb strings.Builder
			j := i + 1
			for ; j < len(src) && src[j] != c; j++ {
				if src[j] == '\\' && j+1 < len(src) {
					j++
					switch src[j] {
					case 'n':
						sb.WriteByte('\n')
					case 't':
						sb.WriteByte('\t')
					case 'r':
						sb.WriteByte('\r')
					default:
						sb.WriteByte(src[j])
					}
					continue
				}
				sb.WriteByte(src[j])
			}
			if j >= len(src) {
				return nil, fmt.Errorf("unterminated string")
			}
			out = append(out, tok{kind: 's', s: sb.String()})
			i = j + 1
		default:
			op := string(c)
			if i+1 < len(src) {
				switch two := src[i : i+2]; two {
				case "==", "!=", "<=", ">=", "//", "**":
					op = two
				}
			}
			if !strings.Contains("()[]{}.,:|~+-*/%<>=!", string(c)) {
				return nil, fmt.Errorf("unexpected character %q", c)
			}
			out = append(out, tok{kind: 'o', s: op})
			i += len(op)
		}
	}
	return out, nil
}

// node is an expression.
type node interface{ eval(*scope) (any, error) }

type parser struct {
	t   []tok
	pos int
}

func (p *parser) peek() tok {
	if p.pos < len(p.t) {
		return p.t[p.pos]
	}
	return tok{}
}
func (p *parser) next() tok { t := p.peek(); p.pos++; return t }
func (p *parser) isOp(s string) bool {
	t := p.peek()
	return t.kind == 'o' && t.s == s
}
func (p *parser) isName(s string) bool {
	t := p.peek()
	return t.kind == 'n' && t.s == s
}
func (p *parser) expect(s string) error {
	if t := p.next(); t.kind != 'o' || t.s != s {
		return fmt.Errorf("expected %q, found %q", s, t.s)
	}
	return nil
}

func parseExpr(src string) (node, error) {
	t, err := lex(src)
	if err != nil {
		return nil, err
	}
	p := &parser{t: t}
	n, err := p.expr()
	if err != nil {
		return nil, err
	}
	if p.pos < len(p.t) {
		return nil, fmt.Errorf("unexpected %q", p.peek().s)
	}
	return n, nil
}

// expr: or-expression, optionally "X if C else Y".
func (p *parser) expr() (node, error) {
	a, err := p.or()
	if err != nil {
		return nil, err
	}
	if p.isName("if") {
		p.next()
		c, err := p.or()
		if err != nil {
			return nil, err
		}
		var b node = lit{undefined{}}
		if p.isName("else") {
			p.next()
			if b, err = p.expr(); err != nil {
				return nil, err
			}
		}
		return condNode{c, a, b}, nil
	}
	return a, nil
}

func (p *parser) or() (node, error) {
	return p.chain('n', []string{"or"}, p.and, logic)
}

func (p *parser) and() (node, error) {
	return p.chain('n', []string{"and"}, p.not, logic)
}

func (p *parser) not() (node, error) {
	if p.isName("not") {
		p.next()
		a, err := p.not()
		return notNode{a}, err
	}
	return p.compare()
}

func (p *parser) compare() (node, error) {
	a, err := p.concat()
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		switch {
		case t.kind == 'o' && (t.s == "==" || t.s == "!=" || t.s == "<" || t.s == ">" || t.s == "<=" || t.s == ">="):
			p.next()
			b, err := p.concat()
			if err != nil {
				return nil, err
			}
			a = binNode{t.s, a, b}
		case t.kind == 'n' && t.s == "in":
			p.next()
			b, err := p.concat()
			if err != nil {
				return nil, err
			}
			a = binNode{"in", a, b}
		case t.kind == 'n' && t.s == "not" && p.pos+1 < len(p.t) && p.t[p.pos+1].kind == 'n' && p.t[p.pos+1].s == "in":
			p.next()
			p.next()
			b, err := p.concat()
			if err != nil {
				return nil, err
			}
			a = notNode{binNode{"in", a, b}}
		case t.kind == 'n' && t.s == "is":
			p.next()
			neg := false
			if p.isName("not") {
				p.next()
				neg = true
			}
			name := p.next()
			if name.kind != 'n' {
				return nil, fmt.Errorf("expected a test name after 'is'")
			}
			a = testNode{name.s, a, neg}
		default:
			return a, nil
		}
	}
}

func (p *parser) concat() (node, error) {
	return p.chain('o', []string{"~"}, p.sum, binary)
}

func (p *parser) sum() (node, error) {
	return p.chain('o', []string{"+", "-"}, p.product, binary)
}

func (p *parser) product() (node, error) {
	return p.chain('o', []string{"*", "/", "%", "//"}, p.unary, binary)
}

// chain parses a left-associative run of operands joined by the operator
// tokens of kind in ops (a name such as "or", or a symbol such as "+");
// join builds the node of each operator. The first error ends it.
func (p *parser) chain(kind byte, ops []string, operand func() (node, error), join func(op string, a, b node) node) (node, error) {
	a, err := operand()
	for err == nil {
		t := p.peek()
		if t.kind != kind || !slices.Contains(ops, t.s) {
			break
		}
		p.next()
		var b node
		if b, err = operand(); err == nil {
			a = join(t.s, a, b)
		}
	}
	return a, err
}

func logic(op string, a, b node) node  { return logicNode{op, a, b} }
func binary(op string, a, b node) node { return binNode{op, a, b} }

func (p *parser) unary() (node, error) {
	if p.isOp("-") {
		p.next()
		a, err := p.unary()
		return binNode{"-", lit{int64(0)}, a}, err
	}
	return p.postfix()
}

// postfix: primary followed by .attr, [index or slice], (call), |filter.
func (p *parser) postfix() (node, error) {
	a, err := p.primary()
	if err != nil {
		return nil, err
	}
	for {
		switch {
		case p.isOp("."):
			p.next()
			name := p.next()
			if name.kind != 'n' {
				return nil, fmt.Errorf("expected a name after '.'")
			}
			a = attrNode{a, lit{name.s}}
		case p.isOp("["):
			p.next()
			var parts [3]node
			colons := 0
			for !p.isOp("]") {
				if p.isOp(":") {
					p.next()
					colons++
					if colons > 2 {
						return nil, fmt.Errorf("bad slice")
					}
					continue
				}
				e, err := p.expr()
				if err != nil {
					return nil, err
				}
				if parts[colons] != nil {
					return nil, fmt.Errorf("bad subscript")
				}
				parts[colons] = e
			}
			p.next()
			if colons == 0 && parts[0] == nil {
				return nil, fmt.Errorf("empty subscript")
			}
			if colons == 0 {
				a = attrNode{a, parts[0]}
			} else {
				a = sliceNode{a, parts}
			}
		case p.isOp("("):
			args, kw, err := p.args()
			if err != nil {
				return nil, err
			}
			a = callNode{a, args, kw}
		case p.isOp("|"):
			p.next()
			name := p.next()
			if name.kind != 'n' {
				return nil, fmt.Errorf("expected a filter name after '|'")
			}
			f := filterNode{name: name.s, x: a}
			if p.isOp("(") {
				if f.args, f.kw, err = p.args(); err != nil {
					return nil, err
				}
			}
			a = f
		default:
			return a, nil
		}
	}
}

func (p *parser) args() ([]node, map[string]node, error) {
	p.next() // (
	var args []node
	kw := map[string]node{}
	for !p.isOp(")") {
		if p.peek().kind == 0 {
			return nil, nil, fmt.Errorf("unclosed call")
		}
		if t := p.peek(); t.kind == 'n' && p.pos+1 < len(p.t) && p.t[p.pos+1].kind == 'o' && p.t[p.pos+1].s == "=" {
			p.pos += 2
			e, err := p.expr()
			if err != nil {
				return nil, nil, err
			}
			kw[t.s] = e
		} else {
			e, err := p.expr()
			if err != nil {
				return nil, nil, err
			}
			args = append(args, e)
		}
		if p.isOp(",") {
			p.next()
		}
	}
	p.next()
	return args, kw, nil
}

func (p *parser) primary() (node, error) {
	t := p.next()
	switch t.kind {
	case 's':
		s := t.s
		for p.peek().kind == 's' { // adjacent literals concatenate
			s += p.next().s
		}
		return lit{s}, nil
	case 'i':
		return lit{t.i}, nil
	case 'n':
		switch t.s {
		case "true", "True":
			return lit{true}, nil
		case "false", "False":
			return lit{false}, nil
		case "none", "None":
			return lit{nil}, nil
		}
		return nameNode(t.s), nil
	case 'o':
		switch t.s {
		case "(":
			e, err := p.expr()
			if err != nil {
				return nil, err
			}
			if p.isOp(",") { // a tuple
				items := []node{e}
				for p.isOp(",") {
					p.next()
					if p.isOp(")") {
						break
					}
					x, err := p.expr()
					if err != nil {
						return nil, err
					}
					items = append(items, x)
				}
				e = listNode(items)
			}
			return e, p.expect(")")
		case "[":
			var items []node
			for !p.isOp("]") {
				if p.peek().kind == 0 {
					return nil, fmt.Errorf("unclosed list")
				}
				e, err := p.expr()
				if err != nil {
					return nil, err
				}
				items = append(items, e)
				if p.isOp(",") {
					p.next()
				}
			}
			p.next()
			return listNode(items), nil
		case "{":
			var d dictNode
			for !p.isOp("}") {
				if p.peek().kind == 0 {
					return nil, fmt.Errorf("unclosed dict")
				}
				k, err := p.expr()
				if err != nil {
					return nil, err
				}
				if err := p.expect(":"); err != nil {
					return nil, err
				}
				v, err := p.expr()
				if err != nil {
					return nil, err
				}
				d = append(d, [2]node{k, v})
				if p.isOp(",") {
					p.next()
				}
			}
			p.next()
			return d, nil
		}
	}
	if t.kind == 0 {
		return nil, fmt.Errorf("unexpected end of expression")
	}
	return nil, fmt.Errorf("unexpected %q", t.s)
}
