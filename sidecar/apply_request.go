package sidecar

import (
	"math"

	"github.com/picometer/picometer/schema"
)

// This file applies request events: one observation per histogram, one per
// ITL gap, and the request counters by operation, finish reason and error
// type. aggregate_test.go (TestExactness, TestApplyAllocs) and the golden expositions of
// registry_test.go cover it.

func seconds(us int64) float64 { return float64(us) / 1e6 }

// maxCounter bounds every exported counter: an event that would take one
// past it is rejected whole (invalid_field), so a counter never wraps.
// schema bounds each event's values; this bounds their sum.
const maxCounter = math.MaxInt64

// applyRequest feeds one finished request into the request families. It
// applies nothing and returns an invalid_field error when a token counter
// would pass maxCounter.
func (t *target) applyRequest(r *schema.RequestBody) error {
	op := indexOf(schema.AttrOperation.Values, r.Operation)
	rs := &t.req[op]
	opl := label{schema.AttrOperation, r.Operation}
	pt := t.counter(&rs.promptTokens, schema.IDPromptTokens, opl)
	gt := t.counter(&rs.genTokens, schema.IDGenerationTokens, opl)
	if pt.c.Get() > maxCounter-uint64(r.PromptTokens) || gt.c.Get() > maxCounter-uint64(r.CompletionTokens) {
		return invalidField("request %q: prompt_tokens %d or completion_tokens %d would take a token counter past %d",
			r.ID, r.PromptTokens, r.CompletionTokens, uint64(maxCounter))
	}
	if r.AdmittedUS >= 0 {
		t.hist(&rs.queue, schema.IDQueueDuration, opl).observe(seconds(r.AdmittedUS))
	}
	if r.FirstTokenUS >= 0 {
		t.hist(&rs.ttft, schema.IDTTFT, opl).observe(seconds(r.FirstTokenUS))
		if r.AdmittedUS >= 0 {
			t.hist(&rs.prefill, schema.IDPrefillDuration, opl).observe(seconds(r.FirstTokenUS - r.AdmittedUS))
		}
		t.hist(&rs.decode, schema.IDDecodeDuration, opl).observe(seconds(r.FinishUS - r.FirstTokenUS))
		if r.CompletionTokens >= 2 {
			t.hist(&rs.tpot, schema.IDTimePerOutputToken, opl).
				observe(seconds(r.LastTokenUS-r.FirstTokenUS) / float64(r.CompletionTokens-1))
		}
	}
	if len(r.ITLUS) > 0 {
		t.hist(&rs.itl, schema.IDInterTokenLatency, opl).observeMicros(r.ITLUS)
	}
	errType := ""
	if r.FinishReason == schema.FinishError || r.FinishReason == schema.FinishAbort {
		errType = r.ErrorType
		if errType == "" {
			errType = schema.ErrOther
		}
	}
	if errType == "" {
		t.hist(&rs.duration, schema.IDRequestDuration, opl).observe(seconds(r.FinishUS))
	} else {
		e := indexOf(schema.ErrorTypes, errType)
		t.hist(&rs.durationErr[e], schema.IDRequestDuration, opl, label{schema.AttrErrorType, errType}).observe(seconds(r.FinishUS))
		t.counter(&rs.failed[e], schema.IDRequestsFailed, opl, label{schema.AttrErrorType, errType}).c.Inc()
	}
	pt.c.AddInt64(int64(r.PromptTokens))
	gt.c.AddInt64(int64(r.CompletionTokens))
	if r.AdmittedUS >= 0 {
		t.hist(&rs.promptLen, schema.IDRequestPromptLength, opl).observe(float64(r.PromptTokens))
		t.hist(&rs.genLen, schema.IDRequestGenLength, opl).observe(float64(r.CompletionTokens))
	}
	f := indexOf(schema.FinishReasons, r.FinishReason)
	t.counter(&rs.finished[f], schema.IDRequestsFinished, opl, label{schema.AttrFinishReason, r.FinishReason}).c.Inc()
	return nil
}
