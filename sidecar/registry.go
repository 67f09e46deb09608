package sidecar

import (
	"bufio"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"go.opentelemetry.io/otel/attribute"

	"github.com/picometer/picometer/schema"
)

// ContentType is the Content-Type of /metrics (Prometheus text format 0.0.4).
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// This file is the series registry: every exported series once, with its
// Prometheus exposition and, when OTLP is on, its OTLP shadow (the bucket
// counts metrics.PrometheusHistogram does not give back). registry_test.go
// covers it (golden expositions, promtool, escaping).

// registry is the Prometheus side of the aggregation. Series belong to an
// owner (a target, or the sidecar itself), which has one metrics.Set per
// schema family; a family is written after its own "# HELP" and "# TYPE"
// lines as the sets of every owner in the owners' order.
// (metrics.ExposeMetadata would write an empty HELP, which promtool rejects,
// so metadata comes from schema/ instead.)
//
// Why per owner: metrics.Set.UnregisterMetric scans the set's whole list,
// so removing a target's series one by one from shared sets was O(N²) in
// the series (issue 13: 7 targets/s). Dropping an owner drops its sets
// whole, O(families), and a single series removed scans only its owner's
// series of that family. Owners are ordered by the label text their series
// names start with, so the exposition is in the same order as with one
// set per family (series sorted by name).
type registry struct {
	fams   []*family // schema order
	byID   map[string]*family
	global *owner // the sidecar's own series

	mu     sync.Mutex
	owners atomic.Pointer[[]*owner] // sorted by key; replaced, never changed in place
}

// family is one schema family.
type family struct {
	f      *schema.Family
	index  int          // position in schema.Families
	name   string       // f.PromName()
	header string       // "# HELP …\n# TYPE …\n"
	n      atomic.Int64 // series registered, over all owners
}

// owner holds the series of one target, or the sidecar's own.
type owner struct {
	r    *registry
	key  string         // the label text its series names start with
	sets []*metrics.Set // by family index
	n    []atomic.Int64 // series registered, by family index
}

func newRegistry() *registry {
	r := &registry{byID: make(map[string]*family, len(schema.Families))}
	for i, f := range schema.Families {
		name := f.PromName()
		fam := &family{f: f, index: i, name: name,
			header: "# HELP " + name + " " + escapeHelp(f.Help) + "\n# TYPE " + name + " " + f.Kind.PromType() + "\n"}
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
	o := &owner{r: r, key: key, sets: make([]*metrics.Set, len(r.fams)), n: make([]atomic.Int64, len(r.fams))}
	for i := range o.sets {
		o.sets[i] = metrics.NewSet()
	}
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
	for i := range o.n {
		if n := o.n[i].Swap(0); n != 0 {
			r.fams[i].n.Add(-n)
		}
	}
}

// writeFamily writes the series of fam, every owner's, without metadata.
func (r *registry) writeFamily(w io.Writer, fam *family) {
	for _, o := range *r.owners.Load() {
		if o.n[fam.index].Load() > 0 {
			o.sets[fam.index].WritePrometheus(w)
		}
	}
}

// family returns the family with the given schema ID; unknown IDs are a bug.
func (r *registry) family(id string) *family {
	if fam, ok := r.byID[id]; ok {
		return fam
	}
	panic("BUG: sidecar: no family " + id)
}

// WritePrometheus writes every family that has series, in schema order.
func (r *registry) WritePrometheus(w io.Writer) {
	for _, fam := range r.fams {
		if fam.n.Load() == 0 {
			continue
		}
		io.WriteString(w, fam.header)
		r.writeFamily(w, fam)
	}
}

var writerPool = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 32<<10) }}

// ServeHTTP streams the exposition with the Prometheus text Content-Type
// (each family's set is buffered by metrics.Set, the response is not).
func (r *registry) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("Content-Type", ContentType)
	bw := writerPool.Get().(*bufio.Writer)
	bw.Reset(w)
	r.WritePrometheus(bw)
	bw.Flush()
	bw.Reset(nil)
	writerPool.Put(bw)
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
	name  string        // metrics.Set name: prom_name{label="value",…}
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
	if m.own.sets[m.fam.index].UnregisterMetric(m.name) {
		m.own.n[m.fam.index].Add(-1)
		m.fam.n.Add(-1)
	}
}

// histSeries is an "le" histogram with the family's schema bounds.
type histSeries struct {
	seriesMeta
	prom *metrics.PrometheusHistogram
	// shadow keeps the same observations readable for the OTLP producer
	// (metrics.PrometheusHistogram has no getter); nil when OTLP is off. It is
	// guarded by the lock of the series' owner.
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
// from its family and metadata, registering it in the owner's set; then
// the family counts it, so a scrape never writes a family's metadata before
// one of its series.
func register[S any](o *owner, famID string, start time.Time, labels []label, build func(*family, *metrics.Set, seriesMeta) S) S {
	fam := o.r.family(famID)
	s := build(fam, o.sets[fam.index], newMeta(o, fam, start, labels))
	o.n[fam.index].Add(1)
	fam.n.Add(1)
	return s
}

func (o *owner) newHist(famID string, start time.Time, shadow bool, labels ...label) *histSeries {
	return register(o, famID, start, labels, func(fam *family, set *metrics.Set, m seriesMeta) *histSeries {
		h := &histSeries{seriesMeta: m, prom: set.NewPrometheusHistogramExt(m.name, fam.f.Buckets)}
		if shadow {
			h.shadow = &histShadow{counts: make([]uint64, len(fam.f.Buckets)+1)}
		}
		return h
	})
}

func (o *owner) newCounter(famID string, start time.Time, labels ...label) *counterSeries {
	return register(o, famID, start, labels, func(fam *family, set *metrics.Set, m seriesMeta) *counterSeries {
		return &counterSeries{seriesMeta: m, c: set.NewCounter(m.name)}
	})
}

func (o *owner) newFloatCounter(famID string, start time.Time, labels ...label) *floatCounterSeries {
	return register(o, famID, start, labels, func(fam *family, set *metrics.Set, m seriesMeta) *floatCounterSeries {
		return &floatCounterSeries{seriesMeta: m, c: set.NewFloatCounter(m.name)}
	})
}

// newGauge registers a gauge; f, if not nil, computes its value on read.
func (o *owner) newGauge(famID string, start time.Time, f func() float64, labels ...label) *gaugeSeries {
	return register(o, famID, start, labels, func(fam *family, set *metrics.Set, m seriesMeta) *gaugeSeries {
		return &gaugeSeries{seriesMeta: m, g: set.NewGauge(m.name, f)}
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
