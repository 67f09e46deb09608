package dashboards

import (
	"fmt"
	"slices"
	"time"

	"github.com/picometer/picometer/alerts"
)

// SLO panels plot the recorded series of every objective of alerts/slo.toml,
// one query per objective; SLO series are per model (summed over
// instances), so they take the model variable only.

// sloModelFilter is the model variable as a matcher.
var sloModelFilter = fmt.Sprintf(`%s=~"$model"`, lModel)

func sloSel(record string, o *alerts.Objective) string {
	return fmt.Sprintf("%s{%s=%q, %s}", record, alerts.LabelSLO, o.Name, sloModelFilter)
}

// sloBudgetPanel: error budget remaining per objective.
func sloBudgetPanel(c alerts.Config) *Panel {
	var ts []Target
	for i := range c.Objectives {
		o := &c.Objectives[i]
		tg := target(sloSel(alerts.RecordErrorBudgetRemaining, o), o.Name+" {{"+lModel+"}}")
		tg.Inline = o.BudgetRemainingExpr(c.ServerErrorTypes, sloModelFilter)
		ts = append(ts, tg)
	}
	p := timeseries("Error budget remaining", unitPercent,
		"Share of each objective's error budget left over its window ("+alerts.RecordErrorBudgetRemaining+
			"): 100% untouched, 0 spent, below 0 overspent. Objectives and windows: alerts/"+alerts.SLOFile+".", ts...)
	p.FieldConfig.Defaults.Thresholds = &Thresholds{Mode: "absolute", Steps: []ThresholdStep{
		{Color: "red"}, {Color: "orange", Value: ptr(0.0)}, {Color: "green", Value: ptr(0.25)},
	}}
	p.FieldConfig.Defaults.Custom["thresholdsStyle"] = map[string]any{"mode": "line"}
	return p
}

// sloBurnPanel: burn rate over 1h per objective, with the page factors as
// lines.
func sloBurnPanel(c alerts.Config) *Panel {
	var ts []Target
	for i := range c.Objectives {
		o := &c.Objectives[i]
		budget := num(o.Budget())
		tg := target(fmt.Sprintf("%s / %s", sloSel(alerts.ErrorRatioRecord(time.Hour), o), budget), o.Name+" {{"+lModel+"}}")
		tg.Inline = fmt.Sprintf("(%s) / %s", o.ErrorRatioExpr(time.Hour, c.ServerErrorTypes, sloModelFilter), budget)
		ts = append(ts, tg)
	}
	var factors []float64
	for _, br := range alerts.BurnRates {
		if br.Factor > 1 && !slices.Contains(factors, br.Factor) {
			factors = append(factors, br.Factor)
		}
	}
	slices.Sort(factors)
	colors := []string{"yellow", "orange", "red"}
	lines := []ThresholdStep{{Color: "green"}}
	for i, f := range factors {
		lines = append(lines, ThresholdStep{Color: colors[min(i, len(colors)-1)], Value: ptr(f)})
	}
	p := timeseries("Burn rate (1h)", unitShort,
		"Bad share of events over the last hour divided by the error budget ("+alerts.ErrorRatioRecord(time.Hour)+
			" / budget): at 1 the budget lasts exactly the objective's window. Lines: the burn factors of the "+
			alerts.AlertErrorBudgetBurn+" tiers (14.4× over 1h pages).", ts...)
	p.FieldConfig.Defaults.Thresholds = &Thresholds{Mode: "absolute", Steps: lines}
	p.FieldConfig.Defaults.Custom["thresholdsStyle"] = map[string]any{"mode": "line"}
	return p
}

// withSLOTarget draws the latency target of the objective on histogram id,
// if one exists, as a line.
func withSLOTarget(p *Panel, c alerts.Config, id string) *Panel {
	for _, o := range c.Objectives {
		if o.SLI == alerts.SLILatency && o.Histogram == id {
			p.FieldConfig.Defaults.Thresholds = &Thresholds{Mode: "absolute", Steps: []ThresholdStep{
				{Color: "green"}, {Color: "red", Value: ptr(o.Target)},
			}}
			p.FieldConfig.Defaults.Custom["thresholdsStyle"] = map[string]any{"mode": "line"}
			p.Description += fmt.Sprintf(" Line: the %s objective's target (%s%% of events at most %ss).", o.Name, num(o.Objective), num(o.Target))
			return p
		}
	}
	return p
}

func num(v float64) string { return fmt.Sprint(v) }
