package sidecar

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/picometer/picometer/internal/testenv"
	"github.com/picometer/picometer/schema"
)

// vsDaemons is the number of connections to each exporter in
// BenchmarkVsStatsdExporter, one model each.
const vsDaemons = 8

// vsLoad is one feed of BenchmarkVsStatsdExporter.
type vsLoad struct {
	name   string
	packed bool    // the inter-token latencies as one multi-value statsd line
	events int     // request events per connection
	rate   float64 // events per second over all connections; 0 = as fast as each exporter reads
}

// vsLoads: two floods, sized so the sidecar's side takes a few hundred
// CPU milliseconds (/proc counts 10 ms ticks) and statsd_exporter's about
// 15-20 s, and a paced feed at a rate statsd_exporter keeps up with.
var vsLoads = []vsLoad{
	{name: "lines", events: 12500},
	{name: "packed", packed: true, events: 12500},
	{name: "paced", events: 1000, rate: 2000},
}

// BenchmarkVsStatsdExporter runs the built picometer-sidecar and
// prometheus/statsd_exporter (PICOMETER_STATSD_EXPORTER_BIN, make
// bin/statsd_exporter) side by side and feeds both the same logical load:
// vsDaemons connections × vsEvents typical request events (64 output tokens),
// each connection its own model. The sidecar reads NDJSON request events on
// its unix socket; statsd_exporter reads, over TCP (nothing dropped), the
// DogStatsD lines a statsd-instrumented server would send for the same
// request: one line per histogram observation and counter increment the
// sidecar makes for it (statsdRequestLines), under a mapping config that
// gives every histogram schema's name, help and bucket bounds
// (statsdMapping). Both expositions must then agree on every series of the
// request families, so the two did equal work. Sub-benchmark "lines" floods
// both with one statsd line per observation, as most statsd clients send
// them; "packed" floods statsd with the 63 inter-token latencies as one
// DogStatsD multi-value line (name:v1:v2:…|ms, which statsd_exporter reads),
// statsd's cheapest form; "paced" sends lines at 2,000 events/s, a rate
// statsd_exporter keeps up with: under a flood its event queue (10,000
// batches) fills and its peak RSS is the queue's, so "paced" is the memory
// comparison at a steady load (its CPU figures rest on few ticks).
//
// Each iteration starts both processes afresh, feeds the sidecar and then
// statsd_exporter (one at a time, so neither competes with the other for
// the two cores), waits until each /metrics counts every request, and reads
// /proc: peak RSS (VmHWM) and CPU time (utime+stime) from just before the
// feed to the complete count, scrapes included. Reported: sidecar_MiB,
// statsd_MiB and rss_ratio (sidecar/statsd, aim ≤ 15/22); events per
// CPU-second of each and cpu_ratio (sidecar/statsd); the histogram
// observations per event each side made (read back from its /metrics) and
// the statsd lines per event.
func BenchmarkVsStatsdExporter(b *testing.B) {
	sidecarBin := sidecarBinary(b)
	statsdBin := testenv.File(b, "statsd_exporter (PICOMETER_STATSD_EXPORTER_BIN; make bin/statsd_exporter)",
		os.Getenv("PICOMETER_STATSD_EXPORTER_BIN"))
	mapping := filepath.Join(b.TempDir(), "mapping.yml")
	if err := os.WriteFile(mapping, statsdMapping(), 0o644); err != nil {
		b.Fatal(err)
	}
	for _, load := range vsLoads {
		b.Run(load.name, func(b *testing.B) { benchVsStatsd(b, sidecarBin, statsdBin, mapping, load) })
	}
}

func benchVsStatsd(b *testing.B, sidecarBin, statsdBin, mapping string, load vsLoad) {
	var sc, sd vsSide
	for range b.N {
		r1, r2 := vsRun(b, sidecarBin, statsdBin, mapping, load)
		sc.add(r1)
		sd.add(r2)
	}
	n := float64(b.N * vsDaemons * load.events)
	mib := func(kb int) float64 { return float64(kb) / 1024 }
	b.ReportMetric(mib(sc.hwm), "sidecar_MiB")
	b.ReportMetric(mib(sd.hwm), "statsd_MiB")
	b.ReportMetric(float64(sc.hwm)/float64(sd.hwm), "rss_ratio")
	b.ReportMetric(mib(sc.end), "sidecar_end_MiB")
	b.ReportMetric(mib(sd.end), "statsd_end_MiB")
	scRate, sdRate := n/sc.cpu.Seconds(), n/sd.cpu.Seconds()
	b.ReportMetric(scRate, "sidecar_events/cpu-s")
	b.ReportMetric(sdRate, "statsd_events/cpu-s")
	b.ReportMetric(scRate/sdRate, "cpu_ratio")
	b.ReportMetric(sc.obs/n, "sidecar_obs/event")
	b.ReportMetric(sd.obs/n, "statsd_obs/event")
	b.ReportMetric(float64(sd.lines)/n, "statsd_lines/event")
}

// vsResult is what one exporter did with one feed.
type vsResult struct {
	hwm, rss, anon, file int           // kB, after the feed
	cpu                  time.Duration // utime+stime over the feed
	obs                  float64       // request-family histogram observations on /metrics
	lines                int           // statsd lines sent (statsd only)
}

// vsSide accumulates one exporter's results over the iterations.
type vsSide struct {
	hwm   int // the largest VmHWM (kB)
	end   int // the largest VmRSS after a feed (kB)
	cpu   time.Duration
	obs   float64
	lines int
}

func (s *vsSide) add(r vsResult) {
	s.hwm = max(s.hwm, r.hwm)
	s.end = max(s.end, r.rss)
	s.cpu += r.cpu
	s.obs += r.obs
	s.lines += r.lines
}

// vsRun starts both exporters, feeds each in turn, checks that their request
// families agree and returns what each did.
func vsRun(b *testing.B, sidecarBin, statsdBin, mapping string, load vsLoad) (sidecar, statsd vsResult) {
	dir := b.TempDir()

	sock, scAddr := filepath.Join(dir, "s.sock"), testenv.FreeAddr(b)
	sc := vsStart(b, "sidecar", sidecarBin, "--socket", sock, "--listen", scAddr)
	defer sc.stop(b)
	sdTCP, sdAddr := testenv.FreeAddr(b), testenv.FreeAddr(b)
	sd := vsStart(b, "statsd_exporter", statsdBin,
		"--statsd.listen-tcp="+sdTCP, "--statsd.listen-udp=", "--statsd.listen-unixgram=",
		"--web.listen-address="+sdAddr, "--statsd.mapping-config="+mapping, "--log.level=warn")
	defer sd.stop(b)
	waitFor(b, func() bool { _, err := os.Stat(sock); return err == nil && vsUp(scAddr) })
	waitFor(b, func() bool { return vsUp(sdAddr) })

	const batch = 50 // events per write, on both sides
	pace := vsPacer(load.rate)
	events := load.events

	// The sidecar: a hello, then request events numbered from 2.
	hellos := make([][]byte, vsDaemons)
	prefixes, suffixes := make([][]byte, vsDaemons), make([][]byte, vsDaemons)
	for d := range vsDaemons {
		boot := fmt.Sprintf("%016x", d+1)
		hellos[d] = newSim(b, boot, vsModel(d)).hello()
		prefixes[d], suffixes[d] = seqTemplate(b, typicalRequest(boot, 7), 7)
	}
	scRes := sc.feed(b, scAddr, events, 0, "unix", sock, func(d int, w io.Writer) error {
		buf := append([]byte(nil), hellos[d]...)
		for i, start := 0, time.Now(); i < events; i += batch {
			pace(start, i)
			buf = appendRequests(buf, prefixes[d], suffixes[d], uint64(i+2), min(batch, events-i))
			if _, err := w.Write(buf); err != nil {
				return err
			}
			buf = buf[:0]
		}
		return nil
	})

	// statsd_exporter: the same requests as DogStatsD lines.
	lines := 0
	ones, blocks := make([][]byte, vsDaemons), make([][]byte, vsDaemons)
	for d := range vsDaemons {
		ones[d] = statsdRequestLines(nil, &typicalRequest("", 0).RequestBody, vsModel(d), "picometer", testBlockSize, load.packed)
		lines += bytes.Count(ones[d], []byte("\n")) * events
		blocks[d] = bytes.Repeat(ones[d], batch)
	}
	sdRes := sd.feed(b, sdAddr, events, scRes.obs, "tcp", sdTCP, func(d int, w io.Writer) error {
		for i, start := 0, time.Now(); i < events; i += batch {
			pace(start, i)
			n := min(batch, events-i)
			if _, err := w.Write(blocks[d][:n*len(ones[d])]); err != nil {
				return err
			}
		}
		return nil
	})
	sdRes.lines = lines

	// Equal work: every series of the request families is the same on both.
	if diff := vsCompare(sc.prom, sd.prom); diff != "" {
		b.Fatalf("the request families differ between the sidecar and statsd_exporter:\n%s", diff)
	}
	mib := func(kb int) float64 { return float64(kb) / 1024 }
	for _, x := range []struct {
		name string
		r    vsResult
	}{{"sidecar", scRes}, {"statsd_exporter", sdRes}} {
		b.Logf("%s: %d events in %v CPU; RSS %.1f MiB (anon %.1f, file %.1f), peak %.1f MiB",
			x.name, vsDaemons*events, x.r.cpu, mib(x.r.rss), mib(x.r.anon), mib(x.r.file), mib(x.r.hwm))
	}
	return scRes, sdRes
}

// vsPacer returns a wait before a connection's event i (written from start)
// that holds all vsDaemons connections together to rate
// events per second; with rate 0 it does not wait.
func vsPacer(rate float64) func(start time.Time, i int) {
	if rate == 0 {
		return func(time.Time, int) {}
	}
	perEvent := time.Duration(float64(time.Second) * vsDaemons / rate)
	return func(start time.Time, i int) {
		time.Sleep(time.Until(start.Add(time.Duration(i) * perEvent)))
	}
}

func vsModel(d int) string { return "vs-model-" + strconv.Itoa(d) }

// vsProc is one running exporter.
type vsProc struct {
	name string
	cmd  *exec.Cmd
	log  bytes.Buffer
	prom map[string]float64 // the last scrape
}

func vsStart(b *testing.B, name, bin string, args ...string) *vsProc {
	p := &vsProc{name: name, cmd: exec.Command(bin, args...)}
	p.cmd.Env = append(os.Environ(), "OTEL_EXPORTER_OTLP_ENDPOINT=", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=")
	p.cmd.Stdout, p.cmd.Stderr = &p.log, &p.log
	if err := p.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	return p
}

func (p *vsProc) stop(b *testing.B) {
	p.cmd.Process.Kill()
	p.cmd.Wait()
	if b.Failed() {
		b.Logf("%s log:\n%s", p.name, p.log.String())
	}
}

func vsUp(addr string) bool {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// feed writes events to vsDaemons connections at once, then scrapes addr every
// 100 ms until every request is counted and, when wantObs is not 0, the
// request histograms hold wantObs observations in all (statsd_exporter
// applies its lines from a queue, so its finished counter can be complete
// before the histogram lines written just before it are), and measures the
// process.
func (p *vsProc) feed(b *testing.B, addr string, events int, wantObs float64, network, target string, write func(d int, w io.Writer) error) vsResult {
	conns := make([]net.Conn, vsDaemons)
	for d := range conns {
		c, err := net.Dial(network, target)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		conns[d] = c
	}
	pid := p.cmd.Process.Pid
	cpu0 := vsCPU(b, pid)
	var wg sync.WaitGroup
	for d, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := write(d, c); err != nil {
				b.Error(err)
			}
		}()
	}
	wg.Wait()
	want := float64(vsDaemons * events)
	finished := schema.Lookup(schema.IDRequestsFinished).PromName()
	deadline := time.Now().Add(2 * time.Minute)
	obs := func() float64 {
		n := 0.0
		for _, f := range schema.Families {
			if f.Source == schema.SourceRequest && f.Kind == schema.KindHistogram {
				n += vsSum(p.prom, f.PromName()+"_count")
			}
		}
		return n
	}
	// Without wantObs (the sidecar's own run), the observations are taken
	// when two scrapes in a row agree: a scrape is not a snapshot, so one
	// rendered while the last events were being applied can show every
	// finished request and not yet all of their histogram observations
	// (it read 227 of 7.1 million short once, and statsd_exporter's exact
	// count was then compared against that).
	lastObs := -1.0
	for {
		p.prom = parseExposition(b, vsScrape(b, addr))
		got, gotObs := vsSum(p.prom, finished), obs()
		if got == want && (wantObs == 0 && gotObs == lastObs || wantObs != 0 && gotObs == wantObs) {
			break
		}
		lastObs = gotObs
		if time.Now().After(deadline) {
			b.Fatalf("%s counted %v of %v requests and %v of %v observations in two minutes", p.name, got, want, gotObs, wantObs)
		}
		time.Sleep(100 * time.Millisecond)
	}
	r := vsResult{cpu: vsCPU(b, pid) - cpu0, obs: obs()}
	r.rss, r.hwm, r.anon, r.file = procStatus(b, pid)
	return r
}

func vsScrape(b *testing.B, addr string) string {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		b.Fatal(err)
	}
	return string(body)
}

// vsSum adds up every series of name in a parseExposition map.
func vsSum(prom map[string]float64, name string) float64 {
	sum := 0.0
	for k, v := range prom {
		if strings.HasPrefix(k, name+"{") {
			sum += v
		}
	}
	return sum
}

// vsCompare lists the request-family series that are missing on one side
// (the sidecar's zero series aside) or differ: counts and buckets exactly, sums to a relative 1e-9 (statsd sends
// milliseconds that the exporter divides by 1000; the sidecar divides
// microseconds by 1e6).
func vsCompare(sidecar, statsd map[string]float64) string {
	var out []string
	request := func(key string) bool {
		f := schema.ByPromName(key[:strings.IndexByte(key, '{')])
		return f != nil && f.Source == schema.SourceRequest
	}
	n := 0
	for k, v := range sidecar {
		if !request(k) {
			continue
		}
		n++
		w, ok := statsd[k]
		switch {
		case !ok && v == 0: // the sidecar shows every series from the first event on
		case !ok:
			out = append(out, "statsd_exporter lacks "+k)
		case strings.Contains(k, "_sum{") && math.Abs(v-w) <= 1e-9*math.Abs(v):
		case v != w:
			out = append(out, fmt.Sprintf("%s: sidecar %v, statsd_exporter %v", k, v, w))
		}
	}
	for k := range statsd {
		if _, ok := sidecar[k]; !ok && request(k) {
			out = append(out, "the sidecar lacks "+k)
		}
	}
	if n == 0 {
		out = append(out, "no request-family series on the sidecar")
	}
	return strings.Join(out, "\n")
}

// vsCPU is the process's user+system CPU time from /proc/PID/stat.
func vsCPU(tb testing.TB, pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		tb.Fatal(err)
	}
	// Fields after "(comm) ": state is field 3, utime 14, stime 15.
	i := bytes.LastIndexByte(data, ')')
	f := strings.Fields(string(data[i+1:]))
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		tb.Fatalf("/proc/%d/stat: %q", pid, data)
	}
	const clkTck = 100 // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / clkTck
}

// statsdMapping is a statsd_exporter mapping config for the request
// families: each statsd metric named by the family's OTel name becomes the
// family's Prometheus name with its help, histograms as Prometheus
// histograms with schema's bucket bounds.
func statsdMapping() []byte {
	var b bytes.Buffer
	b.WriteString("defaults:\n  observer_type: histogram\n  match_type: glob\nmappings:\n")
	for _, f := range schema.Families {
		if f.Source != schema.SourceRequest {
			continue
		}
		fmt.Fprintf(&b, "- match: %q\n  name: %q\n  help: %q\n", f.Name, f.PromName(), f.Help)
		if f.Kind == schema.KindHistogram {
			b.WriteString("  observer_type: histogram\n  histogram_options:\n    buckets: [")
			for i, v := range f.Buckets {
				if i > 0 {
					b.WriteString(", ")
				}
				b.WriteString(strconv.FormatFloat(v, 'g', -1, 64))
			}
			b.WriteString("]\n")
		}
	}
	return b.Bytes()
}

// statsdRequestLines appends the DogStatsD lines that stand for request r
// of model on engine: one line per observation and counter increment the
// sidecar's applyRequest makes for it, under the same conditions. Durations
// are |ms timers in milliseconds (statsd_exporter divides by 1000), lengths
// |h histograms, and the tags are the sidecar's Prometheus label names, so
// both expositions have the same series. With packed, the inter-token
// latencies are one multi-value line. blockSize is the engine's KV-cache
// block size (its hello event's), which decides the time to first token's
// cache outcome label as the sidecar decides it.
func statsdRequestLines(dst []byte, r *schema.RequestBody, model, engine string, blockSize int, packed bool) []byte {
	tags := "|#" + schema.PromLabel(schema.AttrModel.Key) + ":" + model + "," +
		schema.PromLabel(schema.AttrEngine.Key) + ":" + engine + "," +
		schema.PromLabel(schema.AttrOperation.Key) + ":" + r.Operation
	line := func(id string, v float64, typ, extra string) {
		dst = append(dst, schema.Lookup(id).Name...)
		dst = append(dst, ':')
		dst = strconv.AppendFloat(dst, v, 'g', -1, 64)
		dst = append(dst, '|')
		dst = append(dst, typ...)
		dst = append(dst, tags...)
		dst = append(dst, extra...)
		dst = append(dst, '\n')
	}
	ms := func(us int64) float64 { return float64(us) / 1000 }
	if r.AdmittedUS >= 0 {
		line(schema.IDQueueDuration, ms(r.AdmittedUS), "ms", "")
	}
	if r.FirstTokenUS >= 0 {
		line(schema.IDTTFT, ms(r.FirstTokenUS), "ms", ","+schema.PromLabel(schema.AttrCache.Key)+":"+schema.CacheOutcome(r, blockSize))
		if r.AdmittedUS >= 0 {
			line(schema.IDPrefillDuration, ms(r.FirstTokenUS-r.AdmittedUS), "ms", "")
		}
		line(schema.IDDecodeDuration, ms(r.FinishUS-r.FirstTokenUS), "ms", "")
		if r.CompletionTokens >= 2 {
			line(schema.IDTimePerOutputToken, ms(r.LastTokenUS-r.FirstTokenUS)/float64(r.CompletionTokens-1), "ms", "")
		}
	}
	if packed && len(r.ITLUS) > 0 {
		dst = append(dst, schema.Lookup(schema.IDInterTokenLatency).Name...)
		for _, g := range r.ITLUS {
			dst = strconv.AppendFloat(append(dst, ':'), ms(g), 'g', -1, 64)
		}
		dst = append(append(append(dst, "|ms"...), tags...), '\n')
	} else {
		for _, g := range r.ITLUS {
			line(schema.IDInterTokenLatency, ms(g), "ms", "")
		}
	}
	if r.FinishReason == schema.FinishError || r.FinishReason == schema.FinishAbort {
		panic("BUG: statsdRequestLines: failed requests (error.type) are not translated")
	}
	line(schema.IDRequestDuration, ms(r.FinishUS), "ms", "")
	line(schema.IDPromptTokens, float64(r.PromptTokens), "c", "")
	line(schema.IDGenerationTokens, float64(r.CompletionTokens), "c", "")
	if r.AdmittedUS >= 0 {
		line(schema.IDRequestPromptLength, float64(r.PromptTokens), "h", "")
		line(schema.IDRequestGenLength, float64(r.CompletionTokens), "h", "")
	}
	line(schema.IDRequestsFinished, 1, "c", ","+schema.PromLabel(schema.AttrFinishReason.Key)+":"+r.FinishReason)
	return dst
}
