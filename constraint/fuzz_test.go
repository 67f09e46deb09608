package constraint

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// FuzzJSONSchema: any bytes as a schema are translated or refused within
// a bound, and what is translated is a grammar that parses.
func FuzzJSONSchema(f *testing.F) {
	for _, s := range []string{
		`{"type":"object","properties":{"a":{"type":"integer","minimum":-5,"maximum":300}},"required":["a"],"additionalProperties":false}`,
		`{"anyOf":[{"$ref":"#/$defs/x"},{"type":"null"}],"$defs":{"x":{"type":"array","items":{"$ref":"#"},"maxItems":3}}}`,
		`{"type":"string","pattern":"^[a-z]{2,4}$"}`, `{"enum":[1,"a",null]}`, `{"type":"number","exclusiveMinimum":-2}`,
		`{"type":["string","integer"],"minLength":1,"maximum":9}`, `true`, `{}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		t0 := time.Now()
		text, err := FromJSONSchema(b, DefaultLimits)
		if d := time.Since(t0); d > 5*time.Second {
			t.Fatalf("took %v", d)
		}
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("error %T is not *Error", err)
			}
			return
		}
		if len(text) > DefaultLimits.MaxBytes+4096 {
			t.Fatalf("%d bytes of grammar", len(text))
		}
		g, err := parseGBNF(text)
		if err != nil {
			t.Fatalf("grammar does not parse: %v\n%s", err, text)
		}
		if err := g.checkNoEmptyLoops(); err != nil {
			t.Fatalf("the engine would refuse the grammar: %v\n%s", err, text)
		}
	})
}

// FuzzRegex: a translated pattern accepts exactly what Go's regexp
// matches in whole, on the fuzzer's candidate text.
func FuzzRegex(f *testing.F) {
	for _, s := range [][2]string{{`a+b?`, "aab"}, {`[^x-z]{1,3}`, "ab"}, {`(?i)k(a|b)*`, "KaB"}, {`.\d`, "é1"}, {`^x$`, "x"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, s string) {
		if len(pattern) > 40 || len(s) > 24 || !utf8.ValidString(s) || !utf8.ValidString(pattern) || strings.ContainsAny(pattern, "{") && len(pattern) > 12 {
			return
		}
		text, err := FromRegex(pattern, DefaultLimits)
		if err != nil {
			return
		}
		g, perr := parseGBNF(text)
		if perr != nil {
			t.Fatalf("%q: grammar does not parse: %v\n%s", pattern, perr, text)
		}
		if err := g.checkNoEmptyLoops(); err != nil {
			t.Fatalf("%q: the engine would refuse the grammar: %v\n%s", pattern, err, text)
		}
		re, rerr := regexp.Compile(`^(?:` + pattern + `)$`)
		if rerr != nil {
			return
		}
		defer func() {
			if p := recover(); p != nil { // the test matcher's step bound
				t.Skip(p)
			}
		}()
		if got, want := g.accepts(s), re.MatchString(s); got != want {
			t.Fatalf("%q on %q: grammar %v, regexp %v\n%s", pattern, s, got, want, text)
		}
	})
}

// FuzzChoices: any list of strings is a grammar accepting each of them.
func FuzzChoices(f *testing.F) {
	f.Add(`["a","b\"c","\u0000"]`)
	f.Fuzz(func(t *testing.T, js string) {
		var cs []string
		if json.Unmarshal([]byte(js), &cs) != nil || len(cs) == 0 || len(cs) > 8 {
			return
		}
		text, err := FromChoices(cs, DefaultLimits)
		if err != nil {
			return
		}
		g := mustGram(t, text)
		for _, c := range cs {
			if utf8.ValidString(c) && !g.accepts(c) {
				t.Fatalf("%q rejected\n%s", c, text)
			}
		}
	})
}
