package daemon

import (
	"bytes"
	"strings"
	"testing"

	"github.com/picometer/picometer/native"
	"github.com/picometer/picometer/schema"
)

// The engine's own names and limits are the wire's: native/ may not import
// schema/, so this test keeps the two in step.
func TestNativeMatchesWire(t *testing.T) {
	if native.MaxBatch != schema.MaxBatch || native.MaxSpecK != schema.MaxSpecK {
		t.Errorf("limits: native %d/%d, schema %d/%d", native.MaxBatch, native.MaxSpecK, schema.MaxBatch, schema.MaxSpecK)
	}
	for _, f := range []string{native.FinishStop, native.FinishLength, native.FinishAbort} {
		if !schema.AttrFinishReason.Allows(f) {
			t.Errorf("native finish reason %q is not a wire value", f)
		}
	}
	for _, p := range []string{native.PhasePrefill, native.PhaseDecode, native.PhaseDraft, native.PhaseVerify} {
		if !schema.AttrPhase.Allows(p) {
			t.Errorf("native phase %q is not a wire value", p)
		}
	}
}

// TestEngineBody checks the conversion of a snapshot with values worked out
// by hand: sums and gauges copied, rates, KV usage and the last request's
// MLC metrics derived.
func TestEngineBody(t *testing.T) {
	s := native.Snapshot{
		EnginePrefillTimeSum: 0.5, EngineDecodeTimeSum: 2, PrefillTokensSum: 100, DecodeTokensSum: 50,
		PromptTokensSum: 100, CompletionTokensSum: 52, RequestsFinished: 2, Preemptions: 1, StepsDropped: 3,
		HasLastFinished: true,
		LastFinished: native.RequestStats{ArrivalNS: 1e9, AdmittedNS: 1e9 + 1e6, FirstTokenNS: 1e9 + 11e6, LastTokenNS: 1e9 + 41e6,
			FinishNS: 1e9 + 41e6, PromptTokens: 10, PrefillTokens: 10, DecodeTokens: 3, CompletionTokens: 4},
		SpecDecode:            &native.SpecDecode{DraftCount: []int64{4, 2}, AcceptCount: []int64{2, 1}},
		DecodeTimeByBatchSize: []native.TimeCost{{}, {Count: 3, Sum: 0.3}},
		Running:               1, Waiting: 2, Slots: 8, KVBlocksUsed: 6, KVBlocksTotal: 64,
		Steps: []native.StepRecord{{Phase: native.PhasePrefill, BatchSize: 1, Tokens: 10, DurationUS: 900}},
	}
	var b schema.EngineBody
	engineBody(&s, &b)
	if b.PrefillTokensPerS != 200 || b.DecodeTokensPerS != 25 || b.KVCacheUsage != 6.0/64 {
		t.Errorf("derived: prefill %g/s decode %g/s kv %g", b.PrefillTokensPerS, b.DecodeTokensPerS, b.KVCacheUsage)
	}
	m := b.LastFinishedRequest
	if m.PromptTokens != 10 || m.CompletionTokens != 4 || m.TTFTS != 0.011 || m.EndToEndLatencyS != 0.041 || m.PrefillTokensPerS != 1000 {
		t.Errorf("last finished request: %+v", m)
	}
	if b.Steps[0] != (schema.StepRecord{Phase: "prefill", BatchSize: 1, Tokens: 10, DurationUS: 900}) || b.DecodeTimeByBatchSize[1] != (schema.TimeCost{Count: 3, Sum: 0.3}) ||
		b.SpecDecode.AcceptCount[1] != 1 || b.Running != 1 || b.Waiting != 2 || b.Slots != 8 || b.StepsDropped != 3 || b.Preemptions != 1 {
		t.Errorf("copied fields: %+v", b)
	}
	s.SpecDecode, s.HasLastFinished, s.KVBlocksTotal, s.Steps = nil, false, 0, nil
	engineBody(&s, &b)
	if b.SpecDecode != nil || b.LastFinishedRequest != (schema.MLCRequestMetrics{}) || b.KVCacheUsage != 0 || b.Steps == nil || len(b.Steps) != 0 {
		t.Errorf("reused body keeps old values: %+v", b)
	}
}

// TestEngineEventsFromTheEngine runs a request through the real engine and
// checks that its request event and the snapshot, as the daemon assembles
// them, encode to lines the wire reader accepts (the test native/ had
// before it dropped the wire types).
func TestEngineEventsFromTheEngine(t *testing.T) {
	eng, _ := openTiny(t, func(c *Config) { c.Engine.SpecK = 4 })
	prompt := make([]int32, 40)
	for i := range prompt {
		prompt[i] = int32(3 + i%5)
	}
	id, err := eng.Submit(prompt, native.Params{MaxTokens: 40, ArrivalNS: native.Now()})
	if err != nil {
		t.Fatal(err)
	}
	var stats *native.RequestStats
	for stats == nil {
		outs, err := eng.Step()
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range outs {
			if o.ID == id && o.Finish != "" {
				stats = o.Stats
			}
		}
	}
	s := &seq{id: "cmpl-1", op: schema.OpTextCompletion}
	req := &schema.Request{Header: schema.Header{V: schema.Version, Kind: schema.KindRequest, Boot: "b0", Seq: 1, TimeUnixNano: 1},
		RequestBody: requestBody(s, stats, stats.Finish, "", 0)}
	var snap native.Snapshot
	eng.Snapshot(&snap)
	ev := &schema.Engine{Header: schema.Header{V: schema.Version, Kind: schema.KindEngine, Boot: "b0", Seq: 2, TimeUnixNano: 1}}
	engineBody(&snap, &ev.EngineBody)
	for _, e := range []any{req, ev} {
		line, err := schema.Append(nil, e)
		if err != nil {
			t.Fatal(err)
		}
		var got schema.Event
		var d schema.Decoder
		if err := d.Decode(bytes.TrimSuffix(line, []byte("\n")), &got); err != nil {
			t.Fatalf("the wire reader rejects %s: %v", line, err)
		}
		if got.Kind == schema.KindEngine {
			for _, key := range []string{`"spec_decode":{"draft_count":[`, `"count{batch_size=1}"`, `"steps":[{"phase":"prefill"`} {
				if !strings.Contains(string(line), key) {
					t.Errorf("snapshot JSON lacks %s:\n%s", key, line)
				}
			}
			if got.DecodeTokensSum != snap.DecodeTokensSum || got.LastFinishedRequest.CompletionTokens != 40 {
				t.Errorf("snapshot round trip: %+v", got.EngineBody)
			}
		} else if got.CompletionTokens != 40 || len(got.ITLUS) == 0 || got.FirstTokenUS < 0 {
			t.Errorf("request round trip: %+v", got.RequestBody)
		}
	}
}
