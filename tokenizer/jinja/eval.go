package jinja

import (
	"fmt"
	"math"
	"math/big"
	"strings"
)

func (n lit) eval(*ctx) (any, error) { return n.v, nil }

func (n nameNode) eval(c *ctx) (any, error) {
	if v, ok := c.lookup(n.name); ok {
		return v, nil
	}
	return Undefined{n.name}, nil
}

func (n listNode) eval(c *ctx) (any, error) {
	out := make([]any, len(n.items))
	for i, e := range n.items {
		v, err := e.eval(c)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return &List{items: out, tuple: n.tuple}, nil
}

func (n dictNode) eval(c *ctx) (any, error) {
	d := NewDict()
	for _, kv := range n.kv {
		k, err := kv[0].eval(c)
		if err != nil {
			return nil, err
		}
		v, err := kv[1].eval(c)
		if err != nil {
			return nil, err
		}
		d.set(k, v)
	}
	return d, nil
}

func (n condNode) eval(c *ctx) (any, error) {
	v, err := n.c.eval(c)
	if err != nil {
		return nil, err
	}
	if truthy(v) {
		return n.a.eval(c)
	}
	if n.b == nil {
		return Undefined{"conditional expression"}, nil
	}
	return n.b.eval(c)
}

func (n andNode) eval(c *ctx) (any, error) {
	a, err := n.a.eval(c)
	if err != nil || !truthy(a) {
		return a, err
	}
	return n.b.eval(c)
}

func (n orNode) eval(c *ctx) (any, error) {
	a, err := n.a.eval(c)
	if err != nil || truthy(a) {
		return a, err
	}
	return n.b.eval(c)
}

func (n notNode) eval(c *ctx) (any, error) {
	a, err := n.a.eval(c)
	return !truthy(a), err
}

func (n negNode) eval(c *ctx) (any, error) {
	a, err := n.a.eval(c)
	if err != nil {
		return nil, err
	}
	if !isNum(a) {
		return nil, fmt.Errorf("bad operand type for unary %s: %s", map[bool]string{true: "-", false: "+"}[n.neg], typeName(a))
	}
	if !n.neg {
		if b, ok := a.(bool); ok {
			return b2i(b), nil
		}
		return a, nil
	}
	return arith("-", int64(0), a)
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func (n binNode) eval(c *ctx) (any, error) {
	a, err := n.a.eval(c)
	if err != nil {
		return nil, err
	}
	b, err := n.b.eval(c)
	if err != nil {
		return nil, err
	}
	if n.op == "~" {
		return concat(tildeStr(a), tildeStr(b))
	}
	return arith(n.op, a, b)
}

// tildeStr is how ~ converts (@huggingface/jinja joins a mapping as
// "[object Map]"; Python's str is its repr).
func tildeStr(v any) string { return str(v) }

// concat joins strings up to maxOutput bytes (a template doubling a string
// in a loop fails instead of taking the memory).
func concat(a, b string) (any, error) {
	if len(a)+len(b) > maxOutput {
		return nil, fmt.Errorf("string over %d bytes", maxOutput)
	}
	return a + b, nil
}

// arith applies a binary operator as Python does: integers never wrap,
// / is true division, // and % floor.
func arith(op string, a, b any) (any, error) {
	for _, v := range []any{a, b} {
		switch u := v.(type) {
		case Undefined:
			return nil, fmt.Errorf("%s is undefined (in %s)", u.name, op)
		case nil:
			return nil, fmt.Errorf("unsupported operand types for %s: %s and %s", op, typeName(a), typeName(b))
		}
	}
	switch x := a.(type) {
	case string:
		switch y := b.(type) {
		case string:
			if op == "+" {
				return concat(x, y)
			}
		case int64, bool:
			if op == "*" {
				return repeatStr(x, toBig(y).Int64())
			}
		}
		if op == "+" && isNum(b) { // @huggingface/jinja joins a string and a number
			return concat(x, str(b))
		}
		if op == "%" {
			return nil, fmt.Errorf("printf-style string formatting (%%) is not supported")
		}
	case *List:
		switch y := b.(type) {
		case *List:
			if op == "+" {
				if len(x.items)+len(y.items) > maxOutput {
					return nil, fmt.Errorf("list over %d items", maxOutput)
				}
				return &List{items: append(append([]any{}, x.items...), y.items...)}, nil
			}
		case int64:
			if op == "*" {
				if y <= 0 {
					return &List{items: []any{}}, nil
				}
				if int64(len(x.items))*y > maxOutput/8 || y > maxOutput {
					return nil, fmt.Errorf("list over %d items", maxOutput/8)
				}
				out := make([]any, 0, int64(len(x.items))*y)
				for i := int64(0); i < y; i++ {
					out = append(out, x.items...)
				}
				return &List{items: out}, nil
			}
		}
	}
	if s, ok := b.(string); ok {
		if op == "+" && isNum(a) {
			return concat(str(a), s)
		}
		if op == "*" && isInt(a) {
			return repeatStr(s, toBig(a).Int64())
		}
	}
	if !isNum(a) || !isNum(b) {
		return nil, fmt.Errorf("unsupported operand types for %s: %s and %s", op, typeName(a), typeName(b))
	}
	if isInt(a) && isInt(b) {
		return intArith(op, a, b)
	}
	x, y := toFloat(a), toFloat(b)
	switch op {
	case "+":
		return x + y, nil
	case "-":
		return x - y, nil
	case "*":
		return x * y, nil
	case "/", "//", "%":
		if y == 0 {
			return nil, fmt.Errorf("float division by zero")
		}
		switch op {
		case "/":
			return x / y, nil
		case "//":
			return math.Floor(x / y), nil
		}
		m := math.Mod(x, y)
		if m != 0 && (m < 0) != (y < 0) {
			m += y
		}
		return m, nil
	case "**":
		if x == 0 && y < 0 {
			return nil, fmt.Errorf("0.0 cannot be raised to a negative power")
		}
		return math.Pow(x, y), nil
	}
	return nil, fmt.Errorf("unsupported operator %s", op)
}

func repeatStr(s string, n int64) (any, error) {
	if n <= 0 {
		return "", nil
	}
	if n > maxOutput || int64(len(s))*n > maxOutput {
		return nil, fmt.Errorf("string over %d bytes", maxOutput)
	}
	return strings.Repeat(s, int(n)), nil
}

// maxIntBits bounds big integers (10**100000 and the like).
const maxIntBits = 1 << 16

func intArith(op string, a, b any) (any, error) {
	if x, ok := a.(int64); ok {
		if y, ok := b.(int64); ok {
			switch op {
			case "+":
				if r := x + y; (r > x) == (y > 0) {
					return r, nil
				}
			case "-":
				if r := x - y; (r < x) == (y > 0) {
					return r, nil
				}
			case "*":
				if x == 0 || y == 0 {
					return int64(0), nil
				}
				if r := x * y; r/y == x && !(x == -1 && y == math.MinInt64) && !(y == -1 && x == math.MinInt64) {
					return r, nil
				}
			}
		}
	}
	x, y := toBig(a), toBig(b)
	r := new(big.Int)
	switch op {
	case "+":
		r.Add(x, y)
	case "-":
		r.Sub(x, y)
	case "*":
		if x.BitLen()+y.BitLen() > maxIntBits {
			return nil, fmt.Errorf("integer over %d bits", maxIntBits)
		}
		r.Mul(x, y)
	case "/":
		if y.Sign() == 0 {
			return nil, fmt.Errorf("division by zero")
		}
		f, _ := new(big.Rat).SetFrac(x, y).Float64()
		return f, nil
	case "//", "%":
		if y.Sign() == 0 {
			return nil, fmt.Errorf("integer division or modulo by zero")
		}
		q, m := new(big.Int), new(big.Int)
		q.DivMod(x, y, m) // Euclidean: 0 <= m < |y|
		if m.Sign() != 0 && y.Sign() < 0 {
			q.Add(q, big.NewInt(1))
			m.Add(m, y)
		}
		if op == "//" {
			return normInt(q), nil
		}
		return normInt(m), nil
	case "**":
		if y.Sign() < 0 {
			if x.Sign() == 0 {
				return nil, fmt.Errorf("0.0 cannot be raised to a negative power")
			}
			return math.Pow(toFloat(a), toFloat(b)), nil
		}
		if x.BitLen() > 1 && (!y.IsInt64() || int64(x.BitLen())*y.Int64() > maxIntBits) {
			return nil, fmt.Errorf("integer over %d bits", maxIntBits)
		}
		r.Exp(x, y, nil)
	default:
		return nil, fmt.Errorf("unsupported operator %s", op)
	}
	return normInt(r), nil
}

func (n compareNode) eval(c *ctx) (any, error) {
	a, err := n.first.eval(c)
	if err != nil {
		return nil, err
	}
	for i, op := range n.ops {
		b, err := n.rest[i].eval(c)
		if err != nil {
			return nil, err
		}
		ok, err := compareOp(op, a, b)
		if err != nil || !ok {
			return false, err
		}
		a = b
	}
	return true, nil
}

func compareOp(op string, a, b any) (bool, error) {
	switch op {
	case "==":
		return equal(a, b), nil
	case "!=":
		return !equal(a, b), nil
	case "in":
		return contains2(b, a)
	case "not in":
		ok, err := contains2(b, a)
		return !ok, err
	}
	r, err := compare(a, b)
	if err != nil {
		return false, err
	}
	switch op {
	case "<":
		return r < 0, nil
	case ">":
		return r > 0, nil
	case "<=":
		return r <= 0, nil
	}
	return r >= 0, nil
}

// contains2 is Python's "x in container"; anything is not in undefined.
func contains2(container, x any) (bool, error) {
	switch c := container.(type) {
	case string:
		s, ok := x.(string)
		if !ok {
			return false, fmt.Errorf("'in <string>' requires string as left operand, not %s", typeName(x))
		}
		return strings.Contains(c, s), nil
	case *List:
		for _, y := range c.items {
			if equal(y, x) {
				return true, nil
			}
		}
		return false, nil
	case *Dict:
		_, has := c.get(x)
		return has, nil
	case *Namespace:
		return contains2(c.d, x)
	case Undefined:
		return false, nil
	}
	return false, fmt.Errorf("argument of type '%s' is not iterable", typeName(container))
}

func (n attrNode) eval(c *ctx) (any, error) {
	x, err := n.x.eval(c)
	if err != nil {
		return nil, err
	}
	if u, ok := x.(Undefined); ok { // as Jinja2's Undefined does
		return nil, fmt.Errorf("%s is undefined (reading its attribute %s)", u.name, n.name)
	}
	return getAttr(x, n.name), nil
}

// getAttr is x.name: a mapping's key, else a method; missing is undefined
// (as @huggingface/jinja, also on undefined and none).
func getAttr(x any, name string) any {
	switch d := x.(type) {
	case *Dict:
		if v, ok := d.m[name]; ok {
			return v
		}
	case *Namespace:
		if v, ok := d.d.m[name]; ok {
			return v
		}
		return Undefined{name}
	case *loopVal:
		return d.attr(name)
	}
	if m := method(x, name); m != nil {
		return m
	}
	return Undefined{name}
}

func (n itemNode) eval(c *ctx) (any, error) {
	x, err := n.x.eval(c)
	if err != nil {
		return nil, err
	}
	k, err := n.key.eval(c)
	if err != nil {
		return nil, err
	}
	switch u := x.(type) {
	case Undefined: // as Jinja2's Undefined does
		return nil, fmt.Errorf("%s is undefined (reading its item %s)", u.name, pyRepr(k))
	case nil:
		if isInt(k) {
			return nil, fmt.Errorf("none has no element %s", str(k))
		}
	}
	return getItem(x, k), nil
}

func getItem(x, k any) any {
	switch d := x.(type) {
	case *Dict:
		if v, ok := d.get(k); ok {
			return v
		}
		if s, ok := k.(string); ok {
			return getAttr(x, s)
		}
		return Undefined{str(k)}
	case *Namespace:
		if v, ok := d.d.get(k); ok {
			return v
		}
		return Undefined{str(k)}
	case *loopVal:
		return d.attr(str(k))
	case *List:
		if isInt(k) {
			i := toBig(k).Int64()
			if i < 0 {
				i += int64(len(d.items))
			}
			if i >= 0 && i < int64(len(d.items)) {
				return d.items[i]
			}
			return Undefined{fmt.Sprintf("index %s", str(k))}
		}
	case string:
		if isInt(k) {
			r := []rune(d)
			i := toBig(k).Int64()
			if i < 0 {
				i += int64(len(r))
			}
			if i >= 0 && i < int64(len(r)) {
				return string(r[i])
			}
			return Undefined{fmt.Sprintf("index %s", str(k))}
		}
	}
	if s, ok := k.(string); ok {
		return getAttr(x, s)
	}
	return Undefined{str(k)}
}

func (n sliceNode) eval(c *ctx) (any, error) {
	x, err := n.x.eval(c)
	if err != nil {
		return nil, err
	}
	var idx [3]*int64
	for i, p := range n.parts {
		if p == nil {
			continue
		}
		v, err := p.eval(c)
		if err != nil {
			return nil, err
		}
		switch v.(type) {
		case nil, Undefined:
			continue
		}
		if !isInt(v) {
			return nil, fmt.Errorf("slice indices must be integers or none, not %s", typeName(v))
		}
		iv := toBig(v).Int64()
		idx[i] = &iv
	}
	switch s := x.(type) {
	case *List:
		return &List{items: slice(s.items, idx)}, nil
	case string:
		rs := []rune(s)
		items := make([]any, len(rs))
		for i, r := range rs {
			items[i] = r
		}
		var sb strings.Builder
		for _, r := range slice(items, idx) {
			sb.WriteRune(r.(rune))
		}
		return sb.String(), nil
	}
	return nil, fmt.Errorf("cannot slice %s", typeName(x))
}

// slice is Python's items[start:stop:step].
func slice(items []any, idx [3]*int64) []any {
	n := int64(len(items))
	step := int64(1)
	if idx[2] != nil && *idx[2] != 0 {
		step = *idx[2]
	}
	clamp := func(p *int64, def int64) int64 {
		if p == nil {
			return def
		}
		v := *p
		if v < 0 {
			v += n
		}
		lo, hi := int64(0), n
		if step < 0 {
			lo, hi = -1, n-1
		}
		return max(lo, min(v, hi))
	}
	out := []any{}
	if step > 0 {
		for i := clamp(idx[0], 0); i < clamp(idx[1], n); i += step {
			out = append(out, items[i])
		}
	} else {
		for i := clamp(idx[0], n-1); i > clamp(idx[1], -1); i += step {
			out = append(out, items[i])
		}
	}
	return out
}

// eval evaluates call arguments, expanding *args and **kwargs.
func (a callArgs) eval(c *ctx) ([]any, *Dict, error) {
	args := make([]any, 0, len(a.pos))
	for _, e := range a.pos {
		v, err := e.eval(c)
		if err != nil {
			return nil, nil, err
		}
		args = append(args, v)
	}
	if a.star != nil {
		v, err := a.star.eval(c)
		if err != nil {
			return nil, nil, err
		}
		items, err := iterate(v)
		if err != nil {
			return nil, nil, err
		}
		args = append(args, items...)
	}
	kw := NewDict()
	for _, k := range a.kw {
		v, err := k.e.eval(c)
		if err != nil {
			return nil, nil, err
		}
		kw.Set(k.name, v)
	}
	if a.dstar != nil {
		v, err := a.dstar.eval(c)
		if err != nil {
			return nil, nil, err
		}
		d, ok := v.(*Dict)
		if !ok {
			return nil, nil, fmt.Errorf("argument after ** must be a mapping, not %s", typeName(v))
		}
		for _, k := range d.keys {
			kw.set(str(k), d.m[k])
		}
	}
	return args, kw, nil
}

func (n *callNode) eval(c *ctx) (any, error) {
	f, err := n.f.eval(c)
	if err != nil {
		return nil, err
	}
	args, kw, err := n.args.eval(c)
	if err != nil {
		return nil, err
	}
	if err := c.step(); err != nil {
		return nil, err
	}
	v, err := callValue(c, f, args, kw, n.f)
	return v, atLine(n.line, err)
}

func callValue(c *ctx, f any, args []any, kw *Dict, fn node) (any, error) {
	switch g := f.(type) {
	case Func:
		m := make(map[string]any, kw.Len())
		for _, k := range kw.keys {
			m[str(k)] = kw.m[k]
		}
		return g(args, m)
	case ctxFunc:
		return g(c, args, kw)
	case *macro:
		return g.call(c, args, kw)
	case Undefined:
		if nn, ok := fn.(nameNode); ok {
			return nil, fmt.Errorf("unknown function %s", nn.name)
		}
		if an, ok := fn.(attrNode); ok {
			return nil, fmt.Errorf("unknown method %s", an.name)
		}
		return nil, fmt.Errorf("%s is undefined, not callable", g.name)
	}
	return nil, fmt.Errorf("'%s' object is not callable", typeName(f))
}

// ctxFunc is a built-in that needs the rendering's state (strftime_now,
// range's budget, a filter name passed to map).
type ctxFunc func(c *ctx, args []any, kw *Dict) (any, error)
