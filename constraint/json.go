package constraint

// The shared rules of JSON values. Whitespace is bounded (MaxSpace), and
// so are the digits of numbers, so that no rule lets a model write without
// end inside one token of JSON.
var jsonRules = [][2]string{
	{"ws", `[ \t\n]{0,8}`},
	{"json-char", `[^"\\\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})`},
	// json-char-bmp is json-char without the code points above U+FFFF: the
	// character of a length-bounded string, which is then as long in code
	// points (JSON Schema's count) as in UTF-16 units (JavaScript's, so
	// zod's .max and Ajv's maxLength agree).
	{"json-char-bmp", `[^"\\\x00-\x1F\U00010000-\U0010FFFF] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})`},
	{"json-string", `"\"" json-char* "\""`},
	{"json-int", `"-"? ("0" | [1-9] [0-9]{0,17})`},
	{"json-frac", `"." [0-9]{1,16}`},
	{"json-exp", `[eE] [-+]? [0-9]{1,3}`},
	{"json-number", `json-int json-frac? json-exp?`},
	{"json-bool", `"true" | "false"`},
	{"json-null", `"null"`},
	{"json-value", `json-object | json-array | json-string | json-number | json-bool | json-null`},
	{"json-object", `"{" ws (json-string ws ":" ws json-value ws ("," ws json-string ws ":" ws json-value ws)*)? "}"`},
	{"json-array", `"[" ws (json-value ws ("," ws json-value ws)*)? "]"`},
}

// useJSON defines the shared JSON rules name needs (all of them: they
// are few and refer to each other) and returns name.
func (b *builder) useJSON(name string) string {
	if _, ok := b.rules["json-value"]; !ok {
		for _, r := range jsonRules {
			b.define(r[0], r[1])
		}
	}
	return name
}

// JSONObject is the grammar of JSON mode: any JSON object.
func JSONObject() string {
	b := newBuilder(DefaultLimits)
	b.define("root", "json-object")
	b.useJSON("json-object")
	return b.text()
}
