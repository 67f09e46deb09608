// Command picometerd serves an LLM through an OpenAI-compatible API
// (/v1/completions, /v1/chat/completions, /v1/models, /health,
// /debug/engine_metrics) and streams NDJSON metric events to the
// sidecar's unix socket. See daemon.Config for the configuration file.
//
//	picometerd [--config FILE] [--check-config] [--model FILE] [--model-name NAME] [--listen ADDR]
//	           [--metrics-socket PATH] [--b-max N] [--spec-k N] [--spec-ngram-min N] [--context N]
//	           [--backend native|iree]
//	           [--threads N]
//
// Flags override the configuration file; the defaults they show are the
// built-in ones.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/picometer/picometer/daemon"
	"github.com/picometer/picometer/internal/config"
)

func main() {
	os.Exit(run(os.Args[1:], os.DirFS("/"), os.Stdout, os.Stderr))
}

// run is picometerd with its arguments, the file system its defaults are
// read from (the cgroup CPU quota; "/" in main) and its output; it returns
// the exit status.
func run(args []string, root fs.FS, stdout, stderr io.Writer) int {
	def := daemon.DefaultConfigOn(root)
	fl := flag.NewFlagSet("picometerd", flag.ContinueOnError)
	fl.SetOutput(stderr)
	var (
		configPath = fl.String("config", "", "TOML configuration `file` (default: none; built-in defaults)")
		check      = fl.Bool("check-config", false, "validate the configuration and that the model file is readable, print it (TOML) and exit")
		model      = fl.String("model", def.Model, "GGUF model `file`; overrides model")
		modelName  = fl.String("model-name", def.ModelName, "the `name` the model is served under (vLLM's --served-model-name, llama-server's --alias); default: the model file's name without .gguf; overrides model_name")
		listen     = fl.String("listen", def.Listen, "HTTP `address`; overrides listen")
		socket     = fl.String("metrics-socket", def.Metrics.Socket, "the sidecar's unix socket `path`, or \"off\"; overrides metrics.socket")
		bMax       = fl.Int("b-max", def.Engine.BMax, "`n` engine slots: the most requests decoded together; overrides engine.b_max")
		specK      = fl.Int("spec-k", def.Engine.SpecK, "speculative draft length `k`, 0 for none; overrides engine.spec_k")
		specNgram  = fl.Int("spec-ngram-min", def.Engine.SpecNgramMin, "shortest n-gram match `n` (1..8) that proposes a speculative draft; overrides engine.spec_ngram_min")
		chatTmpl   = fl.String("chat-template", def.ChatTemplate, "Jinja chat template `file` replacing the model file's tokenizer.chat_template; overrides chat_template")
		backend    = fl.String("backend", def.Engine.Backend, "engine `name`: native (the C engine) or iree (only in a binary built with -tags iree; docs/IREE.md); overrides engine.backend")
		kernel     = fl.String("kernel", def.Engine.Kernel, "kernel `path`: auto, avx512vnni, avxvnni, avx2, neon or portable (one the CPU runs); overrides engine.kernel")
		ctxLen     = fl.Int("context", def.Engine.Context, "`tokens` a request may hold (prompt and output), sizing the KV cache; 0 for the model's context_length, at most 4096; overrides engine.context")
		// Its default is not shown: it depends on the machine (--check-config prints it).
		threads = fl.Int("threads", 0, "`n` compute threads (default: the CPUs this process may use, or its cgroup CPU quota when lower, at most 64; --check-config shows it); overrides engine.threads")
	)
	fl.Usage = func() {
		fmt.Fprintf(fl.Output(), "Usage: picometerd [flags]\n\n"+
			"Serves the model through an OpenAI-compatible API and streams metric events to the sidecar.\n"+
			"Flags override the configuration file; the defaults shown are the built-in ones.\n\n")
		fl.PrintDefaults()
	}
	if err := fl.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return config.ExitCode
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "picometerd: config: %v\n", err)
		return config.ExitCode
	}

	cfg := def
	if *configPath != "" {
		if err := config.Load(*configPath, &cfg); err != nil {
			return fail(err)
		}
	}
	// Only flags given on the command line override the file.
	config.Overrides(fl, map[string]func(){
		"model":      func() { cfg.Model = *model },
		"model-name": func() { cfg.ModelName = *modelName },
		"listen":     func() { cfg.Listen = *listen },
		"metrics-socket": func() {
			cfg.Metrics.Socket = *socket
			if *socket == "off" {
				cfg.Metrics.Socket = ""
			}
		},
		"b-max":          func() { cfg.Engine.BMax = *bMax },
		"spec-k":         func() { cfg.Engine.SpecK = *specK },
		"spec-ngram-min": func() { cfg.Engine.SpecNgramMin = *specNgram },
		"context":        func() { cfg.Engine.Context = *ctxLen },
		"chat-template":  func() { cfg.ChatTemplate = *chatTmpl },
		"backend":        func() { cfg.Engine.Backend = *backend },
		"threads":        func() { cfg.Engine.Threads = *threads },
		"kernel":         func() { cfg.Engine.Kernel = *kernel },
	})
	if err := cfg.ApplyEnv(os.Getenv); err != nil {
		fail(err)
	}
	if *check {
		if err := daemon.CheckConfig(cfg); err != nil {
			return fail(err)
		}
		fmt.Fprint(stdout, "# picometerd: configuration OK\n", daemon.Describe(cfg))
		return 0
	}
	if err := cfg.Validate(); err != nil {
		return fail(err)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: cfg.SlogLevel()}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop() // a second signal during the graceful shutdown kills at once
	}()
	if err := daemon.Run(ctx, cfg, daemon.Deps{Logger: log}); err != nil {
		log.Error("picometerd failed", "err", err)
		return 1
	}
	return 0
}
