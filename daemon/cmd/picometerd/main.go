// Command picometerd serves an LLM through an OpenAI-compatible API
// (/v1/completions, /v1/chat/completions, /v1/models, /health,
// /debug/engine_metrics) and streams NDJSON metric events to the
// sidecar's unix socket. See daemon.Config for the configuration file.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"

	"github.com/picometer/picometer/daemon"
)

func main() {
	var (
		configPath = flag.String("config", "", "TOML configuration `file` (default: built-in defaults)")
		check      = flag.Bool("check-config", false, "validate the configuration (and that the model file exists), then exit")
		model      = flag.String("model", "", "GGUF model `path` (overrides model; default "+daemon.DefaultModelPath+")")
		listen     = flag.String("listen", "", "HTTP `address` (overrides listen; default 127.0.0.1:8000)")
		socket     = flag.String("metrics-socket", "", "sidecar unix socket `path` (overrides metrics.socket; \"off\" disables the emitter)")
		bMax       = flag.Int("b-max", 0, "engine slots (overrides engine.b_max)")
		specK      = flag.Int("spec-k", -1, "speculative draft length, 0 = off (overrides engine.spec_k)")
	)
	flag.Parse()
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)

	cfg := daemon.DefaultConfig()
	if *configPath != "" {
		var err error
		if cfg, err = daemon.LoadConfig(*configPath); err != nil {
			fail(err)
		}
	}
	flag.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "model":
			cfg.Model = *model
		case "listen":
			cfg.Listen = *listen
		case "metrics-socket":
			cfg.Metrics.Socket = *socket
			if *socket == "off" {
				cfg.Metrics.Socket = ""
			}
		case "b-max":
			cfg.Engine.BMax = *bMax
		case "spec-k":
			cfg.Engine.SpecK = *specK
		}
	})
	if *check {
		if err := daemon.CheckConfig(cfg); err != nil {
			fail(err)
		}
		fmt.Println("picometerd: configuration OK")
		return
	}
	if err := cfg.Validate(); err != nil {
		fail(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop() // a second signal during the graceful shutdown kills at once
	}()
	if err := daemon.Run(ctx, cfg, daemon.Deps{}); err != nil {
		log.Printf("picometerd: %v", err)
		os.Exit(1)
	}
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "picometerd: config: %v\n", err)
	os.Exit(2)
}
