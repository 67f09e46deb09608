package schema

import (
	"fmt"
	"strconv"
)

// Kind is an instrument kind.
type Kind uint8

// Instrument kinds. The Prometheus type follows from the kind: counters are
// "counter", histograms "histogram", everything else "gauge".
const (
	// KindCounter is a monotonic sum (OTel Counter; Prometheus counter, "_total").
	KindCounter Kind = iota + 1
	// KindUpDownCounter is a non-monotonic sum (OTel UpDownCounter; Prometheus gauge).
	KindUpDownCounter
	// KindGauge is a sampled value (OTel Gauge; Prometheus gauge).
	KindGauge
	// KindHistogram is an explicit-bucket histogram (Prometheus "le" histogram).
	KindHistogram
	// KindInfo is a gauge whose value is always 1 and whose attributes carry
	// facts (OTel Gauge; Prometheus gauge named "…_info").
	KindInfo
)

// String returns the kind's name as used in METRICS.md.
func (k Kind) String() string {
	switch k {
	case KindCounter:
		return "counter"
	case KindUpDownCounter:
		return "updowncounter"
	case KindGauge:
		return "gauge"
	case KindHistogram:
		return "histogram"
	case KindInfo:
		return "info"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// PromType returns the "# TYPE" of the kind in the Prometheus text format.
func (k Kind) PromType() string {
	switch k {
	case KindCounter:
		return "counter"
	case KindHistogram:
		return "histogram"
	}
	return "gauge"
}

// Attr is an attribute key with its value set.
type Attr struct {
	// Key is the OpenTelemetry attribute key, e.g. "gen_ai.request.model".
	Key string
	// Values is the closed set of values the attribute may take, in a stable
	// order. Nil means the value is free-form (a configured name or a number
	// from the engine's configuration): Doc then says where it comes from.
	Values []string
	// Doc says what the attribute means.
	Doc string
}

// PromLabel returns the Prometheus label name derived from Key.
func (a *Attr) PromLabel() string { return PromLabel(a.Key) }

// Allows reports whether v is a valid value of the attribute.
func (a *Attr) Allows(v string) bool {
	if a.Values == nil {
		return v != ""
	}
	for _, x := range a.Values {
		if x == v {
			return true
		}
	}
	return false
}

// Source says which input feeds a family.
type Source string

// Sources of metric families.
const (
	SourceRequest Source = "request" // request events, one observation per request
	SourceEngine  Source = "engine"  // engine snapshots (gauges directly, counters as deltas)
	SourceSteps   Source = "steps"   // step records carried by engine snapshots
	SourceSidecar Source = "sidecar" // the sidecar itself
)

// Family declares one metric family.
type Family struct {
	// ID is the stable identifier code uses to find the family, e.g. "ttft".
	ID string
	// Name is the OpenTelemetry metric name: lowercase, dot-separated.
	Name string
	// Unit is the UCUM unit: "s", "1", or an annotation such as "{token}".
	Unit string
	// Kind is the instrument kind.
	Kind Kind
	// Help is the description, used for OTel and for Prometheus "# HELP".
	Help string
	// Attrs are the attributes every data point carries, in label order.
	// Optional attributes (present only on some points) are listed in
	// Optional.
	Attrs []*Attr
	// Optional are attributes that only some data points carry (e.g.
	// error.type on a request duration that failed).
	Optional []*Attr
	// Buckets are the histogram's explicit upper bounds (excluding +Inf),
	// strictly increasing. Nil for other kinds.
	Buckets []float64
	// Source says which input feeds the family.
	Source Source
}

// PromName returns the family's derived Prometheus name (without the
// "_bucket"/"_sum"/"_count" of histogram series).
func (f *Family) PromName() string { return PromName(f.Name, f.Unit, f.Kind) }

// Exposed returns every series name the family exposes to Prometheus: the
// name itself for counters and gauges, name_bucket, name_sum and name_count
// for histograms.
func (f *Family) Exposed() []string {
	n := f.PromName()
	if f.Kind == KindHistogram {
		return []string{n + "_bucket", n + "_sum", n + "_count"}
	}
	return []string{n}
}

// AllAttrs returns Attrs followed by Optional.
func (f *Family) AllAttrs() []*Attr {
	out := make([]*Attr, 0, len(f.Attrs)+len(f.Optional))
	out = append(out, f.Attrs...)
	return append(out, f.Optional...)
}

// Lookup returns the family with the given ID. It panics with a BUG: prefix
// when there is none: IDs are compile-time constants of this package's users.
func Lookup(id string) *Family {
	if f, ok := byID[id]; ok {
		return f
	}
	panic(fmt.Sprintf("BUG: schema: no metric family with id %q", id))
}

// Find returns the family with the given ID, or nil.
func Find(id string) *Family { return byID[id] }

// ByPromName returns the family exposing the given Prometheus series name
// (including the histogram suffixes), or nil.
func ByPromName(series string) *Family { return byExposed[series] }

var (
	byID      = map[string]*Family{}
	byExposed = map[string]*Family{}
)

func init() {
	for _, f := range Families {
		if _, dup := byID[f.ID]; dup {
			panic("BUG: schema: duplicate family id " + f.ID)
		}
		byID[f.ID] = f
		for _, s := range f.Exposed() {
			if g, dup := byExposed[s]; dup {
				panic("BUG: schema: families " + g.ID + " and " + f.ID + " both expose " + s)
			}
			byExposed[s] = f
		}
	}
}
