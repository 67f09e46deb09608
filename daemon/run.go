package daemon

import (
	"context"
	"fmt"
	"net"
	"os"
)

// This file: e2e_binary_test.go covers it (the built binary: --check-config,
// signals, shutdown).

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
	if err := f.Close(); err != nil {
		return err
	}
	_, err = readChatTemplate(cfg.ChatTemplate)
	return err
}

// Run opens the model, serves cfg.Listen until ctx is done (SIGINT or
// SIGTERM in picometerd), then shuts down gracefully and closes the engine.
// It logs the URL it serves ("serving" url=…, useful with port 0).
func Run(ctx context.Context, cfg Config, deps Deps) error {
	deps = deps.withDefaults()
	eng, err := openEngine(cfg)
	if err != nil {
		return fmt.Errorf("open model %s: %w", cfg.Model, err)
	}
	defer eng.Close()
	tmpl, err := readChatTemplate(cfg.ChatTemplate)
	if err != nil {
		return err
	}
	if _, err := loadCodec(cfg.Model, tmpl); err != nil {
		return fmt.Errorf("open model %s: tokenizer: %w", cfg.Model, err)
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return err
	}
	d := New(cfg, eng, deps)
	info := eng.Info()
	socket := cfg.Metrics.Socket
	if socket == "" {
		socket = "off"
	}
	deps.Logger.Info("serving", "url", "http://"+ln.Addr().String(), "version", Version, "model", d.ModelName(),
		"file", cfg.Model, "context", info.ContextLength, "kernel", info.Kernel, "f16_panel_bytes", info.F16PanelBytes, "kx8_bytes", info.KX8Bytes, "q32x8_bytes", info.Q32X8Bytes, "row_copy_bytes", info.RowCopyBytes, "llc_bytes", info.LLCBytes, "step_weight_bytes", info.StepWeightBytes, "weights_beyond_llc", info.WeightsBeyondLLC(), "threads", cfg.Engine.Threads, "metrics_socket", socket)
	errc := make(chan error, 1)
	go func() { errc <- d.Serve(ln) }()
	select {
	case <-ctx.Done():
		deps.Logger.Info("shutting down", "grace", cfg.ShutdownGrace)
	case err := <-errc:
		d.Shutdown(0)
		return fmt.Errorf("serve: %w", err)
	}
	if err := d.Shutdown(cfg.ShutdownGrace); err != nil {
		deps.Logger.Warn("shutdown", "err", err)
	}
	deps.Logger.Info("stopped")
	return nil
}
