package jinja

import (
	"fmt"
	"math"
	"math/big"
	"sort"
	"strconv"
	"strings"
	"unicode"
)

// Values a template computes with:
//
//	nil        none
//	Undefined  a missing variable, key or attribute
//	bool
//	int64, *big.Int   integers (an int64 that would overflow becomes a *big.Int, as Python's int never wraps)
//	float64
//	string
//	*List      a mutable list (tuples are Lists too)
//	*Dict      a mapping that keeps insertion order, as a Python dict does
//	*Namespace the result of namespace(...)
//	Func, *macro  callables
//
// Render converts Go inputs (map[string]any, []any, int, float64, …) into
// these; ParseJSON decodes JSON into them keeping key order.

// Undefined is a missing value. It prints as "", is false, and iterates as
// empty; name says what was missing, for error messages.
type Undefined struct{ name string }

// List is a Python list, or a tuple (which prints in parentheses).
type List struct {
	items []any
	tuple bool
}

// NewList returns a list of the values items.
func NewList(items ...any) *List { return &List{items: items} }

// Dict is a mapping in insertion order. Keys are strings, integers,
// floats, booleans or none (dictKey).
type Dict struct {
	keys []any
	m    map[any]any
}

// NewDict returns an empty Dict.
func NewDict() *Dict { return &Dict{m: map[any]any{}} }

// Set adds or replaces key; a new key goes last.
func (d *Dict) Set(key string, v any) { d.set(key, v) }

// Get returns the value of key.
func (d *Dict) Get(key string) (any, bool) {
	v, ok := d.m[key]
	return v, ok
}

// Len is the number of keys.
func (d *Dict) Len() int { return len(d.keys) }

// dictKey is the map key of a template value: integral floats and
// integers are one key (1 == 1.0, as in Python), a big integer its text,
// a container its printed form.
func dictKey(k any) any {
	switch c := k.(type) {
	case string, int64, bool, nil:
		return k
	case float64:
		if c == float64(int64(c)) {
			return int64(c)
		}
		return c
	}
	return str(k)
}

func (d *Dict) set(k, v any) {
	k = dictKey(k)
	if _, ok := d.m[k]; !ok {
		d.keys = append(d.keys, k)
	}
	d.m[k] = v
}

func (d *Dict) get(k any) (any, bool) {
	v, ok := d.m[dictKey(k)]
	return v, ok
}

func (d *Dict) delete(key any) {
	key = dictKey(key)
	if _, ok := d.m[key]; !ok {
		return
	}
	delete(d.m, key)
	for i, k := range d.keys {
		if k == key {
			d.keys = append(d.keys[:i:i], d.keys[i+1:]...)
			break
		}
	}
}

func (d *Dict) copy() *Dict {
	c := &Dict{keys: append([]any(nil), d.keys...), m: make(map[any]any, len(d.m))}
	for k, v := range d.m {
		c.m[k] = v
	}
	return c
}

// Namespace is the mutable object namespace() returns.
type Namespace struct{ d *Dict }

// Func is a callable a template can use. kw holds keyword arguments.
type Func func(args []any, kw map[string]any) (any, error)

// toValue converts a Go value given to Render into a template value.
// Maps without an order (map[string]any) iterate in sorted key order.
func toValue(x any) any {
	switch c := x.(type) {
	case nil, bool, int64, float64, string, *big.Int, *List, *Dict, *Namespace, Func, Undefined, *macro:
		return x
	case int:
		return int64(c)
	case int32:
		return int64(c)
	case float32:
		return float64(c)
	case []any:
		l := &List{items: make([]any, len(c))}
		for i, v := range c {
			l.items[i] = toValue(v)
		}
		return l
	case []string:
		l := &List{items: make([]any, len(c))}
		for i, v := range c {
			l.items[i] = v
		}
		return l
	case map[string]any:
		keys := make([]string, 0, len(c))
		for k := range c {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		d := NewDict()
		for _, k := range keys {
			d.Set(k, toValue(c[k]))
		}
		return d
	case func(args []any, kw map[string]any) (any, error):
		return Func(c)
	}
	return fmt.Sprintf("%v", x)
}

func truthy(v any) bool {
	switch c := v.(type) {
	case nil, Undefined:
		return false
	case bool:
		return c
	case int64:
		return c != 0
	case *big.Int:
		return c.Sign() != 0
	case float64:
		return c != 0
	case string:
		return c != ""
	case *List:
		return len(c.items) > 0
	case *Dict:
		return c.Len() > 0
	}
	return true
}

func typeName(v any) string {
	switch v.(type) {
	case string:
		return "str"
	case int64, *big.Int:
		return "int"
	case float64:
		return "float"
	case bool:
		return "bool"
	case nil:
		return "none"
	case Undefined:
		return "undefined"
	case *List:
		return "list"
	case *Dict:
		return "dict"
	case *Namespace:
		return "namespace"
	case Func, ctxFunc, *macro:
		return "function"
	case *loopVal:
		return "loop"
	}
	return fmt.Sprintf("%T", v)
}

// str is how {{ }}, ~ and the string filter turn a value into text:
// Python's str(), as transformers and vLLM render (undefined is "", none
// "None", booleans True/False, floats with a ".0" when integral, lists and
// mappings as their repr). @huggingface/jinja prints none as "", booleans
// as true/false and containers as JSON; no template of llama.cpp's corpus
// prints one of those where it renders (tokenizer/template_corpus_test.go).
func str(v any) string {
	switch c := v.(type) {
	case string:
		return c
	case Undefined:
		return ""
	case nil:
		return "None"
	case bool:
		if c {
			return "True"
		}
		return "False"
	case int64:
		return strconv.FormatInt(c, 10)
	case *big.Int:
		return c.String()
	case float64:
		return formatFloat(c)
	case *List, *Dict, *Namespace:
		return pyRepr(v)
	case Func, ctxFunc, *macro:
		return "<function>"
	case *loopVal:
		return "<loop>"
	}
	return fmt.Sprint(v)
}

// pyRepr is Python's repr of a value (how str() shows a container's items).
func pyRepr(v any) string {
	var sb strings.Builder
	writeRepr(&sb, v, 0)
	return sb.String()
}

func writeRepr(sb *strings.Builder, v any, depth int) {
	if depth > maxJSONDepth || sb.Len() > maxOutput {
		sb.WriteString("...")
		return
	}
	switch c := v.(type) {
	case nil:
		sb.WriteString("None")
	case Undefined:
		sb.WriteString("Undefined")
	case bool:
		if c {
			sb.WriteString("True")
		} else {
			sb.WriteString("False")
		}
	case string:
		writeStrRepr(sb, c)
	case *List:
		open, close := "[", "]"
		if c.tuple {
			open, close = "(", ")"
			if len(c.items) == 1 {
				close = ",)"
			}
		}
		sb.WriteString(open)
		for i, x := range c.items {
			if i > 0 {
				sb.WriteString(", ")
			}
			writeRepr(sb, x, depth+1)
		}
		sb.WriteString(close)
	case *Dict:
		sb.WriteByte('{')
		for i, k := range c.keys {
			if i > 0 {
				sb.WriteString(", ")
			}
			writeRepr(sb, k, depth+1)
			sb.WriteString(": ")
			writeRepr(sb, c.m[k], depth+1)
		}
		sb.WriteByte('}')
	case *Namespace:
		sb.WriteString("<Namespace ")
		writeRepr(sb, c.d, depth+1)
		sb.WriteByte('>')
	default:
		sb.WriteString(str(v))
	}
}

// writeStrRepr quotes s as Python's repr does.
func writeStrRepr(sb *strings.Builder, s string) {
	q := byte('\'')
	if strings.IndexByte(s, '\'') >= 0 && strings.IndexByte(s, '"') < 0 {
		q = '"'
	}
	sb.WriteByte(q)
	for _, r := range s {
		switch {
		case r == rune(q) || r == '\\':
			sb.WriteByte('\\')
			sb.WriteRune(r)
		case r == '\n':
			sb.WriteString(`\n`)
		case r == '\r':
			sb.WriteString(`\r`)
		case r == '\t':
			sb.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(sb, `\x%02x`, r)
		case !unicode.IsPrint(r) && r != ' ':
			switch {
			case r < 0x100:
				fmt.Fprintf(sb, `\x%02x`, r)
			case r < 0x10000:
				fmt.Fprintf(sb, `\u%04x`, r)
			default:
				fmt.Fprintf(sb, `\U%08x`, r)
			}
		default:
			sb.WriteRune(r)
		}
	}
	sb.WriteByte(q)
}

// formatFloat prints a float as Python's repr does.
func formatFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case math.IsNaN(f):
		return "nan"
	}
	if f == math.Trunc(f) && math.Abs(f) < 1e16 {
		return strconv.FormatFloat(f, 'f', 1, 64)
	}
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if e := strings.IndexByte(s, 'e'); e >= 0 {
		mant, exp := s[:e], s[e+1:]
		sign := exp[0]
		exp = strings.TrimLeft(exp[1:], "0")
		if len(exp) < 2 {
			exp = strings.Repeat("0", 2-len(exp)) + exp
		}
		return mant + "e" + string(sign) + exp
	}
	return s
}

// Numbers. num reports whether v is a number (bools count, as in Python).
func isNum(v any) bool {
	switch v.(type) {
	case int64, *big.Int, float64, bool:
		return true
	}
	return false
}

func toFloat(v any) float64 {
	switch c := v.(type) {
	case int64:
		return float64(c)
	case *big.Int:
		f, _ := new(big.Float).SetInt(c).Float64()
		return f
	case float64:
		return c
	case bool:
		if c {
			return 1
		}
	}
	return 0
}

func toBig(v any) *big.Int {
	switch c := v.(type) {
	case int64:
		return big.NewInt(c)
	case *big.Int:
		return c
	case bool:
		if c {
			return big.NewInt(1)
		}
	}
	return new(big.Int)
}

// normInt returns b as an int64 when it fits.
func normInt(b *big.Int) any {
	if b.IsInt64() {
		return b.Int64()
	}
	return b
}

func isInt(v any) bool {
	switch v.(type) {
	case int64, *big.Int, bool:
		return true
	}
	return false
}

// equal is Python's ==.
func equal(a, b any) bool {
	if isNum(a) && isNum(b) {
		if isInt(a) && isInt(b) {
			return toBig(a).Cmp(toBig(b)) == 0
		}
		return toFloat(a) == toFloat(b)
	}
	switch x := a.(type) {
	case string:
		y, ok := b.(string)
		return ok && x == y
	case nil:
		return b == nil
	case Undefined:
		_, ok := b.(Undefined)
		return ok
	case *List:
		y, ok := b.(*List)
		if !ok || len(x.items) != len(y.items) {
			return false
		}
		for i := range x.items {
			if !equal(x.items[i], y.items[i]) {
				return false
			}
		}
		return true
	case *Dict:
		y, ok := b.(*Dict)
		if !ok || x.Len() != y.Len() {
			return false
		}
		for _, k := range x.keys {
			w, ok := y.m[k]
			if !ok || !equal(x.m[k], w) {
				return false
			}
		}
		return true
	case *Namespace:
		return a == b
	}
	return false
}

// compare orders two values as Python's < does: numbers with numbers,
// strings with strings, lists element-wise.
func compare(a, b any) (int, error) {
	if isNum(a) && isNum(b) {
		if isInt(a) && isInt(b) {
			return toBig(a).Cmp(toBig(b)), nil
		}
		x, y := toFloat(a), toFloat(b)
		switch {
		case x < y:
			return -1, nil
		case x > y:
			return 1, nil
		}
		return 0, nil
	}
	switch x := a.(type) {
	case string:
		if y, ok := b.(string); ok {
			return strings.Compare(x, y), nil
		}
	case *List:
		if y, ok := b.(*List); ok {
			for i := 0; i < len(x.items) && i < len(y.items); i++ {
				c, err := compare(x.items[i], y.items[i])
				if err != nil || c != 0 {
					return c, err
				}
			}
			return compareInt(len(x.items), len(y.items)), nil
		}
	}
	return 0, fmt.Errorf("'<' not supported between %s and %s", typeName(a), typeName(b))
}

func compareInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// iterate returns the items a for loop or a filter walks: a list's items,
// a mapping's keys, a string's characters; undefined is empty.
func iterate(v any) ([]any, error) {
	switch c := v.(type) {
	case *List:
		return c.items, nil
	case *Dict:
		out := make([]any, len(c.keys))
		for i, k := range c.keys {
			out[i] = k
		}
		return out, nil
	case *Namespace:
		return iterate(c.d)
	case string:
		out := make([]any, 0, len(c))
		for _, r := range c {
			out = append(out, string(r))
		}
		return out, nil
	case Undefined:
		return nil, nil
	}
	return nil, fmt.Errorf("'%s' object is not iterable", typeName(v))
}

// length is Python's len: characters of a string, items of a container.
func length(v any) (int, error) {
	switch c := v.(type) {
	case string:
		return len([]rune(c)), nil
	case *List:
		return len(c.items), nil
	case *Dict:
		return c.Len(), nil
	case Undefined:
		return 0, nil
	}
	return 0, fmt.Errorf("object of type '%s' has no len()", typeName(v))
}
