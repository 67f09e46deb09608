package sidecar

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/picometer/picometer/schema"
)

// withSpans gives a the span builder of an in-memory exporter.
func withSpans(a *Aggregator, exp sdktrace.SpanExporter, log *slog.Logger, logRequests bool) *Spans {
	s := NewSpans(exp, resource.Empty(), a.self.spansLost, time.Second, log, logRequests)
	a.spans = s
	return s
}

func tracedRequest(id string) schema.RequestBody {
	return schema.RequestBody{ID: id, Operation: schema.OpChat, Stream: true,
		AdmittedUS: 100, FirstTokenUS: 5000, LastTokenUS: 9000, FinishUS: 9100,
		PromptTokens: 7, PrefillTokens: 7, DecodeTokens: 3, CompletionTokens: 4, DraftTokens: 4, AcceptedTokens: 2,
		FinishReason: schema.FinishStop, ITLUS: []int64{1000, 1500, 1500},
		TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", SpanID: "53995c3f42cd8ad8", ParentSpanID: "00f067aa0ba902b7",
		Sampled: true, TraceState: "rojo=1", StartUnixNano: 1795000000000000000, MaxTokens: 16, Temperature: 0.7, TopP: 0.9}
}

func attrMap(kvs []attribute.KeyValue) map[string]attribute.Value {
	m := map[string]attribute.Value{}
	for _, kv := range kvs {
		m[string(kv.Key)] = kv.Value
	}
	return m
}

// TestSpansFromEvents: a sampled request event becomes a SERVER span with
// the event's ids, parent, moments and GenAI attributes, and queue,
// prefill and decode children; an unsampled one, or one without a trace,
// none; a failed one has error.type and an error status.
func TestSpansFromEvents(t *testing.T) {
	a := newTestAggregator(false)
	exp := tracetest.NewInMemoryExporter()
	var logBuf bytes.Buffer
	sp := withSpans(a, exp, slog.New(slog.NewTextHandler(&logBuf, nil)), true)
	s := newSim(t, "b1", "m")
	unsampled := tracedRequest("chatcmpl-2")
	unsampled.Sampled = false
	untraced := tracedRequest("chatcmpl-3")
	untraced.TraceID, untraced.SpanID, untraced.ParentSpanID, untraced.Sampled, untraced.TraceState = "", "", "", false, ""
	failed := schema.RequestBody{ID: "cmpl-4", Operation: schema.OpTextCompletion, AdmittedUS: -1, FirstTokenUS: -1, LastTokenUS: -1,
		FinishUS: 40, FinishReason: schema.FinishError, ErrorType: schema.ErrInvalidRequest, ITLUS: []int64{},
		TraceID: "0af7651916cd43dd8448eb211c80319c", SpanID: "b7ad6b7169203331", Sampled: true, StartUnixNano: 1795000000000000000}
	var data []byte
	data = append(data, s.hello()...)
	for _, r := range []schema.RequestBody{tracedRequest("chatcmpl-1"), unsampled, untraced, failed} {
		data = append(data, s.request(r)...)
	}
	feed(t, a, data)
	if err := sp.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := exp.GetSpans()
	byName := map[string][]tracetest.SpanStub{}
	for _, st := range spans {
		byName[st.Name] = append(byName[st.Name], st)
	}
	if len(spans) != 6 || len(byName["chat m"]) != 1 || len(byName["text_completion m"]) != 1 || len(byName["queue"]) != 2 {
		t.Fatalf("%d spans: %v", len(spans), byName)
	}
	srv := byName["chat m"][0]
	start := time.Unix(0, 1795000000000000000)
	if srv.SpanKind != trace.SpanKindServer || srv.SpanContext.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" ||
		srv.SpanContext.SpanID().String() != "53995c3f42cd8ad8" || srv.Parent.SpanID().String() != "00f067aa0ba902b7" ||
		!srv.Parent.IsRemote() || srv.Parent.TraceState().String() != "rojo=1" ||
		!srv.StartTime.Equal(start) || srv.EndTime.Sub(srv.StartTime) != 9100*time.Microsecond || srv.Status.Code != codes.Unset {
		t.Fatalf("server span %+v", srv)
	}
	at := attrMap(srv.Attributes)
	for k, want := range map[string]string{
		"gen_ai.operation.name": "chat", "gen_ai.request.model": "m", "gen_ai.response.model": "m", "gen_ai.response.id": "chatcmpl-1",
		"gen_ai.usage.input_tokens": "7", "gen_ai.usage.output_tokens": "4", "gen_ai.request.max_tokens": "16",
		"gen_ai.request.temperature": "0.7", "gen_ai.request.top_p": "0.9", "gen_ai.response.finish_reasons": `["stop"]`,
		"gen_ai.server.time_to_first_token": "0.005", "picometer.request.stream": "true",
	} {
		if got := at[k].Emit(); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if _, ok := at["error.type"]; ok {
		t.Error("error.type on a request that succeeded")
	}
	if len(srv.Events) != 1 || srv.Events[0].Name != "gen_ai.first_token" || srv.Events[0].Time.Sub(start) != 5*time.Millisecond {
		t.Errorf("events %+v", srv.Events)
	}
	for _, c := range []struct {
		name     string
		from, to time.Duration
	}{{"queue", 0, 100 * time.Microsecond}, {"prefill", 100 * time.Microsecond, 5 * time.Millisecond}, {"decode", 5 * time.Millisecond, 9 * time.Millisecond}} {
		var ch *tracetest.SpanStub
		for i := range byName[c.name] {
			if byName[c.name][i].Parent.SpanID() == srv.SpanContext.SpanID() {
				ch = &byName[c.name][i]
			}
		}
		if ch == nil || ch.SpanKind != trace.SpanKindInternal || ch.SpanContext.TraceID() != srv.SpanContext.TraceID() ||
			ch.StartTime.Sub(start) != c.from || ch.EndTime.Sub(start) != c.to {
			t.Errorf("%s: %+v", c.name, ch)
		}
	}
	dec := attrMap(byName["decode"][0].Attributes)
	if dec["picometer.spec_decode.draft_tokens"].AsInt64() != 4 || dec["picometer.spec_decode.accepted_tokens"].AsInt64() != 2 {
		t.Errorf("decode attributes %v", byName["decode"][0].Attributes)
	}
	f := byName["text_completion m"][0]
	fa := attrMap(f.Attributes)
	if f.Status.Code != codes.Error || fa["error.type"].AsString() != "invalid_request" || f.Parent.IsValid() ||
		f.EndTime.Sub(f.StartTime) != 40*time.Microsecond {
		t.Errorf("failed span %+v", f)
	}
	if _, ok := fa["gen_ai.request.max_tokens"]; ok {
		t.Error("parameters on a request whose body was not read")
	}
	// One log line per finished request, sampled or not.
	if n := strings.Count(logBuf.String(), "msg=request "); n != 4 || !strings.Contains(logBuf.String(), "request_id=chatcmpl-1 trace_id=4bf92f3577b34da6a3ce929d0e0e4736") {
		t.Errorf("log:\n%s", logBuf.String())
	}
}

type failingExporter struct{}

func (failingExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error {
	return errors.New("refused")
}
func (failingExporter) Shutdown(context.Context) error { return nil }

// TestSpansLost: requests known only from totals, and spans whose export
// failed, are counted by reason.
func TestSpansLost(t *testing.T) {
	a := newTestAggregator(false)
	sp := withSpans(a, failingExporter{}, discardLogger(), false)
	s := newSim(t, "b1", "m")
	tot := schema.NewTotals()
	for i := range 3 { // three requests a previous sidecar received
		r := tracedRequest("chatcmpl-" + string(rune('a'+i)))
		tot.Add(&r, testBlockSize)
	}
	var data []byte
	data = append(data, s.hello()...)
	data = append(data, s.totals(tot)...)
	r := tracedRequest("chatcmpl-x")
	data = append(data, s.request(r)...)
	feed(t, a, data)
	if err := sp.Flush(context.Background()); err == nil {
		t.Fatal("flush through a failing exporter succeeded")
	}
	text := exposition(a)
	for _, want := range []string{
		`picometer_sidecar_spans_lost_total{reason="not_received"} 3`,
		`picometer_sidecar_spans_lost_total{reason="export_failed"} 1`, // one request: its server span and 3 children
		`picometer_sidecar_spans_lost_total{reason="queue_full"} 0`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("no %s in\n%s", want, text)
		}
	}
}
