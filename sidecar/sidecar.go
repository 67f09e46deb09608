package sidecar

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"

	"github.com/picometer/picometer/schema"
)

// This file: binary_test.go and live_test.go cover it (the built binary, real
// sockets, promtool, VictoriaMetrics).

// Sidecar is picometer-sidecar: the daemons' socket, the aggregation,
// Prometheus /metrics and, when an endpoint is configured, the OTLP push.
type Sidecar struct {
	cfg  Config
	otlp OTLPSettings
	log  *slog.Logger
	now  func() time.Time
	// Agg is the aggregation both outputs read.
	Agg  *Aggregator
	push *OTLP // nil when OTLP is off
	// spans builds request spans (nil when neither spans nor request log
	// lines are on); traces is where they go.
	spans  *Spans
	traces TraceSettings
	hist   *history
}

// Options are New's dependencies; zero values mean the real ones.
type Options struct {
	Now    func() time.Time    // clock (time.Now)
	Logger *slog.Logger        // (slog.Default())
	Getenv func(string) string // environment for the OTEL_* variables (os.Getenv)
}

// New validates cfg, resolves the OTLP settings against the environment and
// builds the sidecar (exporters connect lazily: an unreachable endpoint only
// shows up as failed exports).
func New(ctx context.Context, cfg Config, opt Options) (*Sidecar, error) {
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	if opt.Getenv == nil {
		opt.Getenv = os.Getenv
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	o, err := cfg.ResolveOTLP(opt.Getenv)
	if err != nil {
		return nil, err
	}
	s := &Sidecar{cfg: cfg, otlp: o, log: opt.Logger, now: opt.Now}
	s.Agg = NewAggregator(AggregatorOptions{Now: opt.Now, OTLP: o.Enabled, ExpireAfter: cfg.ExpireAfter,
		MaxTargets: cfg.MaxTargets, MaxDeadBoots: cfg.MaxDeadBoots, MaxBufferedBytes: int64(cfg.MaxBufferedBytes), Logger: opt.Logger})
	s.hist = newHistory(s.Agg)
	if o.Enabled {
		exp, err := NewExporter(ctx, o)
		if err != nil {
			return nil, fmt.Errorf("otlp: %w", err)
		}
		res, err := NewResource(ctx, cfg.Socket)
		if res == nil {
			return nil, fmt.Errorf("otlp resource: %w", err)
		}
		if err != nil {
			// A partial resource (e.g. a malformed OTEL_RESOURCE_ATTRIBUTES
			// entry) is still usable; say so and go on.
			s.log.Warn("OTLP resource incomplete", "err", err)
		}
		s.push = NewOTLP(exp, o, s.Agg, res)
	}
	if s.traces, err = cfg.ResolveTraces(opt.Getenv, o); err != nil {
		return nil, err
	}
	if s.traces.Enabled || cfg.Tracing.LogRequests {
		if s.spans, err = newSpans(ctx, cfg, s.traces, s.Agg, opt.Logger); err != nil {
			return nil, err
		}
		s.Agg.spans = s.spans
	}
	return s, nil
}

// newSpans builds the span exporter and builder (spans.go); with tracing
// off it only logs requests.
func newSpans(ctx context.Context, cfg Config, ts TraceSettings, a *Aggregator, log *slog.Logger) (*Spans, error) {
	if !ts.Enabled {
		return &Spans{log: log, logReq: true}, nil
	}
	exp, err := NewTraceExporter(ctx, ts)
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	res, err := NewResource(ctx, cfg.Socket)
	if res == nil {
		return nil, fmt.Errorf("otlp resource: %w", err)
	}
	return NewSpans(exp, res, a.self.spansLost, ts.Timeout, log, cfg.Tracing.LogRequests), nil
}

// FlushSpans exports every span built so far; it does nothing when spans
// are off.
func (s *Sidecar) FlushSpans(ctx context.Context) error {
	if s.spans == nil {
		return nil
	}
	return s.spans.Flush(ctx)
}

// TraceSettings returns where spans go.
func (s *Sidecar) TraceSettings() TraceSettings { return s.traces }

// OTLPSettings returns the resolved OTLP settings.
func (s *Sidecar) OTLPSettings() OTLPSettings { return s.otlp }

// FlushOTLP exports now; it does nothing when OTLP is off.
func (s *Sidecar) FlushOTLP(ctx context.Context) error {
	if s.push == nil {
		return nil
	}
	return s.push.ForceFlush(ctx)
}

// Handler serves GET /metrics (the Prometheus text exposition),
// GET /health ("ok"), the status page on / and its JSON on /api/v1/status.
func (s *Sidecar) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/", s.hist.ServePage)
	mux.HandleFunc("/api/v1/status", s.hist.ServeStatus)
	mux.Handle("/metrics", s.Agg.reg)
	mux.HandleFunc("/health", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "ok\n")
	})
	return mux
}

// WritePrometheus writes the exposition /metrics serves.
func (s *Sidecar) WritePrometheus(w io.Writer) { s.Agg.reg.WritePrometheus(w) }

// Run applies the memory limit, listens on the configured socket and
// address, and serves until ctx is done.
func (s *Sidecar) Run(ctx context.Context) error {
	if s.cfg.MemoryLimitMiB > 0 && os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(int64(s.cfg.MemoryLimitMiB) << 20)
	}
	mode, _ := s.cfg.SocketFileMode()
	if s.cfg.Socket == schema.DefaultSocketPath(os.Getenv, os.Geteuid()) {
		if err := PrepareSocketDir(filepath.Dir(s.cfg.Socket), os.Geteuid()); err != nil {
			return err
		}
	}
	sock, err := ListenSocket(s.cfg.Socket, mode)
	if err != nil {
		return err
	}
	web, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		sock.Close()
		return fmt.Errorf("listen %s: %w", s.cfg.Listen, err)
	}
	s.log.Info("picometer-sidecar listening", "socket", s.cfg.Socket, "page", "http://"+web.Addr().String()+"/", "metrics", "http://"+web.Addr().String()+"/metrics",
		"otlp", s.otlp.Enabled, "otlp_protocol", s.otlp.Protocol, "otlp_endpoint", s.otlp.Endpoint,
		"spans", s.traces.Enabled, "spans_protocol", s.traces.Protocol, "spans_endpoint", s.traces.Endpoint)
	return s.Serve(ctx, sock, web)
}

// Serve serves daemons on sock and HTTP on web until ctx is done, expiring
// disconnected daemons as it goes; then it closes both listeners and every
// connection and pushes a last OTLP export.
func (s *Sidecar) Serve(ctx context.Context, sock, web net.Listener) error {
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)}
	httpErr := make(chan error, 1)
	go func() { httpErr <- srv.Serve(web) }()
	sockDone := make(chan struct{})
	go func() {
		serveSocket(sock, s.Agg, s.cfg.MaxLineBytes, s.cfg.MaxConnections, s.cfg.peers(), s.log)
		close(sockDone)
	}()
	tick := time.NewTicker(min(max(s.cfg.ExpireAfter/4, time.Second), time.Minute))
	defer tick.Stop()
	s.hist.sample(s.now())
	histTick := time.NewTicker(HistoryStep) // the status page's rings
	defer histTick.Stop()
	var err error
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-tick.C:
			s.Agg.Expire(s.now())
		case <-histTick.C:
			s.hist.sample(s.now())
		case err = <-httpErr:
			err = fmt.Errorf("http: %w", err)
			break loop
		}
	}
	sock.Close()
	<-sockDone
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	srv.Shutdown(sctx)
	if s.push != nil {
		if perr := s.push.Shutdown(sctx); perr != nil && !errors.Is(perr, context.DeadlineExceeded) {
			s.log.Warn("last OTLP export failed", "err", perr)
		}
	}
	if s.spans != nil {
		if perr := s.spans.Shutdown(sctx); perr != nil && !errors.Is(perr, context.DeadlineExceeded) {
			s.log.Warn("last OTLP span export failed", "err", perr)
		}
	}
	return err
}
