package sidecar

import "math"

// histogramQuantile is PromQL's histogram_quantile(q, …) over one "le"
// histogram: bounds are the finite upper bounds in increasing order and cum
// the cumulative counts of those buckets followed by +Inf (len(bounds)+1).
// Like Prometheus it interpolates linearly inside the bucket that holds
// the rank q·count, takes 0 as the lower edge of the first bucket (when its
// bound is positive), answers the highest finite bound when the rank falls
// in +Inf, and NaN when there are no observations. q below 0 is -Inf,
// above 1 +Inf.
func histogramQuantile(q float64, bounds []float64, cum []uint64) float64 {
	switch {
	case math.IsNaN(q):
		return math.NaN()
	case q < 0:
		return math.Inf(-1)
	case q > 1:
		return math.Inf(1)
	}
	if len(cum) != len(bounds)+1 || len(bounds) == 0 {
		return math.NaN()
	}
	total := float64(cum[len(cum)-1])
	if total == 0 {
		return math.NaN()
	}
	rank := q * total
	b := 0
	for b < len(cum)-1 && float64(cum[b]) < rank {
		b++
	}
	if b == len(bounds) { // +Inf
		return bounds[len(bounds)-1]
	}
	if b == 0 && bounds[0] <= 0 {
		return bounds[0]
	}
	start, end := 0.0, bounds[b]
	count := float64(cum[b])
	if b > 0 {
		start = bounds[b-1]
		count -= float64(cum[b-1])
		rank -= float64(cum[b-1])
	}
	return start + (end-start)*(rank/count)
}

// bucketDelta sets d to now − then, bucket by bucket: the observations
// between two readings of a cumulative histogram. A bucket that went down
// (the series was removed and created again) means a reset: then d is now,
// as rate() would take it.
func bucketDelta(d, now, then []uint64) {
	for i := range now {
		if i >= len(then) || now[i] < then[i] {
			copy(d, now)
			return
		}
		d[i] = now[i] - then[i]
	}
}
