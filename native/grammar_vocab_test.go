//go:build cgo

package native

import (
	"encoding/json"
	"regexp"
	"slices"
	"testing"

	"github.com/picometer/picometer/constraint"
)

// grammar_vocab_test.go holds the engine's masks to multi-byte tokens
// (grammar_engine_test.go uses the byte vocabulary, one byte a token):
// token bytes that share prefixes, end inside a grammar element or span
// several, so the mask's walk of the sorted vocabulary is exercised end to
// end, under grammars from constraint/ (JSON mode and a regex).

// constrainedVocab is the tiny model's vocabulary as bytes for grammars:
// byte tokens are their byte, but a few carry multi-byte pieces (so the
// mask walks shared prefixes and tokens that end inside a grammar
// element), and the control tokens none.
func constrainedVocab() [][]byte {
	v := make([][]byte, VocabSize)
	for i := 0; i < 256; i++ {
		v[i] = []byte{byte(i)}
	}
	multi := []string{`{"`, `":`, `"a"`, `true`, `false`, `null`, `, `, `12`, "\u00e9", `"}`, `tr`, `[1,`, `ab`, `abc`, `x"`, `\"`}
	for k, s := range multi {
		v['A'+k] = []byte(s)
	}
	return v
}

func detok(v [][]byte, toks []int32) []byte {
	var b []byte
	for _, t := range toks {
		if t == TokEOS {
			break
		}
		b = append(b, v[t]...)
	}
	return b
}

func grammarOf(t testing.TB, text string, err error) *Grammar {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	g, err := CompileGrammar(text)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Free)
	return g
}

// TestConstrainedOutputMatches: greedy and sampled output on the tiny
// model (random weights: it would never emit JSON on its own) under a JSON
// object grammar and under a regex's grammar is always a sentence of it,
// with speculation off and on.
func TestGrammarVocabOutputMatches(t *testing.T) {
	vocab := constrainedVocab()
	jsonG := grammarOf(t, constraint.JSONObject(), nil)
	const pat = `[a-c]{2,5}-(true|false|x+)\d{1,3}`
	rg, err := constraint.FromRegex(pat, constraint.DefaultLimits)
	regexG := grammarOf(t, rg, err)
	re := regexp.MustCompile(`^(?:` + pat + `)$`)
	for _, specK := range []int{0, 4} {
		e := open(t, func(c *Config) { c.SpecK = specK })
		if err := e.SetTokenBytes(vocab); err != nil {
			t.Fatal(err)
		}
		var reqs []*request
		for i := 0; i < 12; i++ {
			p := Params{MaxTokens: 200, Seed: uint64(i)}
			if i%2 == 1 {
				p.Temperature = 1.2
			}
			p.Grammar = jsonG
			if i >= 6 {
				p.Grammar = regexG
			}
			reqs = append(reqs, &request{prompt: repetitive(i, 10+i), p: p})
		}
		run(t, e, reqs, 1)
		complete := 0
		for i, r := range reqs {
			out := detok(vocab, r.out)
			for _, tok := range r.out[:len(r.out)-1] {
				if len(vocab[tok]) == 0 {
					t.Fatalf("spec %d req %d: control token %d inside the output", specK, i, tok)
				}
			}
			if r.stats.MaskedTokens != len(r.out) {
				t.Errorf("spec %d req %d: %d masked tokens for %d output", specK, i, r.stats.MaskedTokens, len(r.out))
			}
			switch r.stats.Grammar {
			case GrammarComplete:
				complete++
				if r.finish == FinishStop && r.out[len(r.out)-1] != TokEOS {
					t.Errorf("req %d: stop without EOS", i)
				}
				if i < 6 && !json.Valid(out) {
					t.Errorf("spec %d req %d: complete but not JSON: %q", specK, i, out)
				}
				if i >= 6 && !re.Match(out) {
					t.Errorf("spec %d req %d: complete but no match: %q", specK, i, out)
				}
			case GrammarIncomplete:
				if r.finish != FinishLength {
					t.Errorf("spec %d req %d: incomplete with finish %s", specK, i, r.finish)
				}
				if i < 6 && (len(out) == 0 || out[0] != '{') {
					t.Errorf("spec %d req %d: not a JSON object's start: %q", specK, i, out)
				}
			default:
				t.Errorf("spec %d req %d: outcome %q (%q)", specK, i, r.stats.Grammar, out)
			}
			t.Logf("spec %d req %d %s %s: %q", specK, i, r.finish, r.stats.Grammar, out)
		}
		if complete < 6 {
			t.Errorf("spec %d: only %d of 12 outputs complete", specK, complete)
		}
		var snap Snapshot
		e.Snapshot(&snap)
		if snap.MaskCount == 0 || snap.MaskCacheHits+snap.MaskCacheMisses != snap.MaskCount {
			t.Errorf("mask metrics: count %d hits %d misses %d", snap.MaskCount, snap.MaskCacheHits, snap.MaskCacheMisses)
		}
	}
}

// TestConstrainedNeighbours: an unconstrained request batched with
// constrained ones emits exactly the tokens it emits alone.
func TestGrammarVocabNeighbours(t *testing.T) {
	vocab := constrainedVocab()
	g := grammarOf(t, constraint.JSONObject(), nil)
	for _, specK := range []int{0, 4} {
		e := open(t, func(c *Config) { c.SpecK = specK })
		if err := e.SetTokenBytes(vocab); err != nil {
			t.Fatal(err)
		}
		for _, temp := range []float32{0, 0.8} {
			free := Params{MaxTokens: 40, Temperature: temp, Seed: 7}
			alone := solo(t, e, repetitive(0, 20), free)
			reqs := []*request{
				{prompt: repetitive(1, 15), p: Params{MaxTokens: 60, Grammar: g, Temperature: temp, Seed: 1}},
				{prompt: repetitive(0, 20), p: free},
				{prompt: repetitive(2, 12), p: Params{MaxTokens: 60, Grammar: g, Seed: 2}},
			}
			run(t, e, reqs, 0)
			if !slices.Equal(reqs[1].out, alone.out) {
				t.Fatalf("spec %d temp %g: batched %v, alone %v", specK, temp, reqs[1].out, alone.out)
			}
			if reqs[1].stats.Grammar != "" || reqs[1].stats.MaskedTokens != 0 {
				t.Errorf("unconstrained request has grammar stats %+v", reqs[1].stats)
			}
		}
	}
}

// TestGrammarEOSAndDead: EOS only where the grammar may end, the end once
// it is complete, and a dead end (no token continues) forces EOS with the
// dead_end outcome.
func TestGrammarVocabEOSAndDead(t *testing.T) {
	vocab := constrainedVocab()
	e := open(t, nil)
	if err := e.SetTokenBytes(vocab); err != nil {
		t.Fatal(err)
	}
	// a fixed sentence: exactly its bytes, then EOS
	g := grammarOf(t, `root ::= "hello"`, nil)
	r := solo(t, e, prompt(1, 9), Params{MaxTokens: 50, Grammar: g})
	if string(detok(vocab, r.out)) != "hello" || r.out[len(r.out)-1] != TokEOS || r.stats.Grammar != GrammarComplete {
		t.Fatalf("fixed sentence: %q %v %s", detok(vocab, r.out), r.out, r.stats.Grammar)
	}
	// max_tokens before the end: incomplete
	r = solo(t, e, prompt(1, 9), Params{MaxTokens: 2, Grammar: g})
	if r.stats.Grammar != GrammarIncomplete || r.finish != FinishLength {
		t.Fatalf("cut short: %s %s", r.stats.Grammar, r.finish)
	}
	// bytes no token has: a dead end at once
	dead := grammarOf(t, `root ::= "a" [\u4e00-\u4e01]`, nil)
	vocab2 := constrainedVocab()
	for i := 0x80; i < 0x100; i++ {
		vocab2[i] = nil // no token can start a multi-byte character
	}
	e2 := open(t, nil)
	if err := e2.SetTokenBytes(vocab2); err != nil {
		t.Fatal(err)
	}
	r = solo(t, e2, prompt(1, 9), Params{MaxTokens: 50, Grammar: dead})
	if !slices.Equal(r.out, []int32{'a', TokEOS}) || r.stats.Grammar != GrammarDead {
		t.Fatalf("dead end: %v %s", r.out, r.stats.Grammar)
	}
	// without token bytes a grammar is refused by name
	e3 := open(t, nil)
	if _, err := e3.Submit(prompt(1, 5), Params{MaxTokens: 5, Grammar: g}); err == nil {
		t.Fatal("a grammar without token bytes was accepted")
	}
}
