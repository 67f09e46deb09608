// Command pmbench measures the engine on one GGUF file the way llama.cpp's
// llama-bench and llama-batched-bench do, so tools/vs-llamacpp can put the
// two side by side on the same file:
//
//	pmbench -model M -threads 1 -mode tg -batch 1 -n 128   # decode tok/s, batch requests at once
//	pmbench -model M -threads 2 -mode pp -n 256            # prefill tok/s of an n-token prompt
//	pmbench -model M -mode rss                             # resident bytes after loading and a short generation, file bytes, KV bytes
//	pmbench -mode bw -threads 2                            # read bandwidth, bytes/s (a 512 MiB buffer in 2 MiB pages, best of 5 passes; -pages 4k: in 4 KiB pages)
//	pmbench -model M -mode tg -kernel avx2 -bw 21.3e9      # ... and on stderr: the kernel path, weights read per token, share of 21.3 GB/s
//
// -kernel picks the kernel path (auto, avx512vnni, avxvnni, avx2, neon,
// portable: native.Kernels; one the CPU cannot run is refused by name).
// It prints one number (tokens/s, or bytes for rss and bw) on stdout.
// With -v or -bw, tg and pp also print on stderr the kernel path in use
// and (tg) the bytes of weights one decode step reads (every layer matrix
// and the output: native.ModelFile.MatrixBytes), the rate that makes at
// the measured speed, and its share of -bw (a figure of -mode bw). tg keeps
// batch requests decoding (a finished one is replaced at once) and times n
// steps after every request has its first token, so n tokens per request
// at contexts growing from the prompt; pp submits one n-token prompt as a
// single prefill chunk and times it to its first token, after one untimed
// prefill of the same length (llama-bench's warm-up).
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/picometer/picometer/native"
)

func main() {
	model := flag.String("model", "", "GGUF model file (required)")
	threads := flag.Int("threads", 1, "compute threads")
	mode := flag.String("mode", "tg", "tg (decode), pp (prefill) or rss")
	batch := flag.Int("batch", 1, "tg: requests decoding at once")
	n := flag.Int("n", 128, "tg: decode steps timed; pp: prompt tokens")
	kernel := flag.String("kernel", "auto", "kernel path: auto, avx512vnni, avxvnni, avx2, neon or portable")
	pages := flag.String("pages", "2m", "bw: the probe buffer's pages, 2m (as the engine maps its repacked weights) or 4k (as a file mapping)")
	bw := flag.Float64("bw", 0, "tg: the measured read bandwidth (bytes/s, from -mode bw) to report each decode step's share of on stderr")
	verbose := flag.Bool("v", false, "print the kernel path and (tg) the weights read per token on stderr")
	flag.Parse()
	if *mode == "bw" {
		if *pages != "2m" && *pages != "4k" {
			fmt.Fprintf(os.Stderr, "pmbench: -pages %q: want 2m or 4k\n", *pages)
			os.Exit(2)
		}
		b, err := bandwidth(*threads, 5, *pages == "2m")
		if err != nil {
			fmt.Fprintln(os.Stderr, "pmbench:", err)
			os.Exit(1)
		}
		fmt.Printf("%.0f\n", b)
		return
	}
	var info io.Writer
	if *verbose || *bw > 0 {
		info = os.Stderr
	}
	v, err := run(*model, *mode, *threads, *batch, *n, *kernel, *bw, info)
	if err != nil {
		fmt.Fprintln(os.Stderr, "pmbench:", err)
		os.Exit(1)
	}
	fmt.Println(v)
}

func run(model, mode string, threads, batch, n int, kernel string, bw float64, info io.Writer) (string, error) {
	if model == "" {
		return "", fmt.Errorf("-model FILE is required")
	}
	cfg := native.DefaultConfig()
	cfg.Threads, cfg.SpecK, cfg.Kernel = threads, 0, kernel
	switch mode {
	case "tg":
		cfg.BMax = batch
	case "pp":
		cfg.BMax, cfg.PrefillChunk = 1, n
	case "rss":
		cfg.BMax = 1
	default:
		return "", fmt.Errorf("-mode %q: want tg, pp, rss or bw", mode)
	}
	e, err := native.Open(model, cfg)
	if err != nil {
		return "", err
	}
	defer e.Close()
	if info != nil {
		fmt.Fprintf(info, "pmbench: kernel %s (this CPU runs %v)\n", e.Info().Kernel, native.CPUKernels())
	}
	vocab := int32(min(e.Info().Vocab, 256)) // byte tokens
	switch mode {
	case "rss":
		// Touch every weight (a prefill and a few decode steps), then read
		// VmRSS: the mapped file counts once it is read.
		if _, err := e.Submit([]int32{1, 2, 3, 4, 5, 6, 7, 8}, native.Params{MaxTokens: 4}); err != nil {
			return "", err
		}
		for i := 0; i < 8; i++ {
			if _, err := e.Step(); err != nil {
				return "", err
			}
		}
		rss, err := residentBytes()
		if err != nil {
			return "", err
		}
		st, err := os.Stat(model)
		if err != nil {
			return "", err
		}
		in := e.Info()
		headDim := in.Dim / in.Heads
		kv := int64(2) * int64(in.Layers) * int64(in.ContextLength) * int64(in.KVHeads*headDim) * 4
		return fmt.Sprintf("%d %d %d", rss, st.Size(), kv), nil
	case "pp":
		if n >= e.Info().ContextLength {
			return "", fmt.Errorf("-n %d: the context is %d tokens", n, e.Info().ContextLength)
		}
		// One untimed prefill first, as llama-bench warms up before its
		// timed repetitions: the timed one then measures the compute, not
		// the first touch of the mapped weights and of the KV cache.
		// The warm-up prompt starts differently, though nothing here
		// reuses a prefix.
		prefill := func(first int) (time.Duration, error) {
			pr := make([]int32, n)
			for i := range pr {
				pr[i] = int32(first+i*31+7) % vocab
			}
			start := time.Now()
			if _, err := e.Submit(pr, native.Params{MaxTokens: 1}); err != nil {
				return 0, err
			}
			for done := false; !done; {
				outs, err := e.Step()
				if err != nil {
					return 0, err
				}
				for _, o := range outs {
					done = done || o.Finish != ""
				}
			}
			return time.Since(start), nil
		}
		if _, err := prefill(1); err != nil {
			return "", err
		}
		d, err := prefill(0)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("%.2f", float64(n)/d.Seconds()), nil
	}
	// tg
	pr := []int32{1 % vocab, 2 % vocab, 3 % vocab, 4 % vocab}
	p := native.Params{MaxTokens: 1 << 20}
	for i := 0; i < batch; i++ {
		if _, err := e.Submit(pr, p); err != nil {
			return "", err
		}
	}
	started := map[native.ID]bool{}
	tokens := 0
	step := func() error {
		outs, err := e.Step()
		if err != nil {
			return err
		}
		for _, o := range outs {
			tokens += len(o.Tokens)
			started[o.ID] = true
			if o.Finish != "" {
				if _, err := e.Submit(pr, p); err != nil {
					return err
				}
			}
		}
		return nil
	}
	for len(started) < batch {
		if err := step(); err != nil {
			return "", err
		}
	}
	tokens = 0
	start := time.Now()
	for i := 0; i < n; i++ {
		if err := step(); err != nil {
			return "", err
		}
	}
	rate := float64(tokens) / time.Since(start).Seconds()
	if info != nil {
		if err := weightShare(info, model, rate/float64(batch), bw); err != nil {
			return "", err
		}
	}
	return fmt.Sprintf("%.2f", rate), nil
}

// weightShare prints the bytes of weights one decode step reads, the rate
// steps/s of them makes, and its share of bw (when bw > 0).
func weightShare(w io.Writer, model string, steps, bw float64) error {
	f, err := native.ReadModelFile(model)
	if err != nil {
		return err
	}
	rate := steps * float64(f.MatrixBytes)
	fmt.Fprintf(w, "pmbench: %d bytes of weights read per step; %.2f steps/s read %.2f GB/s", f.MatrixBytes, steps, rate/1e9)
	if bw > 0 {
		fmt.Fprintf(w, ", %.0f%% of %.2f GB/s", 100*rate/bw, bw/1e9)
	}
	fmt.Fprintln(w)
	return nil
}

// residentBytes reads VmRSS from /proc/self/status.
func residentBytes() (int64, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/self/status")
}
