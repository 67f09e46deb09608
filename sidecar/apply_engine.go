package sidecar

import (
	"fmt"

	"github.com/picometer/picometer/schema"
)

// This file applies engine snapshots: cumulative MLC-LLM counters become
// per-boot deltas (never decreasing across daemon restarts), and the step
// records become histograms. aggregate_test.go and the golden expositions of
// registry_test.go cover it (TestRestartMonotonic, TestSequenceGaps).

// Indexes of engine-snapshot counters, per boot and per target.
const (
	nBatchPhases   = 3 // schema.AttrBatchPhase.Values: decode, draft, verify
	eiPreemptions  = 0
	eiSpecDrafts   = 1
	eiDraftTokens  = 2                               // + position
	eiAccepted     = eiDraftTokens + schema.MaxSpecK // + position
	eiDroppedQueue = eiAccepted + schema.MaxSpecK
	eiDroppedRing  = eiDroppedQueue + 1
	eiDroppedWrite = eiDroppedRing + 1
	eiPrefixQuery  = eiDroppedWrite + 1
	eiPrefixHit    = eiPrefixQuery + 1
	eiPrefixEvict  = eiPrefixHit + 1
	eiBatchSteps   = eiPrefixEvict + 1 // + phase*MaxBatch + batch_size-1
	ecInts         = eiBatchSteps + nBatchPhases*schema.MaxBatch
	ecFloats       = nBatchPhases * schema.MaxBatch // batch time: phase*MaxBatch + batch_size-1
)

// applyEngine applies a cumulative engine snapshot of boot b: counters as
// the sum over boots of their cumulative values (a snapshot whose counter
// is below the boot's previous one is rejected whole, invalid_field), then
// the gauges, then the step records.
func (t *target) applyEngine(b *boot, e *schema.EngineBody) error {
	ni, nf, np := &t.newInts, &t.newFlts, &t.newPresent
	*ni, *nf, *np = [ecInts]int64{}, [ecFloats]float64{}, [ecInts]bool{}
	ni[eiPreemptions], np[eiPreemptions] = e.Preemptions, true
	ni[eiDroppedQueue], np[eiDroppedQueue] = e.EventsDropped, true
	ni[eiDroppedRing], np[eiDroppedRing] = e.StepsDropped, true
	ni[eiDroppedWrite], np[eiDroppedWrite] = e.EventsWriteFailed, true
	ni[eiPrefixQuery], np[eiPrefixQuery] = e.PrefixQueries, true
	ni[eiPrefixHit], np[eiPrefixHit] = e.PrefixHits, true
	ni[eiPrefixEvict], np[eiPrefixEvict] = e.PrefixEvictions, true
	if sd := e.SpecDecode; sd != nil {
		// Every draft proposes its position-0 token, so drafts = draft_count[0].
		np[eiSpecDrafts] = true
		if len(sd.DraftCount) > 0 {
			ni[eiSpecDrafts] = sd.DraftCount[0]
		}
		for p := range sd.DraftCount {
			ni[eiDraftTokens+p], np[eiDraftTokens+p] = sd.DraftCount[p], true
			ni[eiAccepted+p], np[eiAccepted+p] = sd.AcceptCount[p], true
		}
	}
	for ph, tb := range [nBatchPhases]schema.TimeByBatchSize{e.DecodeTimeByBatchSize, e.DraftTimeByBatchSize, e.VerifyTimeByBatchSize} {
		for n := 1; n < len(tb) && n <= schema.MaxBatch; n++ {
			if tb[n].Count > 0 {
				i := ph*schema.MaxBatch + n - 1
				ni[eiBatchSteps+i], np[eiBatchSteps+i] = tb[n].Count, true
				nf[i] = tb[n].Sum
			}
		}
	}
	for i := range ni {
		if ni[i] < b.ints[i] {
			return invalidField("%s: %d is below %d in the previous snapshot of boot %q", intName(i), ni[i], b.ints[i], b.id)
		}
	}
	for i := range nf {
		if nf[i] < b.flts[i] {
			return invalidField("%s: %v is below %v in the previous snapshot of boot %q", floatName(i), nf[i], b.flts[i], b.id)
		}
	}
	for i := range ni {
		if ni[i] == b.ints[i] && (t.ints[i] != nil || !np[i]) {
			continue
		}
		b.ints[i] = ni[i]
		s := t.ints[i]
		if s == nil {
			s = t.newIntCounter(i)
			t.ints[i] = s
		}
		v := t.retInts[i]
		for _, ob := range t.order {
			v = satAdd(v, ob.ints[i])
		}
		s.c.Set(uint64(v))
	}
	for i := range nf {
		if nf[i] == b.flts[i] && (t.floats[i] != nil || !np[eiBatchSteps+i]) {
			continue
		}
		b.flts[i] = nf[i]
		s := t.floats[i]
		if s == nil {
			s = t.add(t.own.newFloatCounter(schema.IDBatchTime, t.a.now(), t.labels(batchLabels(i)...)...)).(*floatCounterSeries)
			t.floats[i] = s
		}
		v := t.retFlts[i]
		for _, ob := range t.order {
			v += ob.flts[i]
		}
		// Rounding cannot take a float sum below its previous value while
		// the order of terms stays, but folding a boot changes the order.
		s.c.Set(max(v, s.c.Get()))
	}

	b.hasSnap, b.snapAt = true, t.a.stamp.Add(1)
	b.running, b.waiting, b.slots = e.Running, e.Waiting, e.Slots
	b.kvUsage, b.kvUsed, b.kvTotal, b.kvCached = e.KVCacheUsage, e.KVBlocksUsed, e.KVBlocksTotal, e.KVBlocksCached
	t.refreshGauges()

	for i := range e.Steps {
		s := &e.Steps[i]
		ph := indexOf(schema.AttrPhase.Values, s.Phase)
		ss := &t.steps[ph]
		pl := label{schema.AttrPhase, s.Phase}
		t.hist(&ss.duration, schema.IDStepDuration, pl).observe(seconds(s.DurationUS))
		t.hist(&ss.tokens, schema.IDStepTokens, pl).observe(float64(s.Tokens))
		t.hist(&ss.batchSize, schema.IDStepBatchSize, pl).observe(float64(s.BatchSize))
	}
	return nil
}

func batchLabels(i int) []label {
	ph, n := i/schema.MaxBatch, i%schema.MaxBatch
	return []label{{schema.AttrBatchPhase, schema.AttrBatchPhase.Values[ph]}, {schema.AttrBatchSize, schema.AttrBatchSize.Values[n]}}
}

func (t *target) newIntCounter(i int) *counterSeries {
	switch {
	case i == eiPreemptions:
		return t.newCounter(schema.IDPreemptions)
	case i == eiSpecDrafts:
		return t.newCounter(schema.IDSpecDrafts)
	case i < eiAccepted:
		return t.newCounter(schema.IDSpecDraftTokens, label{schema.AttrPosition, schema.AttrPosition.Values[i-eiDraftTokens]})
	case i < eiDroppedQueue:
		return t.newCounter(schema.IDSpecAcceptedTokens, label{schema.AttrPosition, schema.AttrPosition.Values[i-eiAccepted]})
	case i == eiDroppedQueue:
		return t.newCounter(schema.IDDaemonEventsDropped, label{schema.AttrDropReason, schema.DropQueueFull})
	case i == eiDroppedRing:
		return t.newCounter(schema.IDDaemonEventsDropped, label{schema.AttrDropReason, schema.DropStepRing})
	case i == eiDroppedWrite:
		return t.newCounter(schema.IDDaemonEventsDropped, label{schema.AttrDropReason, schema.DropWriteFail})
	case i == eiPrefixQuery:
		return t.newCounter(schema.IDPrefixQueries)
	case i == eiPrefixHit:
		return t.newCounter(schema.IDPrefixHits)
	case i == eiPrefixEvict:
		return t.newCounter(schema.IDPrefixEvictions)
	}
	return t.newCounter(schema.IDBatchSteps, batchLabels(i-eiBatchSteps)...)
}

var batchFields = [nBatchPhases]string{"decode_time_by_batch_size", "draft_time_by_batch_size", "verify_time_by_batch_size"}

// intName names engine counter i as the snapshot field it comes from.
func intName(i int) string {
	switch {
	case i == eiPreemptions:
		return "preemptions"
	case i == eiSpecDrafts:
		return "spec_decode.draft_count[0]"
	case i < eiAccepted:
		return fmt.Sprintf("spec_decode.draft_count[%d]", i-eiDraftTokens)
	case i < eiDroppedQueue:
		return fmt.Sprintf("spec_decode.accept_count[%d]", i-eiAccepted)
	case i == eiDroppedQueue:
		return "events_dropped"
	case i == eiDroppedRing:
		return "steps_dropped"
	case i == eiDroppedWrite:
		return "events_write_failed"
	case i == eiPrefixQuery:
		return "prefix_cache_queries"
	case i == eiPrefixHit:
		return "prefix_cache_hits"
	case i == eiPrefixEvict:
		return "prefix_cache_evictions"
	}
	i -= eiBatchSteps
	return fmt.Sprintf("%s count{batch_size=%d}", batchFields[i/schema.MaxBatch], i%schema.MaxBatch+1)
}

func floatName(i int) string {
	return fmt.Sprintf("%s sum{batch_size=%d}", batchFields[i/schema.MaxBatch], i%schema.MaxBatch+1)
}

// satAdd adds two non-negative counts, stopping at maxCounter rather than
// wrapping (each is at most schema.MaxCumulative, so only the folded totals
// of thousands of boots could get there).
func satAdd(a, b int64) int64 {
	if a > maxCounter-b {
		return maxCounter
	}
	return a + b
}

// addSat adds n to a counter, stopping at maxCounter rather than wrapping
// (a gap in a forged sequence can be as large as 2^64).
func (s *counterSeries) addSat(n uint64) {
	if v := s.c.Get(); v > maxCounter || n > maxCounter-v {
		s.c.Set(maxCounter)
		return
	}
	s.c.Add(int(n))
}
