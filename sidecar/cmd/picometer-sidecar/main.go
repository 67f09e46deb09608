// Command picometer-sidecar reads picometerd's metric events from a unix
// socket and exports them as Prometheus /metrics and, when an OTLP endpoint
// is configured (config file or the standard OTEL_* variables), over OTLP.
//
//	picometer-sidecar [--config FILE] [--check-config] [--socket PATH] [--listen ADDR]
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"go.opentelemetry.io/otel"

	"github.com/picometer/picometer/sidecar"
)

func main() {
	configPath := flag.String("config", "", "TOML configuration `file` (default: built-in defaults)")
	check := flag.Bool("check-config", false, "validate the configuration (file, flags, OTEL_* variables), print it and exit")
	socket := flag.String("socket", "", "unix socket `path` daemons connect to (overrides the config's socket)")
	listen := flag.String("listen", "", "`address` of /metrics (overrides the config's listen)")
	flag.Parse()

	cfg := sidecar.DefaultConfig()
	if *configPath != "" {
		var err error
		if cfg, err = sidecar.LoadConfig(*configPath); err != nil {
			fatal(err)
		}
	}
	if *socket != "" {
		cfg.Socket = *socket
	}
	if *listen != "" {
		cfg.Listen = *listen
	}
	if err := cfg.Validate(); err != nil {
		fatal(err)
	}
	otlp, err := cfg.ResolveOTLP(os.Getenv)
	if err != nil {
		fatal(err)
	}
	if *check {
		fmt.Print(sidecar.Describe(cfg, otlp))
		return
	}

	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: cfg.SlogLevel()}))
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Debug("otel", "err", err) }))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	s, err := sidecar.New(ctx, cfg, sidecar.Options{Logger: log})
	if err != nil {
		fatal(err)
	}
	if err := s.Run(ctx); err != nil {
		fatal(err)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "picometer-sidecar:", err)
	os.Exit(1)
}
