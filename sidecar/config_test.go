package sidecar

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/picometer/picometer/schema"
)

const configDir = "../testdata/config/sidecar"

func TestConfigFiles(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(configDir, "*.toml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no config files in %s: %v", configDir, err)
	}
	for _, path := range files {
		name := filepath.Base(path)
		t.Run(name, func(t *testing.T) {
			cfg, err := LoadConfig(path)
			got := ""
			if err != nil {
				if !strings.HasPrefix(err.Error(), path+": ") {
					t.Fatalf("load error %q does not start with the path", err)
				}
				got = strings.TrimPrefix(err.Error(), path+": ")
			} else if err := cfg.Validate(); err != nil {
				got = err.Error()
			}
			if strings.HasPrefix(name, "bad_") {
				want := wantedError(t, path)
				if got != want {
					t.Fatalf("error\n got %q\nwant %q", got, want)
				}
				return
			}
			if got != "" {
				t.Fatalf("unexpected error: %s", got)
			}
		})
	}
}

// wantedError reads the "# error: …" first line of a bad_*.toml file.
func wantedError(t *testing.T, path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(string(data), "\n")
	want, ok := strings.CutPrefix(first, "# error: ")
	if !ok {
		t.Fatalf("%s: the first line must be \"# error: <exact message>\"", path)
	}
	return want
}

func TestConfigGoodValues(t *testing.T) {
	cfg, err := LoadConfig(filepath.Join(configDir, "good.toml"))
	if err != nil {
		t.Fatal(err)
	}
	want := Config{
		Socket: "/run/picometer/events.sock", SocketMode: "0600", Listen: "0.0.0.0:19464",
		MaxLineBytes: 65536, MaxTargets: 16, MaxDeadBoots: 4, MaxConnections: 8, MaxBufferedBytes: 1 << 20, AllowedUIDs: []int{1000, 1001}, AllowedGIDs: []int{2000}, ExpireAfter: 90 * time.Second, LogLevel: "debug", MemoryLimitMiB: 32,
		OTLP: OTLPConfig{Endpoint: "https://otel.example:4318/v1/metrics", Protocol: "grpc",
			Interval: 15 * time.Second, Timeout: 5 * time.Second,
			Headers: map[string]string{"authorization": "Bearer token"}},
	}
	if !reflect.DeepEqual(cfg, want) {
		t.Fatalf("got  %+v\nwant %+v", cfg, want)
	}
	if m, err := cfg.SocketFileMode(); err != nil || m != 0o600 {
		t.Fatalf("SocketFileMode = %o, %v", m, err)
	}
}

func TestConfigEmptyIsDefault(t *testing.T) {
	cfg, err := LoadConfig(filepath.Join(configDir, "empty.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cfg, DefaultConfig()) {
		t.Fatalf("got %+v, want the defaults %+v", cfg, DefaultConfig())
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if cfg.Socket != schema.DefaultSocketPath(os.Getenv, os.Geteuid()) || cfg.Listen != "127.0.0.1:9464" || cfg.SocketMode != "0660" || cfg.MaxLineBytes != 1<<20 {
		t.Fatalf("defaults changed: %+v", cfg)
	}
}

func TestConfigMissingFile(t *testing.T) {
	_, err := LoadConfig(filepath.Join(t.TempDir(), "nope.toml"))
	if err == nil || !os.IsNotExist(err) {
		t.Fatalf("got %v, want a not-exist error", err)
	}
}

func TestResolveOTLP(t *testing.T) {
	f := func(file OTLPConfig, env map[string]string, want OTLPSettings, wantErr string) {
		t.Helper()
		cfg := DefaultConfig()
		cfg.OTLP = file
		got, err := cfg.ResolveOTLP(func(k string) string { return env[k] })
		if wantErr != "" || err != nil {
			if err == nil || err.Error() != wantErr {
				t.Fatalf("error %v, want %q", err, wantErr)
			}
			return
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("got  %+v\nwant %+v", got, want)
		}
	}
	def := OTLPSettings{Protocol: "http/protobuf", Interval: time.Minute, Timeout: 30 * time.Second}
	with := func(mod func(*OTLPSettings)) OTLPSettings { s := def; mod(&s); return s }

	// Off until an endpoint is set.
	f(OTLPConfig{}, nil, def, "")
	// The generic endpoint variable turns it on; the exporter reads its value.
	f(OTLPConfig{}, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"},
		with(func(s *OTLPSettings) { s.Enabled = true }), "")
	f(OTLPConfig{}, map[string]string{"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://c:4318/v1/metrics"},
		with(func(s *OTLPSettings) { s.Enabled = true }), "")
	// The file's endpoint wins and is passed on.
	f(OTLPConfig{Endpoint: "http://file:4318/v1/metrics"}, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://env:4318"},
		with(func(s *OTLPSettings) { s.Enabled, s.Endpoint = true, "http://file:4318/v1/metrics" }), "")
	// OTEL_SDK_DISABLED turns it off.
	f(OTLPConfig{Endpoint: "http://file:4318/v1/metrics"}, map[string]string{"OTEL_SDK_DISABLED": "true"},
		with(func(s *OTLPSettings) { s.Endpoint = "http://file:4318/v1/metrics" }), "")
	// Protocol: file, then metrics-specific, then generic variable.
	f(OTLPConfig{}, map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, with(func(s *OTLPSettings) { s.Protocol = "grpc" }), "")
	f(OTLPConfig{}, map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "grpc"},
		with(func(s *OTLPSettings) { s.Protocol = "grpc" }), "")
	f(OTLPConfig{Protocol: "http/protobuf"}, map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, def, "")
	f(OTLPConfig{}, map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, def,
		`OTEL_EXPORTER_OTLP_PROTOCOL: "http/json" is not one of http/protobuf, grpc`)
	// Interval and timeout in milliseconds.
	f(OTLPConfig{}, map[string]string{"OTEL_METRIC_EXPORT_INTERVAL": "5000", "OTEL_METRIC_EXPORT_TIMEOUT": "1500"},
		with(func(s *OTLPSettings) { s.Interval, s.Timeout = 5*time.Second, 1500*time.Millisecond }), "")
	f(OTLPConfig{Interval: 2 * time.Second}, map[string]string{"OTEL_METRIC_EXPORT_INTERVAL": "5000"},
		with(func(s *OTLPSettings) { s.Interval = 2 * time.Second }), "")
	f(OTLPConfig{}, map[string]string{"OTEL_METRIC_EXPORT_INTERVAL": "5s"}, def,
		`OTEL_METRIC_EXPORT_INTERVAL: "5s" is not a positive number of milliseconds`)
	f(OTLPConfig{}, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4317"}, def,
		`OTEL_EXPORTER_OTLP_ENDPOINT: "collector:4317" is not an http:// or https:// URL`)
}

// TestDescribe: --check-config prints TOML that reads back to the same
// configuration (OTLP headers aside: counted, not shown).
func TestDescribe(t *testing.T) {
	for _, name := range []string{"good.toml", "empty.toml"} {
		c, err := LoadConfig(filepath.Join(configDir, name))
		if err != nil {
			t.Fatal(err)
		}
		o, err := c.ResolveOTLP(func(string) string { return "" })
		if err != nil {
			t.Fatal(err)
		}
		out := Describe(c, o)
		if strings.Contains(out, "Bearer") {
			t.Errorf("%s: OTLP headers shown:\n%s", name, out)
		}
		path := filepath.Join(t.TempDir(), "back.toml")
		if err := os.WriteFile(path, []byte(out), 0o600); err != nil {
			t.Fatal(err)
		}
		back, err := LoadConfig(path)
		if err != nil {
			t.Fatalf("%s: Describe's output does not read back: %v\n%s", name, err, out)
		}
		back.OTLP.Headers = c.OTLP.Headers
		if !reflect.DeepEqual(back, c) {
			t.Errorf("%s: read back\n%+v\nwant\n%+v\nfrom\n%s", name, back, c, out)
		}
	}
}
