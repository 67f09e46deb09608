// Package e2e holds picometer's stack-level live checks: the real
// picometer-sidecar, picometerd on the tiny model, a real Prometheus that
// scrapes the sidecar and loads alerts/, and a real VictoriaMetrics that
// receives the sidecar's OTLP push. The tests live in _test.go files; their
// names contain "Live" so `make e2e` selects them.
//
// They need PICOMETER_BIN_DIR (bin/picometerd, bin/picometer-sidecar, from
// `make build`), PICOMETER_TINY_MODEL (`make models`), PICOMETER_VM_BIN
// (`make bin/victoria-metrics`) and prometheus on PATH (or
// PICOMETER_PROMETHEUS_BIN). Missing parts skip the tests, except under
// PICOMETER_LIVE=1 (`make test`), where they fail.
package e2e
