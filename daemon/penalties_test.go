package daemon

import (
	"slices"
	"sync"
	"testing"
)

// TestE2EPenalties: presence, frequency and repetition penalties reach the
// engine (they change greedy output), and greedy output with penalties is
// batch-invariant over HTTP: requests sent together, with different
// penalties, each return what they return alone, streamed or not.
// native's TestPenaltiesMatchReference checks the arithmetic against the
// reference forward pass.
func TestE2EPenalties(t *testing.T) {
	ts := startTiny(t, func(c *Config) { c.Engine.BMax = 4 })
	prompt := `"the cat sat on the mat. the cat sat on the mat. the cat"`
	bodies := []string{
		`{"prompt":` + prompt + `,"max_tokens":40,"temperature":0,"return_token_ids":true`,
		`{"prompt":` + prompt + `,"max_tokens":40,"temperature":0,"return_token_ids":true,"frequency_penalty":2`,
		`{"prompt":` + prompt + `,"max_tokens":40,"temperature":0,"return_token_ids":true,"presence_penalty":1.5,"repetition_penalty":1.3`,
		`{"prompt":` + prompt + `,"max_tokens":40,"temperature":0,"return_token_ids":true,"repetition_penalty":0.7,"frequency_penalty":-1`,
	}
	alone := make([][]int32, len(bodies))
	for i, b := range bodies {
		alone[i] = decodeCompletionResponse(t, ts.post("/v1/completions", b+"}").body).Choices[0].TokenIDs
	}
	for i := 1; i < len(alone); i++ {
		if slices.Equal(alone[i], alone[0]) {
			t.Errorf("penalties %s changed nothing: %v", bodies[i], alone[i])
		}
	}
	for round := 0; round < 3; round++ {
		got := make([][]int32, len(bodies))
		var wg sync.WaitGroup
		for i, b := range bodies {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if round == 1 {
					s := ts.stream("/v1/completions", b+`,"stream":true}`)
					for _, c := range s.chunks {
						if len(c.Choices) > 0 {
							got[i] = append(got[i], c.Choices[0].TokenIDs...)
						}
					}
					return
				}
				got[i] = decodeCompletionResponse(t, ts.post("/v1/completions", b+"}").body).Choices[0].TokenIDs
			}()
		}
		wg.Wait()
		for i := range bodies {
			if !slices.Equal(got[i], alone[i]) {
				t.Errorf("round %d, request %d: batched %v\nalone %v", round, i, got[i], alone[i])
			}
		}
	}
}
