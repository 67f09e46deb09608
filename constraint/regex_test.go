package constraint

import (
	"errors"
	"regexp"
	"testing"
)

func TestRegex(t *testing.T) {
	f := func(pattern string, accept, reject []string) {
		t.Helper()
		text, err := FromRegex(pattern, DefaultLimits)
		if err != nil {
			t.Fatalf("%s: %v", pattern, err)
		}
		g := mustGram(t, text)
		full := regexp.MustCompile(`^(?:` + pattern + `)$`)
		for _, a := range accept {
			if !g.accepts(a) || !full.MatchString(a) {
				t.Errorf("%s: %q: grammar %v, Go regexp %v\n%s", pattern, a, g.accepts(a), full.MatchString(a), text)
			}
		}
		for _, r := range reject {
			if g.accepts(r) || full.MatchString(r) {
				t.Errorf("%s: %q: grammar %v, Go regexp %v\n%s", pattern, r, g.accepts(r), full.MatchString(r), text)
			}
		}
	}
	f(`^\d{3}-\d{4}$`, []string{"555-1234"}, []string{"55-1234", "555-12345", "abc-defg"})
	f(`(cat|dog)s?`, []string{"cat", "dogs"}, []string{"cow", "cats!"})
	f(`[^a-z]+`, []string{"ABC", "1 2"}, []string{"aB", ""})
	f(`(?i)yes|no`, []string{"YES", "yEs", "no"}, []string{"nah"})
	f(`a.c`, []string{"abc", "aéc"}, []string{"a\nc", "ac"})
	f(`x{2,3}y*`, []string{"xx", "xxxyyy"}, []string{"x", "xxxx"})
	f(`\w+@\w+\.com`, []string{"a_1@b.com"}, []string{"a@b.org"})
	f(`[\[\]\\^-]+`, []string{`[]\^-`}, []string{"a"})
	f(``, []string{""}, []string{"a"})
}

func TestRegexRefused(t *testing.T) {
	f := func(pattern, keyword string) {
		t.Helper()
		_, err := FromRegex(pattern, DefaultLimits)
		var e *Error
		if !errors.As(err, &e) || e.Keyword != keyword {
			t.Errorf("%q: got %v, want an *Error naming %q", pattern, err, keyword)
		}
	}
	f(`a\bb`, `\b`)
	f(`a^b`, `^`)
	f(`a$b`, `$`)
	f(`(?=a)`, `(?=`)
	f(`(a)\1`, `\1`)
	f(`a{5000}`, `{5000}`)
}

func TestChoices(t *testing.T) {
	text, err := FromChoices([]string{"yes", "no", `a"b\c`, "é\n"}, DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	g := mustGram(t, text)
	for _, a := range []string{"yes", "no", `a"b\c`, "é\n"} {
		if !g.accepts(a) {
			t.Errorf("%q rejected", a)
		}
	}
	for _, r := range []string{"ye", "yesno", ""} {
		if g.accepts(r) {
			t.Errorf("%q accepted", r)
		}
	}
	if _, err := FromChoices(nil, DefaultLimits); err == nil {
		t.Error("no choices: accepted")
	}
}

// TestRegexNullableRepeat: a repetition of something that can match
// nothing is rewritten (the engine refuses such grammars: they could
// repeat without consuming input), or refused by name when it cannot be.
func TestRegexNullableRepeat(t *testing.T) {
	for _, p := range []string{`(a*)*`, `(a|)*`, `(a?)+b`, `(x{0,2})*`, `((a|b*)|)+`} {
		text, err := FromRegex(p, DefaultLimits)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		g := mustGram(t, text)
		re := regexp.MustCompile(`^(?:` + p + `)$`)
		for _, s := range []string{"", "a", "aa", "b", "ab", "aab", "x", "xxx", "ba"} {
			if g.accepts(s) != re.MatchString(s) {
				t.Errorf("%s on %q: grammar %v, regexp %v\n%s", p, s, g.accepts(s), re.MatchString(s), text)
			}
		}
	}
	if _, err := FromRegex(`(a*b*)*`, DefaultLimits); err == nil {
		t.Error("(a*b*)*: translated, want refused")
	}
}
