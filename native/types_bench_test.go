//go:build cgo

package native

// BenchmarkTypes measures decode (batch 1, 8 and 16), prefill of 256
// tokens and resident memory after loading, for each model in
// PICOMETER_BENCH_MODELS (GGUF paths, comma-separated; scripts/bench.sh
// writes the default shape, and the smollm2-135m shape when modelgen has
// it, in F16, Q8_0, Q4_0 and Q4_K_M) at each thread count in
// PICOMETER_BENCH_THREADS (default "1,2"). Decode at batch 1 also reports
// the bandwidth it uses: the matrix bytes one token reads (ModelFile.
// MatrixBytes) times tokens/s, as a fraction of this machine's measured
// limit (DESIGN.md: 19 GB/s on one thread, 32 GB/s on two).

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/picometer/picometer/internal/testenv"
)

// bandwidthLimit is the measured read bandwidth, bytes/s, by thread count.
var bandwidthLimit = map[int]float64{1: 19e9, 2: 32e9}

func benchModels(b *testing.B) []string {
	b.Helper()
	env := os.Getenv("PICOMETER_BENCH_MODELS")
	if env == "" {
		return []string{defaultModel(b)}
	}
	var paths []string
	for _, p := range strings.Split(env, ",") {
		if p = strings.TrimSpace(p); p != "" {
			paths = append(paths, testenv.File(b, "benchmark model (PICOMETER_BENCH_MODELS)", p))
		}
	}
	return paths
}

func benchThreads(b *testing.B) []int {
	b.Helper()
	env := os.Getenv("PICOMETER_BENCH_THREADS")
	if env == "" {
		env = "1,2"
	}
	var ts []int
	for _, s := range strings.Split(env, ",") {
		t, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || t < 1 || t > 64 {
			b.Fatalf("PICOMETER_BENCH_THREADS=%q: %q is not a thread count 1..64", env, s)
		}
		ts = append(ts, t)
	}
	return ts
}

func BenchmarkTypes(b *testing.B) {
	threads := benchThreads(b)
	for _, path := range benchModels(b) {
		mf, err := ReadModelFile(path)
		if err != nil {
			b.Fatal(err)
		}
		name := strings.TrimSuffix(filepath.Base(path), ".gguf")
		for _, t := range threads {
			for _, n := range []int{1, 8, 16} {
				// The engine is opened and its batch warmed up (prompts
				// prefilled, then steps until every request decodes) once,
				// and kept for every round go test runs of this
				// sub-benchmark (b.N = 1, then larger): on smollm2-135m a
				// step at batch 16 takes ~60 ms, so warming up again each
				// round would cost a good part of a 500ms round.
				var e *Engine
				var l *decodeLoad
				b.Run(fmt.Sprintf("model=%s/threads=%d/decode/batch=%d", name, t, n), func(b *testing.B) {
					if e == nil {
						e = openBenchEngine(b, path, func(c *Config) { c.BMax = n; c.Threads = t })
					}
					if l == nil {
						l = newDecodeLoad(b, e, n, bytesPrompt("Once up"), Params{MaxTokens: 1 << 20})
					}
					b.ReportAllocs()
					l.tokens = 0
					b.ResetTimer()
					start := time.Now()
					for i := 0; i < b.N; i++ {
						l.step(b)
					}
					rate := float64(l.tokens) / time.Since(start).Seconds()
					b.ReportMetric(rate, "tok/s")
					if lim, ok := bandwidthLimit[t]; ok && n == 1 {
						b.ReportMetric(rate*float64(mf.MatrixBytes)/lim, "bw_fraction")
					}
				})
				if e != nil {
					e.Close()
				}
			}
			b.Run(fmt.Sprintf("model=%s/threads=%d/prefill=256", name, t), func(b *testing.B) {
				pr := bytesPrompt(strings.Repeat("The quick brown fox jumps over the lazy dog. ", 6)[:255])
				// the same prompt every op: no prefix cache, or
				// each op after the first reuses all but its last block
				e := benchEngine(b, path, func(c *Config) { c.BMax = 1; c.PrefillChunk = 256; c.Threads = t; c.NoPrefixCache = true })
				b.ReportAllocs()
				b.ResetTimer()
				start := time.Now()
				for i := 0; i < b.N; i++ {
					if _, err := e.Submit(pr, Params{MaxTokens: 1}); err != nil {
						b.Fatal(err)
					}
					for done := false; !done; {
						outs, err := e.Step()
						if err != nil {
							b.Fatal(err)
						}
						for _, o := range outs {
							done = done || o.Finish != ""
						}
					}
				}
				b.ReportMetric(float64(len(pr)*b.N)/time.Since(start).Seconds(), "tok/s")
			})
		}
		b.Run(fmt.Sprintf("model=%s/rss", name), func(b *testing.B) {
			// In a fresh process (pmbench -mode rss): this one holds other engines.
			bin := pmbenchBinary(b)
			for i := 0; i < b.N; i++ {
				out, err := exec.Command(bin, "-model", path, "-mode", "rss").Output()
				if err != nil {
					b.Fatalf("pmbench -mode rss: %v", err)
				}
				var rss, file, kv float64
				if _, err := fmt.Sscan(string(out), &rss, &file, &kv); err != nil {
					b.Fatalf("pmbench -mode rss printed %q: %v", out, err)
				}
				b.ReportMetric(rss/(1<<20), "rss_MiB")
				b.ReportMetric((rss-file-kv)/(1<<20), "MiB_over_file+kv")
			}
		})
	}
}

var pmbench struct {
	path string
	err  error
}

// pmbenchBinary builds native/cmd/pmbench once per test binary.
func pmbenchBinary(b *testing.B) string {
	b.Helper()
	if pmbench.path == "" && pmbench.err == nil {
		dir, err := os.MkdirTemp("", "pmbench-")
		if err == nil {
			pmbench.path = filepath.Join(dir, "pmbench")
			out, berr := exec.Command("go", "build", "-o", pmbench.path, "./cmd/pmbench").CombinedOutput()
			if berr != nil {
				err = fmt.Errorf("go build ./cmd/pmbench: %v\n%s", berr, out)
			}
		}
		pmbench.err = err
	}
	if pmbench.err != nil {
		b.Fatal(pmbench.err)
	}
	return pmbench.path
}
