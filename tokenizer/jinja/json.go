package jinja

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"sort"
	"strconv"
	"strings"
)

// jsonOpts are the arguments of tojson, which transformers defines as
// json.dumps(x, ensure_ascii=False, indent=indent, separators=separators,
// sort_keys=sort_keys): key order kept, nothing HTML-escaped.
type jsonOpts struct {
	pretty      bool   // json.dumps with an indent: a line per item
	indent      string // what each level indents by
	item, key   string // separators
	ensureASCII bool
	sortKeys    bool
}

func defaultJSONOpts(pretty bool, indent string) jsonOpts {
	if pretty {
		return jsonOpts{pretty: true, indent: indent, item: ",", key: ": "}
	}
	return jsonOpts{item: ", ", key: ": "}
}

const maxJSONDepth = 512

func writeJSON(sb *strings.Builder, v any, o jsonOpts, depth int) error {
	if depth > maxJSONDepth {
		return fmt.Errorf("tojson: nesting over %d levels", maxJSONDepth)
	}
	if sb.Len() > maxOutput {
		return errOutput
	}
	nl := func(d int) {
		if o.pretty {
			sb.WriteByte('\n')
			for i := 0; i < d; i++ {
				sb.WriteString(o.indent)
			}
		}
	}
	switch c := v.(type) {
	case nil:
		sb.WriteString("null")
	case Undefined:
		sb.WriteString("null")
	case bool:
		if c {
			sb.WriteString("true")
		} else {
			sb.WriteString("false")
		}
	case int64:
		sb.WriteString(strconv.FormatInt(c, 10))
	case *big.Int:
		sb.WriteString(c.String())
	case float64:
		switch s := formatFloat(c); s {
		case "inf":
			sb.WriteString("Infinity")
		case "-inf":
			sb.WriteString("-Infinity")
		case "nan":
			sb.WriteString("NaN")
		default:
			sb.WriteString(s)
		}
	case string:
		writeJSONString(sb, c, o.ensureASCII)
	case *List:
		if len(c.items) == 0 {
			sb.WriteString("[]")
			return nil
		}
		sb.WriteByte('[')
		for i, x := range c.items {
			if i > 0 {
				sb.WriteString(o.item)
			}
			nl(depth + 1)
			if err := writeJSON(sb, x, o, depth+1); err != nil {
				return err
			}
		}
		nl(depth)
		sb.WriteByte(']')
	case *Namespace:
		return writeJSON(sb, c.d, o, depth)
	case *Dict:
		if c.Len() == 0 {
			sb.WriteString("{}")
			return nil
		}
		keys := make([]string, len(c.keys))
		vals := make([]any, len(c.keys))
		for i, k := range c.keys {
			keys[i], vals[i] = jsonKey(k), c.m[k]
		}
		if o.sortKeys {
			idx := make([]int, len(keys))
			for i := range idx {
				idx[i] = i
			}
			sort.SliceStable(idx, func(a, b int) bool { return keys[idx[a]] < keys[idx[b]] })
			k2, v2 := make([]string, len(keys)), make([]any, len(keys))
			for i, j := range idx {
				k2[i], v2[i] = keys[j], vals[j]
			}
			keys, vals = k2, v2
		}
		sb.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				sb.WriteString(o.item)
			}
			nl(depth + 1)
			writeJSONString(sb, k, o.ensureASCII)
			sb.WriteString(o.key)
			if err := writeJSON(sb, vals[i], o, depth+1); err != nil {
				return err
			}
		}
		nl(depth)
		sb.WriteByte('}')
	default:
		return fmt.Errorf("tojson: object of type %s is not JSON serializable", typeName(v))
	}
	return nil
}

// jsonKey is a mapping key as json.dumps writes it.
func jsonKey(k any) string {
	switch c := k.(type) {
	case string:
		return c
	case nil:
		return "null"
	}
	return str(k)
}

// writeJSONString quotes s as Python's json.dumps does.
func writeJSONString(sb *strings.Builder, s string, ascii bool) {
	const hex = "0123456789abcdef"
	sb.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			sb.WriteString(`\"`)
		case r == '\\':
			sb.WriteString(`\\`)
		case r == '\n':
			sb.WriteString(`\n`)
		case r == '\r':
			sb.WriteString(`\r`)
		case r == '\t':
			sb.WriteString(`\t`)
		case r == '\b':
			sb.WriteString(`\b`)
		case r == '\f':
			sb.WriteString(`\f`)
		case r < 0x20 || ascii && r > 0x7e:
			u := func(r rune) {
				sb.WriteString(`\u`)
				sb.WriteByte(hex[r>>12&15])
				sb.WriteByte(hex[r>>8&15])
				sb.WriteByte(hex[r>>4&15])
				sb.WriteByte(hex[r&15])
			}
			if r > 0xffff {
				r -= 0x10000
				u(0xd800 + r>>10)
				u(0xdc00 + r&0x3ff)
			} else {
				u(r)
			}
		default:
			sb.WriteRune(r)
		}
	}
	sb.WriteByte('"')
}

// ParseJSON decodes JSON into template values, keeping the key order of
// objects (so tojson writes them back as they came) and integers exact.
func ParseJSON(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	v, err := decodeJSON(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("json: data after the value")
	}
	return v, nil
}

func decodeJSON(dec *json.Decoder, depth int) (any, error) {
	if depth > maxJSONDepth {
		return nil, fmt.Errorf("json: nesting over %d levels", maxJSONDepth)
	}
	t, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch c := t.(type) {
	case json.Delim:
		switch c {
		case '[':
			l := &List{items: []any{}}
			for dec.More() {
				v, err := decodeJSON(dec, depth+1)
				if err != nil {
					return nil, err
				}
				l.items = append(l.items, v)
			}
			_, err := dec.Token()
			return l, err
		case '{':
			d := NewDict()
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return nil, err
				}
				v, err := decodeJSON(dec, depth+1)
				if err != nil {
					return nil, err
				}
				d.Set(k.(string), v)
			}
			_, err := dec.Token()
			return d, err
		}
		return nil, fmt.Errorf("json: unexpected %v", c)
	case json.Number:
		if i, err := c.Int64(); err == nil {
			return i, nil
		}
		if b, ok := new(big.Int).SetString(string(c), 10); ok {
			return b, nil
		}
		return c.Float64()
	case string, bool, nil:
		return c, nil
	}
	return nil, fmt.Errorf("json: unexpected %v", t)
}
