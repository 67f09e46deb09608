package constraint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
)

// object is a JSON object that keeps its keys' order (a schema's
// properties are written in the order they are declared).
type object struct {
	keys []string
	vals map[string]any
}

func (o *object) get(k string) (any, bool) {
	v, ok := o.vals[k]
	return v, ok
}

// maxValueDepth bounds the nesting of a decoded JSON value.
const maxValueDepth = 512

// decodeJSON reads one JSON value: objects as *object, arrays as []any,
// numbers as json.Number. Duplicate keys are an error.
func decodeJSON(data []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	v, err := decodeValue(d, 0)
	if err != nil {
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, errors.New("trailing data after the JSON value")
	}
	return v, nil
}

func decodeValue(d *json.Decoder, depth int) (any, error) {
	if depth > maxValueDepth {
		return nil, fmt.Errorf("nested deeper than %d", maxValueDepth)
	}
	t, err := d.Token()
	if err != nil {
		return nil, err
	}
	switch t := t.(type) {
	case json.Delim:
		switch t {
		case '{':
			o := &object{vals: map[string]any{}}
			for d.More() {
				kt, err := d.Token()
				if err != nil {
					return nil, err
				}
				k, _ := kt.(string)
				if _, dup := o.vals[k]; dup {
					return nil, fmt.Errorf("duplicate key %q", k)
				}
				v, err := decodeValue(d, depth+1)
				if err != nil {
					return nil, err
				}
				o.keys = append(o.keys, k)
				o.vals[k] = v
			}
			if _, err := d.Token(); err != nil {
				return nil, err
			}
			return o, nil
		case '[':
			a := []any{}
			for d.More() {
				v, err := decodeValue(d, depth+1)
				if err != nil {
					return nil, err
				}
				a = append(a, v)
			}
			if _, err := d.Token(); err != nil {
				return nil, err
			}
			return a, nil
		}
		return nil, fmt.Errorf("unexpected %v", t)
	}
	return t, nil
}

// compact writes v as compact JSON (an object's keys in their order).
func compact(v any) string {
	var sb strings.Builder
	writeCompact(&sb, v)
	return sb.String()
}

func writeCompact(sb *strings.Builder, v any) {
	switch v := v.(type) {
	case *object:
		sb.WriteByte('{')
		for i, k := range v.keys {
			if i > 0 {
				sb.WriteByte(',')
			}
			writeCompact(sb, k)
			sb.WriteByte(':')
			writeCompact(sb, v.vals[k])
		}
		sb.WriteByte('}')
	case []any:
		sb.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				sb.WriteByte(',')
			}
			writeCompact(sb, e)
		}
		sb.WriteByte(']')
	case json.Number:
		sb.WriteString(string(v))
	case nil:
		sb.WriteString("null")
	case string:
		sb.WriteString(quoteJSON(v))
	case bool:
		if v {
			sb.WriteString("true")
		} else {
			sb.WriteString("false")
		}
	}
}

// quoteJSON writes s as a JSON string, escaping only what JSON requires.
func quoteJSON(s string) string {
	var buf bytes.Buffer
	e := json.NewEncoder(&buf)
	e.SetEscapeHTML(false)
	_ = e.Encode(s) // a string cannot fail
	return strings.TrimSuffix(buf.String(), "\n")
}

// sortedKeys lists an object's keys in order, for messages.
func sortedKeys(o *object) []string {
	k := append([]string(nil), o.keys...)
	sort.Strings(k)
	return k
}
