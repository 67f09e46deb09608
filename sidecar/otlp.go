package sidecar

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/picometer/picometer/schema"
)

// ScopeName is the OTLP instrumentation scope of every metric.
const ScopeName = "github.com/picometer/picometer/sidecar"

// Producer returns an sdk/metric Producer that reads the aggregation itself:
// counters and gauges from the same metrics.Counter/FloatCounter/Gauge values
// /metrics writes, histograms from shadows fed by the same observations
// (AggregatorOptions.OTLP). Both outputs therefore carry the same numbers
// under the same schema names, and a target that expires disappears from both.
// Every point is cumulative; histogram bounds are the schema's.
//
// Why a Producer and not OTel instruments: recording each observation again
// through the SDK costs tens of nanoseconds (64 ITL gaps per typical request),
// and SDK instruments cannot forget the series of an expired daemon.
func (a *Aggregator) Producer() sdkmetric.Producer { return producer{a} }

type producer struct{ a *Aggregator }

// Produce returns the current values of every series.
func (p producer) Produce(context.Context) ([]metricdata.ScopeMetrics, error) {
	a := p.a
	c := &collector{now: a.now(), fams: make([]famPoints, len(a.reg.fams))}
	for _, s := range a.self.all {
		c.add(s)
	}
	a.mu.Lock()
	ts := make([]*target, 0, len(a.targets))
	for _, t := range a.targets {
		ts = append(ts, t)
	}
	a.mu.Unlock()
	slices.SortFunc(ts, func(x, y *target) int {
		return cmp.Or(cmp.Compare(x.key.model, y.key.model), cmp.Compare(x.key.engine, y.key.engine))
	})
	for _, t := range ts {
		t.mu.Lock()
		for _, s := range t.series {
			c.add(s)
		}
		t.mu.Unlock()
	}
	return []metricdata.ScopeMetrics{{Scope: instrumentation.Scope{Name: ScopeName}, Metrics: c.metrics(a.reg)}}, nil
}

type collector struct {
	now  time.Time
	fams []famPoints // by family index
}

type famPoints struct {
	hist   []metricdata.HistogramDataPoint[float64]
	ints   []metricdata.DataPoint[int64]
	floats []metricdata.DataPoint[float64]
}

func (c *collector) add(s series) {
	m := s.meta()
	fp := &c.fams[m.fam.index]
	switch s := s.(type) {
	case *histSeries:
		if sh := s.shadow; sh != nil {
			fp.hist = append(fp.hist, metricdata.HistogramDataPoint[float64]{
				Attributes: m.attrs, StartTime: m.start, Time: c.now,
				Count: sh.count, Sum: sh.sum, Bounds: m.fam.f.Buckets, BucketCounts: slices.Clone(sh.counts)})
		}
	case *cumHist:
		counts := make([]uint64, len(m.fam.f.Buckets)+1)
		copy(counts, s.h.Counts)
		fp.hist = append(fp.hist, metricdata.HistogramDataPoint[float64]{
			Attributes: m.attrs, StartTime: m.start, Time: c.now,
			Count: s.h.Count(), Sum: s.h.Sum, Bounds: m.fam.f.Buckets, BucketCounts: counts, Exemplars: s.otlpExemplars()})
	case *counterSeries:
		fp.ints = append(fp.ints, metricdata.DataPoint[int64]{Attributes: m.attrs, StartTime: m.start, Time: c.now, Value: int64(s.c.Get())})
	case *floatCounterSeries:
		fp.floats = append(fp.floats, metricdata.DataPoint[float64]{Attributes: m.attrs, StartTime: m.start, Time: c.now, Value: s.c.Get()})
	case *gaugeSeries:
		if m.fam.f.Kind == schema.KindUpDownCounter {
			fp.ints = append(fp.ints, metricdata.DataPoint[int64]{Attributes: m.attrs, StartTime: m.start, Time: c.now, Value: int64(s.g.Get())})
		} else {
			fp.floats = append(fp.floats, metricdata.DataPoint[float64]{Attributes: m.attrs, Time: c.now, Value: s.g.Get()})
		}
	}
}

func (c *collector) metrics(r *registry) []metricdata.Metrics {
	var out []metricdata.Metrics
	for i, fam := range r.fams {
		fp := &c.fams[i]
		if len(fp.hist)+len(fp.ints)+len(fp.floats) == 0 {
			continue
		}
		m := metricdata.Metrics{Name: fam.f.Name, Description: fam.f.Help, Unit: fam.f.Unit}
		switch fam.f.Kind {
		case schema.KindHistogram:
			m.Data = metricdata.Histogram[float64]{DataPoints: fp.hist, Temporality: metricdata.CumulativeTemporality}
		case schema.KindCounter, schema.KindUpDownCounter:
			mono := fam.f.Kind == schema.KindCounter
			if len(fp.floats) > 0 {
				m.Data = metricdata.Sum[float64]{DataPoints: fp.floats, Temporality: metricdata.CumulativeTemporality, IsMonotonic: mono}
			} else {
				m.Data = metricdata.Sum[int64]{DataPoints: fp.ints, Temporality: metricdata.CumulativeTemporality, IsMonotonic: mono}
			}
		default:
			m.Data = metricdata.Gauge[float64]{DataPoints: fp.floats}
		}
		out = append(out, m)
	}
	return out
}

// instanceNamespace derives service.instance.id (a v5 UUID of the host name
// and the socket path): stable across restarts of the same sidecar, distinct
// between sidecars.
var instanceNamespace = uuid.MustParse("6f0b7b3e-4c1a-5d7e-9a51-7069636f6d65")

// NewResource returns the OTLP resource: service.name "picometer-sidecar",
// service.instance.id, host.name, then OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES over them.
func NewResource(ctx context.Context, socket string) (*resource.Resource, error) {
	host, _ := os.Hostname()
	id := uuid.NewSHA1(instanceNamespace, []byte(host+"\x00"+socket))
	return resource.New(ctx,
		resource.WithSchemaURL(semconv.SchemaURL),
		resource.WithAttributes(semconv.ServiceName("picometer-sidecar"), semconv.ServiceInstanceID(id.String())),
		resource.WithHost(),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(),
	)
}

// NewExporter returns the OTLP exporter for s.Protocol. Settings left empty
// (endpoint, headers) are read by the exporter from the OTEL_EXPORTER_OTLP_*
// environment variables.
func NewExporter(ctx context.Context, s OTLPSettings) (sdkmetric.Exporter, error) {
	switch s.Protocol {
	case "grpc":
		return otlpmetricgrpc.New(ctx, exporterOptions(s, otlpmetricgrpc.WithTimeout, otlpmetricgrpc.WithEndpointURL, otlpmetricgrpc.WithHeaders)...)
	case "http/protobuf":
		return otlpmetrichttp.New(ctx, exporterOptions(s, otlpmetrichttp.WithTimeout, otlpmetrichttp.WithEndpointURL, otlpmetrichttp.WithHeaders)...)
	}
	return nil, fmt.Errorf("otlp: protocol %q is not one of http/protobuf, grpc", s.Protocol)
}

// exporterOptions are the options of either exporter (each has its own
// option type and constructors): the timeout, and the endpoint and headers
// when set.
func exporterOptions[O any](s OTLPSettings, timeout func(time.Duration) O, endpoint func(string) O, headers func(map[string]string) O) []O {
	opts := []O{timeout(s.Timeout)}
	if s.Endpoint != "" {
		opts = append(opts, endpoint(s.Endpoint))
	}
	if s.Headers != nil {
		opts = append(opts, headers(s.Headers))
	}
	return opts
}

// countingExporter counts failed exports in the self-metric and logs them,
// at most once per logEvery (with the number of failures since); a failure
// is never fatal: the next export carries the cumulative values again.
type countingExporter struct {
	sdkmetric.Exporter
	failures *counterSeries
	log      *slog.Logger
	now      func() time.Time
	logEvery time.Duration

	mu         sync.Mutex
	lastLog    time.Time
	suppressed int
}

// Export exports rm and counts a failure.
func (e *countingExporter) Export(ctx context.Context, rm *metricdata.ResourceMetrics) error {
	err := e.Exporter.Export(ctx, rm)
	if err != nil {
		e.failures.c.Inc()
		e.mu.Lock()
		now := e.now()
		if e.lastLog.IsZero() || now.Sub(e.lastLog) >= e.logEvery {
			e.log.Warn("OTLP export failed", "err", err, "failures_not_logged", e.suppressed)
			e.lastLog, e.suppressed = now, 0
		} else {
			e.suppressed++
		}
		e.mu.Unlock()
	}
	return err
}

// OTLP pushes the aggregation to an OTLP endpoint every interval.
type OTLP struct {
	provider *sdkmetric.MeterProvider
}

// NewOTLP builds the exporter, the periodic reader (fed by a.Producer()) and
// the meter provider carrying res.
func NewOTLP(exp sdkmetric.Exporter, s OTLPSettings, a *Aggregator, res *resource.Resource) *OTLP {
	ce := &countingExporter{Exporter: exp, failures: a.self.exportFailures, log: a.log, now: a.now, logEvery: time.Minute}
	reader := sdkmetric.NewPeriodicReader(ce, sdkmetric.WithInterval(s.Interval), sdkmetric.WithTimeout(s.Timeout),
		sdkmetric.WithProducer(a.Producer()))
	return &OTLP{provider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader), sdkmetric.WithResource(res))}
}

// ForceFlush exports now.
func (o *OTLP) ForceFlush(ctx context.Context) error { return o.provider.ForceFlush(ctx) }

// Shutdown exports a last time and stops.
func (o *OTLP) Shutdown(ctx context.Context) error { return o.provider.Shutdown(ctx) }
