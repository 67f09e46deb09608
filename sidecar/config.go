package sidecar

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/picometer/picometer/internal/config"
	"github.com/picometer/picometer/internal/logging"
	"github.com/picometer/picometer/schema"
)

// Config is picometer-sidecar's configuration: a TOML file (decoded
// strictly: an unknown key is an error), then flags, then [Config.Validate],
// read and printed as internal/config does it for both binaries.
// The comment on each field states its default; [DefaultConfig] returns them.
type Config struct {
	// Socket is the unix stream socket daemons connect to.
	// Default schema.DefaultSocketPath: $XDG_RUNTIME_DIR/picometer/metrics.sock,
	// else /run/picometer/metrics.sock as root, else
	// /tmp/picometer-<uid>/metrics.sock; the sidecar creates the default
	// path's directory (0700) and refuses one it does not own.
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
	// MaxTargets caps the targets (model and engine pairs) with series: a
	// hello that would add one more is refused, counted under
	// too_many_targets, and its connection closed. Default 64 (sized for
	// the daemons of one node).
	MaxTargets int `toml:"max_targets"`
	// MaxDeadBoots caps the disconnected boots (daemon runs, by boot id) a
	// target remembers: past it, the oldest are folded into the target's
	// retired totals at the next hello of a new boot (which lets them reach
	// twice the cap first) and at each expiry pass. A folded boot that
	// comes back is a new one, so keep it above the daemons one target
	// restarts at once. Each remembered boot holds about 8 KiB. Default 16.
	MaxDeadBoots int `toml:"max_dead_boots"`
	// MaxConnections caps the open daemon connections: one more is closed
	// at once and counted under too_many_connections. Each connection
	// buffers 64 KiB, and more only from max_buffered_bytes, so the socket's
	// buffers never hold more than max_connections × 64 KiB +
	// max_buffered_bytes. Default 64.
	MaxConnections int `toml:"max_connections"`
	// MaxBufferedBytes bounds how much the connections' line buffers may
	// grow, together, beyond their initial 64 KiB each, while they hold
	// long partial lines: a connection whose line needs more is closed and
	// counted under buffer_full. At least max_line_bytes. Default 16777216
	// (16 MiB).
	MaxBufferedBytes int `toml:"max_buffered_bytes"`
	// AllowedUIDs and AllowedGIDs are the peers that may connect to the
	// socket: a connecting process (SO_PEERCRED, Linux) whose uid is in
	// AllowedUIDs or whose gid is in AllowedGIDs; any other is closed at
	// once and counted under peer_not_allowed. Default empty: the
	// sidecar's own uid and gid.
	AllowedUIDs []int `toml:"allowed_uids"`
	AllowedGIDs []int `toml:"allowed_gids"`
	// ExpireAfter is how long the series of a daemon (model and engine) stay
	// exported after its last connection closed; then they are removed.
	// Default "5m".
	ExpireAfter time.Duration `toml:"expire_after"`
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
	// Tracing configures request spans (tracing_config.go).
	Tracing TracingConfig `toml:"tracing"`
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
	Interval time.Duration `toml:"interval"`
	// Timeout of one export. Default "" (then OTEL_METRIC_EXPORT_TIMEOUT in
	// milliseconds, then 30s).
	Timeout time.Duration `toml:"timeout"`
	// Headers are sent with every export. Default none (then
	// OTEL_EXPORTER_OTLP_METRICS_HEADERS / OTEL_EXPORTER_OTLP_HEADERS, read
	// by the exporter).
	Headers map[string]string `toml:"headers"`
}

// DefaultConfig returns the configuration used when no file is given.
func DefaultConfig() Config {
	return Config{
		Socket:           schema.DefaultSocketPath(os.Getenv, os.Geteuid()),
		SocketMode:       "0660",
		Listen:           "127.0.0.1:9464",
		MaxLineBytes:     1 << 20,
		MaxTargets:       64,
		MaxDeadBoots:     MaxDeadBoots,
		MaxConnections:   64,
		MaxBufferedBytes: 16 << 20,
		ExpireAfter:      5 * time.Minute,
		LogLevel:         "info",
		MemoryLimitMiB:   8,
	}
}

// Limits of Validate.
const (
	minLineBytes     = 4 << 10  // a hello or a request event must fit
	maxLineBytes     = 64 << 20 // the per-connection buffer grows up to this
	maxTargets       = 100_000
	maxDeadBoots     = 4096 // × 2 × ~8 KiB: 64 MiB for one target at most
	maxConnections   = 65_536
	maxBufferedBytes = 1 << 30
)

// LoadConfig reads a TOML file over the defaults, strictly (config.Load):
// keys the Config does not have are an error naming the first of them.
// Errors start with the path.
func LoadConfig(path string) (Config, error) {
	cfg := DefaultConfig()
	err := config.Load(path, &cfg)
	return cfg, err
}

// Validate checks every field and returns the first problem, naming its key.
func (c *Config) Validate() error {
	if c.Socket == "" {
		return errors.New("socket: must not be empty")
	}
	if _, err := c.SocketFileMode(); err != nil {
		return err
	}
	if err := config.CheckListen("listen", c.Listen); err != nil {
		return err
	}
	if c.MaxLineBytes < minLineBytes || c.MaxLineBytes > maxLineBytes {
		return fmt.Errorf("max_line_bytes: %d not in %d..%d", c.MaxLineBytes, minLineBytes, maxLineBytes)
	}
	if c.MaxTargets < 1 || c.MaxTargets > maxTargets {
		return fmt.Errorf("max_targets: %d not in 1..%d", c.MaxTargets, maxTargets)
	}
	if c.MaxDeadBoots < 1 || c.MaxDeadBoots > maxDeadBoots {
		return fmt.Errorf("max_dead_boots: %d not in 1..%d", c.MaxDeadBoots, maxDeadBoots)
	}
	if c.MaxConnections < 1 || c.MaxConnections > maxConnections {
		return fmt.Errorf("max_connections: %d not in 1..%d", c.MaxConnections, maxConnections)
	}
	if c.MaxBufferedBytes < c.MaxLineBytes || c.MaxBufferedBytes > maxBufferedBytes {
		return fmt.Errorf("max_buffered_bytes: %d not in max_line_bytes (%d)..%d", c.MaxBufferedBytes, c.MaxLineBytes, maxBufferedBytes)
	}
	for _, f := range []struct {
		key string
		ids []int
	}{{"allowed_uids", c.AllowedUIDs}, {"allowed_gids", c.AllowedGIDs}} {
		for _, id := range f.ids {
			if id < 0 || id > math.MaxUint32-1 {
				return fmt.Errorf("%s: %d is not a uid or gid", f.key, id)
			}
		}
	}
	if c.ExpireAfter <= 0 {
		return fmt.Errorf("expire_after: must be positive, got %q", c.ExpireAfter.String())
	}
	if _, err := logging.ParseLevel(c.LogLevel); err != nil {
		return err
	}
	if c.MemoryLimitMiB < 0 {
		return fmt.Errorf("memory_limit_mib: %d < 0", c.MemoryLimitMiB)
	}
	if err := c.Tracing.validate(); err != nil {
		return err
	}
	return c.OTLP.validate()
}

// peers returns the peer policy: the allowed uids and gids, or the
// sidecar's own when both lists are empty.
func (c *Config) peers() *peerPolicy {
	p := &peerPolicy{}
	for _, id := range c.AllowedUIDs {
		p.uids = append(p.uids, uint32(id))
	}
	for _, id := range c.AllowedGIDs {
		p.gids = append(p.gids, uint32(id))
	}
	if len(p.uids)+len(p.gids) == 0 {
		p.uids, p.gids = []uint32{uint32(os.Geteuid())}, []uint32{uint32(os.Getegid())}
	}
	return p
}

// SocketFileMode parses SocketMode.
func (c *Config) SocketFileMode() (os.FileMode, error) {
	m, err := strconv.ParseUint(c.SocketMode, 8, 32)
	if err != nil || m > 0o777 || m&0o600 != 0o600 {
		return 0, fmt.Errorf("socket_mode: %q is not an octal permission that lets the owner read and write (e.g. \"0660\")", c.SocketMode)
	}
	return os.FileMode(m), nil
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
		return fmt.Errorf("otlp.interval: must be positive, got %q", o.Interval.String())
	}
	if o.Timeout < 0 {
		return fmt.Errorf("otlp.timeout: must be positive, got %q", o.Timeout.String())
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
		Interval: o.Interval, Timeout: o.Timeout}
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

// Describe returns the effective configuration as a TOML document that
// LoadConfig reads back to the same Config (OTLP headers aside: they are
// counted, not shown, as they often carry credentials), followed by the
// OTLP settings the OTEL_* variables resolve to, as comments. For
// --check-config.
func Describe(c Config, o OTLPSettings) string {
	var b strings.Builder
	if len(c.OTLP.Headers) > 0 {
		fmt.Fprintf(&b, "# otlp.headers: %d set (not shown)\n", len(c.OTLP.Headers))
	}
	c.OTLP.Headers = nil
	if err := config.Encode(&b, c); err != nil {
		panic("BUG: the sidecar's Config does not encode as TOML: " + err.Error())
	}
	if !o.Enabled {
		fmt.Fprintf(&b, "\n# otlp: off (no endpoint in the config or OTEL_EXPORTER_OTLP_[METRICS_]ENDPOINT)\n")
		return b.String()
	}
	endpoint := o.Endpoint
	if endpoint == "" {
		endpoint = "(from OTEL_EXPORTER_OTLP_[METRICS_]ENDPOINT)"
	}
	fmt.Fprintf(&b, "\n# otlp: %s %s every %s (timeout %s)\n", o.Protocol, endpoint, o.Interval, o.Timeout)
	return b.String()
}
