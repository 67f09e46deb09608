package sidecar

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/picometer/picometer/schema"
)

// This file builds each sampled request's spans from its request event
// (issue 28) and exports them over OTLP. The daemon identified the span
// (trace id, its span id, the caller's span, the sampling decision) and
// measured its moments; the sidecar only turns the event into a SERVER span
// named "{gen_ai.operation.name} {gen_ai.request.model}" with the OTel
// GenAI attributes, three INTERNAL children (queue, prefill, decode) and a
// first-token event, as finished spans (eventspan.go) that the OTel SDK's
// OTLP trace exporter encodes and sends. The SDK's tracer is not used: the
// event fixes every field, and recording each span through it cost ~40% of
// the CPU per traced request.
//
// A span cannot be rebuilt from a totals event: totals carry counts and
// histogram buckets, not a request's ids and moments. A request the sidecar
// learns of only from totals (a sidecar restart, an event lost or dropped)
// therefore has no span; it is counted in spans_lost{reason="not_received"}
// (whether the daemon had sampled it or not: totals do not say).
// spans_test.go and the live test in e2e/ cover it.

// Names of the span attributes (OTel GenAI semantic conventions, and
// picometer's own where the conventions have none).
const (
	attrOperation     = "gen_ai.operation.name"
	attrRequestModel  = "gen_ai.request.model"
	attrResponseModel = "gen_ai.response.model"
	attrMaxTokens     = "gen_ai.request.max_tokens"
	attrTemperature   = "gen_ai.request.temperature"
	attrTopP          = "gen_ai.request.top_p"
	attrInputTokens   = "gen_ai.usage.input_tokens"
	attrOutputTokens  = "gen_ai.usage.output_tokens"
	// The prompt tokens the prefix cache served (OTel GenAI's name for
	// cache reads; set only on a request that had some).
	attrCacheRead     = "gen_ai.usage.cache_read.input_tokens"
	attrFinishReasons = "gen_ai.response.finish_reasons"
	attrResponseID    = "gen_ai.response.id"
	attrErrorType     = "error.type"
	// attrTTFT is the request's time to first token in seconds, named after
	// the gen_ai.server.time_to_first_token histogram it is observed in.
	attrTTFT          = "gen_ai.server.time_to_first_token"
	attrStream        = "picometer.request.stream"
	attrPrefillTokens = "picometer.request.prefill_tokens"
	attrDecodeTokens  = "picometer.request.decode_tokens"
	attrDraftTokens   = "picometer.spec_decode.draft_tokens"
	attrAccepted      = "picometer.spec_decode.accepted_tokens"
)

// Span batching. The SDK batch processor's defaults (OTEL_BSP_*: a queue of
// 2048 spans, batches of 512) took the sidecar's peak RSS 11 MiB up under
// TestLiveRSS's flood (8 daemons sending 40,000 requests each at once);
// its budget for spans is 4 MiB, so the queue holds 256 spans (64
// requests) and a batch 64: a flood beyond what the exporter sends loses
// spans, counted as queue_full, never memory. The delay is 1 s, not 5:
// spans arrive in the backend a second after their request.
const (
	spanQueue      = 256
	spanBatch      = 64
	spanFlushEvery = time.Second
)

// Spans builds and exports request spans. Its methods are safe for
// concurrent use.
type Spans struct {
	proc   *spanBatcher // nil: spans off (log lines only)
	res    *resource.Resource
	lost   *spanLoss
	log    *slog.Logger
	logReq bool
}

func randomSpanID() (id trace.SpanID) {
	binary.BigEndian.PutUint64(id[:], rand.Uint64()|1)
	return id
}

// NewSpans returns the span builder exporting through exp with resource
// res; lost counts spans lost by reason (schema.SpanLossReasons). With
// logRequests it also logs one line per finished request.
func NewSpans(exp sdktrace.SpanExporter, res *resource.Resource, lost *spanLoss, timeout time.Duration, log *slog.Logger, logRequests bool) *Spans {
	if res == nil {
		res = resource.Empty()
	}
	return &Spans{proc: newSpanBatcher(exp, lost, timeout, log), res: res, lost: lost, log: log, logReq: logRequests}
}

// exports reports whether s exports spans (else it only logs).
func (s *Spans) exports() bool { return s.proc != nil }

// requestSpans is one request's spans, allocated together.
type requestSpans struct {
	server, queue, prefill, decode eventSpan
	first                          [1]sdktrace.Event
}

// Request builds the spans of one finished request of a daemon serving
// model; r's strings may alias a decoder's buffer (they are copied).
// A request without a trace id (a daemon from before issue 28) or not
// sampled has none.
func (s *Spans) Request(model string, r *schema.RequestBody, ts int64) {
	if s.logReq {
		s.logRequest(model, r)
	}
	if s.proc == nil || !r.Sampled || r.TraceID == "" {
		return
	}
	var tid trace.TraceID
	var sid trace.SpanID
	if !decodeHex(tid[:], r.TraceID) || !decodeHex(sid[:], r.SpanID) {
		return // schema validated both: unreachable
	}
	var state trace.TraceState
	var parent trace.SpanContext
	if r.ParentSpanID != "" {
		var pid trace.SpanID
		decodeHex(pid[:], r.ParentSpanID)
		state, _ = trace.ParseTraceState(strings.Clone(r.TraceState)) // the daemon validated it; an error leaves it empty
		parent = trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: tid, SpanID: pid, TraceFlags: trace.FlagsSampled, TraceState: state, Remote: true})
	}
	start := time.Unix(0, r.StartUnixNano)
	if r.StartUnixNano == 0 {
		start = time.Unix(0, ts).Add(-time.Duration(r.FinishUS) * time.Microsecond)
	}
	at := func(us int64) time.Time { return start.Add(time.Duration(us) * time.Microsecond) }

	rs := &requestSpans{}
	srv := &rs.server
	srv.attrs = make([]attribute.KeyValue, 0, 20)
	srv.attrs = append(srv.attrs,
		attribute.String(attrOperation, r.Operation),
		attribute.String(attrRequestModel, model),
		attribute.String(attrResponseModel, model),
		attribute.String(attrResponseID, strings.Clone(r.ID)),
		attribute.Int(attrInputTokens, r.PromptTokens),
		attribute.Int(attrOutputTokens, r.CompletionTokens),
		attribute.StringSlice(attrFinishReasons, []string{r.FinishReason}),
		attribute.Bool(attrStream, r.Stream),
	)
	if r.CachedTokens > 0 {
		srv.attrs = append(srv.attrs, attribute.Int(attrCacheRead, r.CachedTokens))
	}
	if r.MaxTokens > 0 {
		srv.attrs = append(srv.attrs, attribute.Int(attrMaxTokens, r.MaxTokens),
			attribute.Float64(attrTemperature, r.Temperature), attribute.Float64(attrTopP, r.TopP))
	}
	if r.FirstTokenUS >= 0 {
		srv.attrs = append(srv.attrs, attribute.Float64(attrTTFT, seconds(r.FirstTokenUS)))
	}
	if et := schema.RequestErrorType(r); et != "" {
		srv.attrs = append(srv.attrs, attribute.String(attrErrorType, et))
		srv.status = sdktrace.Status{Code: codes.Error, Description: et}
	}
	srv.name, srv.kind, srv.parent, srv.res = r.Operation+" "+model, trace.SpanKindServer, parent, s.res
	srv.sc = trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, TraceState: state})
	srv.start, srv.end = start, at(r.FinishUS)

	var done []*eventSpan
	phase := func(c *eventSpan, name string, from, to int64, kv ...attribute.KeyValue) {
		if from < 0 || to < from {
			return
		}
		c.name, c.kind, c.parent, c.res, c.attrs = name, trace.SpanKindInternal, srv.sc, s.res, kv
		c.sc = trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: randomSpanID(), TraceFlags: trace.FlagsSampled, TraceState: state})
		c.start, c.end = at(from), at(to)
		srv.children++
		done = append(done, c)
	}
	queueEnd := r.AdmittedUS
	if queueEnd < 0 {
		queueEnd = r.FinishUS // never admitted: queued until it ended
	}
	phase(&rs.queue, "queue", 0, queueEnd)
	prefillEnd := r.FirstTokenUS
	if prefillEnd < 0 && r.AdmittedUS >= 0 {
		prefillEnd = r.FinishUS
	}
	phase(&rs.prefill, "prefill", r.AdmittedUS, prefillEnd, attribute.Int(attrPrefillTokens, r.PrefillTokens))
	if r.FirstTokenUS >= 0 {
		rs.first[0] = sdktrace.Event{Name: "gen_ai.first_token", Time: at(r.FirstTokenUS)}
		srv.events = rs.first[:]
		phase(&rs.decode, "decode", r.FirstTokenUS, r.LastTokenUS, attribute.Int(attrDecodeTokens, r.DecodeTokens),
			attribute.Int(attrDraftTokens, r.DraftTokens), attribute.Int(attrAccepted, r.AcceptedTokens))
	}
	// Children end first, as a tracer would end them.
	for _, c := range done {
		s.proc.OnEnd(c)
	}
	s.proc.OnEnd(srv)
}

// logRequest writes the opt-in log line of a finished request.
func (s *Spans) logRequest(model string, r *schema.RequestBody) {
	s.log.Info("request", "request_id", r.ID, "trace_id", r.TraceID, "span_id", r.SpanID, "sampled", r.Sampled,
		"operation", r.Operation, "model", model, "finish_reason", r.FinishReason, "error_type", r.ErrorType,
		"input_tokens", r.PromptTokens, "output_tokens", r.CompletionTokens,
		"ttft_s", seconds(max(r.FirstTokenUS, 0)), "e2e_s", seconds(r.FinishUS))
}

func decodeHex(dst []byte, s string) bool {
	n, err := hex.Decode(dst, []byte(s))
	return err == nil && n == len(dst)
}

// Flush exports every span built so far.
func (s *Spans) Flush(ctx context.Context) error {
	if s.proc == nil {
		return nil
	}
	return s.proc.ForceFlush(ctx)
}

// Shutdown exports what is left and stops.
func (s *Spans) Shutdown(ctx context.Context) error {
	if s.proc == nil {
		return nil
	}
	return s.proc.Shutdown(ctx)
}

// spanLoss counts spans lost by reason (schema.SpanLossReasons).
type spanLoss struct {
	byReason []*counterSeries
}

func (l *spanLoss) add(reason string, n int) {
	if l != nil && n > 0 {
		l.byReason[indexOf(schema.SpanLossReasons, reason)].c.Add(n)
	}
}

// spanBatcher is a span processor: a bounded queue exported in batches by
// one goroutine, every spanFlushEvery or at spanBatch spans. Unlike the
// SDK's batch processor it counts what it drops (queue_full) and what an
// export failed to deliver (export_failed).
type spanBatcher struct {
	exp     sdktrace.SpanExporter
	lost    *spanLoss
	timeout time.Duration
	log     *slog.Logger

	mu      sync.Mutex
	queue   []sdktrace.ReadOnlySpan
	closed  bool
	wake    chan struct{}
	flushes chan chan error
	stop    chan struct{} // closed by Shutdown
	done    chan struct{} // closed by run when it has exported the rest
	lastLog time.Time
}

func newSpanBatcher(exp sdktrace.SpanExporter, lost *spanLoss, timeout time.Duration, log *slog.Logger) *spanBatcher {
	b := &spanBatcher{exp: exp, lost: lost, timeout: timeout, log: log,
		wake: make(chan struct{}, 1), flushes: make(chan chan error), stop: make(chan struct{}), done: make(chan struct{})}
	go b.run()
	return b
}

func (b *spanBatcher) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

func (b *spanBatcher) OnEnd(s sdktrace.ReadOnlySpan) {
	b.mu.Lock()
	if b.closed || len(b.queue) >= spanQueue {
		b.mu.Unlock()
		b.lost.add(schema.SpanLossQueueFull, requests([]sdktrace.ReadOnlySpan{s}))
		return
	}
	b.queue = append(b.queue, s)
	full := len(b.queue) >= spanBatch
	b.mu.Unlock()
	if full {
		select {
		case b.wake <- struct{}{}:
		default:
		}
	}
}

func (b *spanBatcher) run() {
	defer close(b.done)
	tick := time.NewTicker(spanFlushEvery)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			b.export()
		case <-b.wake:
			b.export()
		case reply := <-b.flushes:
			reply <- b.export()
		case <-b.stop:
			b.export()
			return
		}
	}
}

// export sends everything queued, in batches of at most spanBatch.
func (b *spanBatcher) export() error {
	var firstErr error
	for {
		b.mu.Lock()
		n := min(len(b.queue), spanBatch)
		batch := make([]sdktrace.ReadOnlySpan, n)
		copy(batch, b.queue)
		b.queue = append(b.queue[:0], b.queue[n:]...)
		b.mu.Unlock()
		if n == 0 {
			return firstErr
		}
		ctx, cancel := context.WithTimeout(context.Background(), b.timeout)
		err := b.exp.ExportSpans(ctx, batch)
		cancel()
		if err != nil {
			b.lost.add(schema.SpanLossExportFailed, requests(batch))
			if now := time.Now(); now.Sub(b.lastLog) >= time.Minute {
				b.log.Warn("OTLP span export failed; its spans are lost", "err", err, "spans", n)
				b.lastLog = now
			}
			if firstErr == nil {
				firstErr = err
			}
		}
	}
}

// requests counts the requests of spans: their SERVER spans (losses are
// counted by request, one SERVER span and its children each).
func requests(spans []sdktrace.ReadOnlySpan) int {
	n := 0
	for _, s := range spans {
		if s.SpanKind() == trace.SpanKindServer {
			n++
		}
	}
	return n
}

func (b *spanBatcher) ForceFlush(ctx context.Context) error {
	reply := make(chan error, 1)
	select {
	case b.flushes <- reply:
	case <-b.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (b *spanBatcher) Shutdown(ctx context.Context) error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	b.mu.Unlock()
	close(b.stop)
	select {
	case <-b.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	return b.exp.Shutdown(ctx)
}
