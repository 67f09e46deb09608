package sidecar

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/picometer/picometer/schema"

	"github.com/picometer/picometer/internal/logging"
)

// Config is picometer-sidecar's configuration: a TOML file (decoded
// strictly: an unknown key is an error), then flags, then [Config.Validate].
// The comment on each field states its default; [DefaultConfig] returns them.
type Config struct {
	// Socket is the unix stream socket daemons connect to.
	// Default schema.DefaultSocketPath ("/tmp/picometer.sock").
	Socket string `toml:"socket"`
	// SocketMode is the socket file's permission bits, in octal.
	// Default "0660".
	SocketMode string `toml:"socket_mode"`
	// Listen is the TCP address of the HTTP server (/metrics, /health).
	// Default "127.0.0.1:9464".
	Listen string `toml:"listen"`
	// MaxLineBytes is the longest NDJSON line accepted, without its newline;
	// a longer line closes its connection (reason line_too_long).
	// Default 1048576 (1 MiB).
	MaxLineBytes int `toml:"max_line_bytes"`
	// ExpireAfter is how long the series of a daemon (model and engine) stay
	// exported after its last connection closed; then they are removed.
	// Default "5m".
	ExpireAfter Duration `toml:"expire_after"`
	// LogLevel is the least severe level logged: debug, info, warn or error.
	// Rejected socket lines are logged at debug. Default "info".
	LogLevel string `toml:"log_level"`
	// MemoryLimitMiB is the Go runtime's soft memory limit in MiB
	// (debug.SetMemoryLimit; the GOMEMLIMIT environment variable wins when
	// set); 0 leaves the runtime default. It bounds the heap's growth between
	// collections under load (the live heap is a few MiB); the runtime caps
	// the GC's CPU share if the live heap ever reaches it. Default 8.
	MemoryLimitMiB int `toml:"memory_limit_mib"`
	// OTLP configures the OTLP push exporter.
	OTLP OTLPConfig `toml:"otlp"`
}

// OTLPConfig configures the OTLP exporter. Every field is optional: an unset
// field falls back to the standard OTEL_* environment variable named in its
// comment, then to the default. OTLP is off until an endpoint is set here or
// in the environment.
type OTLPConfig struct {
	// Endpoint is the full URL metrics are pushed to, e.g.
	// "http://127.0.0.1:4318/v1/metrics" (http/protobuf) or
	// "http://127.0.0.1:4317" (grpc). Default "" (then
	// OTEL_EXPORTER_OTLP_METRICS_ENDPOINT, then OTEL_EXPORTER_OTLP_ENDPOINT;
	// none set = OTLP off).
	Endpoint string `toml:"endpoint"`
	// Protocol is "http/protobuf" or "grpc". Default "" (then
	// OTEL_EXPORTER_OTLP_METRICS_PROTOCOL, then OTEL_EXPORTER_OTLP_PROTOCOL,
	// then "http/protobuf").
	Protocol string `toml:"protocol"`
	// Interval between exports. Default "" (then OTEL_METRIC_EXPORT_INTERVAL
	// in milliseconds, then 60s).
	Interval Duration `toml:"interval"`
	// Timeout of one export. Default "" (then OTEL_METRIC_EXPORT_TIMEOUT in
	// milliseconds, then 30s).
	Timeout Duration `toml:"timeout"`
	// Headers are sent with every export. Default none (then
	// OTEL_EXPORTER_OTLP_METRICS_HEADERS / OTEL_EXPORTER_OTLP_HEADERS, read
	// by the exporter).
	Headers map[string]string `toml:"headers"`
}

// Duration is a time.Duration written in TOML as a string such as "90s" or
// "5m" (a bare integer would be ambiguous).
type Duration time.Duration

// UnmarshalText parses a Go duration string.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("%q is not a duration (e.g. \"30s\", \"5m\")", b)
	}
	*d = Duration(v)
	return nil
}

// MarshalText formats d like time.Duration.String.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// DefaultConfig returns the configuration used when no file is given.
func DefaultConfig() Config {
	return Config{
		Socket:         schema.DefaultSocketPath,
		SocketMode:     "0660",
		Listen:         "127.0.0.1:9464",
		MaxLineBytes:   1 << 20,
		ExpireAfter:    Duration(5 * time.Minute),
		LogLevel:       "info",
		MemoryLimitMiB: 8,
	}
}

// Limits of Validate.
const (
	minLineBytes = 4 << 10  // a hello or a request event must fit
	maxLineBytes = 64 << 20 // the per-connection buffer grows up to this
)

// LoadConfig reads a TOML file over the defaults. Keys the Config does not
// have are an error naming the first of them. Errors start with the path.
func LoadConfig(path string) (Config, error) {
	cfg := DefaultConfig()
	data, err := os.ReadFile(path)
	if err != nil {
		return cfg, err
	}
	if err := decodeConfig(string(data), &cfg); err != nil {
		return cfg, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

// decodeConfig decodes TOML text into cfg strictly.
func decodeConfig(text string, cfg *Config) error {
	md, err := toml.Decode(text, cfg)
	if err != nil {
		var pe toml.ParseError
		switch {
		case errors.As(err, &pe) && pe.LastKey != "":
			return fmt.Errorf("line %d (last key %q): %s", pe.Position.Line, pe.LastKey, pe.Message)
		case errors.As(err, &pe):
			return fmt.Errorf("line %d: %s", pe.Position.Line, pe.Message)
		}
		return errors.New(strings.TrimPrefix(err.Error(), "toml: "))
	}
	if und := md.Undecoded(); len(und) > 0 {
		return fmt.Errorf("unknown key %q", und[0].String())
	}
	return nil
}

// Validate checks every field and returns the first problem, naming its key.
func (c *Config) Validate() error {
	if c.Socket == "" {
		return errors.New("socket: must not be empty")
	}
	if _, err := c.SocketFileMode(); err != nil {
		return err
	}
	if err := checkHostPort(c.Listen); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	if c.MaxLineBytes < minLineBytes || c.MaxLineBytes > maxLineBytes {
		return fmt.Errorf("max_line_bytes: %d not in %d..%d", c.MaxLineBytes, minLineBytes, maxLineBytes)
	}
	if c.ExpireAfter <= 0 {
		return fmt.Errorf("expire_after: must be positive, got %q", time.Duration(c.ExpireAfter).String())
	}
	if _, err := logging.ParseLevel(c.LogLevel); err != nil {
		return err
	}
	if c.MemoryLimitMiB < 0 {
		return fmt.Errorf("memory_limit_mib: %d < 0", c.MemoryLimitMiB)
	}
	return c.OTLP.validate()
}

// SocketFileMode parses SocketMode.
func (c *Config) SocketFileMode() (os.FileMode, error) {
	m, err := strconv.ParseUint(c.SocketMode, 8, 32)
	if err != nil || m > 0o777 || m&0o600 != 0o600 {
		return 0, fmt.Errorf("socket_mode: %q is not an octal permission that lets the owner read and write (e.g. \"0660\")", c.SocketMode)
	}
	return os.FileMode(m), nil
}

func checkHostPort(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port", addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("%q: port %q is not a number in 0..65535", addr, port)
	}
	_ = host // empty host = all interfaces, allowed when asked for explicitly
	return nil
}

var protocols = []string{"http/protobuf", "grpc"}

func (o *OTLPConfig) validate() error {
	if o.Endpoint != "" {
		if err := checkEndpoint(o.Endpoint); err != nil {
			return fmt.Errorf("otlp.endpoint: %w", err)
		}
	}
	if o.Protocol != "" && !slices.Contains(protocols, o.Protocol) {
		return fmt.Errorf("otlp.protocol: %q is not one of %s", o.Protocol, strings.Join(protocols, ", "))
	}
	if o.Interval < 0 {
		return fmt.Errorf("otlp.interval: must be positive, got %q", time.Duration(o.Interval).String())
	}
	if o.Timeout < 0 {
		return fmt.Errorf("otlp.timeout: must be positive, got %q", time.Duration(o.Timeout).String())
	}
	for k := range o.Headers {
		if k == "" {
			return errors.New("otlp.headers: empty header name")
		}
	}
	return nil
}

func checkEndpoint(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q is not an http:// or https:// URL", s)
	}
	return nil
}

// OTLPSettings is the OTLP configuration after the OTEL_* environment
// variables filled what the file left unset.
type OTLPSettings struct {
	Enabled  bool
	Endpoint string // "" = let the exporter read OTEL_EXPORTER_OTLP_*ENDPOINT
	Protocol string
	Interval time.Duration
	Timeout  time.Duration
	Headers  map[string]string // nil = let the exporter read OTEL_EXPORTER_OTLP_*HEADERS
}

// ResolveOTLP applies the standard OTEL_* environment variables (read with
// getenv) under the file's settings. Errors name the variable.
// OTEL_SDK_DISABLED=true turns OTLP off.
func (c *Config) ResolveOTLP(getenv func(string) string) (OTLPSettings, error) {
	o := c.OTLP
	s := OTLPSettings{Endpoint: o.Endpoint, Protocol: o.Protocol, Headers: o.Headers,
		Interval: time.Duration(o.Interval), Timeout: time.Duration(o.Timeout)}
	envEndpoint := ""
	for _, k := range []string{"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"} {
		if v := getenv(k); v != "" {
			if err := checkEndpoint(v); err != nil {
				return s, fmt.Errorf("%s: %w", k, err)
			}
			if envEndpoint == "" {
				envEndpoint = v
			}
		}
	}
	s.Enabled = s.Endpoint != "" || envEndpoint != ""
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		s.Enabled = false
	}
	if s.Protocol == "" {
		for _, k := range []string{"OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
			if v := getenv(k); v != "" {
				if !slices.Contains(protocols, v) {
					return s, fmt.Errorf("%s: %q is not one of %s", k, v, strings.Join(protocols, ", "))
				}
				s.Protocol = v
				break
			}
		}
	}
	if s.Protocol == "" {
		s.Protocol = "http/protobuf"
	}
	var err error
	if s.Interval == 0 {
		if s.Interval, err = envMillis(getenv, "OTEL_METRIC_EXPORT_INTERVAL", 60*time.Second); err != nil {
			return s, err
		}
	}
	if s.Timeout == 0 {
		if s.Timeout, err = envMillis(getenv, "OTEL_METRIC_EXPORT_TIMEOUT", 30*time.Second); err != nil {
			return s, err
		}
	}
	return s, nil
}

func envMillis(getenv func(string) string, key string, def time.Duration) (time.Duration, error) {
	v := strings.TrimSpace(getenv(key))
	if v == "" {
		return def, nil
	}
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil || ms <= 0 {
		return 0, fmt.Errorf("%s: %q is not a positive number of milliseconds", key, v)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// SlogLevel returns LogLevel as a slog level (info if invalid; Validate
// reports that).
func (c *Config) SlogLevel() slog.Level {
	l, err := logging.ParseLevel(c.LogLevel)
	if err != nil {
		return slog.LevelInfo
	}
	return l
}

// Describe prints the effective configuration, for --check-config.
func Describe(c Config, o OTLPSettings) string {
	var b strings.Builder
	fmt.Fprintf(&b, "configuration ok\n")
	fmt.Fprintf(&b, "socket           %s (mode %s)\n", c.Socket, c.SocketMode)
	fmt.Fprintf(&b, "listen           %s\n", c.Listen)
	fmt.Fprintf(&b, "max_line_bytes   %d\n", c.MaxLineBytes)
	fmt.Fprintf(&b, "expire_after     %s\n", time.Duration(c.ExpireAfter))
	fmt.Fprintf(&b, "log_level        %s\n", c.LogLevel)
	fmt.Fprintf(&b, "memory_limit_mib %d\n", c.MemoryLimitMiB)
	if !o.Enabled {
		fmt.Fprintf(&b, "otlp             off (no endpoint in the config or OTEL_EXPORTER_OTLP_[METRICS_]ENDPOINT)\n")
		return b.String()
	}
	endpoint := o.Endpoint
	if endpoint == "" {
		endpoint = "(from OTEL_EXPORTER_OTLP_[METRICS_]ENDPOINT)"
	}
	fmt.Fprintf(&b, "otlp             %s %s every %s (timeout %s)\n", o.Protocol, endpoint, o.Interval, o.Timeout)
	return b.String()
}
