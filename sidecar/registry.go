package sidecar

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"go.opentelemetry.io/otel/attribute"

	"github.com/picometer/picometer/schema"
)

// This file is the series registry: every exported series once, with its
// owner and, when OTLP is on, its OTLP shadow (the histogram bucket counts
// per bound, which the OTLP producer reads under the owner's lock).
// exposition.go writes the series as Prometheus text; registry_test.go and
// exposition_test.go cover both (golden expositions, promtool, escaping,
// the text metrics.Set writes).

// registry is the Prometheus side of the aggregation. Series belong to an
// owner (a target, or the sidecar itself), which keeps its series of each
// schema family in a list sorted by name; a family is written after its own
// "# HELP" and "# TYPE" lines as the lists of every owner in the owners'
// order. (metrics.ExposeMetadata would write an empty HELP, which promtool
// rejects, so metadata comes from schema/ instead.) Values are
// VictoriaMetrics/metrics counters, float counters and gauges, and
// leHistogram (histogram.go) for "le" histograms.
//
// Why per owner: removing a target's series one by one from shared lists
// was O(N²) in the series (issue 13: 7 targets/s, with metrics.Set, whose
// UnregisterMetric scans the set). Dropping an owner drops its lists whole,
// O(families), and a single series removed copies only its owner's list of
// that family. Owners are ordered by the label text their series names
// start with, so the exposition is in the same order as with one list per
// family (series sorted by name).
type registry struct {
	fams   []*family // schema order
	byID   map[string]*family
	global *owner // the sidecar's own series

	mu     sync.Mutex
	owners atomic.Pointer[[]*owner] // sorted by key; replaced, never changed in place
}

// family is one schema family.
type family struct {
	f        *schema.Family
	index    int          // position in schema.Families
	name     string       // f.PromName()
	header   string       // "# HELP …\n# TYPE …\n"
	omHeader string       // the same in OpenMetrics (openmetrics.go)
	les      []string     // histograms: leLabels(f.Buckets)
	n        atomic.Int64 // series registered, over all owners
}

// owner holds the series of one target, or the sidecar's own.
type owner struct {
	r   *registry
	key string // the label text its series names start with
	// lists are its series by family index, each sorted by name (the order
	// metrics.Set.WritePrometheus sorted into); a list is replaced under
	// mu, never changed in place, so a scrape reads it without a lock.
	lists []atomic.Pointer[[]exposer]
	mu    sync.Mutex
	n     []atomic.Int64 // series registered, by family index
}

func newRegistry() *registry {
	r := &registry{byID: make(map[string]*family, len(schema.Families))}
	for i, f := range schema.Families {
		name := f.PromName()
		fam := &family{f: f, index: i, name: name,
			header: "# HELP " + name + " " + escapeHelp(f.Help) + "\n# TYPE " + name + " " + f.Kind.PromType() + "\n", omHeader: omHeader(f)}
		if f.Kind == schema.KindHistogram {
			fam.les = leLabels(newLEHistogram(f.Buckets).bounds)
		}
		r.fams = append(r.fams, fam)
		r.byID[f.ID] = fam
	}
	r.owners.Store(&[]*owner{})
	r.global = r.newOwner("")
	return r
}

// newOwner adds an owner whose series names start with key (after the
// family name).
func (r *registry) newOwner(key string) *owner {
	o := &owner{r: r, key: key, lists: make([]atomic.Pointer[[]exposer], len(r.fams)), n: make([]atomic.Int64, len(r.fams))}
	r.mu.Lock()
	defer r.mu.Unlock()
	old := *r.owners.Load()
	i, _ := slices.BinarySearchFunc(old, key, func(x *owner, k string) int { return strings.Compare(x.key, k) })
	owners := slices.Insert(slices.Clone(old), i, o)
	r.owners.Store(&owners)
	return o
}

// dropOwner removes an owner and every series it has, at once.
func (r *registry) dropOwner(o *owner) {
	r.mu.Lock()
	owners := slices.DeleteFunc(slices.Clone(*r.owners.Load()), func(x *owner) bool { return x == o })
	r.owners.Store(&owners)
	r.mu.Unlock()
	o.mu.Lock()
	defer o.mu.Unlock()
	for i := range o.lists {
		o.lists[i].Store(nil) // a series unregistered later is not counted twice
		if n := o.n[i].Swap(0); n != 0 {
			r.fams[i].n.Add(-n)
		}
	}
}

// exposed returns o's series of fam, sorted by name; the caller must not
// change the slice.
func (o *owner) exposed(fam *family) []exposer {
	if l := o.lists[fam.index].Load(); l != nil {
		return *l
	}
	return nil
}

// add inserts s into its family's list, in name order, then counts it (so
// a scrape that sees the count sees the series). Two series of one name
// are a bug (metrics.Set panicked likewise).
func (o *owner) add(s exposer) {
	m := s.meta()
	o.mu.Lock()
	defer o.mu.Unlock()
	old := o.exposed(m.fam)
	i, found := slices.BinarySearchFunc(old, m.name, func(x exposer, name string) int { return strings.Compare(x.meta().name, name) })
	if found {
		panic("BUG: sidecar: series " + m.name + " registered twice")
	}
	l := slices.Insert(slices.Clip(old), i, s) // a new array: scrapes may hold the old one
	o.lists[m.fam.index].Store(&l)
	o.n[m.fam.index].Add(1)
	m.fam.n.Add(1)
}

// remove takes the series named name out of fam's list and uncounts it;
// false if there is none.
func (o *owner) remove(fam *family, name string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	old := o.exposed(fam)
	i, found := slices.BinarySearchFunc(old, name, func(x exposer, name string) int { return strings.Compare(x.meta().name, name) })
	if !found {
		return false
	}
	l := slices.Delete(slices.Clone(old), i, i+1)
	o.lists[fam.index].Store(&l)
	o.n[fam.index].Add(-1)
	fam.n.Add(-1)
	return true
}

// family returns the family with the given schema ID; unknown IDs are a bug.
func (r *registry) family(id string) *family {
	if fam, ok := r.byID[id]; ok {
		return fam
	}
	panic("BUG: sidecar: no family " + id)
}

// escapeHelp escapes a HELP text: backslash and newline.
func escapeHelp(s string) string {
	return strings.NewReplacer(`\`, `\\`, "\n", `\n`).Replace(s)
}

// appendLabelValue appends v escaped for a Prometheus label value.
func appendLabelValue(b []byte, v string) []byte {
	for i := 0; i < len(v); i++ {
		switch c := v[i]; c {
		case '\\':
			b = append(b, `\\`...)
		case '"':
			b = append(b, `\"`...)
		case '\n':
			b = append(b, `\n`...)
		default:
			b = append(b, c)
		}
	}
	return b
}

// label is an attribute and its value on one series.
type label struct {
	attr  *schema.Attr
	value string
}

// seriesMeta identifies one series on both outputs.
type seriesMeta struct {
	fam   *family
	own   *owner
	name  string        // series name: prom_name{label="value",…}
	attrs attribute.Set // OTel attributes (schema keys)
	start time.Time     // creation, the OTLP start time of cumulative points
}

func newMeta(o *owner, fam *family, start time.Time, labels []label) seriesMeta {
	m := seriesMeta{fam: fam, own: o, name: fam.name, start: start}
	if len(labels) == 0 {
		m.attrs = *attribute.EmptySet()
		return m
	}
	b := make([]byte, 0, 128)
	b = append(b, fam.name...)
	b = append(b, '{')
	kvs := make([]attribute.KeyValue, len(labels))
	for i, l := range labels {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, l.attr.PromLabel()...)
		b = append(b, `="`...)
		b = appendLabelValue(b, l.value)
		b = append(b, '"')
		kvs[i] = attribute.String(l.attr.Key, l.value)
	}
	m.name = string(append(b, '}'))
	m.attrs = attribute.NewSet(kvs...)
	return m
}

// series is one registered series of any type.
type series interface {
	meta() *seriesMeta
	unregister()
}

func (m *seriesMeta) meta() *seriesMeta { return m }

func (m *seriesMeta) unregister() {
	m.own.remove(m.fam, m.name)
}

// histSeries is an "le" histogram with the family's schema bounds.
type histSeries struct {
	seriesMeta
	prom *leHistogram
	// shadow keeps the same observations for the OTLP producer, which reads
	// it under the lock of the series' owner (prom has its own lock, taken
	// per observation); nil when OTLP is off.
	shadow *histShadow
}

type histShadow struct {
	counts []uint64 // per bucket (not cumulative), len(bounds)+1, the last is +Inf
	sum    float64
	count  uint64
}

// observe records v on both outputs. Like metrics.PrometheusHistogram, it
// ignores negative values and NaN (the decoder never produces them).
func (h *histSeries) observe(v float64) {
	h.prom.Update(v)
	if s := h.shadow; s != nil {
		s.observe(h.fam.f.Buckets, v)
	}
}

// observe records v in the shadow of a histogram with the given bounds: the
// first bucket whose upper bound is >= v (Prometheus' le), or +Inf. Negative
// values and NaN are ignored, as metrics.PrometheusHistogram does.
func (s *histShadow) observe(bounds []float64, v float64) {
	if !(v >= 0) {
		return
	}
	s.counts[schema.BucketIndex(bounds, v)]++
	s.sum += v
	s.count++
}

// observeMicros observes every duration of us (microseconds) in seconds, in
// order: one loop for the gaps of a request, shadow inline.
func (h *histSeries) observeMicros(us []int64) {
	s := h.shadow
	if s == nil {
		for _, x := range us {
			h.prom.Update(seconds(x))
		}
		return
	}
	bounds := h.fam.f.Buckets
	for _, x := range us {
		v := seconds(x)
		h.prom.Update(v)
		s.observe(bounds, v)
	}
}

// counterSeries is an integer counter.
type counterSeries struct {
	seriesMeta
	c *metrics.Counter
}

// floatCounterSeries is a counter of seconds.
type floatCounterSeries struct {
	seriesMeta
	c *metrics.FloatCounter
}

// gaugeSeries is a gauge (or an up-down counter, or an info series at 1).
type gaugeSeries struct {
	seriesMeta
	g *metrics.Gauge
}

// register creates a series of family famID owned by o: build makes it
// from its family and metadata (set is a metrics.Set of its own, where
// build may create its value); then the owner lists it and the family
// counts it, so a scrape never writes a family's metadata before one of its
// series. A series whose type exposition.go knows (an exposer) is written
// from its value; any other is written by its set (setSeries), so a new
// series type is exported correctly before it is given an appendProm.
func register[S any](o *owner, famID string, start time.Time, labels []label, build func(*family, *metrics.Set, seriesMeta) S) S {
	fam := o.r.family(famID)
	m := newMeta(o, fam, start, labels)
	set := metrics.NewSet()
	s := build(fam, set, m)
	switch x := any(s).(type) {
	case exposer:
		o.add(x)
	case series:
		o.add(&setSeries{m: x.meta(), set: set})
	default:
		o.add(&setSeries{m: &m, set: set})
	}
	return s
}

func (o *owner) newHist(famID string, start time.Time, shadow bool, labels ...label) *histSeries {
	return register(o, famID, start, labels, func(fam *family, _ *metrics.Set, m seriesMeta) *histSeries {
		h := &histSeries{seriesMeta: m, prom: newLEHistogram(fam.f.Buckets)}
		if shadow {
			h.shadow = &histShadow{counts: make([]uint64, len(fam.f.Buckets)+1)}
		}
		return h
	})
}

func (o *owner) newCounter(famID string, start time.Time, labels ...label) *counterSeries {
	return register(o, famID, start, labels, func(fam *family, _ *metrics.Set, m seriesMeta) *counterSeries {
		return &counterSeries{seriesMeta: m, c: new(metrics.Counter)}
	})
}

func (o *owner) newFloatCounter(famID string, start time.Time, labels ...label) *floatCounterSeries {
	return register(o, famID, start, labels, func(fam *family, _ *metrics.Set, m seriesMeta) *floatCounterSeries {
		return &floatCounterSeries{seriesMeta: m, c: new(metrics.FloatCounter)}
	})
}

// newGauge registers a gauge; f, if not nil, computes its value on read.
func (o *owner) newGauge(famID string, start time.Time, f func() float64, labels ...label) *gaugeSeries {
	return register(o, famID, start, labels, func(fam *family, set *metrics.Set, m seriesMeta) *gaugeSeries {
		if f == nil {
			return &gaugeSeries{seriesMeta: m, g: new(metrics.Gauge)}
		}
		return &gaugeSeries{seriesMeta: m, g: set.NewGauge(m.name, f)} // set is dropped: the value is the gauge's
	})
}

// The registry's own constructors register the sidecar's own series.
func (r *registry) newHist(famID string, start time.Time, shadow bool, labels ...label) *histSeries {
	return r.global.newHist(famID, start, shadow, labels...)
}

func (r *registry) newCounter(famID string, start time.Time, labels ...label) *counterSeries {
	return r.global.newCounter(famID, start, labels...)
}

func (r *registry) newGauge(famID string, start time.Time, f func() float64, labels ...label) *gaugeSeries {
	return r.global.newGauge(famID, start, f, labels...)
}
