package daemon

import (
	"fmt"
	"log/slog"
	"math"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/picometer/picometer/schema"
)

// TestEmitterTotals: every totals event holds exactly the request events
// numbered before it and every request dropped so far, so a sidecar that
// raises its totals to it and adds the requests after it counts each
// request once. Here the sidecar is away while 10 requests finish; the
// queue holds 4, 6 are dropped (or 5 and the one the writer took before it
// found no sidecar): the totals after the hello hold the dropped ones, the
// final totals all 10, equal to the sum the sidecar computes.
func TestEmitterTotals(t *testing.T) {
	cfg := DefaultConfig().Metrics
	cfg.Socket = filepath.Join(socketDir(t), "late.sock")
	cfg.Queue = 4
	cfg.BackoffMin, cfg.BackoffMax = 5*time.Millisecond, 5*time.Millisecond
	e := NewEmitter(cfg, "b00t", schema.HelloBody{PID: 1, Model: "m", Engine: "e", Daemon: Version,
		Config: schema.EngineConfig{BMax: 1, ContextLength: 16, BlockSize: 16, KVBlocks: 1, PrefillChunk: 16}},
		slog.New(slog.DiscardHandler), time.Now)
	want := schema.NewTotals()
	for i := range 10 {
		s := seq{id: fmt.Sprintf("cmpl-%d", i), op: schema.OpTextCompletion}
		r := &schema.Request{RequestBody: requestBody(&s, nil, schema.FinishError, schema.ErrOther, 0)}
		if i%2 == 1 {
			r.RequestBody = schema.RequestBody{ID: s.id, Operation: schema.OpChat, AdmittedUS: 10, FirstTokenUS: 100 * int64(i),
				LastTokenUS: 2000, FinishUS: 2100, PromptTokens: i, CompletionTokens: 3, FinishReason: schema.FinishStop,
				ITLUS: []int64{500, 600}}
			if i%4 == 1 { // 5, 9: all but the last prompt token cached, a hit (1: nothing cached)
				r.CachedTokens = i - 1
			}
			if i%4 == 3 { // 3, 7: held to a JSON schema, one tool call
				r.Constraint, r.CompileUS, r.MaskUS, r.MaskedTokens = schema.ConstraintJSONSchema, 40*int64(i), 300, 3
				r.ToolCalls, r.ToolFormat = 1, "hermes"
			}
		}
		want.Add(&r.RequestBody, 16)
		e.Request(r)
	}
	dropped := e.Dropped()
	if dropped < 5 {
		t.Fatalf("dropped %d, want 5 or 6 (queue of 4)", dropped)
	}
	sink := listenSink(t, cfg.Socket)
	waitFor(t, 5*time.Second, "the queued requests", func() bool {
		c := sink.lines()
		return len(c) == 1 && len(c[0]) >= 2+int(10-dropped)
	})
	e.Engine(&schema.Engine{EngineBody: schema.EngineBody{Steps: []schema.StepRecord{}}})
	e.Close(5 * time.Second)
	sink.drained()
	evs := checkConnection(t, sink.lines()[0], "b00t")
	var requests int64
	for i, ev := range evs {
		switch ev.Kind {
		case schema.KindRequest:
			requests++
		case schema.KindTotals:
			if got := ev.Requests(); got != dropped+requests {
				t.Errorf("totals at seq %d (event %d) hold %d requests, want %d dropped + %d numbered before it", ev.Seq, i, got, dropped, requests)
			}
		}
	}
	last := evs[len(evs)-1]
	if last.Kind != schema.KindTotals {
		t.Fatalf("last event %s, want totals", last.Kind)
	}
	if d := diffTotals(last.TotalsBody, want); d != "" {
		t.Errorf("final totals: %s", d)
	}
	if d := diffTotals(e.Totals(), want); d != "" {
		t.Errorf("Totals(): %s", d)
	}
	chat := &last.Ops[slices.Index(schema.AttrOperation.Values, schema.OpChat)]
	// the constrained-decoding totals travel too (they were left out of
	// the copy once, so a restarted sidecar never got them back)
	if c := last.Constraints; c == nil || c.ToolCalls[slices.Index(schema.ToolFormats, "hermes")] != 2 ||
		c.Mask.Count() != 2 || c.Compile[slices.Index(schema.Constraints, schema.ConstraintJSONSchema)].Count() != 2 {
		t.Errorf("final totals: constraints %+v, want 2 json_schema requests with a tool call, a compile and a mask each", c)
	}
	for c, n := range []uint64{2, 0, 3} { // hit (5, 9), partial, miss (1, 3, 7)
		if got := chat.TTFTCache[c].Count(); got != n {
			t.Errorf("final totals: chat TTFT with cache %s counted %d, want %d", schema.CacheOutcomes[c], got, n)
		}
	}
}

// diffTotals compares totals: counts exactly, sums within 1e-12 relative
// (they add the same values, but dropped requests before numbered ones).
func diffTotals(got, want schema.TotalsBody) string {
	norm := func(t schema.TotalsBody) (schema.TotalsBody, []float64) {
		t = cloneTotals(&t)
		var sums []float64
		for op := range t.Ops {
			o := &t.Ops[op]
			for _, hs := range [][]schema.Hist{o.Hists, o.DurationByError, o.TTFTCache} {
				for i := range hs {
					sums = append(sums, hs[i].Sum)
					hs[i].Sum = 0
					if hs[i].Count() == 0 {
						hs[i].Counts = nil
					}
				}
			}
		}
		if c := t.Constraints; c != nil {
			for _, h := range append(slices.Clone(c.Compile), c.Mask) {
				sums = append(sums, h.Sum)
			}
			for k := range c.Compile {
				c.Compile[k].Sum = 0
			}
			c.Mask.Sum = 0
		}
		return t, sums
	}
	g, gs := norm(got)
	w, ws := norm(want)
	if !reflect.DeepEqual(g, w) {
		return fmt.Sprintf("counts %+v, want %+v", g, w)
	}
	for i := range gs {
		if math.Abs(gs[i]-ws[i]) > 1e-12*math.Max(1, math.Abs(ws[i])) {
			return fmt.Sprintf("sum %d is %v, want %v", i, gs[i], ws[i])
		}
	}
	return ""
}
