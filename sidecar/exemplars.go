package sidecar

import (
	"encoding/hex"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/picometer/picometer/schema"
)

// This file keeps exemplars (issue 28): for the time to first token, time
// per output token and request duration histograms, each bucket remembers
// the last sampled request observed in it (its trace id, its SERVER span's
// id, the value and when it finished), so that a slow bucket on a dashboard
// leads to the trace of a request that was in it. Both outputs carry them:
// OTLP as the data points' exemplars, /metrics as OpenMetrics exemplars on
// the "_bucket" lines, written only when the scraper asks for
// application/openmetrics-text (exposition.go); the 0.0.4 text stays
// byte-identical.
//
// Only requests whose spans the sidecar exports are exemplars (the daemon
// sampled them and tracing is on): an exemplar whose trace no backend has
// would lead nowhere. A bucket keeps one exemplar, the latest, as the OTel
// SDK's fixed-size reservoir for explicit buckets does (one per bucket);
// exemplars are not rebuilt from totals events, which carry no ids. The
// store of a series is made at its first exemplar: 40 bytes per bucket.
// exemplars_test.go covers it.

// exemplar is one bucket's last sampled request; a zero trace is none.
type exemplar struct {
	trace    [16]byte
	span     [8]byte
	value    float64
	unixNano int64 // when the request finished (sidecar's idea of the wall clock)
}

// observe records e as the exemplar of the bucket v falls in. The caller
// holds the target's lock.
func (c *cumHist) observe(v float64, e exemplar) {
	if !(v >= 0) {
		return
	}
	if c.ex == nil {
		c.ex = make([]exemplar, len(c.fam.f.Buckets)+1)
	}
	e.value = v
	c.ex[schema.BucketIndex(c.fam.f.Buckets, v)] = e
}

// exemplify records the exemplars of request r of operation op, which
// applyRequest has added (the TTFT's in the series of its cache outcome, for
// an engine with KV blocks of blockSize tokens); ts is its event's time,
// used when r has no start time. The caller holds t.mu.
func (t *target) exemplify(op int, r *schema.RequestBody, blockSize int, ts int64) {
	var e exemplar
	if !r.Sampled || !decodeHex(e.trace[:], r.TraceID) || !decodeHex(e.span[:], r.SpanID) {
		return
	}
	e.unixNano = ts
	if r.StartUnixNano != 0 {
		e.unixNano = r.StartUnixNano + r.FinishUS*int64(time.Microsecond)
	}
	rs := &t.req[op]
	if r.FirstTokenUS >= 0 {
		rs.ttft[indexOf(schema.CacheOutcomes, schema.CacheOutcome(r, blockSize))].observe(seconds(r.FirstTokenUS), e)
		if r.CompletionTokens >= 2 {
			rs.hists[schema.HistTimePerOutputToken].observe(seconds(r.LastTokenUS-r.FirstTokenUS)/float64(r.CompletionTokens-1), e)
		}
	}
	d := rs.hists[schema.HistRequestDuration]
	if et := schema.RequestErrorType(r); et != "" {
		d = rs.durationErr[indexOf(schema.ErrorTypes, et)] // syncFailed made it
	}
	if d != nil {
		d.observe(seconds(r.FinishUS), e)
	}
}

// appendExemplar appends bucket i's exemplar to a "_bucket" line (before
// its newline), in OpenMetrics' form:
// ` # {trace_id="…",span_id="…"} value timestamp`.
func appendExemplar(b []byte, ex []exemplar, i int) []byte {
	if i >= len(ex) || ex[i].trace == ([16]byte{}) {
		return b
	}
	e := &ex[i]
	b = append(b, ` # {trace_id="`...)
	b = hex.AppendEncode(b, e.trace[:])
	b = append(b, `",span_id="`...)
	b = hex.AppendEncode(b, e.span[:])
	b = append(b, `"} `...)
	b = strconv.AppendFloat(b, e.value, 'g', -1, 64)
	b = append(b, ' ')
	b = strconv.AppendInt(b, e.unixNano/1e9, 10)
	b = append(b, '.')
	ms := e.unixNano % 1e9 / 1e6
	b = append(b, byte('0'+ms/100), byte('0'+ms/10%10), byte('0'+ms%10))
	return b
}

// otlpExemplars returns the series' exemplars as OTLP's, in bucket order.
func (c *cumHist) otlpExemplars() []metricdata.Exemplar[float64] {
	var out []metricdata.Exemplar[float64]
	for i := range c.ex {
		e := c.ex[i]
		if e.trace == ([16]byte{}) {
			continue
		}
		out = append(out, metricdata.Exemplar[float64]{Time: time.Unix(0, e.unixNano), Value: e.value,
			TraceID: e.trace[:], SpanID: e.span[:]})
	}
	return out
}
