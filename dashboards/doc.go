// Package dashboards generates picometer's Grafana dashboards from schema/.
//
// Dashboards are built from Go structs of the Grafana JSON model
// (grafana.go), never from templates: every metric name comes from schema/
// (through package alerts' Series) or from a recording rule of package
// alerts, every label name from schema.PromLabel, and every alert threshold
// drawn on a panel from alerts.Default(). [Files] renders them;
// `make dashboards` (go generate ./dashboards/...) writes them, and the
// package's tests fail when a committed file is stale.
//
// provisioning/ holds Grafana provisioning files: a Prometheus data source
// and a dashboard provider that loads this directory.
package dashboards

//go:generate go run ./cmd/gendashboards -dir .
