//go:build cgo

package native

import (
	"encoding/json"
	"regexp"
	"slices"
	"testing"
)

// byteTokenBytes is the byte vocabulary's token bytes: ids 0..255 their
// byte, the control tokens none.
func byteTokenBytes() [][]byte {
	tb := make([][]byte, VocabSize)
	for i := range 256 {
		tb[i] = []byte{byte(i)}
	}
	return tb
}

// constrained opens the tiny model with the byte vocabulary's token bytes.
func constrained(t *testing.T, mod func(*Config)) *Engine {
	t.Helper()
	e := open(t, mod)
	if err := e.SetTokenBytes(byteTokenBytes()); err != nil {
		t.Fatal(err)
	}
	return e
}

func grammar(t *testing.T, gbnf string) *Grammar {
	t.Helper()
	g, err := CompileGrammar(gbnf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Free)
	return g
}

// text is the output up to EOS, as bytes.
func text(t *testing.T, out []int32) string {
	t.Helper()
	var b []byte
	for i, tok := range out {
		if tok == TokEOS && i == len(out)-1 {
			break
		}
		if !IsByte(tok) {
			t.Fatalf("control token %d at %d of %v", tok, i, out)
		}
		b = append(b, byte(tok))
	}
	return string(b)
}

const jsonObjectGBNF = `root ::= "{" ws "\"name\"" ws ":" ws str ws "," ws "\"age\"" ws ":" ws int ws "," ws "\"ok\"" ws ":" ws ("true" | "false") ws "}"
str ::= "\"" [a-z ]{0,12} "\""
int ::= "-"? [0-9]{1,4}
ws ::= [ ]?
`

// TestGrammarEnforced: on random weights, greedy and sampled output, with
// speculation on and off, is a whole sentence of the grammar (checked by
// encoding/json and a regexp, not by the engine), ends with EOS the
// grammar allowed, and says so (Grammar complete, masked tokens counted).
func TestGrammarEnforced(t *testing.T) {
	re := regexp.MustCompile(`^\{ ?"name" ?: ?"[a-z ]{0,12}" ?, ?"age" ?: ?-?[0-9]{1,4} ?, ?"ok" ?: ?(true|false) ?\}$`)
	for _, specK := range []int{0, 4} {
		e := constrained(t, func(c *Config) { c.SpecK = specK })
		g := grammar(t, jsonObjectGBNF)
		for i := range 6 {
			p := Params{MaxTokens: 200, Grammar: g}
			if i%2 == 1 {
				p.Temperature, p.Seed = 1.5, uint64(i)
			}
			r := solo(t, e, prompt(i, 20), p)
			s := text(t, r.out)
			t.Logf("spec %d req %d: %q", specK, i, s)
			if !re.MatchString(s) {
				t.Errorf("spec %d req %d: %q does not match the grammar (finish %s)", specK, i, s, r.finish)
			}
			var v struct {
				Name string
				Age  int
				OK   bool
			}
			if err := json.Unmarshal([]byte(s), &v); err != nil {
				t.Errorf("spec %d req %d: %q: %v", specK, i, s, err)
			}
			if r.finish != "stop" || r.stats.Grammar != GrammarComplete || r.stats.MaskedTokens != len(r.out) {
				t.Errorf("spec %d req %d: finish %s grammar %q masked %d of %d", specK, i, r.finish, r.stats.Grammar, r.stats.MaskedTokens, len(r.out))
			}
		}
	}
}

// TestGrammarLengthAndDeadEnd: max_tokens before the grammar can end is
// incomplete; a grammar no token can continue (a byte outside the
// vocabulary's reach is impossible here, so a grammar that needs a control
// token's text) forces EOS and says dead_end.
func TestGrammarLengthAndDeadEnd(t *testing.T) {
	e := constrained(t, nil)
	r := solo(t, e, prompt(1, 10), Params{MaxTokens: 5, Grammar: grammar(t, `root ::= "a"{10}`)})
	if text(t, r.out) != "aaaaa" || r.finish != "length" || r.stats.Grammar != GrammarIncomplete {
		t.Errorf("length: %q %s %q", text(t, r.out), r.finish, r.stats.Grammar)
	}
	// "ab" then a byte set no byte token can satisfy after it is impossible to
	// write in GBNF; a dead end arises when the grammar's next byte needs a
	// token longer than any: the byte vocabulary has only 1-byte tokens, so
	// every byte is reachable. Use a stop token instead: the grammar ends
	// after "x", and only EOS may follow; it is complete.
	r = solo(t, e, prompt(2, 10), Params{MaxTokens: 50, Grammar: grammar(t, `root ::= "x"`)})
	if !slices.Equal(r.out, []int32{'x', TokEOS}) || r.stats.Grammar != GrammarComplete {
		t.Errorf("single: %v %q", r.out, r.stats.Grammar)
	}
}

// TestGrammarBatchInvariant: unconstrained requests batched with
// constrained ones give exactly what they give alone, and constrained ones
// what they give alone.
func TestGrammarBatchInvariant(t *testing.T) {
	e := constrained(t, func(c *Config) { c.SpecK = 4 })
	g := grammar(t, jsonObjectGBNF)
	var reqs, alone []*request
	for i := range 6 {
		p := Params{MaxTokens: 40}
		if i%2 == 0 {
			p.Grammar = g
			p.MaxTokens = 200
		}
		pr := repetitive(i, 30)
		reqs = append(reqs, &request{prompt: pr, p: p})
		alone = append(alone, solo(t, e, pr, p))
	}
	run(t, e, reqs, 1)
	for i := range reqs {
		if !slices.Equal(reqs[i].out, alone[i].out) {
			t.Errorf("request %d (constrained %v): batched %v, alone %v", i, reqs[i].p.Grammar != nil, reqs[i].out, alone[i].out)
		}
	}
	var m Snapshot
	e.Snapshot(&m)
	if m.MaskCount == 0 || m.MaskCacheHits == 0 || m.MaskCacheMisses == 0 {
		t.Errorf("snapshot: masks %d, cache hits %d misses %d", m.MaskCount, m.MaskCacheHits, m.MaskCacheMisses)
	}
}

// TestGrammarNeedsTokenBytes: without token bytes a grammar is refused.
func TestGrammarNeedsTokenBytes(t *testing.T) {
	e := open(t, nil)
	if _, err := e.Submit(prompt(0, 5), Params{MaxTokens: 3, Grammar: grammar(t, `root ::= "a"`)}); err == nil {
		t.Fatal("a grammar before SetTokenBytes was accepted")
	}
	if err := e.SetTokenBytes(byteTokenBytes()[:10]); err == nil {
		t.Fatal("10 token bytes for a 264-token vocabulary accepted")
	}
}
