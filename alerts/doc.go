// Package alerts is picometer's Prometheus recording and alerting rules as
// code.
//
// The rules are built from Go tables: every metric name comes from schema/
// (schema.Lookup(id).Exposed(), schema.PromLabel), every number an alert
// compares against comes from one [Thresholds] value ([Default] is what the
// committed file uses), and every alert links to its section of RUNBOOK.md.
// [Groups] builds the rules, [Render] writes them as a Prometheus rule file
// (picometer.rules.yml), and [UnitTests] renders the promtool unit tests
// under tests/ that show each alert firing and staying quiet.
//
// Recording rules follow the Prometheus convention level:metric:operations.
// The level "instance_model" keeps the labels job, instance,
// gen_ai_request_model and engine; "instance" keeps job and instance;
// "_quantile", "_finish_reason" and "_error_type" add that label.
//
// Regenerate with `make generate` (or `go generate ./alerts/...`); the
// package's tests fail when a committed file is stale.
package alerts

//go:generate go run ./cmd/genrules -dir .
