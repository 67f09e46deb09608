package daemon

import (
	"math"
	"testing"
	"time"

	"github.com/picometer/picometer/schema"
)

// checkUsage checks a response's usage against the request event of the
// same request: token counts equal, and every usage.extra field equal to
// its definition (DESIGN.md decision 3, appendUsage's doc) recomputed here
// from the event's raw facts. usage.extra may hold no field this test does
// not know.
func checkUsage(t *testing.T, u *usageJSON, ev schema.Event) {
	t.Helper()
	r := ev.RequestBody
	if u.PromptTokens != r.PromptTokens || u.CompletionTokens != r.CompletionTokens || u.TotalTokens != r.PromptTokens+r.CompletionTokens {
		t.Errorf("usage %+v, event prompt %d completion %d", u, r.PromptTokens, r.CompletionTokens)
	}
	sec := func(us int64) float64 { return float64(max(us, 0)) / 1e6 }
	per := func(tokens int, s float64) float64 {
		if tokens == 0 || s == 0 {
			return 0
		}
		return float64(tokens) / s
	}
	want := map[string]float64{
		"ttft_s":          sec(r.FirstTokenUS),
		"e2e_s":           sec(r.FinishUS),
		"queue_s":         sec(r.AdmittedUS),
		"prefill_tokens":  float64(r.PrefillTokens),
		"decode_tokens":   float64(r.DecodeTokens),
		"draft_tokens":    float64(r.DraftTokens),
		"accepted_tokens": float64(r.AcceptedTokens),
		"cached_tokens":   float64(r.CachedTokens),
	}
	if u.Details.CachedTokens == nil || *u.Details.CachedTokens != r.CachedTokens {
		t.Errorf("usage.prompt_tokens_details.cached_tokens %v, event cached_tokens %d", u.Details.CachedTokens, r.CachedTokens)
	}
	if r.FirstTokenUS >= 0 && r.AdmittedUS >= 0 {
		want["prefill_s"] = sec(r.FirstTokenUS - r.AdmittedUS)
	}
	if r.FirstTokenUS >= 0 {
		want["decode_s"] = sec(r.FinishUS - r.FirstTokenUS)
	}
	want["prefill_tokens_per_s"] = per(r.PrefillTokens, want["prefill_s"])
	want["decode_tokens_per_s"] = per(r.DecodeTokens, want["decode_s"])
	if r.CompletionTokens >= 2 {
		want["time_per_output_token_s"] = sec(r.LastTokenUS-r.FirstTokenUS) / float64(r.CompletionTokens-1)
	}
	if r.CompletionTokens > 0 {
		want["inter_token_latency_s"] = sec(r.FinishUS) / float64(r.CompletionTokens)
	}
	if r.DraftTokens > 0 {
		want["accept_rate"] = float64(r.AcceptedTokens) / float64(r.DraftTokens)
	}
	if n := len(r.ITLUS); n > 0 {
		var sum, mx int64
		for _, g := range r.ITLUS {
			sum, mx = sum+g, max(mx, g)
		}
		want["itl_mean_s"] = sec(sum) / float64(n)
		want["itl_max_s"] = sec(mx)
	}
	want["mask_s"] = sec(r.MaskUS)
	want["masked_tokens"] = float64(r.MaskedTokens)
	want["constraint_compile_s"] = sec(r.CompileUS)
	for _, k := range []string{"prefill_s", "decode_s", "time_per_output_token_s", "inter_token_latency_s", "accept_rate", "itl_mean_s", "itl_max_s"} {
		if _, ok := want[k]; !ok {
			want[k] = 0
		}
	}
	for k, v := range want {
		got, ok := u.Extra[k]
		if !ok || math.Abs(got-v) > 1e-9*max(1, math.Abs(v)) {
			t.Errorf("usage.extra.%s = %v (present %v), want %v from the event", k, got, ok, v)
		}
	}
	for k := range u.Extra {
		if _, ok := want[k]; !ok {
			t.Errorf("usage.extra.%s is not checked", k)
		}
	}
}

// TestUsageMatchesEvent: usage.extra and the request event agree, for a
// request that waited in the queue (its TTFT includes the wait), streamed
// and not; server-side times fit inside what the client measured.
func TestUsageMatchesEvent(t *testing.T) {
	eng := newFakeEngine(1 << 16)
	eng.gen = forever
	eng.runLen = 2
	eng.stepDelay = 2 * time.Millisecond
	eng.cfg.BMax = 1
	ts := startServer(t, eng, nil)
	// A request in the slot makes the next one wait.
	done := make(chan struct{})
	go func() {
		defer close(done)
		ts.post("/v1/completions", `{"prompt":"first","max_tokens":40}`)
	}()
	waitFor(t, 5*time.Second, "the first request to run", func() bool { r, _ := eng.Load(); return r == 1 })
	start := time.Now()
	r := ts.post("/v1/completions", `{"prompt":"second","max_tokens":9}`)
	wall := time.Since(start).Seconds()
	<-done
	c := decodeCompletionResponse(t, r.body)
	ev := ts.sink.request(c.ID)
	checkUsage(t, c.Usage, ev)
	x := c.Usage.Extra
	if x["queue_s"] < 0.01 || x["ttft_s"] <= x["queue_s"] || x["e2e_s"] > wall || x["prefill_s"] <= 0 || x["decode_s"] <= 0 {
		t.Errorf("usage.extra %v: a queued request's times (client saw %.3fs)", x, wall)
	}
	// 9 tokens in runs of 2: 5 emitting steps, 4 gaps.
	if len(ev.ITLUS) != 4 || x["itl_max_s"] < x["itl_mean_s"] || x["itl_mean_s"] <= 0 {
		t.Errorf("ITL gaps %v, usage.extra %v", ev.ITLUS, x)
	}

	s := ts.stream("/v1/completions", `{"prompt":"third","max_tokens":5,"stream":true,"stream_options":{"include_usage":true}}`)
	u := s.chunks[len(s.chunks)-1]
	checkUsage(t, u.Usage, ts.sink.request(u.ID))
}
