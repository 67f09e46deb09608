package jinja

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

func (n *filterNode) eval(c *ctx) (any, error) {
	x, err := n.x.eval(c)
	if err != nil {
		return nil, err
	}
	v, err := n.apply(c, x)
	return v, atLine(n.line, err)
}

func (n *filterNode) apply(c *ctx, x any) (any, error) {
	args, kw, err := n.args.eval(c)
	if err != nil {
		return nil, err
	}
	return applyFilter(c, n.name, x, args, kw)
}

type filterFunc func(c *ctx, x any, args []any, kw *Dict) (any, error)

var filters map[string]filterFunc

func init() {
	filters = map[string]filterFunc{
		"abs": fAbs,
		"attr": func(_ *ctx, x any, a []any, kw *Dict) (any, error) {
			return getAttr(x, str(arg(a, kw, 0, "name", ""))), nil
		},
		"capitalize": strFilter(capitalize),
		"count":      fLength,
		"d":          fDefault,
		"default":    fDefault,
		"dictsort":   fDictsort,
		"e":          strFilter(htmlEscape),
		"escape":     strFilter(htmlEscape),
		"first":      fFirst,
		"float":      fFloat,
		"from_json":  fFromJSON,
		"indent":     fIndent,
		"int":        fInt,
		"items":      fItems,
		"join":       fJoin,
		"last":       fLast,
		"length":     fLength,
		"list":       fList,
		"lower":      strFilter(strings.ToLower),
		"map":        fMap,
		"max":        fMinMax(1),
		"min":        fMinMax(-1),
		"reject":     fSelect(false, false),
		"rejectattr": fSelect(false, true),
		"replace":    fReplace,
		"reverse":    fReverse,
		"round":      fRound,
		"safe":       func(_ *ctx, x any, _ []any, _ *Dict) (any, error) { return x, nil },
		"select":     fSelect(true, false),
		"selectattr": fSelect(true, true),
		"sort":       fSort,
		"string":     fString,
		"sum":        fSum,
		"title":      strFilter(pyTitle),
		"tojson":     fToJSON,
		"trim":       fTrim,
		"unique":     fUnique,
		"upper":      strFilter(strings.ToUpper),
		"wordcount":  func(_ *ctx, x any, _ []any, _ *Dict) (any, error) { return int64(len(strings.Fields(str(x)))), nil },
	}
}

func applyFilter(c *ctx, name string, x any, args []any, kw *Dict) (any, error) {
	f, ok := filters[name]
	if !ok {
		return nil, fmt.Errorf("unknown filter %s", name)
	}
	v, err := f(c, x, args, kw)
	if err != nil {
		return nil, fmt.Errorf("filter %s: %v", name, err)
	}
	return v, nil
}

func strFilter(f func(string) string) filterFunc {
	return func(_ *ctx, x any, _ []any, _ *Dict) (any, error) {
		if _, u := x.(Undefined); u {
			return "", nil
		}
		return f(str(x)), nil
	}
}

func htmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&#34;", "'", "&#39;").Replace(s)
}

func fAbs(_ *ctx, x any, _ []any, _ *Dict) (any, error) {
	switch v := x.(type) {
	case float64:
		return math.Abs(v), nil
	case int64, bool:
		if isNeg, _ := compare(x, int64(0)); isNeg < 0 {
			return arith("-", int64(0), x)
		}
		return normInt(toBig(x)), nil
	}
	return nil, fmt.Errorf("bad operand type for abs(): %s", typeName(x))
}

// fString is Python's str(x) (@huggingface/jinja refuses a mapping).
func fString(_ *ctx, x any, _ []any, _ *Dict) (any, error) { return str(x), nil }

func fLength(_ *ctx, x any, _ []any, _ *Dict) (any, error) {
	n, err := length(x)
	return int64(n), err
}

func fDefault(_ *ctx, x any, args []any, kw *Dict) (any, error) {
	def := arg(args, kw, 0, "default_value", "")
	boolean := truthy(arg(args, kw, 1, "boolean", false))
	if _, u := x.(Undefined); u || boolean && !truthy(x) {
		return def, nil
	}
	return x, nil
}

func fFirst(_ *ctx, x any, _ []any, _ *Dict) (any, error) {
	items, err := iterate(x)
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return Undefined{"first of an empty sequence"}, nil
	}
	return items[0], nil
}

func fLast(_ *ctx, x any, _ []any, _ *Dict) (any, error) {
	items, err := iterate(x)
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return Undefined{"last of an empty sequence"}, nil
	}
	return items[len(items)-1], nil
}

func fList(_ *ctx, x any, _ []any, _ *Dict) (any, error) {
	items, err := iterate(x)
	return &List{items: append([]any{}, items...)}, err
}

func fItems(_ *ctx, x any, _ []any, _ *Dict) (any, error) {
	switch d := x.(type) {
	case *Dict:
		return dictItems(d), nil
	case Undefined:
		return &List{items: []any{}}, nil
	}
	return nil, fmt.Errorf("can only get item pairs from a mapping, not %s", typeName(x))
}

func fFromJSON(_ *ctx, x any, _ []any, _ *Dict) (any, error) {
	s, ok := x.(string)
	if !ok {
		return nil, fmt.Errorf("needs a string, not %s", typeName(x))
	}
	return ParseJSON([]byte(s))
}

func fInt(_ *ctx, x any, args []any, kw *Dict) (any, error) {
	def := arg(args, kw, 0, "default", int64(0))
	switch v := x.(type) {
	case int64, bool:
		return toBig(v).Int64(), nil
	case float64:
		if math.IsInf(v, 0) || math.IsNaN(v) {
			return def, nil
		}
		return int64(v), nil
	case string:
		s := strings.TrimSpace(v)
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return i, nil
		}
		if f, err := strconv.ParseFloat(s, 64); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
			return int64(f), nil
		}
		return def, nil
	}
	if isInt(x) {
		return x, nil
	}
	return def, nil
}

func fFloat(_ *ctx, x any, args []any, kw *Dict) (any, error) {
	def := arg(args, kw, 0, "default", 0.0)
	if isNum(x) {
		return toFloat(x), nil
	}
	if s, ok := x.(string); ok {
		if f, err := strconv.ParseFloat(strings.TrimSpace(s), 64); err == nil {
			return f, nil
		}
	}
	return def, nil
}

func fRound(_ *ctx, x any, args []any, kw *Dict) (any, error) {
	if !isNum(x) {
		return nil, fmt.Errorf("needs a number, not %s", typeName(x))
	}
	prec := toBig(arg(args, kw, 0, "precision", int64(0))).Int64()
	method := str(arg(args, kw, 1, "method", "common"))
	p := math.Pow(10, float64(prec))
	f := toFloat(x) * p
	switch method {
	case "common":
		f = math.Round(f)
	case "ceil":
		f = math.Ceil(f)
	case "floor":
		f = math.Floor(f)
	default:
		return nil, fmt.Errorf("method must be common, ceil or floor")
	}
	return f / p, nil
}

func fIndent(_ *ctx, x any, args []any, kw *Dict) (any, error) {
	s := str(x)
	ind := "    "
	switch w := arg(args, kw, 0, "width", int64(4)).(type) {
	case string:
		ind = w
	default:
		n := toBig(w).Int64()
		if n < 0 || n > 1024 {
			return nil, fmt.Errorf("width %d out of range", n)
		}
		ind = strings.Repeat(" ", int(n))
	}
	first := truthy(arg(args, kw, 1, "first", false))
	blank := truthy(arg(args, kw, 2, "blank", false))
	lines := strings.Split(s, "\n")
	if len(s)+len(lines)*len(ind) > maxOutput {
		return nil, errOutput
	}
	var sb strings.Builder
	for i, l := range lines {
		if i > 0 {
			sb.WriteByte('\n')
		}
		if (i > 0 || first) && (blank || strings.TrimSpace(l) != "") {
			sb.WriteString(ind)
		}
		sb.WriteString(l)
	}
	return sb.String(), nil
}

func fJoin(_ *ctx, x any, args []any, kw *Dict) (any, error) {
	items, err := iterate(x)
	if err != nil {
		return nil, err
	}
	sep := str(arg(args, kw, 0, "d", ""))
	attr, hasAttr := arg(args, kw, 1, "attribute", nil).(string)
	var sb strings.Builder
	for i, it := range items {
		if i > 0 {
			sb.WriteString(sep)
		}
		if hasAttr {
			it = attrPath(it, attr)
		}
		sb.WriteString(str(it))
		if sb.Len() > maxOutput {
			return nil, errOutput
		}
	}
	return sb.String(), nil
}

// attrPath follows a dotted attribute path ("function.name", "0").
func attrPath(x any, path string) any {
	for _, part := range strings.Split(path, ".") {
		if i, err := strconv.ParseInt(part, 10, 64); err == nil {
			if _, isList := x.(*List); isList {
				x = getItem(x, i)
				continue
			}
		}
		x = getItem(x, part)
	}
	return x
}

func fMap(c *ctx, x any, args []any, kw *Dict) (any, error) {
	items, err := iterate(x)
	if err != nil {
		return nil, err
	}
	out := make([]any, len(items))
	if a, ok := kw.Get("attribute"); ok {
		def, hasDef := kw.Get("default")
		for i, it := range items {
			v := attrPath(it, str(a))
			if _, u := v.(Undefined); u && hasDef {
				v = def
			}
			out[i] = v
		}
		return &List{items: out}, nil
	}
	if len(args) == 0 {
		return nil, fmt.Errorf("map needs a filter name or attribute=")
	}
	name, ok := args[0].(string)
	if !ok {
		return nil, fmt.Errorf("map: filter name must be a string")
	}
	for i, it := range items {
		if err := c.step(); err != nil {
			return nil, err
		}
		if out[i], err = applyFilter(c, name, it, args[1:], kw); err != nil {
			return nil, err
		}
	}
	return &List{items: out}, nil
}

// fSelect is select/reject (a test on each item) and selectattr/rejectattr
// (a test on an attribute of each item); no test is truthiness.
func fSelect(keep, byAttr bool) filterFunc {
	return func(c *ctx, x any, args []any, kw *Dict) (any, error) {
		if x == nil { // Jinja2 selects from a false sequence nothing
			return &List{items: []any{}}, nil
		}
		items, err := iterate(x)
		if err != nil {
			return nil, err
		}
		attr := ""
		if byAttr {
			if len(args) == 0 {
				return nil, fmt.Errorf("needs an attribute name")
			}
			attr = str(args[0])
			args = args[1:]
		}
		out := []any{}
		for _, it := range items {
			if err := c.step(); err != nil {
				return nil, err
			}
			v := it
			if byAttr {
				v = attrPath(it, attr)
			}
			ok := truthy(v)
			if len(args) > 0 {
				name, isStr := args[0].(string)
				if !isStr {
					return nil, fmt.Errorf("test name must be a string")
				}
				if ok, err = applyTest(c, name, v, args[1:]); err != nil {
					return nil, err
				}
			}
			if ok == keep {
				out = append(out, it)
			}
		}
		return &List{items: out}, nil
	}
}

func fReplace(_ *ctx, x any, args []any, kw *Dict) (any, error) {
	f := strMethod(str(x), "replace")
	return f(args, kw)
}

func fReverse(_ *ctx, x any, _ []any, _ *Dict) (any, error) {
	if s, ok := x.(string); ok {
		r := []rune(s)
		for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
			r[i], r[j] = r[j], r[i]
		}
		return string(r), nil
	}
	items, err := iterate(x)
	if err != nil {
		return nil, err
	}
	out := make([]any, len(items))
	for i, v := range items {
		out[len(items)-1-i] = v
	}
	return &List{items: out}, nil
}

func fTrim(_ *ctx, x any, args []any, kw *Dict) (any, error) {
	cut := pySpace
	if v := arg(args, kw, 0, "chars", nil); v != nil {
		cut = str(v)
	}
	return strings.Trim(str(x), cut), nil
}

// sortKey prepares a value for a case-insensitive comparison.
func sortKey(v any, caseSensitive bool) any {
	if s, ok := v.(string); ok && !caseSensitive {
		return strings.ToLower(s)
	}
	return v
}

// sortItems sorts stably by key, reporting the first comparison error.
func sortItems(items []any, key func(any) any, reverse bool) ([]any, error) {
	out := append([]any{}, items...)
	var err error
	sort.SliceStable(out, func(i, j int) bool {
		r, e := compare(key(out[i]), key(out[j]))
		if e != nil && err == nil {
			err = e
		}
		if reverse {
			return r > 0
		}
		return r < 0
	})
	return out, err
}

func fSort(_ *ctx, x any, args []any, kw *Dict) (any, error) {
	items, err := iterate(x)
	if err != nil {
		return nil, err
	}
	reverse := truthy(arg(args, kw, 0, "reverse", false))
	cs := truthy(arg(args, kw, 1, "case_sensitive", false))
	attr := arg(args, kw, 2, "attribute", nil)
	return wrapList(sortItems(items, func(v any) any {
		if attr != nil {
			v = attrPath(v, str(attr))
		}
		return sortKey(v, cs)
	}, reverse))
}

func wrapList(items []any, err error) (any, error) {
	if err != nil {
		return nil, err
	}
	return &List{items: items}, nil
}

func fDictsort(_ *ctx, x any, args []any, kw *Dict) (any, error) {
	d, ok := x.(*Dict)
	if !ok {
		return nil, fmt.Errorf("needs a mapping, not %s", typeName(x))
	}
	cs := truthy(arg(args, kw, 0, "case_sensitive", false))
	by := str(arg(args, kw, 1, "by", "key"))
	reverse := truthy(arg(args, kw, 2, "reverse", false))
	pos := 0
	switch by {
	case "key":
	case "value":
		pos = 1
	default:
		return nil, fmt.Errorf("by must be 'key' or 'value'")
	}
	return wrapList(sortItems(dictItems(d).items, func(v any) any {
		return sortKey(v.(*List).items[pos], cs)
	}, reverse))
}

func fUnique(_ *ctx, x any, args []any, kw *Dict) (any, error) {
	items, err := iterate(x)
	if err != nil {
		return nil, err
	}
	cs := truthy(arg(args, kw, 0, "case_sensitive", false))
	attr := arg(args, kw, 1, "attribute", nil)
	var seen []any
	out := []any{}
	for _, it := range items {
		k := it
		if attr != nil {
			k = attrPath(it, str(attr))
		}
		k = sortKey(k, cs)
		dup := false
		for _, s := range seen {
			if equal(s, k) {
				dup = true
				break
			}
		}
		if !dup {
			seen = append(seen, k)
			out = append(out, it)
		}
	}
	return &List{items: out}, nil
}

func fMinMax(sign int) filterFunc {
	return func(_ *ctx, x any, args []any, kw *Dict) (any, error) {
		items, err := iterate(x)
		if err != nil {
			return nil, err
		}
		if len(items) == 0 {
			return Undefined{"min or max of an empty sequence"}, nil
		}
		cs := truthy(arg(args, kw, 0, "case_sensitive", false))
		attr := arg(args, kw, 1, "attribute", nil)
		key := func(v any) any {
			if attr != nil {
				v = attrPath(v, str(attr))
			}
			return sortKey(v, cs)
		}
		best := items[0]
		for _, it := range items[1:] {
			r, err := compare(key(it), key(best))
			if err != nil {
				return nil, err
			}
			if r*sign > 0 {
				best = it
			}
		}
		return best, nil
	}
}

func fSum(_ *ctx, x any, args []any, kw *Dict) (any, error) {
	items, err := iterate(x)
	if err != nil {
		return nil, err
	}
	attr := arg(args, kw, 0, "attribute", nil)
	total := arg(args, kw, 1, "start", int64(0))
	for _, it := range items {
		if attr != nil {
			it = attrPath(it, str(attr))
		}
		if total, err = arith("+", total, it); err != nil {
			return nil, err
		}
	}
	return total, nil
}

// fToJSON is transformers' tojson: json.dumps with ensure_ascii=False,
// the given indent, separators and sort_keys; keys in insertion order.
func fToJSON(_ *ctx, x any, args []any, kw *Dict) (any, error) {
	pretty, indent := false, ""
	switch v := arg(args, kw, 0, "indent", nil).(type) {
	case nil, Undefined:
	case string:
		pretty, indent = true, v
	default:
		if !isInt(v) {
			return nil, fmt.Errorf("indent must be an integer or a string, not %s", typeName(v))
		}
		n := toBig(v).Int64()
		if n > 1024 {
			return nil, fmt.Errorf("indent %d out of range", n)
		}
		pretty, indent = true, strings.Repeat(" ", int(max(n, 0)))
	}
	o := defaultJSONOpts(pretty, indent)
	o.ensureASCII = truthy(arg(args, kw, -1, "ensure_ascii", false))
	o.sortKeys = truthy(arg(args, kw, -1, "sort_keys", false))
	if sep, ok := arg(args, kw, -1, "separators", nil).(*List); ok {
		if len(sep.items) != 2 {
			return nil, fmt.Errorf("separators must be a pair of strings")
		}
		o.item, o.key = str(sep.items[0]), str(sep.items[1])
	}
	var sb strings.Builder
	if err := writeJSON(&sb, x, o, 0); err != nil {
		return nil, err
	}
	return sb.String(), nil
}
