package sidecar

import (
	"fmt"
	"testing"
)

func TestResolveTraces(t *testing.T) {
	f := func(file string, env map[string]string, want string) {
		t.Helper()
		c := DefaultConfig()
		switch file {
		case "metrics-http":
			c.OTLP.Endpoint = "http://127.0.0.1:4318/v1/metrics"
		case "metrics-grpc":
			c.OTLP.Endpoint, c.OTLP.Protocol = "http://127.0.0.1:4317", "grpc"
		case "traces":
			c.Tracing.Endpoint = "http://tempo:4318/v1/traces"
		case "none":
			c.OTLP.Endpoint, c.Tracing.Exporter = "http://127.0.0.1:4318/v1/metrics", "none"
		}
		getenv := func(k string) string { return env[k] }
		m, err := c.ResolveOTLP(getenv)
		if err != nil {
			t.Fatal(err)
		}
		s, err := c.ResolveTraces(getenv, m)
		got := fmt.Sprintf("%v %s %s", s.Enabled, s.Protocol, s.Endpoint)
		if err != nil {
			got = err.Error()
		}
		if got != want {
			t.Fatalf("%s %v: got %q, want %q", file, env, got, want)
		}
	}
	f("", nil, "false http/protobuf ")
	f("metrics-http", nil, "true http/protobuf http://127.0.0.1:4318/v1/traces")
	f("metrics-grpc", nil, "true grpc http://127.0.0.1:4317")
	f("traces", nil, "true http/protobuf http://tempo:4318/v1/traces")
	f("none", nil, "false http/protobuf http://127.0.0.1:4318/v1/traces")
	f("", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, "true http/protobuf ") // the exporter reads it
	f("", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, "true http/protobuf ")
	f("metrics-http", map[string]string{"OTEL_TRACES_EXPORTER": "none"}, "false http/protobuf http://127.0.0.1:4318/v1/traces")
	f("metrics-http", map[string]string{"OTEL_SDK_DISABLED": "true"}, "false http/protobuf http://127.0.0.1:4318/v1/traces")
	f("metrics-http", map[string]string{"OTEL_TRACES_EXPORTER": "jaeger"}, `OTEL_TRACES_EXPORTER: "jaeger" is not one of otlp, none`)
	f("metrics-http", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"}, "true grpc http://127.0.0.1:4318/v1/metrics")
	f("metrics-http", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json"}, `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: "http/json" is not one of http/protobuf, grpc`)
	f("", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "tempo:4318"}, `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "tempo:4318" is not an http:// or https:// URL`)

	c := DefaultConfig()
	c.Tracing.Exporter = "zipkin"
	if err := c.Validate(); fmt.Sprint(err) != `tracing.exporter: "zipkin" is not one of otlp, none` {
		t.Fatal(err)
	}
	c = DefaultConfig()
	c.Tracing.Endpoint = "tempo"
	if err := c.Validate(); fmt.Sprint(err) != `tracing.endpoint: "tempo" is not an http:// or https:// URL` {
		t.Fatal(err)
	}
}
