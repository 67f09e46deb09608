package sidecar

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/picometer/picometer/schema"
)

// reading is what the status page and /api/v1/status need of the
// aggregation at one moment: cumulative counters and live gauges, read from
// the very series /metrics writes, so that both show the same numbers. It
// is filled by [Aggregator.read], the page's only view of the aggregator's
// internals; nothing on the per-event path knows about it.
type reading struct {
	targets []targetReading
	// sidecar self-metrics
	events      []uint64 // by schema.AttrEventKind.Values
	rejected    []uint64 // by schema.DecodeReasons
	connections float64
}

// targetReading is one target's cumulative state.
type targetReading struct {
	key       targetKey
	connected bool

	requests     uint64   // requests_finished, every reason and operation
	failed       []uint64 // requests_failed by schema.ErrorTypes, both operations
	promptTokens uint64
	genTokens    uint64
	lost         uint64
	dropped      uint64 // daemon_events_dropped, both reasons

	// constrained decoding (issue 26): constrained requests, those whose
	// output completed the grammar, and tool calls; the mean grammar mask
	// time per token (the mean of picometer_constraint_mask_duration_seconds,
	// one observation per request) and the mean compile time (all kinds),
	// seconds, 0 without an observation
	constrained, constrainedValid, toolCalls uint64
	maskMean, compileMean                    float64

	hasGauges                      bool
	running, waiting, slots, kvUse float64
	kvCached                       float64 // blocks the prefix cache holds
	prefixQueries, prefixHits      uint64  // prompt tokens looked up, found cached
	// time to first token by cache outcome (schema.CacheOutcomes order),
	// both operations: requests and the sum of their TTFTs since the target
	// appeared
	ttftCacheN   [nCache]uint64
	ttftCacheSum [nCache]float64

	specDrafts, specDraftTokens, specAccepted uint64

	// decode phase by batch size (index batch_size-1): steps and seconds
	batchSteps [schema.MaxBatch]uint64
	batchTime  [schema.MaxBatch]float64

	// latency histograms, both operations summed: cumulative bucket counts,
	// the schema bounds then +Inf (filled by readHistograms)
	ttft, itl, tpot []uint64
}

// pageHists are the histogram families the page reads, in targetReading
// order (ttft, itl, tpot).
var pageHists = [3]string{schema.IDTTFT, schema.IDInterTokenLatency, schema.IDTimePerOutputToken}

func (tr *targetReading) hist(i int) *[]uint64 {
	switch i {
	case 0:
		return &tr.ttft
	case 1:
		return &tr.itl
	}
	return &tr.tpot
}

// read fills r with the current state, targets sorted by model then engine.
// withHists also reads the latency histograms (through their families'
// exposition, the text /metrics writes), which the sampler needs and a
// page view does not; sc is its scratch.
func (a *Aggregator) read(r *reading, withHists bool, sc *readScratch) {
	r.events = growU64(r.events, nKinds)
	r.rejected = growU64(r.rejected, nReasons)
	for i, c := range a.self.events {
		r.events[i] = c.c.Get()
	}
	for i, c := range a.self.decodeErrors {
		r.rejected[i] = c.c.Get()
	}
	r.connections = a.self.connections.g.Get()

	a.mu.Lock()
	n := 0
	for _, t := range a.targets {
		if n == len(r.targets) {
			r.targets = append(r.targets, targetReading{})
		}
		tr := &r.targets[n]
		n++
		t.mu.Lock()
		t.readLocked(tr)
		if withHists {
			for op := range t.req {
				rs := &t.req[op]
				for i, h := range [3]*cumHist{rs.hists[schema.HistTTFT], rs.hists[schema.HistInterTokenLatency], rs.hists[schema.HistTimePerOutputToken]} {
					if h != nil {
						sc.names[h.name] = histRef{tr: n - 1, hist: i}
					}
				}
				for _, h := range rs.ttft { // the page's TTFT sums the cache outcomes
					if h != nil {
						sc.names[h.name] = histRef{tr: n - 1, hist: 0}
					}
				}
			}
		}
		t.mu.Unlock()
	}
	r.targets = r.targets[:n]
	a.mu.Unlock()
	if withHists {
		a.readHistograms(r, sc) // before sorting: sc.names holds indexes
	}
	sortReadings(r.targets)
}

func (t *target) readLocked(tr *targetReading) {
	tr.key = t.key
	tr.connected = t.connected > 0
	tr.requests, tr.promptTokens, tr.genTokens = 0, 0, 0
	tr.failed = growU64(tr.failed, nErrTypes)
	clear(tr.failed)
	for op := range t.req {
		rs := &t.req[op]
		for _, c := range rs.finished {
			if c != nil {
				tr.requests += c.c.Get()
			}
		}
		for e, c := range rs.failed {
			if c != nil {
				tr.failed[e] += c.c.Get()
			}
		}
		if rs.promptTokens != nil {
			tr.promptTokens += rs.promptTokens.c.Get()
		}
		if rs.genTokens != nil {
			tr.genTokens += rs.genTokens.c.Get()
		}
	}
	tr.constrained, tr.constrainedValid, tr.toolCalls = 0, 0, 0
	tr.maskMean, tr.compileMean = 0, 0
	if ct := t.tot.Constraints; ct != nil {
		if n := ct.Mask.Count(); n > 0 {
			tr.maskMean = ct.Mask.Sum / float64(n)
		}
		var sum float64
		var n uint64
		for k := range ct.Compile {
			sum, n = sum+ct.Compile[k].Sum, n+ct.Compile[k].Count()
		}
		if n > 0 {
			tr.compileMean = sum / float64(n)
		}
	}
	if c := t.cons; c != nil {
		no := len(schema.ConstraintOutcomes)
		for i, s := range c.requests {
			n := s.c.Get()
			tr.constrained += n
			if schema.ConstraintOutcomes[i%no] == schema.OutcomeValid {
				tr.constrainedValid += n
			}
		}
		for _, s := range c.toolCalls {
			tr.toolCalls += s.c.Get()
		}
	}
	tr.lost = t.lost.c.Get()
	get := func(i int) uint64 {
		if s := t.ints[i]; s != nil {
			return s.c.Get()
		}
		return 0
	}
	tr.dropped = get(eiDroppedQueue) + get(eiDroppedRing)
	tr.prefixQueries, tr.prefixHits = get(eiPrefixQuery), get(eiPrefixHit)
	tr.ttftCacheN, tr.ttftCacheSum = [nCache]uint64{}, [nCache]float64{}
	for op := range t.tot.Ops {
		for c := range t.tot.Ops[op].TTFTCache {
			h := &t.tot.Ops[op].TTFTCache[c]
			tr.ttftCacheN[c] += h.Count()
			tr.ttftCacheSum[c] += h.Sum
		}
	}
	tr.specDrafts = get(eiSpecDrafts)
	tr.specDraftTokens, tr.specAccepted = 0, 0
	for p := range schema.MaxSpecK {
		tr.specDraftTokens += get(eiDraftTokens + p)
		tr.specAccepted += get(eiAccepted + p)
	}
	for n := range schema.MaxBatch {
		tr.batchSteps[n] = get(eiBatchSteps + n) // phase decode is the first
		tr.batchTime[n] = 0
		if s := t.floats[n]; s != nil {
			tr.batchTime[n] = s.c.Get()
		}
	}
	tr.hasGauges = t.gauges[0] != nil
	tr.running, tr.waiting, tr.kvUse, tr.slots, tr.kvCached = 0, 0, 0, 0, 0
	if tr.hasGauges {
		tr.running, tr.waiting = t.gauges[0].g.Get(), t.gauges[1].g.Get()
		tr.kvUse, tr.slots = t.gauges[2].g.Get(), t.gauges[3].g.Get()
		tr.kvCached = t.gauges[4].g.Get()
	}
}

// readScratch is the sampler's reusable state for reading histograms.
type readScratch struct {
	names map[string]histRef // histogram series name → reading slot
	buf   bytes.Buffer
}

type histRef struct{ tr, hist int }

func newReadScratch() *readScratch { return &readScratch{names: map[string]histRef{}} }

// readHistograms reads the TTFT, ITL and time-per-output-token buckets of
// every target from their families' exposition (the same text /metrics
// writes), summing the operations.
func (a *Aggregator) readHistograms(r *reading, sc *readScratch) {
	for hi, id := range pageHists {
		fam := a.reg.family(id)
		nb := len(fam.f.Buckets) + 1
		for i := range r.targets {
			h := r.targets[i].hist(hi)
			*h = growU64(*h, nb)
			clear(*h)
		}
		sc.buf.Reset()
		a.reg.writeFamily(&sc.buf, fam)
		parseBuckets(sc.buf.Bytes(), fam.name, func(series string, i int, v uint64) {
			ref, ok := sc.names[series]
			if !ok || ref.hist != hi || i >= nb {
				return
			}
			(*r.targets[ref.tr].hist(hi))[i] += v
		})
	}
	clear(sc.names)
}

// parseBuckets calls f for every "name_bucket{labels,le="…"} count" line
// of text with the series' own name (name{labels}), the bucket's position
// within its series (the lines of a series come in bound order, +Inf last)
// and the cumulative count.
func parseBuckets(text []byte, name string, f func(series string, i int, v uint64)) {
	prefix := name + "_bucket{"
	var cur string
	pos := 0
	for len(text) > 0 {
		line := text
		if j := bytes.IndexByte(text, '\n'); j >= 0 {
			line, text = text[:j], text[j+1:]
		} else {
			text = nil
		}
		rest, ok := bytes.CutPrefix(line, []byte(prefix))
		if !ok {
			continue
		}
		sp := bytes.LastIndexByte(rest, ' ')
		le := bytes.LastIndex(rest, []byte(`,le="`))
		if sp < 0 || le < 0 || le > sp {
			continue
		}
		v, err := strconv.ParseUint(string(rest[sp+1:]), 10, 64)
		if err != nil {
			continue
		}
		labels := rest[:le]
		if cur == "" || len(cur) != len(name)+len(labels)+2 || cur[len(name)+1:len(cur)-1] != string(labels) {
			cur = name + "{" + string(labels) + "}"
			pos = 0
		}
		f(cur, pos, v)
		pos++
	}
}

func growU64(s []uint64, n int) []uint64 {
	if cap(s) < n {
		return make([]uint64, n)
	}
	return s[:n]
}

func sortReadings(ts []targetReading) {
	for i := 1; i < len(ts); i++ {
		for j := i; j > 0 && lessKey(ts[j].key, ts[j-1].key); j-- {
			ts[j], ts[j-1] = ts[j-1], ts[j]
		}
	}
}

func lessKey(a, b targetKey) bool {
	if c := strings.Compare(a.model, b.model); c != 0 {
		return c < 0
	}
	return a.engine < b.engine
}
