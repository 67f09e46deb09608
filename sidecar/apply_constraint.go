package sidecar

import (
	"github.com/picometer/picometer/schema"
)

// This file is the constrained-decoding families (issue 26):
// picometer_constraint_requests_total by kind and outcome,
// picometer_tool_calls_total by format, and the compile and mask
// histograms. Their state is the target's schema.ConstraintTotals, fed by
// request events through schema's TotalsBody.Add and raised by totals
// events like every request family, so a sidecar restart loses none of
// them. A target's constraint series are created together when its first
// constrained request or totals event arrives (a daemon that never
// constrains anything exports none). aggregate_test.go covers it.

type consSeries struct {
	requests  []*counterSeries // kind*len(outcomes)+outcome
	toolCalls []*counterSeries // by format
	compile   []*cumHist       // by kind
	mask      *cumHist
}

// syncConstraints sets the target's constraint series from its totals,
// creating them at first use. The caller holds t.mu.
func (t *target) syncConstraints() {
	ct := t.tot.Constraints
	if ct == nil {
		return
	}
	if t.cons == nil {
		c := &consSeries{requests: make([]*counterSeries, len(ct.Requests)),
			toolCalls: make([]*counterSeries, len(ct.ToolCalls)), compile: make([]*cumHist, len(ct.Compile))}
		no := len(schema.ConstraintOutcomes)
		for k, kind := range schema.Constraints {
			for o, out := range schema.ConstraintOutcomes {
				c.requests[k*no+o] = t.newCounter(schema.IDConstraintRequests,
					label{schema.AttrConstraint, kind}, label{schema.AttrOutcome, out})
			}
			c.compile[k] = t.cumHist(schema.IDConstraintCompile, &ct.Compile[k], label{schema.AttrConstraint, kind})
		}
		for f, format := range schema.ToolFormats {
			c.toolCalls[f] = t.newCounter(schema.IDToolCalls, label{schema.AttrToolFormat, format})
		}
		c.mask = t.cumHist(schema.IDConstraintMask, &ct.Mask)
		t.cons = c
	}
	for i, n := range ct.Requests {
		t.cons.requests[i].c.Set(uint64(n))
	}
	for i, n := range ct.ToolCalls {
		t.cons.toolCalls[i].c.Set(uint64(n))
	}
}

// raiseConstraints raises a boot's constraint totals (have) to a totals
// event's (to), and the target's (exp) by as much.
func (t *target) raiseConstraints(b *boot, to *schema.ConstraintTotals) {
	bt := b.totals()
	if bt.Constraints == nil {
		bt.Constraints = schema.NewConstraintTotals()
	}
	if t.tot.Constraints == nil {
		t.tot.Constraints = schema.NewConstraintTotals()
	}
	have, exp := bt.Constraints, t.tot.Constraints
	for i := range to.Requests {
		raise(&have.Requests[i], &exp.Requests[i], to.Requests[i])
	}
	for i := range to.ToolCalls {
		raise(&have.ToolCalls[i], &exp.ToolCalls[i], to.ToolCalls[i])
	}
	for k := range to.Compile {
		raiseHist(&have.Compile[k], &exp.Compile[k], &to.Compile[k])
	}
	raiseHist(&have.Mask, &exp.Mask, &to.Mask)
	t.syncConstraints()
}
