package sidecar

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/VictoriaMetrics/metrics"

	"github.com/picometer/picometer/schema"
)

// This file is the request histograms' series: "le" histograms whose state
// is a schema.Hist in the target's cumulative request totals, so that a
// daemon's totals event can raise them by any amount per bucket and sum
// (metrics.PrometheusHistogram can only observe one value at a time). Both
// outputs read that one state: /metrics through a writer registered with
// the target's metrics.Set of the family (the exposition is, line for line,
// what metrics.PrometheusHistogram writes), OTLP through the producer.
// aggregate_test.go (TestTotals*) and the golden expositions of
// registry_test.go cover it.

// cumFamily is the request histograms of one target and family: one writer
// of the target's set for the family writes them all, in name order.
type cumFamily struct {
	mu  *sync.Mutex // the target's lock: it guards the histograms' state
	les []string    // `le="…"` of each bound, as metrics.PrometheusHistogram writes it
	hs  []*cumHist  // sorted by name
}

var cumBufs = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

// cumHist is one request histogram series.
type cumHist struct {
	seriesMeta
	h      *schema.Hist // in the target's totals
	cf     *cumFamily
	bucket string // name_bucket{labels, without the closing brace and with a comma if labels
	sum    string // name_sum{labels} (with the space)
	count  string // name_count{labels} (with the space)
}

// cumHist returns the request histogram series of family famID over h,
// creating its family writer on first use. The caller holds t.mu.
func (t *target) cumHist(famID string, h *schema.Hist, extra ...label) *cumHist {
	cf := t.cum[famID]
	if cf == nil {
		fam := t.a.reg.family(famID)
		cf = &cumFamily{mu: &t.mu}
		for _, ub := range fam.f.Buckets {
			cf.les = append(cf.les, fmt.Sprintf(`le="%v"`, ub)) // as metrics.PrometheusHistogram writes it
		}
		t.own.sets[fam.index].RegisterMetricsWriter(cf.write)
		t.cum[famID] = cf
	}
	s := register(t.own, famID, t.a.now(), t.labels(extra...), func(fam *family, _ *metrics.Set, m seriesMeta) *cumHist {
		c := &cumHist{seriesMeta: m, h: h, cf: cf}
		name, labels := m.name, ""
		if i := strings.IndexByte(m.name, '{'); i >= 0 {
			name, labels = m.name[:i], m.name[i:]
		}
		if labels == "" {
			c.bucket = name + "_bucket{"
		} else {
			c.bucket = name + "_bucket" + labels[:len(labels)-1] + ","
		}
		c.sum, c.count = name+"_sum"+labels+" ", name+"_count"+labels+" "
		return c
	})
	i, _ := slices.BinarySearchFunc(cf.hs, s.name, func(x *cumHist, name string) int { return strings.Compare(x.name, name) })
	cf.hs = slices.Insert(cf.hs, i, s)
	t.add(s)
	return s
}

// unregister removes the series from its family writer.
func (c *cumHist) unregister() {
	if i := slices.Index(c.cf.hs, c); i >= 0 {
		c.cf.hs = slices.Delete(c.cf.hs, i, i+1)
		c.own.n[c.fam.index].Add(-1)
		c.fam.n.Add(-1)
	}
}

// write writes the family's histograms as metrics.PrometheusHistogram
// does: cumulative buckets, +Inf, _sum (an integer when it is one), _count.
func (cf *cumFamily) write(w io.Writer) {
	bp := cumBufs.Get().(*[]byte)
	b := (*bp)[:0]
	cf.mu.Lock()
	for _, c := range cf.hs {
		var cum uint64
		for i, le := range cf.les {
			if i < len(c.h.Counts) {
				cum += c.h.Counts[i]
			}
			b = append(append(append(b, c.bucket...), le...), "} "...)
			b = strconv.AppendUint(b, cum, 10)
			b = append(b, '\n')
		}
		if n := len(cf.les); n < len(c.h.Counts) {
			cum += c.h.Counts[n]
		}
		b = append(append(b, c.bucket...), `le="+Inf"} `...)
		b = strconv.AppendUint(b, cum, 10)
		b = append(append(b, '\n'), c.sum...)
		if s := c.h.Sum; float64(int64(s)) == s {
			b = strconv.AppendInt(b, int64(s), 10)
		} else {
			b = strconv.AppendFloat(b, s, 'g', -1, 64)
		}
		b = append(append(b, '\n'), c.count...)
		b = strconv.AppendUint(b, cum, 10)
		b = append(b, '\n')
	}
	cf.mu.Unlock()
	w.Write(b)
	*bp = b
	cumBufs.Put(bp)
}
