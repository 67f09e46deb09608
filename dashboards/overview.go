package dashboards

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/picometer/picometer/alerts"
	"github.com/picometer/picometer/schema"
)

// OverviewFile is the overview dashboard's file name under dashboards/.
const OverviewFile = "picometer-overview.json"

// Label names, from schema/ through package alerts.
var (
	lModel    = alerts.LabelModel
	lInstance = alerts.LabelInstance
)

// Filters every query applies: the model and instance variables. Sidecar
// self-metrics carry no model label and use only the instance filter.
var (
	modelFilter    = fmt.Sprintf(`%s=~"$model", %s=~"$instance"`, lModel, lInstance)
	instanceFilter = fmt.Sprintf(`%s=~"$instance"`, lInstance)
)

// sel returns a selector for series with the model and instance filters
// plus extra matchers.
func sel(series string, extra ...string) string {
	return series + "{" + strings.Join(append(extra, modelFilter), ", ") + "}"
}

// selInstance returns a selector with the instance filter only.
func selInstance(series string, extra ...string) string {
	return series + "{" + strings.Join(append(extra, instanceFilter), ", ") + "}"
}

// rate is sum by (labels) (rate(sel[$__rate_interval])).
func rate(selector string, labels ...string) string {
	return fmt.Sprintf("sum by (%s) (rate(%s[$__rate_interval]))", strings.Join(labels, ", "), selector)
}

// increaseRatio is sum by (labels) (increase(num[$__range])) / the same of
// den: a ratio over the whole displayed time range, for bar gauges.
func increaseRatio(num, den string, labels ...string) string {
	by := strings.Join(labels, ", ")
	return fmt.Sprintf("sum by (%s) (increase(%s[$__range])) / sum by (%s) (increase(%s[$__range]))", by, num, by, den)
}

func help(id string) string { return schema.Lookup(id).Help }

// Units. Grafana's built-in ids, or "suffix:<text>" custom units.
const (
	unitSeconds   = "s"
	unitReqPerSec = "reqps"
	unitPercent   = "percentunit"
	unitShort     = "short"
	unitTokPerSec = "suffix: tok/s"
	unitEvPerSec  = "suffix: events/s"
	unitLinesPerS = "suffix: lines/s"
	unitYesNo     = "bool_yes_no"
)

// modelLegend names a series by model and instance.
const modelLegend = "{{gen_ai_request_model}} @ {{instance}}"

// Overview returns the picometer overview dashboard: request rates and
// errors, token throughput, latencies, scheduler state, batching,
// speculative decoding, request lengths and the sidecar's health. Every
// name comes from schema/ or from the recording rules of package alerts.
func Overview() *Dashboard {
	th := alerts.Default()
	b := newBuilder()
	info := alerts.Series(schema.IDEngineInfo, "")

	d := &Dashboard{
		Annotations: Annotations{List: []Annotation{{
			BuiltIn: 1, Datasource: &DatasourceRef{Type: "grafana", UID: "-- Grafana --"},
			Enable: true, Hide: true, IconColor: "rgba(0, 211, 255, 1)",
			Name: "Annotations & Alerts", Type: "dashboard",
		}}},
		Description: "LLM serving by picometer: requests, tokens, latency (TTFT, ITL, time per output token), " +
			"scheduling, batching, speculative decoding and the metrics pipeline. Generated from schema/ by " +
			"dashboards/cmd/gendashboards; latency quantiles, rates and ratios come from the recording rules in " +
			"alerts/" + alerts.RulesFile + ", which Prometheus must load.",
		Editable:     true,
		GraphTooltip: 1,
		Links: []Link{{
			Title: "Alert runbook", Type: "link", URL: alerts.RunbookBase, TargetBlank: true, Icon: "doc",
			Tooltip: "What each picometer alert means and what to do", Tags: []string{},
		}},
		Refresh:       "30s",
		SchemaVersion: SchemaVersion,
		Tags:          []string{"picometer", "llm", "generated"},
		Time:          TimeRange{From: "now-1h", To: "now"},
		Title:         "picometer / Overview",
		UID:           "picometer-overview",
		Version:       1,
		Templating: Templating{List: []Variable{
			{
				Name: DatasourceVar, Label: "Data source", Type: "datasource", Query: "prometheus",
				Description: "Prometheus that scrapes picometer-sidecar and loads alerts/" + alerts.RulesFile,
				Options:     []any{}, Refresh: 1,
			},
			queryVar("model", "Model", "Served model (gen_ai_request_model), from picometer_engine_info",
				fmt.Sprintf("label_values(%s, %s)", info, lModel)),
			queryVar("instance", "Instance", "Sidecar scrape target serving the selected models",
				fmt.Sprintf(`label_values(%s{%s=~"$model"}, %s)`, info, lModel, lInstance)),
		}},
	}

	// ---- requests -------------------------------------------------------
	b.row("Requests")
	b.add(8, 8, timeseries("Request rate by finish reason", unitReqPerSec,
		"Finished requests per second by finish reason (stop, length, abort, error), from the recording rule "+
			alerts.RecordFinishedRate+" (5m rates). "+help(schema.IDRequestsFinished),
		target(fmt.Sprintf("sum by (%s) (%s)", alerts.LabelFinishReason, sel(alerts.RecordFinishedRate)), "{{finish_reason}}")))
	b.add(8, 8, timeseries("Errors by type", unitReqPerSec,
		"Failed or aborted requests per second by error.type, from "+alerts.RecordFailedRate+
			" (5m rates). Client errors (invalid_request, …) and disconnects (cancelled) are shown too; "+
			"only server-side types count in the error ratio. "+help(schema.IDRequestsFailed),
		target(fmt.Sprintf("sum by (%s) (%s)", alerts.LabelErrorType, sel(alerts.RecordFailedRate)), "{{error_type}}")))
	b.add(8, 8, timeseries("Server error ratio", unitPercent,
		"Share of finished requests that failed on the server side ("+strings.Join(th.ServerErrorTypes, ", ")+
			") over 5m, from "+alerts.RecordErrorRatio+". The availability objective's burn rate is in the SLOs row.",
		target(sel(alerts.RecordErrorRatio), modelLegend)))

	// ---- SLOs -----------------------------------------------------------
	if len(th.Objectives) > 0 {
		b.row("SLOs")
		b.add(12, 8, sloBudgetPanel(th))
		b.add(12, 8, sloBurnPanel(th))
	}

	// ---- tokens ---------------------------------------------------------
	b.row("Tokens")
	b.add(12, 8, timeseries("Prompt token throughput", unitTokPerSec,
		"Prompt tokens of finished requests per second. "+help(schema.IDPromptTokens),
		target(rate(sel(alerts.Series(schema.IDPromptTokens, "")), lModel, lInstance), modelLegend)))
	b.add(12, 8, timeseries("Generation token throughput", unitTokPerSec,
		"Output tokens of finished requests per second. "+help(schema.IDGenerationTokens),
		target(rate(sel(alerts.Series(schema.IDGenerationTokens, "")), lModel, lInstance), modelLegend)))

	// ---- latency --------------------------------------------------------
	b.row("Latency")
	b.add(8, 8, withSLOTarget(latency("Time to first token", schema.IDTTFT, ""), th, schema.IDTTFT))
	b.add(8, 8, withSLOTarget(latency("Time per output token", schema.IDTimePerOutputToken, ""), th, schema.IDTimePerOutputToken))
	b.add(8, 8, withSLOTarget(latency("Inter-token latency", schema.IDInterTokenLatency, ""), th, schema.IDInterTokenLatency))
	b.add(6, 8, latency("End-to-end request time", schema.IDRequestDuration, ""))
	b.add(6, 8, latency("Queue time", schema.IDQueueDuration, ""))
	b.add(6, 8, latency("Prefill time", schema.IDPrefillDuration, ""))
	b.add(6, 8, latency("Decode time", schema.IDDecodeDuration, ""))
	b.add(12, 8, withExemplars("Time to first token: traces", schema.IDTTFT))
	b.add(12, 8, withExemplars("End-to-end request time: traces", schema.IDRequestDuration))

	// ---- engine ---------------------------------------------------------
	b.row("Engine")
	b.add(8, 8, timeseries("Running and waiting requests", unitShort,
		"Requests holding an engine slot (running), waiting for one (waiting), and the slot count (B_max), "+
			"at the last engine snapshot. The PicometerWaitingQueueSaturated alert compares waiting per slot with "+
			fmt.Sprintf("%g (warning) and %g (critical).", th.WaitingPerSlot.Warning.Threshold, th.WaitingPerSlot.Critical.Threshold),
		target(fmt.Sprintf("sum by (%s, %s) (%s)", lModel, lInstance, sel(alerts.Series(schema.IDRequestsRunning, ""))), "running "+modelLegend),
		target(fmt.Sprintf("sum by (%s, %s) (%s)", lModel, lInstance, sel(alerts.Series(schema.IDRequestsWaiting, ""))), "waiting "+modelLegend),
		target(fmt.Sprintf("sum by (%s, %s) (%s)", lModel, lInstance, sel(alerts.Series(schema.IDSlots, ""))), "slots "+modelLegend)))
	kv := withThresholds(timeseries("KV-cache usage", unitPercent,
		help(schema.IDKVCacheUsage)+" Lines: the PicometerKVCacheNearFull thresholds.",
		target(sel(alerts.Series(schema.IDKVCacheUsage, "")), modelLegend)), th.KVCacheUsage)
	kv.FieldConfig.Defaults.Min, kv.FieldConfig.Defaults.Max = ptr(0.0), ptr(1.0)
	b.add(8, 8, kv)
	b.add(8, 8, timeseries("Preemptions", unitReqPerSec,
		"Requests preempted per second. "+help(schema.IDPreemptions),
		target(rate(sel(alerts.Series(schema.IDPreemptions, "")), lModel, lInstance), modelLegend)))
	stepPhases := fmt.Sprintf(`%s=~"%s|%s"`, alerts.LabelPhase, schema.PhaseDecode, schema.PhaseVerify)
	b.add(12, 8, timeseries("Batch occupancy (mean decode batch size)", unitShort,
		"Mean number of requests per decode step (phase decode) and per speculative verify step (phase verify, "+
			"which replaces decode while drafting): rate of the batch-size histogram's _sum over its _count. "+
			help(schema.IDStepBatchSize),
		target(fmt.Sprintf("%s / %s",
			rate(sel(alerts.Series(schema.IDStepBatchSize, "_sum"), stepPhases), alerts.LabelPhase, lModel, lInstance),
			rate(sel(alerts.Series(schema.IDStepBatchSize, "_count"), stepPhases), alerts.LabelPhase, lModel, lInstance)),
			"{{phase}} "+modelLegend)))
	b.add(12, 8, bargauge("Decode step time by batch size", unitSeconds,
		"Mean engine step time per batch size over the displayed time range (MLC-LLM decode_time_by_batch_size; "+
			"verify steps too when speculative decoding is on): batch time / batch steps. A larger batch should cost "+
			"much less than proportionally more. "+help(schema.IDBatchTime),
		target(increaseRatio(sel(alerts.Series(schema.IDBatchTime, ""), stepPhases), sel(alerts.Series(schema.IDBatchSteps, ""), stepPhases),
			alerts.LabelPhase, alerts.LabelBatchSize), "{{phase}} batch {{batch_size}}")))

	// ---- prefix cache -----------------------------------------------------
	b.row("Prefix cache")
	hr := timeseries("Prefix-cache hit ratio", unitPercent,
		"Prompt tokens found in the prefix cache / prompt tokens looked up: rate(hits) / rate(queries). "+
			help(schema.IDPrefixHits)+" "+help(schema.IDPrefixQueries),
		target(fmt.Sprintf("%s / %s",
			rate(sel(alerts.Series(schema.IDPrefixHits, "")), lModel, lInstance),
			rate(sel(alerts.Series(schema.IDPrefixQueries, "")), lModel, lInstance)), modelLegend))
	hr.FieldConfig.Defaults.Min, hr.FieldConfig.Defaults.Max = ptr(0.0), ptr(1.0)
	b.add(8, 8, hr)
	b.add(8, 8, timeseries("Prefix-cached KV blocks", unitShort,
		help(schema.IDKVBlocksCached),
		target(fmt.Sprintf("sum by (%s, %s) (%s)", lModel, lInstance, sel(alerts.Series(schema.IDKVBlocksCached, ""))), modelLegend)))
	b.add(8, 8, timeseries("Prefix-cache evictions", "suffix: blocks/s",
		"Cached blocks evicted per second. "+help(schema.IDPrefixEvictions),
		target(rate(sel(alerts.Series(schema.IDPrefixEvictions, "")), lModel, lInstance), modelLegend)))
	b.add(24, 9, ttftByCache())

	// ---- speculative decoding -------------------------------------------
	b.row("Speculative decoding")
	acc := withBelowThreshold(timeseries("Draft acceptance rate", unitPercent,
		"Accepted draft tokens / proposed draft tokens over 5m, from "+alerts.RecordSpecAcceptance+
			". Line: the PicometerSpecAcceptanceCollapsed threshold.",
		target(sel(alerts.RecordSpecAcceptance), modelLegend)), th.SpecAcceptance.Threshold)
	acc.FieldConfig.Defaults.Min, acc.FieldConfig.Defaults.Max = ptr(0.0), ptr(1.0)
	b.add(8, 8, acc)
	b.add(8, 8, timeseries("Mean acceptance length", unitShort,
		"Accepted draft tokens per draft: how many tokens a draft saves on average (MLC-LLM accept_len at the last "+
			"position). "+help(schema.IDSpecDrafts),
		target(fmt.Sprintf("%s / %s",
			rate(sel(alerts.Series(schema.IDSpecAcceptedTokens, "")), lModel, lInstance),
			rate(sel(alerts.Series(schema.IDSpecDrafts, "")), lModel, lInstance)), modelLegend)))
	pos := bargauge("Acceptance by position", unitPercent,
		"Acceptance probability by position within the draft over the displayed time range (MLC-LLM accept_prob): "+
			"accepted / proposed draft tokens at each position.",
		target(increaseRatio(sel(alerts.Series(schema.IDSpecAcceptedTokens, "")), sel(alerts.Series(schema.IDSpecDraftTokens, "")),
			alerts.LabelPosition), "position {{position}}"))
	pos.FieldConfig.Defaults.Min, pos.FieldConfig.Defaults.Max = ptr(0.0), ptr(1.0)
	b.add(8, 8, pos)

	// ---- constrained decoding and tool calls (issue 26) -----------------
	b.row("Constraints and tool calls")
	b.add(8, 8, timeseries("Constrained requests by kind and outcome", unitReqPerSec,
		help(schema.IDConstraintRequests),
		target(rate(sel(alerts.Series(schema.IDConstraintRequests, "")), "constraint", "outcome"), "{{constraint}} {{outcome}}")))
	maskQ := func(q string) Target {
		return target(fmt.Sprintf("histogram_quantile(%s, sum by (le, %s) (rate(%s[$__rate_interval])))", q, lModel,
			sel(alerts.Series(schema.IDConstraintMask, "_bucket"))), "p"+percentile(q)+" "+modelLegend)
	}
	b.add(8, 8, timeseries("Mask time per step", unitSeconds,
		"p50 and p99 over the rate interval. "+help(schema.IDConstraintMask), maskQ("0.5"), maskQ("0.99")))
	b.add(4, 8, timeseries("Grammar compile time p99", unitSeconds,
		help(schema.IDConstraintCompile),
		target(fmt.Sprintf("histogram_quantile(0.99, sum by (le, constraint) (rate(%s[$__rate_interval])))",
			sel(alerts.Series(schema.IDConstraintCompile, "_bucket"))), "{{constraint}}")))
	b.add(4, 8, timeseries("Tool calls by format", unitShort+"",
		"Tool calls per second. "+help(schema.IDToolCalls),
		target(rate(sel(alerts.Series(schema.IDToolCalls, "")), "tool_format"), "{{tool_format}}")))

	// ---- request lengths ------------------------------------------------
	b.row("Request lengths")
	b.add(12, 9, heatmap("Prompt length", schema.IDRequestPromptLength))
	b.add(12, 9, heatmap("Generation length", schema.IDRequestGenLength))

	// ---- sidecar --------------------------------------------------------
	b.row("Sidecar")
	b.add(4, 6, stat("Sidecar reporting", unitYesNo,
		fmt.Sprintf("Whether the sidecar reported (was scraped or pushed OTLP) in the last %s: the age of its heartbeat, a series it emits itself, so this reads the same on either path. The PicometerSidecarDown and PicometerSidecarAbsent alerts watch it.",
			alerts.PromDuration(alerts.HeartbeatStale)),
		target(fmt.Sprintf("max by (%s) (time() - %s) < bool %s", lInstance,
			selInstance(alerts.Series(schema.IDSidecarHeartbeat, "")), strconv.Itoa(int(alerts.HeartbeatStale.Seconds()))), "{{instance}}")))
	b.add(4, 6, stat("Daemon connections", unitShort,
		help(schema.IDSidecarConnections),
		target(fmt.Sprintf("sum by (%s) (%s)", lInstance, selInstance(alerts.Series(schema.IDSidecarConnections, ""))), "{{instance}}")))
	age := stat("Seconds since last event", unitSeconds,
		help(schema.IDSidecarLastEventAge)+" Colors: the PicometerDaemonStale thresholds.",
		target(sel(alerts.Series(schema.IDSidecarLastEventAge, "")), modelLegend))
	age.FieldConfig.Defaults.Thresholds = steps(th.LastEventAge)
	age.FieldConfig.Defaults.Color = &FieldColor{Mode: "thresholds"}
	b.add(4, 6, age)
	b.add(6, 6, timeseries("Events lost", unitEvPerSec,
		"Events lost per second: gaps in daemon sequence numbers seen by the sidecar, and events the daemon "+
			"dropped itself instead of blocking, by reason (the PicometerSidecarLosingEvents and PicometerDaemonDroppingEvents alerts watch them); "+
			"and request events whose counts the sidecar recovered from the daemon's cumulative totals. "+
			help(schema.IDSidecarEventsLost)+" "+help(schema.IDSidecarEventsRecovered),
		target(rate(sel(alerts.Series(schema.IDSidecarEventsLost, "")), lInstance), "lost in transit {{instance}}"),
		target(rate(sel(alerts.Series(schema.IDDaemonEventsDropped, "")), alerts.LabelReason, lInstance), "dropped by daemon ({{reason}}) {{instance}}"),
		target(rate(sel(alerts.Series(schema.IDSidecarEventsRecovered, "")), lInstance), "recovered from totals {{instance}}")))
	b.add(6, 6, timeseries("Decode errors by reason", unitLinesPerS,
		"Socket lines the sidecar rejected per second, by reason. "+help(schema.IDSidecarDecodeErrors),
		target(rate(selInstance(alerts.Series(schema.IDSidecarDecodeErrors, "")), alerts.LabelReason), "{{reason}}")))

	d.Panels = b.panels
	return d
}

// ttftByCache is the time to first token split by prefix-cache outcome:
// p50 and p90 per cache value from the buckets (left axis), and each
// value's share of the requests (right axis, percent), so an operator sees
// what a hit saves and how often it happens. It reads the buckets, not the
// recording rules, which sum over the cache label.
func ttftByCache() *Panel {
	lCache := alerts.LabelCache
	bucket := sel(alerts.Series(schema.IDTTFT, "_bucket"))
	count := sel(alerts.Series(schema.IDTTFT, "_count"))
	var ts []Target
	for _, q := range []string{"0.5", "0.9"} {
		ts = append(ts, target(fmt.Sprintf("histogram_quantile(%s, %s)", q, rate(bucket, "le", lCache, lModel, lInstance)),
			"p"+percentile(q)+" {{"+lCache+"}} "+modelLegend))
	}
	ts = append(ts, target(fmt.Sprintf("%s / ignoring (%s) group_left %s", rate(count, lCache, lModel, lInstance), lCache,
		rate(count, lModel, lInstance)), "share {{"+lCache+"}} "+modelLegend))
	p := timeseries("TTFT by cache outcome", unitSeconds,
		"Time to first token by how much of the prompt the prefix cache served: p50 and p90 from the histogram's buckets "+
			"per cache value (left axis), and each value's share of the requests that got a first token (right axis). "+
			"hit: the engine recomputed at most the block holding the last prompt token (prompt_tokens - cached_tokens <= "+
			"the KV block size: a repeated prompt, a resent conversation); partial: some of the prompt was cached, more than a "+
			"block recomputed (a shared system prompt before a new question, a conversation's new turn); miss: nothing cached "+
			"(also with engine.prefix_caching off). The gap between the hit and miss lines is what the cache saves; the "+
			"quantile of a value with no request in the interval is empty. "+help(schema.IDTTFT), ts...)
	p.FieldConfig.Overrides = []Override{{
		Matcher: Matcher{ID: "byRegexp", Options: "/^share /"},
		Properties: []Property{
			{ID: "unit", Value: unitPercent}, {ID: "min", Value: 0}, {ID: "max", Value: 1},
			{ID: "custom.axisPlacement", Value: "right"}, {ID: "custom.drawStyle", Value: "bars"},
			{ID: "custom.fillOpacity", Value: 30},
		},
	}}
	return p
}

// withExemplars is a panel of a request histogram's p50 and p99 computed
// from its buckets, with the exemplars Prometheus stored for them: each dot
// is one traced request in that bucket, and its trace_id opens the trace
// (README, "Traces"). It reads the buckets, not the recording rules: a
// recorded series has no exemplars. Prometheus stores them only with
// --enable-feature=exemplar-storage; without it the lines still show.
func withExemplars(title, id string) *Panel {
	bucket := sel(alerts.Series(id, "_bucket"))
	var ts []Target
	for _, q := range []string{"0.99", "0.5"} {
		ts = append(ts, target(fmt.Sprintf("histogram_quantile(%s, %s)", q, rate(bucket, "le", lModel, lInstance)),
			"p"+percentile(q)+" "+modelLegend))
	}
	ts[0].Exemplar = true // one query's: Grafana would draw each exemplar once per query
	return timeseries(title, unitSeconds,
		"p99 and p50 from the histogram's buckets, and as dots the exemplars of its buckets: the last traced "+
			"request (sampled, its spans exported by the sidecar) in each bucket, with its trace_id and span_id. "+
			"Hover a dot and follow trace_id to the trace (a Tempo or other OTLP-backed data source set as the "+
			"Prometheus data source's exemplar destination). Needs Prometheus with --enable-feature=exemplar-storage. "+
			help(id), ts...)
}

// latency is a panel of a latency histogram: p50, p90 and p99 from the
// quantile recording rule and the mean from the mean recording rule.
func latency(title, id, extra string) *Panel {
	var ts []Target
	for _, q := range alerts.Quantiles {
		ts = append(ts, target(sel(alerts.QuantileRecord(id), fmt.Sprintf(`%s="%s"`, alerts.LabelQuantile, q)),
			"p"+percentile(q)+" "+modelLegend))
	}
	ts = append(ts, target(sel(alerts.MeanRecord(id)), "mean "+modelLegend))
	return timeseries(title, unitSeconds,
		"p50, p90 and p99 over 5m ("+alerts.QuantileRecord(id)+") and the mean ("+alerts.MeanRecord(id)+"). "+
			help(id)+extra, ts...)
}

// percentile renders a quantile as a percentile: "0.99" → "99".
func percentile(q string) string {
	v, err := strconv.ParseFloat(q, 64)
	if err != nil {
		panic("BUG: dashboards: quantile " + q + ": " + err.Error())
	}
	return strconv.FormatFloat(v*100, 'g', -1, 64)
}

func queryVar(name, label, desc, query string) Variable {
	return Variable{
		Name: name, Label: label, Description: desc, Type: "query",
		Datasource: dsRef(),
		Query:      VariableQuery{QryType: 1, Query: query, RefID: "PrometheusVariableQueryEditor-VariableQuery"},
		Definition: query, IncludeAll: true, AllValue: ".*", Multi: true,
		Options: []any{}, Refresh: 2, Sort: 1,
	}
}

func dsRef() *DatasourceRef {
	return &DatasourceRef{Type: "prometheus", UID: "${" + DatasourceVar + "}"}
}

func target(expr, legend string) Target {
	return Target{Datasource: dsRef(), Expr: expr, LegendFormat: legend, EditorMode: "code", Range: true}
}

func ptr[T any](v T) *T { return &v }

func panel(typ, title, unit, desc string, targets []Target) *Panel {
	for i := range targets {
		targets[i].RefID = string(rune('A' + i))
	}
	return &Panel{
		Type: typ, Title: title, Description: desc, Datasource: dsRef(),
		FieldConfig: &FieldConfig{Defaults: FieldDefaults{Unit: unit}, Overrides: []Override{}},
		Targets:     targets,
	}
}

func timeseries(title, unit, desc string, targets ...Target) *Panel {
	p := panel("timeseries", title, unit, desc, targets)
	p.FieldConfig.Defaults.Color = &FieldColor{Mode: "palette-classic"}
	p.FieldConfig.Defaults.Custom = map[string]any{
		"drawStyle": "line", "lineWidth": 1, "fillOpacity": 10, "showPoints": "never",
		"spanNulls": false, "axisSoftMin": 0,
	}
	p.Options = map[string]any{
		"legend":  map[string]any{"showLegend": true, "displayMode": "table", "placement": "bottom", "calcs": []string{"mean", "max", "lastNotNull"}},
		"tooltip": map[string]any{"mode": "multi", "sort": "desc"},
	}
	return p
}

// instantTargets turns a panel's queries into instant queries.
func instantTargets(p *Panel) {
	for i := range p.Targets {
		p.Targets[i].Range, p.Targets[i].Instant = false, true
	}
}

func bargauge(title, unit, desc string, targets ...Target) *Panel {
	p := panel("bargauge", title, unit, desc, targets)
	instantTargets(p)
	p.FieldConfig.Defaults.Color = &FieldColor{Mode: "continuous-GrYlRd"}
	p.Options = map[string]any{
		"orientation": "horizontal", "displayMode": "gradient", "showUnfilled": true,
		"valueMode": "color", "namePlacement": "auto", "sizing": "auto",
		"reduceOptions": map[string]any{"calcs": []string{"lastNotNull"}, "fields": "", "values": false},
		// Required by Grafana's bar gauge options and not among its defaults.
		"legend": map[string]any{"showLegend": false, "displayMode": "list", "placement": "bottom", "calcs": []string{}},
	}
	return p
}

func stat(title, unit, desc string, targets ...Target) *Panel {
	p := panel("stat", title, unit, desc, targets)
	p.Options = map[string]any{
		"colorMode": "value", "graphMode": "area", "justifyMode": "auto", "orientation": "auto",
		"textMode": "auto", "reduceOptions": map[string]any{"calcs": []string{"lastNotNull"}, "fields": "", "values": false},
	}
	return p
}

// heatmap plots a length histogram's buckets: requests per bucket per
// interval (format heatmap, so Grafana reads the le buckets as rows).
func heatmap(title, id string) *Panel {
	t := target(fmt.Sprintf("sum by (%s) (increase(%s[$__rate_interval]))", alerts.LabelLE,
		sel(alerts.Series(id, "_bucket"))), "{{le}}")
	t.Format = "heatmap"
	p := panel("heatmap", title, unitShort,
		"Requests per interval by length bucket (tokens, upper bounds of the histogram's le buckets). "+help(id), []Target{t})
	p.Options = map[string]any{
		"calculate": false,
		"cellGap":   1,
		"color": map[string]any{
			"mode": "scheme", "scheme": "Oranges", "steps": 64, "exponent": 0.5, "fill": "dark-orange", "reverse": false,
		},
		"yAxis":      map[string]any{"axisPlacement": "left", "unit": "short", "axisLabel": "tokens"},
		"rowsFrame":  map[string]any{"layout": "le"},
		"cellValues": map[string]any{"unit": "short"},
		"tooltip":    map[string]any{"mode": "single", "yHistogram": true, "showColorScale": false},
		"legend":     map[string]any{"show": true},
		"filterValues": map[string]any{
			"le": 1e-9,
		},
	}
	return p
}

// steps renders an alert's tiers as green/orange/red color steps.
func steps(t alerts.Tiers) *Thresholds {
	return &Thresholds{Mode: "absolute", Steps: []ThresholdStep{
		{Color: "green"},
		{Color: "orange", Value: ptr(t.Warning.Threshold)},
		{Color: "red", Value: ptr(t.Critical.Threshold)},
	}}
}

// withThresholds draws an alert's warning and critical thresholds as lines.
func withThresholds(p *Panel, t alerts.Tiers) *Panel {
	p.FieldConfig.Defaults.Thresholds = steps(t)
	p.FieldConfig.Defaults.Custom["thresholdsStyle"] = map[string]any{"mode": "line"}
	return p
}

// withBelowThreshold draws a "below is bad" threshold line.
func withBelowThreshold(p *Panel, v float64) *Panel {
	p.FieldConfig.Defaults.Thresholds = &Thresholds{Mode: "absolute", Steps: []ThresholdStep{
		{Color: "red"}, {Color: "green", Value: ptr(v)},
	}}
	p.FieldConfig.Defaults.Custom["thresholdsStyle"] = map[string]any{"mode": "line"}
	return p
}

// builder lays panels out on Grafana's 24-column grid, row by row.
type builder struct {
	panels []*Panel
	id     int
	x, y   int
	rowH   int
}

func newBuilder() *builder { return &builder{} }

func (b *builder) nextID() int { b.id++; return b.id }

// row starts a new (expanded) row.
func (b *builder) row(title string) {
	b.newLine()
	b.panels = append(b.panels, &Panel{
		Type: "row", Title: title, ID: b.nextID(), Collapsed: ptr(false), Panels: []*Panel{},
		GridPos: GridPos{H: 1, W: 24, X: 0, Y: b.y},
	})
	b.y++
}

func (b *builder) newLine() {
	if b.x > 0 {
		b.x, b.y = 0, b.y+b.rowH
	}
	b.rowH = 0
}

// add places p, w columns wide and h high, wrapping to a new line when the
// row is full.
func (b *builder) add(w, h int, p *Panel) {
	if b.x+w > 24 {
		b.newLine()
	}
	p.ID = b.nextID()
	p.GridPos = GridPos{H: h, W: w, X: b.x, Y: b.y}
	b.x += w
	if h > b.rowH {
		b.rowH = h
	}
	b.panels = append(b.panels, p)
}
