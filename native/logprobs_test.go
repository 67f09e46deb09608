//go:build cgo

package native

import (
	"fmt"
	"math"
	"slices"
	"testing"
)

// lpRequest is a request run with logprobs, and what it produced.
type lpRequest struct {
	prompt []int32
	p      Params
	id     ID
	out    []int32
	lp     []float32
	topIDs [][]int32
	topLP  [][]float32
	done   bool
}

// runLogprobs submits reqs (request i once i*stagger steps ran) and steps
// until all finished, copying their engine-owned log-probabilities.
func runLogprobs(t *testing.T, e *Engine, reqs []*lpRequest, stagger int) {
	t.Helper()
	byID := map[ID]*lpRequest{}
	submitted, done := 0, 0
	for steps := 0; done < len(reqs); steps++ {
		for submitted < len(reqs) && submitted*stagger <= steps {
			r := reqs[submitted]
			id, err := e.Submit(r.prompt, r.p)
			if err != nil {
				t.Fatal(err)
			}
			r.id, byID[id] = id, r
			submitted++
		}
		outs, err := e.Step()
		if err != nil {
			t.Fatal(err)
		}
		if steps > 100000 {
			t.Fatal("no progress")
		}
		for _, o := range outs {
			r := byID[o.ID]
			if len(o.Logprobs) != len(o.Tokens) || o.TopN != r.p.TopLogprobs {
				t.Fatalf("%d tokens, %d logprobs, top %d", len(o.Tokens), len(o.Logprobs), o.TopN)
			}
			r.out = append(r.out, o.Tokens...)
			r.lp = append(r.lp, o.Logprobs...)
			for i := range o.Tokens {
				if o.TopN == 0 {
					r.topIDs, r.topLP = append(r.topIDs, nil), append(r.topLP, nil)
					continue
				}
				r.topIDs = append(r.topIDs, slices.Clone(o.TopIDs[i*MaxTopLogprobs:][:o.TopN]))
				r.topLP = append(r.topLP, slices.Clone(o.TopLogprobs[i*MaxTopLogprobs:][:o.TopN]))
			}
			if o.Finish != "" {
				r.done = true
				done++
			}
		}
	}
}

// TestLogprobsMatchReference: each output token's log-probability and its
// top alternatives are the log-softmax of the Go reference forward pass's
// logits over temperature, greedy and sampled.
func TestLogprobsMatchReference(t *testing.T) {
	_, ref := tinyModel(t)
	e := open(t, nil)
	for _, pc := range []Params{
		{MaxTokens: 24, Logprobs: true, TopLogprobs: 5},
		{MaxTokens: 24, Logprobs: true, TopLogprobs: 20, Temperature: 0.7, Seed: 3},
		{MaxTokens: 24, Logprobs: true, Temperature: 1.3, TopK: 10, Seed: 9},
	} {
		t.Run(fmt.Sprintf("T=%g/top=%d", pc.Temperature, pc.TopLogprobs), func(t *testing.T) {
			r := &lpRequest{prompt: prompt(2, 20), p: pc}
			runLogprobs(t, e, []*lpRequest{r}, 0)
			all, err := ref.Logits(append(slices.Clone(r.prompt), r.out[:len(r.out)-1]...))
			if err != nil {
				t.Fatal(err)
			}
			temp := float64(pc.Temperature)
			if temp == 0 {
				temp = 1
			}
			worst := 0.0
			for i, tok := range r.out {
				logits := all[len(r.prompt)-1+i]
				want := make([]float64, len(logits))
				mx := math.Inf(-1)
				for v, l := range logits {
					want[v] = float64(l) / temp
					mx = max(mx, want[v])
				}
				sum := 0.0
				for _, w := range want {
					sum += math.Exp(w - mx)
				}
				for v := range want {
					want[v] -= mx + math.Log(sum)
				}
				worst = max(worst, math.Abs(float64(r.lp[i])-want[tok]))
				sorted := slices.Clone(want)
				slices.SortFunc(sorted, func(a, b float64) int { return -cmpF(a, b) })
				for k, id := range r.topIDs[i] {
					// The k-th alternative has the reference's k-th
					// largest log-probability (near-ties may swap ids).
					if d := math.Abs(float64(r.topLP[i][k]) - sorted[k]); d > 1e-4 || math.Abs(want[id]-sorted[k]) > 1e-4 {
						t.Fatalf("token %d, alternative %d: id %d logprob %g, reference %g (id's %g)", i, k, id, r.topLP[i][k], sorted[k], want[id])
					}
					if k > 0 && r.topLP[i][k] > r.topLP[i][k-1] {
						t.Fatalf("token %d: alternatives not sorted: %v", i, r.topLP[i])
					}
				}
				if pc.Temperature == 0 && (r.topIDs[i][0] != tok || r.topLP[i][0] != r.lp[i]) {
					t.Fatalf("greedy token %d (%d, %g) is not the top alternative (%d, %g)", i, tok, r.lp[i], r.topIDs[i][0], r.topLP[i][0])
				}
			}
			// Measured ~1e-6 (float32 logits and log-softmax against float64).
			if worst > 1e-4 {
				t.Fatalf("logprobs differ from the reference by %g", worst)
			}
			t.Logf("max |logprob - reference| = %.2g over %d tokens", worst, len(r.out))
		})
	}
}

func cmpF(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// TestLogprobsBatchInvariant: a request's log-probabilities are bitwise
// the same alone and in a batch (staggered, with speculation verifying
// several tokens per step), with penalties on for some.
func TestLogprobsBatchInvariant(t *testing.T) {
	mk := func(i int) *lpRequest {
		p := Params{MaxTokens: 12 + i*3, Logprobs: true, TopLogprobs: i % 4 * 5}
		if i%3 == 2 {
			p.FrequencyPenalty, p.RepetitionPenalty = 1, 1.2
		}
		return &lpRequest{prompt: repetitive(i, 10+i*5), p: p}
	}
	const n = 8
	alone := make([]*lpRequest, n)
	e1 := open(t, func(c *Config) { c.SpecK = 0 })
	for i := range alone {
		alone[i] = mk(i)
		runLogprobs(t, e1, alone[i:i+1], 0)
	}
	e := open(t, func(c *Config) { c.BMax = 4; c.SpecK = 4; c.PrefillChunk = 16 })
	reqs := make([]*lpRequest, n)
	for i := range reqs {
		reqs[i] = mk(i)
	}
	runLogprobs(t, e, reqs, 1)
	for i, r := range reqs {
		a := alone[i]
		if !slices.Equal(r.out, a.out) || !slices.Equal(r.lp, a.lp) {
			t.Fatalf("request %d: batched %v %v\nalone %v %v", i, r.out, r.lp, a.out, a.lp)
		}
		for k := range r.topIDs {
			if !slices.Equal(r.topIDs[k], a.topIDs[k]) || !slices.Equal(r.topLP[k], a.topLP[k]) {
				t.Fatalf("request %d token %d: batched top %v %v, alone %v %v", i, k, r.topIDs[k], r.topLP[k], a.topIDs[k], a.topLP[k])
			}
		}
	}
}

// TestLogprobsRejected: out-of-range logprob parameters are an argument error.
func TestLogprobsRejected(t *testing.T) {
	e := open(t, nil)
	for _, p := range []Params{{MaxTokens: 1, Logprobs: true, TopLogprobs: 21}, {MaxTokens: 1, TopLogprobs: -1}} {
		if _, err := e.Submit(prompt(0, 4), p); err == nil {
			t.Errorf("%+v accepted", p)
		}
	}
}
