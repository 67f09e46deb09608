package constraint

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// A GBNF recognizer for tests: it parses the grammar text the translators
// write (llama.cpp's dialect) and says whether a text is in the language
// of root. It is an independent reading of the dialect, so a test holds
// a translator's output to what it claims to accept.

type gnode struct {
	kind   byte // 'a' alternation, 's' sequence, 'l' literal, 'c' class, 'r' rule, 'x' repeat
	kids   []*gnode
	lit    []rune
	ranges [][2]rune
	neg    bool
	name   string
	lo, hi int // repeat; hi < 0 unbounded
}

type gram struct {
	rules map[string]*gnode
}

type gparser struct {
	s   []rune
	i   int
	err error
}

func parseGBNF(text string) (*gram, error) {
	p := &gparser{s: []rune(text)}
	g := &gram{rules: map[string]*gnode{}}
	for {
		p.space(true)
		if p.i >= len(p.s) {
			break
		}
		name := p.name()
		if name == "" {
			return nil, fmt.Errorf("expected a rule name at %d", p.i)
		}
		p.space(false)
		if !p.eat("::=") {
			return nil, fmt.Errorf("expected ::= after %s", name)
		}
		n := p.alt(false)
		if p.err != nil {
			return nil, p.err
		}
		if _, dup := g.rules[name]; dup {
			return nil, fmt.Errorf("rule %s defined twice", name)
		}
		g.rules[name] = n
	}
	if g.rules["root"] == nil {
		return nil, fmt.Errorf("no root rule")
	}
	var check func(n *gnode) error
	check = func(n *gnode) error {
		if n.kind == 'r' && g.rules[n.name] == nil {
			return fmt.Errorf("undefined rule %s", n.name)
		}
		for _, k := range n.kids {
			if err := check(k); err != nil {
				return err
			}
		}
		return nil
	}
	for _, r := range g.rules {
		if err := check(r); err != nil {
			return nil, err
		}
	}
	return g, nil
}

func (p *gparser) space(newlines bool) {
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == ' ' || c == '\t' || (newlines && (c == '\n' || c == '\r')):
			p.i++
		case c == '#':
			for p.i < len(p.s) && p.s[p.i] != '\n' {
				p.i++
			}
		default:
			return
		}
	}
}

func (p *gparser) eat(s string) bool {
	if strings.HasPrefix(string(p.s[p.i:min(len(p.s), p.i+len(s))]), s) {
		p.i += len(s)
		return true
	}
	return false
}

func (p *gparser) name() string {
	st := p.i
	for p.i < len(p.s) && (p.s[p.i] == '-' || p.s[p.i] >= 'a' && p.s[p.i] <= 'z' || p.s[p.i] >= 'A' && p.s[p.i] <= 'Z' || p.s[p.i] >= '0' && p.s[p.i] <= '9') {
		p.i++
	}
	return string(p.s[st:p.i])
}

func (p *gparser) fail(f string, a ...any) {
	if p.err == nil {
		p.err = fmt.Errorf(f+fmt.Sprintf(" (at %d)", p.i), a...)
	}
}

// alt parses alternatives; nested: inside parentheses (newlines allowed).
func (p *gparser) alt(nested bool) *gnode {
	n := &gnode{kind: 'a'}
	for p.err == nil {
		n.kids = append(n.kids, p.seq(nested))
		p.space(nested)
		if p.i < len(p.s) && p.s[p.i] == '|' {
			p.i++
			p.space(true)
			continue
		}
		break
	}
	return n
}

func (p *gparser) seq(nested bool) *gnode {
	n := &gnode{kind: 's'}
	for p.err == nil {
		p.space(nested)
		if p.i >= len(p.s) {
			break
		}
		c := p.s[p.i]
		var item *gnode
		switch {
		case c == '"':
			p.i++
			item = &gnode{kind: 'l'}
			for p.i < len(p.s) && p.s[p.i] != '"' {
				item.lit = append(item.lit, p.char())
			}
			if !p.eat(`"`) {
				p.fail("unterminated literal")
			}
		case c == '[':
			p.i++
			item = &gnode{kind: 'c'}
			if p.eat("^") {
				item.neg = true
			}
			for p.i < len(p.s) && p.s[p.i] != ']' {
				lo := p.char()
				hi := lo
				if p.i+1 < len(p.s) && p.s[p.i] == '-' && p.s[p.i+1] != ']' {
					p.i++
					hi = p.char()
				}
				item.ranges = append(item.ranges, [2]rune{lo, hi})
			}
			if !p.eat("]") {
				p.fail("unterminated class")
			}
		case c == '(':
			p.i++
			p.space(true)
			item = p.alt(true)
			p.space(true)
			if !p.eat(")") {
				p.fail("expected )")
			}
		case c == '.':
			p.i++
			item = &gnode{kind: 'c', neg: true}
		case c == '-' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			st := p.i
			name := p.name()
			p.space(false)
			if p.eat("::=") { // the next rule
				p.i = st
				return n
			}
			p.i = st + len([]rune(name))
			item = &gnode{kind: 'r', name: name}
		default:
			return n
		}
		// postfix
		for p.i < len(p.s) {
			c := p.s[p.i]
			var lo, hi int
			switch c {
			case '*':
				lo, hi = 0, -1
			case '+':
				lo, hi = 1, -1
			case '?':
				lo, hi = 0, 1
			case '{':
				p.i++
				lo, hi = p.num(), 0
				if p.eat(",") {
					if p.i < len(p.s) && p.s[p.i] == '}' {
						hi = -1
					} else {
						hi = p.num()
					}
				} else {
					hi = lo
				}
				if p.s[p.i] != '}' {
					p.fail("expected }")
					return n
				}
			default:
				goto done
			}
			p.i++
			item = &gnode{kind: 'x', kids: []*gnode{item}, lo: lo, hi: hi}
		}
	done:
		n.kids = append(n.kids, item)
	}
	return n
}

func (p *gparser) num() int {
	st := p.i
	for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
		p.i++
	}
	v, err := strconv.Atoi(string(p.s[st:p.i]))
	if err != nil {
		p.fail("expected a number")
	}
	return v
}

func (p *gparser) char() rune {
	c := p.s[p.i]
	p.i++
	if c != '\\' || p.i >= len(p.s) {
		return c
	}
	e := p.s[p.i]
	p.i++
	hex := func(n int) rune {
		if p.i+n > len(p.s) {
			p.fail("short escape")
			return 0
		}
		v, err := strconv.ParseUint(string(p.s[p.i:p.i+n]), 16, 32)
		if err != nil {
			p.fail("bad escape")
		}
		p.i += n
		return rune(v)
	}
	switch e {
	case 'x':
		return hex(2)
	case 'u':
		return hex(4)
	case 'U':
		return hex(8)
	case 'n':
		return '\n'
	case 'r':
		return '\r'
	case 't':
		return '\t'
	}
	return e
}

// matcher: the set of end positions of a node from a position.
type matcher struct {
	g     *gram
	in    []rune
	memo  map[[2]int][]int // (rule id, pos)
	ids   map[string]int
	steps int
}

func (g *gram) accepts(text string) bool {
	m := &matcher{g: g, in: []rune(text), memo: map[[2]int][]int{}, ids: map[string]int{}}
	for _, e := range m.ends(&gnode{kind: 'r', name: "root"}, 0) {
		if e == len(m.in) {
			return true
		}
	}
	return false
}

func (m *matcher) ends(n *gnode, pos int) []int {
	m.steps++
	if m.steps > 5e6 {
		panic("matcher: too many steps")
	}
	switch n.kind {
	case 'l':
		if pos+len(n.lit) <= len(m.in) && string(m.in[pos:pos+len(n.lit)]) == string(n.lit) {
			return []int{pos + len(n.lit)}
		}
		return nil
	case 'c':
		if pos >= len(m.in) {
			return nil
		}
		c, in := m.in[pos], false
		for _, r := range n.ranges {
			in = in || c >= r[0] && c <= r[1]
		}
		if in != n.neg {
			return []int{pos + 1}
		}
		return nil
	case 'r':
		id, ok := m.ids[n.name]
		if !ok {
			id = len(m.ids)
			m.ids[n.name] = id
		}
		k := [2]int{id, pos}
		if e, ok := m.memo[k]; ok {
			return e
		}
		m.memo[k] = nil // left recursion finds nothing
		e := m.ends(m.g.rules[n.name], pos)
		m.memo[k] = e
		return e
	case 'a':
		var out []int
		for _, k := range n.kids {
			out = append(out, m.ends(k, pos)...)
		}
		return uniq(out)
	case 's':
		cur := []int{pos}
		for _, k := range n.kids {
			var next []int
			for _, p := range cur {
				next = append(next, m.ends(k, p)...)
			}
			cur = uniq(next)
			if len(cur) == 0 {
				return nil
			}
		}
		return cur
	case 'x':
		var out []int
		cur := []int{pos}
		if n.lo == 0 {
			out = append(out, pos)
		}
		seen := map[int]bool{}
		for i := 1; n.hi < 0 || i <= n.hi; i++ {
			var next []int
			for _, p := range cur {
				next = append(next, m.ends(n.kids[0], p)...)
			}
			cur = uniq(next)
			if n.hi < 0 { // unbounded: stop when nothing new
				var fresh []int
				for _, p := range cur {
					if !seen[p] || i <= n.lo {
						fresh = append(fresh, p)
					}
					seen[p] = true
				}
				cur = fresh
			}
			if len(cur) == 0 {
				break
			}
			if i >= n.lo {
				out = append(out, cur...)
			}
		}
		return uniq(out)
	}
	panic("bad node")
}

func uniq(a []int) []int {
	if len(a) < 2 {
		return a
	}
	sort.Ints(a)
	out := a[:1]
	for _, v := range a[1:] {
		if v != out[len(out)-1] {
			out = append(out, v)
		}
	}
	return out
}

// mustGram parses a translator's output or fails the test.
func mustGram(t testing.TB, text string) *gram {
	t.Helper()
	g, err := parseGBNF(text)
	if err != nil {
		t.Fatalf("the grammar does not parse: %v\n%s", err, text)
	}
	if err := g.checkNoEmptyLoops(); err != nil {
		t.Fatalf("the engine would refuse the grammar: %v\n%s", err, text)
	}
	return g
}

var _ = utf8.RuneLen

// checkNoEmptyLoops fails when an unbounded repetition's item can match
// the empty string, or a rule can reach itself without consuming input:
// what the engine's compiler refuses (native/grammar.h), so the
// translators must never write it.
func (g *gram) checkNoEmptyLoops() error {
	null := map[string]bool{}
	var isNull func(n *gnode) bool
	isNull = func(n *gnode) bool {
		switch n.kind {
		case 'l':
			return len(n.lit) == 0
		case 'c':
			return false
		case 'r':
			return null[n.name]
		case 'a':
			for _, k := range n.kids {
				if isNull(k) {
					return true
				}
			}
			return false
		case 's':
			for _, k := range n.kids {
				if !isNull(k) {
					return false
				}
			}
			return true
		case 'x':
			return n.lo == 0 || isNull(n.kids[0])
		}
		return false
	}
	for changed := true; changed; {
		changed = false
		for name, r := range g.rules {
			if !null[name] && isNull(r) {
				null[name], changed = true, true
			}
		}
	}
	var bad error
	var walk func(n *gnode)
	walk = func(n *gnode) {
		if n.kind == 'x' && n.hi < 0 && isNull(n.kids[0]) && bad == nil {
			bad = fmt.Errorf("an unbounded repetition of something that can be empty")
		}
		for _, k := range n.kids {
			walk(k)
		}
	}
	for _, r := range g.rules {
		walk(r)
	}
	if bad != nil {
		return bad
	}
	// left recursion: rule → rules reachable at its start without consuming
	first := func(n *gnode) []string {
		var out []string
		var f func(n *gnode)
		f = func(n *gnode) {
			switch n.kind {
			case 'r':
				out = append(out, n.name)
			case 'a':
				for _, k := range n.kids {
					f(k)
				}
			case 's':
				for _, k := range n.kids {
					f(k)
					if !isNull(k) {
						return
					}
				}
			case 'x':
				f(n.kids[0])
			}
		}
		f(n)
		return out
	}
	for name := range g.rules {
		seen := map[string]bool{}
		stack := first(g.rules[name])
		for len(stack) > 0 {
			r := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if r == name {
				return fmt.Errorf("rule %s is left-recursive", name)
			}
			if !seen[r] {
				seen[r] = true
				stack = append(stack, first(g.rules[r])...)
			}
		}
	}
	return nil
}
