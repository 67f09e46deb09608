package sidecar

import (
	_ "embed"
	"html"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/picometer/picometer/schema"
)

// PageRefresh is how often the status page reloads itself.
const PageRefresh = 5 * time.Second

//go:embed page.css
var pageCSS string

// ServePage serves GET / : the status page, one self-contained HTML
// document (inline CSS, server-drawn SVG, no script, nothing fetched from
// elsewhere) that reloads itself every PageRefresh.
func (h *history) ServePage(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/" {
		http.NotFound(w, r)
		return
	}
	h.serveView(w, r, "text/html; charset=utf-8", h.appendPage)
}

// Chart geometry (SVG user units; the SVG scales to its panel's width).
const (
	chartW, chartH             = 720, 340
	plotL, plotR, plotT, plotB = 130, 680, 24, 276
)

// line is one drawn series of a chart.
type line struct {
	name  string
	color string
	dash  bool
	at    func(k int) float32 // step k, 0 the oldest
}

// unit formats a chart's values.
type unit struct {
	name string // as said on the axis
	f    func(b []byte, v float64) []byte
}

var (
	unitSeconds = unit{"seconds", appendDuration}
	unitPerSec  = unit{"per second", func(b []byte, v float64) []byte { return append(appendShort(b, v), "/s"...) }}
	unitTokSec  = unit{"tokens per second", func(b []byte, v float64) []byte { return append(appendShort(b, v), "/s"...) }}
	unitPercent = unit{"percent", func(b []byte, v float64) []byte { return append(appendShort(b, v*100), " %"...) }}
	unitCount   = unit{"requests", appendShort}
	unitTokens  = unit{"tokens per draft", func(b []byte, v float64) []byte { return append(appendShort(b, v), " tok"...) }}
)

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#393b79"}

func (h *history) appendPage(b []byte, v view) []byte {
	b = append(b, `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="refresh" content="`...)
	b = strconv.AppendInt(b, int64(PageRefresh/time.Second), 10)
	b = append(b, `">
<title>picometer status</title>
<style>`...)
	b = append(b, pageCSS...)
	b = append(b, `</style></head>
<body><header><h1>picometer</h1><p>Sidecar status, last 15 minutes, sampled every `...)
	b = strconv.AppendInt(b, int64(HistoryStep/time.Second), 10)
	b = append(b, ` s (latency quantiles over a sliding `...)
	b = strconv.AppendInt(b, int64(QuantileWindow/time.Second), 10)
	b = append(b, ` s window). Updated <time id="updated">`...)
	b = v.now.UTC().AppendFormat(b, "15:04:05 UTC")
	b = append(b, "</time>. "...)
	b = append(b, `<a href="/metrics">/metrics</a> · <a href="/api/v1/status">/api/v1/status</a></p></header>
`...)
	if len(v.live.targets) == 0 {
		b = append(b, `<p class="empty" id="no-targets">No daemon has connected yet.</p>
`...)
	}
	for i := range v.live.targets {
		b = h.appendTargetSection(b, i, &v.live.targets[i], v.hist[i])
	}
	b = h.appendSidecarSection(b, v)
	return append(b, "</body></html>\n"...)
}

func (h *history) appendTargetSection(b []byte, i int, tr *targetReading, th *targetHistory) []byte {
	b = append(b, `<section class="target" id="target-`...)
	b = strconv.AppendInt(b, int64(i), 10)
	b = append(b, `" data-model="`...)
	b = append(b, html.EscapeString(tr.key.model)...)
	b = append(b, `" data-engine="`...)
	b = append(b, html.EscapeString(tr.key.engine)...)
	b = append(b, `"><h2>`...)
	b = append(b, html.EscapeString(tr.key.model)...)
	b = append(b, ` <small>`...)
	b = append(b, html.EscapeString(tr.key.engine)...)
	if tr.connected {
		b = append(b, `</small> <span class="badge up">connected</span></h2>`...)
	} else {
		b = append(b, `</small> <span class="badge down">disconnected</span></h2>`...)
	}
	b = append(b, `<dl class="totals">`...)
	b = appendTotal(b, "requests", "requests", tr.requests)
	b = appendTotal(b, "errors", "errors", sum(tr.failed))
	b = appendTotal(b, "generation_tokens", "generated tokens", tr.genTokens)
	b = appendTotal(b, "prompt_tokens", "prompt tokens", tr.promptTokens)
	if tr.constrained > 0 || tr.toolCalls > 0 {
		b = appendTotal(b, "constrained_requests", "constrained requests", tr.constrained)
		b = appendTotal(b, "constrained_valid", "constrained, valid", tr.constrainedValid)
		b = appendTotal(b, "tool_calls", "tool calls", tr.toolCalls)
		b = appendMean(b, "constraint_mask_mean", "grammar mask / token", tr.maskMean)
		b = appendMean(b, "constraint_compile_mean", "grammar compile", tr.compileMean)
	}
	if tr.hasGauges {
		b = append(b, `<div><dt>running / slots</dt><dd data-now="running">`...)
		b = appendShort(b, tr.running)
		b = append(b, " / "...)
		b = appendShort(b, tr.slots)
		b = append(b, `</dd></div><div><dt>waiting</dt><dd data-now="waiting">`...)
		b = appendShort(b, tr.waiting)
		b = append(b, `</dd></div><div><dt>KV cache</dt><dd data-now="kv_cache_usage">`...)
		b = unitPercent.f(b, tr.kvUse)
		b = append(b, `</dd></div><div><dt>prefix cache blocks</dt><dd data-now="prefix_cache_blocks">`...)
		b = appendShort(b, tr.kvCached)
		b = append(b, `</dd></div>`...)
	}
	if tr.prefixQueries > 0 { // the hit ratio in tokens since the target appeared
		b = append(b, `<div><dt>prefix cache hits</dt><dd data-total="prefix_cache_hit_ratio">`...)
		b = unitPercent.f(b, float64(tr.prefixHits)/float64(tr.prefixQueries))
		b = append(b, ` of `...)
		b = appendShort(b, float64(tr.prefixQueries))
		b = append(b, ` tokens</dd></div>`...)
	}
	if tr.ttftCacheN != ([nCache]uint64{}) { // mean TTFT by cache outcome since the target appeared
		b = append(b, `<div><dt>TTFT by cache</dt><dd data-total="ttft_by_cache">`...)
		for c, name := range schema.CacheOutcomes {
			if c > 0 {
				b = append(b, " · "...)
			}
			b = append(b, name...)
			b = append(b, ' ')
			if n := tr.ttftCacheN[c]; n > 0 {
				b = unitSeconds.f(b, tr.ttftCacheSum[c]/float64(n))
			} else {
				b = append(b, '-')
			}
			b = append(b, " ("...)
			b = strconv.AppendUint(b, tr.ttftCacheN[c], 10)
			b = append(b, ')')
		}
		b = append(b, `</dd></div>`...)
	}
	b = append(b, "</dl>\n"...)
	if th == nil {
		b = append(b, `<p class="empty">No history: more than `...)
		b = strconv.AppendInt(b, MaxHistoryTargets, 10)
		b = append(b, " targets.</p></section>\n"...)
		return b
	}
	at := func(field int) func(int) float32 { return func(k int) float32 { return th.at(h, k, field) } }
	b = append(b, `<div class="grid">`...)
	// requests and errors by type (types seen in the window only)
	lines := []line{{name: "requests", color: palette[0], at: at(hReqRate)}}
	c := 1
	for e, et := range schema.ErrorTypes {
		f := at(hErrByType0 + e)
		if h.anyPositive(f) {
			lines = append(lines, line{name: "errors " + et, color: palette[c%len(palette)], dash: true, at: f})
			c++
		}
	}
	b = h.appendChart(b, "requests", "Requests and errors", unitPerSec, 0, lines)
	b = h.appendChart(b, "ttft", "Time to first token", unitSeconds, 0, []line{
		{name: "p50", color: palette[0], at: at(hTTFT50)}, {name: "p99", color: palette[1], at: at(hTTFT99)}})
	b = h.appendChart(b, "itl", "Inter-token latency and time per output token", unitSeconds, 0, []line{
		{name: "ITL p50", color: palette[0], at: at(hITL50)}, {name: "ITL p99", color: palette[1], at: at(hITL99)},
		{name: "TPOT p50", color: palette[2], dash: true, at: at(hTPOT50)}})
	b = h.appendChart(b, "tokens", "Generated tokens", unitTokSec, 0, []line{
		{name: "generated", color: palette[0], at: at(hTokRate)}, {name: "prompt", color: palette[7], dash: true, at: at(hPromptRate)}})
	b = h.appendChart(b, "batch", "Batch occupancy and queue", unitCount, 0, []line{
		{name: "running", color: palette[0], at: at(hRunning)}, {name: "slots", color: palette[7], dash: true, at: at(hSlots)},
		{name: "waiting", color: palette[1], at: at(hWaiting)}})
	b = h.appendChart(b, "kv", "KV-cache usage", unitPercent, 1, []line{{name: "used", color: palette[4], at: at(hKV)}})
	b = h.appendChart(b, "spec-rate", "Speculative acceptance rate", unitPercent, 1, []line{
		{name: "accepted / drafted", color: palette[2], at: at(hSpecRate)}})
	b = h.appendChart(b, "spec-len", "Speculative accepted length", unitTokens, 0, []line{
		{name: "accepted per draft", color: palette[3], at: at(hSpecLen)}})
	b = appendBatchChart(b, tr)
	return append(b, "</div></section>\n"...)
}

func appendTotal(b []byte, key, label string, v uint64) []byte {
	b = append(b, `<div><dt>`...)
	b = append(b, label...)
	b = append(b, `</dt><dd data-total="`...)
	b = append(b, key...)
	b = append(b, `">`...)
	b = strconv.AppendUint(b, v, 10)
	return append(b, `</dd></div>`...)
}

// appendMean appends a mean duration (seconds) as a total: its key in
// data-mean, "–" when there was nothing to average.
func appendMean(b []byte, key, label string, v float64) []byte {
	b = append(b, `<div><dt>`...)
	b = append(b, label...)
	b = append(b, ` <small>mean</small></dt><dd data-mean="`...)
	b = append(b, key...)
	b = append(b, `">`...)
	if v == 0 {
		b = append(b, "–"...)
	} else {
		b = appendDuration(b, v)
	}
	return append(b, `</dd></div>`...)
}

func (h *history) appendSidecarSection(b []byte, v view) []byte {
	b = append(b, `<section class="target" id="sidecar"><h2>Sidecar health</h2><dl class="totals">`...)
	for i, k := range schema.AttrEventKind.Values {
		b = appendTotal(b, "events_"+k, k+" events", v.live.events[i])
	}
	var lost, dropped uint64
	for i := range v.live.targets {
		lost += v.live.targets[i].lost
		dropped += v.live.targets[i].dropped
	}
	b = appendTotal(b, "events_lost", "lost (seq gaps)", lost)
	b = appendTotal(b, "events_dropped", "dropped by daemons", dropped)
	for i, k := range schema.DecodeReasons {
		if v.live.rejected[i] > 0 {
			b = appendTotal(b, "rejected_"+k, "rejected: "+k, v.live.rejected[i])
		}
	}
	b = append(b, `</dl><div class="grid">`...)
	b = h.appendChart(b, "events", "Events applied", unitPerSec, 0, []line{
		{name: "events", color: palette[0], at: func(k int) float32 { return h.selfAt(k, sEventRate) }}})
	lines := []line{
		{name: "lost", color: palette[1], at: h.sumTargets(hLostRate)},
		{name: "dropped", color: palette[3], at: h.sumTargets(hDropRate)},
	}
	for i, k := range schema.DecodeReasons {
		f := func(k int) float32 { return h.selfAt(k, sRejected0+i) }
		if h.anyPositive(f) {
			lines = append(lines, line{name: "rejected " + k, color: palette[(4+i)%len(palette)], dash: true, at: f})
		}
	}
	b = h.appendChart(b, "health", "Lost, dropped and rejected events", unitPerSec, 0, lines)
	return append(b, "</div></section>\n"...)
}

// sumTargets is a ring field summed over the targets that have history.
func (h *history) sumTargets(field int) func(int) float32 {
	return func(k int) float32 {
		s, any := float32(0), false
		for _, th := range h.targets {
			if v := th.at(h, k, field); !isNaN32(v) {
				s += v
				any = true
			}
		}
		if !any {
			return float32(math.NaN())
		}
		return s
	}
}

func isNaN32(v float32) bool { return v != v }

func (h *history) anyValue(f func(int) float32) bool {
	for k := range h.n {
		if !isNaN32(f(k)) {
			return true
		}
	}
	return false
}

func (h *history) anyPositive(f func(int) float32) bool {
	for k := range h.n {
		if f(k) > 0 {
			return true
		}
	}
	return false
}

// appendChart draws a line chart over the last 15 minutes: time on x (now at
// the right), values on y from 0 to a round maximum (at least yMin), the
// unit on the axis, and a legend with each line's latest value.
func (h *history) appendChart(b []byte, id, title string, u unit, yMin float64, lines []line) []byte {
	now := int64(0)
	if h.n > 0 {
		now = h.times[h.slot(h.n-1)]
	}
	span := float64(HistoryLen * HistoryStep)
	ymax := yMin
	for _, l := range lines {
		for k := range h.n {
			if v := float64(l.at(k)); v > ymax && !math.IsInf(v, 0) {
				ymax = v
			}
		}
	}
	ymax = niceCeil(ymax)
	b = append(b, `<figure class="panel" data-panel="`...)
	b = append(b, id...)
	b = append(b, `"><figcaption>`...)
	b = append(b, title...)
	b = append(b, ` <small>(`...)
	b = append(b, u.name...)
	b = append(b, `)</small></figcaption><svg viewBox="0 0 `...)
	b = strconv.AppendInt(b, chartW, 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, chartH, 10)
	b = append(b, `" role="img" aria-label="`...)
	b = append(b, title...)
	b = append(b, `">`...)
	b = appendAxes(b, u, ymax)
	// x axis: minutes ago
	for _, m := range [4]int{15, 10, 5, 0} {
		x := plotR - float64(m)/15*(plotR-plotL)
		b = append(b, `<text class="xl" x="`...)
		b = appendCoord(b, x)
		b = append(b, `" y="`...)
		b = appendCoord(b, plotB+32)
		b = append(b, `">`...)
		if m == 0 {
			b = append(b, "now"...)
		} else {
			b = append(b, "−"...)
			b = strconv.AppendInt(b, int64(m), 10)
			b = append(b, " min"...)
		}
		b = append(b, `</text>`...)
	}
	for _, l := range lines {
		if !h.anyValue(l.at) {
			continue
		}
		b = append(b, `<path fill="none" stroke-width="4" stroke-linecap="round" stroke-linejoin="round" stroke="`...)
		b = append(b, l.color...)
		if l.dash {
			b = append(b, `" stroke-dasharray="4 3`...)
		}
		b = append(b, `" d="`...)
		pen := false
		for k := range h.n {
			v := float64(l.at(k))
			ago := float64(now - h.times[h.slot(k)])
			if math.IsNaN(v) || math.IsInf(v, 0) || ago > span {
				pen = false
				continue
			}
			x := plotR - ago/span*(plotR-plotL)
			y := plotB - v/ymax*(plotB-plotT)
			if pen {
				b = append(b, 'L')
			} else {
				b = append(b, 'M')
			}
			b = appendCoord(b, x)
			b = append(b, ' ')
			b = appendCoord(b, y)
			if !pen {
				b = append(b, "h0"...) // a lone point shows as a dot
			}
			pen = true
		}
		b = append(b, `"/>`...)
	}
	b = append(b, `</svg><ul class="legend">`...)
	for _, l := range lines {
		b = append(b, `<li><i style="background:`...)
		b = append(b, l.color...)
		b = append(b, `"></i>`...)
		b = append(b, l.name...)
		b = append(b, ` <b data-last="`...)
		last := math.NaN()
		for k := h.n - 1; k >= 0; k-- {
			if v := float64(l.at(k)); !math.IsNaN(v) {
				last = v
				break
			}
		}
		if math.IsNaN(last) {
			b = append(b, `">–`...)
		} else {
			b = strconv.AppendFloat(b, last, 'g', 6, 64)
			b = append(b, `">`...)
			b = u.f(b, last)
		}
		b = append(b, `</b></li>`...)
	}
	return append(b, "</ul></figure>\n"...)
}

// appendAxes draws the plot frame, three horizontal grid lines with their
// values (0, half, max) and the y unit.
func appendAxes(b []byte, u unit, ymax float64) []byte {
	for i := range 3 {
		v := ymax * float64(i) / 2
		y := plotB - float64(i)/2*(plotB-plotT)
		b = append(b, `<line class="grid" x1="`...)
		b = appendCoord(b, plotL)
		b = append(b, `" x2="`...)
		b = appendCoord(b, plotR)
		b = append(b, `" y1="`...)
		b = appendCoord(b, y)
		b = append(b, `" y2="`...)
		b = appendCoord(b, y)
		b = append(b, `"/><text class="yl" x="`...)
		b = appendCoord(b, plotL-8)
		b = append(b, `" y="`...)
		b = appendCoord(b, y+8)
		b = append(b, `">`...)
		b = u.f(b, v)
		b = append(b, `</text>`...)
	}
	return b
}

// appendBatchChart draws the mean decode step time by batch size, MLC-LLM's
// decode_time_by_batch_size (cumulative since the daemons started).
func appendBatchChart(b []byte, tr *targetReading) []byte {
	b = append(b, `<figure class="panel" data-panel="batch-time"><figcaption>Decode step time by batch size <small>(seconds per step, mean since start; x: requests in the batch)</small></figcaption><svg viewBox="0 0 `...)
	b = strconv.AppendInt(b, chartW, 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, chartH, 10)
	b = append(b, `" role="img" aria-label="Decode step time by batch size">`...)
	first, last, ymax := 0, 0, 0.0
	for n := range schema.MaxBatch {
		if tr.batchSteps[n] > 0 {
			if first == 0 {
				first = n + 1
			}
			last = n + 1
			ymax = max(ymax, tr.batchTime[n]/float64(tr.batchSteps[n]))
		}
	}
	ymax = niceCeil(ymax)
	b = appendAxes(b, unitSeconds, ymax)
	if first == 0 {
		b = append(b, `<text class="xl" x="400" y="160">no decode steps yet</text></svg></figure>`...)
		return b
	}
	nbars := last - first + 1
	w := (plotR - plotL) / float64(nbars)
	for n := first; n <= last; n++ {
		x := plotL + float64(n-first)*w
		if c := tr.batchSteps[n-1]; c > 0 {
			mean := tr.batchTime[n-1] / float64(c)
			y := plotB - mean/ymax*(plotB-plotT)
			b = append(b, `<rect fill="#1f77b4" x="`...)
			b = appendCoord(b, x+w*0.1)
			b = append(b, `" y="`...)
			b = appendCoord(b, y)
			b = append(b, `" width="`...)
			b = appendCoord(b, w*0.8)
			b = append(b, `" height="`...)
			b = appendCoord(b, plotB-y)
			b = append(b, `" data-batch-size="`...)
			b = strconv.AppendInt(b, int64(n), 10)
			b = append(b, `" data-mean-seconds="`...)
			b = strconv.AppendFloat(b, mean, 'g', 6, 64)
			b = append(b, `"><title>batch `...)
			b = strconv.AppendInt(b, int64(n), 10)
			b = append(b, ": "...)
			b = appendDuration(b, mean)
			b = append(b, " per step, "...)
			b = strconv.AppendUint(b, c, 10)
			b = append(b, " steps</title></rect>"...)
		}
		if n == first || n == last || nbars <= 16 || n%8 == 0 {
			b = append(b, `<text class="xl" x="`...)
			b = appendCoord(b, x+w/2)
			b = append(b, `" y="`...)
			b = appendCoord(b, plotB+32)
			b = append(b, `">`...)
			b = strconv.AppendInt(b, int64(n), 10)
			b = append(b, `</text>`...)
		}
	}
	b = append(b, `</svg></figure>`...)
	return append(b, '\n')
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten (1 for v ≤ 0).
func niceCeil(v float64) float64 {
	if !(v > 0) || math.IsInf(v, 0) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range [4]float64{1, 2, 5, 10} {
		if v <= m*p*(1+1e-9) {
			return m * p
		}
	}
	return 10 * p
}

func appendCoord(b []byte, v float64) []byte { return strconv.AppendInt(b, int64(math.Round(v)), 10) }

// appendShort writes v with at most three significant digits (integers as
// they are, up to 9999), k and M for large values.
func appendShort(b []byte, v float64) []byte {
	switch a := math.Abs(v); {
	case a >= 1e6:
		return append(strconv.AppendFloat(b, v/1e6, 'g', 3, 64), 'M')
	case a >= 1e4:
		return append(strconv.AppendFloat(b, v/1e3, 'g', 3, 64), 'k')
	case v == math.Trunc(v):
		return strconv.AppendInt(b, int64(v), 10)
	}
	return strconv.AppendFloat(b, v, 'g', 3, 64)
}

// appendDuration writes seconds v in µs, ms or s.
func appendDuration(b []byte, v float64) []byte {
	switch a := math.Abs(v); {
	case a == 0:
		return append(b, '0')
	case a < 1e-3:
		return append(appendShort(b, v*1e6), " µs"...)
	case a < 1:
		return append(appendShort(b, v*1e3), " ms"...)
	}
	return append(appendShort(b, v), " s"...)
}
