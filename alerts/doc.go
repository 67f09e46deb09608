// Package alerts is picometer's Prometheus recording and alerting rules as
// code.
//
// The rules are generated from one TOML file, slo.toml ([Default]; an
// operator's own file goes through [LoadConfig] or the picometer-rules
// command): its service level objectives become error-ratio recording rules
// over every window, error-budget-remaining rules and multi-window
// multi-burn-rate alerts (slo.go); its [thresholds.*] tables feed the alerts
// no objective expresses (alerting.go). Every metric name comes from
// schema/ (schema.Lookup(id).Exposed(), schema.PromLabel) and every alert
// links to its section of RUNBOOK.md. [Groups] builds the rules (what a
// rule file or a PrometheusRule's spec.groups holds), [Render] and
// [PrometheusRule] write them, [UnitTests] and [DefaultSLOScenarios] render
// the promtool unit tests under tests/ that show each alert firing and
// staying quiet.
//
// Recording rules follow the Prometheus convention level:metric:operations.
// The level "instance_model" keeps the labels job, instance,
// gen_ai_request_model and engine; "instance" keeps job and instance;
// "_quantile", "_finish_reason" and "_error_type" add that label. SLO
// series have the level "slo", a label slo naming the objective, and are
// summed per model (gen_ai_request_model): slo:sli_error:ratio_rate5m,
// slo:error_budget_remaining:ratio.
//
// Regenerate with `make generate` (or `go generate ./alerts/...`); the
// package's tests fail when a committed file is stale.
package alerts

//go:generate go run ./cmd/genrules -dir .
