//go:build cgo

package native

import (
	"fmt"
	"slices"
	"testing"

	"github.com/picometer/picometer/native/internal/reference"
)

// refPenalized is the reference's greedy continuation with p's penalties
// (the rules of Params), as the engine serves it: at most p.MaxTokens
// tokens, ending at EOS (included).
func refPenalized(t testing.TB, ref *reference.Model, prompt []int32, p Params) []int32 {
	t.Helper()
	s := ref.NewState()
	var logits []float32
	var err error
	for _, tok := range prompt {
		if logits, err = s.Forward(tok); err != nil {
			t.Fatal(err)
		}
	}
	seq := slices.Clone(prompt)
	var out []int32
	l := make([]float32, len(logits))
	for len(out) < p.MaxTokens {
		copy(l, logits)
		count := map[int32]int{}
		for _, tok := range out {
			count[tok]++
		}
		done := map[int32]bool{}
		for _, tok := range seq {
			if done[tok] {
				continue
			}
			done[tok] = true
			if r := p.RepetitionPenalty; r != 0 && r != 1 {
				if l[tok] > 0 {
					l[tok] /= r
				} else {
					l[tok] *= r
				}
			}
			if c := count[tok]; c > 0 {
				l[tok] -= float32(c)*p.FrequencyPenalty + p.PresencePenalty
			}
		}
		tok := reference.Argmax(l)
		out = append(out, tok)
		seq = append(seq, tok)
		if tok == TokEOS || len(out) == p.MaxTokens || s.Pos >= ref.Context {
			break
		}
		if logits, err = s.Forward(tok); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

var penaltyCases = []Params{
	{FrequencyPenalty: 1.5},
	{PresencePenalty: 2},
	{RepetitionPenalty: 1.3},
	{FrequencyPenalty: -0.5, PresencePenalty: 0.7, RepetitionPenalty: 0.8},
}

// TestPenaltiesMatchReference: greedy decoding with presence, frequency and
// repetition penalties gives the reference's penalized greedy tokens, and
// the penalties change what is generated.
func TestPenaltiesMatchReference(t *testing.T) {
	_, ref := tinyModel(t)
	e := open(t, nil)
	changed := 0
	for i, pc := range penaltyCases {
		for j := 0; j < 2; j++ {
			p := repetitive(i+j, 12+j*20)
			pc.MaxTokens = 40
			want := refPenalized(t, ref, p, pc)
			got := solo(t, e, p, pc)
			if !slices.Equal(got.out, want) {
				t.Errorf("%+v prompt %d: engine %v\nreference %v", pc, j, got.out, want)
			}
			if plain := refGreedy(t, ref, p, 40); !slices.Equal(plain, want) {
				changed++
			}
		}
	}
	if changed < len(penaltyCases) {
		t.Errorf("the penalties changed only %d of %d greedy continuations", changed, 2*len(penaltyCases))
	}
}

// TestPenaltiesBatchInvariant: with penalties on, every request of a
// batch (staggered, slots recycled, with and without speculation) produces
// exactly its reference penalized greedy tokens, whatever else runs beside it.
func TestPenaltiesBatchInvariant(t *testing.T) {
	_, ref := tinyModel(t)
	const n = 10
	mk := func(i int) *request {
		p := prompt(i, 3+(i*11)%50)
		if i%2 == 1 {
			p = repetitive(i, 10+(i*7)%40)
		}
		pc := penaltyCases[i%len(penaltyCases)]
		if i%5 == 4 {
			pc = Params{} // a request without penalties beside them
		}
		pc.MaxTokens = 10 + (i*17)%30
		return &request{prompt: p, p: pc}
	}
	want := make([][]int32, n)
	for i := range want {
		r := mk(i)
		want[i] = refPenalized(t, ref, r.prompt, r.p)
	}
	for _, specK := range []int{0, 4} {
		t.Run(fmt.Sprintf("spec=%d", specK), func(t *testing.T) {
			e := open(t, func(c *Config) { c.BMax = 4; c.SpecK = specK; c.PrefillChunk = 16 })
			runWant(t, e, mk, want)
		})
	}
}

// TestPenaltiesRejected: out-of-range penalties are an argument error.
func TestPenaltiesRejected(t *testing.T) {
	e := open(t, nil)
	for _, p := range []Params{
		{MaxTokens: 1, PresencePenalty: 2.5},
		{MaxTokens: 1, FrequencyPenalty: -2.01},
		{MaxTokens: 1, RepetitionPenalty: -1},
	} {
		if _, err := e.Submit(prompt(0, 4), p); err == nil {
			t.Errorf("%+v accepted", p)
		}
	}
}
