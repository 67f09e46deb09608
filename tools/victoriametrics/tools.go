//go:build tools

// Package tools pins the VictoriaMetrics single-node binary that tests use as
// the real OTLP receiver. `make bin/victoria-metrics` builds it.
package tools

import _ "github.com/VictoriaMetrics/VictoriaMetrics/app/victoria-metrics"
