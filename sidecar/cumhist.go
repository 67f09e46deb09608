package sidecar

import (
	"sync"

	"github.com/VictoriaMetrics/metrics"

	"github.com/picometer/picometer/schema"
)

// This file is the request histograms' series: "le" histograms whose state
// is a schema.Hist in the target's cumulative request totals, so that a
// daemon's totals event can raise them by any amount per bucket and sum
// (an observing histogram can only add one value at a time). Both outputs
// read that one state under the target's lock: /metrics through
// appendProm (the same lines as histSeries writes), OTLP through the
// producer. aggregate_test.go (TestTotals*) and the golden expositions of
// registry_test.go cover it.

// cumHist is one request histogram series.
type cumHist struct {
	seriesMeta
	h  *schema.Hist // in the target's totals
	mu *sync.Mutex  // the target's lock: it guards h and ex
	ex []exemplar   // per bucket, +Inf last (exemplars.go); nil until its first exemplar
}

// cumHist returns the request histogram series of family famID over h.
// The caller holds t.mu.
func (t *target) cumHist(famID string, h *schema.Hist, extra ...label) *cumHist {
	s := register(t.own, famID, t.a.now(), t.labels(extra...), func(fam *family, _ *metrics.Set, m seriesMeta) *cumHist {
		return &cumHist{seriesMeta: m, h: h, mu: &t.mu}
	})
	t.add(s)
	return s
}

// appendProm writes the series as histSeries does, from the totals' state.
func (c *cumHist) appendProm(b []byte) []byte { return c.appendText(b, false) }

// appendOM writes the series for OpenMetrics: appendProm's lines with each
// bucket's exemplar.
func (c *cumHist) appendOM(b []byte) []byte { return c.appendText(b, true) }

func (c *cumHist) appendText(b []byte, withExemplars bool) []byte {
	var stack [maxStackBuckets + 1]uint64
	var exStack [maxStackBuckets + 1]exemplar
	n := len(c.fam.f.Buckets)
	counts := stack[:0]
	if n+1 <= len(stack) {
		counts = stack[:n+1]
	} else {
		counts = make([]uint64, n+1)
	}
	var ex []exemplar
	c.mu.Lock()
	copy(counts, c.h.Counts)
	sum := c.h.Sum
	if withExemplars && c.ex != nil {
		ex = exStack[:0]
		if n+1 > len(exStack) {
			ex = make([]exemplar, 0, n+1)
		}
		ex = append(ex, c.ex...)
	}
	c.mu.Unlock()
	var count uint64
	for _, v := range counts {
		count += v
	}
	return appendHistLines(b, c.fam, c.name, c.fam.f.Buckets, counts[:n], count, sum, ex)
}
