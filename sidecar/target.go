package sidecar

import (
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/picometer/picometer/schema"
)

// This file holds targets and boots: a target is the series of one (model,
// engine), a boot one daemon run that feeds it, with its sequence numbers,
// its last cumulative snapshot and the gauges and info series that follow
// the boots that speak. aggregate_test.go covers it.

// MaxDeadBoots is max_dead_boots' default: the disconnected boots a live
// target remembers; older ones are folded into the target's retired totals
// (if such a boot came back, its counters would be counted twice).
const MaxDeadBoots = 16

type targetKey struct{ model, engine string }

var (
	nOps      = len(schema.AttrOperation.Values)
	nFinish   = len(schema.FinishReasons)
	nErrTypes = len(schema.ErrorTypes)
	nPhases   = len(schema.AttrPhase.Values)
	nKinds    = len(schema.AttrEventKind.Values)
	nReasons  = len(schema.DecodeReasons)
)

// nCache is the number of prefix-cache outcomes (schema.CacheOutcomes).
const nCache = 3

func init() {
	if len(schema.CacheOutcomes) != nCache {
		panic("BUG: sidecar: nCache is not len(schema.CacheOutcomes)")
	}
}

// target is the state of one (model, engine): its boots and its series.
type target struct {
	a         *Aggregator
	key       targetKey
	own       *owner       // its series in the registry
	base      []label      // model, engine
	lastEvent atomic.Int64 // unix nanoseconds of the last event (sidecar clock)

	mu        sync.Mutex // guards the fields below and the histogram shadows of series
	series    []series
	boots     map[string]*boot
	order     []*boot // boots in arrival order: sums over them are deterministic
	speak     []*boot // scratch of speaking
	connected int
	idleSince time.Time

	lost      *counterSeries
	recovered *counterSeries
	age       *gaugeSeries
	// tot is the target's cumulative request totals: the sum over its boots
	// (and the boots it forgot) of what each contributed, which only grows.
	// The request histograms' series read it; counters are set from it.
	tot     schema.TotalsBody
	req     []reqSeries  // by operation
	cons    *consSeries  // constrained-decoding series (apply_constraint.go); nil until needed
	steps   []stepSeries // by phase
	ints    [ecInts]*counterSeries
	floats  [ecFloats]*floatCounterSeries
	retInts [ecInts]int64 // folded totals of forgotten boots
	retFlts [ecFloats]float64
	gauges  [len(gaugeIDs)]*gaugeSeries // running, waiting, kv usage, slots, prefix-cached blocks
	info    map[infoKey]*gaugeSeries

	// scratch for engine snapshots
	newInts    [ecInts]int64
	newFlts    [ecFloats]float64
	newPresent [ecInts]bool
}

type reqSeries struct {
	hists                   [schema.NumRequestHists]*cumHist // by schema.Hist* index; nil at HistTTFT, which ttft holds
	ttft                    [nCache]*cumHist                 // the time to first token by cache outcome (schema.CacheOutcomes)
	durationErr             []*cumHist                       // by error type
	promptTokens, genTokens *counterSeries
	finished                []*counterSeries // by finish reason
	failed                  []*counterSeries // by error type
}

type stepSeries struct{ duration, tokens, batchSize *histSeries }

type infoKey struct {
	bMax, contextLength, blockSize, specK int
	version                               string
}

// boot is one run of a daemon.
type boot struct {
	id          string
	t           *target
	cfg         infoKey
	lastSeq     uint64
	conns       int
	lastHello   uint64 // Aggregator.stamp of the last hello
	hasSnap     bool
	snapAt      uint64 // Aggregator.stamp of the last snapshot
	running     int
	waiting     int
	slots       int
	kvUsage     float64
	kvUsed      int
	kvTotal     int
	kvCached    int
	ints        [ecInts]int64 // last snapshot's cumulative counters
	flts        [ecFloats]float64
	disconnects time.Time
	// tot is what this boot contributed to the target's request totals
	// (nil before its first request or totals event), and totalsSeq the seq
	// of the last totals event applied: request events up to it are in tot.
	tot       *schema.TotalsBody
	totalsSeq uint64
}

func (a *Aggregator) newTarget(key targetKey) *target {
	now := a.now()
	t := &target{a: a, key: key, boots: map[string]*boot{}, info: map[infoKey]*gaugeSeries{},
		tot:  schema.NewTotals(),
		base: []label{{schema.AttrModel, key.model}, {schema.AttrEngine, key.engine}},
		req:  make([]reqSeries, nOps), steps: make([]stepSeries, nPhases), idleSince: now}
	for i := range t.req {
		t.req[i].durationErr = make([]*cumHist, nErrTypes)
		t.req[i].finished = make([]*counterSeries, nFinish)
		t.req[i].failed = make([]*counterSeries, nErrTypes)
	}
	t.own = a.reg.newOwner(string(newMeta(nil, &family{}, now, t.base).name))
	t.lastEvent.Store(now.UnixNano())
	t.lost = t.add(t.own.newCounter(schema.IDSidecarEventsLost, now, t.base...)).(*counterSeries)
	t.recovered = t.add(t.own.newCounter(schema.IDSidecarEventsRecovered, now, t.base...)).(*counterSeries)
	t.age = t.add(t.own.newGauge(schema.IDSidecarLastEventAge, now, func() float64 {
		return float64(a.now().UnixNano()-t.lastEvent.Load()) / 1e9
	}, t.base...)).(*gaugeSeries)
	t.startRequestSeries()
	return t
}

// startRequestSeries creates the target's request series that every daemon
// has, at zero, so that the first requests after a daemon connects show up
// in rate() and increase() (a series born at its first observation has no
// earlier sample to rise from). That is, for both operations: every request
// histogram but the request duration of failures, the time to first token
// once per cache outcome; the token counters; requests_finished for every
// finish reason and requests_failed for every error type. Per target that
// is 22 histograms and 34 counters (about 550 exposition lines; the cache
// outcomes add 100 of them, and the first hit after a restart must show in
// rate() as much as the first miss). The request duration with error.type
// (22 histograms, 550 lines) is left to the first failure of each kind:
// failure rates come from requests_failed, which starts at zero.
func (t *target) startRequestSeries() {
	for op, name := range schema.AttrOperation.Values {
		rs := &t.req[op]
		opl := label{schema.AttrOperation, name}
		for h, famID := range schema.RequestHistFamilies {
			if h == schema.HistTTFT {
				for c, outcome := range schema.CacheOutcomes {
					rs.ttft[c] = t.cumHist(famID, &t.tot.Ops[op].TTFTCache[c], opl, label{schema.AttrCache, outcome})
				}
				continue
			}
			rs.hists[h] = t.cumHist(famID, &t.tot.Ops[op].Hists[h], opl)
		}
		t.counter(&rs.promptTokens, schema.IDPromptTokens, opl)
		t.counter(&rs.genTokens, schema.IDGenerationTokens, opl)
		for f, fr := range schema.FinishReasons {
			t.counter(&rs.finished[f], schema.IDRequestsFinished, opl, label{schema.AttrFinishReason, fr})
		}
		for e, et := range schema.ErrorTypes {
			t.counter(&rs.failed[e], schema.IDRequestsFailed, opl, label{schema.AttrErrorType, et})
		}
	}
}

func (t *target) add(s series) series {
	t.series = append(t.series, s)
	return s
}

func (t *target) drop(s series) {
	s.unregister()
	if i := slices.Index(t.series, s); i >= 0 {
		t.series = slices.Delete(t.series, i, i+1)
	}
}

func (t *target) labels(extra ...label) []label {
	return append(append(make([]label, 0, len(t.base)+len(extra)), t.base...), extra...)
}

func (t *target) newHist(famID string, extra ...label) *histSeries {
	return t.add(t.own.newHist(famID, t.a.now(), t.a.shadow, t.labels(extra...)...)).(*histSeries)
}

func (t *target) newCounter(famID string, extra ...label) *counterSeries {
	return t.add(t.own.newCounter(famID, t.a.now(), t.labels(extra...)...)).(*counterSeries)
}

func (t *target) newGauge(famID string, extra ...label) *gaugeSeries {
	return t.add(t.own.newGauge(famID, t.a.now(), nil, t.labels(extra...)...)).(*gaugeSeries)
}

// sequence checks seq against the connection's last one: a repeat is
// stale_seq, a gap adds the missing events to events_lost, and a jump of
// more than schema.MaxCumulative (no daemon writes that many events) is
// invalid_field. A connection's first event is checked against the boot's
// last event on any connection: a gap there (events written to a connection
// that broke) is lost too, but a lower number or an implausible jump only
// sets the connection's baseline. So the first event the sidecar sees of a
// boot sets the baseline (what came before went to a previous sidecar, or
// was counted by the daemon as dropped), and a forged connection that
// claimed the boot with a huge seq while its daemon was away can neither
// make the daemon's own events stale nor count 2^64 events lost. The caller
// holds the target's lock.
func (c *Conn) sequence(seq uint64) error {
	b := c.boot
	last := c.lastSeq
	switch {
	case last == 0:
		last = b.lastSeq
		if seq <= last || seq-last > schema.MaxCumulative {
			last = 0
		}
	case seq <= last:
		return &schema.DecodeError{Reason: schema.ReasonStaleSeq,
			Msg: fmt.Sprintf("seq %d of boot %q is not after %d", seq, b.id, last)}
	case seq-last > schema.MaxCumulative:
		return invalidField("seq %d of boot %q jumps more than %d past %d", seq, b.id, int64(schema.MaxCumulative), last)
	}
	if last != 0 && seq > last+1 {
		b.t.lost.addSat(seq - last - 1)
	}
	c.lastSeq, b.lastSeq = seq, seq
	return nil
}

func indexOf(values []string, v string) int {
	for i, x := range values {
		if x == v {
			return i
		}
	}
	panic("BUG: sidecar: value " + strconv.Quote(v) + " passed validation but is not in its set")
}

// hist returns *slot, creating the series on first use.
func (t *target) hist(slot **histSeries, famID string, extra ...label) *histSeries {
	if h := *slot; h != nil {
		return h
	}
	*slot = t.newHist(famID, extra...)
	return *slot
}

func (t *target) counter(slot **counterSeries, famID string, extra ...label) *counterSeries {
	if c := *slot; c != nil {
		return c
	}
	*slot = t.newCounter(famID, extra...)
	return *slot
}

// Gauge indexes in target.gauges.
var gaugeIDs = [5]string{schema.IDRequestsRunning, schema.IDRequestsWaiting, schema.IDKVCacheUsage, schema.IDSlots, schema.IDKVBlocksCached}

// speaking returns the boots whose state the target's gauges and info show:
// the connected ones, or when none is connected the one for which latest
// says true against every other.
func (t *target) speaking(ok func(*boot) bool, latest func(a, b *boot) bool) []*boot {
	out := t.speak[:0]
	var last *boot
	for _, b := range t.order {
		if !ok(b) {
			continue
		}
		if b.conns > 0 {
			out = append(out, b)
		}
		if last == nil || latest(b, last) {
			last = b
		}
	}
	if len(out) == 0 && last != nil {
		out = append(out, last)
	}
	t.speak = out
	return out
}

// refreshGauges recomputes running, waiting, slots and cached blocks (sums) and the
// KV-cache usage (a single boot's own value; for several, used blocks over
// total blocks).
func (t *target) refreshGauges() {
	bs := t.speaking(func(b *boot) bool { return b.hasSnap }, func(a, b *boot) bool { return a.snapAt > b.snapAt })
	if len(bs) == 0 {
		return
	}
	var v [len(gaugeIDs)]float64
	used, total := 0, 0
	for _, b := range bs {
		v[0] += float64(b.running)
		v[1] += float64(b.waiting)
		v[2] += b.kvUsage
		v[3] += float64(b.slots)
		v[4] += float64(b.kvCached)
		used += b.kvUsed
		total += b.kvTotal
	}
	if len(bs) > 1 {
		if total > 0 {
			v[2] = float64(used) / float64(total)
		} else {
			v[2] /= float64(len(bs))
		}
	}
	for i, id := range gaugeIDs {
		if t.gauges[i] == nil {
			t.gauges[i] = t.newGauge(id)
		}
		t.gauges[i].g.Set(v[i])
	}
}

// refreshInfo keeps one engine_info series per configuration of the
// speaking boots.
func (t *target) refreshInfo() {
	bs := t.speaking(func(*boot) bool { return true }, func(a, b *boot) bool { return a.lastHello > b.lastHello })
	want := make(map[infoKey]bool, len(bs))
	for _, b := range bs {
		want[b.cfg] = true
	}
	for k, s := range t.info {
		if !want[k] {
			t.drop(s)
			delete(t.info, k)
		}
	}
	for k := range want {
		if t.info[k] != nil {
			continue
		}
		g := t.newGauge(schema.IDEngineInfo,
			label{schema.AttrBMax, strconv.Itoa(k.bMax)}, label{schema.AttrContextLength, strconv.Itoa(k.contextLength)},
			label{schema.AttrBlockSize, strconv.Itoa(k.blockSize)}, label{schema.AttrSpecK, strconv.Itoa(k.specK)},
			label{schema.AttrVersion, k.version})
		g.g.Set(1)
		t.info[k] = g
	}
}
