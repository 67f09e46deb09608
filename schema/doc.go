// Package schema is picometer's single source of metric names and wire types.
//
// Every metric family that the sidecar exports, that a dashboard plots or that
// an alert evaluates is declared once in [Families]. A declaration carries the
// OpenTelemetry name, unit, instrument kind, description, attribute keys with
// their closed value sets, and histogram bucket bounds. The Prometheus name and
// label names are never written by hand: [PromName] and [PromLabel] derive them
// with the standard OTLP→Prometheus translation, so a query returns the same
// series whether Prometheus scraped the sidecar or the data arrived over OTLP.
//
// The package also owns the wire: the NDJSON events that the daemon writes
// to the sidecar's socket ([Hello], [Request], [Engine], [Totals]: a boot's
// cumulative request totals, bucketed by [BucketIndex] and added to by
// [TotalsBody.Add], the one rule both the daemon and the sidecar use), their writer
// ([Append]), their reader ([Decoder], with a fast path for request lines
// in Append's form, beside Append because it depends on its key order; and
// [Decode], the reference), and all their validation ([Event.Validate]).
// No other package encodes or parses events.
package schema

//go:generate go run ./cmd/metricsdoc -o METRICS.md
