package constraint

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestJSONSchema(t *testing.T) {
	f := func(schema string, accept, reject []string) {
		t.Helper()
		text, err := FromJSONSchema([]byte(schema), DefaultLimits)
		if err != nil {
			t.Fatalf("%s: %v", schema, err)
		}
		g := mustGram(t, text)
		for _, a := range accept {
			if !g.accepts(a) {
				t.Errorf("%s: %q rejected\n%s", schema, a, text)
			}
		}
		for _, r := range reject {
			if g.accepts(r) {
				t.Errorf("%s: %q accepted\n%s", schema, r, text)
			}
		}
	}
	f(`{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}},"required":["name","age"],"additionalProperties":false}`,
		[]string{`{"name":"Al","age":3}`, `{ "name" : "A\"l\u00e9" , "age" : -12 }`, "{\n  \"name\": \"\",\n  \"age\": 0\n}"},
		[]string{`{"age":3,"name":"Al"}`, `{"name":"Al"}`, `{"name":"Al","age":3,"x":1}`, `{"name":"Al","age":3.5}`, `{"name":"Al","age":01}`, `{"name":"Al","age":3}x`, "{          \"name\":\"\",\"age\":0}"})
	f(`{"type":"object","properties":{"a":{"type":"boolean"},"b":{"type":"null"},"c":{"type":"number"}},"required":["b"],"additionalProperties":false}`,
		[]string{`{"b":null}`, `{"a":true,"b":null}`, `{"b":null,"c":1.5e3}`, `{"a":false,"b":null,"c":-0.25}`},
		[]string{`{}`, `{"a":true}`, `{"c":1,"b":null}`, `{"b":null,}`, `{,"b":null}`})
	f(`{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"additionalProperties":false}`,
		[]string{`{}`, `{"a":1}`, `{"b":2}`, `{"a":1,"b":2}`},
		[]string{`{"b":2,"a":1}`, `{,}`, `{"a":1,}`})
	f(`{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}`,
		[]string{`{"a":1}`, `{"a":1,"zz":[1,{"q":null}]}`},
		[]string{`{"zz":1}`})
	f(`{"type":"object"}`, []string{`{}`, `{"x":{"y":[]}}`}, []string{`[]`, `1`})
	f(`{"type":"array","items":{"type":"string","maxLength":2},"minItems":1,"maxItems":3}`,
		[]string{`["a"]`, `["ab","",  "c"]`},
		[]string{`[]`, `["abc"]`, `["a","b","c","d"]`, `[1]`})
	f(`{"type":"array","items":{"enum":["x",1,null,{"k":[true]}]}}`,
		[]string{`[]`, `["x",1,null,{"k":[true]}]`},
		[]string{`["y"]`, `[{"k":[false]}]`})
	f(`{"const":"a\"b"}`, []string{`"a\"b"`}, []string{`"ab"`})
	f(`{"type":"string","minLength":2,"maxLength":3}`, []string{`"ab"`, `"héé"`, `"\n\t"`}, []string{`"a"`, `"abcd"`, "\"a\nb\"", `"a😀"`}) // 😀: 1 code point, 2 UTF-16 units (json-char-bmp)
	f(`{"type":"string","pattern":"^[a-c]+-\\d{2}$"}`, []string{`"ab-12"`}, []string{`"ab-1"`, `"ad-12"`})
	f(`{"type":"string","pattern":"a\"b\\\\c"}`, []string{`"a\"b\\c"`}, []string{`"a"b\c"`})
	f(`{"type":"string","format":"date-time"}`, []string{`"2024-02-29T12:30:00Z"`, `"1999-12-31T23:59:59.5+01:00"`}, []string{`"2024-13-01T00:00:00Z"`, `"2024-01-01"`})
	f(`{"type":"string","format":"uuid"}`, []string{`"123e4567-e89b-12d3-a456-426614174000"`}, []string{`"123e4567"`})
	f(`{"type":"integer","minimum":-15,"maximum":123}`,
		[]string{"-15", "-9", "-10", "0", "7", "99", "100", "123", "120"},
		[]string{"-16", "-0", "124", "200", "1000", "007", "1.0"})
	f(`{"type":"integer","exclusiveMinimum":0,"exclusiveMaximum":10}`, []string{"1", "9"}, []string{"0", "10", "-1"})
	f(`{"type":"integer","minimum":1000}`, []string{"1000", "99999", "123456789012"}, []string{"999", "-1000", "1"})
	f(`{"type":"integer","maximum":-3}`, []string{"-3", "-100", "-123456789"}, []string{"-2", "0", "3"})
	f(`{"type":"number","minimum":0,"maximum":1}`, []string{"0", "0.5", "1", "1.000", "0.0001"}, []string{"-0.5", "1.5", "1.01", "2", "1e0"})
	f(`{"type":"number","exclusiveMinimum":0}`, []string{"0.1", "5", "123.25"}, []string{"0", "0.0", "-1"})
	f(`{"type":"number","minimum":-2,"exclusiveMaximum":-1}`, []string{"-2", "-1.5", "-1.99"}, []string{"-1", "-2.5", "0", "-1.0"})
	f(`{"type":["string","null"]}`, []string{`"x"`, "null"}, []string{"1"})
	f(`{"anyOf":[{"type":"integer"},{"type":"object","properties":{"k":{"$ref":"#/$defs/n"}},"required":["k"],"additionalProperties":false}],"$defs":{"n":{"type":"boolean"}}}`,
		[]string{"5", `{"k":true}`}, []string{`{"k":1}`, `"x"`})
	// recursion through $ref
	f(`{"$ref":"#/$defs/node","$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},"next":{"anyOf":[{"$ref":"#/$defs/node"},{"type":"null"}]}},"required":["v","next"],"additionalProperties":false}}}`,
		[]string{`{"v":1,"next":null}`, `{"v":1,"next":{"v":2,"next":{"v":3,"next":null}}}`},
		[]string{`{"v":1,"next":{"v":2}}`})
	f(`{"type":"object","properties":{"t":{"type":"array","items":{"$ref":"#"}}},"required":["t"],"additionalProperties":false}`,
		[]string{`{"t":[]}`, `{"t":[{"t":[]},{"t":[{"t":[]}]}]}`}, []string{`{"t":[1]}`})
	f(`true`, []string{"1", `{"a":[]}`, `"s"`}, []string{"nope"})
	f(`{"title":"T","description":"d","$schema":"https://json-schema.org/draft/2020-12/schema","type":"boolean"}`, []string{"true"}, []string{"1"})
}

func TestJSONSchemaRefused(t *testing.T) {
	f := func(schema, keyword string) {
		t.Helper()
		_, err := FromJSONSchema([]byte(schema), DefaultLimits)
		var e *Error
		if !errors.As(err, &e) {
			t.Fatalf("%s: got %v, want an *Error naming %q", schema, err, keyword)
		}
		if e.Keyword != keyword || !strings.Contains(err.Error(), "'"+keyword+"'") && keyword != "" {
			t.Errorf("%s: error %q names %q, want %q", schema, err, e.Keyword, keyword)
		}
	}
	f(`{"type":"string","format":"email"}`, "format")
	f(`{"type":"object","patternProperties":{"a":{}}}`, "patternProperties")
	f(`{"oneOf":[{"type":"string"}]}`, "oneOf")
	f(`{"not":{"type":"string"}}`, "not")
	f(`{"type":"array","uniqueItems":true}`, "uniqueItems")
	f(`{"type":"integer","multipleOf":3}`, "multipleOf")
	f(`{"type":"number","minimum":0.5}`, "minimum")
	f(`{"type":"string","maxLength":100000}`, "maxLength")
	f(`{"type":"array","minItems":-1}`, "minItems")
	f(`{"$ref":"http://example.com/s"}`, "$ref")
	f(`{"$ref":"#/$defs/missing"}`, "$ref")
	f(`{"type":"object","properties":{"a":{"type":"wat"}}}`, "type")
	f(`{"type":"string","pattern":"a\\bb"}`, "pattern")
	f(`{"type":"string","pattern":"(?=x)"}`, "pattern")
	f(`{"anyOf":[{"type":"string"}],"type":"string"}`, "type")
	f(`{"type":"object","properties":{"a":{}},"required":["b"],"additionalProperties":false}`, "required")
	f(`false`, "")
	f(`{"type":"string","if":{}}`, "if")
}

// TestJSONSchemaBounds holds the translator to its limits: a schema with
// 10^4 properties, or nested 10^4 deep, is refused quickly.
func TestJSONSchemaBounds(t *testing.T) {
	var sb strings.Builder
	sb.WriteString(`{"type":"object","properties":{`)
	for i := 0; i < 10000; i++ {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(`"p` + itoa(i) + `":{"type":"integer"}`)
	}
	sb.WriteString(`}}`)
	deep := strings.Repeat(`{"type":"array","items":`, 10000) + `{}` + strings.Repeat(`}`, 10000)
	deepAnyOf := strings.Repeat(`{"anyOf":[`, 300) + `{}` + strings.Repeat(`]}`, 300)
	for name, s := range map[string]string{"properties": sb.String(), "deep": deep, "deepAnyOf": deepAnyOf} {
		t0 := time.Now()
		_, err := FromJSONSchema([]byte(s), DefaultLimits)
		if err == nil {
			t.Errorf("%s: compiled, want refused", name)
		}
		if d := time.Since(t0); d > 2*time.Second {
			t.Errorf("%s: took %v", name, d)
		}
	}
	// within the bound: 1000 properties compile
	sb.Reset()
	sb.WriteString(`{"type":"object","properties":{`)
	for i := 0; i < 1000; i++ {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(`"p` + itoa(i) + `":{"type":"integer"}`)
	}
	sb.WriteString(`},"required":["p999"],"additionalProperties":false}`)
	text, err := FromJSONSchema([]byte(sb.String()), DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	if g := mustGram(t, text); !g.accepts(`{"p3":1,"p999":2}`) || g.accepts(`{"p3":1}`) {
		t.Error("1000 properties: wrong language")
	}
}

func itoa(i int) string {
	return strings.TrimSpace(strings.Repeat(" ", 0) + fmtInt(i))
}

func fmtInt(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return fmtInt(i/10) + string(rune('0'+i%10))
}

func TestJSONObject(t *testing.T) {
	g := mustGram(t, JSONObject())
	for _, a := range []string{`{}`, `{"a":[1,2.5,-3e2,true,null,"x",{}]}`, "{ \"a\" : { \"b\" : [ ] } }"} {
		if !g.accepts(a) {
			t.Errorf("%q rejected", a)
		}
	}
	for _, r := range []string{`[]`, `"x"`, `{"a"}`, `{"a":1,}`, `{'a':1}`} {
		if g.accepts(r) {
			t.Errorf("%q accepted", r)
		}
	}
}

// BenchmarkFromJSONSchema: translating a schema like the ones agents send
// (what a request pays before the grammar cache).
func BenchmarkFromJSONSchema(b *testing.B) {
	schema := []byte(`{"type":"object","properties":{"name":{"type":"string","maxLength":64},"age":{"type":"integer","minimum":0,"maximum":150},"email":{"type":"string","format":"uuid"},"tags":{"type":"array","items":{"type":"string","enum":["a","b","c"]},"maxItems":5},"address":{"type":"object","properties":{"street":{"type":"string"},"zip":{"type":"string","pattern":"^[0-9]{5}$"}},"required":["street","zip"],"additionalProperties":false},"score":{"anyOf":[{"type":"number","minimum":0,"maximum":1},{"type":"null"}]}},"required":["name","age","tags","address","score"],"additionalProperties":false}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := FromJSONSchema(schema, DefaultLimits); err != nil {
			b.Fatal(err)
		}
	}
}
