package sidecar

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/picometer/picometer/schema"
)

// testNow is the fixed clock of golden tests.
var testNow = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

// fakeClock is a settable clock for tests.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time           { return c.t }
func (c *fakeClock) advance(d time.Duration)  { c.t = c.t.Add(d) }
func newFakeClock(t time.Time) *fakeClock     { return &fakeClock{t: t} }
func discardLogger() *slog.Logger             { return slog.New(slog.DiscardHandler) }
func newTestAggregator(otlp bool) *Aggregator { return newClockAggregator(otlp, newFakeClock(testNow)) }
func newClockAggregator(otlp bool, c *fakeClock) *Aggregator {
	return NewAggregator(AggregatorOptions{Now: c.now, OTLP: otlp, ExpireAfter: 5 * time.Minute, Logger: discardLogger()})
}

// feed serves data on one connection (a net.Pipe) until it ends.
func feed(t testing.TB, a *Aggregator, data []byte) ConnStats {
	t.Helper()
	server, client := net.Pipe()
	go func() {
		client.Write(data)
		client.Close()
	}()
	st := ServeConn(server, a, 1<<20, discardLogger())
	server.Close()
	return st
}

// openConn is a connection kept open (a real unix socket would do the same).
type openConn struct {
	client net.Conn
	done   chan ConnStats
}

func open(a *Aggregator) *openConn {
	server, client := net.Pipe()
	oc := &openConn{client: client, done: make(chan ConnStats, 1)}
	go func() {
		oc.done <- ServeConn(server, a, 1<<20, discardLogger())
		server.Close()
	}()
	return oc
}

func (oc *openConn) send(t testing.TB, data []byte) {
	t.Helper()
	if _, err := oc.client.Write(data); err != nil {
		t.Fatal(err)
	}
}

func (oc *openConn) close() ConnStats {
	oc.client.Close()
	return <-oc.done
}

// exposition renders the aggregator's /metrics text.
func exposition(a *Aggregator) string {
	var b bytes.Buffer
	a.reg.WritePrometheus(&b)
	return b.String()
}

// parseExposition parses Prometheus text into canonical series → value,
// failing on anything it does not understand.
func parseExposition(t testing.TB, text string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for i, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		if sp < 0 {
			t.Fatalf("line %d: no value: %q", i+1, line)
		}
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if err != nil {
			t.Fatalf("line %d: value: %v", i+1, err)
		}
		name, labels, err := parseSeries(line[:sp])
		if err != nil {
			t.Fatalf("line %d: %v: %q", i+1, err, line)
		}
		key := seriesKey(name, labels)
		if _, dup := out[key]; dup {
			t.Fatalf("line %d: duplicate series %s", i+1, key)
		}
		out[key] = v
	}
	return out
}

// parseSeries splits name{k="v",…} and unescapes the values.
func parseSeries(s string) (string, map[string]string, error) {
	i := strings.IndexByte(s, '{')
	if i < 0 {
		return s, nil, nil
	}
	name, rest := s[:i], s[i+1:]
	if !strings.HasSuffix(rest, "}") {
		return "", nil, fmt.Errorf("no closing brace")
	}
	rest = rest[:len(rest)-1]
	labels := map[string]string{}
	for rest != "" {
		eq := strings.IndexByte(rest, '=')
		if eq < 0 || len(rest) < eq+2 || rest[eq+1] != '"' {
			return "", nil, fmt.Errorf("bad label at %q", rest)
		}
		k := rest[:eq]
		rest = rest[eq+2:]
		var v strings.Builder
		j := 0
		for ; j < len(rest) && rest[j] != '"'; j++ {
			if rest[j] == '\\' && j+1 < len(rest) {
				j++
				switch rest[j] {
				case 'n':
					v.WriteByte('\n')
				default:
					v.WriteByte(rest[j])
				}
				continue
			}
			v.WriteByte(rest[j])
		}
		if j == len(rest) {
			return "", nil, fmt.Errorf("unterminated value of %s", k)
		}
		labels[k] = v.String()
		rest = strings.TrimPrefix(rest[j+1:], ",")
	}
	return name, labels, nil
}

// seriesKey is a canonical series identity: labels sorted, le normalised.
func seriesKey(name string, labels map[string]string) string {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(name)
	b.WriteByte('{')
	for i, k := range keys {
		v := labels[k]
		if k == "le" && v != "+Inf" {
			f, _ := strconv.ParseFloat(v, 64)
			v = strconv.FormatFloat(f, 'g', -1, 64)
		}
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%q", k, v)
	}
	b.WriteByte('}')
	return b.String()
}

// otelSeries translates collected OTel metrics into the series Prometheus
// would show (schema names; cumulative le buckets), keyed like
// parseExposition. Every metric must be a schema family under its OTel name.
func otelSeries(t testing.TB, rm *metricdata.ResourceMetrics) map[string]float64 {
	t.Helper()
	byName := map[string]*schema.Family{}
	for _, f := range schema.Families {
		byName[f.Name] = f
	}
	out := map[string]float64{}
	put := func(name string, labels map[string]string, v float64) {
		key := seriesKey(name, labels)
		if _, dup := out[key]; dup {
			t.Fatalf("duplicate OTel point %s", key)
		}
		out[key] = v
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			f := byName[m.Name]
			if f == nil {
				t.Fatalf("OTel metric %q is not a schema family", m.Name)
			}
			if m.Unit != f.Unit || m.Description != f.Help {
				t.Fatalf("%s: unit %q description %q, schema says %q %q", m.Name, m.Unit, m.Description, f.Unit, f.Help)
			}
			name := f.PromName()
			switch d := m.Data.(type) {
			case metricdata.Histogram[float64]:
				if d.Temporality != metricdata.CumulativeTemporality {
					t.Fatalf("%s: temporality %v", m.Name, d.Temporality)
				}
				for _, p := range d.DataPoints {
					labels := attrLabels(p.Attributes.ToSlice())
					if fmt.Sprint(p.Bounds) != fmt.Sprint(f.Buckets) {
						t.Fatalf("%s: bounds %v, schema %v", m.Name, p.Bounds, f.Buckets)
					}
					cum := uint64(0)
					for i, b := range p.Bounds {
						cum += p.BucketCounts[i]
						put(name+"_bucket", with(labels, "le", strconv.FormatFloat(b, 'g', -1, 64)), float64(cum))
					}
					cum += p.BucketCounts[len(p.Bounds)]
					if cum != p.Count {
						t.Fatalf("%s: buckets add up to %d, count %d", m.Name, cum, p.Count)
					}
					put(name+"_bucket", with(labels, "le", "+Inf"), float64(p.Count))
					put(name+"_sum", labels, p.Sum)
					put(name+"_count", labels, float64(p.Count))
				}
			case metricdata.Sum[int64]:
				checkSum(t, m.Name, f, d.Temporality, d.IsMonotonic)
				for _, p := range d.DataPoints {
					put(name, attrLabels(p.Attributes.ToSlice()), float64(p.Value))
				}
			case metricdata.Sum[float64]:
				checkSum(t, m.Name, f, d.Temporality, d.IsMonotonic)
				for _, p := range d.DataPoints {
					put(name, attrLabels(p.Attributes.ToSlice()), p.Value)
				}
			case metricdata.Gauge[float64]:
				if f.Kind != schema.KindGauge && f.Kind != schema.KindInfo {
					t.Fatalf("%s: gauge for a %v", m.Name, f.Kind)
				}
				for _, p := range d.DataPoints {
					put(name, attrLabels(p.Attributes.ToSlice()), p.Value)
				}
			default:
				t.Fatalf("%s: unexpected data %T", m.Name, m.Data)
			}
		}
	}
	return out
}

func checkSum(t testing.TB, name string, f *schema.Family, temp metricdata.Temporality, mono bool) {
	t.Helper()
	if temp != metricdata.CumulativeTemporality || mono != (f.Kind == schema.KindCounter) {
		t.Fatalf("%s: temporality %v monotonic %v for a %v", name, temp, mono, f.Kind)
	}
}

func attrLabels(kvs []attribute.KeyValue) map[string]string {
	out := map[string]string{}
	for _, kv := range kvs {
		out[schema.PromLabel(string(kv.Key))] = kv.Value.AsString()
	}
	return out
}

func with(labels map[string]string, k, v string) map[string]string {
	out := make(map[string]string, len(labels)+1)
	for a, b := range labels {
		out[a] = b
	}
	out[k] = v
	return out
}

// collect reads the aggregator through a ManualReader, as an exporter would.
func collect(t testing.TB, a *Aggregator) *metricdata.ResourceMetrics {
	t.Helper()
	r := sdkmetric.NewManualReader(sdkmetric.WithProducer(a.Producer()))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
	defer mp.Shutdown(context.Background())
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	return &rm
}

// diffSeries reports the differences between two series maps.
func diffSeries(got, want map[string]float64) string {
	var out []string
	for k, v := range want {
		g, ok := got[k]
		switch {
		case !ok:
			out = append(out, "missing "+k)
		case g != v && !(g != g && v != v):
			out = append(out, fmt.Sprintf("%s = %v, want %v", k, g, v))
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			out = append(out, "extra "+k)
		}
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

// sim is a daemon that writes events: it numbers them and keeps its boot.
type sim struct {
	t     testing.TB
	boot  string
	model string
	seq   uint64
}

func newSim(t testing.TB, boot, model string) *sim { return &sim{t: t, boot: boot, model: model} }

func (s *sim) hdr(kind string) schema.Header {
	s.seq++
	return schema.Header{V: schema.Version, Kind: kind, Boot: s.boot, Seq: s.seq, TimeUnixNano: testNow.UnixNano()}
}

func (s *sim) hello() []byte {
	h := testHello(s.boot, 0, s.model)
	h.Header = s.hdr(schema.KindHello)
	return mustAppend(s.t, nil, h)
}

func (s *sim) request(r schema.RequestBody) []byte {
	return mustAppend(s.t, nil, &schema.Request{Header: s.hdr(schema.KindRequest), RequestBody: r})
}

func (s *sim) engine(e schema.EngineBody) []byte {
	return mustAppend(s.t, nil, &schema.Engine{Header: s.hdr(schema.KindEngine), EngineBody: e})
}

// skip loses n events on the way (the daemon numbered them, nobody got them).
func (s *sim) skip(n uint64) { s.seq += n }

// decodeLine decodes one line with a fresh schema.Decoder, as a new
// connection does.
func decodeLine(line []byte, ev *schema.Event) error {
	var d schema.Decoder
	return d.Decode(line, ev)
}
