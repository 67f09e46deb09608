package daemon

import (
	"testing"

	"github.com/picometer/picometer/schema"
)

// TestMaskUsage: on the real engine, a constrained request's usage.extra
// carries its grammar's cost (mask_s, masked_tokens, constraint_compile_s)
// equal to its request event's (checkUsage), and the figures are real:
// tokens were sampled under a mask, compiling took time the first time
// and none when the grammar came from the cache, and on Llama 3's 128k
// vocabulary the masks took measurable time. It skips while the engine
// refuses constraints (TestConstraintRefusedByEngine covers that).
func TestMaskUsage(t *testing.T) {
	const body = `{"prompt":"a plan","max_tokens":48,"temperature":0,` +
		`"guided_json":{"type":"object","properties":{"city":{"type":"string","maxLength":10},"days":{"type":"integer","minimum":1,"maximum":7}},"required":["city","days"],"additionalProperties":false}}`
	run := func(t *testing.T, ts *testServer, bigVocab bool) {
		if ts.d.grammarErr != "" {
			t.Skipf("the engine enforces no constraint yet (%s)", ts.d.grammarErr)
		}
		for i, fresh := range []bool{true, false} { // the same schema twice: compiled, then cached
			r := ts.post("/v1/completions", body)
			if r.status != 200 {
				t.Fatalf("request %d: %d %s", i, r.status, r.body)
			}
			c := decodeCompletionResponse(t, r.body)
			ev := ts.sink.request(c.ID)
			checkUsage(t, c.Usage, ev)
			x := c.Usage.Extra
			if ev.Constraint != schema.ConstraintJSONSchema || ev.Grammar == "" {
				t.Errorf("request %d: event constraint %q grammar %q", i, ev.Constraint, ev.Grammar)
			}
			if ev.MaskedTokens < 1 || ev.MaskedTokens > c.Usage.CompletionTokens+1 {
				t.Errorf("request %d: %d masked tokens for %d completion tokens", i, ev.MaskedTokens, c.Usage.CompletionTokens)
			}
			if got := x["constraint_compile_s"] > 0; got != fresh {
				t.Errorf("request %d: usage.extra.constraint_compile_s = %v; want it > 0 only when compiled (not cached)", i, x["constraint_compile_s"])
			}
			if bigVocab && !(x["mask_s"] > 0) {
				t.Errorf("request %d: usage.extra.mask_s = %v over %d masked tokens of a 128k vocabulary", i, x["mask_s"], ev.MaskedTokens)
			}
		}
	}
	t.Run("bytes", func(t *testing.T) { run(t, startStructured(t, "", ""), false) })
	t.Run("llama3-vocab", func(t *testing.T) { run(t, startStructured(t, "llama3", ""), true) })
}
