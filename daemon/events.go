package daemon

import (
	"strconv"

	"github.com/picometer/picometer/native"
	"github.com/picometer/picometer/schema"
)

// This file is the one place where the engine's own facts (native.RequestStats,
// native.Snapshot) become wire events (schema.RequestBody, schema.EngineBody):
// the engine knows nothing of the wire, the wire nothing of the engine.
// events_test.go covers it, against the real engine where cgo is on.

// requestBody builds a request event body from the engine's stats, or from
// the arrival time alone when the engine has none (a request refused or
// failed before it reached the engine).
func requestBody(s *seq, stats *native.RequestStats, finish, errType string, now int64) schema.RequestBody {
	b := schema.RequestBody{ID: s.id, Operation: s.op, Stream: s.stream, FinishReason: finish, ErrorType: errType}
	s.trace.fill(&b)
	if s.paramsRead {
		b.MaxTokens = s.params.MaxTokens
		b.Temperature, b.TopP = shortFloat(s.params.Temperature), shortFloat(s.params.TopP)
	}
	if s.constraint != "" {
		b.Constraint, b.CompileUS = s.constraint, s.compileNS/1000
	}
	if stats != nil {
		wireStats(stats, &b)
		if s.constraint != "" {
			b.Grammar, b.MaskUS, b.MaskedTokens = stats.Grammar, stats.MaskNS/1000, stats.MaskedTokens
		}
	} else {
		b.AdmittedUS, b.FirstTokenUS, b.LastTokenUS = -1, -1, -1
		b.FinishUS = max(0, (now-s.params.ArrivalNS)/1000)
		b.ITLUS = []int64{}
	}
	return b
}

// shortFloat is f as float64 with float32's shortest decimal (0.7, not
// 0.699999988079071): the value the client sent, which the span reports.
func shortFloat(f float32) float64 {
	v, _ := strconv.ParseFloat(strconv.FormatFloat(float64(f), 'g', -1, 32), 64)
	return v
}

// wireStats fills the timing and token fields of b from s: times in
// microseconds relative to arrival (-1 when the moment never came) and the
// ITL gaps between consecutive emitting steps. b.ITLUS's storage is reused.
func wireStats(s *native.RequestStats, b *schema.RequestBody) {
	rel := func(t int64) int64 {
		if t == 0 {
			return -1
		}
		return max(0, (t-s.ArrivalNS)/1000)
	}
	b.AdmittedUS = rel(s.AdmittedNS)
	b.FirstTokenUS = rel(s.FirstTokenNS)
	b.LastTokenUS = rel(s.LastTokenNS)
	b.FinishUS = max(0, rel(s.FinishNS))
	b.PromptTokens = s.PromptTokens
	b.PrefillTokens = s.PrefillTokens
	b.DecodeTokens = s.DecodeTokens
	b.CompletionTokens = s.CompletionTokens
	b.DraftTokens = s.DraftTokens
	b.AcceptedTokens = s.AcceptedTokens
	b.CachedTokens = s.CachedTokens
	b.ITLUS = b.ITLUS[:0]
	for i := 1; i < len(s.EmitNS); i++ {
		b.ITLUS = append(b.ITLUS, (s.EmitNS[i]-s.EmitNS[i-1])/1000)
	}
	if b.ITLUS == nil {
		b.ITLUS = []int64{}
	}
}

// engineBody writes snapshot s in MLC-LLM's EngineMetrics shape into dst,
// with what MLC derives (tokens per second, the last finished request's
// RequestMetrics) and the KV-cache usage ratio. dst's slices are reused; it
// leaves dst.EventsDropped alone (the emitter's counter, loop.counters).
func engineBody(s *native.Snapshot, dst *schema.EngineBody) {
	dst.EnginePrefillTimeSum = s.EnginePrefillTimeSum
	dst.EngineDecodeTimeSum = s.EngineDecodeTimeSum
	dst.EngineDraftTimeSum = s.EngineDraftTimeSum
	dst.EngineVerifyTimeSum = s.EngineVerifyTimeSum
	dst.EngineJumpForwardTimeSum = 0
	dst.PromptTokensSum = s.PromptTokensSum
	dst.CompletionTokensSum = s.CompletionTokensSum
	dst.PrefillTokensSum = s.PrefillTokensSum
	dst.DecodeTokensSum = s.DecodeTokensSum
	dst.JumpForwardTokensSum = 0
	dst.PrefillTokensPerS = rate(s.PrefillTokensSum, s.EnginePrefillTimeSum)
	dst.DecodeTokensPerS = rate(s.DecodeTokensSum, s.EngineDecodeTimeSum)
	dst.LastFinishedRequest = schema.MLCRequestMetrics{}
	if s.HasLastFinished {
		var b schema.RequestBody
		wireStats(&s.LastFinished, &b)
		dst.LastFinishedRequest = b.MLCMetrics()
	}
	if s.SpecDecode != nil {
		if dst.SpecDecode == nil {
			dst.SpecDecode = &schema.SpecDecode{}
		}
		dst.SpecDecode.DraftCount = append(dst.SpecDecode.DraftCount[:0], s.SpecDecode.DraftCount...)
		dst.SpecDecode.AcceptCount = append(dst.SpecDecode.AcceptCount[:0], s.SpecDecode.AcceptCount...)
	} else {
		dst.SpecDecode = nil
	}
	dst.DecodeTimeByBatchSize = timeCosts(dst.DecodeTimeByBatchSize, s.DecodeTimeByBatchSize)
	dst.DraftTimeByBatchSize = timeCosts(dst.DraftTimeByBatchSize, s.DraftTimeByBatchSize)
	dst.VerifyTimeByBatchSize = timeCosts(dst.VerifyTimeByBatchSize, s.VerifyTimeByBatchSize)
	dst.Steps = dst.Steps[:0]
	for _, r := range s.Steps {
		dst.Steps = append(dst.Steps, schema.StepRecord{Phase: r.Phase, BatchSize: r.BatchSize, Tokens: r.Tokens, DurationUS: r.DurationUS})
	}
	if dst.Steps == nil {
		dst.Steps = []schema.StepRecord{}
	}
	dst.Preemptions = s.Preemptions
	dst.RequestsFinished = s.RequestsFinished
	dst.StepsDropped = s.StepsDropped
	dst.PrefixQueries, dst.PrefixHits, dst.PrefixEvictions = s.PrefixQueries, s.PrefixHits, s.PrefixEvictions
	dst.KVBlocksCached = s.KVBlocksCached
	dst.Running, dst.Waiting, dst.Slots = s.Running, s.Waiting, s.Slots
	dst.KVBlocksUsed, dst.KVBlocksTotal = s.KVBlocksUsed, s.KVBlocksTotal
	dst.KVCacheUsage = 0
	if s.KVBlocksTotal > 0 {
		dst.KVCacheUsage = float64(s.KVBlocksUsed) / float64(s.KVBlocksTotal)
	}
}

func rate(tokens int64, seconds float64) float64 {
	if tokens == 0 || seconds <= 0 {
		return 0
	}
	return float64(tokens) / seconds
}

func timeCosts(dst schema.TimeByBatchSize, src []native.TimeCost) schema.TimeByBatchSize {
	dst = dst[:0]
	for _, c := range src {
		dst = append(dst, schema.TimeCost{Count: c.Count, Sum: c.Sum})
	}
	return dst
}
