package constraint_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/picometer/picometer/constraint"
	"github.com/picometer/picometer/native"
)

// TestNativeCompiles: the grammars the translators write are grammars the
// engine's compiler (native.CompileGrammar, the other reader of the
// dialect) accepts: JSON mode, schemas of the kinds clients send (the AI
// SDK's zod output, OpenAI strict mode, $ref recursion, anyOf, bounds),
// regexes, choices and the tool grammars of every format and choice. A
// translator writing something the compiler refuses would turn a valid
// request into a 400 only once the engine enforces constraints.
func TestNativeCompiles(t *testing.T) {
	if _, err := native.CompileGrammar(`root ::= "a"`); errors.Is(err, native.ErrNoCgo) {
		t.Skip("the grammar compiler is C: built without cgo")
	}
	compile := func(what, gbnf string, err error) {
		t.Helper()
		if err != nil {
			t.Errorf("%s: translate: %v", what, err)
			return
		}
		g, err := native.CompileGrammar(gbnf)
		if err != nil {
			t.Errorf("%s: native.CompileGrammar: %v\n%s", what, err, gbnf)
			return
		}
		g.Free()
	}
	compile("json_object", constraint.JSONObject(), nil)
	schemas := map[string]string{
		"zod person": `{"type":"object","properties":{"name":{"type":"string","maxLength":12},"age":{"type":"integer","minimum":0,"maximum":120},` +
			`"tags":{"type":"array","items":{"type":"string","enum":["red","green","blue"]},"maxItems":3},"member":{"type":"boolean"}},` +
			`"required":["name","age","tags","member"],"additionalProperties":false,"$schema":"http://json-schema.org/draft-07/schema#"}`,
		"strict nested": `{"type":"object","properties":{"user":{"type":"object","properties":{"id":{"type":"integer"},"email":{"type":["string","null"]}},` +
			`"required":["id","email"],"additionalProperties":false},"score":{"type":"number","minimum":0,"maximum":1},"status":{"const":"ok"}},` +
			`"required":["user","score","status"],"additionalProperties":false}`,
		"recursive ref": `{"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},"kids":{"type":"array","items":{"$ref":"#/$defs/node"}}},` +
			`"required":["v"]}},"$ref":"#/$defs/node"}`,
		"anyOf":         `{"anyOf":[{"type":"string","minLength":2,"maxLength":5},{"type":"integer","exclusiveMinimum":-3,"maximum":999},{"type":"null"}]}`,
		"pattern":       `{"type":"string","pattern":"^[A-Z]{2}-[0-9]+$"}`,
		"formats":       `{"type":"array","items":{"anyOf":[{"type":"string","format":"date-time"},{"type":"string","format":"uuid"}]},"minItems":1,"maxItems":4}`,
		"open object":   `{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":{"type":"number"}}`,
		"empty schema":  `{}`,
		"true":          `true`,
		"unicode enum":  `{"enum":["héllo","日本","a\"b\\c",1.5,null,true,{"k":[1]}]}`,
		"string bounds": `{"type":"string","minLength":3,"maxLength":300}`,
	}
	for name, s := range schemas {
		g, err := constraint.FromJSONSchema([]byte(s), constraint.DefaultLimits)
		compile("schema "+name, g, err)
	}
	for _, re := range []string{`[a-z]+@[a-z]+\.com`, `(yes|no)`, `\d{3}-\d{4}`, `.{0,10}x`, `[^"\\]*`, `(ab)*c?`} {
		g, err := constraint.FromRegex(re, constraint.DefaultLimits)
		compile("regex "+re, g, err)
	}
	g, err := constraint.FromChoices([]string{"positive", "negative", "né", `"quoted"`}, constraint.DefaultLimits)
	compile("choices", g, err)

	tools := []constraint.Tool{
		{Name: "get_weather", Parameters: []byte(`{"type":"object","properties":{"city":{"type":"string","maxLength":16},"unit":{"type":"string","enum":["c","f"]}},"required":["city","unit"],"additionalProperties":false}`)},
		{Name: "search", Parameters: []byte(`{"type":"object","properties":{"q":{"type":"string"},"n":{"type":"integer","minimum":1,"maximum":10}},"required":["q"]}`)},
		{Name: "noop"},
	}
	for _, f := range constraint.ToolFormats {
		for _, c := range []constraint.ToolChoice{{Mode: "required"}, {Mode: "auto"}, {Mode: "function", Name: "search"}} {
			for _, parallel := range []bool{false, true} {
				g, err := constraint.ToolGrammar(f, tools, c, parallel, constraint.DefaultLimits)
				compile(fmt.Sprintf("tools %s %s parallel=%v", f, c.Mode, parallel), g, err)
			}
		}
	}
}
