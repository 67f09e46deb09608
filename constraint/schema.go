package constraint

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// annotations constrain nothing; they are accepted anywhere.
var annotations = map[string]bool{
	"title": true, "description": true, "$schema": true, "$id": true, "$comment": true,
	"default": true, "examples": true, "deprecated": true, "readOnly": true, "writeOnly": true,
	"$defs": true, "definitions": true, // read through $ref
}

// supported are the keywords the translator enforces.
var supported = map[string]bool{
	"type": true, "enum": true, "const": true, "anyOf": true, "allOf": true, "$ref": true,
	"properties": true, "required": true, "additionalProperties": true,
	"items": true, "minItems": true, "maxItems": true,
	"minLength": true, "maxLength": true, "pattern": true, "format": true,
	"minimum": true, "maximum": true, "exclusiveMinimum": true, "exclusiveMaximum": true,
}

// formats are the string formats the translator enforces, as GBNF.
var formats = map[string]string{
	"date":      `[0-9]{4} "-" ("0" [1-9] | "1" [0-2]) "-" ("0" [1-9] | [12] [0-9] | "3" [01])`,
	"time":      `([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ("." [0-9]{1,6})? ("Z" | [+-] ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9])`,
	"date-time": `fmt-date "T" fmt-time`,
	"uuid":      `[0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12}`,
}

// FromJSONSchema translates a JSON schema into a GBNF grammar whose root
// accepts exactly the JSON texts the package doc lists for it. Errors
// are *Error, naming the keyword at fault.
func FromJSONSchema(schema []byte, lim Limits) (string, error) {
	v, err := decodeJSON(schema)
	if err != nil {
		return "", &Error{Msg: "the schema is not valid JSON: " + err.Error()}
	}
	return fromSchemaValue(v, lim)
}

func fromSchemaValue(v any, lim Limits) (string, error) {
	b := newBuilder(lim)
	root := b.fresh("root")
	b.useJSON("")
	c := &schemaCompiler{b: b, root: v, refs: map[string]string{"#": root}}
	body := c.compile(v, "", 0)
	if b.err != nil {
		return "", b.err
	}
	b.set(root, body)
	if b.err != nil {
		return "", b.err
	}
	return b.text(), nil
}

type schemaCompiler struct {
	b    *builder
	root any
	refs map[string]string // $ref → its rule
}

// compile returns a GBNF expression for schema s at path (a JSON pointer).
func (c *schemaCompiler) compile(s any, path string, depth int) string {
	b := c.b
	if b.err != nil {
		return "json-null"
	}
	if depth > b.lim.MaxDepth {
		b.fail("", path, "the schema nests deeper than %d", b.lim.MaxDepth)
		return "json-null"
	}
	switch s := s.(type) {
	case bool:
		if !s {
			b.fail("", path, "the schema false accepts nothing")
		}
		return "json-value"
	case *object:
		return c.compileObject(s, path, depth)
	}
	b.fail("", path, "a schema must be an object or a boolean, not %s", compact(s))
	return "json-null"
}

// rule names an expression (a rule of its own, named after the path).
func (c *schemaCompiler) rule(path, expr string) string {
	if isName(expr) {
		return expr
	}
	name := c.b.fresh(ruleName("s" + strings.ReplaceAll(path, "/properties/", "-")))
	c.b.set(name, expr)
	return name
}

func isName(s string) bool {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
			return false
		}
	}
	return s != ""
}

func (c *schemaCompiler) compileObject(s *object, path string, depth int) string {
	b := c.b
	for _, k := range s.keys {
		if !annotations[k] && !supported[k] {
			b.fail(k, path, "the keyword is not supported, so it cannot be enforced")
			return "json-null"
		}
	}
	// combinators stand alone
	for _, k := range []string{"$ref", "anyOf", "allOf"} {
		if v, ok := s.get(k); ok {
			for _, o := range s.keys {
				if o != k && !annotations[o] {
					b.fail(o, path, "'%s' beside '%s' is not supported", o, k)
					return "json-null"
				}
			}
			switch k {
			case "$ref":
				return c.ref(v, path)
			case "anyOf":
				return c.anyOf(v, path, depth)
			default:
				a, ok := v.([]any)
				if !ok || len(a) != 1 {
					b.fail("allOf", path, "only an allOf of exactly one schema is supported")
					return "json-null"
				}
				return c.compile(a[0], path+"/allOf/0", depth+1)
			}
		}
	}
	if v, ok := s.get("const"); ok {
		return lit(compact(v))
	}
	if v, ok := s.get("enum"); ok {
		a, ok := v.([]any)
		if !ok || len(a) == 0 {
			b.fail("enum", path, "expected a non-empty array")
			return "json-null"
		}
		alts := make([]string, len(a))
		for i, e := range a {
			alts[i] = lit(compact(e))
		}
		return c.rule(path, strings.Join(alts, " | "))
	}
	types, ok := c.types(s, path)
	if !ok {
		return "json-null"
	}
	if types == nil {
		return "json-value"
	}
	alts := make([]string, 0, len(types))
	for _, t := range types {
		var e string
		switch t {
		case "object":
			e = c.object(s, path, depth)
		case "array":
			e = c.array(s, path, depth)
		case "string":
			e = c.str(s, path)
		case "integer", "number":
			e = c.number(s, path, t == "integer")
		case "boolean":
			e = "json-bool"
		case "null":
			e = "json-null"
		default:
			b.fail("type", path, "unknown type %q", t)
			return "json-null"
		}
		alts = append(alts, e)
	}
	if len(alts) == 1 {
		return alts[0]
	}
	return c.rule(path, strings.Join(alts, " | "))
}

// types lists the instance types a schema admits: its "type", or, when
// absent, the types its keywords describe (nil: any value).
func (c *schemaCompiler) types(s *object, path string) ([]string, bool) {
	v, ok := s.get("type")
	if !ok {
		var t []string
		has := func(ks ...string) bool {
			for _, k := range ks {
				if _, ok := s.get(k); ok {
					return true
				}
			}
			return false
		}
		if has("properties", "required", "additionalProperties") {
			t = append(t, "object")
		}
		if has("items", "minItems", "maxItems") {
			t = append(t, "array")
		}
		if has("minLength", "maxLength", "pattern", "format") {
			t = append(t, "string")
		}
		if has("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum") {
			t = append(t, "number")
		}
		return t, true
	}
	switch v := v.(type) {
	case string:
		return []string{v}, true
	case []any:
		var t []string
		for _, e := range v {
			s, ok := e.(string)
			if !ok {
				c.b.fail("type", path, "expected a string or an array of strings")
				return nil, false
			}
			t = append(t, s)
		}
		if len(t) == 0 {
			c.b.fail("type", path, "an empty list of types accepts nothing")
			return nil, false
		}
		return t, true
	}
	c.b.fail("type", path, "expected a string or an array of strings")
	return nil, false
}

func (c *schemaCompiler) ref(v any, path string) string {
	ref, ok := v.(string)
	if !ok {
		c.b.fail("$ref", path, "expected a string")
		return "json-null"
	}
	if name, ok := c.refs[ref]; ok {
		return name
	}
	var target any
	var key string
	for _, pre := range []string{"#/$defs/", "#/definitions/"} {
		if rest, ok := strings.CutPrefix(ref, pre); ok {
			if ro, ok := c.root.(*object); ok {
				if defs, ok := ro.get(pre[2 : len(pre)-1]); ok {
					if d, ok := defs.(*object); ok {
						key = strings.NewReplacer("~1", "/", "~0", "~").Replace(rest)
						target, ok = d.get(key)
						_ = ok
					}
				}
			}
		}
	}
	if target == nil {
		c.b.fail("$ref", path, "%q does not resolve (only \"#\", \"#/$defs/…\" and \"#/definitions/…\" are supported)", ref)
		return "json-null"
	}
	name := c.b.fresh(ruleName("def-" + key))
	c.refs[ref] = name
	body := c.compile(target, ref[1:], 0)
	c.b.set(name, body)
	return name
}

func (c *schemaCompiler) anyOf(v any, path string, depth int) string {
	a, ok := v.([]any)
	if !ok || len(a) == 0 {
		c.b.fail("anyOf", path, "expected a non-empty array of schemas")
		return "json-null"
	}
	alts := make([]string, len(a))
	for i, e := range a {
		alts[i] = c.compile(e, fmt.Sprintf("%s/anyOf/%d", path, i), depth+1)
	}
	return c.rule(path, strings.Join(alts, " | "))
}

// count reads a non-negative integer keyword no larger than MaxRepeat
// (-1 when absent).
func (c *schemaCompiler) count(s *object, kw, path string) int {
	v, ok := s.get(kw)
	if !ok {
		return -1
	}
	n, ok := v.(json.Number)
	i, err := strconv.ParseInt(string(n), 10, 64)
	if !ok || err != nil || i < 0 {
		c.b.fail(kw, path, "expected a non-negative integer")
		return -1
	}
	if i > int64(c.b.lim.MaxRepeat) {
		c.b.fail(kw, path, "%d is over the limit of %d", i, c.b.lim.MaxRepeat)
		return -1
	}
	return int(i)
}

func (c *schemaCompiler) object(s *object, path string, depth int) string {
	b := c.b
	var props *object
	if v, ok := s.get("properties"); ok {
		if props, ok = v.(*object); !ok {
			b.fail("properties", path, "expected an object")
			return "json-null"
		}
	} else {
		props = &object{vals: map[string]any{}}
	}
	extra := "" // the value rule of additional properties, "" for none
	if v, ok := s.get("additionalProperties"); !ok || v == true {
		extra = "json-value"
	} else if v != false {
		extra = c.compile(v, path+"/additionalProperties", depth+1)
	}
	required := map[string]bool{}
	if v, ok := s.get("required"); ok {
		a, ok := v.([]any)
		if !ok {
			b.fail("required", path, "expected an array of strings")
			return "json-null"
		}
		for _, e := range a {
			k, ok := e.(string)
			if !ok {
				b.fail("required", path, "expected an array of strings")
				return "json-null"
			}
			required[k] = true
			if _, ok := props.get(k); !ok && extra == "" {
				b.fail("required", path, "%q is required but additionalProperties is false and it is not a property", k)
				return "json-null"
			} else if !ok {
				// a required key without a schema: any value
				props = &object{keys: append(append([]string(nil), props.keys...), k), vals: props.vals}
				props.vals[k] = true
			}
		}
	}
	n := len(props.keys)
	if n > b.lim.MaxRules/2 {
		b.fail("properties", path, "%d properties are over the limit of %d", n, b.lim.MaxRules/2)
		return "json-null"
	}
	kv := make([]string, n)
	for i, k := range props.keys {
		val := c.compile(props.vals[k], path+"/properties/"+strings.NewReplacer("~", "~0", "/", "~1").Replace(k), depth+1)
		kv[i] = lit(quoteJSON(k)) + ` ws ":" ws ` + val + " ws"
		if b.err != nil {
			return "json-null"
		}
	}
	base := c.b.fresh(ruleName("o" + strings.ReplaceAll(path, "/properties/", "-")))
	// tail rule i: the properties from i on, after at least one was written
	tail := make([]string, n+1) // "" past the end
	for i := n - 1; i >= 1; i-- {
		item := `"," ws ` + kv[i]
		if !required[props.keys[i]] {
			item = "(" + item + ")?"
		}
		if tail[i+1] != "" {
			item += " " + tail[i+1]
		}
		tail[i] = b.fresh(fmt.Sprintf("%s-t%d", base, i))
		b.set(tail[i], item)
		if b.err != nil {
			return "json-null"
		}
	}
	// the first property written: any up to the first required one
	var firsts []string
	for i := 0; i < n; i++ {
		f := kv[i]
		if tail[i+1] != "" {
			f += " " + tail[i+1]
		}
		firsts = append(firsts, f)
		if required[props.keys[i]] {
			break
		}
	}
	anyRequired := false
	for _, k := range props.keys {
		anyRequired = anyRequired || required[k]
	}
	var body string
	if n > 0 {
		body = "(" + strings.Join(firsts, " | ") + ")"
	}
	if extra != "" {
		x := `json-string ws ":" ws ` + extra + " ws"
		more := `("," ws ` + x + ")*"
		switch {
		case n == 0:
			body = "(" + x + " " + more + ")?"
		case anyRequired:
			body += " " + more
		default:
			body = "(" + body + " " + more + " | " + x + " " + more + ")?"
		}
	} else if n > 0 && !anyRequired {
		body += "?"
	}
	b.set(base, `"{" ws `+body+` "}"`)
	return base
}

func (c *schemaCompiler) array(s *object, path string, depth int) string {
	item := "json-value"
	if v, ok := s.get("items"); ok {
		if v == false {
			item = ""
		} else {
			item = c.compile(v, path+"/items", depth+1)
		}
	}
	lo, hi := c.count(s, "minItems", path), c.count(s, "maxItems", path)
	if lo < 0 {
		lo = 0
	}
	if hi >= 0 && hi < lo {
		c.b.fail("maxItems", path, "maxItems %d is below minItems %d", hi, lo)
		return "json-null"
	}
	if item == "" || hi == 0 {
		if lo > 0 {
			c.b.fail("minItems", path, "no item can be written")
		}
		return `"[" ws "]"`
	}
	more := `("," ws ` + item + " ws)"
	h := -1
	if hi > 0 {
		h = hi - 1
	}
	body := item + " ws " + repeat(more, max(lo-1, 0), h)
	if lo == 0 {
		body = "(" + body + ")?"
	}
	return c.rule(path, `"[" ws `+body+` "]"`)
}

func (c *schemaCompiler) str(s *object, path string) string {
	lo, hi := c.count(s, "minLength", path), c.count(s, "maxLength", path)
	pat, hasPat := s.get("pattern")
	fm, hasFmt := s.get("format")
	if hasPat || hasFmt {
		if lo >= 0 || hi >= 0 {
			kw := "minLength"
			if lo < 0 {
				kw = "maxLength"
			}
			c.b.fail(kw, path, "a length beside a pattern or format is not supported")
			return "json-null"
		}
		if hasPat && hasFmt {
			c.b.fail("format", path, "a format beside a pattern is not supported")
			return "json-null"
		}
	}
	if hasFmt {
		f, _ := fm.(string)
		g, ok := formats[f]
		if !ok {
			c.b.fail("format", path, "format %q is not supported (supported: date, time, date-time, uuid)", f)
			return "json-null"
		}
		if f == "date-time" {
			c.b.define("fmt-date", formats["date"])
			c.b.define("fmt-time", formats["time"])
		}
		return c.rule(path, `"\"" (`+g+`) "\""`)
	}
	if hasPat {
		p, ok := pat.(string)
		if !ok {
			c.b.fail("pattern", path, "expected a string")
			return "json-null"
		}
		g, err := regexExpr(p, c.b, true)
		if err != nil {
			c.b.fail("pattern", path, "%s", err.Msg)
			return "json-null"
		}
		return c.rule(path, `"\"" (`+g+`) "\""`)
	}
	if lo < 0 && hi < 0 {
		return "json-string"
	}
	if hi >= 0 && hi < lo {
		c.b.fail("maxLength", path, "maxLength %d is below minLength %d", hi, lo)
		return "json-null"
	}
	return c.rule(path, `"\"" `+repeat("json-char-bmp", max(lo, 0), hi)+` "\""`)
}

// maxBound is the largest magnitude a numeric bound may have.
const maxBound = 1e15

// bound reads a numeric keyword (ok false when absent).
func (c *schemaCompiler) bound(s *object, kw, path string, integer bool) (v float64, ok bool) {
	x, ok := s.get(kw)
	if !ok {
		return 0, false
	}
	n, isNum := x.(json.Number)
	f, err := strconv.ParseFloat(string(n), 64)
	if !isNum || err != nil || math.Abs(f) > maxBound {
		c.b.fail(kw, path, "expected a number of magnitude at most %g", maxBound)
		return 0, false
	}
	if !integer && f != math.Trunc(f) {
		c.b.fail(kw, path, "a non-integer bound on a number is not supported")
		return 0, false
	}
	return f, true
}

func (c *schemaCompiler) number(s *object, path string, integer bool) string {
	r := numRange{}
	if v, ok := c.bound(s, "minimum", path, integer); ok {
		r.lo, r.hasLo = v, true
	}
	if v, ok := c.bound(s, "exclusiveMinimum", path, integer); ok && (!r.hasLo || v >= r.lo) {
		r.lo, r.hasLo, r.loOpen = v, true, true
	}
	if v, ok := c.bound(s, "maximum", path, integer); ok {
		r.hi, r.hasHi = v, true
	}
	if v, ok := c.bound(s, "exclusiveMaximum", path, integer); ok && (!r.hasHi || v <= r.hi) {
		r.hi, r.hasHi, r.hiOpen = v, true, true
	}
	if c.b.err != nil {
		return "json-null"
	}
	if !r.hasLo && !r.hasHi {
		if integer {
			return "json-int"
		}
		return "json-number"
	}
	var e string
	if integer {
		e = r.integers()
	} else {
		e = r.numbers()
	}
	if e == "" {
		c.b.fail("minimum", path, "the bounds admit no value")
		return "json-null"
	}
	return c.rule(path, e)
}
