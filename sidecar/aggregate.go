package sidecar

import (
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/picometer/picometer/schema"
)

// Aggregator turns decoded events into exported series, exactly.
//
// Series are keyed by the daemon's model and engine (its hello): a target.
// A target has one or more boots (daemon runs, by boot id); several daemons
// that share a model and engine add up into the same series. Per boot the
// aggregator keeps the last sequence number (gaps count as lost events,
// repeats are rejected as stale_seq) and the last engine snapshot's
// cumulative counters, so that an exported engine counter is the sum over
// boots of their cumulative values: it never decreases across restarts, and
// for a single boot it equals the daemon's own value bit for bit.
//
// Request events are applied as they come (one observation per histogram,
// one per ITL gap). Gauges follow the target's connected boots (or, when none
// is connected, the boot that reported last). A target whose connections have
// all closed keeps every series until [Aggregator.Expire] removes it after
// ExpireAfter.
type Aggregator struct {
	reg         *registry
	now         func() time.Time
	shadow      bool
	expireAfter time.Duration
	log         *slog.Logger
	self        *selfMetrics

	mu      sync.Mutex // guards targets and boots; taken before a target's lock
	targets map[targetKey]*target
	boots   map[string]*boot
	// stamp orders hellos and snapshots (the clock may stand still).
	stamp atomic.Uint64
}

// AggregatorOptions configures NewAggregator.
type AggregatorOptions struct {
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// OTLP keeps every histogram's observations readable by the OTLP
	// producer ([Aggregator.Producer]); without it the producer reports no
	// histograms.
	OTLP bool
	// ExpireAfter is how long a target's series outlive its last connection
	// (0: DefaultConfig's).
	ExpireAfter time.Duration
	// Logger (nil: slog.Default()).
	Logger *slog.Logger
}

// NewAggregator returns an aggregator with no targets and its self-metrics
// registered.
func NewAggregator(opt AggregatorOptions) *Aggregator {
	a := &Aggregator{reg: newRegistry(), now: opt.Now, shadow: opt.OTLP, expireAfter: opt.ExpireAfter,
		log: opt.Logger, targets: map[targetKey]*target{}, boots: map[string]*boot{}}
	if a.now == nil {
		a.now = time.Now
	}
	if a.expireAfter <= 0 {
		a.expireAfter = time.Duration(DefaultConfig().ExpireAfter)
	}
	if a.log == nil {
		a.log = slog.Default()
	}
	a.self = newSelfMetrics(a.reg, a.now)
	return a
}

// MaxDeadBoots bounds the disconnected boots a live target remembers; older
// ones are folded into the target's retired totals (if such a boot came back,
// its counters would be counted twice).
const MaxDeadBoots = 16

type targetKey struct{ model, engine string }

// Indexes of engine-snapshot counters, per boot and per target.
const (
	nBatchPhases   = 3 // schema.AttrBatchPhase.Values: decode, draft, verify
	eiPreemptions  = 0
	eiSpecDrafts   = 1
	eiDraftTokens  = 2                               // + position
	eiAccepted     = eiDraftTokens + schema.MaxSpecK // + position
	eiDroppedQueue = eiAccepted + schema.MaxSpecK
	eiDroppedRing  = eiDroppedQueue + 1
	eiBatchSteps   = eiDroppedRing + 1 // + phase*MaxBatch + batch_size-1
	ecInts         = eiBatchSteps + nBatchPhases*schema.MaxBatch
	ecFloats       = nBatchPhases * schema.MaxBatch // batch time: phase*MaxBatch + batch_size-1
)

var (
	nOps      = len(schema.AttrOperation.Values)
	nFinish   = len(schema.FinishReasons)
	nErrTypes = len(schema.ErrorTypes)
	nPhases   = len(schema.AttrPhase.Values)
	nKinds    = len(schema.AttrEventKind.Values)
	nReasons  = len(schema.DecodeReasons)
)

// target is the state of one (model, engine): its boots and its series.
type target struct {
	a         *Aggregator
	key       targetKey
	base      []label      // model, engine
	lastEvent atomic.Int64 // unix nanoseconds of the last event (sidecar clock)

	mu        sync.Mutex // guards the fields below and the histogram shadows of series
	series    []series
	boots     map[string]*boot
	order     []*boot // boots in arrival order: sums over them are deterministic
	speak     []*boot // scratch of speaking
	connected int
	idleSince time.Time

	lost    *counterSeries
	age     *gaugeSeries
	req     []reqSeries  // by operation
	steps   []stepSeries // by phase
	ints    [ecInts]*counterSeries
	floats  [ecFloats]*floatCounterSeries
	retInts [ecInts]int64 // folded totals of forgotten boots
	retFlts [ecFloats]float64
	gauges  [4]*gaugeSeries // running, waiting, kv usage, slots
	info    map[infoKey]*gaugeSeries

	// scratch for engine snapshots
	newInts    [ecInts]int64
	newFlts    [ecFloats]float64
	newPresent [ecInts]bool
}

type reqSeries struct {
	ttft, tpot, duration, itl, queue, prefill, decode, promptLen, genLen *histSeries
	durationErr                                                          []*histSeries // by error type
	promptTokens, genTokens                                              *counterSeries
	finished                                                             []*counterSeries // by finish reason
	failed                                                               []*counterSeries // by error type
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
	ints        [ecInts]int64 // last snapshot's cumulative counters
	flts        [ecFloats]float64
	disconnects time.Time
}

func (a *Aggregator) newTarget(key targetKey) *target {
	now := a.now()
	t := &target{a: a, key: key, boots: map[string]*boot{}, info: map[infoKey]*gaugeSeries{},
		base: []label{{schema.AttrModel, key.model}, {schema.AttrEngine, key.engine}},
		req:  make([]reqSeries, nOps), steps: make([]stepSeries, nPhases), idleSince: now}
	for i := range t.req {
		t.req[i].durationErr = make([]*histSeries, nErrTypes)
		t.req[i].finished = make([]*counterSeries, nFinish)
		t.req[i].failed = make([]*counterSeries, nErrTypes)
	}
	t.lastEvent.Store(now.UnixNano())
	t.lost = t.add(a.reg.newCounter(schema.IDSidecarEventsLost, now, t.base...)).(*counterSeries)
	t.age = t.add(a.reg.newGauge(schema.IDSidecarLastEventAge, now, func() float64 {
		return float64(a.now().UnixNano()-t.lastEvent.Load()) / 1e9
	}, t.base...)).(*gaugeSeries)
	t.startRequestSeries()
	return t
}

// startRequestSeries creates the target's request series that every daemon
// has, at zero, so that the first requests after a daemon connects show up
// in rate() and increase() (a series born at its first observation has no
// earlier sample to rise from). That is, for both operations: every request
// histogram but the request duration of failures; the token counters;
// requests_finished for every finish reason and requests_failed for every
// error type. Per target that is 18 histograms and 34 counters (about 450
// exposition lines). The request duration with error.type (22 histograms,
// 550 lines) is left to the first failure of each kind: failure rates come
// from requests_failed, which starts at zero.
func (t *target) startRequestSeries() {
	for op, name := range schema.AttrOperation.Values {
		rs := &t.req[op]
		opl := label{schema.AttrOperation, name}
		for _, h := range []struct {
			slot  **histSeries
			famID string
		}{
			{&rs.ttft, schema.IDTTFT}, {&rs.tpot, schema.IDTimePerOutputToken}, {&rs.duration, schema.IDRequestDuration},
			{&rs.itl, schema.IDInterTokenLatency}, {&rs.queue, schema.IDQueueDuration}, {&rs.prefill, schema.IDPrefillDuration},
			{&rs.decode, schema.IDDecodeDuration}, {&rs.promptLen, schema.IDRequestPromptLength}, {&rs.genLen, schema.IDRequestGenLength},
		} {
			t.hist(h.slot, h.famID, opl)
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
	return t.add(t.a.reg.newHist(famID, t.a.now(), t.a.shadow, t.labels(extra...)...)).(*histSeries)
}

func (t *target) newCounter(famID string, extra ...label) *counterSeries {
	return t.add(t.a.reg.newCounter(famID, t.a.now(), t.labels(extra...)...)).(*counterSeries)
}

func (t *target) newGauge(famID string, extra ...label) *gaugeSeries {
	return t.add(t.a.reg.newGauge(famID, t.a.now(), nil, t.labels(extra...)...)).(*gaugeSeries)
}

// Conn is one daemon connection's view of the aggregator. Its methods are
// called from the connection's goroutine only.
type Conn struct {
	a    *Aggregator
	boot *boot // bound by the connection's hello
	// now is the time events are stamped with (the last event age): the
	// caller sets it once per read from the socket, not per event.
	now int64
}

// SetNow sets the time that the following events were received.
func (c *Conn) SetNow(t time.Time) { c.now = t.UnixNano() }

// Connect registers a new connection.
func (a *Aggregator) Connect() *Conn {
	a.self.connections.g.Add(1)
	return &Conn{a: a, now: a.now().UnixNano()}
}

// Close unregisters the connection; its boot's series stay until expiry.
func (c *Conn) Close() {
	c.a.self.connections.g.Add(-1)
	if b := c.boot; b != nil {
		b.t.mu.Lock()
		c.unbindLocked()
		b.t.mu.Unlock()
	}
}

func (c *Conn) unbindLocked() {
	b := c.boot
	t := b.t
	now := t.a.now()
	c.boot = nil
	b.conns--
	t.connected--
	if b.conns == 0 {
		b.disconnects = now
	}
	if t.connected == 0 {
		t.idleSince = now
	}
	t.refreshGauges()
	t.refreshInfo()
}

// Reject counts a line the connection rejected, by its reason.
func (c *Conn) Reject(err error) {
	c.a.self.reject(err)
}

func noHello(format string, args ...any) *schema.DecodeError {
	return &schema.DecodeError{Reason: schema.ReasonNoHello, Msg: fmt.Sprintf(format, args...)}
}

// Apply applies one decoded event. It returns a *schema.DecodeError when the
// event is rejected (no_hello, stale_seq, invalid_field); the caller counts
// it with Reject. A stale hello still binds the connection (its identity is
// valid), but is counted as stale_seq.
func (c *Conn) Apply(ev *schema.Event) error {
	if ev.Kind == schema.KindHello {
		return c.hello(ev)
	}
	b := c.boot
	if b == nil {
		return noHello("%s event (seq %d) before the connection's hello", ev.Kind, ev.Seq)
	}
	if ev.Boot != b.id {
		return noHello("%s event of boot %q on a connection whose hello was boot %q", ev.Kind, ev.Boot, b.id)
	}
	t := b.t
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.sequence(b, ev.Seq); err != nil {
		return err
	}
	t.lastEvent.Store(c.now)
	if ev.Kind == schema.KindRequest {
		t.applyRequest(&ev.RequestBody)
		t.a.self.events[kindRequest].c.Inc()
		return nil
	}
	if err := t.applyEngine(b, &ev.EngineBody); err != nil {
		return err
	}
	t.a.self.events[kindEngine].c.Inc()
	return nil
}

// Indexes of schema.AttrEventKind.Values.
const (
	kindHello = iota
	kindRequest
	kindEngine
)

// Skip notes the sequence number of an event that was rejected but whose
// header was read (invalid_field, unknown_kind): it arrived, so it must not
// count as lost when the next event comes. Only the very next number is
// taken: a rejected line is not trusted to move the sequence further (a
// bogus seq would make every later event stale).
func (c *Conn) Skip(ev *schema.Event) {
	b := c.boot
	if b == nil || ev.Boot != b.id {
		return
	}
	b.t.mu.Lock()
	if b.lastSeq != 0 && ev.Seq == b.lastSeq+1 {
		b.lastSeq = ev.Seq
	}
	b.t.mu.Unlock()
}

// sequence checks seq against the boot's last one: a repeat is stale_seq,
// a gap adds the missing events to events_lost. The first event the sidecar
// sees of a boot sets the baseline (what came before went to a previous
// sidecar, or was counted by the daemon as dropped).
func (t *target) sequence(b *boot, seq uint64) error {
	if seq <= b.lastSeq {
		return &schema.DecodeError{Reason: schema.ReasonStaleSeq,
			Msg: fmt.Sprintf("seq %d of boot %q is not after %d", seq, b.id, b.lastSeq)}
	}
	if b.lastSeq != 0 && seq > b.lastSeq+1 {
		t.lost.c.AddInt64(int64(seq - b.lastSeq - 1))
	}
	b.lastSeq = seq
	return nil
}

func (c *Conn) hello(ev *schema.Event) error {
	a := c.a
	key := targetKey{ev.Model, ev.Engine}
	a.mu.Lock()
	defer a.mu.Unlock()
	b := a.boots[ev.Boot]
	if b != nil && b.t.key != key {
		return invalidField("boot %q said hello before as model %q engine %q, now as model %q engine %q",
			ev.Boot, b.t.key.model, b.t.key.engine, ev.Model, ev.Engine)
	}
	if c.boot != nil && c.boot != b {
		old := c.boot.t
		old.mu.Lock()
		c.unbindLocked()
		old.mu.Unlock()
	}
	t := a.targets[key]
	if t == nil {
		key = targetKey{strings.Clone(ev.Model), strings.Clone(ev.Engine)}
		t = a.newTarget(key)
		a.targets[key] = t
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if b == nil {
		b = &boot{id: strings.Clone(ev.Boot), t: t}
		t.boots[b.id] = b
		t.order = append(t.order, b)
		a.boots[b.id] = b
	}
	now := a.now()
	b.cfg = infoKey{ev.Config.BMax, ev.Config.ContextLength, ev.Config.BlockSize, ev.Config.SpecK, strings.Clone(ev.Daemon)}
	b.lastHello = a.stamp.Add(1)
	if c.boot != b {
		c.boot = b
		b.conns++
		t.connected++
	}
	t.lastEvent.Store(now.UnixNano())
	t.refreshInfo()
	t.refreshGauges()
	if err := t.sequence(b, ev.Seq); err != nil {
		return err
	}
	a.self.events[kindHello].c.Inc()
	return nil
}

func seconds(us int64) float64 { return float64(us) / 1e6 }

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

// applyRequest feeds one finished request into the request families.
func (t *target) applyRequest(r *schema.RequestBody) {
	op := indexOf(schema.AttrOperation.Values, r.Operation)
	rs := &t.req[op]
	opl := label{schema.AttrOperation, r.Operation}
	if r.AdmittedUS >= 0 {
		t.hist(&rs.queue, schema.IDQueueDuration, opl).observe(seconds(r.AdmittedUS))
	}
	if r.FirstTokenUS >= 0 {
		t.hist(&rs.ttft, schema.IDTTFT, opl).observe(seconds(r.FirstTokenUS))
		if r.AdmittedUS >= 0 {
			t.hist(&rs.prefill, schema.IDPrefillDuration, opl).observe(seconds(r.FirstTokenUS - r.AdmittedUS))
		}
		t.hist(&rs.decode, schema.IDDecodeDuration, opl).observe(seconds(r.FinishUS - r.FirstTokenUS))
		if r.CompletionTokens >= 2 {
			t.hist(&rs.tpot, schema.IDTimePerOutputToken, opl).
				observe(seconds(r.LastTokenUS-r.FirstTokenUS) / float64(r.CompletionTokens-1))
		}
	}
	if len(r.ITLUS) > 0 {
		t.hist(&rs.itl, schema.IDInterTokenLatency, opl).observeMicros(r.ITLUS)
	}
	errType := ""
	if r.FinishReason == schema.FinishError || r.FinishReason == schema.FinishAbort {
		errType = r.ErrorType
		if errType == "" {
			errType = schema.ErrOther
		}
	}
	if errType == "" {
		t.hist(&rs.duration, schema.IDRequestDuration, opl).observe(seconds(r.FinishUS))
	} else {
		e := indexOf(schema.ErrorTypes, errType)
		t.hist(&rs.durationErr[e], schema.IDRequestDuration, opl, label{schema.AttrErrorType, errType}).observe(seconds(r.FinishUS))
		t.counter(&rs.failed[e], schema.IDRequestsFailed, opl, label{schema.AttrErrorType, errType}).c.Inc()
	}
	t.counter(&rs.promptTokens, schema.IDPromptTokens, opl).c.AddInt64(int64(r.PromptTokens))
	t.counter(&rs.genTokens, schema.IDGenerationTokens, opl).c.AddInt64(int64(r.CompletionTokens))
	if r.AdmittedUS >= 0 {
		t.hist(&rs.promptLen, schema.IDRequestPromptLength, opl).observe(float64(r.PromptTokens))
		t.hist(&rs.genLen, schema.IDRequestGenLength, opl).observe(float64(r.CompletionTokens))
	}
	f := indexOf(schema.FinishReasons, r.FinishReason)
	t.counter(&rs.finished[f], schema.IDRequestsFinished, opl, label{schema.AttrFinishReason, r.FinishReason}).c.Inc()
}

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
			v += ob.ints[i]
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
			s = t.add(t.a.reg.newFloatCounter(schema.IDBatchTime, t.a.now(), t.labels(batchLabels(i)...)...)).(*floatCounterSeries)
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
	b.kvUsage, b.kvUsed, b.kvTotal = e.KVCacheUsage, e.KVBlocksUsed, e.KVBlocksTotal
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
	}
	i -= eiBatchSteps
	return fmt.Sprintf("%s count{batch_size=%d}", batchFields[i/schema.MaxBatch], i%schema.MaxBatch+1)
}

func floatName(i int) string {
	return fmt.Sprintf("%s sum{batch_size=%d}", batchFields[i/schema.MaxBatch], i%schema.MaxBatch+1)
}

// Gauge indexes in target.gauges.
var gaugeIDs = [4]string{schema.IDRequestsRunning, schema.IDRequestsWaiting, schema.IDKVCacheUsage, schema.IDSlots}

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

// refreshGauges recomputes running, waiting and slots (sums) and the
// KV-cache usage (a single boot's own value; for several, used blocks over
// total blocks).
func (t *target) refreshGauges() {
	bs := t.speaking(func(b *boot) bool { return b.hasSnap }, func(a, b *boot) bool { return a.snapAt > b.snapAt })
	if len(bs) == 0 {
		return
	}
	var v [4]float64
	used, total := 0, 0
	for _, b := range bs {
		v[0] += float64(b.running)
		v[1] += float64(b.waiting)
		v[2] += b.kvUsage
		v[3] += float64(b.slots)
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

// Expire removes every target whose connections all closed ExpireAfter ago
// or earlier, and folds the oldest disconnected boots of live targets beyond
// MaxDeadBoots into their retired totals. It returns the targets removed.
func (a *Aggregator) Expire(now time.Time) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	removed := 0
	for key, t := range a.targets {
		t.mu.Lock()
		if t.connected == 0 && now.Sub(t.idleSince) >= a.expireAfter {
			for _, s := range t.series {
				s.unregister()
			}
			t.series = nil
			for id := range t.boots {
				delete(a.boots, id)
			}
			delete(a.targets, key)
			removed++
			a.log.Info("daemon series expired", "model", key.model, "engine", key.engine)
		} else {
			t.foldDeadBoots()
		}
		t.mu.Unlock()
	}
	return removed
}

func (t *target) foldDeadBoots() {
	for {
		var dead []*boot
		for _, b := range t.order {
			if b.conns == 0 {
				dead = append(dead, b)
			}
		}
		if len(dead) <= MaxDeadBoots {
			return
		}
		oldest := dead[0]
		for _, b := range dead[1:] {
			if b.disconnects.Before(oldest.disconnects) {
				oldest = b
			}
		}
		for i := range oldest.ints {
			t.retInts[i] += oldest.ints[i]
		}
		for i := range oldest.flts {
			t.retFlts[i] += oldest.flts[i]
		}
		delete(t.boots, oldest.id)
		delete(t.a.boots, oldest.id)
		t.order = slices.DeleteFunc(t.order, func(b *boot) bool { return b == oldest })
	}
}

// Targets returns how many (model, engine) targets have series.
func (a *Aggregator) Targets() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.targets)
}
