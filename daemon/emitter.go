package daemon

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/picometer/picometer/schema"
)

// Memory bounds of the queue beside its length in events. Request events
// carry one ITL gap per emitting step (8 bytes each, up to the context
// length) and snapshots their step records (about 40 bytes each), so
// 65536 queued events could otherwise hold hundreds of MiB while the
// sidecar is away. A request event whose gaps would exceed maxQueuedGaps is
// dropped (counted in events_dropped); a snapshot whose step records would
// exceed maxQueuedSteps keeps its counters and loses its step records
// (counted in steps_dropped).
const (
	maxQueuedGaps  = 1 << 22 // 32 MiB of ITL gaps
	maxQueuedSteps = 1 << 16 // about 2.5 MiB of step records
)

// The writer batches: it waits up to lingerTime after the first event of a
// batch, unless lingerEvents are already queued.
const (
	lingerTime   = time.Millisecond
	lingerEvents = 64
)

// maxBatchBytes is how much the writer encodes before one socket write.
const maxBatchBytes = 64 << 10

// Emitter writes NDJSON metric events (schema types) to the sidecar's unix
// socket from its own goroutine. Producers never block: [Emitter.Request]
// and [Emitter.Engine] put the event in a bounded queue or, when it is
// full, drop it and count it ([Emitter.Dropped], reported as
// events_dropped in the next engine snapshot).
//
// On every connection the writer first sends a hello, then the boot's
// request totals (schema.Totals); sequence numbers start at 1 and continue
// across reconnections. Each sequence number is written once: when a write
// fails, the events of that batch are lost and the sidecar sees the gap
// (and the emitter counts them, as events_write_failed in the next engine
// snapshot).
//
// The totals are what makes the delivery loss-free for the request series:
// they hold every request the emitter was given, in the form the sidecar
// exports (schema.TotalsBody.Add), and are sent after every hello and right
// after every engine snapshot. A totals event with seq s holds exactly the
// requests numbered below s and every request dropped so far (a dropped
// request never gets a number), so the sidecar, which raises its copy of
// the boot's totals to the daemon's and adds the requests after s, counts
// every request once: none twice, and none lost for longer than one
// snapshot interval, whatever happened to the events in between. Writes have a deadline, so a stalled sidecar
// is disconnected instead of blocking the writer; reconnection backs off
// exponentially between BackoffMin and BackoffMax. With no sidecar, events
// wait in the queue up to its bound.
type Emitter struct {
	cfg   MetricsConfig
	boot  string
	hello schema.HelloBody
	log   *slog.Logger
	wall  func() time.Time

	q            chan any // *schema.Request or *schema.Engine
	dropped      atomic.Int64
	stepsDropped atomic.Int64
	queuedSteps  atomic.Int64
	queuedGaps   atomic.Int64
	connects     atomic.Int64
	lost         atomic.Int64

	// totMu guards tot: the requests numbered (by the writer) or dropped
	// (by producers) so far. It is held for one Add or one copy into totEv,
	// never while encoding, so a producer that drops waits a microsecond at
	// most.
	totMu sync.Mutex
	tot   schema.TotalsBody
	totEv schema.Totals // writer-owned: the totals being sent, a copy of tot

	closeOnce sync.Once
	closing   chan struct{}
	deadline  atomic.Int64 // unix nanoseconds: give up flushing after this
	done      chan struct{}

	// Writer-owned.
	seq  uint64
	conn net.Conn
	buf  []byte
	down bool // the last connection attempt failed (logged once)
}

// NewBootID returns a random identifier for one run of the daemon.
func NewBootID() string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("BUG: crypto/rand: " + err.Error())
	}
	return hex.EncodeToString(b[:])
}

// NewEmitter starts an emitter writing to cfg.Socket.
func NewEmitter(cfg MetricsConfig, boot string, hello schema.HelloBody, log *slog.Logger, wall func() time.Time) *Emitter {
	e := &Emitter{
		cfg: cfg, boot: boot, hello: hello, log: log, wall: wall,
		q:       make(chan any, cfg.Queue),
		tot:     schema.NewTotals(),
		totEv:   schema.Totals{TotalsBody: schema.NewTotals()},
		closing: make(chan struct{}),
		done:    make(chan struct{}),
	}
	go e.run()
	return e
}

// Request queues a request event (it fills the header).
func (e *Emitter) Request(ev *schema.Request) {
	e.header(&ev.Header, schema.KindRequest)
	if n := int64(len(ev.ITLUS)); n > 0 && e.queuedGaps.Add(n) > maxQueuedGaps {
		e.queuedGaps.Add(-n)
		e.dropped.Add(1)
		e.total(&ev.RequestBody)
		return
	}
	e.enqueue(ev)
}

// total adds a request to the totals: when it is numbered, or dropped.
func (e *Emitter) total(r *schema.RequestBody) {
	e.totMu.Lock()
	e.tot.Add(r, e.hello.Config.BlockSize)
	e.totMu.Unlock()
}

// Totals returns a copy of the request totals (for tests).
func (e *Emitter) Totals() schema.TotalsBody {
	e.totMu.Lock()
	defer e.totMu.Unlock()
	return cloneTotals(&e.tot)
}

func cloneTotals(t *schema.TotalsBody) schema.TotalsBody {
	out := schema.NewTotals()
	copyTotals(&out, t)
	return out
}

// copyTotals makes dst (of NewTotals' shape) equal to src, reusing dst's
// storage: it allocates only for an error type's first failure and for
// the first constrained request's totals.
func copyTotals(dst, src *schema.TotalsBody) {
	for op := range src.Ops {
		s, d := &src.Ops[op], &dst.Ops[op]
		d.PromptTokens, d.CompletionTokens = s.PromptTokens, s.CompletionTokens
		copy(d.Finished, s.Finished)
		copy(d.Failed, s.Failed)
		for _, hs := range [3][2][]schema.Hist{{d.Hists, s.Hists}, {d.DurationByError, s.DurationByError}, {d.TTFTCache, s.TTFTCache}} {
			for h := range hs[1] {
				if hs[1][h].Counts == nil {
					hs[0][h] = schema.Hist{}
					continue
				}
				hs[0][h].Counts = append(hs[0][h].Counts[:0], hs[1][h].Counts...)
				hs[0][h].Sum = hs[1][h].Sum
			}
		}
	}
	// The constrained-decoding totals, made by the first constrained
	// request (an allocation once per boot).
	if src.Constraints == nil {
		dst.Constraints = nil
		return
	}
	if dst.Constraints == nil {
		dst.Constraints = schema.NewConstraintTotals()
	}
	s, d := src.Constraints, dst.Constraints
	copy(d.Requests, s.Requests)
	copy(d.ToolCalls, s.ToolCalls)
	for k := range s.Compile {
		d.Compile[k].Counts = append(d.Compile[k].Counts[:0], s.Compile[k].Counts...)
		d.Compile[k].Sum = s.Compile[k].Sum
	}
	d.Mask.Counts = append(d.Mask.Counts[:0], s.Mask.Counts...)
	d.Mask.Sum = s.Mask.Sum
}

// appendTotals numbers a totals event and appends it to e.buf. Writer only.
func (e *Emitter) appendTotals() error {
	e.header(&e.totEv.Header, schema.KindTotals)
	e.totEv.Seq = e.seq + 1
	e.totMu.Lock()
	copyTotals(&e.totEv.TotalsBody, &e.tot)
	e.totMu.Unlock()
	var err error
	e.buf, err = schema.Append(e.buf, &e.totEv)
	if err != nil {
		return fmt.Errorf("BUG: encode totals: %w", err)
	}
	e.seq++
	return nil
}

// Engine queues an engine snapshot (it fills the header).
func (e *Emitter) Engine(ev *schema.Engine) {
	e.header(&ev.Header, schema.KindEngine)
	if n := int64(len(ev.Steps)); n > 0 && e.queuedSteps.Add(n) > maxQueuedSteps {
		e.queuedSteps.Add(-n)
		e.stepsDropped.Add(n)
		ev.Steps = []schema.StepRecord{}
	}
	e.enqueue(ev)
}

func (e *Emitter) header(h *schema.Header, kind string) {
	h.V, h.Kind, h.Boot, h.TimeUnixNano = schema.Version, kind, e.boot, e.wall().UnixNano()
}

func (e *Emitter) enqueue(ev any) {
	select {
	case e.q <- ev:
	default:
		e.dropped.Add(1)
		e.dequeued(ev)
		if r, ok := ev.(*schema.Request); ok {
			e.total(&r.RequestBody)
		}
	}
}

// dequeued releases ev's share of the memory bounds.
func (e *Emitter) dequeued(ev any) {
	switch v := ev.(type) {
	case *schema.Request:
		e.queuedGaps.Add(-int64(len(v.ITLUS)))
	case *schema.Engine:
		e.queuedSteps.Add(-int64(len(v.Steps)))
	}
}

// Dropped returns how many events were dropped because the queue was full.
func (e *Emitter) Dropped() int64 { return e.dropped.Load() }

// StepsDropped returns how many step records were dropped to bound memory.
func (e *Emitter) StepsDropped() int64 { return e.stepsDropped.Load() }

// Connects returns how many connections were made (each began with a hello).
func (e *Emitter) Connects() int64 { return e.connects.Load() }

// Lost returns how many events were lost in failed writes.
func (e *Emitter) Lost() int64 { return e.lost.Load() }

// Close writes what is queued (connecting if needed) for at most timeout,
// then stops the writer. Events still queued after that are lost.
func (e *Emitter) Close(timeout time.Duration) {
	e.closeOnce.Do(func() {
		e.deadline.Store(time.Now().Add(timeout).UnixNano())
		close(e.closing)
	})
	<-e.done
}

func (e *Emitter) pastDeadline() bool {
	select {
	case <-e.closing:
		return time.Now().UnixNano() >= e.deadline.Load()
	default:
		return false
	}
}

func (e *Emitter) run() {
	defer close(e.done)
	defer func() {
		if e.conn != nil {
			e.conn.Close()
		}
		if n := len(e.q); n > 0 {
			e.log.Warn("emitter: events not written before shutdown are lost", "events", n, "socket", e.cfg.Socket)
		}
	}()
	backoff := e.cfg.BackoffMin
	for {
		var ev any
		select {
		case ev = <-e.q:
		case <-e.closing:
			select {
			case ev = <-e.q:
			default:
				return // drained
			}
		}
		for e.conn == nil {
			if e.pastDeadline() {
				return
			}
			if err := e.connect(); err != nil {
				if !e.down {
					e.log.Warn("emitter: cannot reach the sidecar; events queue up to the bound and the emitter retries",
						"socket", e.cfg.Socket, "err", err, "queue", e.cfg.Queue)
					e.down = true
				}
				if !e.sleep(backoff) {
					return
				}
				backoff = min(2*backoff, e.cfg.BackoffMax)
				continue
			}
			backoff = e.cfg.BackoffMin
		}
		e.linger()
		e.writeBatch(ev)
	}
}

// linger gives producers up to lingerTime to queue more events before a
// write, unless the queue already holds a batch or the emitter is closing:
// under load, one write and one wake-up of the sidecar carry many events.
func (e *Emitter) linger() {
	if len(e.q) >= lingerEvents || e.isClosing() {
		return
	}
	t := time.NewTimer(lingerTime)
	defer t.Stop()
	select {
	case <-t.C:
	case <-e.closing:
	}
}

// sleep waits d, or less when closing; it returns false when the flush
// deadline has passed.
func (e *Emitter) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-e.closing:
		if rest := time.Until(time.Unix(0, e.deadline.Load())); rest > 0 {
			t.Reset(min(d, rest))
			<-t.C
		}
	}
	return !e.pastDeadline()
}

// connect checks the socket's owner, dials it and writes the hello.
func (e *Emitter) connect() error {
	if err := checkSocketOwner(e.cfg.Socket, os.Geteuid(), e.cfg.TrustedUIDs, e.cfg.TrustedGIDs); err != nil {
		return err
	}
	d := net.Dialer{Timeout: e.cfg.WriteTimeout}
	conn, err := d.Dial("unix", e.cfg.Socket)
	if err != nil {
		return err
	}
	e.seq++
	hello := &schema.Hello{HelloBody: e.hello}
	e.header(&hello.Header, schema.KindHello)
	hello.Seq = e.seq
	e.buf, err = schema.Append(e.buf[:0], hello)
	if err != nil {
		conn.Close()
		return fmt.Errorf("BUG: encode hello: %w", err)
	}
	if err := e.appendTotals(); err != nil {
		conn.Close()
		return err
	}
	if err := e.write(conn); err != nil {
		conn.Close()
		return err
	}
	e.conn = conn
	e.connects.Add(1)
	e.down = false
	e.log.Info("emitter: connected", "socket", e.cfg.Socket, "seq", e.seq)
	return nil
}

func (e *Emitter) write(conn net.Conn) error {
	deadline := time.Now().Add(e.cfg.WriteTimeout)
	if e.isClosing() {
		deadline = time.Unix(0, min(deadline.UnixNano(), e.deadline.Load()))
	}
	if err := conn.SetWriteDeadline(deadline); err != nil {
		return err
	}
	_, err := conn.Write(e.buf)
	return err
}

func (e *Emitter) isClosing() bool {
	select {
	case <-e.closing:
		return true
	default:
		return false
	}
}

// writeBatch encodes ev and whatever else is queued (up to maxBatchBytes)
// and writes them in one write.
func (e *Emitter) writeBatch(ev any) {
	e.buf = e.buf[:0]
	n := 0
	for {
		var err error
		mark := len(e.buf)
		switch v := ev.(type) {
		case *schema.Request:
			v.Seq = e.seq + 1
			e.buf, err = schema.Append(e.buf, v)
			e.total(&v.RequestBody) // numbered: in every totals from here on
		case *schema.Engine:
			v.Seq = e.seq + 1
			v.EventsWriteFailed = e.lost.Load()
			e.buf, err = schema.Append(e.buf, v)
		}
		e.dequeued(ev)
		if err != nil {
			// Never expected (the schema types always encode); the event is
			// skipped without using a sequence number and counted as dropped.
			e.buf = e.buf[:mark]
			e.dropped.Add(1)
			e.log.Error("BUG: emitter: event does not encode; dropped", "type", fmt.Sprintf("%T", ev), "err", err)
		} else {
			e.seq++
			n++
			if _, ok := ev.(*schema.Engine); ok {
				if err := e.appendTotals(); err != nil {
					e.log.Error(err.Error())
				} else {
					n++
				}
			}
		}
		if len(e.buf) >= maxBatchBytes {
			break
		}
		select {
		case ev = <-e.q:
			continue
		default:
		}
		break
	}
	if n == 0 {
		return
	}
	if err := e.write(e.conn); err != nil {
		e.lost.Add(int64(n))
		e.log.Warn("emitter: write failed; the batch is lost (a sequence gap for the sidecar), reconnecting",
			"socket", e.cfg.Socket, "err", err, "events", n)
		e.conn.Close()
		e.conn = nil
		e.down = true
	}
}

var _ eventSink = (*Emitter)(nil)
