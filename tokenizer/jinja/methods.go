package jinja

import (
	"fmt"
	"strings"
	"unicode"
)

// method returns x.name as a bound method of a string, list or mapping
// (Python's), or nil.
func method(x any, name string) any {
	var f func(args []any, kw *Dict) (any, error)
	switch c := x.(type) {
	case string:
		f = strMethod(c, name)
	case *List:
		f = listMethod(c, name)
	case *Dict:
		f = dictMethod(c, name)
	}
	if f == nil {
		return nil
	}
	return ctxFunc(func(_ *ctx, args []any, kw *Dict) (any, error) { return f(args, kw) })
}

// arg returns positional argument i, else keyword name, else def.
func arg(args []any, kw *Dict, i int, name string, def any) any {
	if i >= 0 && i < len(args) {
		return args[i]
	}
	if kw != nil {
		if v, ok := kw.Get(name); ok {
			return v
		}
	}
	return def
}

func argStr(args []any, kw *Dict, i int, name, fn string) (string, error) {
	v := arg(args, kw, i, name, nil)
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("%s: argument %s must be a string, not %s", fn, name, typeName(v))
	}
	return s, nil
}

const pySpace = " \t\n\r\v\f\x1c\x1d\x1e\x1f\u0085\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"

func strMethod(s, name string) func(args []any, kw *Dict) (any, error) {
	switch name {
	case "upper":
		return func([]any, *Dict) (any, error) { return strings.ToUpper(s), nil }
	case "lower":
		return func([]any, *Dict) (any, error) { return strings.ToLower(s), nil }
	case "title":
		return func([]any, *Dict) (any, error) { return pyTitle(s), nil }
	case "capitalize":
		return func([]any, *Dict) (any, error) { return capitalize(s), nil }
	case "strip", "lstrip", "rstrip":
		return func(args []any, kw *Dict) (any, error) {
			cut := pySpace
			if v := arg(args, kw, 0, "chars", nil); v != nil {
				if _, u := v.(Undefined); !u {
					cut = str(v)
				}
			}
			if name != "rstrip" {
				s = strings.TrimLeft(s, cut)
			}
			if name != "lstrip" {
				s = strings.TrimRight(s, cut)
			}
			return s, nil
		}
	case "startswith", "endswith":
		return func(args []any, kw *Dict) (any, error) {
			has := strings.HasPrefix
			if name == "endswith" {
				has = strings.HasSuffix
			}
			switch p := arg(args, kw, 0, "prefix", nil).(type) {
			case string:
				return has(s, p), nil
			case *List:
				for _, x := range p.items {
					ps, ok := x.(string)
					if !ok {
						return nil, fmt.Errorf("%s: tuple items must be strings, not %s", name, typeName(x))
					}
					if has(s, ps) {
						return true, nil
					}
				}
				return false, nil
			default:
				return nil, fmt.Errorf("%s: argument must be a string or a tuple of strings, not %s", name, typeName(p))
			}
		}
	case "split", "rsplit":
		return func(args []any, kw *Dict) (any, error) {
			n := -1
			if v := arg(args, kw, 1, "maxsplit", int64(-1)); isInt(v) {
				n = int(toBig(v).Int64())
			}
			var parts []string
			switch sep := arg(args, kw, 0, "sep", nil).(type) {
			case nil, Undefined:
				parts = splitSpace(s, n, name == "rsplit")
			case string:
				if sep == "" {
					return nil, fmt.Errorf("%s: empty separator", name)
				}
				switch {
				case n < 0:
					parts = strings.Split(s, sep)
				case name == "split":
					parts = strings.SplitN(s, sep, n+1)
				default:
					parts = rsplitN(s, sep, n)
				}
			default:
				return nil, fmt.Errorf("%s: separator must be a string or none, not %s", name, typeName(sep))
			}
			out := make([]any, len(parts))
			for i, p := range parts {
				out[i] = p
			}
			return &List{items: out}, nil
		}
	case "replace":
		return func(args []any, kw *Dict) (any, error) {
			old, err := argStr(args, kw, 0, "old", "replace")
			if err != nil {
				return nil, err
			}
			nw, err := argStr(args, kw, 1, "new", "replace")
			if err != nil {
				return nil, err
			}
			n := -1
			if v := arg(args, kw, 2, "count", nil); isInt(v) {
				n = int(toBig(v).Int64())
			}
			if old == "" && len(s) > maxOutput/max(1, len(nw)+1) {
				return nil, fmt.Errorf("string over %d bytes", maxOutput)
			}
			if len(old) > 0 && len(nw) > len(old) && strings.Count(s, old)*(len(nw)-len(old))+len(s) > maxOutput {
				return nil, fmt.Errorf("string over %d bytes", maxOutput)
			}
			return strings.Replace(s, old, nw, n), nil
		}
	case "find", "rfind", "index", "rindex", "count":
		return func(args []any, kw *Dict) (any, error) {
			sub, err := argStr(args, kw, 0, "sub", name)
			if err != nil {
				return nil, err
			}
			if name == "count" {
				return int64(strings.Count(s, sub)), nil
			}
			i := strings.Index(s, sub)
			if name[0] == 'r' {
				i = strings.LastIndex(s, sub)
			}
			if i >= 0 {
				i = len([]rune(s[:i]))
			} else if name == "index" || name == "rindex" {
				return nil, fmt.Errorf("%s: substring not found", name)
			}
			return int64(i), nil
		}
	case "join":
		return func(args []any, kw *Dict) (any, error) {
			items, err := iterate(arg(args, kw, 0, "iterable", nil))
			if err != nil {
				return nil, err
			}
			parts := make([]string, len(items))
			for i, it := range items {
				p, ok := it.(string)
				if !ok {
					return nil, fmt.Errorf("join: item %d is %s, not a string", i, typeName(it))
				}
				parts[i] = p
			}
			return strings.Join(parts, s), nil
		}
	case "isdigit", "isnumeric", "isdecimal", "isalpha", "isalnum", "isspace", "isupper", "islower":
		return func([]any, *Dict) (any, error) { return strIs(s, name), nil }
	case "zfill":
		return func(args []any, kw *Dict) (any, error) {
			w := int(toBig(arg(args, kw, 0, "width", int64(0))).Int64())
			n := len([]rune(s))
			if w <= n || w > maxOutput {
				return s, nil
			}
			sign := ""
			if s != "" && (s[0] == '-' || s[0] == '+') {
				sign, s = s[:1], s[1:]
			}
			return sign + strings.Repeat("0", w-n) + s, nil
		}
	case "format":
		return func(args []any, kw *Dict) (any, error) { return pyFormat(s, args, kw) }
	}
	return nil
}

// splitSpace is str.split() with no separator: runs of white space.
func splitSpace(s string, n int, right bool) []string {
	if right {
		f := strings.FieldsFunc(s, unicode.IsSpace)
		if n < 0 || len(f) <= n {
			return f
		}
		// keep the first len(f)-n fields joined with their original spacing
		rest := strings.TrimRightFunc(s, unicode.IsSpace)
		out := make([]string, n)
		for i := n - 1; i >= 0; i-- {
			j := strings.LastIndexFunc(rest, unicode.IsSpace)
			out[i] = rest[j+1:]
			rest = strings.TrimRightFunc(rest[:j+1], unicode.IsSpace)
		}
		return append([]string{rest}, out...)
	}
	var out []string
	rest := strings.TrimLeftFunc(s, unicode.IsSpace)
	for rest != "" {
		if n >= 0 && len(out) == n {
			out = append(out, rest)
			break
		}
		j := strings.IndexFunc(rest, unicode.IsSpace)
		if j < 0 {
			out = append(out, rest)
			break
		}
		out = append(out, rest[:j])
		rest = strings.TrimLeftFunc(rest[j:], unicode.IsSpace)
	}
	if out == nil {
		out = []string{}
	}
	return out
}

func rsplitN(s, sep string, n int) []string {
	var out []string
	for n > 0 {
		i := strings.LastIndex(s, sep)
		if i < 0 {
			break
		}
		out = append(out, s[i+len(sep):])
		s = s[:i]
		n--
	}
	out = append(out, s)
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

func strIs(s, name string) bool {
	if s == "" {
		return false
	}
	cased := false
	for _, r := range s {
		switch name {
		case "isdigit", "isnumeric", "isdecimal":
			if !unicode.IsDigit(r) {
				return false
			}
		case "isalpha":
			if !unicode.IsLetter(r) {
				return false
			}
		case "isalnum":
			if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
				return false
			}
		case "isspace":
			if !unicode.IsSpace(r) {
				return false
			}
		case "isupper":
			if unicode.IsLower(r) {
				return false
			}
			cased = cased || unicode.IsUpper(r)
		case "islower":
			if unicode.IsUpper(r) {
				return false
			}
			cased = cased || unicode.IsLower(r)
		}
	}
	return cased || (name != "isupper" && name != "islower")
}

// pyTitle is str.title(): the first letter of every run of letters upper,
// the rest lower.
func pyTitle(s string) string {
	var sb strings.Builder
	prevLetter := false
	for _, r := range s {
		if prevLetter {
			sb.WriteRune(unicode.ToLower(r))
		} else {
			sb.WriteRune(unicode.ToTitle(r))
		}
		prevLetter = unicode.IsLetter(r)
	}
	return sb.String()
}

func capitalize(s string) string {
	for i, r := range s {
		return string(unicode.ToTitle(r)) + strings.ToLower(s[i+len(string(r)):])
	}
	return s
}

// pyFormat is str.format with {} and {0} and {name} fields (no format specs).
func pyFormat(s string, args []any, kw *Dict) (any, error) {
	var sb strings.Builder
	auto := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '{' && i+1 < len(s) && s[i+1] == '{' || c == '}' && i+1 < len(s) && s[i+1] == '}' {
			sb.WriteByte(c)
			i++
			continue
		}
		if c != '{' {
			sb.WriteByte(c)
			continue
		}
		j := strings.IndexByte(s[i:], '}')
		if j < 0 {
			return nil, fmt.Errorf("format: single '{' in format string")
		}
		field := s[i+1 : i+j]
		i += j
		var v any
		switch {
		case field == "":
			if auto >= len(args) {
				return nil, fmt.Errorf("format: not enough arguments")
			}
			v = args[auto]
			auto++
		case field[0] >= '0' && field[0] <= '9':
			k := 0
			fmt.Sscanf(field, "%d", &k)
			if k >= len(args) {
				return nil, fmt.Errorf("format: index %d out of range", k)
			}
			v = args[k]
		default:
			x, ok := kw.Get(field)
			if !ok {
				return nil, fmt.Errorf("format: no argument %s", field)
			}
			v = x
		}
		sb.WriteString(tildeStr(v))
		if sb.Len() > maxOutput {
			return nil, errOutput
		}
	}
	return sb.String(), nil
}

func listMethod(l *List, name string) func(args []any, kw *Dict) (any, error) {
	switch name {
	case "append":
		return func(args []any, _ *Dict) (any, error) {
			if len(args) != 1 {
				return nil, fmt.Errorf("append takes exactly one argument (%d given)", len(args))
			}
			if len(l.items) >= maxOutput/8 {
				return nil, fmt.Errorf("list over %d items", maxOutput/8)
			}
			l.items = append(l.items, args[0])
			return nil, nil
		}
	case "extend":
		return func(args []any, _ *Dict) (any, error) {
			if len(args) != 1 {
				return nil, fmt.Errorf("extend takes exactly one argument (%d given)", len(args))
			}
			items, err := iterate(args[0])
			if err != nil {
				return nil, err
			}
			if len(l.items)+len(items) > maxOutput/8 {
				return nil, fmt.Errorf("list over %d items", maxOutput/8)
			}
			l.items = append(l.items, items...)
			return nil, nil
		}
	case "insert":
		return func(args []any, _ *Dict) (any, error) {
			if len(args) != 2 || !isInt(args[0]) {
				return nil, fmt.Errorf("insert takes an index and a value")
			}
			i := int(max(min(toBig(args[0]).Int64(), int64(len(l.items))), -int64(len(l.items))))
			if i < 0 {
				i += len(l.items)
			}
			l.items = append(l.items[:i], append([]any{args[1]}, l.items[i:]...)...)
			return nil, nil
		}
	case "pop":
		return func(args []any, _ *Dict) (any, error) {
			if len(l.items) == 0 {
				return nil, fmt.Errorf("pop from empty list")
			}
			i := int64(len(l.items) - 1)
			if len(args) > 0 {
				if !isInt(args[0]) {
					return nil, fmt.Errorf("pop: index must be an integer, not %s", typeName(args[0]))
				}
				if i = toBig(args[0]).Int64(); i < 0 {
					i += int64(len(l.items))
				}
				if i < 0 || i >= int64(len(l.items)) {
					return nil, fmt.Errorf("pop index out of range")
				}
			}
			v := l.items[i]
			l.items = append(l.items[:i:i], l.items[i+1:]...)
			return v, nil
		}
	case "index", "count":
		return func(args []any, _ *Dict) (any, error) {
			if len(args) < 1 {
				return nil, fmt.Errorf("%s takes one argument", name)
			}
			n := int64(0)
			for i, x := range l.items {
				if equal(x, args[0]) {
					if name == "index" {
						return int64(i), nil
					}
					n++
				}
			}
			if name == "index" {
				return nil, fmt.Errorf("index: %s is not in list", str(args[0]))
			}
			return n, nil
		}
	case "copy":
		return func([]any, *Dict) (any, error) { return &List{items: append([]any{}, l.items...)}, nil }
	case "reverse":
		return func([]any, *Dict) (any, error) {
			for i, j := 0, len(l.items)-1; i < j; i, j = i+1, j-1 {
				l.items[i], l.items[j] = l.items[j], l.items[i]
			}
			return nil, nil
		}
	}
	return nil
}

func dictMethod(d *Dict, name string) func(args []any, kw *Dict) (any, error) {
	switch name {
	case "get":
		return func(args []any, kw *Dict) (any, error) {
			if len(args) == 0 {
				return nil, fmt.Errorf("get takes a key")
			}
			if v, ok := d.get(args[0]); ok {
				return v, nil
			}
			return arg(args, kw, 1, "default", nil), nil
		}
	case "items":
		return func([]any, *Dict) (any, error) { return dictItems(d), nil }
	case "keys":
		return func([]any, *Dict) (any, error) {
			out := make([]any, len(d.keys))
			for i, k := range d.keys {
				out[i] = k
			}
			return &List{items: out}, nil
		}
	case "values":
		return func([]any, *Dict) (any, error) {
			out := make([]any, len(d.keys))
			for i, k := range d.keys {
				out[i] = d.m[k]
			}
			return &List{items: out}, nil
		}
	case "copy":
		return func([]any, *Dict) (any, error) { return d.copy(), nil }
	case "update":
		return func(args []any, kw *Dict) (any, error) {
			if len(args) > 0 {
				o, ok := args[0].(*Dict)
				if !ok {
					return nil, fmt.Errorf("update: argument must be a mapping, not %s", typeName(args[0]))
				}
				for _, k := range o.keys {
					d.set(k, o.m[k])
				}
			}
			for _, k := range kw.keys {
				d.set(k, kw.m[k])
			}
			return nil, nil
		}
	case "pop":
		return func(args []any, _ *Dict) (any, error) {
			if len(args) == 0 {
				return nil, fmt.Errorf("pop takes a key")
			}
			k := args[0]
			if v, ok := d.get(k); ok {
				d.delete(k)
				return v, nil
			}
			if len(args) > 1 {
				return args[1], nil
			}
			return nil, fmt.Errorf("pop: key %s not found", str(k))
		}
	case "setdefault":
		return func(args []any, _ *Dict) (any, error) {
			if len(args) == 0 {
				return nil, fmt.Errorf("setdefault takes a key")
			}
			k := args[0]
			if v, ok := d.get(k); ok {
				return v, nil
			}
			v := arg(args, nil, 1, "", nil)
			d.set(k, v)
			return v, nil
		}
	}
	return nil
}

func dictItems(d *Dict) *List {
	out := make([]any, len(d.keys))
	for i, k := range d.keys {
		out[i] = &List{items: []any{k, d.m[k]}, tuple: true}
	}
	return &List{items: out}
}
