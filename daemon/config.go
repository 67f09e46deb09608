package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/picometer/picometer/internal/cgroup"
	"github.com/picometer/picometer/internal/config"
	"github.com/picometer/picometer/internal/logging"
	"github.com/picometer/picometer/native"
	"github.com/picometer/picometer/schema"
)

// Config is picometerd's configuration: a TOML file (decoded strictly:
// an unknown key is an error naming it), overridden by flags, read and
// printed as internal/config does it for both binaries. Durations are TOML
// strings such as "300s" or "1m30s".
type Config struct {
	// Listen is the HTTP address. Default "127.0.0.1:8000".
	Listen string `toml:"listen"`
	// Model is the GGUF model file. Default "build/models/default.gguf",
	// the default model `make models` generates.
	Model string `toml:"model"`
	// ModelName is the model name served by /v1/models, accepted in the
	// requests' model field and reported in responses, events and metric
	// labels. Default "": the model file's name without .gguf
	// ("build/models/default.gguf" serves "default"), not its general.name;
	// --check-config prints the effective name.
	ModelName string `toml:"model_name"`
	// ChatTemplate is a file holding a Jinja chat template that replaces
	// the model file's tokenizer.chat_template, as vLLM's and llama.cpp's
	// --chat-template do (for a model with a real vocabulary; the byte
	// vocabulary keeps picometer's chat format). A file that cannot be read
	// or parsed stops the daemon at start. Default "": the model file's.
	ChatTemplate string `toml:"chat_template"`
	// APIKeys, when not empty, are the accepted bearer tokens for /v1/*
	// (Authorization: Bearer KEY; a missing or wrong key is a 401).
	// Default none: no authentication.
	APIKeys []string `toml:"api_keys"`
	// CORSOrigins, when not empty, are the browser origins
	// ("https://app.example.com", "http://localhost:5173", or "*" for any)
	// whose pages may call the API: their preflights (OPTIONS) are answered
	// and their responses carry Access-Control-Allow-Origin; a preflight
	// from another origin is a 403 (cors.go). Default none: no CORS, and
	// OPTIONS is a 405.
	CORSOrigins []string `toml:"cors_origins"`
	// MaxBodyBytes is the largest request body; a larger one is a 413.
	// Default 1048576 (1 MiB).
	MaxBodyBytes int `toml:"max_body_bytes"`
	// RequestTimeout is each generation request's deadline from arrival,
	// enforced by the engine loop (finish reason abort, error type timeout).
	// Default "300s".
	RequestTimeout time.Duration `toml:"request_timeout"`
	// StreamStallTimeout bounds how long a response, streamed or not, may
	// wait on a client that does not read: a write deadline armed before
	// each response and each batch of stream chunks, so it never cuts a
	// stream that is being read, however long, nor one whose engine is
	// silent for a while. Default "60s".
	StreamStallTimeout time.Duration `toml:"stream_stall_timeout"`
	// StreamKeepAlive is how long a stream (stream=true) may stay silent
	// before it gets an SSE comment line (": keep-alive"), which clients
	// skip and which keeps proxies with idle timeouts from cutting a
	// request that waits in the queue or prefills; "0s" sends none.
	// Default "10s".
	StreamKeepAlive time.Duration `toml:"stream_keepalive"`
	// ReadTimeout bounds reading a request's header and body. Default "30s".
	ReadTimeout time.Duration `toml:"read_timeout"`
	// IdleTimeout closes keep-alive connections idle this long. Default "120s".
	IdleTimeout time.Duration `toml:"idle_timeout"`
	// ShutdownGrace is how long in-flight requests may finish after SIGINT
	// or SIGTERM before they are aborted (error type shutdown). Default "10s".
	ShutdownGrace time.Duration `toml:"shutdown_grace"`
	// LogLevel is the least severe level logged: "debug", "info", "warn" or
	// "error". Nothing is logged per request at info; debug adds fasthttp's
	// per-connection errors. Default "info".
	LogLevel string `toml:"log_level"`
	// Compat serves the routing gauges of GET /metrics under vLLM's names
	// too (vllm:num_requests_waiting, …; schema.RoutingProfile), the names
	// the Gateway API Inference Extension's endpoint picker reads.
	// Default true.
	Compat bool `toml:"compat"`

	// Engine configures the native engine.
	Engine EngineConfig `toml:"engine"`
	// Metrics configures the metrics emitter.
	Metrics MetricsConfig `toml:"metrics"`
	// Tracing configures request tracing (trace.go): the daemon reads each
	// request's traceparent, decides sampling and identifies its span; the
	// sidecar builds and exports the spans.
	Tracing TracingConfig `toml:"tracing"`
}

// TracingConfig is the [tracing] table.
type TracingConfig struct {
	// Sampler decides which requests' spans are sampled, by the
	// OpenTelemetry SDK's names: always_on, always_off, traceidratio,
	// parentbased_always_on, parentbased_always_off,
	// parentbased_traceidratio (a parent-based sampler follows the caller's
	// traceparent sampled flag). Default "" (then OTEL_TRACES_SAMPLER, then
	// parentbased_always_on).
	Sampler string `toml:"sampler"`
	// SamplerArg is the traceidratio samplers' ratio in 0..1. Default ""
	// (then OTEL_TRACES_SAMPLER_ARG, then 1).
	SamplerArg string `toml:"sampler_arg"`
}

// ApplyEnv fills what the file left unset from the standard variables
// OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG (read with getenv);
// errors name the variable.
func (c *Config) ApplyEnv(getenv func(string) string) error {
	t := &c.Tracing
	fromEnv := false
	if t.Sampler == "" {
		t.Sampler = strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER"))
		fromEnv = t.Sampler != ""
	}
	if t.SamplerArg == "" {
		t.SamplerArg = strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER_ARG"))
		fromEnv = fromEnv || t.SamplerArg != ""
	}
	if _, err := newSampler(t.Sampler, t.SamplerArg); err != nil {
		if fromEnv {
			return fmt.Errorf("OTEL_TRACES_SAMPLER / OTEL_TRACES_SAMPLER_ARG: %w", err)
		}
		return fmt.Errorf("tracing.sampler / tracing.sampler_arg: %w", err)
	}
	return nil
}

// EngineConfig is the [engine] table: native.Config's fields.
type EngineConfig struct {
	// BMax is the number of slots (requests decoded together). Default 8.
	BMax int `toml:"b_max"`
	// SpecK is the speculative draft length; 0 turns speculation off. Default 4.
	SpecK int `toml:"spec_k"`
	// SpecNgramMin is the shortest n-gram match that drafts, 1..8. Default 3.
	SpecNgramMin int `toml:"spec_ngram_min"`
	// PrefillChunk is the most prompt tokens prefilled per slot per step. Default 64.
	PrefillChunk int `toml:"prefill_chunk"`
	// BlockSize is the KV-cache block size in tokens. Default 16.
	BlockSize int `toml:"block_size"`
	// KVBlocks is the number of KV-cache blocks; 0 sizes the cache so every
	// slot can reach the context limit. Default 0.
	KVBlocks int `toml:"kv_blocks"`
	// MaxWaiting bounds the engine's waiting queue; a request beyond it is a
	// 429 (code queue_full). Default 256.
	MaxWaiting int `toml:"max_waiting"`
	// Threads is the number of compute threads. Default: the CPUs this
	// process may run on, fewer when a cgroup CPU quota (v1 or v2) allows
	// fewer (ceil(quota/period), at least 1), at most 64; --check-config
	// prints the value in force (DefaultThreads).
	Threads int `toml:"threads"`
	// Kernel is the instruction-set path of every kernel: "auto" (the
	// most capable measured path the CPU runs: "avx512vnni", else
	// "avx2", else "portable"; "neon" on ARM64), or one by name:
	// "avx512vnni", "avxvnni", "avx2", "neon", "portable" (a path the CPU
	// cannot run fails the start, naming it). The startup log and /debug/engine_metrics ("kernel")
	// say which runs. Default "auto".
	Kernel string `toml:"kernel"`
	// Context is the most tokens (prompt and output) a request may hold;
	// the KV cache is sized by it. 0 means the model's context_length, at
	// most 4096 (native.DefaultContext); at most the model's. Default 0.
	Context int `toml:"context"`
	// PrefixCaching reuses the KV blocks of prompt prefixes earlier
	// requests computed (a shared system prompt, the turns of a
	// conversation); false turns it off. Output is the same either way.
	// Default true.
	PrefixCaching bool `toml:"prefix_caching"`
	// Backend is the engine that runs the model: "native" (picometer's C
	// engine) or "iree" (IREE's runtime, only in a picometerd built with
	// -tags iree; docs/IREE.md). Default "native".
	Backend string `toml:"backend"`
	// IREERuntime is the IREE runtime library the iree backend loads
	// (scripts/iree.sh puts shortfin's there); read only when Backend is
	// "iree". Default "build/iree/lib/libshortfin.so".
	IREERuntime string `toml:"iree_runtime"`
}

// MetricsConfig is the [metrics] table: the NDJSON event emitter.
type MetricsConfig struct {
	// Socket is the sidecar's unix socket. Default schema.DefaultSocketPath
	// ($XDG_RUNTIME_DIR/picometer/metrics.sock, else
	// /run/picometer/metrics.sock as root, else
	// /tmp/picometer-<uid>/metrics.sock); "" turns the emitter off.
	Socket string `toml:"socket"`
	// TrustedUIDs and TrustedGIDs are the owners the socket file may have:
	// the emitter connects only to a socket owned by its own uid, a uid in
	// TrustedUIDs or a gid in TrustedGIDs (a socket another user made
	// first, a squatter's, is refused and logged; events queue as when
	// the sidecar is away). Default empty: only its own uid.
	TrustedUIDs []int `toml:"trusted_uids"`
	TrustedGIDs []int `toml:"trusted_gids"`
	// Queue bounds the events waiting to be written; overflow is dropped and
	// counted (events_dropped). Default 65536.
	Queue int `toml:"queue"`
	// SnapshotInterval is the period of engine snapshots. Default "1s".
	SnapshotInterval time.Duration `toml:"snapshot_interval"`
	// WriteTimeout bounds one write to the socket; a sidecar that stalls
	// longer is disconnected (events queue up meanwhile). Default "1s".
	WriteTimeout time.Duration `toml:"write_timeout"`
	// BackoffMin and BackoffMax bound the exponential reconnection backoff.
	// Defaults "100ms" and "5s".
	BackoffMin time.Duration `toml:"backoff_min"`
	BackoffMax time.Duration `toml:"backoff_max"`
	// FlushTimeout bounds the final flush at shutdown. Default "2s".
	FlushTimeout time.Duration `toml:"flush_timeout"`
}

// DefaultModelPath is where `make models` writes the default model.
const DefaultModelPath = "build/models/default.gguf"

// DefaultConfig returns the documented defaults on this machine: those of
// DefaultConfigOn(os.DirFS("/")).
func DefaultConfig() Config {
	return DefaultConfigOn(os.DirFS("/"))
}

// DefaultThreads is engine.threads' default, read through root (a file
// system rooted at "/"): the CPUs this process may run on
// (runtime.NumCPU, its affinity mask), fewer when a cgroup CPU quota
// allows fewer (cgroup.CPUs: ceil(quota/period), at least 1), at most 64.
// A quota file that does not parse is ignored (the CPU count stands).
func DefaultThreads(root fs.FS) int {
	n := runtime.NumCPU()
	if l, ok, _ := cgroup.CPUs(root); ok {
		n = min(n, l.CPUs())
	}
	return max(1, min(n, 64))
}

// DefaultConfigOn returns the documented defaults, the thread count read
// through root (DefaultThreads).
func DefaultConfigOn(root fs.FS) Config {
	nc := native.DefaultConfig()
	nc.Threads = DefaultThreads(root)
	return Config{
		Listen:             "127.0.0.1:8000",
		Model:              DefaultModelPath,
		MaxBodyBytes:       1 << 20,
		RequestTimeout:     300 * time.Second,
		StreamStallTimeout: 60 * time.Second,
		StreamKeepAlive:    10 * time.Second,
		ReadTimeout:        30 * time.Second,
		IdleTimeout:        120 * time.Second,
		ShutdownGrace:      10 * time.Second,
		LogLevel:           "info",
		Compat:             true,
		Engine: EngineConfig{
			BMax: nc.BMax, SpecK: nc.SpecK, SpecNgramMin: nc.SpecNgramMin, PrefillChunk: nc.PrefillChunk, BlockSize: nc.BlockSize,
			KVBlocks: nc.KVBlocks, MaxWaiting: nc.MaxWaiting, Threads: nc.Threads, Kernel: nc.Kernel,
			Backend: BackendNative, IREERuntime: DefaultIREERuntime, PrefixCaching: true,
		},
		Metrics: MetricsConfig{
			Socket:           schema.DefaultSocketPath(os.Getenv, os.Geteuid()),
			Queue:            65536,
			SnapshotInterval: time.Second,
			WriteTimeout:     time.Second,
			BackoffMin:       100 * time.Millisecond,
			BackoffMax:       5 * time.Second,
			FlushTimeout:     2 * time.Second,
		},
	}
}

// ParseConfig decodes a TOML document over the defaults, strictly
// (config.Decode: an unknown key is an error naming it); the result is not
// validated.
func ParseConfig(data []byte) (Config, error) {
	c := DefaultConfig()
	err := config.Decode(data, &c)
	return c, err
}

// LoadConfig reads and parses a config file; errors start with its path.
func LoadConfig(path string) (Config, error) {
	c := DefaultConfig()
	err := config.Load(path, &c)
	return c, err
}

// Validate returns an error naming the first key out of range.
func (c *Config) Validate() error {
	if err := config.CheckListen("listen", c.Listen); err != nil {
		return err
	}
	if c.Model == "" {
		return errors.New("model: empty; set the GGUF model file")
	}
	for i, k := range c.APIKeys {
		if k == "" || strings.ContainsAny(k, " \t\r\n") {
			return fmt.Errorf("api_keys[%d]: empty or contains whitespace", i)
		}
	}
	if err := checkCORSOrigins(c.CORSOrigins); err != nil {
		return err
	}
	if _, err := logging.ParseLevel(c.LogLevel); err != nil {
		return err
	}
	if c.MaxBodyBytes < 1024 || c.MaxBodyBytes > 1<<30 {
		return fmt.Errorf("max_body_bytes: %d not in 1024..%d", c.MaxBodyBytes, 1<<30)
	}
	for _, d := range []struct {
		key string
		v   time.Duration
	}{
		{"request_timeout", c.RequestTimeout}, {"stream_stall_timeout", c.StreamStallTimeout},
		{"read_timeout", c.ReadTimeout}, {"idle_timeout", c.IdleTimeout},
		{"metrics.snapshot_interval", c.Metrics.SnapshotInterval}, {"metrics.write_timeout", c.Metrics.WriteTimeout},
		{"metrics.backoff_min", c.Metrics.BackoffMin}, {"metrics.backoff_max", c.Metrics.BackoffMax},
		{"metrics.flush_timeout", c.Metrics.FlushTimeout},
	} {
		if d.v <= 0 {
			return fmt.Errorf("%s: %s must be > 0", d.key, d.v)
		}
	}
	if c.StreamKeepAlive < 0 {
		return fmt.Errorf("stream_keepalive: %s must be >= 0 (0 sends none)", c.StreamKeepAlive)
	}
	if c.ShutdownGrace < 0 {
		return fmt.Errorf("shutdown_grace: %s must be >= 0", c.ShutdownGrace)
	}
	if c.Metrics.SnapshotInterval < 10*time.Millisecond {
		return fmt.Errorf("metrics.snapshot_interval: %s must be >= 10ms", c.Metrics.SnapshotInterval)
	}
	if c.Metrics.BackoffMax < c.Metrics.BackoffMin {
		return fmt.Errorf("metrics.backoff_max: %s is less than metrics.backoff_min %s", c.Metrics.BackoffMax, c.Metrics.BackoffMin)
	}
	if c.Metrics.Queue < 1 || c.Metrics.Queue > 1<<24 {
		return fmt.Errorf("metrics.queue: %d not in 1..%d", c.Metrics.Queue, 1<<24)
	}
	for _, f := range []struct {
		key string
		ids []int
	}{{"metrics.trusted_uids", c.Metrics.TrustedUIDs}, {"metrics.trusted_gids", c.Metrics.TrustedGIDs}} {
		for _, id := range f.ids {
			if id < 0 || id > math.MaxUint32-1 {
				return fmt.Errorf("%s: %d is not a uid or gid", f.key, id)
			}
		}
	}
	if len(c.Metrics.Socket) > 107 {
		return fmt.Errorf("metrics.socket: path of %d bytes is longer than a unix socket path may be (107)", len(c.Metrics.Socket))
	}
	if _, err := newSampler(c.Tracing.Sampler, c.Tracing.SamplerArg); err != nil {
		return fmt.Errorf("tracing.sampler / tracing.sampler_arg: %w", err)
	}
	nc := c.NativeConfig()
	if err := nc.Validate(); err != nil {
		return fmt.Errorf("engine.%w", err)
	}
	return c.Engine.validateBackend()
}

// Describe returns the effective configuration as a TOML document that
// ParseConfig reads back to the same Config, for --check-config. API keys
// are not shown, only counted.
func Describe(c Config) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# api_keys: %d set (not shown)\n", len(c.APIKeys))
	if c.ModelName == "" {
		fmt.Fprintf(&b, "# model_name is empty: served as %s, the model file's name\n", strconv.Quote(FileModelName(c.Model)))
	}
	if c.Metrics.Socket == "" {
		fmt.Fprintf(&b, "# metrics.socket is empty: the emitter is off\n")
	}
	c.APIKeys = nil
	if err := config.Encode(&b, c); err != nil {
		panic("BUG: the daemon's Config does not encode as TOML: " + err.Error())
	}
	return b.String()
}

// SlogLevel returns LogLevel as a slog level (info when it is invalid,
// which Validate reports).
func (c *Config) SlogLevel() slog.Level {
	l, err := logging.ParseLevel(c.LogLevel)
	if err != nil {
		return slog.LevelInfo
	}
	return l
}

// NativeConfig returns the engine configuration.
func (c *Config) NativeConfig() native.Config {
	nc := native.DefaultConfig()
	e := c.Engine
	nc.BMax, nc.SpecK, nc.PrefillChunk, nc.BlockSize = e.BMax, e.SpecK, e.PrefillChunk, e.BlockSize
	nc.KVBlocks, nc.MaxWaiting, nc.Threads, nc.Kernel = e.KVBlocks, e.MaxWaiting, e.Threads, e.Kernel
	nc.Context, nc.SpecNgramMin = e.Context, e.SpecNgramMin
	nc.NoPrefixCache = !e.PrefixCaching
	return nc
}
