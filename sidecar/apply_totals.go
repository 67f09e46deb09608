package sidecar

import (
	"github.com/picometer/picometer/schema"
)

// This file applies totals events: a daemon's cumulative request totals
// for its boot. Each part of the boot's totals (a counter, a histogram
// bucket, a histogram sum) that is below the daemon's is raised to it, and
// the target's totals by the same amount, so that:
//
//   - every request event the sidecar never received (a sequence gap, a
//     daemon queue overflow, events a killed or earlier sidecar read) is
//     counted once the next totals event arrives, and counted in
//     events_recovered;
//   - none is counted twice: events before the totals' seq are already in
//     the boot's totals, events after it add to them (the daemon sends its
//     totals in seq order, with what it had added before);
//   - nothing goes down: a part above the daemon's (which only a broken
//     producer can send) stays.
//
// aggregate_test.go (TestTotals*) covers it.

// applyTotals raises boot b's request totals to in, which has seq seq.
func (t *target) applyTotals(b *boot, in *schema.TotalsBody, seq uint64) {
	bt := b.totals()
	before := bt.Requests()
	for op := range in.Ops {
		src, have, exp := &in.Ops[op], &bt.Ops[op], &t.tot.Ops[op]
		raise(&have.PromptTokens, &exp.PromptTokens, src.PromptTokens)
		raise(&have.CompletionTokens, &exp.CompletionTokens, src.CompletionTokens)
		for f := range src.Finished {
			raise(&have.Finished[f], &exp.Finished[f], src.Finished[f])
		}
		for e := range src.Failed {
			raise(&have.Failed[e], &exp.Failed[e], src.Failed[e])
		}
		for h := range src.Hists {
			raiseHist(&have.Hists[h], &exp.Hists[h], &src.Hists[h])
		}
		for e := range src.DurationByError {
			raiseHist(&have.DurationByError[e], &exp.DurationByError[e], &src.DurationByError[e])
		}
		if src.TTFTCache != nil {
			for c := range src.TTFTCache {
				raiseHist(&have.TTFTCache[c], &exp.TTFTCache[c], &src.TTFTCache[c])
			}
		} else {
			// A daemon that predates the split: its request events carry
			// no cached_tokens, so the sidecar counted each as a miss.
			miss := indexOf(schema.CacheOutcomes, schema.CacheMiss)
			raiseHist(&have.TTFTCache[miss], &exp.TTFTCache[miss], &src.Hists[schema.HistTTFT])
		}
		t.syncOp(op)
	}
	if in.Constraints != nil {
		t.raiseConstraints(b, in.Constraints)
	}
	if n := bt.Requests() - before; n > 0 {
		t.recovered.addSat(uint64(n))
		if sp := t.a.spans; sp != nil {
			sp.lost.add(schema.SpanLossNotReceived, int(n))
		}
	}
	b.totalsSeq = max(b.totalsSeq, seq)
}

// raise raises *have to to, and *exp by as much.
func raise(have, exp *int64, to int64) {
	if d := to - *have; d > 0 {
		*have = to
		*exp = satAdd(*exp, d)
	}
}

// raiseHist raises each bucket and the sum of have to to's, and exp's by as
// much. The counts of the three have the same length (schema validated to).
func raiseHist(have, exp, to *schema.Hist) {
	if len(to.Counts) == 0 {
		return
	}
	if have.Counts == nil {
		have.Counts = make([]uint64, len(to.Counts))
	}
	if exp.Counts == nil {
		exp.Counts = make([]uint64, len(to.Counts))
	}
	for i, c := range to.Counts {
		if c > have.Counts[i] {
			exp.Counts[i] += c - have.Counts[i]
			have.Counts[i] = c
		}
	}
	if to.Sum > have.Sum {
		exp.Sum += to.Sum - have.Sum
		have.Sum = to.Sum
	}
}
