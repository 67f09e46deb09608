//go:build cgo

package native

import (
	"math"
	"testing"
)

// TestGrammarTopLogprobsFinite: when a grammar allows fewer tokens than
// top_logprobs asks for, the masked alternatives are reported at -9999 (as
// OpenAI reports tokens that cannot occur), never -Inf: the daemon writes
// these numbers into JSON, where -Inf is no number. The chosen token's own
// log-probability is that of the masked distribution: 0 when it was the
// only token allowed.
func TestGrammarTopLogprobsFinite(t *testing.T) {
	e := constrained(t, nil)
	g := grammar(t, `root ::= "ab"`)
	r := solo(t, e, prompt(1, 8), Params{MaxTokens: 5, Grammar: g, Logprobs: true, TopLogprobs: 5})
	if text(t, r.out) != "ab" {
		t.Fatalf("output %q", text(t, r.out))
	}
	e2 := constrained(t, nil)
	id, err := e2.Submit(prompt(1, 8), Params{MaxTokens: 5, Grammar: g, Logprobs: true, TopLogprobs: 5})
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for steps := 0; steps < 50; steps++ {
		outs, err := e2.Step()
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range outs {
			if o.ID != id {
				continue
			}
			for k := range o.Tokens {
				seen++
				if lp := o.Logprobs[k]; math.Abs(float64(lp)) > 1e-6 {
					t.Errorf("token %d (%d): logprob %v, want 0 (the only token allowed)", k, o.Tokens[k], lp)
				}
				for x := 0; x < o.TopN; x++ {
					v := o.TopLogprobs[k*MaxTopLogprobs+x]
					id := o.TopIDs[k*MaxTopLogprobs+x]
					switch {
					case x == 0 && id != o.Tokens[k]:
						t.Errorf("token %d: top alternative %d, not the token %d", k, id, o.Tokens[k])
					case x > 0 && v != -9999:
						t.Errorf("token %d alternative %d (id %d): logprob %v, want -9999", k, x, id, v)
					}
				}
			}
			if o.Finish != "" {
				steps = 50
			}
		}
	}
	if seen != 3 { // 'a', 'b', EOS
		t.Fatalf("%d tokens, want 3", seen)
	}
}
