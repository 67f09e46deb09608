package alerts

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/picometer/picometer/schema"
)

// SLI kinds.
const (
	// SLIAvailability: an event is a finished request; it is bad when it
	// failed with one of the server error types.
	SLIAvailability = "availability"
	// SLILatency: an event is an observation of a latency histogram; it is
	// good when it falls at or below the target bucket bound.
	SLILatency = "latency"
)

// Objective is one service level objective: Objective percent of the
// events selected by Selector must be good over Window.
type Objective struct {
	// Name is the value of the slo label on every series and alert of the
	// objective ([a-z][a-z0-9_]*).
	Name string
	// Description says in words what a good event is.
	Description string
	// SLI is SLIAvailability or SLILatency.
	SLI string
	// Histogram is the schema family id of a latency SLI (a histogram in
	// seconds).
	Histogram string
	// Target is a latency SLI's threshold in seconds: a bucket bound of
	// Histogram.
	Target    float64
	targetSet bool
	// Objective is the good share in percent, in (0, 100).
	Objective float64
	// Window is the period the error budget is counted over (e.g. 30d).
	Window time.Duration
	// Selector narrows the SLI's series: label = value, sorted by label.
	Selector []KV
}

var sloName = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// Validate checks one objective, naming the key of the first problem.
func (o *Objective) Validate() error {
	if !sloName.MatchString(o.Name) {
		return fmt.Errorf("name: %q is not a lower-case identifier ([a-z][a-z0-9_]*)", o.Name)
	}
	if !(o.Objective > 0 && o.Objective < 100) {
		return fmt.Errorf("objective: %s is not a percentage between 0 and 100 (exclusive)", num(o.Objective))
	}
	if o.Window <= 0 {
		return fmt.Errorf("window: must be positive")
	}
	var labels []string
	switch o.SLI {
	case SLIAvailability:
		if o.Histogram != "" {
			return fmt.Errorf("histogram: only a latency objective has one")
		}
		if o.targetSet || o.Target != 0 {
			return fmt.Errorf("target: only a latency objective has one")
		}
		// Labels both the finished (all) and failed (bad) series carry.
		failed := labelNames(schema.IDRequestsFailed)
		for _, l := range labelNames(schema.IDRequestsFinished) {
			if slices.Contains(failed, l) {
				labels = append(labels, l)
			}
		}
	case SLILatency:
		f := latencyHistogram(o.Histogram)
		if f == nil {
			return fmt.Errorf("histogram: %q is not a latency histogram of schema/ (one of %s)", o.Histogram, strings.Join(latencyHistogramIDs(), ", "))
		}
		if o.Target <= 0 {
			return fmt.Errorf("target: missing (a bucket bound of %s, e.g. \"1s\")", o.Histogram)
		}
		if err := checkBound(f, o.Target); err != nil {
			return fmt.Errorf("target: %w", err)
		}
		labels = labelNames(o.Histogram)
	default:
		return fmt.Errorf("sli: %q is not %q or %q", o.SLI, SLIAvailability, SLILatency)
	}
	for _, kv := range o.Selector {
		ok := false
		for _, l := range labels {
			ok = ok || l == kv.Key
		}
		if !ok {
			return fmt.Errorf("selector: %q is not a label of the %s series (labels: %s)", kv.Key, o.SLI, strings.Join(labels, ", "))
		}
	}
	return nil
}

// latencyHistogram returns the schema histogram id if it is in seconds.
func latencyHistogram(id string) *schema.Family {
	for _, f := range schema.Families {
		if f.ID == id && f.Kind == schema.KindHistogram && f.Unit == "s" {
			return f
		}
	}
	return nil
}

func latencyHistogramIDs() []string {
	var out []string
	for _, f := range schema.Families {
		if f.Kind == schema.KindHistogram && f.Unit == "s" {
			out = append(out, f.ID)
		}
	}
	return out
}

// checkBound reports whether v (seconds) is a bucket bound of f, naming the
// nearest bounds when it is not.
func checkBound(f *schema.Family, v float64) error {
	b := f.Buckets
	for _, x := range b {
		if x == v {
			return nil
		}
	}
	s := func(x float64) string { return num(x) + "s" }
	switch {
	case v < b[0]:
		return fmt.Errorf("%s is not a bucket bound of %s; the smallest bound is %s", s(v), f.ID, s(b[0]))
	case v > b[len(b)-1]:
		return fmt.Errorf("%s is not a bucket bound of %s; the largest bound is %s", s(v), f.ID, s(b[len(b)-1]))
	}
	i := 0
	for b[i+1] < v {
		i++
	}
	return fmt.Errorf("%s is not a bucket bound of %s; the nearest bounds are %s and %s", s(v), f.ID, s(b[i]), s(b[i+1]))
}

// Budget is the error budget: the bad share the objective allows
// (1 - Objective/100), rounded to 12 significant digits so 99.9 gives
// 0.001, not 0.0009999999999999432.
func (o *Objective) Budget() float64 {
	v, _ := strconv.ParseFloat(strconv.FormatFloat((100-o.Objective)/100, 'g', 12, 64), 64)
	return v
}

// BurnRate is one multi-window burn-rate alert tier (Google SRE Workbook,
// "Alerting on SLOs", multiwindow multi-burn-rate alerts): it fires when the
// error ratio over both Long and Short exceeds Factor × the error budget.
type BurnRate struct {
	// Severity: critical pages, warning opens a ticket.
	Severity string
	Long     time.Duration
	Short    time.Duration
	Factor   float64
	For      time.Duration
}

// BurnRates are the tiers every objective gets: the workbook's table
// (14.4× over 1h and 5m and 6× over 6h and 30m page; 1× over 3d and 6h
// opens a ticket) plus the 3× over 1d and 2h ticket Sloth and
// kubernetes-mixin add, with kubernetes-mixin's for: durations. At 14.4×
// a 30d budget lasts 50h (2% of it spent in 1h); at 6×, 5 days (5% in 6h);
// at 3×, 10 days; at 1×, the window.
var BurnRates = []BurnRate{
	{SeverityCritical, time.Hour, 5 * time.Minute, 14.4, 2 * time.Minute},
	{SeverityCritical, 6 * time.Hour, 30 * time.Minute, 6, 15 * time.Minute},
	{SeverityWarning, 24 * time.Hour, 2 * time.Hour, 3, time.Hour},
	{SeverityWarning, 3 * 24 * time.Hour, 6 * time.Hour, 1, 3 * time.Hour},
}

// SLOWindows are the windows whose error ratio is recorded for every
// objective (each long and short window of [BurnRates]); the objective's
// own window is recorded too.
var SLOWindows = []time.Duration{
	5 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour, 6 * time.Hour, 24 * time.Hour, 3 * 24 * time.Hour,
}

// Labels and names of the SLO series.
const (
	// LabelSLO carries the objective's name on every SLO series and alert.
	LabelSLO = "slo"
	// LabelLongWindow and LabelShortWindow tell the burn-rate tiers apart.
	LabelLongWindow  = "long_window"
	LabelShortWindow = "short_window"
	// AlertErrorBudgetBurn is the one burn-rate alert name (one rule per
	// objective and tier, told apart by slo, severity and windows).
	AlertErrorBudgetBurn = "PicometerErrorBudgetBurn"
	// RecordErrorBudgetRemaining is 1 - error ratio over the objective's
	// window / budget: 1 untouched, 0 spent, negative overspent.
	RecordErrorBudgetRemaining = "slo:error_budget_remaining:ratio"
)

// SLOGrouping is the aggregation of every SLO series: one per served model.
var SLOGrouping = []string{LabelModel}

// ErrorRatioRecord is the recording rule of the error ratio over window.
func ErrorRatioRecord(window time.Duration) string {
	return "slo:sli_error:ratio_rate" + PromDuration(window)
}

// leMatcher selects the bucket whose bound is v, whether written "1" (the
// sidecar, Prometheus 2) or "1.0" (Prometheus 3 normalises le).
func leMatcher(v float64) string {
	s := num(v)
	if v == math.Trunc(v) && !strings.ContainsAny(s, "e") {
		return fmt.Sprintf(`%s=~"%s(\\.0)?"`, LabelLE, s)
	}
	return fmt.Sprintf(`%s="%s"`, LabelLE, s)
}

// selector renders name{matchers…, the objective's selector…, extra…}.
func (o *Objective) selector(name string, extra []string, matchers ...string) string {
	for _, kv := range o.Selector {
		matchers = append(matchers, fmt.Sprintf("%s=%q", kv.Key, kv.Value))
	}
	matchers = append(matchers, extra...)
	if len(matchers) == 0 {
		return name
	}
	return name + "{" + strings.Join(matchers, ", ") + "}"
}

// ErrorRatioExpr is the objective's bad / all events over window, from the
// exported series (never histogram_quantile). extra matchers (e.g. a
// dashboard's model filter) are added to every selector. With no events
// the ratio is NaN and no comparison holds: no traffic fires nothing.
func (o *Objective) ErrorRatioExpr(window time.Duration, serverErrorTypes []string, extra ...string) string {
	b := by(SLOGrouping...)
	w := PromDuration(window)
	sum := func(sel string) string { return fmt.Sprintf("sum %s (rate(%s[%s]))", b, sel, w) }
	if o.SLI == SLIAvailability {
		total := sum(o.selector(Series(schema.IDRequestsFinished, ""), extra))
		bad := sum(o.selector(Series(schema.IDRequestsFailed, ""), extra,
			fmt.Sprintf(`%s=~"%s"`, LabelErrorType, strings.Join(serverErrorTypes, "|"))))
		// "or 0 * total": 0, not absent, while no server error was counted.
		return fmt.Sprintf("(%s or 0 * %s) / %s", bad, total, total)
	}
	total := sum(o.selector(Series(o.Histogram, "_count"), extra))
	good := sum(o.selector(Series(o.Histogram, "_bucket"), extra, leMatcher(o.Target)))
	return fmt.Sprintf("(%s - %s) / %s", total, good, total)
}

// BudgetRemainingExpr is 1 - error ratio over the objective's window /
// budget, from the exported series (what [RecordErrorBudgetRemaining]
// records from the recorded ratio).
func (o *Objective) BudgetRemainingExpr(serverErrorTypes []string, extra ...string) string {
	return fmt.Sprintf("1 - (%s) / %s", o.ErrorRatioExpr(o.Window, serverErrorTypes, extra...), num(o.Budget()))
}

// recordedWindows are SLOWindows plus the objective's window.
func (o *Objective) recordedWindows() []time.Duration {
	out := append([]time.Duration(nil), SLOWindows...)
	for _, w := range out {
		if w == o.Window {
			return out
		}
	}
	return append(out, o.Window)
}

// ratioSelector selects the objective's recorded ratio over window.
func (o *Objective) ratioSelector(window time.Duration) string {
	return fmt.Sprintf("%s{%s=%q}", ErrorRatioRecord(window), LabelSLO, o.Name)
}

// SLOGroups returns, per objective of c, a group of recording rules (error
// ratio over every window, budget remaining), then one group of burn-rate
// alerts: the SLO part of [Groups].
func SLOGroups(c Config) []Group {
	var out []Group
	var alerts []Rule
	for i := range c.Objectives {
		o := &c.Objectives[i]
		lbl := []KV{{LabelSLO, o.Name}}
		g := Group{Name: "picometer.slo." + o.Name + ".rules"}
		for _, w := range o.recordedWindows() {
			g.Rules = append(g.Rules, Rule{Record: ErrorRatioRecord(w), Expr: o.ErrorRatioExpr(w, c.ServerErrorTypes), Labels: lbl})
		}
		g.Rules = append(g.Rules, Rule{
			Record: RecordErrorBudgetRemaining,
			Expr:   fmt.Sprintf("1 - %s / %s", o.ratioSelector(o.Window), num(o.Budget())),
			Labels: lbl,
		})
		out = append(out, g)
		for _, br := range BurnRates {
			alerts = append(alerts, o.burnRule(br))
		}
	}
	if len(alerts) > 0 {
		out = append(out, Group{Name: "picometer.slo.alerts", Rules: alerts})
	}
	return out
}

// BurnThreshold is the error ratio at which br fires for o: Factor × budget.
func (o *Objective) BurnThreshold(br BurnRate) float64 {
	v, _ := strconv.ParseFloat(strconv.FormatFloat(br.Factor*o.Budget(), 'g', 12, 64), 64)
	return v
}

// burnRule is the alert of tier br of objective o.
func (o *Objective) burnRule(br BurnRate) Rule {
	th := num(o.BurnThreshold(br))
	kind := "page"
	if br.Severity == SeverityWarning {
		kind = "ticket"
	}
	lasts := time.Duration(float64(o.Window) / br.Factor)
	model := "{{ $labels." + LabelModel + " }}"
	long, short := PromDuration(br.Long), PromDuration(br.Short)
	return Rule{
		Alert: AlertErrorBudgetBurn,
		Expr:  fmt.Sprintf("%s > %s and %s > %s", o.ratioSelector(br.Long), th, o.ratioSelector(br.Short), th),
		For:   br.For,
		Labels: []KV{
			{"severity", br.Severity},
			{LabelSLO, o.Name},
			{LabelLongWindow, long},
			{LabelShortWindow, short},
		},
		Annotations: []KV{
			{"summary", fmt.Sprintf("Objective %s burns its error budget %s× too fast (%s).", o.Name, num(br.Factor), kind)},
			{"description", fmt.Sprintf("Objective %s (%s%% of %s over %s) of model %s: more than %s of events were bad over both the last %s and the last %s, %s× the error budget of %s; at this rate the %s budget is spent in %s.",
				o.Name, num(o.Objective), o.describe(), PromDuration(o.Window), model,
				percent(o.BurnThreshold(br)), long, short, num(br.Factor), percent(o.Budget()), PromDuration(o.Window), humanDuration(lasts))},
			{"runbook_url", RunbookBase + "#" + RunbookAnchor(AlertErrorBudgetBurn)},
		},
	}
}

// describe is the description, or one made from the SLI.
func (o *Objective) describe() string {
	if o.Description != "" {
		return o.Description
	}
	if o.SLI == SLIAvailability {
		return "requests without a server-side error"
	}
	return fmt.Sprintf("%s observations at most %ss", o.Histogram, num(o.Target))
}

// humanDuration writes d as days and hours ("2d 2h", "5d", "30d").
func humanDuration(d time.Duration) string {
	d = d.Round(time.Hour)
	days, hours := d/(24*time.Hour), (d%(24*time.Hour))/time.Hour
	switch {
	case days == 0:
		return fmt.Sprintf("%dh", hours)
	case hours == 0:
		return fmt.Sprintf("%dd", days)
	}
	return fmt.Sprintf("%dd %dh", days, hours)
}
