// Command picometer-sidecar reads picometerd's metric events from a unix
// socket and exports them as Prometheus /metrics and, when an OTLP endpoint
// is configured (config file or the standard OTEL_* variables), over OTLP.
//
//	picometer-sidecar [--config FILE] [--check-config] [--socket PATH] [--listen ADDR]
//
// Flags override the configuration file; the defaults they show are the
// built-in ones. A configuration error exits with status 2.
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

	"github.com/picometer/picometer/internal/config"
	"github.com/picometer/picometer/sidecar"
)

func main() {
	def := sidecar.DefaultConfig()
	configPath := flag.String("config", "", "TOML configuration `file` (default: none; built-in defaults)")
	check := flag.Bool("check-config", false, "validate the configuration (file, flags, OTEL_* variables), print it (TOML) and exit")
	socket := flag.String("socket", def.Socket, "unix socket `path` daemons connect to; overrides socket")
	listen := flag.String("listen", def.Listen, "`address` of /metrics; overrides listen")
	flag.Parse()

	cfg := def
	if *configPath != "" {
		var err error
		if cfg, err = sidecar.LoadConfig(*configPath); err != nil {
			config.Exit(prog, err)
		}
	}
	// Only flags given on the command line override the file.
	config.Overrides(flag.CommandLine, map[string]func(){
		"socket": func() { cfg.Socket = *socket },
		"listen": func() { cfg.Listen = *listen },
	})
	if err := cfg.Validate(); err != nil {
		config.Exit(prog, err)
	}
	otlp, err := cfg.ResolveOTLP(os.Getenv)
	if err != nil {
		config.Exit(prog, err)
	}
	if *check {
		fmt.Print("# picometer-sidecar: configuration OK\n", sidecar.Describe(cfg, otlp))
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

const prog = "picometer-sidecar"

// fatal ends the program on a failure that is not the configuration's
// (exit 1; configuration errors exit 2 through config.Exit).
func fatal(err error) {
	fmt.Fprintln(os.Stderr, prog+":", err)
	os.Exit(1)
}
