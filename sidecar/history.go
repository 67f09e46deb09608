package sidecar

import (
	"math"
	"sync"
	"time"

	"github.com/picometer/picometer/schema"
)

// History of the status page: fixed ring buffers, filled by a ticker.
const (
	// HistoryStep is how often the sampler reads the aggregation.
	HistoryStep = 5 * time.Second
	// HistoryLen is how many steps a ring holds: 15 minutes.
	HistoryLen = 180
	// QuantileWindow is the sliding window the latency quantiles are
	// computed over, as histogram_quantile(q, rate(…[1m])) would.
	QuantileWindow = time.Minute
	// MaxHistoryTargets bounds the targets that have history (the oldest
	// ones keep theirs; later ones appear with their totals only). Each
	// costs about 30 KiB.
	MaxHistoryTargets = 16

	windowSteps = int(QuantileWindow / HistoryStep)
)

// Fields of a target's ring: one float32 per step each (NaN: no value).
const (
	hReqRate    = iota // requests finished per second
	hErrRate           // requests failed per second, every error type
	hTokRate           // generation tokens per second
	hPromptRate        // prompt tokens per second
	hTTFT50            // seconds
	hTTFT99
	hITL50
	hITL99
	hTPOT50
	hRunning
	hSlots
	hWaiting
	hKV         // 0..1
	hSpecRate   // accepted / drafted tokens
	hSpecLen    // accepted tokens per draft
	hLostRate   // events lost per second
	hDropRate   // events dropped by the daemon per second
	hErrByType0 // + index in schema.ErrorTypes: failed per second
)

var hFields = hErrByType0 + len(schema.ErrorTypes)

// Fields of the sidecar's own ring.
const (
	sEventRate = iota // events applied per second, every kind
	sConnections
	sRejected0 // + index in schema.DecodeReasons: rejected lines per second
)

var sFields = sRejected0 + len(schema.DecodeReasons)

// history keeps the last HistoryLen steps of every shown series. Its
// memory is allocated when a target first appears and is fixed after: a
// ring of HistoryLen×hFields float32 and windowSteps+1 latency bucket
// snapshots per target.
type history struct {
	agg *Aggregator

	mu      sync.Mutex // guards everything below
	times   [HistoryLen]int64
	head    int       // next slot to write
	n       int       // steps written, up to HistoryLen
	last    reading   // the last sample's
	spare   reading   // the one before, reused
	self    []float32 // HistoryLen × sFields
	targets map[targetKey]*targetHistory
	scratch *readScratch
	delta   []uint64
	// scratch of the views
	live     reading
	viewHist []*targetHistory
	out      []byte
}

// targetHistory is one target's rings.
type targetHistory struct {
	vals []float32 // HistoryLen × hFields, aligned with history.times
	seen bool      // present at the last sample
	// the previous reading's counters, for rates
	prev      targetReading
	prevAt    int64
	hasPrev   bool
	window    [][3][]uint64 // windowSteps+1 latency bucket snapshots, a ring
	windowAt  []int64
	windowPos int
}

func newHistory(a *Aggregator) *history {
	h := &history{agg: a, targets: map[targetKey]*targetHistory{}, scratch: newReadScratch()}
	h.self = nanSlice(HistoryLen * sFields)
	return h
}

func nanSlice(n int) []float32 {
	s := make([]float32, n)
	nan := float32(math.NaN())
	for i := range s {
		s[i] = nan
	}
	return s
}

// sample reads the aggregation at now and appends one step to every ring.
func (h *history) sample(now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	prev := h.last
	prevAt := int64(0)
	if h.n > 0 {
		prevAt = h.times[(h.head+HistoryLen-1)%HistoryLen]
	}
	// Two readings, swapped: the previous one's counters give the rates.
	cur := h.spare
	h.agg.read(&cur, true, h.scratch)
	at := now.UnixNano()
	slot := h.head
	h.times[slot] = at

	// the sidecar's own series
	sv := h.self[slot*sFields : (slot+1)*sFields]
	dt := float64(at-prevAt) / 1e9
	nan := float32(math.NaN())
	for i := range sv {
		sv[i] = nan
	}
	sv[sConnections] = float32(cur.connections)
	if h.n > 0 && dt > 0 && prev.events != nil {
		sv[sEventRate] = float32(rate(sum(cur.events), sum(prev.events), dt))
		for i := range cur.rejected {
			sv[sRejected0+i] = float32(rate(cur.rejected[i], prev.rejected[i], dt))
		}
	}

	for _, th := range h.targets {
		th.seen = false
	}
	for i := range cur.targets {
		tr := &cur.targets[i]
		th := h.targets[tr.key]
		if th == nil {
			if len(h.targets) >= MaxHistoryTargets {
				continue
			}
			th = newTargetHistory()
			h.targets[tr.key] = th
			if h.n > 0 {
				// New since the last sample: its series were born at zero
				// in between, as rate() over /metrics would see them.
				th.prevAt, th.hasPrev = prevAt, true
				th.windowAt[0], th.windowPos = prevAt, 1
			}
		}
		th.seen = true
		h.sampleTarget(th, tr, slot, at)
	}
	for k, th := range h.targets {
		if !th.seen {
			// expired from the aggregation: forget it
			delete(h.targets, k)
		}
	}
	h.last, h.spare = cur, prev
	h.head = (h.head + 1) % HistoryLen
	h.n = min(h.n+1, HistoryLen)
}

func newTargetHistory() *targetHistory {
	th := &targetHistory{vals: nanSlice(HistoryLen * hFields), window: make([][3][]uint64, windowSteps+1),
		windowAt: make([]int64, windowSteps+1)}
	th.prev.failed = make([]uint64, len(schema.ErrorTypes))
	for i := range th.window {
		for j, id := range pageHists {
			th.window[i][j] = make([]uint64, len(schema.Lookup(id).Buckets)+1)
		}
	}
	return th
}

func (h *history) sampleTarget(th *targetHistory, tr *targetReading, slot int, at int64) {
	v := th.vals[slot*hFields : (slot+1)*hFields]
	nan := float32(math.NaN())
	for i := range v {
		v[i] = nan
	}
	if tr.hasGauges {
		v[hRunning], v[hWaiting], v[hSlots], v[hKV] = float32(tr.running), float32(tr.waiting), float32(tr.slots), float32(tr.kvUse)
	}
	p := &th.prev
	if dt := float64(at-th.prevAt) / 1e9; th.hasPrev && dt > 0 {
		v[hReqRate] = float32(rate(tr.requests, p.requests, dt))
		v[hErrRate] = float32(rate(sum(tr.failed), sum(p.failed), dt))
		for e := range tr.failed {
			v[hErrByType0+e] = float32(rate(tr.failed[e], p.failed[e], dt))
		}
		v[hTokRate] = float32(rate(tr.genTokens, p.genTokens, dt))
		v[hPromptRate] = float32(rate(tr.promptTokens, p.promptTokens, dt))
		v[hLostRate] = float32(rate(tr.lost, p.lost, dt))
		v[hDropRate] = float32(rate(tr.dropped, p.dropped, dt))
		if dd := delta(tr.specDraftTokens, p.specDraftTokens); dd > 0 {
			v[hSpecRate] = float32(float64(delta(tr.specAccepted, p.specAccepted)) / float64(dd))
		}
		if dd := delta(tr.specDrafts, p.specDrafts); dd > 0 {
			v[hSpecLen] = float32(float64(delta(tr.specAccepted, p.specAccepted)) / float64(dd))
		}
	}
	// latency quantiles over the window: this reading minus the oldest
	// snapshot kept no more than QuantileWindow ago
	w := &th.window[th.windowPos]
	for j := range pageHists {
		copy(w[j], *tr.hist(j))
	}
	th.windowAt[th.windowPos] = at
	oldest := -1
	for i := range th.window {
		if i != th.windowPos && th.windowAt[i] != 0 && at-th.windowAt[i] <= int64(QuantileWindow+HistoryStep/2) &&
			(oldest < 0 || th.windowAt[i] < th.windowAt[oldest]) {
			oldest = i
		}
	}
	if oldest >= 0 {
		for j, id := range pageHists {
			now, then := w[j], th.window[oldest][j]
			h.delta = growU64(h.delta, len(now))
			bucketDelta(h.delta, now, then)
			bounds := schema.Lookup(id).Buckets
			q50 := float32(histogramQuantile(0.5, bounds, h.delta))
			q99 := float32(histogramQuantile(0.99, bounds, h.delta))
			switch j {
			case 0:
				v[hTTFT50], v[hTTFT99] = q50, q99
			case 1:
				v[hITL50], v[hITL99] = q50, q99
			case 2:
				v[hTPOT50] = q50
			}
		}
	}
	th.windowPos = (th.windowPos + 1) % len(th.window)

	// keep this reading's counters for the next rates
	p.requests, p.genTokens, p.promptTokens, p.lost, p.dropped = tr.requests, tr.genTokens, tr.promptTokens, tr.lost, tr.dropped
	p.specDrafts, p.specDraftTokens, p.specAccepted = tr.specDrafts, tr.specDraftTokens, tr.specAccepted
	p.failed = growU64(p.failed, len(tr.failed))
	copy(p.failed, tr.failed)
	th.prevAt, th.hasPrev = at, true
}

// rate is (now − then)/dt, or now/dt after a reset (now < then).
func rate(now, then uint64, dt float64) float64 {
	return float64(delta(now, then)) / dt
}

func delta(now, then uint64) uint64 {
	if now < then {
		return now
	}
	return now - then
}

func sum(s []uint64) uint64 {
	var n uint64
	for _, v := range s {
		n += v
	}
	return n
}
