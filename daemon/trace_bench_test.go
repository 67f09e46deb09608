package daemon

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// loadTraced is load (non-streamed) with a traceparent on every request
// when traced, each with a new parent span id as a traced client sends.
func loadTraced(b *testing.B, url, body string, n int, traced bool) time.Duration {
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range benchClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				req, _ := http.NewRequest("POST", url+"/v1/completions", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				if traced {
					req.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-"+[]string{"00f067aa0ba902b7", "00f067aa0ba902b8"}[i%2]+"-01")
					req.Header.Set("tracestate", "rojo=00f067aa0ba902b7")
				}
				resp, err := testClient.Do(req)
				if err != nil {
					b.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || (traced && resp.Header.Get("traceresponse") == "") {
					b.Errorf("status %d, traceresponse %q", resp.StatusCode, resp.Header.Get("traceresponse"))
					return
				}
			}
		}()
	}
	wg.Wait()
	return time.Since(start)
}

// BenchmarkTraceparent is the daemon's throughput with a traceparent (and
// tracestate) on every request against without, on one daemon (emitter on,
// to a reader that keeps up) in alternating rounds: median over rounds of
// the traced side's throughput over the untraced side's in the same round
// (traced/plain, target ≥ 0.99), and process CPU per request of each side
// (cpu_plain/traced). Without a header the daemon still starts a root
// trace; the difference measured is parsing the caller's context.
func BenchmarkTraceparent(b *testing.B) {
	const minRound, minRounds = 20 * time.Millisecond, 16
	for _, which := range []string{"fake", "default"} {
		b.Run("engine="+which, func(b *testing.B) {
			ts := benchServer(b, benchEngine(b, which), true)
			body := benchBody(false)
			loadTraced(b, ts.url, body, benchClients, true)
			w := loadTraced(b, ts.url, body, 4*benchClients, false)
			round := benchClients * max(1, int(minRound/(w/4)))
			var tT, tP time.Duration
			var nT, nP int
			var ratios, cpuRatios []float64
			b.ResetTimer()
			for done, r := 0, 0; done < b.N || r < minRounds; r++ {
				firstTraced := r%2 == 0
				c0 := cpuTime()
				w1 := loadTraced(b, ts.url, body, round, firstTraced)
				c1 := cpuTime()
				w2 := loadTraced(b, ts.url, body, round, !firstTraced)
				c2 := cpuTime()
				wT, wP, cT, cP := w1, w2, c1-c0, c2-c1
				if !firstTraced {
					wT, wP, cT, cP = w2, w1, c2-c1, c1-c0
				}
				tT, tP = tT+wT, tP+wP
				ratios = append(ratios, wP.Seconds()/wT.Seconds())
				cpuRatios = append(cpuRatios, cP.Seconds()/cT.Seconds())
				nT, nP = nT+round, nP+round
				done += round
			}
			b.StopTimer()
			b.ReportMetric(float64(nT)/tT.Seconds(), "traced_req/s")
			b.ReportMetric(float64(nP)/tP.Seconds(), "plain_req/s")
			b.ReportMetric(median(ratios), "traced/plain")
			b.ReportMetric(median(cpuRatios), "cpu_plain/traced")
		})
	}
}
