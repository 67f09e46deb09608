package sidecar

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// This file resolves where request spans go (spans.go builds them):
// the [tracing] table over the standard OTEL_* variables, falling back to
// the metrics' OTLP settings, so that one endpoint configures both.
// tracing_config_test.go covers it.

// TracingConfig is the [tracing] table.
type TracingConfig struct {
	// Endpoint is the full URL spans are pushed to, e.g.
	// "http://127.0.0.1:4318/v1/traces" (http/protobuf) or
	// "http://127.0.0.1:4317" (grpc). Default "" (then
	// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, then OTEL_EXPORTER_OTLP_ENDPOINT,
	// to which the http exporter appends /v1/traces, then otlp.endpoint
	// with a final /v1/metrics replaced by /v1/traces; none set = no spans).
	Endpoint string `toml:"endpoint"`
	// Exporter is "otlp" or "none" (no spans, whatever the endpoint).
	// Default "" (then OTEL_TRACES_EXPORTER, then "otlp").
	Exporter string `toml:"exporter"`
	// LogRequests logs one line per finished request at info level: its
	// request id (the response id), trace and span ids, operation, model,
	// finish reason, error type, tokens, TTFT and end-to-end latency.
	// Default false.
	LogRequests bool `toml:"log_requests"`
}

var traceExporters = []string{"otlp", "none"}

func (t *TracingConfig) validate() error {
	if t.Endpoint != "" {
		if err := checkEndpoint(t.Endpoint); err != nil {
			return fmt.Errorf("tracing.endpoint: %w", err)
		}
	}
	if t.Exporter != "" && !slices.Contains(traceExporters, t.Exporter) {
		return fmt.Errorf("tracing.exporter: %q is not one of %s", t.Exporter, strings.Join(traceExporters, ", "))
	}
	return nil
}

// TraceSettings is where spans go after the environment filled what the
// file left unset.
type TraceSettings struct {
	Enabled  bool
	Endpoint string // "" = the exporter reads OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT
	Protocol string
	Timeout  time.Duration
	Headers  map[string]string // nil = the exporter reads OTEL_EXPORTER_OTLP_[TRACES_]HEADERS
}

// ResolveTraces applies OTEL_TRACES_EXPORTER, OTEL_EXPORTER_OTLP_TRACES_*
// and OTEL_EXPORTER_OTLP_* (read with getenv) under the file's [tracing]
// and [otlp] settings; m is the resolved metrics settings. Errors name the
// variable or key.
func (c *Config) ResolveTraces(getenv func(string) string, m OTLPSettings) (TraceSettings, error) {
	t := c.Tracing
	s := TraceSettings{Endpoint: t.Endpoint, Protocol: m.Protocol, Timeout: m.Timeout, Headers: c.OTLP.Headers}
	exporter := t.Exporter
	if exporter == "" {
		if v := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); v != "" {
			if !slices.Contains(traceExporters, v) {
				return s, fmt.Errorf("OTEL_TRACES_EXPORTER: %q is not one of %s", v, strings.Join(traceExporters, ", "))
			}
			exporter = v
		}
	}
	if v := getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"); v != "" && c.OTLP.Protocol == "" {
		if !slices.Contains(protocols, v) {
			return s, fmt.Errorf("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: %q is not one of %s", v, strings.Join(protocols, ", "))
		}
		s.Protocol = v
	}
	env := false
	for _, k := range []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"} {
		if v := getenv(k); v != "" {
			if err := checkEndpoint(v); err != nil {
				return s, fmt.Errorf("%s: %w", k, err)
			}
			env = true
		}
	}
	switch {
	case s.Endpoint != "" || env:
	case c.OTLP.Endpoint != "":
		s.Endpoint = c.OTLP.Endpoint
		if s.Protocol == "http/protobuf" {
			if base, ok := strings.CutSuffix(s.Endpoint, "/v1/metrics"); ok {
				s.Endpoint = base + "/v1/traces"
			}
		}
	}
	s.Enabled = (s.Endpoint != "" || env) && exporter != "none" &&
		!strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true")
	return s, nil
}

// NewTraceExporter returns the OTLP span exporter of s.Protocol.
func NewTraceExporter(ctx context.Context, s TraceSettings) (sdktrace.SpanExporter, error) {
	o := OTLPSettings{Endpoint: s.Endpoint, Timeout: s.Timeout, Headers: s.Headers}
	switch s.Protocol {
	case "grpc":
		return otlptracegrpc.New(ctx, exporterOptions(o, otlptracegrpc.WithTimeout, otlptracegrpc.WithEndpointURL, otlptracegrpc.WithHeaders)...)
	case "http/protobuf":
		return otlptracehttp.New(ctx, exporterOptions(o, otlptracehttp.WithTimeout, otlptracehttp.WithEndpointURL, otlptracehttp.WithHeaders)...)
	}
	return nil, fmt.Errorf("otlp: protocol %q is not one of http/protobuf, grpc", s.Protocol)
}
