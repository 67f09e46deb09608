//go:build tools

// Package tools pins benchstat (golang.org/x/perf), which summarises
// `make bench` output as medians with confidence intervals and compares two
// runs side by side. `make bin/benchstat` builds it.
package tools

import _ "golang.org/x/perf/cmd/benchstat"
