// Command picometerd serves an LLM through an OpenAI-compatible API
// (/v1/completions, /v1/chat/completions, /v1/models, /health,
// /debug/engine_metrics) and streams NDJSON metric events to the
// sidecar's unix socket. See daemon.Config for the configuration file.
//
//	picometerd [--config FILE] [--check-config] [--model FILE] [--listen ADDR]
//	           [--metrics-socket PATH] [--b-max N] [--spec-k N] [--context N]
//
// Flags override the configuration file; the defaults they show are the
// built-in ones.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/picometer/picometer/daemon"
	"github.com/picometer/picometer/internal/config"
)

func main() {
	def := daemon.DefaultConfig()
	var (
		configPath = flag.String("config", "", "TOML configuration `file` (default: none; built-in defaults)")
		check      = flag.Bool("check-config", false, "validate the configuration and that the model file is readable, print it (TOML) and exit")
		model      = flag.String("model", def.Model, "GGUF model `file`; overrides model")
		listen     = flag.String("listen", def.Listen, "HTTP `address`; overrides listen")
		socket     = flag.String("metrics-socket", def.Metrics.Socket, "the sidecar's unix socket `path`, or \"off\"; overrides metrics.socket")
		bMax       = flag.Int("b-max", def.Engine.BMax, "`n` engine slots: the most requests decoded together; overrides engine.b_max")
		specK      = flag.Int("spec-k", def.Engine.SpecK, "speculative draft length `k`, 0 for none; overrides engine.spec_k")
		ctxLen     = flag.Int("context", def.Engine.Context, "`tokens` a request may hold (prompt and output), sizing the KV cache; 0 for the model's context_length, at most 4096; overrides engine.context")
	)
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "Usage: picometerd [flags]\n\n"+
			"Serves the model through an OpenAI-compatible API and streams metric events to the sidecar.\n"+
			"Flags override the configuration file; the defaults shown are the built-in ones.\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()

	cfg := def
	if *configPath != "" {
		var err error
		if cfg, err = daemon.LoadConfig(*configPath); err != nil {
			fail(err)
		}
	}
	// Only flags given on the command line override the file.
	config.Overrides(flag.CommandLine, map[string]func(){
		"model":  func() { cfg.Model = *model },
		"listen": func() { cfg.Listen = *listen },
		"metrics-socket": func() {
			cfg.Metrics.Socket = *socket
			if *socket == "off" {
				cfg.Metrics.Socket = ""
			}
		},
		"b-max":   func() { cfg.Engine.BMax = *bMax },
		"spec-k":  func() { cfg.Engine.SpecK = *specK },
		"context": func() { cfg.Engine.Context = *ctxLen },
	})
	if err := cfg.ApplyEnv(os.Getenv); err != nil {
		fail(err)
	}
	if *check {
		if err := daemon.CheckConfig(cfg); err != nil {
			fail(err)
		}
		fmt.Print("# picometerd: configuration OK\n", daemon.Describe(cfg))
		return
	}
	if err := cfg.Validate(); err != nil {
		fail(err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: cfg.SlogLevel()}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop() // a second signal during the graceful shutdown kills at once
	}()
	if err := daemon.Run(ctx, cfg, daemon.Deps{Logger: log}); err != nil {
		log.Error("picometerd failed", "err", err)
		os.Exit(1)
	}
}

func fail(err error) { config.Exit("picometerd", err) }
