package sidecar

import (
	"bytes"
	"context"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/proto"

	"github.com/picometer/picometer/schema"
)

// marshalClient is an otlptrace.Client that encodes every export to the
// OTLP protobuf bytes and drops them: the exporter's whole CPU cost but
// the network's.
type marshalClient struct{ bytes int }

func (c *marshalClient) Start(context.Context) error { return nil }
func (c *marshalClient) Stop(context.Context) error  { return nil }
func (c *marshalClient) UploadTraces(_ context.Context, rs []*tracepb.ResourceSpans) error {
	for _, r := range rs {
		b, err := proto.Marshal(r)
		if err != nil {
			return err
		}
		c.bytes += len(b)
	}
	return nil
}

// processCPU is the CPU time of the whole process (every thread: the
// apply loop, the span exporter's goroutine, the garbage collector).
func processCPU(tb testing.TB) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkSpansCost is the sidecar's CPU per request event with spans on
// against off, side by side: two aggregators take the same traced, sampled
// request lines (64 output tokens) through the connection's decoder and
// Apply, alternating in rounds; the spans side builds each request's four
// spans and exports them through the real OTLP trace exporter (protobuf
// encoding included, the network not). Process CPU per event, medians
// over the rounds: off_ns/event, on_ns/event and on/off.
func BenchmarkSpansCost(b *testing.B) {
	const rounds, perRound = 12, 4000
	const boot = "b0000000000000001"
	r := typicalRequest(boot, 7)
	r.TraceID, r.SpanID, r.ParentSpanID, r.Sampled = "4bf92f3577b34da6a3ce929d0e0e4736", "53995c3f42cd8ad8", "00f067aa0ba902b7", true
	r.StartUnixNano, r.MaxTokens, r.Temperature, r.TopP = 1795000000000000000, 64, 0.7, 0.95
	prefix, suffix := seqTemplate(b, r, 7)
	type side struct {
		a     *Aggregator
		c     *Conn
		d     schema.Decoder
		spans *Spans
		seq   uint64
		ns    []float64
	}
	client := &marshalClient{}
	mk := func(on bool) *side {
		s := &side{a: NewAggregator(AggregatorOptions{Logger: discardLogger()}), seq: 1}
		if on {
			exp, err := otlptrace.New(context.Background(), client)
			if err != nil {
				b.Fatal(err)
			}
			s.spans = withSpans(s.a, exp, discardLogger(), false)
		}
		s.c = s.a.Connect()
		var h schema.Event
		if err := decodeLine(bytes.TrimSuffix(mustAppend(b, nil, testHello(boot, 1, "m")), []byte("\n")), &h); err != nil {
			b.Fatal(err)
		}
		if err := s.c.Apply(&h); err != nil {
			b.Fatal(err)
		}
		return s
	}
	off, on := mk(false), mk(true)
	var ev schema.Event
	run := func(s *side) {
		buf := appendRequests(nil, prefix, suffix, s.seq+1, perRound)
		s.seq += perRound
		start := processCPU(b)
		n := 0
		for line := range bytes.SplitSeq(bytes.TrimSuffix(buf, []byte("\n")), []byte("\n")) {
			if err := s.d.Decode(line, &ev); err != nil {
				b.Fatal(err)
			}
			if err := s.c.Apply(&ev); err != nil {
				b.Fatal(err)
			}
			// Export as the batcher would at a steady rate: the queue
			// (256 spans) never fills.
			if n++; s.spans != nil && n%32 == 0 {
				if err := s.spans.Flush(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
		}
		if s.spans != nil {
			if err := s.spans.Flush(context.Background()); err != nil {
				b.Fatal(err)
			}
		}
		s.ns = append(s.ns, float64(processCPU(b)-start)/perRound)
	}
	for b.Loop() {
		for i := range rounds {
			if i%2 == 0 {
				run(off)
				run(on)
			} else {
				run(on)
				run(off)
			}
		}
	}
	med := func(v []float64) float64 { v = slices.Clone(v); slices.Sort(v); return v[len(v)/2] }
	b.ReportMetric(med(off.ns), "off_ns/event")
	b.ReportMetric(med(on.ns), "on_ns/event")
	b.ReportMetric(med(on.ns)/med(off.ns), "on/off")
	if client.bytes == 0 {
		b.Fatal("no span was exported")
	}
	if lost := on.a.self.spansLost.byReason[indexOf(schema.SpanLossReasons, schema.SpanLossQueueFull)].c.Get(); lost > 0 {
		b.Fatalf("%d requests' spans were dropped from a full queue", lost)
	}
}
