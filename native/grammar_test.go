//go:build cgo

package native

import (
	"strings"
	"testing"
)

// TestCompileGrammarErrors: every refusal names the problem and where.
func TestCompileGrammarErrors(t *testing.T) {
	bad := func(src, want string) {
		t.Helper()
		g, err := CompileGrammar(src)
		if err == nil {
			g.Free()
			t.Errorf("CompileGrammar(%q): no error, want %q", src, want)
			return
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("CompileGrammar(%q) = %q, want it to contain %q", src, err, want)
		}
	}
	bad(``, "empty grammar")
	bad(`foo ::= "x"`, "no root rule")
	bad(`root ::= value`, "line 1 col 10: rule value is not defined")
	bad("root ::= \"x\"\nroot ::= \"y\"", "line 2 col 1: rule root defined twice")
	bad(`root ::= "abc`, "unterminated string literal")
	bad(`root ::= [a-`, "unterminated character class")
	bad(`root ::= [z-a]`, "backwards")
	bad(`root ::= "\q"`, `unknown escape \q`)
	bad(`root ::= "\x4"`, `\x needs 2 hex digits`)
	bad(`root ::= "\uD800"`, "not a Unicode scalar value")
	bad(`root ::= ( "a"`, "unclosed (")
	bad(`root ::= * "a"`, "follows no symbol")
	bad(`root ::= "a"{3,2}`, "max below min")
	bad(`root ::= "a"{99999}`, "repetition count over 10000")
	bad(`root ::= root "a" | "b"`, "rule root is left-recursive")
	bad(`root ::= ("a"?)*`, "rule root is left-recursive")
	bad(`root ::= <think>`, "token references")
	bad(`root ::= "a" )`, "unexpected ')' after rule root")
	bad("root ::= "+strings.Repeat("(", 200)+`"a"`+strings.Repeat(")", 200), "nested deeper than 128")
	bad(`root ::= "a"`+strings.Repeat(` "a"{10000}`, 200), "grammar too large")
}

// TestCompileGrammarAccepts: the dialect's constructs compile.
func TestCompileGrammarAccepts(t *testing.T) {
	for _, src := range []string{
		`root ::= "a"`,
		"root ::= x | y # comment\nx ::= [a-z]+ \"\\n\"\ny ::= [^\\n]* .\n",
		"root ::= (\n  \"a\" |\n  \"b\"\n)? \"c\"{2} \"d\"{1,} \"e\"{0,3} \"f\"{2,4}\n",
		`root ::= [ぁ-ゟ] "\u00e9\U0001F600\x41" [^"\\\x7F\x00-\x1F]`,
		"space ::= | \" \" | \"\\n\" [ \\t]{0,20}\nroot ::= space",
	} {
		g, err := CompileGrammar(src)
		if err != nil {
			t.Errorf("CompileGrammar(%q): %v", src, err)
			continue
		}
		g.Free()
		g.Free()
	}
}

// FuzzCompileGrammar: any text compiles or is refused with a message that
// names a position or a bound; nothing crashes or hangs (every bound in
// grammar_rules.h holds the work to the text's size).
func FuzzCompileGrammar(f *testing.F) {
	for _, s := range []string{
		`root ::= "a"`,
		"root ::= (\n  \"a\" |\n  \"b\"\n)? \"c\"{2} \"d\"{1,} \"e\"{0,3} [^\"\\\\\\x7F\\x00-\\x1F]*",
		`root ::= [ぁ-ゟ] "\u00e9\U0001F600\x41" . # c`,
		`root ::= x x ::= "a"`,
		`root ::= root "a"`,
		"char ::= [^\"\\\\\\x7F\\x00-\\x1F] | [\\\\] ([\"\\\\bfnrt] | \"u\" [0-9a-fA-F]{4})\nroot ::= \"\\\"\" char{1,100} \"\\\"\"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		g, err := CompileGrammar(src)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "native: grammar: ") {
				t.Fatalf("error %q lacks the grammar: prefix", err)
			}
			return
		}
		g.Free()
	})
}
