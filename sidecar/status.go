package sidecar

import (
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/picometer/picometer/schema"
)

// StatusContentType is the Content-Type of /api/v1/status.
const StatusContentType = "application/json; charset=utf-8"

// view is what one page or one /api/v1/status answer shows: the live
// reading (totals and gauges at this moment, the same numbers /metrics
// writes) and the rings. It is only valid while history.mu is held.
type view struct {
	h    *history
	now  time.Time
	live *reading
	// per live target, its rings (nil: beyond MaxHistoryTargets)
	hist []*targetHistory
}

// viewLocked reads the aggregation now; the caller holds h.mu.
func (h *history) viewLocked(now time.Time) view {
	h.agg.read(&h.live, false, nil)
	v := view{h: h, now: now, live: &h.live, hist: h.viewHist[:0]}
	for i := range h.live.targets {
		v.hist = append(v.hist, h.targets[h.live.targets[i].key])
	}
	h.viewHist = v.hist
	return v
}

// slot is the ring slot of step k of the h.n steps held (0 the oldest).
func (h *history) slot(k int) int { return (h.head - h.n + k + 2*HistoryLen) % HistoryLen }

// at is field's value at step k.
func (th *targetHistory) at(h *history, k, field int) float32 {
	return th.vals[h.slot(k)*hFields+field]
}

func (h *history) selfAt(k, field int) float32 { return h.self[h.slot(k)*sFields+field] }

// ServeStatus serves /api/v1/status: the page's numbers as JSON.
func (h *history) ServeStatus(w http.ResponseWriter, r *http.Request) {
	h.serveView(w, r, StatusContentType, h.appendStatus)
}

// serveView answers a GET or HEAD (405 otherwise) with what appendBody
// writes of the current view, into h.out under h.mu, never cached.
func (h *history) serveView(w http.ResponseWriter, r *http.Request, contentType string, appendBody func([]byte, view) []byte) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	h.mu.Lock()
	b := appendBody(h.out[:0], h.viewLocked(h.agg.now()))
	h.out = b
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Cache-Control", "no-store")
	w.Write(b)
	h.mu.Unlock()
}

// statusSeries names the target ring fields /api/v1/status exports.
var statusSeries = []struct {
	name  string
	field int
}{
	{"requests_per_second", hReqRate},
	{"errors_per_second", hErrRate},
	{"generation_tokens_per_second", hTokRate},
	{"prompt_tokens_per_second", hPromptRate},
	{"ttft_p50_seconds", hTTFT50},
	{"ttft_p99_seconds", hTTFT99},
	{"itl_p50_seconds", hITL50},
	{"itl_p99_seconds", hITL99},
	{"time_per_output_token_p50_seconds", hTPOT50},
	{"requests_running", hRunning},
	{"slots", hSlots},
	{"requests_waiting", hWaiting},
	{"kv_cache_usage_ratio", hKV},
	{"spec_acceptance_ratio", hSpecRate},
	{"spec_accepted_per_draft", hSpecLen},
	{"events_lost_per_second", hLostRate},
	{"events_dropped_per_second", hDropRate},
}

// appendStatus appends the JSON document of v to b. Its shape is documented
// in the package doc (# Status page).
func (h *history) appendStatus(b []byte, v view) []byte {
	b = append(b, `{"time":`...)
	b = strconv.AppendQuote(b, v.now.UTC().Format(time.RFC3339Nano))
	b = append(b, `,"step_seconds":`...)
	b = strconv.AppendInt(b, int64(HistoryStep/time.Second), 10)
	b = append(b, `,"quantile_window_seconds":`...)
	b = strconv.AppendInt(b, int64(QuantileWindow/time.Second), 10)
	b = append(b, `,"times":[`...)
	for k := range h.n {
		if k > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendFloat(b, float64(h.times[h.slot(k)])/1e9, 'f', 3, 64)
	}
	b = append(b, `],"sidecar":{"connections":`...)
	b = appendNum(b, v.live.connections)
	b = append(b, `,"events_total":{`...)
	for i, k := range schema.AttrEventKind.Values {
		b = appendKeyUint(b, i, k, v.live.events[i])
	}
	b = append(b, `},"rejected_total":{`...)
	for i, k := range schema.DecodeReasons {
		b = appendKeyUint(b, i, k, v.live.rejected[i])
	}
	b = append(b, `},"series":{"events_per_second":`...)
	b = h.appendRing(b, func(k int) float32 { return h.selfAt(k, sEventRate) })
	b = append(b, `,"rejected_per_second":{`...)
	for i, k := range schema.DecodeReasons {
		b = h.appendKeyRing(b, i, k, func(k int) float32 { return h.selfAt(k, sRejected0+i) })
	}
	b = append(b, `}}},"targets":[`...)
	for i := range v.live.targets {
		if i > 0 {
			b = append(b, ',')
		}
		b = h.appendTarget(b, &v.live.targets[i], v.hist[i])
	}
	return append(b, "]}\n"...)
}

func (h *history) appendTarget(b []byte, tr *targetReading, th *targetHistory) []byte {
	b = append(b, `{"model":`...)
	b = strconv.AppendQuote(b, tr.key.model)
	b = append(b, `,"engine":`...)
	b = strconv.AppendQuote(b, tr.key.engine)
	b = append(b, `,"connected":`...)
	b = strconv.AppendBool(b, tr.connected)
	b = append(b, `,"totals":{`...)
	b = appendKeyUint(b, 0, "requests", tr.requests)
	b = appendKeyUint(b, 1, "errors", sum(tr.failed))
	b = appendKeyUint(b, 2, "prompt_tokens", tr.promptTokens)
	b = appendKeyUint(b, 3, "generation_tokens", tr.genTokens)
	b = appendKeyUint(b, 4, "events_lost", tr.lost)
	b = appendKeyUint(b, 5, "events_dropped", tr.dropped)
	b = appendKeyUint(b, 6, "spec_draft_tokens", tr.specDraftTokens)
	b = appendKeyUint(b, 7, "spec_accepted_tokens", tr.specAccepted)
	b = appendKeyUint(b, 8, "constrained_requests", tr.constrained)
	b = appendKeyUint(b, 9, "constrained_valid", tr.constrainedValid)
	b = appendKeyUint(b, 10, "tool_calls", tr.toolCalls)
	b = appendKeyUint(b, 11, "prefix_cache_queries", tr.prefixQueries)
	b = appendKeyUint(b, 12, "prefix_cache_hits", tr.prefixHits)
	b = append(b, `,"errors_by_type":{`...)
	for e, et := range schema.ErrorTypes {
		b = appendKeyUint(b, e, et, tr.failed[e])
	}
	b = append(b, `}},"now":{`...)
	if tr.hasGauges {
		b = appendKeyNum(b, 0, "requests_running", tr.running)
		b = appendKeyNum(b, 1, "requests_waiting", tr.waiting)
		b = appendKeyNum(b, 2, "slots", tr.slots)
		b = appendKeyNum(b, 3, "kv_cache_usage_ratio", tr.kvUse)
		b = appendKeyNum(b, 4, "prefix_cache_blocks", tr.kvCached)
	}
	b = append(b, `},"ttft_by_cache":{`...)
	for c, name := range schema.CacheOutcomes {
		b = appendKey(b, c, name)
		b = append(b, `{"requests":`...)
		b = strconv.AppendUint(b, tr.ttftCacheN[c], 10)
		b = append(b, `,"mean_seconds":`...)
		b = appendNum(b, tr.ttftCacheSum[c]/float64(tr.ttftCacheN[c])) // null without requests
		b = append(b, '}')
	}
	b = append(b, `},"constraint_mean_seconds":{"mask_per_token":`...)
	b = appendNum(b, tr.maskMean)
	b = append(b, `,"compile":`...)
	b = appendNum(b, tr.compileMean)
	b = append(b, `},"decode_time_by_batch_size":[`...)
	first := true
	for n := range schema.MaxBatch {
		if tr.batchSteps[n] == 0 {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(b, `{"batch_size":`...)
		b = strconv.AppendInt(b, int64(n+1), 10)
		b = append(b, `,"steps":`...)
		b = strconv.AppendUint(b, tr.batchSteps[n], 10)
		b = append(b, `,"mean_seconds":`...)
		b = appendNum(b, tr.batchTime[n]/float64(tr.batchSteps[n]))
		b = append(b, '}')
	}
	b = append(b, ']')
	if th != nil {
		b = append(b, `,"series":{`...)
		for i, s := range statusSeries {
			b = h.appendKeyRing(b, i, s.name, func(k int) float32 { return th.at(h, k, s.field) })
		}
		b = append(b, `,"errors_per_second_by_type":{`...)
		for e, et := range schema.ErrorTypes {
			b = h.appendKeyRing(b, e, et, func(k int) float32 { return th.at(h, k, hErrByType0+e) })
		}
		b = append(b, "}}"...)
	}
	return append(b, '}')
}

func (h *history) appendRing(b []byte, at func(k int) float32) []byte {
	b = append(b, '[')
	for k := range h.n {
		if k > 0 {
			b = append(b, ',')
		}
		if v := at(k); isNaN32(v) || math.IsInf(float64(v), 0) {
			b = append(b, "null"...)
		} else {
			b = strconv.AppendFloat(b, float64(v), 'g', -1, 32)
		}
	}
	return append(b, ']')
}

// appendNum appends v as a JSON number, or null for NaN and infinities.
func appendNum(b []byte, v float64) []byte {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return append(b, "null"...)
	}
	return strconv.AppendFloat(b, v, 'g', 6, 64)
}

func appendKeyUint(b []byte, i int, k string, v uint64) []byte {
	return strconv.AppendUint(appendKey(b, i, k), v, 10)
}

// appendKeyNum is appendKeyUint for a number (see appendNum).
func appendKeyNum(b []byte, i int, k string, v float64) []byte {
	return appendNum(appendKey(b, i, k), v)
}

// appendKeyRing is appendKeyUint for a ring of values (see appendRing).
func (h *history) appendKeyRing(b []byte, i int, k string, at func(k int) float32) []byte {
	return h.appendRing(appendKey(b, i, k), at)
}

// appendKey appends the JSON key k of the i-th member of an object: a
// comma before all but the first.
func appendKey(b []byte, i int, k string) []byte {
	if i > 0 {
		b = append(b, ',')
	}
	b = strconv.AppendQuote(b, k)
	return append(b, ':')
}
