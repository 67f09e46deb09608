package sidecar

import (
	"math"
	"sync"
)

// leHistogram is a Prometheus "le" histogram with fixed upper bounds: what
// metrics.PrometheusHistogram (NewPrometheusHistogramExt) stores and how it
// counts, plus the reader it lacks. The only way to read a
// metrics.PrometheusHistogram is its own text, formatted with fmt per
// bucket line; exposition.go writes this one straight from its counts.
// exposition_test.go holds the two to the same text, observation for
// observation.
type leHistogram struct {
	bounds []float64 // strictly increasing, finite; shared with the family

	mu      sync.Mutex
	buckets []uint64 // per bound, not cumulative: observations ≤ bounds[i] and > bounds[i-1]
	count   uint64   // every observation, the +Inf bucket included
	sum     float64
}

// newLEHistogram returns an empty histogram with the given bounds, which it
// keeps (it does not copy them). A last bound of +Inf is dropped, as
// metrics.PrometheusHistogram does: the +Inf bucket is always there.
func newLEHistogram(bounds []float64) *leHistogram {
	if n := len(bounds); n > 0 && math.IsInf(bounds[n-1], 1) {
		bounds = bounds[:n-1]
	}
	return &leHistogram{bounds: bounds, buckets: make([]uint64, len(bounds))}
}

// Update observes v. Negative values and NaN are ignored, as
// metrics.PrometheusHistogram.Update ignores them.
func (h *leHistogram) Update(v float64) {
	if math.IsNaN(v) || v < 0 {
		return
	}
	i := 0
	for i < len(h.bounds) && v > h.bounds[i] {
		i++
	}
	h.mu.Lock()
	h.sum += v
	h.count++
	if i < len(h.buckets) {
		h.buckets[i]++
	}
	h.mu.Unlock()
}

// read copies the bucket counts (not cumulative) into buckets, which must
// have len(h.bounds) elements, and returns the count and the sum, all from
// one moment.
func (h *leHistogram) read(buckets []uint64) (count uint64, sum float64) {
	h.mu.Lock()
	copy(buckets, h.buckets)
	count, sum = h.count, h.sum
	h.mu.Unlock()
	return count, sum
}
