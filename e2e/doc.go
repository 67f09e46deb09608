// Package e2e holds picometer's stack-level live checks: the real
// picometer-sidecar, picometerd on the tiny model and a real Prometheus
// that scrapes the sidecar and loads alerts/. The tests live in _test.go
// files; their names contain "Live" so `make e2e` selects them.
//
// They need PICOMETER_BIN_DIR (bin/picometerd, bin/picometer-sidecar, from
// `make build`), PICOMETER_TINY_MODEL (`make models`) and prometheus on
// PATH (or PICOMETER_PROMETHEUS_BIN). Missing parts skip the tests, except
// under PICOMETER_LIVE=1 (`make test`), where they fail.
package e2e
