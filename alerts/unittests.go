package alerts

import (
	"bytes"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/picometer/picometer/schema"
)

// UnitTestFile is the generated promtool test file's path under alerts/.
const UnitTestFile = "tests/picometer_test.yml"

// InputSeries is one promtool input series: name{labels} and its values in
// promtool's expanding notation ("0+60x30").
type InputSeries struct {
	Name   string
	Labels []KV
	Values string
}

// String renders the series selector promtool reads.
func (s InputSeries) String() string {
	var b strings.Builder
	b.WriteString(s.Name)
	b.WriteByte('{')
	for i, l := range s.Labels {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(l.Key + "=" + strconv.Quote(l.Value))
	}
	b.WriteByte('}')
	return b.String()
}

// UnitTest is one promtool test case for one alert: input series, an
// evaluation time, and which severities must be firing then (none: the
// alert must stay quiet).
type UnitTest struct {
	Name   string
	Alert  string
	Series []InputSeries
	Eval   time.Duration
	// Fires lists the severities expected to fire at Eval.
	Fires []string
	// Labels are the labels the firing alert carries besides alertname and
	// severity.
	Labels []KV
	// Value is $value as rendered by the description's humanize function
	// (written out by hand: promtool checks it against real evaluation).
	Value string
}

// Test fixtures: one sidecar target serving one model.
var (
	testTarget = []KV{{LabelJob, Job}, {LabelInstance, "127.0.0.1:9464"}}
	testModel  = []KV{{LabelModel, "picometer-tiny"}, {LabelEngine, "picometer"}}
	testOp     = KV{schema.PromLabel(schema.AttrOperation.Key), schema.OpChat}
)

// labels concatenates label lists.
func labels(lists ...[]KV) []KV {
	var out []KV
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

// counter is a counter series growing by perMinute each minute for 30 minutes.
func counter(id string, perMinute float64, ls ...[]KV) InputSeries {
	return InputSeries{Name: Series(id, ""), Labels: labels(ls...), Values: fmt.Sprintf("0+%sx30", num(perMinute))}
}

// gauge is a gauge series holding v for 30 minutes.
func gauge(id string, v float64, ls ...[]KV) InputSeries {
	return InputSeries{Name: Series(id, ""), Labels: labels(ls...), Values: fmt.Sprintf("%s+0x30", num(v))}
}

// histogram returns the _bucket series of family id (every bound of the
// schema plus +Inf) for 60 observations per minute that all fall in the
// bucket whose upper bound is le. The p-quantile is then
// lo + (le-lo)*p, lo being the bound below le.
func histogram(id string, le float64, ls ...[]KV) []InputSeries {
	f := schema.Lookup(id)
	found := false
	var out []InputSeries
	for _, b := range append(append([]float64(nil), f.Buckets...), inf) {
		v := "0+0x30"
		if b >= le {
			v = "0+60x30"
		}
		found = found || b == le
		out = append(out, InputSeries{
			Name:   Series(id, "_bucket"),
			Labels: labels(labels(ls...), []KV{{LabelLE, formatLE(b)}}),
			Values: v,
		})
	}
	if !found {
		panic(fmt.Sprintf("BUG: alerts: %v is not a bucket bound of %s", le, id))
	}
	return out
}

var inf = math.Inf(1)

func formatLE(b float64) string {
	if b == inf {
		return "+Inf"
	}
	return num(b)
}

// heartbeat is a sidecar's heartbeat reported every minute for the first
// minutes (its value the time of the report), then no more.
func heartbeat(minutes int) InputSeries {
	return InputSeries{Name: Series(schema.IDSidecarHeartbeat, ""), Labels: testTarget, Values: fmt.Sprintf("0+60x%d", minutes)}
}

func up(job string, v float64) InputSeries {
	return InputSeries{Name: "up", Labels: []KV{{LabelJob, job}, {LabelInstance, "127.0.0.1:9464"}}, Values: fmt.Sprintf("%s+0x30", num(v))}
}

// UnitTests returns the promtool test cases: for every alert at least one
// case where it fires and one where it stays quiet. Input values are fixed
// numbers chosen around [Default]'s thresholds; moving a threshold past one
// of them makes `promtool test rules` fail, which is the point.
func UnitTests() []UnitTest {
	w, c := SeverityWarning, SeverityCritical
	both := []string{w, c}
	tm := labels(testTarget, testModel)
	spec := func(draftPerMin, acceptedPerMin float64) []InputSeries {
		var out []InputSeries
		for _, pos := range []string{"0", "1"} {
			p := []KV{{LabelPosition, pos}}
			out = append(out,
				counter(schema.IDSpecDraftTokens, draftPerMin/2, tm, p),
				counter(schema.IDSpecAcceptedTokens, acceptedPerMin/2, tm, p))
		}
		return out
	}
	events := func(perMin float64) InputSeries {
		return counter(schema.IDSidecarEvents, perMin, testTarget, []KV{{LabelKind, schema.KindRequest}})
	}
	lost := func(perMin float64) InputSeries { return counter(schema.IDSidecarEventsLost, perMin, tm) }
	dropped := func(reason string, perMin float64) InputSeries {
		return counter(schema.IDDaemonEventsDropped, perMin, tm, []KV{{LabelReason, reason}})
	}
	rejected := func(perMin float64) InputSeries {
		return counter(schema.IDSidecarDecodeErrors, perMin, testTarget, []KV{{LabelReason, schema.ReasonMalformed}})
	}
	slots := gauge(schema.IDSlots, 8, tm)
	m := time.Minute
	// Prefix-cache lookups: 2 hours at one hit ratio, then 75 minutes at
	// another, in tokens per minute. The 3h baseline an hour back then
	// holds the 2h15m there are, as for a server that started 3h15m ago.
	// (Each minute of input costs promtool an evaluation of every rule:
	// with 7h of lead these cases took ~38 s of promtool.)
	const lead = 2 * 60
	prefix := func(perMin, before, after float64) []InputSeries {
		segs := []Segment{{lead, perMin, perMin * (1 - before)}, {75, perMin, perMin * (1 - after)}}
		return []InputSeries{
			{Name: Series(schema.IDPrefixQueries, ""), Labels: tm, Values: counterValues(segs, func(s Segment) float64 { return s.PerMinute })},
			{Name: Series(schema.IDPrefixHits, ""), Labels: tm, Values: counterValues(segs, func(s Segment) float64 { return s.PerMinute - s.Bad })},
		}
	}

	return []UnitTest{
		// Waiting queue: 8 slots.
		{Name: "4 waiting on 8 slots stays quiet", Alert: "PicometerWaitingQueueSaturated", Eval: 20 * m,
			Series: []InputSeries{slots, gauge(schema.IDRequestsWaiting, 4, tm)}},
		{Name: "12 waiting on 8 slots fires warning", Alert: "PicometerWaitingQueueSaturated", Eval: 20 * m,
			Series: []InputSeries{slots, gauge(schema.IDRequestsWaiting, 12, tm)},
			Fires:  []string{w}, Labels: tm, Value: "1.5"},
		{Name: "40 waiting on 8 slots fires warning and critical", Alert: "PicometerWaitingQueueSaturated", Eval: 20 * m,
			Series: []InputSeries{slots, gauge(schema.IDRequestsWaiting, 40, tm)},
			Fires:  both, Labels: tm, Value: "5"},

		// KV cache.
		{Name: "KV cache half full stays quiet", Alert: "PicometerKVCacheNearFull", Eval: 25 * m,
			Series: []InputSeries{gauge(schema.IDKVCacheUsage, 0.5, tm)}},
		{Name: "KV cache 95% full fires warning", Alert: "PicometerKVCacheNearFull", Eval: 25 * m,
			Series: []InputSeries{gauge(schema.IDKVCacheUsage, 0.95, tm)},
			Fires:  []string{w}, Labels: tm, Value: "95%"},
		{Name: "KV cache 99% full fires warning and critical", Alert: "PicometerKVCacheNearFull", Eval: 25 * m,
			Series: []InputSeries{gauge(schema.IDKVCacheUsage, 0.99, tm)},
			Fires:  both, Labels: tm, Value: "99%"},

		// Speculative decoding: draft tokens per minute, accepted per minute.
		{Name: "half the drafts accepted stays quiet", Alert: "PicometerSpecAcceptanceCollapsed", Eval: 25 * m,
			Series: spec(600, 300)},
		{Name: "too few drafts to judge stays quiet", Alert: "PicometerSpecAcceptanceCollapsed", Eval: 25 * m,
			Series: spec(30, 0)},
		{Name: "2% of drafts accepted fires warning", Alert: "PicometerSpecAcceptanceCollapsed", Eval: 25 * m,
			Series: spec(600, 12), Fires: []string{w}, Labels: tm, Value: "2%"},

		// Prefix cache: 6000 tokens/min (100/s) looked up. From 70% to 10%:
		// the hour's ratio passes under half the baseline (~0.63 to 0.7, the
		// 3h an hour earlier) about 38 minutes in, then for: 30m.
		{Name: "a steady 70% hit ratio stays quiet", Alert: "PicometerPrefixCacheHitRatioCollapsed", Eval: (lead + 75) * m,
			Series: prefix(6000, 0.7, 0.7)},
		{Name: "a hit ratio down from 70% to 10% fires warning", Alert: "PicometerPrefixCacheHitRatioCollapsed", Eval: (lead + 75) * m,
			Series: prefix(6000, 0.7, 0.1), Fires: []string{w}, Labels: tm, Value: "10%"},
		{Name: "an idle server (5 tokens/s) stays quiet", Alert: "PicometerPrefixCacheHitRatioCollapsed", Eval: (lead + 75) * m,
			Series: prefix(300, 0.7, 0.1)},
		{Name: "a workload sharing few prefixes (10% down to 2%) stays quiet", Alert: "PicometerPrefixCacheHitRatioCollapsed", Eval: (lead + 75) * m,
			Series: prefix(6000, 0.1, 0.02)},

		// Sidecar loss: applied request events per minute plus lost ones.
		{Name: "no lost events stays quiet", Alert: "PicometerSidecarLosingEvents", Eval: 20 * m,
			Series: []InputSeries{events(600), lost(0)}},
		{Name: "6 lost in 606 fires warning", Alert: "PicometerSidecarLosingEvents", Eval: 20 * m,
			Series: []InputSeries{events(600), lost(6)},
			Fires:  []string{w}, Labels: testTarget, Value: "0.9901%"},
		{Name: "60 lost in 660 fires warning and critical", Alert: "PicometerSidecarLosingEvents", Eval: 20 * m,
			Series: []InputSeries{events(600), lost(60)},
			Fires:  both, Labels: testTarget, Value: "9.091%"},

		{Name: "no dropped events stays quiet", Alert: "PicometerDaemonDroppingEvents", Eval: 20 * m,
			Series: []InputSeries{events(600), dropped(schema.DropQueueFull, 0), dropped(schema.DropStepRing, 60)}},
		{Name: "6 dropped by a full queue in 606 fires warning", Alert: "PicometerDaemonDroppingEvents", Eval: 20 * m,
			Series: []InputSeries{events(600), dropped(schema.DropQueueFull, 6), dropped(schema.DropWriteFail, 0)},
			Fires:  []string{w}, Labels: testTarget, Value: "0.9901%"},
		{Name: "60 lost in failed writes in 660 fires warning and critical", Alert: "PicometerDaemonDroppingEvents", Eval: 20 * m,
			Series: []InputSeries{events(600), dropped(schema.DropWriteFail, 60)},
			Fires:  both, Labels: testTarget, Value: "9.091%"},

		{Name: "no rejected lines stays quiet", Alert: "PicometerSidecarDecodeErrors", Eval: 20 * m,
			Series: []InputSeries{events(600), rejected(0)}},
		{Name: "6 rejected in 606 fires warning", Alert: "PicometerSidecarDecodeErrors", Eval: 20 * m,
			Series: []InputSeries{events(600), rejected(6)},
			Fires:  []string{w}, Labels: testTarget, Value: "0.9901%"},
		{Name: "120 rejected in 720 fires warning and critical", Alert: "PicometerSidecarDecodeErrors", Eval: 20 * m,
			Series: []InputSeries{events(600), rejected(120)},
			Fires:  both, Labels: testTarget, Value: "16.67%"},

		// Stale daemon: seconds since the last event.
		{Name: "an event 2s ago stays quiet", Alert: "PicometerDaemonStale", Eval: 10 * m,
			Series: []InputSeries{gauge(schema.IDSidecarLastEventAge, 2, tm)}},
		{Name: "silent for 45s fires warning", Alert: "PicometerDaemonStale", Eval: 10 * m,
			Series: []InputSeries{gauge(schema.IDSidecarLastEventAge, 45, tm)},
			Fires:  []string{w}, Labels: tm, Value: "45s"},
		{Name: "silent for 200s fires warning and critical", Alert: "PicometerDaemonStale", Eval: 10 * m,
			Series: []InputSeries{gauge(schema.IDSidecarLastEventAge, 200, tm)},
			Fires:  both, Labels: tm, Value: "3m 20s"},

		{Name: "a connected daemon stays quiet", Alert: "PicometerNoDaemonConnected", Eval: 10 * m,
			Series: []InputSeries{gauge(schema.IDSidecarConnections, 1, testTarget)}},
		{Name: "no connected daemon fires", Alert: "PicometerNoDaemonConnected", Eval: 10 * m,
			Series: []InputSeries{gauge(schema.IDSidecarConnections, 0, testTarget)},
			Fires:  []string{w}, Labels: testTarget, Value: "0"},

		{Name: "a scraped target that is up stays quiet", Alert: "PicometerSidecarDown", Eval: 10 * m,
			Series: []InputSeries{up(Job, 1), heartbeat(30)}},
		{Name: "a sidecar pushing OTLP (no up) stays quiet", Alert: "PicometerSidecarDown", Eval: 10 * m,
			Series: []InputSeries{heartbeat(30)}},
		{Name: "a scrape target that is down fires", Alert: "PicometerSidecarDown", Eval: 10 * m,
			Series: []InputSeries{up(Job, 0), heartbeat(2)}, Fires: []string{c}, Labels: testTarget, Value: "0"},
		{Name: "a sidecar whose OTLP pushes stopped at 2m fires", Alert: "PicometerSidecarDown", Eval: 10 * m,
			Series: []InputSeries{heartbeat(2)}, Fires: []string{c}, Labels: testTarget, Value: "8m 0s"},

		{Name: "a scraped sidecar stays quiet", Alert: "PicometerSidecarAbsent", Eval: 15 * m,
			Series: []InputSeries{up(Job, 1), heartbeat(30)}},
		{Name: "a sidecar pushing OTLP (no up) stays quiet", Alert: "PicometerSidecarAbsent", Eval: 15 * m,
			Series: []InputSeries{heartbeat(30)}},
		{Name: "no sidecar heartbeat fires", Alert: "PicometerSidecarAbsent", Eval: 15 * m,
			Series: []InputSeries{up("node", 1)}, Fires: []string{c}, Value: "1"},
	}
}

// RenderUnitTests writes the promtool test file for tests, evaluating the
// rules of [Default] (the rules file one directory up).
func RenderUnitTests(tests []UnitTest, header ...string) []byte {
	byAlert := map[string][]Rule{}
	for _, r := range Alerts(Default()) {
		byAlert[r.Alert] = append(byAlert[r.Alert], r)
	}
	var b bytes.Buffer
	for _, h := range header {
		b.WriteString(strings.TrimRight("# "+h, " ") + "\n")
	}
	fmt.Fprintf(&b, "rule_files:\n  - %s\nevaluation_interval: 1m\ntests:\n", yamlString("../"+RulesFile))
	for _, tc := range tests {
		rules, ok := byAlert[tc.Alert]
		if !ok {
			panic("BUG: alerts: unit test " + strconv.Quote(tc.Name) + " names unknown alert " + tc.Alert)
		}
		fmt.Fprintf(&b, "  - name: %s\n    interval: 1m\n    input_series:\n", yamlString(tc.Alert+": "+tc.Name))
		for _, s := range tc.Series {
			fmt.Fprintf(&b, "      - series: %s\n        values: %s\n", yamlString(s.String()), yamlString(s.Values))
		}
		fmt.Fprintf(&b, "    alert_rule_test:\n      - eval_time: %s\n        alertname: %s\n", PromDuration(tc.Eval), tc.Alert)
		if len(tc.Fires) == 0 {
			b.WriteString("        exp_alerts: []\n")
			continue
		}
		b.WriteString("        exp_alerts:\n")
		for _, sev := range tc.Fires {
			var rule *Rule
			for i := range rules {
				if rules[i].Label("severity") == sev {
					rule = &rules[i]
				}
			}
			if rule == nil {
				panic("BUG: alerts: unit test " + strconv.Quote(tc.Name) + ": " + tc.Alert + " has no " + sev + " tier")
			}
			lbls := append(append([]KV(nil), tc.Labels...), rule.Labels...)
			sort.Slice(lbls, func(i, j int) bool { return lbls[i].Key < lbls[j].Key })
			var ann []KV
			for _, a := range rule.Annotations {
				ann = append(ann, KV{a.Key, expandTemplate(a.Value, tc.Labels, tc.Value)})
			}
			b.WriteString("          - exp_labels:\n")
			for _, l := range lbls {
				fmt.Fprintf(&b, "              %s: %s\n", l.Key, yamlString(l.Value))
			}
			b.WriteString("            exp_annotations:\n")
			for _, a := range ann {
				fmt.Fprintf(&b, "              %s: %s\n", a.Key, yamlString(a.Value))
			}
		}
	}
	return b.Bytes()
}

var templateAction = regexp.MustCompile(`\{\{[^}]*\}\}`)

// expandTemplate renders the subset of Prometheus alert templating the
// rules use: {{ $labels.<name> }} from lbls and {{ $value | <func> }} as the
// hand-written value. Any other action is a BUG.
func expandTemplate(tmpl string, lbls []KV, value string) string {
	return templateAction.ReplaceAllStringFunc(tmpl, func(a string) string {
		in := strings.TrimSpace(a[2 : len(a)-2])
		if name, ok := strings.CutPrefix(in, "$labels."); ok {
			return lookupKV(lbls, name)
		}
		switch in {
		case "$value | humanize", "$value | humanizeDuration", "$value | humanizePercentage":
			return value
		}
		panic("BUG: alerts: template action " + a + " is not supported by expandTemplate")
	})
}
