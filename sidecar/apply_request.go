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
	b.totals().Add(r)
	t.tot.Add(r)
	t.syncOp(op)
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

// syncOp sets the request counters of operation op from the target's
// totals, and adds the request duration series of error types that failed
// for the first time.
func (t *target) syncOp(op int) {
	o, rs := &t.tot.Ops[op], &t.req[op]
	rs.promptTokens.c.Set(uint64(o.PromptTokens))
	rs.genTokens.c.Set(uint64(o.CompletionTokens))
	for f, n := range o.Finished {
		rs.finished[f].c.Set(uint64(n))
	}
	for e, n := range o.Failed {
		rs.failed[e].c.Set(uint64(n))
		if rs.durationErr[e] == nil && o.DurationByError[e].Counts != nil {
			rs.durationErr[e] = t.cumHist(schema.IDRequestDuration, &o.DurationByError[e],
				label{schema.AttrOperation, schema.AttrOperation.Values[op]}, label{schema.AttrErrorType, schema.ErrorTypes[e]})
		}
	}
}
