package sidecar

import (
	"fmt"
	"log/slog"
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
	reg          *registry
	now          func() time.Time
	shadow       bool
	expireAfter  time.Duration
	maxTargets   int
	maxDeadBoots int           // max_dead_boots
	bootWait     time.Duration // see AggregatorOptions.BootInUseWait
	buffers      *budget       // shared by the connections' line buffers (nil: unbounded)
	log          *slog.Logger
	self         *selfMetrics
	spans        *Spans // request spans and log lines (nil: off); set before the first event

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
	// MaxTargets caps the targets (0: DefaultConfig's); a hello past it is
	// refused (too_many_targets).
	MaxTargets int
	// MaxDeadBoots caps the disconnected boots a target remembers (0:
	// DefaultConfig's); older ones are folded into its retired totals.
	MaxDeadBoots int
	// MaxBufferedBytes bounds how much the connections' line buffers may
	// grow, together, beyond their initial 64 KiB each (0: unbounded); a
	// connection whose partial line needs more is closed (buffer_full).
	MaxBufferedBytes int64
	// BootInUseWait is how long a hello that claims a connected boot waits
	// for that boot's other connection to end (0: the BootInUseWait
	// constant).
	BootInUseWait time.Duration
	// Logger (nil: slog.Default()).
	Logger *slog.Logger
}

// NewAggregator returns an aggregator with no targets and its self-metrics
// registered.
func NewAggregator(opt AggregatorOptions) *Aggregator {
	a := &Aggregator{reg: newRegistry(), now: opt.Now, shadow: opt.OTLP, expireAfter: opt.ExpireAfter, maxTargets: opt.MaxTargets,
		log: opt.Logger, targets: map[targetKey]*target{}, boots: map[string]*boot{}}
	if a.now == nil {
		a.now = time.Now
	}
	if a.expireAfter <= 0 {
		a.expireAfter = DefaultConfig().ExpireAfter
	}
	if a.log == nil {
		a.log = slog.Default()
	}
	a.bootWait = opt.BootInUseWait
	if a.bootWait <= 0 {
		a.bootWait = BootInUseWait
	}
	if opt.MaxBufferedBytes > 0 {
		a.buffers = newBudget(opt.MaxBufferedBytes)
	}
	if a.maxTargets <= 0 {
		a.maxTargets = DefaultConfig().MaxTargets
	}
	a.maxDeadBoots = opt.MaxDeadBoots
	if a.maxDeadBoots <= 0 {
		a.maxDeadBoots = MaxDeadBoots
	}
	a.self = newSelfMetrics(a.reg, a.now)
	return a
}

// Conn is one daemon connection's view of the aggregator. Its methods are
// called from the connection's goroutine only.
type Conn struct {
	a    *Aggregator
	boot *boot // bound by the connection's hello
	// now is the time events are stamped with (the last event age): the
	// caller sets it once per read from the socket, not per event.
	now int64
	// lastSeq is the last sequence number applied on this connection: the
	// baseline belongs to the connection, so a forged connection cannot
	// make a real one's events stale.
	lastSeq uint64
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

// connected reports whether a connection is bound to the boot. conns is
// guarded by the target's lock (Close changes it holding only that), so
// hello, which holds the aggregator's, takes it too: the order
// aggregator then target is the one hello already uses.
func (b *boot) connected() bool {
	b.t.mu.Lock()
	defer b.t.mu.Unlock()
	return b.conns > 0
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
	if err := c.sequence(ev.Seq); err != nil {
		return err
	}
	t.lastEvent.Store(c.now)
	switch ev.Kind {
	case schema.KindRequest:
		if ev.Seq <= b.totalsSeq {
			return &schema.DecodeError{Reason: schema.ReasonStaleSeq,
				Msg: fmt.Sprintf("request seq %d of boot %q is already in its totals of seq %d", ev.Seq, b.id, b.totalsSeq)}
		}
		if err := t.applyRequest(b, &ev.RequestBody); err != nil {
			return err
		}
		t.a.self.events[kindRequest].c.Inc()
		if sp := t.a.spans; sp != nil {
			if sp.exports() {
				t.exemplify(indexOf(schema.AttrOperation.Values, ev.Operation), &ev.RequestBody, b.cfg.blockSize, ev.TimeUnixNano)
			}
			sp.Request(t.key.model, &ev.RequestBody, ev.TimeUnixNano)
		}
		return nil
	case schema.KindTotals:
		t.applyTotals(b, &ev.TotalsBody, ev.Seq)
		t.a.self.events[kindTotals].c.Inc()
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
	kindTotals
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
	if c.lastSeq != 0 && ev.Seq == c.lastSeq+1 {
		c.lastSeq, b.lastSeq = ev.Seq, ev.Seq
	}
	b.t.mu.Unlock()
}

func (c *Conn) hello(ev *schema.Event) error {
	a := c.a
	key := targetKey{ev.Model, ev.Engine}
	a.mu.Lock()
	defer a.mu.Unlock()
	b := a.boots[ev.Boot]
	if b != nil && c.boot != b && b.connected() {
		return &schema.DecodeError{Reason: schema.ReasonBootInUse,
			Msg: fmt.Sprintf("boot %q is already connected; a second connection cannot claim it", ev.Boot)}
	}
	if b != nil && b.t.key != key {
		return invalidField("boot %q said hello before as model %q engine %q, now as model %q engine %q",
			ev.Boot, b.t.key.model, b.t.key.engine, ev.Model, ev.Engine)
	}
	t := a.targets[key]
	if t == nil && len(a.targets) >= a.maxTargets {
		return &schema.DecodeError{Reason: schema.ReasonTooManyTargets,
			Msg: fmt.Sprintf("hello of model %q engine %q: the sidecar has %d targets, its max_targets", ev.Model, ev.Engine, a.maxTargets)}
	}
	if c.boot != nil && c.boot != b {
		old := c.boot.t
		old.mu.Lock()
		c.unbindLocked()
		old.mu.Unlock()
	}
	if t == nil {
		key = targetKey{strings.Clone(ev.Model), strings.Clone(ev.Engine)}
		t = a.newTarget(key)
		a.targets[key] = t
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if b == nil {
		// A new boot: first fold the dead ones past 2 × max_dead_boots
		// down to max_dead_boots, so a flood of boot ids (a crash-looping
		// daemon, or any allowed peer) holds a bounded number of boots and
		// each hello folds one boot at most, amortized.
		if len(t.order)-t.connected > 2*a.maxDeadBoots {
			t.foldDeadBoots(a.maxDeadBoots)
		}
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
		c.lastSeq = 0
		b.conns++
		t.connected++
	}
	t.lastEvent.Store(now.UnixNano())
	t.refreshInfo()
	t.refreshGauges()
	if err := c.sequence(ev.Seq); err != nil {
		return err
	}
	a.self.events[kindHello].c.Inc()
	return nil
}

// Targets returns how many (model, engine) targets have series.
func (a *Aggregator) Targets() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.targets)
}

func invalidField(format string, args ...any) *schema.DecodeError {
	return &schema.DecodeError{Reason: schema.ReasonInvalidField, Msg: fmt.Sprintf(format, args...)}
}
