package sidecar

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"

	"github.com/VictoriaMetrics/metrics"
)

// ContentType is the Content-Type of /metrics (Prometheus text format 0.0.4).
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// OpenMetricsType is the Content-Type of /metrics for a scraper that asks
// for OpenMetrics (openmetrics.go): the same series, with exemplars.
const OpenMetricsType = "application/openmetrics-text; version=1.0.0; charset=utf-8"

// This file writes /metrics: the Prometheus text of every series, straight
// from the values (metrics.Counter, FloatCounter and Gauge, and
// leHistogram), into one reusable buffer that is written out every
// flushBytes. Nothing is sorted and nothing is allocated per series: each
// owner keeps its series of a family sorted by name as they are registered
// (registry.go), which is the order metrics.Set.WritePrometheus sorted them
// into on every scrape, and every byte is the one metrics.Set wrote
// (exposition_test.go compares the two, value by value and on whole
// expositions; the golden files are the text metrics.Set wrote).
//
// Why: at max_targets (64 targets with 210-byte model names, about 10 MB
// of text) metrics.Set.WritePrometheus buffered and sorted each set and
// formatted every line with fmt, allocating about 41 MB per scrape; with the
// sidecar's small memory limit the collector then ran through the scrape
// (184–258 ms over HTTP during a hello flood, issue 13's bound is 100 ms).

// flushBytes is how much exposition text is buffered before it is written.
const flushBytes = 32 << 10

// expoWriter is a scrape's buffer; pooled, so a scrape allocates nothing
// once the pool is warm.
type expoWriter struct {
	w   io.Writer
	b   []byte
	err error
	om  bool // OpenMetrics: its metadata, exemplars and "# EOF"
}

var expoPool = sync.Pool{New: func() any { return &expoWriter{b: make([]byte, 0, flushBytes+8<<10)} }}

// flush writes the buffer out if it holds flushBytes or more, or if all.
func (e *expoWriter) flush(all bool) {
	if len(e.b) == 0 || (!all && len(e.b) < flushBytes) {
		return
	}
	if e.err == nil {
		_, e.err = e.w.Write(e.b)
	}
	e.b = e.b[:0]
}

// writeSeries appends the series of fam that o has.
func (e *expoWriter) writeSeries(o *owner, fam *family) {
	for _, s := range o.exposed(fam) {
		if x, ok := s.(omExposer); ok && e.om {
			e.b = x.appendOM(e.b)
		} else {
			e.b = s.appendProm(e.b)
		}
		e.flush(false)
	}
}

// write writes every family that has series, in schema order: "# HELP"
// and "# TYPE" from schema/, then every owner's series of that family, the
// owners in order of their keys.
func (r *registry) write(e *expoWriter) {
	owners := *r.owners.Load()
	for _, fam := range r.fams {
		if fam.n.Load() == 0 {
			continue
		}
		if e.om {
			e.b = append(e.b, fam.omHeader...)
		} else {
			e.b = append(e.b, fam.header...)
		}
		for _, o := range owners {
			e.writeSeries(o, fam)
		}
	}
	if e.om {
		e.b = append(e.b, "# EOF\n"...)
	}
}

// run calls f with a pooled writer onto w and writes out what f left.
func run(w io.Writer, f func(e *expoWriter)) error { return runAs(w, false, f) }

// runAs is run, writing OpenMetrics if om.
func runAs(w io.Writer, om bool, f func(e *expoWriter)) error {
	e := expoPool.Get().(*expoWriter)
	e.w, e.b, e.err, e.om = w, e.b[:0], nil, om
	f(e)
	e.flush(true)
	err := e.err
	e.w = nil
	if cap(e.b) <= 4*flushBytes { // a huge line grew it: let that go
		expoPool.Put(e)
	}
	return err
}

// WritePrometheus writes every family that has series, in schema order.
func (r *registry) WritePrometheus(w io.Writer) {
	run(w, r.write)
}

// writeFamily writes the series of fam, every owner's, without metadata.
func (r *registry) writeFamily(w io.Writer, fam *family) {
	run(w, func(e *expoWriter) {
		for _, o := range *r.owners.Load() {
			e.writeSeries(o, fam)
		}
	})
}

// ServeHTTP streams the exposition with the Prometheus text Content-Type,
// flushBytes at a time, or OpenMetrics when the scraper prefers it
// (negotiate). It does not gzip, even for a scraper that accepts
// it (Prometheus does): at max_targets gzip (fastest level) shrinks the
// ~10 MB 60-fold but costs the sidecar ~8 ms of CPU per scrape against ~1
// ms for the text (BenchmarkScrapeGzip), and a scrape over loopback during
// the hello flood took twice as long with it (38 ms against 18 ms, median),
// the scraper decompressing on the same cores. The sidecar runs beside
// the daemon on its node, so its CPU is the engine's.
func (r *registry) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if ct, om := negotiate(req.Header.Get("Accept")); om {
		w.Header().Set("Content-Type", ct)
		r.WriteOpenMetrics(w)
		return
	}
	w.Header().Set("Content-Type", ContentType)
	r.WritePrometheus(w)
}

// exposer is a series as /metrics writes it.
type exposer interface {
	meta() *seriesMeta
	// appendProm appends the series' lines to b.
	appendProm(b []byte) []byte
}

// appendValueLine appends "name value\n" for a counter.
func appendUintLine(b []byte, name string, v uint64) []byte {
	b = append(b, name...)
	b = append(b, ' ')
	b = strconv.AppendUint(b, v, 10)
	return append(b, '\n')
}

// appendFloat appends v as metrics.FloatCounter writes it (%g).
func appendFloat(b []byte, v float64) []byte {
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}

// appendIntOrFloat appends v as metrics.Gauge writes it, and
// metrics.PrometheusHistogram its sum: as an integer when it is one that
// int64 holds, else %g.
func appendIntOrFloat(b []byte, v float64) []byte {
	if float64(int64(v)) == v {
		return strconv.AppendInt(b, int64(v), 10)
	}
	return appendFloat(b, v)
}

func (s *counterSeries) appendProm(b []byte) []byte {
	return appendUintLine(b, s.name, s.c.Get())
}

func (s *floatCounterSeries) appendProm(b []byte) []byte {
	b = append(b, s.name...)
	b = append(b, ' ')
	b = appendFloat(b, s.c.Get())
	return append(b, '\n')
}

func (s *gaugeSeries) appendProm(b []byte) []byte {
	b = append(b, s.name...)
	b = append(b, ' ')
	b = appendIntOrFloat(b, s.g.Get())
	return append(b, '\n')
}

// maxStackBuckets is the most bounds a histogram is read with no allocation
// (schema's largest has 22).
const maxStackBuckets = 32

// appendProm writes the series as metrics.PrometheusHistogram does: a
// cumulative "_bucket" line per bound, le="+Inf" (the count), "_sum" and
// "_count".
func (h *histSeries) appendProm(b []byte) []byte {
	var stack [maxStackBuckets]uint64
	buckets := stack[:0]
	if n := len(h.prom.bounds); n <= maxStackBuckets {
		buckets = stack[:n]
	} else {
		buckets = make([]uint64, n)
	}
	count, sum := h.prom.read(buckets)
	return appendHistLines(b, h.fam, h.name, h.prom.bounds, buckets, count, sum, nil)
}

// appendHistLines appends the lines of histogram series name (family fam,
// finite bounds, per-bucket counts, count and sum) as
// metrics.PrometheusHistogram writes them; with ex (OpenMetrics only), each
// bucket line carries that bucket's exemplar, if any.
func appendHistLines(b []byte, fam *family, name string, bounds []float64, buckets []uint64, count uint64, sum float64, ex []exemplar) []byte {
	labels := name[len(fam.name):] // "" or "{…}"
	name = fam.name
	les := fam.les
	if len(les) != len(buckets)+1 {
		les = leLabels(bounds)
	}
	var cum uint64
	for i, le := range les {
		if i < len(buckets) {
			cum += buckets[i]
		} else {
			cum = count
		}
		b = append(b, name...)
		b = append(b, "_bucket{"...)
		if labels != "" {
			b = append(b, labels[1:len(labels)-1]...)
			b = append(b, ',')
		}
		b = append(b, le...)
		b = strconv.AppendUint(b, cum, 10)
		if ex != nil {
			b = appendExemplar(b, ex, i)
		}
		b = append(b, '\n')
	}
	b = append(b, name...)
	b = append(b, "_sum"...)
	b = append(b, labels...)
	b = append(b, ' ')
	b = appendIntOrFloat(b, sum)
	b = append(b, '\n')
	b = append(b, name...)
	b = append(b, "_count"...)
	b = append(b, labels...)
	b = append(b, ' ')
	b = strconv.AppendUint(b, count, 10)
	return append(b, '\n')
}

// leLabels returns, per bound and then +Inf, the end of a bucket line's
// labels up to its value: `le="0.005"} `, formatted as
// metrics.PrometheusHistogram formats them (%v).
func leLabels(bounds []float64) []string {
	les := make([]string, 0, len(bounds)+1)
	for _, ub := range bounds {
		les = append(les, fmt.Sprintf(`le="%v"} `, ub))
	}
	return append(les, `le="+Inf"} `)
}

// setSeries is a series of a type this file does not know, registered
// through register with a metrics.Set of its own: the set writes it (slow:
// metrics.Set formats with fmt, but correct).
type setSeries struct {
	m   *seriesMeta
	set *metrics.Set
}

func (s *setSeries) meta() *seriesMeta { return s.m }

func (s *setSeries) appendProm(b []byte) []byte {
	buf := bytes.NewBuffer(b)
	s.set.WritePrometheus(buf)
	return buf.Bytes()
}
