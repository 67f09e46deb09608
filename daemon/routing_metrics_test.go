package daemon

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/picometer/picometer/schema"
)

// scrapeRouting GETs /metrics and returns each series line's value by its
// name and labels as written ("name{labels}").
func scrapeRouting(t testing.TB, url string) map[string]float64 {
	t.Helper()
	resp, err := testClient.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /metrics: %d %v: %s", resp.StatusCode, err, data)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Errorf("Content-Type %q", ct)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// KVBlocks makes the fake engine a kvReporter: each request in a slot
// holds one block of KVBlocks.
func (f *fakeEngine) KVBlocks() (used, total int) {
	r, _ := f.Load()
	return r, f.cfg.KVBlocks
}

// PrefixCache makes the fake engine a prefixReporter with fixed totals.
func (f *fakeEngine) PrefixCache() (queries, hits int64) { return 2030, 1984 }

// TestRoutingMetrics fills the one slot and two waiting places of a
// daemon and reads the routing gauges under their schema and vLLM names:
// they follow the engine at once, not at the next snapshot (the snapshot
// interval here is an hour). The real engine's gauges, read by the
// endpoint picker's own code, are checked in deploy/ (TestEndpointPicker).
func TestRoutingMetrics(t *testing.T) {
	eng := newFakeEngine(1 << 20)
	eng.gen = forever
	eng.stepDelay = 2 * time.Millisecond
	eng.cfg.BMax, eng.cfg.MaxWaiting = 1, 4
	ts := startServer(t, eng, func(c *Config) {
		c.Metrics.SnapshotInterval = time.Hour
		c.ModelName = `tiny "q"`
	})
	m := scrapeRouting(t, ts.url)
	lbl := `{gen_ai_request_model="tiny \"q\"",engine="picometer"}`
	vl := `{model_name="tiny \"q\""}`
	checkState := func(running, waiting float64) {
		t.Helper()
		for name, want := range map[string]float64{
			"picometer_engine_requests_running" + lbl: running, "vllm:num_requests_running" + vl: running,
			"picometer_engine_requests_waiting" + lbl: waiting, "vllm:num_requests_waiting" + vl: waiting,
		} {
			if got, ok := m[name]; !ok || got != want {
				t.Errorf("%s = %v (present %v), want %v", name, got, ok, want)
			}
		}
		kv := m["picometer_engine_kv_cache_usage_ratio"+lbl]
		if kv != m["vllm:kv_cache_usage_perc"+vl] || kv != m["vllm:gpu_cache_usage_perc"+vl] || kv < 0 || kv > 1 {
			t.Errorf("KV usage %v, vllm:kv_cache_usage_perc %v, vllm:gpu_cache_usage_perc %v: want one value in 0..1",
				kv, m["vllm:kv_cache_usage_perc"+vl], m["vllm:gpu_cache_usage_perc"+vl])
		}
		if want := running / float64(eng.cfg.KVBlocks); kv != want {
			t.Errorf("KV usage %v, want %v", kv, want)
		}
	}
	checkState(0, 0)
	cc := ts.d.loop.gauges.cfg
	info := `vllm:cache_config_info{block_size="` + strconv.Itoa(cc.BlockSize) + `",num_gpu_blocks="` +
		strconv.FormatInt(ts.d.loop.gauges.kvTotal.Load(), 10) + `"}`
	if m[info] != 1 {
		t.Errorf("%s missing or not 1 in %v", info, m)
	}
	for name, want := range map[string]float64{
		"picometer_engine_prefix_cache_queries_total" + lbl: 2030, "vllm:prefix_cache_queries_total" + vl: 2030,
		"picometer_engine_prefix_cache_hits_total" + lbl: 1984, "vllm:prefix_cache_hits_total" + vl: 1984,
	} {
		if got, ok := m[name]; !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", name, got, ok, want)
		}
	}
	lora := `vllm:lora_requests_info{max_lora="0",running_lora_adapters="",waiting_lora_adapters=""}`
	if m[lora] != float64(ts.d.created) {
		t.Errorf("%s = %v, want the start time %d", lora, m[lora], ts.d.created)
	}

	var bodies []io.Closer
	for i := range 3 {
		resp, err := testClient.Post(ts.url+"/v1/completions", "application/json",
			strings.NewReader(`{"prompt":"hello","max_tokens":100000,"stream":true}`))
		if err != nil {
			t.Fatal(err)
		}
		bodies = append(bodies, resp.Body)
		want := float64(i)
		waitFor(t, 10*time.Second, "the scrape to show the request "+strconv.Itoa(i), func() bool {
			m = scrapeRouting(t, ts.url)
			return m["vllm:num_requests_waiting"+vl] == want
		})
	}
	checkState(1, 2)
	for _, b := range bodies {
		b.Close()
	}
	waitFor(t, 10*time.Second, "the scrape to show an empty engine", func() bool {
		m = scrapeRouting(t, ts.url)
		return m["vllm:num_requests_running"+vl]+m["vllm:num_requests_waiting"+vl] == 0
	})
	checkState(0, 0)
}

// TestRoutingMetricsCompatOff serves only the schema names.
func TestRoutingMetricsCompatOff(t *testing.T) {
	eng := newFakeEngine(512)
	ts := startServer(t, eng, func(c *Config) { c.Compat = false })
	m := scrapeRouting(t, ts.url)
	var names []string
	for k := range m {
		names = append(names, k[:strings.IndexByte(k, '{')])
	}
	if len(names) != len(schema.RoutingProfile) {
		t.Errorf("series %v, want the %d schema names only", names, len(schema.RoutingProfile))
	}
	for _, n := range names {
		if strings.HasPrefix(n, "vllm:") {
			t.Errorf("%s served with compat off", n)
		}
	}
	if r := ts.do(http.MethodPost, "/metrics", ""); r.status != 405 {
		t.Errorf("POST /metrics: %d, want 405", r.status)
	}
}

// BenchmarkRoutingScrape measures the throughput of a daemon on the
// default model scraped 20 times a second against one not scraped, side by
// side in alternating rounds like BenchmarkEmitter, and reports the median
// of scraped/unscraped (target ≥ 0.99) and of the process CPU time per
// request, cpu_plain/scraped (the scraper and both daemons are in this
// process, so the scrapes' whole cost is in it).
func BenchmarkRoutingScrape(b *testing.B) {
	const minRound, minRounds = time.Second, 24
	for _, which := range []string{"fake", "default"} {
		b.Run("engine="+which, func(b *testing.B) {
			scraped := benchServer(b, benchEngine(b, which), false)
			plain := benchServer(b, benchEngine(b, which), false)
			stop := make(chan struct{})
			var scrapes atomic.Int64
			done := make(chan struct{})
			go func() {
				defer close(done)
				tick := time.NewTicker(50 * time.Millisecond)
				defer tick.Stop()
				for {
					select {
					case <-stop:
						return
					case <-tick.C:
						resp, err := testClient.Get(scraped.url + "/metrics")
						if err != nil {
							b.Error(err)
							return
						}
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						scrapes.Add(1)
					}
				}
			}()
			body := benchBody(false)
			load(b, scraped.url, body, false, benchClients)
			_, w := load(b, plain.url, body, false, 4*benchClients)
			round := benchClients * max(1, int(minRound/(w/4)))
			var ratios, cpuRatios []float64
			var tOn, tOff time.Duration
			var n int
			start, scrapes0 := time.Now(), scrapes.Load()
			b.ResetTimer()
			for done, r := 0, 0; done < b.N || r < minRounds; r++ {
				first, second := scraped, plain
				if r%2 == 1 {
					first, second = plain, scraped
				}
				c0 := cpuTime()
				_, w1 := load(b, first.url, body, false, round)
				c1 := cpuTime()
				_, w2 := load(b, second.url, body, false, round)
				c2 := cpuTime()
				wOn, wOff, cOn, cOff := w1, w2, c1-c0, c2-c1
				if first == plain {
					wOn, wOff, cOn, cOff = w2, w1, c2-c1, c1-c0
				}
				tOn, tOff = tOn+wOn, tOff+wOff
				ratios = append(ratios, wOff.Seconds()/wOn.Seconds())
				cpuRatios = append(cpuRatios, cOff.Seconds()/cOn.Seconds())
				n += round
				done += round
			}
			b.StopTimer()
			close(stop)
			<-done
			b.ReportMetric(float64(n)/tOn.Seconds(), "scraped_req/s")
			b.ReportMetric(float64(n)/tOff.Seconds(), "plain_req/s")
			b.ReportMetric(median(ratios), "scraped/plain")
			b.ReportMetric(median(cpuRatios), "cpu_plain/scraped")
			b.ReportMetric(float64(scrapes.Load()-scrapes0)/time.Since(start).Seconds(), "scrapes/s")
		})
	}
}

func BenchmarkAppendRoutingMetrics(b *testing.B) {
	ts := benchServer(b, benchEngine(b, "fake"), false)
	buf := make([]byte, 0, 4096)
	b.ReportAllocs()
	for b.Loop() {
		buf = ts.d.appendRoutingMetrics(buf[:0])
	}
}
