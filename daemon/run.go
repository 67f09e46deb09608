package daemon

import (
	"context"
	"fmt"
	"net"
	"os"

	"github.com/picometer/picometer/native"
)

// CheckConfig is --check-config: cfg must be valid and its model file
// readable.
func CheckConfig(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	f, err := os.Open(cfg.Model)
	if err != nil {
		return fmt.Errorf("model: %v", err)
	}
	return f.Close()
}

// Run opens the model, serves cfg.Listen until ctx is done (SIGINT or
// SIGTERM in picometerd), then shuts down gracefully and closes the engine.
// It logs the address it listens on (useful with port 0).
func Run(ctx context.Context, cfg Config, deps Deps) error {
	deps = deps.withDefaults()
	eng, err := native.Open(cfg.Model, cfg.NativeConfig())
	if err != nil {
		return fmt.Errorf("open model %s: %w", cfg.Model, err)
	}
	defer eng.Close()
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return err
	}
	d := New(cfg, eng, deps)
	info := eng.Info()
	deps.Logf("picometerd %s: serving model %s (%s, context %d, kernel %s) on http://%s; metrics socket %q",
		Version, d.ModelName(), cfg.Model, info.ContextLength, info.Kernel, ln.Addr(), cfg.Metrics.Socket)
	errc := make(chan error, 1)
	go func() { errc <- d.Serve(ln) }()
	select {
	case <-ctx.Done():
		deps.Logf("picometerd: shutting down (grace %s)", cfg.ShutdownGrace)
	case err := <-errc:
		d.Shutdown(0)
		return fmt.Errorf("serve: %w", err)
	}
	if err := d.Shutdown(cfg.ShutdownGrace); err != nil {
		deps.Logf("picometerd: shutdown: %v", err)
	}
	deps.Logf("picometerd: stopped")
	return nil
}
