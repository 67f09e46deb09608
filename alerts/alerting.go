package alerts

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/picometer/picometer/schema"
)

// Severities.
const (
	SeverityWarning  = "warning"
	SeverityCritical = "critical"
)

// RunbookBase is the URL of alerts/RUNBOOK.md; each alert links to
// RunbookBase + "#" + its lower-case name, a section the runbook must have.
const RunbookBase = "https://github.com/picometer/picometer/blob/main/alerts/RUNBOOK.md"

// RunbookAnchor returns the RUNBOOK.md anchor of an alert (the GitHub
// anchor of a "## <alert>" heading).
func RunbookAnchor(alert string) string { return strings.ToLower(alert) }

// level is one tier of an alert as declared below.
type level struct {
	severity string
	tier     Tier
}

func tiers(t Tiers) []level {
	return []level{{SeverityWarning, t.Warning}, {SeverityCritical, t.Critical}}
}

// alertSpec declares one alert: its expression for a threshold, and texts
// in which %[1]s is the threshold, %[2]s the for duration and %[3]s the
// severity. Descriptions may use only {{ $labels.<name> }} and
// {{ $value | <humanize func> }} (see expandTemplate).
type alertSpec struct {
	name        string
	levels      []level
	expr        func(threshold float64) string
	threshold   func(float64) string
	summary     string
	description string
}

func (s alertSpec) rules() []Rule {
	var out []Rule
	for _, l := range s.levels {
		th := ""
		if s.threshold != nil {
			th = s.threshold(l.tier.Threshold)
		}
		r := strings.NewReplacer("%[1]s", th, "%[2]s", PromDuration(l.tier.For), "%[3]s", l.severity)
		out = append(out, Rule{
			Alert:  s.name,
			Expr:   s.expr(l.tier.Threshold),
			For:    l.tier.For,
			Labels: []KV{{"severity", l.severity}},
			Annotations: []KV{
				{"summary", r.Replace(s.summary)},
				{"description", r.Replace(s.description)},
				{"runbook_url", RunbookBase + "#" + RunbookAnchor(s.name)},
			},
		})
	}
	return out
}

func num(v float64) string     { return strconv.FormatFloat(v, 'g', -1, 64) }
func seconds(v float64) string { return num(v) + "s" }
func percent(v float64) string { return strconv.FormatFloat(v*100, 'g', 12, 64) + "%" }

// alertingGroups returns the threshold alerts built with t: the
// conditions no service level objective expresses (latency and errors are
// objectives, see slo.go).
func alertingGroups(t Thresholds) []Group {
	above := func(series string) func(float64) string {
		return func(th float64) string { return series + " > " + num(th) }
	}
	upSel := fmt.Sprintf(`up{%s=%q}`, LabelJob, t.Job)
	heartbeat := Series(schema.IDSidecarHeartbeat, "")
	model := "{{ $labels." + LabelModel + " }}"
	inst := "{{ $labels." + LabelInstance + " }}"

	requests := []alertSpec{
		{
			name: "PicometerWaitingQueueSaturated", levels: tiers(t.WaitingPerSlot),
			expr: above(RecordWaitingPerSlot), threshold: num,
			summary: "Over %[1]s waiting requests per engine slot.",
			description: "Model " + model + " on " + inst + " has {{ $value | humanize }} waiting requests per engine slot" +
				"; the %[3]s threshold is %[1]s for %[2]s.",
		},
	}
	engine := []alertSpec{
		{
			name: "PicometerKVCacheNearFull", levels: tiers(t.KVCacheUsage),
			expr: above(Series(schema.IDKVCacheUsage, "")), threshold: percent,
			summary: "KV-cache usage is above %[1]s.",
			description: "The KV cache of model " + model + " on " + inst + " is {{ $value | humanizePercentage }} full" +
				"; the %[3]s threshold is %[1]s for %[2]s.",
		},
		{
			name:   "PicometerSpecAcceptanceCollapsed",
			levels: []level{{SeverityWarning, t.SpecAcceptance}},
			expr: func(th float64) string {
				return fmt.Sprintf("%s < %s and %s > %s", RecordSpecAcceptance, num(th), RecordSpecDraftRate, num(t.SpecMinDraftRate))
			},
			threshold: percent,
			summary:   "Speculative draft acceptance fell below %[1]s.",
			description: "Only {{ $value | humanizePercentage }} of the draft tokens proposed for model " + model + " on " + inst +
				" were accepted over the last 5m (with more than " + num(t.SpecMinDraftRate) +
				" draft tokens/s); the %[3]s threshold is %[1]s for %[2]s.",
		},
	}
	// The hit ratio's level depends on the workload (how many prompts share
	// a prefix), so no fixed floor fits every server: the alert compares
	// the last hour with the 3 hours before it (RUNBOOK.md).
	baseline := RecordPrefixHitRatio3h + " offset 1h"
	engine = append(engine, alertSpec{
		name:   "PicometerPrefixCacheHitRatioCollapsed",
		levels: []level{{SeverityWarning, t.PrefixCacheDrop}},
		expr: func(th float64) string {
			return fmt.Sprintf("%s < %s * %s and %s >= %s and %s > %s", RecordPrefixHitRatio1h, num(th), baseline,
				baseline, num(t.PrefixCacheMinBaseline), RecordPrefixQueryRate1h, num(t.PrefixCacheMinQueryRate))
		},
		threshold: percent,
		summary:   "The prefix-cache hit ratio fell below %[1]s of its level over the 3 hours before.",
		description: "The prefix cache of model " + model + " on " + inst + " served {{ $value | humanizePercentage }} of the prompt tokens" +
			" looked up over the last hour, under %[1]s of its hit ratio over the 3 hours before (which was at least " +
			percent(t.PrefixCacheMinBaseline) + "), with more than " + num(t.PrefixCacheMinQueryRate) +
			" prompt tokens/s looked up; the %[3]s threshold is %[1]s for %[2]s.",
	})
	sidecar := []alertSpec{
		{
			name: "PicometerSidecarLosingEvents", levels: tiers(t.EventsLostRatio),
			expr: above(RecordEventsLostRatio), threshold: percent,
			summary: "The sidecar is losing daemon events (over %[1]s of them).",
			description: "Sidecar " + inst + " found {{ $value | humanizePercentage }} of the events in daemon sequence numbers missing" +
				" over the last 5m; the %[3]s threshold is %[1]s for %[2]s.",
		},
		{
			// Request counts survive a drop (the daemon's totals events
			// bring them back, picometer_sidecar_events_recovered_total
			// counts them); what a dropped engine snapshot carried (its
			// step records) does not, and drops mean the sidecar is away
			// or too slow.
			name: "PicometerDaemonDroppingEvents", levels: tiers(t.EventsLostRatio),
			expr: above(RecordEventsDroppedRatio), threshold: percent,
			summary: "Daemons drop metric events (over %[1]s of them).",
			description: "Daemons writing to sidecar " + inst + " dropped {{ $value | humanizePercentage }} of their events" +
				" (queue full or a failed write) over the last 5m; request counts are recovered from their totals," +
				" engine step records are lost; the %[3]s threshold is %[1]s for %[2]s.",
		},
		{
			name: "PicometerSidecarDecodeErrors", levels: tiers(t.DecodeErrorRatio),
			expr: above(RecordDecodeErrorRatio), threshold: percent,
			summary: "The sidecar rejects socket lines (over %[1]s of them).",
			description: "Sidecar " + inst + " rejected {{ $value | humanizePercentage }} of the lines on its socket" +
				" over the last 5m; the %[3]s threshold is %[1]s for %[2]s.",
		},
		{
			name: "PicometerDaemonStale", levels: tiers(t.LastEventAge),
			expr: above(Series(schema.IDSidecarLastEventAge, "")), threshold: seconds,
			summary: "No events from a daemon for more than %[1]s.",
			description: "Sidecar " + inst + " last heard from the daemon serving model " + model +
				" {{ $value | humanizeDuration }} ago; the %[3]s threshold is %[1]s for %[2]s.",
		},
		{
			name: "PicometerNoDaemonConnected", levels: []level{{SeverityWarning, t.NoDaemon}},
			expr: func(float64) string {
				return fmt.Sprintf("sum %s (%s) == 0", by(InstanceLabels...), Series(schema.IDSidecarConnections, ""))
			},
			summary:     "No daemon is connected to the sidecar.",
			description: "Sidecar " + inst + " has had no daemon connected to its socket for %[2]s.",
		},
		{
			// The heartbeat is the sidecar's own series, so this works
			// whether Prometheus scrapes the sidecar or it pushes OTLP
			// (through a Collector, Prometheus' OTLP receiver or
			// VictoriaMetrics): a sidecar seen in the last 10m whose
			// heartbeat is older than HeartbeatStale; or a scrape target
			// that is down.
			name: "PicometerSidecarDown", levels: []level{{SeverityCritical, t.TargetDown}},
			expr: func(float64) string {
				return fmt.Sprintf("time() - max_over_time(%s[10m]) > %s or on (%s, %s) %s == 0",
					heartbeat, num(HeartbeatStale.Seconds()), LabelJob, LabelInstance, upSel)
			},
			summary: "A sidecar stopped reporting.",
			description: "Sidecar " + inst + " (job {{ $labels.job }}) has neither been scraped nor pushed OTLP for over " +
				PromDuration(HeartbeatStale) + " (or its scrape target is down), for %[2]s.",
		},
		{
			name: "PicometerSidecarAbsent", levels: []level{{SeverityCritical, t.TargetAbsent}},
			expr: func(float64) string {
				return fmt.Sprintf("absent_over_time(%s[%s])", heartbeat, PromDuration(HeartbeatStale))
			},
			summary: "No sidecar reports.",
			description: "absent_over_time(" + heartbeat + "[" + PromDuration(HeartbeatStale) + "]) = {{ $value | humanize }}:" +
				" no picometer sidecar has been scraped or pushed OTLP for " + PromDuration(HeartbeatStale) +
				", for %[2]s. No LLM serving metrics are collected.",
		},
	}

	build := func(name string, specs []alertSpec) Group {
		g := Group{Name: name}
		for _, s := range specs {
			g.Rules = append(g.Rules, s.rules()...)
		}
		return g
	}
	return []Group{
		build("picometer.requests.alerts", requests),
		build("picometer.engine.alerts", engine),
		build("picometer.sidecar.alerts", sidecar),
	}
}

// HeartbeatStale is how old a sidecar's last heartbeat
// (picometer_sidecar_heartbeat_seconds, the time of its last scrape or OTLP
// export) may be before the sidecar counts as silent: three OTLP export
// intervals at the SDK's default of 60s.
const HeartbeatStale = 3 * time.Minute
