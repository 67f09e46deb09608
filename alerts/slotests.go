package alerts

import (
	"bytes"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/picometer/picometer/schema"
)

// SLOUnitTestFile is the generated promtool test file of the burn-rate
// alerts, under alerts/.
const SLOUnitTestFile = "tests/slo_test.yml"

// Segment is a stretch of traffic: Minutes minutes of PerMinute events a
// minute, of which Bad are bad.
type Segment struct {
	Minutes   int
	PerMinute float64
	Bad       float64
}

// SLOEval is one evaluation time of an SLO scenario and the burn-rate tiers
// (indices into [BurnRates]) that must be firing then; none: quiet.
type SLOEval struct {
	At    time.Duration
	Fires []int
}

// SLOExpr is a PromQL expression a scenario checks at one time: it must
// return Value (one sample, labels as written by promtool).
type SLOExpr struct {
	At     time.Duration
	Expr   string
	Labels string
	Value  string
}

// SLOScenario is one promtool test of one objective's burn-rate alerts:
// traffic as segments (starting from counters at 0), evaluation times with
// the tiers expected to fire, and expression checks. An objective with no
// segments but Flat set has counters that exist and never move.
type SLOScenario struct {
	Name      string
	Objective string
	Traffic   []Segment
	// Flat is the number of minutes the counters stay unchanged (no
	// traffic); used instead of Traffic.
	Flat int
	// Model is the model label of the series; default picometer-tiny.
	Model string
	Evals []SLOEval
	Exprs []SLOExpr
}

// seriesLabels are the labels of a scenario's series: the test target, the
// model, the operation, the objective's selector (overriding), then the
// scenario's Model (overriding even the selector: traffic it excludes).
func (sc *SLOScenario) seriesLabels(o *Objective) []KV {
	out := merge(labels(testTarget, sloTestModel, []KV{testOp}), o.Selector)
	if sc.Model != "" {
		out = merge(out, []KV{{LabelModel, sc.Model}})
	}
	return out
}

func (sc *SLOScenario) model() string {
	if sc.Model != "" {
		return sc.Model
	}
	return lookupKV(sloTestModel, LabelModel)
}

// merge returns base with the values of over replacing or adding labels.
func merge(base, over []KV) []KV {
	out := append([]KV(nil), base...)
	for _, kv := range over {
		found := false
		for i := range out {
			if out[i].Key == kv.Key {
				out[i].Value, found = kv.Value, true
			}
		}
		if !found {
			out = append(out, kv)
		}
	}
	return out
}

// sloTestModel is the model label of the scenarios' series.
var sloTestModel = []KV{{LabelModel, "picometer-tiny"}, {LabelEngine, "picometer"}}

// counterValues renders a counter that grows by the per-minute increments
// of segs (pick chooses the increment) in promtool's expanding notation.
func counterValues(segs []Segment, pick func(Segment) float64) string {
	parts := []string{"0"}
	cur := 0.0
	for _, s := range segs {
		inc := pick(s)
		parts = append(parts, fmt.Sprintf("%s+%sx%d", num(cur+inc), num(inc), s.Minutes-1))
		cur += inc * float64(s.Minutes)
	}
	return strings.Join(parts, " ")
}

// scenarioSeries returns the input series of scenario sc for objective o.
func scenarioSeries(o *Objective, sc SLOScenario, serverErrorTypes []string) []InputSeries {
	segs := sc.Traffic
	if sc.Flat > 0 {
		// Counters that already counted 1000 events (10 bad) and stay there.
		flat := fmt.Sprintf("%%s+0x%d", sc.Flat)
		base := sc.seriesLabels(o)
		if o.SLI == SLIAvailability {
			return []InputSeries{
				{Series(schema.IDRequestsFinished, ""), labels(base, []KV{{LabelFinishReason, schema.FinishStop}}), fmt.Sprintf(flat, "990")},
				{Series(schema.IDRequestsFinished, ""), labels(base, []KV{{LabelFinishReason, schema.FinishError}}), fmt.Sprintf(flat, "10")},
				{Series(schema.IDRequestsFailed, ""), labels(base, []KV{{LabelErrorType, serverErrorTypes[0]}}), fmt.Sprintf(flat, "10")},
			}
		}
		return []InputSeries{
			{Series(o.Histogram, "_count"), base, fmt.Sprintf(flat, "1000")},
			{Series(o.Histogram, "_bucket"), labels(base, []KV{{LabelLE, num(o.Target)}}), fmt.Sprintf(flat, "990")},
			{Series(o.Histogram, "_bucket"), labels(base, []KV{{LabelLE, "+Inf"}}), fmt.Sprintf(flat, "1000")},
		}
	}
	total := func(s Segment) float64 { return s.PerMinute }
	good := func(s Segment) float64 { return s.PerMinute - s.Bad }
	bad := func(s Segment) float64 { return s.Bad }
	base := sc.seriesLabels(o)
	if o.SLI == SLIAvailability {
		return []InputSeries{
			{Series(schema.IDRequestsFinished, ""), labels(base, []KV{{LabelFinishReason, schema.FinishStop}}), counterValues(segs, good)},
			{Series(schema.IDRequestsFinished, ""), labels(base, []KV{{LabelFinishReason, schema.FinishError}}), counterValues(segs, bad)},
			{Series(schema.IDRequestsFailed, ""), labels(base, []KV{{LabelErrorType, serverErrorTypes[0]}}), counterValues(segs, bad)},
		}
	}
	if splitByCache(o) {
		// The time to first token is exported once per cache outcome: half
		// the good requests are hits, the rest and every bad one misses,
		// so only rules that sum over the cache label see the objective's
		// ratios (a rule keeping the label would see two series, 0% and
		// twice the share of bad, and its alerts would carry the label).
		hit := func(s Segment) float64 { return good(s) / 2 }
		missGood := func(s Segment) float64 { return good(s) - hit(s) }
		missTotal := func(s Segment) float64 { return missGood(s) + bad(s) }
		var out []InputSeries
		for _, c := range []struct {
			cache       string
			total, good func(Segment) float64
		}{{schema.CacheHit, hit, hit}, {schema.CacheMiss, missTotal, missGood}} {
			l := labels(base, []KV{{LabelCache, c.cache}})
			out = append(out,
				InputSeries{Series(o.Histogram, "_count"), l, counterValues(segs, c.total)},
				InputSeries{Series(o.Histogram, "_bucket"), labels(l, []KV{{LabelLE, num(o.Target)}}), counterValues(segs, c.good)},
				InputSeries{Series(o.Histogram, "_bucket"), labels(l, []KV{{LabelLE, "+Inf"}}), counterValues(segs, c.total)})
		}
		return out
	}
	return []InputSeries{
		{Series(o.Histogram, "_count"), base, counterValues(segs, total)},
		{Series(o.Histogram, "_bucket"), labels(base, []KV{{LabelLE, num(o.Target)}}), counterValues(segs, good)},
		{Series(o.Histogram, "_bucket"), labels(base, []KV{{LabelLE, "+Inf"}}), counterValues(segs, total)},
	}
}

// splitByCache reports whether a latency objective's histogram carries the
// cache label and its selector does not fix it.
func splitByCache(o *Objective) bool {
	if !slices.Contains(schema.Lookup(o.Histogram).Attrs, schema.AttrCache) {
		return false
	}
	return lookupKV(o.Selector, LabelCache) == ""
}

func (c *Config) objective(name string) *Objective {
	for i := range c.Objectives {
		if c.Objectives[i].Name == name {
			return &c.Objectives[i]
		}
	}
	return nil
}

// RenderSLOTests writes the promtool test file of scenarios against the
// rule file ruleFile (a path relative to the test file) generated from c.
func RenderSLOTests(c Config, ruleFile string, scenarios []SLOScenario, header ...string) []byte {
	var b bytes.Buffer
	for _, h := range header {
		b.WriteString(strings.TrimRight("# "+h, " ") + "\n")
	}
	fmt.Fprintf(&b, "rule_files:\n  - %s\nevaluation_interval: 1m\ntests:\n", yamlString(ruleFile))
	for _, sc := range scenarios {
		o := c.objective(sc.Objective)
		if o == nil {
			panic("BUG: alerts: SLO scenario " + sc.Name + " names unknown objective " + sc.Objective)
		}
		fmt.Fprintf(&b, "  - name: %s\n    interval: 1m\n    input_series:\n", yamlString(sc.Objective+": "+sc.Name))
		for _, s := range scenarioSeries(o, sc, c.ServerErrorTypes) {
			fmt.Fprintf(&b, "      - series: %s\n        values: %s\n", yamlString(s.String()), yamlString(s.Values))
		}
		if len(sc.Exprs) > 0 {
			b.WriteString("    promql_expr_test:\n")
			for _, e := range sc.Exprs {
				fmt.Fprintf(&b, "      - expr: %s\n        eval_time: %s\n        exp_samples:\n          - labels: %s\n            value: %s\n",
					yamlString(e.Expr), PromDuration(e.At), yamlString(e.Labels), e.Value)
			}
		}
		b.WriteString("    alert_rule_test:\n")
		for _, ev := range sc.Evals {
			fmt.Fprintf(&b, "      - eval_time: %s\n        alertname: %s\n", PromDuration(ev.At), AlertErrorBudgetBurn)
			if len(ev.Fires) == 0 {
				b.WriteString("        exp_alerts: []\n")
				continue
			}
			b.WriteString("        exp_alerts:\n")
			for _, i := range ev.Fires {
				r := o.burnRule(BurnRates[i])
				lbls := append([]KV{{LabelModel, sc.model()}}, r.Labels...)
				sort.Slice(lbls, func(i, j int) bool { return lbls[i].Key < lbls[j].Key })
				b.WriteString("          - exp_labels:\n")
				for _, l := range lbls {
					fmt.Fprintf(&b, "              %s: %s\n", l.Key, yamlString(l.Value))
				}
				b.WriteString("            exp_annotations:\n")
				for _, a := range r.Annotations {
					fmt.Fprintf(&b, "              %s: %s\n", a.Key, yamlString(expandTemplate(a.Value, lbls, "")))
				}
			}
		}
	}
	return b.Bytes()
}

// Tier indices of [BurnRates], for the scenarios.
const (
	tierPage1h = iota
	tierPage6h
	tierTicket1d
	tierTicket3d
)

// Scenario building blocks: 600 requests a minute.
const perMin = 600

func healthy(minutes int) Segment { return Segment{minutes, perMin, 0} }

// bad returns a segment where share of the events are bad.
func bad(minutes int, share float64) Segment {
	return Segment{minutes, perMin, perMin * share}
}

// Healthy is minutes of 600 good events a minute; Bad the same with share
// of them bad.
func Healthy(minutes int) Segment { return healthy(minutes) }

// Bad is minutes of 600 events a minute, share of them bad.
func Bad(minutes int, share float64) Segment { return bad(minutes, share) }

// QuietEvery returns evaluations every step minutes from first to last
// expecting no burn-rate alert.
func QuietEvery(first, last, step int) []SLOEval { return quietEvery(first, last, step) }

// Tier indices of [BurnRates]: the 14.4× and 6× pages, the 3× and 1×
// tickets.
const (
	TierPage1h   = tierPage1h
	TierPage6h   = tierPage6h
	TierTicket1d = tierTicket1d
	TierTicket3d = tierTicket3d
)

func mins(n int) time.Duration { return time.Duration(n) * time.Minute }

// quietEvery returns evaluations every step from first to last expecting
// no burn-rate alert.
func quietEvery(first, last, step int) []SLOEval {
	var out []SLOEval
	for m := first; m <= last; m += step {
		out = append(out, SLOEval{At: mins(m)})
	}
	return out
}

// DefaultSLOScenarios are the behaviour tests of the default objectives
// (alerts/slo.toml: availability 99.5%, TTFT ≤ 1s for 99%), each with the
// arithmetic that decides it. Workbook detection time of a burn tier for
// a step change to an error share e: budget / e × long window × factor.
func DefaultSLOScenarios() []SLOScenario {
	const day = 24 * 60
	// Six healthy hours first, so every window up to 6h holds history.
	// (Longer would be truer for the 1d and 3d windows but costs promtool
	// a minute per day of input; no scenario below runs long enough for
	// the short history to matter, see the spike.)
	const lead = 6 * 60
	return []SLOScenario{
		{
			// 10% bad on a 0.5% budget is a 20× burn. The 1h ratio reaches
			// 14.4 × 0.5% = 7.2% after 0.005/0.1 × 60m × 14.4 = 43.2m; the
			// 5m ratio is 10% at once; for: 2m → firing by 45.2m. No other
			// tier fires within the hour (6×: 6h ratio 1.7% < 3%).
			Name:      "fast burn (10% bad for 1h) pages within the workbook detection time of 43.2m + for 2m",
			Objective: "availability",
			Traffic:   []Segment{healthy(lead), bad(60, 0.10)},
			Evals: []SLOEval{
				{At: mins(lead + 40)},
				{At: mins(lead + 47), Fires: []int{tierPage1h}},
				{At: mins(lead + 60), Fires: []int{tierPage1h}},
			},
		},
		{
			// 20% of requests over 1s on a 1% budget: 20×; the 1h ratio
			// reaches 14.4% after 0.01/0.2 × 60m × 14.4 = 43.2m.
			Name:      "fast burn (20% of requests slower than 1s for 1h) pages within 43.2m + for 2m",
			Objective: "ttft",
			Traffic:   []Segment{healthy(lead), bad(60, 0.20)},
			Evals: []SLOEval{
				{At: mins(lead + 40)},
				{At: mins(lead + 47), Fires: []int{tierPage1h}},
			},
		},
		{
			// 5% bad on a 0.5% budget: 10×, below the 14.4× page. The 6h
			// ratio reaches 6 × 0.5% = 3% after 0.005/0.05 × 360m × 6 = 216m
			// (firing 15m later); the 1d ratio passes 3 × 0.5% after 155m
			// (ticket 1h later), the 3d ratio 0.5% after 41m (ticket 3h
			// later). The 1h ratio (5%) never reaches 7.2%.
			Name:      "sustained burn (5% bad, 10x) pages at 6x within 216m + for 15m, with both tickets",
			Objective: "availability",
			Traffic:   []Segment{healthy(lead), bad(4*60, 0.05)},
			Evals: []SLOEval{
				{At: mins(lead + 60)},
				{At: mins(lead + 210)},
				{At: mins(lead + 240), Fires: []int{tierPage6h, tierTicket1d, tierTicket3d}},
			},
		},
		{
			// 5 minutes of 100% bad: 3000 bad of 36000 in the 1h window
			// (8.3% > 7.2%) while the 5m window is over 7.2% too, so the 1h
			// page fires during the outage (minutes 5–9 after its start: 2.3%
			// of a 30d budget in 5 minutes is page-worthy). Once the 5m
			// window has recovered it resolves, though the 1h ratio stays
			// above 7.2% for the rest of the hour (checked below); the 6h
			// ratio (1.4% < 3%) and the 1d ratio (1.4% < 1.5%) stay below
			// their pages and ticket, so nothing else fires in the two hours
			// after. (With only 6h of history the 3d ratio is 1.4% and the
			// 1× ticket would open 3h after the spike; with 3 days of
			// history it is 0.1% and would not.)
			Name:      "brief spike (5m of 100% bad) stops paging once the short window recovers",
			Objective: "availability",
			Traffic:   []Segment{healthy(lead), bad(5, 1), healthy(2 * 60)},
			Evals: append([]SLOEval{
				{At: mins(lead + 8), Fires: []int{tierPage1h}},
			}, quietEvery(lead+12, lead+2*60, 6)...),
			Exprs: []SLOExpr{{
				At:     mins(lead + 12),
				Expr:   fmt.Sprintf(`%s{%s="availability"} > bool 0.072`, ErrorRatioRecord(time.Hour), LabelSLO),
				Labels: fmt.Sprintf(`{%s="picometer-tiny", %s="availability"}`, LabelModel, LabelSLO),
				Value:  "1",
			}},
		},
		{
			// 0.75% bad on a 0.5% budget: 1.5×. Only the 1× tier (3d and 6h
			// ratios 0.75% > 0.5%) holds; for: 3h → a ticket after 3h. The 3×
			// ticket needs 1.5% and the pages 3% and 7.2%. Every ratio is
			// constant from the first minute, so a day shows what three
			// would (the 3-day run is the custom-file test of slo_test.go).
			Name:      "slow burn (0.75% bad) opens a ticket after 3h and never pages",
			Objective: "availability",
			Traffic:   []Segment{bad(day, 0.0075)},
			Evals: []SLOEval{
				{At: mins(120)},
				{At: mins(4 * 60), Fires: []int{tierTicket3d}},
				{At: mins(day), Fires: []int{tierTicket3d}},
			},
		},
		{
			// 0.3% bad on a 0.5% budget: 0.6×, the budget outlasts the 30d
			// window (50 days). The workbook's lowest tier is 1× over 3d:
			// nothing fires, neither ticket nor page.
			Name:      "slower burn (0.3% bad, 0.6x) stays within budget: no ticket, no page",
			Objective: "availability",
			Traffic:   []Segment{bad(day, 0.003)},
			Evals:     quietEvery(60, day, 60),
		},
		{
			// Counters exist but do not move: every ratio is 0/0 = NaN and
			// no comparison holds.
			Name:      "no traffic fires nothing",
			Objective: "availability",
			Flat:      6 * 60,
			Evals:     quietEvery(5, 6*60, 30),
		},
		{
			Name:      "no traffic fires nothing",
			Objective: "ttft",
			Flat:      6 * 60,
			Evals:     quietEvery(5, 6*60, 30),
		},
		{
			// 1 request a minute, one of them bad every 4 hours (0.42%,
			// 0.8×). Each bad request puts the 5m ratio at 20% for five
			// minutes, but the 1h ratio is 1/60 = 1.7% < 7.2%, 6h 0.3% < 3%,
			// 2h 0.8% < 1.5%, 3d 0.4% < 0.5%: nothing fires, at any minute.
			Name:      "very low traffic (1 request/min, one bad every 4h) does not flap",
			Objective: "availability",
			Traffic: []Segment{
				{240, 1, 0}, {1, 1, 1}, {239, 1, 0}, {1, 1, 1}, {239, 1, 0}, {1, 1, 1}, {119, 1, 0},
			},
			Evals: quietEvery(5, 840, 1),
		},
	}
}
