package daemon

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/picometer/picometer/native"
	"github.com/picometer/picometer/schema"
)

// eventSink receives metric events. It never blocks; the emitter queues
// and counts overflow.
type eventSink interface {
	Request(ev *schema.Request)
	Engine(ev *schema.Engine)
	// Dropped returns the events dropped so far (queue overflow).
	Dropped() int64
	// StepsDropped returns the step records the sink dropped so far.
	StepsDropped() int64
}

// nopSink is the sink when the emitter is off.
type nopSink struct{}

func (nopSink) Request(*schema.Request) {}
func (nopSink) Engine(*schema.Engine)   {}
func (nopSink) Dropped() int64          { return 0 }
func (nopSink) StepsDropped() int64     { return 0 }

// loop is the engine loop: the one goroutine that owns the engine. Handlers
// reach it over channels: submissions, cancellations, snapshot requests and
// control (drain, abort, stop). Each iteration drains those channels
// without blocking, aborts requests whose deadline passed, and runs one
// engine step, handing each request's tokens to it. With nothing to do it
// blocks on its inbox. Snapshots go to the sink every interval and once
// when the loop stops.
type loop struct {
	eng      Engine
	sink     eventSink
	clock    func() int64 // monotonic nanoseconds (native.Now)
	log      *slog.Logger
	interval time.Duration
	timeout  time.Duration // per-request deadline, for error messages
	stepCap  int           // step records kept between two emitted snapshots

	inbox chan loopMsg // from handlers, in arrival order
	done  chan struct{}

	// Owned by the loop goroutine.
	active       map[native.ID]*seq
	draining     bool
	failed       *apiError
	steps        []schema.StepRecord // taken by debug snapshots, carried by the next emitted one
	stepsDropped int64               // step records the loop could not carry
	nextDeadline int64
	stopped      []*seq
	submitting   *seq            // the submission being answered
	snap         native.Snapshot // scratch for the engine's snapshots
	stopping     bool            // ctlStop arrived: exit even after a panic

	failedFlag atomic.Bool  // the engine failed (for /health)
	beat       atomic.Int64 // l.clock() at the end of the last iteration (for /ready)
	gauges     routingGauges
}

// loopMsg is one message from a handler to the loop (or, tick, from the
// snapshot ticker): exactly one field is set.
type loopMsg struct {
	tick   bool
	submit *seq
	cancel *cancelMsg
	snap   chan *schema.EngineBody // the reply channel of a debug snapshot
	ctl    *ctlMsg
}

type cancelMsg struct {
	s    *seq
	kind string // schema.ErrCancelled, ErrTimeout or ErrShutdown
}

type ctlOp int

const (
	ctlDrain ctlOp = iota // reject new submissions (503 shutting_down)
	ctlAbort              // abort every active request (error type shutdown)
	ctlStop               // abort what is left, emit the final snapshot, exit
)

type ctlMsg struct {
	op  ctlOp
	ack chan struct{}
}

func newLoop(eng Engine, sink eventSink, clock func() int64, log *slog.Logger, interval, timeout time.Duration) *loop {
	stepCap := eng.Config().StepRing
	if stepCap < 1 {
		stepCap = native.DefaultConfig().StepRing
	}
	l := &loop{
		eng: eng, sink: sink, clock: clock, log: log, interval: interval, timeout: timeout, stepCap: stepCap,
		inbox:  make(chan loopMsg, 2048),
		done:   make(chan struct{}),
		active: make(map[native.ID]*seq),
	}
	l.gauges.cfg = eng.Config()
	return l
}

// --- API for handlers (any goroutine) ---

// submit hands s to the engine and returns nil once it is queued there, or
// the error to answer with (429 queue full, 503 shutting down, 500 …).
func (l *loop) submit(s *seq) *apiError {
	select {
	case l.inbox <- loopMsg{submit: s}:
	case <-l.done:
		return errShuttingDown
	}
	select {
	case e := <-s.submitted:
		return e
	case <-l.done:
		// The loop answers every submission it takes before it exits; one
		// it never took stays unanswered.
		select {
		case e := <-s.submitted:
			return e
		default:
			return errShuttingDown
		}
	}
}

// cancel asks the loop to abort s (if it has not finished already).
func (l *loop) cancel(s *seq, kind string) {
	select {
	case l.inbox <- loopMsg{cancel: &cancelMsg{s, kind}}:
	case <-l.done:
	}
}

// snapshot returns a fresh engine snapshot (Steps empty: step records go to
// the sidecar), or nil when the loop has stopped.
func (l *loop) snapshot() *schema.EngineBody {
	reply := make(chan *schema.EngineBody, 1)
	select {
	case l.inbox <- loopMsg{snap: reply}:
	case <-l.done:
		return nil
	}
	select {
	case b := <-reply:
		return b
	case <-l.done:
		return nil
	}
}

func (l *loop) control(op ctlOp) {
	m := ctlMsg{op, make(chan struct{})}
	select {
	case l.inbox <- loopMsg{ctl: &m}:
	case <-l.done:
		return
	}
	select {
	case <-m.ack:
	case <-l.done:
	}
}

// --- the loop goroutine ---

func (l *loop) run() {
	defer close(l.done)
	ticker := time.NewTicker(l.interval)
	defer ticker.Stop()
	l.gauges.publish(l.eng)
	l.beat.Store(l.clock())
	for !l.iterate(ticker) {
	}
}

// iterate runs one iteration of the loop and reports whether the loop must
// exit. A panic (a bug in the daemon or the engine binding) does not crash
// the daemon: it is logged and treated as an engine failure, so every
// request gets an answer and an event, /health turns 503 and the daemon
// keeps answering until it is restarted.
func (l *loop) iterate(ticker *time.Ticker) (exit bool) {
	defer func() {
		if r := recover(); r != nil {
			l.log.Error("BUG: panic in the engine loop", "panic", r, "stack", string(debug.Stack()))
			err := fmt.Errorf("BUG: panic in the engine loop: %v", r)
			if s := l.submitting; s != nil {
				// Answer the submission in progress (its handler sends the
				// request event); it must not also be finished below.
				l.submitting = nil
				delete(l.active, s.engID)
				s.submitted <- errEngine(err)
			}
			l.fail(err)
			exit = l.stopping
		}
	}()
	// Handle whatever arrived; idle, block until something does.
	block := len(l.active) == 0
	for range 4096 {
		m, ok := l.next(ticker, block)
		if !ok {
			break
		}
		block = false
		if l.handle(m) {
			return true
		}
	}
	l.checkDeadlines()
	if len(l.active) > 0 {
		l.step()
	}
	l.gauges.publish(l.eng)
	l.beat.Store(l.clock())
	return false
}

// next returns the next message from a handler or a snapshot tick, waiting
// for one when block is set; otherwise ok is false when there is none.
func (l *loop) next(ticker *time.Ticker, block bool) (m loopMsg, ok bool) {
	if block {
		select {
		case m = <-l.inbox:
		case <-ticker.C:
			m.tick = true
		}
		return m, true
	}
	select {
	case m = <-l.inbox:
	case <-ticker.C:
		m.tick = true
	default:
		return m, false
	}
	return m, true
}

// handle serves one message from a handler and reports whether the loop
// must exit.
func (l *loop) handle(m loopMsg) (exit bool) {
	switch {
	case m.tick:
		l.emitSnapshot()
	case m.submit != nil:
		l.doSubmit(m.submit)
	case m.cancel != nil:
		l.doCancel(m.cancel.s, m.cancel.kind)
	case m.snap != nil:
		m.snap <- l.debugSnapshot()
	case m.ctl != nil:
		return l.doControl(*m.ctl)
	}
	return false
}

func (l *loop) doSubmit(s *seq) {
	l.submitting = s
	e := l.admit(s)
	l.submitting = nil
	s.submitted <- e
}

// admit submits s to the engine and returns the error to answer with, or
// nil once s is active.
func (l *loop) admit(s *seq) *apiError {
	switch {
	case l.draining:
		return errShuttingDown
	case l.failed != nil:
		return l.failed
	}
	id, err := l.eng.Submit(s.prompt, s.params)
	if err != nil {
		switch {
		case errors.Is(err, native.ErrQueueFull):
			return errQueueFull
		case errors.Is(err, native.ErrArg):
			return badRequest(s.promptParam(), "invalid_value", "The engine rejected the request: %v", err)
		default:
			return errEngine(err)
		}
	}
	s.engID = id
	l.active[id] = s
	if s.deadline != 0 && (l.nextDeadline == 0 || s.deadline < l.nextDeadline) {
		l.nextDeadline = s.deadline
	}
	return nil
}

func (s *seq) promptParam() string {
	if s.op == schema.OpChat {
		return "messages"
	}
	return "prompt"
}

// doCancel aborts s in the engine if it is still active.
func (l *loop) doCancel(s *seq, kind string) {
	if l.active[s.engID] != s {
		return // finished already
	}
	stats, err := l.eng.Cancel(s.engID)
	if err != nil {
		l.log.Error("BUG: engine loop: the engine could not cancel a running request", "id", s.id, "err", err)
		stats = nil
	}
	var e *apiError
	switch kind {
	case schema.ErrTimeout:
		e = errTimeout(l.timeout.String(), s.ntoks)
	case schema.ErrShutdown:
		e = errShuttingDown
	default:
		e = errCancelled
	}
	l.finish(s, schema.FinishAbort, kind, stats, e)
}

func (l *loop) checkDeadlines() {
	if l.nextDeadline == 0 {
		return
	}
	now := l.clock()
	if now < l.nextDeadline {
		return
	}
	l.nextDeadline = 0
	var expired []*seq
	for _, s := range l.active {
		switch {
		case s.deadline == 0:
		case s.deadline <= now:
			expired = append(expired, s)
		case l.nextDeadline == 0 || s.deadline < l.nextDeadline:
			l.nextDeadline = s.deadline
		}
	}
	for _, s := range expired {
		l.doCancel(s, schema.ErrTimeout)
	}
}

// step runs one engine step and hands its outputs over. Outputs and their
// stats belong to the engine until its next call, so every output is
// consumed before a stop-string match cancels a request.
func (l *loop) step() {
	outs, err := l.eng.Step()
	if err != nil {
		l.fail(err)
		return
	}
	l.stopped = l.stopped[:0]
	for i := range outs {
		o := &outs[i]
		s := l.active[o.ID]
		if s == nil {
			l.log.Error("BUG: engine loop: output for an unknown request", "engine_id", o.ID)
			continue
		}
		matched := s.consume(o.Tokens, o)
		switch {
		case o.Finish != "":
			finish := o.Finish
			if matched {
				finish = schema.FinishStop
			}
			l.finish(s, finish, "", o.Stats, nil)
		case matched:
			l.stopped = append(l.stopped, s)
		}
	}
	for _, s := range l.stopped {
		stats, err := l.eng.Cancel(s.engID)
		if err != nil {
			l.log.Error("BUG: engine loop: the engine could not cancel a request after its stop string", "id", s.id, "err", err)
			stats = nil
		}
		l.finish(s, schema.FinishStop, "", stats, nil)
	}
	if len(outs) == 0 && len(l.active) > 0 {
		if running, waiting := l.eng.Load(); running+waiting == 0 {
			l.fail(errors.New("BUG: the engine holds no request but the daemon waits for some"))
		}
	}
}

// fail ends every active request with an engine error; the engine cannot
// continue, so later submissions get the same error.
func (l *loop) fail(err error) {
	l.log.Error("engine loop: the engine failed; every request now fails with engine_error", "err", err, "requests", len(l.active))
	l.failed = errEngine(err)
	l.failedFlag.Store(true)
	for _, s := range l.active {
		l.finish(s, schema.FinishError, schema.ErrEngine, nil, l.failed)
	}
}

// finish ends s: the last text, its result, and its request event.
func (l *loop) finish(s *seq, finish, errType string, stats *native.RequestStats, e *apiError) {
	delete(l.active, s.engID)
	if finish == schema.FinishStop || finish == schema.FinishLength {
		s.flushText()
	}
	body := requestBody(s, stats, finish, errType, l.clock())
	if s.tools != nil && (finish == schema.FinishStop || finish == schema.FinishLength) {
		if _, calls, ok := parseToolCalls(s.tools.format, string(s.answer), finish); ok {
			body.ToolCalls, body.ToolFormat = len(calls), string(s.tools.format)
		}
	}
	s.complete(result{finish: finish, err: e, body: body})
	l.sink.Request(&schema.Request{RequestBody: body})
}

func (l *loop) doControl(m ctlMsg) (exit bool) {
	defer close(m.ack)
	switch m.op {
	case ctlDrain:
		l.draining = true
	case ctlAbort:
		l.abortAll()
	case ctlStop:
		l.stopping = true
		l.draining = true
		l.abortAll()
		l.emitSnapshot()
		return true
	}
	return false
}

func (l *loop) abortAll() {
	all := make([]*seq, 0, len(l.active))
	for _, s := range l.active {
		all = append(all, s)
	}
	for _, s := range all {
		l.doCancel(s, schema.ErrShutdown)
	}
}

// emitSnapshot sends a cumulative snapshot with every step record since
// the previous emitted one.
func (l *loop) emitSnapshot() {
	ev := &schema.Engine{}
	l.eng.Snapshot(&l.snap)
	engineBody(&l.snap, &ev.EngineBody)
	if len(l.steps) > 0 {
		ev.Steps = append(l.steps, ev.Steps...)
		l.steps = nil
	}
	l.counters(&ev.EngineBody)
	l.sink.Engine(ev)
}

// debugSnapshot takes a snapshot for /debug/engine_metrics. Its step
// records are kept (up to stepCap) for the next emitted snapshot.
func (l *loop) debugSnapshot() *schema.EngineBody {
	b := &schema.EngineBody{}
	l.eng.Snapshot(&l.snap)
	engineBody(&l.snap, b)
	room := l.stepCap - len(l.steps)
	if n := len(b.Steps); n > room {
		l.stepsDropped += int64(n - room)
		b.Steps = b.Steps[:room]
	}
	l.steps = append(l.steps, b.Steps...)
	b.Steps = []schema.StepRecord{}
	l.counters(b)
	return b
}

func (l *loop) counters(b *schema.EngineBody) {
	b.EventsDropped = l.sink.Dropped()
	b.StepsDropped += l.stepsDropped + l.sink.StepsDropped()
	if b.Steps == nil {
		b.Steps = []schema.StepRecord{}
	}
}
