package jinja

import (
	"fmt"

	"strings"
	"time"
)

func (n testNode) eval(c *ctx) (any, error) {
	x, err := n.x.eval(c)
	if err != nil {
		return nil, err
	}
	args, _, err := n.args.eval(c)
	if err != nil {
		return nil, err
	}
	r, err := applyTest(c, n.name, x, args)
	if err != nil {
		return nil, atLine(n.line, err)
	}
	return r != n.neg, nil
}

// applyTest is "x is name(args)".
func applyTest(_ *ctx, name string, x any, args []any) (bool, error) {
	one := func() (any, error) {
		if len(args) != 1 {
			return nil, fmt.Errorf("test %s takes one argument", name)
		}
		return args[0], nil
	}
	switch name {
	case "defined":
		_, u := x.(Undefined)
		return !u, nil
	case "undefined":
		_, u := x.(Undefined)
		return u, nil
	case "none":
		return x == nil, nil
	case "boolean":
		_, ok := x.(bool)
		return ok, nil
	case "true":
		return x == true, nil
	case "false":
		return x == false, nil
	case "string":
		_, ok := x.(string)
		return ok, nil
	case "number":
		_, isBool := x.(bool)
		return isNum(x) && !isBool, nil
	case "integer":
		_, isBool := x.(bool)
		return isInt(x) && !isBool, nil
	case "float":
		_, ok := x.(float64)
		return ok, nil
	case "mapping":
		_, ok := x.(*Dict)
		return ok, nil
	case "sequence":
		switch x.(type) {
		case string, *List, *Dict:
			return true, nil
		}
		return false, nil
	case "iterable":
		switch x.(type) {
		case string, *List, *Dict, Undefined:
			return true, nil
		}
		return false, nil
	case "callable":
		switch x.(type) {
		case Func, ctxFunc, *macro:
			return true, nil
		}
		return false, nil
	case "odd", "even":
		if _, isBool := x.(bool); !isInt(x) || isBool {
			return false, fmt.Errorf("test %s needs an integer, not %s", name, typeName(x))
		}
		odd := toBig(x).Bit(0) == 1
		return odd == (name == "odd"), nil
	case "divisibleby":
		y, err := one()
		if err != nil {
			return false, err
		}
		m, err := arith("%", x, y)
		if err != nil {
			return false, err
		}
		return equal(m, int64(0)), nil
	case "lower":
		s, ok := x.(string)
		return ok && s == strings.ToLower(s), nil
	case "upper":
		s, ok := x.(string)
		return ok && s == strings.ToUpper(s), nil
	case "eq", "equalto", "==", "ne", "!=", "lt", "<", "le", "<=", "gt", ">", "ge", ">=", "in":
		y, err := one()
		if err != nil {
			return false, err
		}
		op := map[string]string{"eq": "==", "equalto": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}[name]
		if op == "" {
			op = name
		}
		return compareOp(op, x, y)
	case "sameas":
		y, err := one()
		if err != nil {
			return false, err
		}
		switch x.(type) {
		case *List, *Dict, *Namespace:
			return x == y, nil
		}
		return equal(x, y) && typeName(x) == typeName(y), nil
	case "filter":
		y, err := one()
		if err != nil {
			return false, err
		}
		_, ok := filters[str(y)]
		return ok, nil
	}
	return false, fmt.Errorf("unknown test %s", name)
}

// globals are the functions every template sees.
var globals map[string]any

func init() {
	globals = map[string]any{
		"range":           ctxFunc(gRange),
		"namespace":       ctxFunc(gNamespace),
		"dict":            ctxFunc(gDict),
		"raise_exception": ctxFunc(gRaise),
		"strftime_now":    ctxFunc(gStrftimeNow),
	}
}

func gRange(c *ctx, args []any, _ *Dict) (any, error) {
	var lo, hi, step int64 = 0, 0, 1
	for _, a := range args {
		if _, isBool := a.(bool); !isInt(a) || isBool || !toBig(a).IsInt64() {
			return nil, fmt.Errorf("range: %s is not an integer", typeName(a))
		}
	}
	switch len(args) {
	case 1:
		hi = args[0].(int64)
	case 2, 3:
		lo, hi = args[0].(int64), args[1].(int64)
		if len(args) == 3 {
			step = args[2].(int64)
		}
	default:
		return nil, fmt.Errorf("range takes 1 to 3 arguments, not %d", len(args))
	}
	if step == 0 {
		return nil, fmt.Errorf("range() arg 3 must not be zero")
	}
	n := int64(0)
	if step > 0 && hi > lo {
		n = (hi - lo + step - 1) / step
	} else if step < 0 && lo > hi {
		n = (lo - hi - step - 1) / -step
	}
	if n > maxIterations {
		return nil, fmt.Errorf("range of %d items is over the %d limit", n, maxIterations)
	}
	if c.st.steps += int(n); c.st.steps > maxSteps {
		return nil, fmt.Errorf("rendering took over %d steps", maxSteps)
	}
	out := make([]any, n)
	for i := range out {
		out[i] = lo + int64(i)*step
	}
	return &List{items: out}, nil
}

func gNamespace(_ *ctx, args []any, kw *Dict) (any, error) {
	d := NewDict()
	if len(args) > 1 {
		return nil, fmt.Errorf("namespace takes at most one positional argument")
	}
	if len(args) == 1 {
		src, ok := args[0].(*Dict)
		if !ok {
			return nil, fmt.Errorf("namespace: argument must be a mapping, not %s", typeName(args[0]))
		}
		d = src.copy()
	}
	for _, k := range kw.keys {
		d.set(k, kw.m[k])
	}
	return &Namespace{d: d}, nil
}

func gDict(_ *ctx, args []any, kw *Dict) (any, error) {
	d := NewDict()
	if len(args) > 0 {
		src, ok := args[0].(*Dict)
		if !ok {
			return nil, fmt.Errorf("dict: argument must be a mapping, not %s", typeName(args[0]))
		}
		d = src.copy()
	}
	for _, k := range kw.keys {
		d.set(k, kw.m[k])
	}
	return d, nil
}

func gRaise(_ *ctx, args []any, _ *Dict) (any, error) {
	msg := ""
	if len(args) > 0 {
		msg = tildeStr(args[0])
	}
	return nil, &Raised{Message: msg}
}

func gStrftimeNow(c *ctx, args []any, _ *Dict) (any, error) {
	if len(args) != 1 {
		return nil, fmt.Errorf("strftime_now takes one format string")
	}
	f, ok := args[0].(string)
	if !ok {
		return nil, fmt.Errorf("strftime_now: format must be a string, not %s", typeName(args[0]))
	}
	return strftime(c.st.now, f), nil
}

// strftime formats t as C's strftime in the C locale.
func strftime(t time.Time, f string) string {
	var sb strings.Builder
	for i := 0; i < len(f); i++ {
		if f[i] != '%' || i+1 >= len(f) {
			sb.WriteByte(f[i])
			continue
		}
		i++
		pad := true
		if f[i] == '-' && i+1 < len(f) { // glibc: no padding
			pad = false
			i++
		}
		num := func(n, w int) {
			s := fmt.Sprint(n)
			if pad {
				s = fmt.Sprintf("%0*d", w, n)
			}
			sb.WriteString(s)
		}
		switch f[i] {
		case 'Y':
			sb.WriteString(fmt.Sprint(t.Year()))
		case 'y':
			num(t.Year()%100, 2)
		case 'm':
			num(int(t.Month()), 2)
		case 'd':
			num(t.Day(), 2)
		case 'e':
			sb.WriteString(fmt.Sprintf("%2d", t.Day()))
		case 'H':
			num(t.Hour(), 2)
		case 'I':
			h := t.Hour() % 12
			if h == 0 {
				h = 12
			}
			num(h, 2)
		case 'M':
			num(t.Minute(), 2)
		case 'S':
			num(t.Second(), 2)
		case 'j':
			num(t.YearDay(), 3)
		case 'p':
			sb.WriteString(map[bool]string{true: "PM", false: "AM"}[t.Hour() >= 12])
		case 'b', 'h':
			sb.WriteString(t.Month().String()[:3])
		case 'B':
			sb.WriteString(t.Month().String())
		case 'a':
			sb.WriteString(t.Weekday().String()[:3])
		case 'A':
			sb.WriteString(t.Weekday().String())
		case 'Z':
			sb.WriteString("UTC")
		case 'z':
			sb.WriteString("+0000")
		case 'F':
			sb.WriteString(t.Format("2006-01-02"))
		case 'T':
			sb.WriteString(t.Format("15:04:05"))
		case '%':
			sb.WriteByte('%')
		default:
			sb.WriteByte('%')
			sb.WriteByte(f[i])
		}
	}
	return sb.String()
}
