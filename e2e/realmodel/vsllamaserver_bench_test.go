package realmodel

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/picometer/picometer/internal/testenv"
)

// llamaServerBin is llama.cpp's llama-server as scripts/llamacpp.sh builds
// it (PICOMETER_LLAMACPP_BIN, else build/llama.cpp-bin), or "" with why not.
func llamaServerBin(tb testing.TB) (string, string) {
	dir := os.Getenv("PICOMETER_LLAMACPP_BIN")
	if dir == "" {
		dir = repoPath(tb, "build", "llama.cpp-bin")
	}
	p := filepath.Join(dir, "llama-server")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Sprintf("llama-server is not built (make llamacpp builds it into build/llama.cpp-bin): %v", err)
	}
	return p, ""
}

// serverRun is one server's measurements over the rounds of one
// concurrency.
type serverRun struct {
	ttfts, gaps []time.Duration
	tokens      int
	wall        time.Duration
}

// wave sends every prompt once through n clients and adds what it measured
// to r.
func wave(c *http.Client, addr string, prompts []prompt, maxTokens, n int, r *serverRun) error {
	var mu sync.Mutex
	var firstErr error
	next := make(chan int)
	var wg sync.WaitGroup
	t0 := time.Now()
	for w := 0; w < n; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				s, err := streamChat(c, addr, prompts[i].Messages, maxTokens)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = fmt.Errorf("%s: %v", prompts[i].Name, err)
				}
				r.ttfts = append(r.ttfts, s.ttft)
				r.gaps = append(r.gaps, s.gaps...)
				r.tokens += s.tokens
				mu.Unlock()
			}
		}()
	}
	for i := range prompts {
		next <- i
	}
	close(next)
	wg.Wait()
	r.wall += time.Since(t0)
	return firstErr
}

// BenchmarkVsLlamaServer puts picometerd beside llama.cpp's own server on
// the same trained GGUF, prompts (testdata/prompts.json, each sent as a
// streamed greedy chat of at most 64 tokens) and concurrency (1, 4, 8
// clients): both run 8 slots on every CPU; the two servers alternate wave
// by wave (PICOMETER_VS_ROUNDS waves each, default 3) so the shared
// machine's load falls on both alike. Reported per server: TTFT p50/p99 and
// ITL p50 (client side, between content chunks) in ms, and generated
// tokens/s (completion tokens over the waves' wall time); the table and
// both servers' own /metrics go to the log and build/vsllamaserver.txt.
// It skips with the reason when llama-server is not built.
func BenchmarkVsLlamaServer(b *testing.B) {
	bin, why := llamaServerBin(b)
	if bin == "" {
		b.Skip(why)
	}
	model := realModel(b)
	prompts := readPrompts(b)
	rounds := 3
	if v := os.Getenv("PICOMETER_VS_ROUNDS"); v != "" {
		rounds, _ = strconv.Atoi(v)
	}
	const maxTokens = 64
	threads := strconv.Itoa(testenvCPUs())

	pico := startDaemon(b, "--b-max", "8")
	laddr := testenv.FreeAddr(b)
	host, port, _ := strings.Cut(laddr, ":")
	llama := startServer(b, "llama-server", laddr, "/health", bin, "-m", model, "--host", host, "--port", port,
		"-np", "8", "-c", strconv.Itoa(8*1024), "-t", threads, "-tb", threads, "--metrics", "--no-webui", "-fa", "off")
	// A fresh connection per request, for both servers alike: llama-server
	// closes idle keep-alive connections, and a POST on one it has just
	// closed fails with EOF (net/http does not retry a POST).
	c := &http.Client{Timeout: 5 * time.Minute, Transport: &http.Transport{DisableKeepAlives: true}}
	servers := []struct {
		name string
		addr string
	}{{"picometerd", pico.addr}, {"llama-server", llama.addr}}
	// Warm both (page in the weights).
	for _, s := range servers {
		if _, err := streamChat(c, s.addr, prompts[0].Messages, 8); err != nil {
			b.Fatalf("%s: %v", s.name, err)
		}
	}

	var table strings.Builder
	fmt.Fprintf(&table, "%-12s %7s %10s %10s %9s %9s %7s\n", "server", "clients", "TTFT p50", "TTFT p99", "ITL p50", "tok/s", "tokens")
	for _, n := range []int{1, 4, 8} {
		b.Run(fmt.Sprintf("clients=%d", n), func(b *testing.B) {
			runs := make([]serverRun, len(servers))
			for i := 0; i < b.N; i++ {
				for r := 0; r < rounds; r++ {
					for k := range servers {
						k := (k + r) % len(servers) // alternate who goes first
						if err := wave(c, servers[k].addr, prompts, maxTokens, n, &runs[k]); err != nil {
							b.Fatalf("%s: %v", servers[k].name, err)
						}
					}
				}
			}
			for k, s := range servers {
				r := runs[k]
				tps := float64(r.tokens) / r.wall.Seconds()
				fmt.Fprintf(&table, "%-12s %7d %8.1fms %8.1fms %7.1fms %9.1f %7d\n", s.name, n,
					ms(quantile(r.ttfts, 0.5)), ms(quantile(r.ttfts, 0.99)), ms(quantile(r.gaps, 0.5)), tps, r.tokens)
				b.ReportMetric(ms(quantile(r.ttfts, 0.5)), s.name+"-ttft-p50-ms")
				b.ReportMetric(ms(quantile(r.ttfts, 0.99)), s.name+"-ttft-p99-ms")
				b.ReportMetric(ms(quantile(r.gaps, 0.5)), s.name+"-itl-p50-ms")
				b.ReportMetric(tps, s.name+"-tok/s")
			}
			b.ReportMetric(0, "ns/op")
		})
	}
	report := table.String() +
		"\npicometerd /metrics:\n" + metricLines(c, "http://"+pico.addr+"/metrics", "vllm:", "picometer") +
		"\nllama-server /metrics:\n" + metricLines(c, "http://"+llama.addr+"/metrics", "llamacpp:") + "\n"
	b.Log("\n" + report)
	if err := os.WriteFile(repoPath(b, "build", "vsllamaserver.txt"), []byte(report), 0o644); err != nil {
		b.Log(err)
	}
}
