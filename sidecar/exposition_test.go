package sidecar

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/VictoriaMetrics/metrics"

	"github.com/picometer/picometer/schema"
)

// The exposition is written from the values (exposition.go); the text must
// stay what metrics.Set.WritePrometheus wrote. These tests hold each series
// type to the same metric in a metrics.Set, on values a line of text can
// get wrong: integers past 2^53 and 2^63, -0, NaN, infinities, tiny and
// huge floats.

var edgeFloats = []float64{0, math.Copysign(0, -1), 1, -1, 0.5, 1e-7, 0.1 + 0.2, 123456789, 1 << 53, 1<<53 + 1, 1 << 62,
	1 << 63, -1 << 63, 1e21, 1e22, 1e300, -1e300, math.SmallestNonzeroFloat64, math.MaxFloat64, math.Inf(1), math.Inf(-1), math.NaN(), 2.5e-5, 1.75}

// libraryText is what a metrics.Set holding one metric made by mk writes.
func libraryText(mk func(s *metrics.Set)) string {
	s := metrics.NewSet()
	mk(s)
	var b bytes.Buffer
	s.WritePrometheus(&b)
	return b.String()
}

// testOwner is an owner on a fresh registry.
func testOwner() *owner { return newRegistry().newOwner("") }

func TestExpositionCounters(t *testing.T) {
	lbl := label{schema.AttrDecodeReason, `we"ird\` + "\n"}
	for _, v := range []uint64{0, 1, 1 << 53, 1<<53 + 1, 1<<63 - 1, 1 << 63, math.MaxUint64} {
		c := testOwner().newCounter(schema.IDSidecarDecodeErrors, testNow, lbl)
		c.c.Set(v)
		want := libraryText(func(s *metrics.Set) { s.NewCounter(c.name).Set(v) })
		if got := string(c.appendProm(nil)); got != want {
			t.Errorf("counter %d: got %q, want %q", v, got, want)
		}
	}
	for _, v := range edgeFloats {
		c := testOwner().newFloatCounter(schema.IDBatchTime, testNow, batchLabels(3)...)
		c.c.Set(v)
		want := libraryText(func(s *metrics.Set) { s.NewFloatCounter(c.name).Set(v) })
		if got := string(c.appendProm(nil)); got != want {
			t.Errorf("float counter %v: got %q, want %q", v, got, want)
		}
	}
}

func TestExpositionGauges(t *testing.T) {
	for _, v := range edgeFloats {
		g := testOwner().newGauge(schema.IDSidecarConnections, testNow, nil)
		g.g.Set(v)
		want := libraryText(func(s *metrics.Set) { s.NewGauge(g.name, nil).Set(v) })
		if got := string(g.appendProm(nil)); got != want {
			t.Errorf("gauge %v: got %q, want %q", v, got, want)
		}
		f := func() float64 { return v }
		fg := testOwner().newGauge(schema.IDSidecarHeartbeat, testNow, f)
		want = libraryText(func(s *metrics.Set) { s.NewGauge(fg.name, f) })
		if got := string(fg.appendProm(nil)); got != want {
			t.Errorf("callback gauge %v: got %q, want %q", v, got, want)
		}
	}
}

// checkHistogram observes obs on a histogram series of every histogram
// family, with labels and without, and on a metrics.PrometheusHistogram of
// the same bounds: the texts must be equal.
func checkHistogram(t *testing.T, obs []float64) {
	t.Helper()
	for _, f := range schema.Families {
		if f.Kind != schema.KindHistogram {
			continue
		}
		for _, labels := range [][]label{nil, {{schema.AttrModel, `m"{x}=1,`}, {schema.AttrEngine, "picometer"}}} {
			h := testOwner().newHist(f.ID, testNow, false, labels...)
			lib := metrics.NewSet()
			ph := lib.NewPrometheusHistogramExt(h.name, f.Buckets)
			for _, v := range obs {
				h.observe(v)
				ph.Update(v)
			}
			var want bytes.Buffer
			lib.WritePrometheus(&want)
			if got := string(h.appendProm(nil)); got != want.String() {
				t.Fatalf("%s with %v: got\n%s\nwant\n%s", h.name, obs, got, want.String())
			}
		}
	}
}

func TestExpositionHistograms(t *testing.T) {
	checkHistogram(t, nil)
	checkHistogram(t, []float64{0.001, 0.0011, 5, 5, 2560, 2561, 1e9})
	checkHistogram(t, []float64{0.3, 0.2, 0.1})                  // a sum that is not an integer
	checkHistogram(t, []float64{1 << 62, 1 << 62, 1 << 62})      // a sum past int64
	checkHistogram(t, []float64{-1, math.NaN(), 0, math.Inf(1)}) // ignored, zero, +Inf
	checkHistogram(t, edgeFloats)
}

// FuzzExpositionHistogram holds the histogram's text to
// metrics.PrometheusHistogram's on arbitrary observations.
func FuzzExpositionHistogram(f *testing.F) {
	f.Add([]byte{})
	f.Add(binary.LittleEndian.AppendUint64(nil, math.Float64bits(0.25)))
	f.Fuzz(func(t *testing.T, data []byte) {
		var obs []float64
		for len(data) >= 8 && len(obs) < 64 {
			obs = append(obs, math.Float64frombits(binary.LittleEndian.Uint64(data)))
			data = data[8:]
		}
		checkHistogram(t, obs)
	})
}

// TestExpositionOrder registers series out of order, removes some and
// checks the owner's lists against a metrics.Set with the same metrics:
// same lines, same order (sorted by name).
func TestExpositionOrder(t *testing.T) {
	r := newRegistry()
	o := r.newOwner("")
	lib := metrics.NewSet()
	reasons := schema.AttrDecodeReason.Values
	var cs []*counterSeries
	for i := len(reasons) - 1; i >= 0; i -= 2 { // every other one, backwards
		c := o.newCounter(schema.IDSidecarDecodeErrors, testNow, label{schema.AttrDecodeReason, reasons[i]})
		c.c.Set(uint64(i))
		lib.NewCounter(c.name).Set(uint64(i))
		cs = append(cs, c)
	}
	for i := 0; i < len(reasons); i += 2 {
		c := o.newCounter(schema.IDSidecarDecodeErrors, testNow, label{schema.AttrDecodeReason, reasons[i]})
		c.c.Set(uint64(i))
		lib.NewCounter(c.name).Set(uint64(i))
	}
	for _, c := range cs[:len(cs)/2] {
		c.unregister()
		lib.UnregisterMetric(c.name)
	}
	var got, want bytes.Buffer
	r.writeFamily(&got, r.family(schema.IDSidecarDecodeErrors))
	lib.WritePrometheus(&want)
	if got.String() != want.String() {
		t.Fatalf("got\n%s\nwant\n%s", got.String(), want.String())
	}
	if n := strings.Count(got.String(), "\n"); n != len(reasons)-len(cs)/2 {
		t.Fatalf("%d lines, want %d", n, len(reasons)-len(cs)/2)
	}
}

// TestRegisterTwice: two series of one name are a bug, as in metrics.Set.
func TestRegisterTwice(t *testing.T) {
	o := testOwner()
	o.newCounter(schema.IDSidecarExportFailure, testNow)
	defer func() {
		want := "BUG: sidecar: series " + o.r.family(schema.IDSidecarExportFailure).name + " registered twice"
		if r := recover(); fmt.Sprint(r) != want {
			t.Fatalf("recovered %v", r)
		}
	}()
	o.newCounter(schema.IDSidecarExportFailure, testNow)
}

// TestRegisterForeignSeries: a series of a type exposition.go does not know,
// built through register in its metrics.Set, is still written (by the set),
// in its place among the others.
func TestRegisterForeignSeries(t *testing.T) {
	type foreign struct {
		seriesMeta
		c *metrics.Counter
	}
	r := newRegistry()
	o := r.newOwner("")
	a := o.newCounter(schema.IDSidecarDecodeErrors, testNow, label{schema.AttrDecodeReason, schema.ReasonMalformed})
	a.c.Set(3)
	x := register(o, schema.IDSidecarDecodeErrors, testNow, []label{{schema.AttrDecodeReason, schema.ReasonInvalidField}},
		func(_ *family, set *metrics.Set, m seriesMeta) *foreign {
			return &foreign{seriesMeta: m, c: set.NewCounter(m.name)}
		})
	x.c.Set(7)
	var got bytes.Buffer
	r.WritePrometheus(&got)
	fam := r.family(schema.IDSidecarDecodeErrors)
	want := fam.header + x.name + " 7\n" + a.name + " 3\n" // invalid_field sorts before malformed_json
	if got.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", got.String(), want)
	}
	x.unregister()
	got.Reset()
	r.WritePrometheus(&got)
	if want := fam.header + a.name + " 3\n"; got.String() != want {
		t.Fatalf("after unregister: got\n%s\nwant\n%s", got.String(), want)
	}
}

// TestExpositionAllocs locks the scrape's allocations: once the pool is
// warm, writing /metrics allocates nothing per series (the allowance is
// for the pool being emptied by a collection during the run).
func TestExpositionAllocs(t *testing.T) {
	a := newTestAggregator(true)
	populate(t, a, 8)
	var buf bytes.Buffer
	a.reg.WritePrometheus(&buf)
	lines := strings.Count(buf.String(), "\n")
	allocs := testing.AllocsPerRun(20, func() {
		buf.Reset()
		a.reg.WritePrometheus(&buf)
	})
	t.Logf("%d lines, %.1f allocations per scrape", lines, allocs)
	if allocs > 1 {
		t.Fatalf("%.1f allocations per scrape of %d lines, want ≤ 1", allocs, lines)
	}
}

// TestExpositionWhileObserving scrapes while observations go on: every
// histogram's text is a consistent one (cumulative buckets never decrease
// and end at _count). Run with -race, it also checks the locking.
func TestExpositionWhileObserving(t *testing.T) {
	r := newRegistry()
	o := r.newOwner("")
	h := o.newHist(schema.IDTTFT, testNow, false)
	stop, done := make(chan struct{}), make(chan int)
	go func() {
		n := 0
		for ; ; n++ {
			select {
			case <-stop:
				done <- n
				return
			default:
			}
			h.observe(float64(n%3000) / 100)
		}
	}()
	defer func() { close(stop); t.Logf("%d observations during the scrapes", <-done) }()
	for range 200 {
		var buf bytes.Buffer
		r.WritePrometheus(&buf)
		p := parseExposition(t, buf.String())
		var prev float64
		for i := range len(h.prom.bounds) + 1 {
			le := "+Inf"
			if i < len(h.prom.bounds) {
				le = strconv.FormatFloat(h.prom.bounds[i], 'g', -1, 64)
			}
			v, ok := p[seriesKey(h.fam.name+"_bucket", map[string]string{"le": le})]
			if !ok || v < prev {
				t.Fatalf("bucket le=%s = %v (%v) below the previous %v:\n%s", le, v, ok, prev, buf.String())
			}
			prev = v
		}
		if c := p[seriesKey(h.fam.name+"_count", nil)]; c != prev {
			t.Fatalf("_count %v, +Inf bucket %v", c, prev)
		}
	}
}
