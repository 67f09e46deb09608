package jinja

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Values: string, int64, bool, nil (none), []any, map[string]any,
// *namespace, undefined, and functions.
type undefined struct{}

type namespace struct{ m map[string]any }

// Func is a callable a template can use (raise_exception and the like).
type Func func(args []any, kw map[string]any) (any, error)

type scope struct {
	vars   []map[string]any // innermost last
	out    *strings.Builder
	budget int // output bytes left (a bound on runaway templates)
}

func (s *scope) get(name string) any {
	for i := len(s.vars) - 1; i >= 0; i-- {
		if v, ok := s.vars[i][name]; ok {
			return v
		}
	}
	switch name {
	case "namespace":
		return Func(func(_ []any, kw map[string]any) (any, error) {
			m := map[string]any{}
			for k, v := range kw {
				m[k] = v
			}
			return &namespace{m}, nil
		})
	}
	return undefined{}
}

func (s *scope) set(name string, v any) { s.vars[len(s.vars)-1][name] = v }

type lit struct{ v any }

func (n lit) eval(*scope) (any, error) { return n.v, nil }

type nameNode string

func (n nameNode) eval(s *scope) (any, error) { return s.get(string(n)), nil }

type listNode []node

func (n listNode) eval(s *scope) (any, error) {
	out := make([]any, len(n))
	for i, e := range n {
		v, err := e.eval(s)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

type dictNode [][2]node

func (n dictNode) eval(s *scope) (any, error) {
	m := map[string]any{}
	for _, kv := range n {
		k, err := kv[0].eval(s)
		if err != nil {
			return nil, err
		}
		v, err := kv[1].eval(s)
		if err != nil {
			return nil, err
		}
		m[str(k)] = v
	}
	return m, nil
}

type condNode struct{ c, a, b node }

func (n condNode) eval(s *scope) (any, error) {
	c, err := n.c.eval(s)
	if err != nil {
		return nil, err
	}
	if truthy(c) {
		return n.a.eval(s)
	}
	return n.b.eval(s)
}

type logicNode struct {
	op   string
	a, b node
}

func (n logicNode) eval(s *scope) (any, error) {
	a, err := n.a.eval(s)
	if err != nil {
		return nil, err
	}
	if truthy(a) == (n.op == "or") {
		return a, nil
	}
	return n.b.eval(s)
}

type notNode struct{ a node }

func (n notNode) eval(s *scope) (any, error) {
	a, err := n.a.eval(s)
	return !truthy(a), err
}

type binNode struct {
	op   string
	a, b node
}

func (n binNode) eval(s *scope) (any, error) {
	a, err := n.a.eval(s)
	if err != nil {
		return nil, err
	}
	b, err := n.b.eval(s)
	if err != nil {
		return nil, err
	}
	switch n.op {
	case "==":
		return equal(a, b), nil
	case "!=":
		return !equal(a, b), nil
	case "~":
		return concat(str(a), str(b))
	case "in":
		switch c := b.(type) {
		case string:
			return strings.Contains(c, str(a)), nil
		case []any:
			for _, x := range c {
				if equal(x, a) {
					return true, nil
				}
			}
			return false, nil
		case map[string]any:
			_, ok := c[str(a)]
			return ok, nil
		}
		return nil, fmt.Errorf("'in' needs a string, list or mapping, not %s", typeName(b))
	}
	if x, ok := a.(string); ok && n.op == "+" {
		if y, ok := b.(string); ok {
			return concat(x, y)
		}
		return nil, fmt.Errorf("cannot add %s to a string", typeName(b))
	}
	if x, ok := a.([]any); ok && n.op == "+" {
		if y, ok := b.([]any); ok {
			if len(x)+len(y) > maxOutput {
				return nil, fmt.Errorf("list over %d items", maxOutput)
			}
			return append(append([]any{}, x...), y...), nil
		}
	}
	x, okA := a.(int64)
	y, okB := b.(int64)
	if xb, ok := a.(bool); ok {
		x, okA = b2i(xb), true
	}
	if !okA || !okB {
		return nil, fmt.Errorf("unsupported operand types for %s: %s and %s", n.op, typeName(a), typeName(b))
	}
	switch n.op {
	case "+":
		return x + y, nil
	case "-":
		return x - y, nil
	case "*":
		return x * y, nil
	case "<":
		return x < y, nil
	case ">":
		return x > y, nil
	case "<=":
		return x <= y, nil
	case ">=":
		return x >= y, nil
	case "%", "//", "/":
		if y == 0 {
			return nil, fmt.Errorf("division by zero")
		}
		if n.op == "%" {
			return ((x % y) + y) % y, nil
		}
		q := x / y
		if (x%y != 0) && ((x < 0) != (y < 0)) {
			q--
		}
		return q, nil
	}
	return nil, fmt.Errorf("unsupported operator %s", n.op)
}

// concat joins strings up to maxOutput bytes (a template doubling a string
// in a loop fails instead of taking the memory).
func concat(a, b string) (any, error) {
	if len(a)+len(b) > maxOutput {
		return nil, fmt.Errorf("string over %d bytes", maxOutput)
	}
	return a + b, nil
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

type attrNode struct{ x, key node }

func (n attrNode) eval(s *scope) (any, error) {
	x, err := n.x.eval(s)
	if err != nil {
		return nil, err
	}
	k, err := n.key.eval(s)
	if err != nil {
		return nil, err
	}
	switch c := x.(type) {
	case map[string]any:
		if v, ok := c[str(k)]; ok {
			return v, nil
		}
		if name, ok := k.(string); ok {
			return method(c, name), nil
		}
	case *namespace:
		if v, ok := c.m[str(k)]; ok {
			return v, nil
		}
	case []any:
		if i, ok := k.(int64); ok {
			if i < 0 {
				i += int64(len(c))
			}
			if i < 0 || i >= int64(len(c)) {
				return nil, fmt.Errorf("list index %d out of range", i)
			}
			return c[i], nil
		}
	case string:
		if i, ok := k.(int64); ok {
			r := []rune(c)
			if i < 0 {
				i += int64(len(r))
			}
			if i < 0 || i >= int64(len(r)) {
				return nil, fmt.Errorf("string index %d out of range", i)
			}
			return string(r[i]), nil
		}
		if name, ok := k.(string); ok {
			return method(c, name), nil
		}
	case undefined:
		return nil, fmt.Errorf("'%s' of an undefined value", str(k))
	}
	return undefined{}, nil
}

type sliceNode struct {
	x     node
	parts [3]node
}

func (n sliceNode) eval(s *scope) (any, error) {
	x, err := n.x.eval(s)
	if err != nil {
		return nil, err
	}
	var idx [3]*int64
	for i, p := range n.parts {
		if p == nil {
			continue
		}
		v, err := p.eval(s)
		if err != nil {
			return nil, err
		}
		iv, ok := v.(int64)
		if !ok {
			return nil, fmt.Errorf("slice index %s is not an integer", typeName(v))
		}
		idx[i] = &iv
	}
	var items []any
	isStr := false
	switch c := x.(type) {
	case []any:
		items = c
	case string:
		isStr = true
		for _, r := range c {
			items = append(items, string(r))
		}
	default:
		return nil, fmt.Errorf("cannot slice %s", typeName(x))
	}
	ln := int64(len(items))
	step := int64(1)
	if idx[2] != nil {
		step = *idx[2]
		if step == 0 {
			return nil, fmt.Errorf("slice step 0")
		}
	}
	clamp := func(p *int64, def int64) int64 {
		if p == nil {
			return def
		}
		v := *p
		if v < 0 {
			v += ln
		}
		lo, hi := int64(0), ln
		if step < 0 {
			lo, hi = -1, ln-1
		}
		return max(lo, min(v, hi))
	}
	var out []any
	if step > 0 {
		for i := clamp(idx[0], 0); i < clamp(idx[1], ln); i += step {
			out = append(out, items[i])
		}
	} else {
		for i := clamp(idx[0], ln-1); i > clamp(idx[1], -1); i += step {
			out = append(out, items[i])
		}
	}
	if isStr {
		var sb strings.Builder
		for _, r := range out {
			sb.WriteString(r.(string))
		}
		return sb.String(), nil
	}
	if out == nil {
		out = []any{}
	}
	return out, nil
}

type callNode struct {
	f    node
	args []node
	kw   map[string]node
}

func (n callNode) eval(s *scope) (any, error) {
	f, err := n.f.eval(s)
	if err != nil {
		return nil, err
	}
	fn, ok := f.(Func)
	if !ok {
		return nil, fmt.Errorf("%s is not callable", typeName(f))
	}
	args := make([]any, len(n.args))
	for i, a := range n.args {
		if args[i], err = a.eval(s); err != nil {
			return nil, err
		}
	}
	kw := map[string]any{}
	for k, a := range n.kw {
		if kw[k], err = a.eval(s); err != nil {
			return nil, err
		}
	}
	return fn(args, kw)
}

// method returns a string or mapping method as a Func.
func method(x any, name string) any {
	argStr := func(args []any, i int, def string) string {
		if i < len(args) && args[i] != nil {
			return str(args[i])
		}
		return def
	}
	switch c := x.(type) {
	case string:
		switch name {
		case "startswith":
			return Func(func(a []any, _ map[string]any) (any, error) { return strings.HasPrefix(c, argStr(a, 0, "")), nil })
		case "endswith":
			return Func(func(a []any, _ map[string]any) (any, error) { return strings.HasSuffix(c, argStr(a, 0, "")), nil })
		case "strip":
			return Func(func(a []any, _ map[string]any) (any, error) { return strip(c, a, true, true), nil })
		case "lstrip":
			return Func(func(a []any, _ map[string]any) (any, error) { return strip(c, a, true, false), nil })
		case "rstrip":
			return Func(func(a []any, _ map[string]any) (any, error) { return strip(c, a, false, true), nil })
		case "upper":
			return Func(func([]any, map[string]any) (any, error) { return strings.ToUpper(c), nil })
		case "lower":
			return Func(func([]any, map[string]any) (any, error) { return strings.ToLower(c), nil })
		case "split":
			return Func(func(a []any, _ map[string]any) (any, error) {
				var parts []string
				if len(a) == 0 || a[0] == nil {
					parts = strings.Fields(c)
				} else if sep := str(a[0]); sep != "" {
					parts = strings.Split(c, sep)
				} else {
					return nil, fmt.Errorf("split: empty separator")
				}
				out := make([]any, len(parts))
				for i, p := range parts {
					out[i] = p
				}
				return out, nil
			})
		case "replace":
			return Func(func(a []any, _ map[string]any) (any, error) {
				return strings.ReplaceAll(c, argStr(a, 0, ""), argStr(a, 1, "")), nil
			})
		}
	case map[string]any:
		switch name {
		case "get":
			return Func(func(a []any, _ map[string]any) (any, error) {
				if v, ok := c[argStr(a, 0, "")]; ok {
					return v, nil
				}
				if len(a) > 1 {
					return a[1], nil
				}
				return nil, nil
			})
		case "items":
			return Func(func([]any, map[string]any) (any, error) {
				keys := make([]string, 0, len(c))
				for k := range c {
					keys = append(keys, k)
				}
				sort.Strings(keys)
				out := make([]any, len(keys))
				for i, k := range keys {
					out[i] = []any{k, c[k]}
				}
				return out, nil
			})
		}
	}
	return undefined{}
}

// strip is Python's str.strip family: white space, or the given characters.
func strip(s string, args []any, left, right bool) string {
	cut := " \t\n\r\v\f"
	if len(args) > 0 && args[0] != nil {
		cut = str(args[0])
	}
	if left {
		s = strings.TrimLeft(s, cut)
	}
	if right {
		s = strings.TrimRight(s, cut)
	}
	return s
}

type filterNode struct {
	name string
	x    node
	args []node
	kw   map[string]node
}

func (n filterNode) eval(s *scope) (any, error) {
	x, err := n.x.eval(s)
	if err != nil {
		return nil, err
	}
	switch n.name {
	case "trim":
		return strings.TrimSpace(str(x)), nil
	case "length", "count":
		switch c := x.(type) {
		case string:
			return int64(len([]rune(c))), nil
		case []any:
			return int64(len(c)), nil
		case map[string]any:
			return int64(len(c)), nil
		}
		return nil, fmt.Errorf("length of %s", typeName(x))
	case "default", "d":
		if _, u := x.(undefined); u && len(n.args) > 0 {
			return n.args[0].eval(s)
		}
		return x, nil
	case "capitalize":
		r := []rune(strings.ToLower(str(x)))
		if len(r) > 0 {
			r[0] = []rune(strings.ToUpper(string(r[0])))[0]
		}
		return string(r), nil
	case "first", "last":
		items, ok := x.([]any)
		if !ok || len(items) == 0 {
			return undefined{}, nil
		}
		if n.name == "first" {
			return items[0], nil
		}
		return items[len(items)-1], nil
	case "reverse":
		switch c := x.(type) {
		case []any:
			out := make([]any, len(c))
			for i, v := range c {
				out[len(c)-1-i] = v
			}
			return out, nil
		case string:
			r := []rune(c)
			for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
				r[i], r[j] = r[j], r[i]
			}
			return string(r), nil
		}
		return nil, fmt.Errorf("reverse of %s", typeName(x))
	case "upper":
		return strings.ToUpper(str(x)), nil
	case "lower":
		return strings.ToLower(str(x)), nil
	case "string":
		return str(x), nil
	case "tojson":
		b, err := json.Marshal(jsonable(x))
		if err != nil {
			return nil, err
		}
		return string(b), nil
	case "join":
		sep := ""
		if len(n.args) > 0 {
			v, err := n.args[0].eval(s)
			if err != nil {
				return nil, err
			}
			sep = str(v)
		}
		items, ok := x.([]any)
		if !ok {
			return nil, fmt.Errorf("join of %s", typeName(x))
		}
		parts := make([]string, len(items))
		for i, it := range items {
			parts[i] = str(it)
		}
		return strings.Join(parts, sep), nil
	}
	return nil, fmt.Errorf("unknown filter %q", n.name)
}

func jsonable(x any) any {
	switch c := x.(type) {
	case undefined:
		return nil
	case *namespace:
		return c.m
	}
	return x
}

type testNode struct {
	name string
	x    node
	neg  bool
}

func (n testNode) eval(s *scope) (any, error) {
	x, err := n.x.eval(s)
	if err != nil {
		return nil, err
	}
	var r bool
	switch n.name {
	case "defined":
		_, u := x.(undefined)
		r = !u
	case "undefined":
		_, r = x.(undefined)
	case "none":
		r = x == nil
	case "string":
		_, r = x.(string)
	case "number", "integer":
		_, r = x.(int64)
	case "mapping":
		_, r = x.(map[string]any)
	case "sequence", "iterable":
		switch x.(type) {
		case string, []any, map[string]any:
			r = true
		}
	case "true":
		r = x == true
	case "false":
		r = x == false
	default:
		return nil, fmt.Errorf("unknown test %q", n.name)
	}
	return r != n.neg, nil
}

func truthy(v any) bool {
	switch c := v.(type) {
	case nil, undefined:
		return false
	case bool:
		return c
	case int64:
		return c != 0
	case string:
		return c != ""
	case []any:
		return len(c) > 0
	case map[string]any:
		return len(c) > 0
	}
	return true
}

func equal(a, b any) bool {
	switch x := a.(type) {
	case string:
		y, ok := b.(string)
		return ok && x == y
	case int64:
		y, ok := b.(int64)
		return ok && x == y
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case nil:
		return b == nil
	case undefined:
		_, ok := b.(undefined)
		return ok
	}
	return false
}

// str is how a value prints.
func str(v any) string {
	switch c := v.(type) {
	case string:
		return c
	case int64:
		return strconv.FormatInt(c, 10)
	case bool:
		if c {
			return "True"
		}
		return "False"
	case nil:
		return "None"
	case undefined:
		return ""
	}
	b, _ := json.Marshal(jsonable(v))
	return string(b)
}

func typeName(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case int64:
		return "int"
	case bool:
		return "bool"
	case nil:
		return "none"
	case undefined:
		return "undefined"
	case []any:
		return "list"
	case map[string]any:
		return "dict"
	case Func:
		return "function"
	}
	return fmt.Sprintf("%T", v)
}
