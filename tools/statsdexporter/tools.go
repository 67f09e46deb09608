//go:build tools

// Package tools pins prometheus/statsd_exporter, the exporter the sidecar's
// memory and CPU budget is measured against side by side
// (BenchmarkVsStatsdExporter). `make bin/statsd_exporter` builds it.
package tools

import _ "github.com/prometheus/statsd_exporter"
