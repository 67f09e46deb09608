package schema

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"unicode"
	"unicode/utf8"
)

// This file: events_test.go (goldens, every rejection reason) and
// decode_fast_test.go (the Decoder against Decode, fuzzed) cover it.

// DecodeError is the error [Decode] returns. Reason is one of
// [DecodeReasons]; the sidecar counts rejected lines by it.
type DecodeError struct {
	Reason string
	Msg    string
}

// Error returns the message, which names the offending field or value.
func (e *DecodeError) Error() string { return e.Msg }

func decodeErr(reason, format string, args ...any) *DecodeError {
	return &DecodeError{Reason: reason, Msg: fmt.Sprintf(format, args...)}
}

// ReasonOf returns the decode reason of err, or "" if err is not a
// *DecodeError.
func ReasonOf(err error) string {
	if err == nil { // errors.As would still move de to the heap: one allocation per applied line
		return ""
	}
	var de *DecodeError
	if errors.As(err, &de) {
		return de.Reason
	}
	return ""
}

// Decode parses one NDJSON line (without its newline) into ev and validates
// it. ev is reset first; its slices' storage is reused, so a caller decoding
// many lines into one Event allocates little. Unknown fields are ignored
// (forward compatibility). The error, if any, is a *DecodeError:
//
//   - malformed_json: not a JSON object, or a field of the wrong type;
//   - unsupported_version: v is not [Version] (the message names it);
//   - unknown_kind: kind is not hello, request, engine or totals (the message names it);
//   - invalid_field: a field is missing or out of range (the message names it).
//
// Decode never panics, whatever the bytes.
func Decode(line []byte, ev *Event) error {
	ev.reset()
	if err := json.Unmarshal(line, ev); err != nil {
		return decodeErr(ReasonMalformed, "malformed event: %v", err)
	}
	return ev.Validate()
}

func (ev *Event) reset() {
	itl, steps := ev.ITLUS[:0], ev.Steps[:0]
	dec, dra, ver := ev.DecodeTimeByBatchSize[:0], ev.DraftTimeByBatchSize[:0], ev.VerifyTimeByBatchSize[:0]
	*ev = Event{} // a totals event's storage is not reused: decoding into it would keep fields a line lacks
	ev.ITLUS, ev.Steps = itl, steps
	ev.DecodeTimeByBatchSize, ev.DraftTimeByBatchSize, ev.VerifyTimeByBatchSize = dec, dra, ver
}

// Validate checks the header and the body its kind selects.
func (ev *Event) Validate() error {
	h := &ev.Header
	if h.V != Version {
		if h.V == 0 {
			return decodeErr(ReasonUnsupportedVersion, "event has no version (field v); this build reads version %d", Version)
		}
		return decodeErr(ReasonUnsupportedVersion, "unsupported event version %d; this build reads version %d", h.V, Version)
	}
	switch h.Kind {
	case KindHello, KindRequest, KindEngine, KindTotals:
	case "":
		return decodeErr(ReasonInvalidField, "kind: missing")
	default:
		return decodeErr(ReasonUnknownKind, "unknown event kind %q", h.Kind)
	}
	if h.Boot == "" {
		return decodeErr(ReasonInvalidField, "boot: missing")
	}
	if h.Seq == 0 {
		return decodeErr(ReasonInvalidField, "seq: missing or 0")
	}
	switch h.Kind {
	case KindHello:
		return ev.HelloBody.validate()
	case KindRequest:
		return ev.RequestBody.validate()
	case KindTotals:
		return ev.TotalsBody.validate()
	default:
		return ev.EngineBody.validate()
	}
}

func invalid(format string, args ...any) error { return decodeErr(ReasonInvalidField, format, args...) }

// Range limits of event values. Anything beyond them is a broken or hostile
// producer, rejected as invalid_field, so that no event can wrap a counter
// or make a histogram sum meaningless.
const (
	// MaxTokens bounds a token count in one request or step (2^30: far
	// beyond any context length).
	MaxTokens = 1 << 30
	// MaxDurationUS bounds a duration in one request or step: 7 days.
	MaxDurationUS = 7 * 24 * 3600 * 1_000_000
	// MaxCumulative bounds a cumulative count in an engine snapshot (2^53,
	// the largest integer a float64 holds exactly: 285 years at a million
	// tokens per second).
	MaxCumulative = 1 << 53
	// MaxCumulativeSeconds bounds a cumulative time sum in an engine
	// snapshot (about 31,700 years).
	MaxCumulativeSeconds = 1e12
	// MaxGauge bounds the live counts of an engine snapshot (running,
	// waiting, slots, KV-cache blocks).
	MaxGauge = 1 << 30
)

// MaxLabelBytes bounds the free-form values a hello carries into labels
// (model, engine, daemon version): they become Prometheus label values and
// OTel attributes on every series of the daemon.
const MaxLabelBytes = 256

func (b *HelloBody) validate() error {
	for _, f := range []struct{ key, v string }{{"model", b.Model}, {"engine", b.Engine}, {"daemon", b.Daemon}} {
		switch {
		case f.v == "":
			return invalid("%s: missing", f.key)
		case len(f.v) > MaxLabelBytes:
			return invalid("%s: %d bytes, more than %d", f.key, len(f.v), MaxLabelBytes)
		case !utf8.ValidString(f.v):
			return invalid("%s: %q is not valid UTF-8", f.key, f.v)
		case strings.IndexFunc(f.v, unicode.IsControl) >= 0:
			return invalid("%s: %q contains a control character", f.key, f.v)
		}
	}
	switch {
	case b.Config.BMax < 1 || b.Config.BMax > MaxBatch:
		return invalid("config.b_max: %d not in 1..%d", b.Config.BMax, MaxBatch)
	case b.Config.SpecK < 0 || b.Config.SpecK > MaxSpecK:
		return invalid("config.spec_k: %d not in 0..%d", b.Config.SpecK, MaxSpecK)
	case b.Config.ContextLength < 1:
		return invalid("config.context_length: %d < 1", b.Config.ContextLength)
	case b.Config.BlockSize < 0 || b.Config.KVBlocks < 0 || b.Config.PrefillChunk < 0:
		return invalid("config: negative block_size, kv_blocks or prefill_chunk")
	}
	return nil
}

func (b *RequestBody) validate() error {
	if b.ID == "" {
		return invalid("id: missing")
	}
	if !AttrOperation.Allows(b.Operation) {
		return invalid("operation: %q is not one of %v", b.Operation, AttrOperation.Values)
	}
	if !AttrFinishReason.Allows(b.FinishReason) {
		return invalid("finish_reason: %q is not one of %v", b.FinishReason, FinishReasons)
	}
	if b.ErrorType != "" && !AttrErrorType.Allows(b.ErrorType) {
		return invalid("error_type: %q is not one of %v", b.ErrorType, ErrorTypes)
	}
	if b.FinishReason == FinishError && b.ErrorType == "" {
		return invalid("error_type: missing on a request that finished with an error")
	}
	if b.FinishUS < 0 || b.FinishUS > MaxDurationUS {
		return invalid("finish_us: %d not in 0..%d", b.FinishUS, MaxDurationUS)
	}
	for _, t := range []struct {
		name string
		v    int64
	}{{"admitted_us", b.AdmittedUS}, {"first_token_us", b.FirstTokenUS}, {"last_token_us", b.LastTokenUS}} {
		if t.v < -1 || t.v > b.FinishUS {
			return invalid("%s: %d not in -1..finish_us (%d)", t.name, t.v, b.FinishUS)
		}
	}
	if b.AdmittedUS >= 0 && b.FirstTokenUS >= 0 && b.FirstTokenUS < b.AdmittedUS {
		return invalid("first_token_us: %d before admitted_us %d", b.FirstTokenUS, b.AdmittedUS)
	}
	if b.FirstTokenUS >= 0 && b.LastTokenUS < b.FirstTokenUS {
		return invalid("last_token_us: %d before first_token_us %d", b.LastTokenUS, b.FirstTokenUS)
	}
	for _, t := range []struct {
		name string
		v    int
	}{{"prompt_tokens", b.PromptTokens}, {"prefill_tokens", b.PrefillTokens}, {"decode_tokens", b.DecodeTokens},
		{"completion_tokens", b.CompletionTokens}, {"draft_tokens", b.DraftTokens}, {"accepted_tokens", b.AcceptedTokens}} {
		if t.v < 0 || t.v > MaxTokens {
			return invalid("%s: %d not in 0..%d", t.name, t.v, MaxTokens)
		}
	}
	if b.CachedTokens < 0 || b.CachedTokens > b.PromptTokens {
		return invalid("cached_tokens: %d not in 0..prompt_tokens (%d)", b.CachedTokens, b.PromptTokens)
	}
	if b.AcceptedTokens > b.DraftTokens {
		return invalid("accepted_tokens: %d more than draft_tokens %d", b.AcceptedTokens, b.DraftTokens)
	}
	if len(b.ITLUS) > b.CompletionTokens {
		return invalid("itl_us: %d gaps for %d completion tokens", len(b.ITLUS), b.CompletionTokens)
	}
	for i, g := range b.ITLUS {
		if g < 0 || g > b.FinishUS {
			return invalid("itl_us[%d]: %d not in 0..finish_us (%d)", i, g, b.FinishUS)
		}
	}
	return b.validateTrace()
}

// Bounds of the trace and parameter fields of a request event.
const (
	// MaxTraceStateBytes bounds tracestate: W3C Trace Context lets a vendor
	// drop a tracestate longer than 512 characters (32 members).
	MaxTraceStateBytes = 512
	// MaxTemperature is the largest sampling temperature (OpenAI's).
	MaxTemperature = 2
)

func (b *RequestBody) validateTrace() error {
	if b.TraceID == "" {
		if b.SpanID != "" || b.ParentSpanID != "" || b.Sampled || b.TraceState != "" {
			return invalid("trace_id: missing beside span_id, parent_span_id, sampled or tracestate")
		}
	} else {
		if !IsTraceHex(b.TraceID, 32) {
			return invalid("trace_id: %q is not 32 lowercase hex digits, not all zero", b.TraceID)
		}
		if !IsTraceHex(b.SpanID, 16) {
			return invalid("span_id: %q is not 16 lowercase hex digits, not all zero", b.SpanID)
		}
		if b.ParentSpanID != "" && !IsTraceHex(b.ParentSpanID, 16) {
			return invalid("parent_span_id: %q is not 16 lowercase hex digits, not all zero", b.ParentSpanID)
		}
		if len(b.TraceState) > MaxTraceStateBytes {
			return invalid("tracestate: %d bytes, more than %d", len(b.TraceState), MaxTraceStateBytes)
		}
		for i := 0; i < len(b.TraceState); i++ {
			if c := b.TraceState[i]; c < 0x20 || c > 0x7e {
				return invalid("tracestate: byte %#x at %d is not printable ASCII", c, i)
			}
		}
	}
	switch {
	case b.StartUnixNano < 0:
		return invalid("start_unix_nano: %d < 0", b.StartUnixNano)
	case b.MaxTokens < 0 || b.MaxTokens > MaxTokens:
		return invalid("max_tokens: %d not in 0..%d", b.MaxTokens, MaxTokens)
	case !(b.Temperature >= 0 && b.Temperature <= MaxTemperature):
		return invalid("temperature: %v not in 0..%d", b.Temperature, MaxTemperature)
	case !(b.TopP >= 0 && b.TopP <= 1):
		return invalid("top_p: %v not in 0..1", b.TopP)
	}
	return b.validateConstraint()
}

func (b *RequestBody) validateConstraint() error {
	switch {
	case b.Constraint != "" && !oneOf(Constraints, b.Constraint):
		return invalid("constraint: %q is not one of %v", b.Constraint, Constraints)
	case b.Constraint == "" && (b.Grammar != "" || b.CompileUS != 0 || b.MaskUS != 0 || b.MaskedTokens != 0):
		return invalid("constraint: missing beside grammar, compile_us, mask_us or masked_tokens")
	case b.Grammar != "" && !oneOf(GrammarStates, b.Grammar):
		return invalid("grammar: %q is not one of %v", b.Grammar, GrammarStates)
	case b.CompileUS < 0 || b.CompileUS > MaxDurationUS:
		return invalid("compile_us: %d not in 0..%d", b.CompileUS, MaxDurationUS)
	case b.MaskUS < 0 || b.MaskUS > MaxDurationUS:
		return invalid("mask_us: %d not in 0..%d", b.MaskUS, MaxDurationUS)
	case b.MaskedTokens < 0 || b.MaskedTokens > MaxTokens:
		return invalid("masked_tokens: %d not in 0..%d", b.MaskedTokens, MaxTokens)
	case b.ToolCalls < 0 || b.ToolCalls > MaxTokens:
		return invalid("tool_calls: %d not in 0..%d", b.ToolCalls, MaxTokens)
	case (b.ToolCalls > 0) != (b.ToolFormat != ""):
		return invalid("tool_format: %q with %d tool_calls (one goes with the other)", b.ToolFormat, b.ToolCalls)
	case b.ToolFormat != "" && !oneOf(ToolFormats, b.ToolFormat):
		return invalid("tool_format: %q is not one of %v", b.ToolFormat, ToolFormats)
	}
	return nil
}

func oneOf(set []string, v string) bool {
	for _, s := range set {
		if s == v {
			return true
		}
	}
	return false
}

// IsTraceHex reports whether s is n lowercase hex digits, not all zero:
// the form of W3C trace ids (n = 32) and span ids (n = 16).
func IsTraceHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	zero := true
	for i := 0; i < n; i++ {
		c := s[i]
		switch {
		case c == '0':
		case c >= '1' && c <= '9', c >= 'a' && c <= 'f':
			zero = false
		default:
			return false
		}
	}
	return !zero
}

func (b *EngineBody) validate() error {
	for _, t := range []struct {
		name string
		v    float64
	}{{"engine_prefill_time_sum", b.EnginePrefillTimeSum}, {"engine_decode_time_sum", b.EngineDecodeTimeSum},
		{"engine_draft_time_sum", b.EngineDraftTimeSum}, {"engine_verify_time_sum", b.EngineVerifyTimeSum},
		{"engine_jump_forward_time_sum", b.EngineJumpForwardTimeSum}} {
		if !(t.v >= 0 && t.v <= MaxCumulativeSeconds) {
			return invalid("%s: %v out of range", t.name, t.v)
		}
	}
	for _, t := range []struct {
		name string
		v    int64
	}{{"prompt_tokens_sum", b.PromptTokensSum}, {"completion_tokens_sum", b.CompletionTokensSum},
		{"prefill_tokens_sum", b.PrefillTokensSum}, {"decode_tokens_sum", b.DecodeTokensSum},
		{"jump_forward_tokens_sum", b.JumpForwardTokensSum},
		{"preemptions", b.Preemptions}, {"requests_finished", b.RequestsFinished},
		{"events_dropped", b.EventsDropped}, {"events_write_failed", b.EventsWriteFailed}, {"steps_dropped", b.StepsDropped},
		{"prefix_cache_queries", b.PrefixQueries}, {"prefix_cache_hits", b.PrefixHits}, {"prefix_cache_evictions", b.PrefixEvictions}} {
		if t.v < 0 || t.v > MaxCumulative {
			return invalid("%s: %d not in 0..%d", t.name, t.v, int64(MaxCumulative))
		}
	}
	for _, t := range []struct {
		name string
		v    int
	}{{"running", b.Running}, {"waiting", b.Waiting}, {"slots", b.Slots},
		{"kv_blocks_used", b.KVBlocksUsed}, {"kv_blocks_total", b.KVBlocksTotal}, {"kv_blocks_cached", b.KVBlocksCached}} {
		if t.v < 0 || t.v > MaxGauge {
			return invalid("%s: %d not in 0..%d", t.name, t.v, MaxGauge)
		}
	}
	if b.PrefixHits > b.PrefixQueries {
		return invalid("prefix_cache_hits: %d above prefix_cache_queries %d", b.PrefixHits, b.PrefixQueries)
	}
	if sd := b.SpecDecode; sd != nil {
		for i := range sd.DraftCount {
			if sd.DraftCount[i] > MaxCumulative || (i < len(sd.AcceptCount) && sd.AcceptCount[i] > MaxCumulative) {
				return invalid("spec_decode: count at position %d above %d", i, int64(MaxCumulative))
			}
		}
	}
	for ph, tb := range []TimeByBatchSize{b.DecodeTimeByBatchSize, b.DraftTimeByBatchSize, b.VerifyTimeByBatchSize} {
		for n := range tb {
			if tb[n].Count > MaxCumulative || tb[n].Sum > MaxCumulativeSeconds {
				return invalid("%s: batch_size %d above %d steps or %g seconds",
					[...]string{"decode_time_by_batch_size", "draft_time_by_batch_size", "verify_time_by_batch_size"}[ph], n, int64(MaxCumulative), MaxCumulativeSeconds)
			}
		}
	}
	if b.KVCacheUsage < 0 || b.KVCacheUsage > 1 || math.IsNaN(b.KVCacheUsage) {
		return invalid("kv_cache_usage: %v not in 0..1", b.KVCacheUsage)
	}
	for i := range b.Steps {
		s := &b.Steps[i]
		if !AttrPhase.Allows(s.Phase) {
			return invalid("steps[%d].phase: %q is not one of %v", i, s.Phase, AttrPhase.Values)
		}
		if s.BatchSize < 1 || s.BatchSize > MaxBatch {
			return invalid("steps[%d].batch_size: %d not in 1..%d", i, s.BatchSize, MaxBatch)
		}
		if s.Tokens < 0 || s.Tokens > MaxTokens || s.DurationUS < 0 || s.DurationUS > MaxDurationUS {
			return invalid("steps[%d]: tokens %d not in 0..%d or duration_us %d not in 0..%d", i, s.Tokens, MaxTokens, s.DurationUS, MaxDurationUS)
		}
	}
	return nil
}

// Append appends ev (a *Hello, *Request, *Engine or *Totals) as one NDJSON
// line, newline included, to dst.
func Append(dst []byte, ev any) ([]byte, error) {
	switch ev.(type) {
	case *Hello, *Request, *Engine, *Totals:
	default:
		return dst, fmt.Errorf("schema: cannot encode %T as an event", ev)
	}
	b, err := json.Marshal(ev)
	if err != nil {
		return dst, err
	}
	dst = append(dst, b...)
	return append(dst, '\n'), nil
}
