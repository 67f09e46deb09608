package jinja

import (
	"fmt"
	"strings"
)

// Template is a parsed template.
type Template struct{ body []stmt }

type stmt interface{ run(*scope) error }

type textStmt string

func (t textStmt) run(s *scope) error { return s.write(string(t)) }

type exprStmt struct{ e node }

func (t exprStmt) run(s *scope) error {
	v, err := t.e.eval(s)
	if err != nil {
		return err
	}
	return s.write(str(v))
}

func (s *scope) write(t string) error {
	if s.budget -= len(t); s.budget < 0 {
		return fmt.Errorf("output over %d bytes", maxOutput)
	}
	s.out.WriteString(t)
	return nil
}

// maxOutput bounds a rendering (a template is code from the model file).
const maxOutput = 16 << 20

type ifStmt struct {
	conds  []node
	bodies [][]stmt // len(conds) or len(conds)+1 (else)
}

func (t ifStmt) run(s *scope) error {
	for i, c := range t.conds {
		v, err := c.eval(s)
		if err != nil {
			return err
		}
		if truthy(v) {
			return runAll(s, t.bodies[i])
		}
	}
	if len(t.bodies) > len(t.conds) {
		return runAll(s, t.bodies[len(t.conds)])
	}
	return nil
}

type forStmt struct {
	vars     []string
	iter     node
	body     []stmt
	elseBody []stmt
}

func (t forStmt) run(s *scope) error {
	v, err := t.iter.eval(s)
	if err != nil {
		return err
	}
	var items []any
	switch c := v.(type) {
	case []any:
		items = c
	case string:
		for _, r := range c {
			items = append(items, string(r))
		}
	case map[string]any:
		items = itemsKeys(c)
	case undefined, nil:
	default:
		return fmt.Errorf("cannot iterate over %s", typeName(v))
	}
	if len(items) == 0 {
		return runAll(s, t.elseBody)
	}
	for i, it := range items {
		loop := map[string]any{"index0": int64(i), "index": int64(i + 1), "first": i == 0, "last": i == len(items)-1,
			"length": int64(len(items)), "revindex0": int64(len(items) - 1 - i), "revindex": int64(len(items) - i)}
		if i > 0 {
			loop["previtem"] = items[i-1]
		}
		if i+1 < len(items) {
			loop["nextitem"] = items[i+1]
		}
		frame := map[string]any{"loop": loop}
		if len(t.vars) == 1 {
			frame[t.vars[0]] = it
		} else {
			tuple, ok := it.([]any)
			if !ok || len(tuple) != len(t.vars) {
				return fmt.Errorf("cannot unpack %s into %d names", typeName(it), len(t.vars))
			}
			for j, name := range t.vars {
				frame[name] = tuple[j]
			}
		}
		s.vars = append(s.vars, frame)
		err := runAll(s, t.body)
		s.vars = s.vars[:len(s.vars)-1]
		if err == loopCtl("break") {
			break
		}
		if err != nil && err != loopCtl("continue") {
			return err
		}
	}
	return nil
}

func itemsKeys(m map[string]any) []any {
	v, _ := method(m, "items").(Func)(nil, nil)
	items, _ := v.([]any)
	keys := make([]any, len(items))
	for i, it := range items {
		keys[i] = it.([]any)[0]
	}
	return keys
}

// loopCtl is {% break %} or {% continue %} (Jinja's loopcontrols, which
// Hugging Face enables): run returns it as an error the loop consumes.
type loopCtl string

func (l loopCtl) run(*scope) error { return l }
func (l loopCtl) Error() string    { return "{% " + string(l) + " %} outside a loop" }

type setStmt struct {
	name, attr string // attr: {% set ns.attr = … %}
	e          node
}

func (t setStmt) run(s *scope) error {
	v, err := t.e.eval(s)
	if err != nil {
		return err
	}
	if t.attr == "" {
		s.set(t.name, v)
		return nil
	}
	ns, ok := s.get(t.name).(*namespace)
	if !ok {
		return fmt.Errorf("cannot set %s.%s: %s is not a namespace", t.name, t.attr, t.name)
	}
	ns.m[t.attr] = v
	return nil
}

func runAll(s *scope, body []stmt) error {
	for _, st := range body {
		if err := st.run(s); err != nil {
			return err
		}
	}
	return nil
}

// Parse parses a template.
func Parse(src string) (*Template, error) {
	chunks, err := split(src)
	if err != nil {
		return nil, err
	}
	p := &stmtParser{chunks: chunks}
	body, end, err := p.block()
	if err != nil {
		return nil, err
	}
	if end != "" {
		return nil, fmt.Errorf("line %d: unexpected {%% %s %%}", p.line(), end)
	}
	return &Template{body: body}, nil
}

type stmtParser struct {
	chunks []chunk
	pos    int
}

func (p *stmtParser) line() int {
	if p.pos > 0 && p.pos <= len(p.chunks) {
		return p.chunks[p.pos-1].line
	}
	return 0
}

// block parses statements up to an end tag (elif, else, endif, endfor),
// returned as end ("" at the end of the source).
func (p *stmtParser) block() ([]stmt, string, error) {
	var body []stmt
	for p.pos < len(p.chunks) {
		c := p.chunks[p.pos]
		p.pos++
		switch c.kind {
		case chunkText:
			if c.src != "" {
				body = append(body, textStmt(c.src))
			}
		case chunkExpr:
			e, err := parseExpr(c.src)
			if err != nil {
				return nil, "", fmt.Errorf("line %d: %v", c.line, err)
			}
			body = append(body, exprStmt{e})
		case chunkStmt:
			word, rest, _ := strings.Cut(c.src, " ")
			rest = strings.TrimSpace(rest)
			switch word {
			case "elif", "else", "endif", "endfor":
				p.pos-- // the caller reads it
				return body, word, nil
			case "if":
				st, err := p.ifStmt(rest, c.line)
				if err != nil {
					return nil, "", err
				}
				body = append(body, st)
			case "for":
				st, err := p.forStmt(rest, c.line)
				if err != nil {
					return nil, "", err
				}
				body = append(body, st)
			case "break", "continue":
				if rest != "" {
					return nil, "", fmt.Errorf("line %d: {%% %s %s %%}", c.line, word, rest)
				}
				body = append(body, loopCtl(word))
			case "set":
				lhs, rhs, ok := strings.Cut(rest, "=")
				if !ok {
					return nil, "", fmt.Errorf("line %d: block {%% set %%} is not supported", c.line)
				}
				e, err := parseExpr(rhs)
				if err != nil {
					return nil, "", fmt.Errorf("line %d: %v", c.line, err)
				}
				name, attr, _ := strings.Cut(strings.TrimSpace(lhs), ".")
				body = append(body, setStmt{strings.TrimSpace(name), strings.TrimSpace(attr), e})
			default:
				return nil, "", fmt.Errorf("line %d: {%% %s %%} is not supported", c.line, word)
			}
		}
	}
	return body, "", nil
}

func (p *stmtParser) endTag() string {
	c := p.chunks[p.pos]
	p.pos++
	return c.src
}

func (p *stmtParser) ifStmt(cond string, line int) (stmt, error) {
	var st ifStmt
	for {
		e, err := parseExpr(cond)
		if err != nil {
			return nil, fmt.Errorf("line %d: %v", line, err)
		}
		st.conds = append(st.conds, e)
		body, end, err := p.block()
		if err != nil {
			return nil, err
		}
		st.bodies = append(st.bodies, body)
		tag := p.endTagOr(end)
		switch end {
		case "elif":
			cond = strings.TrimSpace(strings.TrimPrefix(tag, "elif"))
			continue
		case "else":
			body, end, err := p.block()
			if err != nil {
				return nil, err
			}
			if end != "endif" {
				return nil, fmt.Errorf("line %d: {%% if %%} without {%% endif %%}", line)
			}
			p.endTagOr(end)
			st.bodies = append(st.bodies, body)
			return st, nil
		case "endif":
			return st, nil
		}
		return nil, fmt.Errorf("line %d: {%% if %%} without {%% endif %%}", line)
	}
}

func (p *stmtParser) endTagOr(end string) string {
	if end == "" {
		return ""
	}
	return p.endTag()
}

func (p *stmtParser) forStmt(spec string, line int) (stmt, error) {
	names, iter, ok := strings.Cut(spec, " in ")
	if !ok {
		return nil, fmt.Errorf("line %d: {%% for %s %%}: want NAME in EXPR", line, spec)
	}
	if strings.Contains(iter, " if ") || strings.HasSuffix(strings.TrimSpace(iter), " recursive") {
		return nil, fmt.Errorf("line %d: filtered or recursive loops are not supported", line)
	}
	var st forStmt
	for _, n := range strings.Split(names, ",") {
		st.vars = append(st.vars, strings.TrimSpace(n))
	}
	e, err := parseExpr(iter)
	if err != nil {
		return nil, fmt.Errorf("line %d: %v", line, err)
	}
	st.iter = e
	body, end, err := p.block()
	if err != nil {
		return nil, err
	}
	st.body = body
	switch end {
	case "else":
		p.endTag()
		if st.elseBody, end, err = p.block(); err != nil {
			return nil, err
		}
		if end != "endfor" {
			return nil, fmt.Errorf("line %d: {%% for %%} without {%% endfor %%}", line)
		}
		p.endTag()
	case "endfor":
		p.endTag()
	default:
		return nil, fmt.Errorf("line %d: {%% for %%} without {%% endfor %%}", line)
	}
	return st, nil
}

// Render renders the template with the variables vars (strings, int64,
// bools, nil, []any, map[string]any and Func values).
func (t *Template) Render(vars map[string]any) (string, error) {
	var sb strings.Builder
	s := &scope{vars: []map[string]any{vars, {}}, out: &sb, budget: maxOutput}
	if err := runAll(s, t.body); err != nil {
		return "", err
	}
	return sb.String(), nil
}
