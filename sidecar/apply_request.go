package sidecar

import (
	"math"

	"github.com/picometer/picometer/schema"
)

// This file applies request events: schema's RequestTotals.Add, the one
// rule for what a request adds to which histogram bucket and counter, adds
// the request to its boot's totals and to the target's, whose series show
// the latter. aggregate_test.go (TestExactness, TestApplyAllocs, TestTotals*)
// and the golden expositions of registry_test.go cover it.

func seconds(us int64) float64 { return float64(us) / 1e6 }

// maxCounter bounds every exported counter: an event that would take one
// past it is rejected whole (invalid_field), so a counter never wraps.
// schema bounds each event's values; this bounds their sum.
const maxCounter = math.MaxInt64

// applyRequest feeds one finished request of boot b into the request
// families. It applies nothing and returns an invalid_field error when a
// token counter would pass maxCounter.
func (t *target) applyRequest(b *boot, r *schema.RequestBody) error {
	op := indexOf(schema.AttrOperation.Values, r.Operation)
	o := &t.tot.Ops[op]
	if o.PromptTokens > maxCounter-int64(r.PromptTokens) || o.CompletionTokens > maxCounter-int64(r.CompletionTokens) {
		return invalidField("request %q: prompt_tokens %d or completion_tokens %d would take a token counter past %d",
			r.ID, r.PromptTokens, r.CompletionTokens, uint64(maxCounter))
	}
	b.totals().Add(r, b.cfg.blockSize)
	t.tot.Add(r, b.cfg.blockSize)
	rs := &t.req[op]
	rs.promptTokens.c.Set(uint64(o.PromptTokens))
	rs.genTokens.c.Set(uint64(o.CompletionTokens))
	f := indexOf(schema.FinishReasons, r.FinishReason)
	rs.finished[f].c.Set(uint64(o.Finished[f]))
	if et := schema.RequestErrorType(r); et != "" {
		t.syncFailed(op, indexOf(schema.ErrorTypes, et))
	}
	if r.Constraint != "" || r.ToolCalls > 0 {
		t.syncConstraints()
	}
	return nil
}

// totals returns the boot's request totals, made at first use.
func (b *boot) totals() *schema.TotalsBody {
	if b.tot == nil {
		tot := schema.NewTotals()
		b.tot = &tot
	}
	return b.tot
}

// syncOp sets every request counter of operation op from the target's
// totals (after a totals event; a request event sets the ones it touched).
func (t *target) syncOp(op int) {
	o, rs := &t.tot.Ops[op], &t.req[op]
	rs.promptTokens.c.Set(uint64(o.PromptTokens))
	rs.genTokens.c.Set(uint64(o.CompletionTokens))
	for f, n := range o.Finished {
		rs.finished[f].c.Set(uint64(n))
	}
	for e := range o.Failed {
		t.syncFailed(op, e)
	}
}

// syncFailed sets requests_failed of (op, error type e) from the target's
// totals, and adds the series of the request duration of that error type at
// its first failure.
func (t *target) syncFailed(op, e int) {
	o, rs := &t.tot.Ops[op], &t.req[op]
	rs.failed[e].c.Set(uint64(o.Failed[e]))
	if rs.durationErr[e] == nil && o.DurationByError[e].Counts != nil {
		rs.durationErr[e] = t.cumHist(schema.IDRequestDuration, &o.DurationByError[e],
			label{schema.AttrOperation, schema.AttrOperation.Values[op]}, label{schema.AttrErrorType, schema.ErrorTypes[e]})
	}
}
