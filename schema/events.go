package schema

// Version is the wire version this build writes and reads. An event with any
// other version is rejected with an error naming it.
const Version = 1

// Header starts every event.
type Header struct {
	// V is the wire version ([Version]).
	V int `json:"v"`
	// Kind is "hello", "request", "engine" or "totals".
	Kind string `json:"kind"`
	// Boot identifies one run of the daemon (random, fixed for its lifetime).
	// Counters in engine snapshots are cumulative per boot.
	Boot string `json:"boot"`
	// Seq numbers the daemon's events from 1, without gaps, across reconnects.
	// A gap means events were lost on the way.
	Seq uint64 `json:"seq"`
	// TimeUnixNano is the wall-clock time the event was created.
	TimeUnixNano int64 `json:"ts"`
}

// EngineConfig is the daemon's engine configuration, sent in its hello.
type EngineConfig struct {
	BMax          int `json:"b_max"`          // slots sharing the KV cache
	ContextLength int `json:"context_length"` // model context in tokens
	BlockSize     int `json:"block_size"`     // KV-cache block size in tokens
	KVBlocks      int `json:"kv_blocks"`      // KV-cache blocks in total
	SpecK         int `json:"spec_k"`         // speculative draft length, 0 = off
	PrefillChunk  int `json:"prefill_chunk"`  // prompt tokens prefilled per slot per step
}

// HelloBody is the payload of a hello event, sent first on every connection.
type HelloBody struct {
	PID    int          `json:"pid"`
	Model  string       `json:"model"`  // served model name (gen_ai.request.model)
	Engine string       `json:"engine"` // engine identifier (the engine attribute)
	Daemon string       `json:"daemon"` // picometerd version
	Config EngineConfig `json:"config"`
}

// Hello is the event a daemon sends first on every (re)connection.
type Hello struct {
	Header
	HelloBody
}

// RequestBody is the payload of a request event: the raw facts of one finished
// request (succeeded, aborted or failed), nothing derived from them (the
// sidecar derives; [RequestBody.MLCMetrics] derives MLC-LLM's view for the
// daemon's own responses and snapshots). Durations are integer microseconds
// on the daemon's monotonic clock, relative to the request's HTTP arrival;
// -1 means the moment never came (e.g. no first token).
type RequestBody struct {
	ID        string `json:"id"`        // response id, e.g. "cmpl-…"
	Operation string `json:"operation"` // gen_ai.operation.name: "chat" or "text_completion"
	Stream    bool   `json:"stream"`

	AdmittedUS   int64 `json:"admitted_us"`    // admission into an engine slot
	FirstTokenUS int64 `json:"first_token_us"` // first output token left the engine
	LastTokenUS  int64 `json:"last_token_us"`  // last output token left the engine
	FinishUS     int64 `json:"finish_us"`      // the request finished (end to end)

	PromptTokens     int `json:"prompt_tokens"`
	PrefillTokens    int `json:"prefill_tokens"` // tokens run through prefill (prompt + recomputation)
	DecodeTokens     int `json:"decode_tokens"`  // tokens produced by decode/verify steps
	CompletionTokens int `json:"completion_tokens"`
	DraftTokens      int `json:"draft_tokens"`    // speculative tokens proposed
	AcceptedTokens   int `json:"accepted_tokens"` // speculative tokens accepted

	FinishReason string `json:"finish_reason"`        // stop, length, abort or error
	ErrorType    string `json:"error_type,omitempty"` // set on error and abort

	// ITLUS holds one gap per engine step that emitted tokens for the request
	// after its first token: microseconds since the previous emitting step.
	ITLUS []int64 `json:"itl_us"`

	// Trace context (issue 28): the request's SERVER span as the daemon
	// identified it, from which the sidecar builds the span. Every field is
	// omitted when empty, so events of daemons that predate it decode as
	// before (no trace id: no span). The daemon never exports a span itself.
	TraceID       string `json:"trace_id,omitempty"`        // 32 lowercase hex digits, not all zero
	SpanID        string `json:"span_id,omitempty"`         // 16 lowercase hex digits, not all zero: the request's span
	ParentSpanID  string `json:"parent_span_id,omitempty"`  // the caller's span (traceparent); empty for a root span
	Sampled       bool   `json:"sampled,omitempty"`         // the daemon's sampling decision (the span is exported only if set)
	TraceState    string `json:"tracestate,omitempty"`      // the caller's tracestate, when valid (W3C list, at most MaxTraceStateBytes)
	StartUnixNano int64  `json:"start_unix_nano,omitempty"` // wall clock at HTTP arrival (the span's start; it ends finish_us later)

	// Request parameters the engine ran with (GenAI span attributes); all
	// zero for a request refused before its body was read (max_tokens is at
	// least 1 for any other).
	MaxTokens   int     `json:"max_tokens,omitempty"`
	Temperature float64 `json:"temperature,omitempty"` // 0..MaxTemperature
	TopP        float64 `json:"top_p,omitempty"`       // 0..1

	// Output constraints (issue 26); every field is omitted when the
	// request had none, so older events decode as before.
	Constraint   string `json:"constraint,omitempty"`    // one of Constraints: what the output was held to
	Grammar      string `json:"grammar,omitempty"`       // one of GrammarStates: how the output stood against it at the end ("" if never run)
	CompileUS    int64  `json:"compile_us,omitempty"`    // compiling the grammar (0: it was cached)
	MaskUS       int64  `json:"mask_us,omitempty"`       // computing its token masks
	MaskedTokens int    `json:"masked_tokens,omitempty"` // tokens sampled under a mask
	ToolCalls    int    `json:"tool_calls,omitempty"`    // tool calls parsed from the answer
	ToolFormat   string `json:"tool_format,omitempty"`   // one of ToolFormats, with tool_calls

	// CachedTokens are the prompt tokens whose K/V came from the engine's
	// prefix cache at the request's first admission (issue 27); omitted
	// when none, so older events decode as before.
	CachedTokens int `json:"cached_tokens,omitempty"`
}

// Request is the event a daemon sends once per finished request.
type Request struct {
	Header
	RequestBody
}

// StepRecord is one engine step, as carried by engine snapshots.
type StepRecord struct {
	Phase      string `json:"phase"`       // prefill, decode, draft or verify
	BatchSize  int    `json:"batch_size"`  // requests in the step
	Tokens     int    `json:"tokens"`      // rows of the forward pass
	DurationUS int64  `json:"duration_us"` // wall time of the step
}

// EngineBody is the payload of an engine snapshot: MLC-LLM's EngineMetrics
// (cumulative since boot) plus live gauges and the step records since the
// previous snapshot.
type EngineBody struct {
	// MLC-LLM EngineMetrics, cumulative since boot.
	EnginePrefillTimeSum     float64           `json:"engine_prefill_time_sum"`
	EngineDecodeTimeSum      float64           `json:"engine_decode_time_sum"`
	EngineJumpForwardTimeSum float64           `json:"engine_jump_forward_time_sum"`
	PromptTokensSum          int64             `json:"prompt_tokens_sum"`
	CompletionTokensSum      int64             `json:"completion_tokens_sum"`
	PrefillTokensSum         int64             `json:"prefill_tokens_sum"`
	DecodeTokensSum          int64             `json:"decode_tokens_sum"`
	JumpForwardTokensSum     int64             `json:"jump_forward_tokens_sum"`
	PrefillTokensPerS        float64           `json:"prefill_tokens_per_s,omitempty"`
	DecodeTokensPerS         float64           `json:"decode_tokens_per_s,omitempty"`
	LastFinishedRequest      MLCRequestMetrics `json:"last_finished_request"`
	SpecDecode               *SpecDecode       `json:"spec_decode,omitempty"`
	DecodeTimeByBatchSize    TimeByBatchSize   `json:"decode_time_by_batch_size"`
	DraftTimeByBatchSize     TimeByBatchSize   `json:"draft_time_by_batch_size"`
	VerifyTimeByBatchSize    TimeByBatchSize   `json:"verify_time_by_batch_size"`

	// picometer extensions, cumulative since boot.
	EngineDraftTimeSum  float64 `json:"engine_draft_time_sum"`
	EngineVerifyTimeSum float64 `json:"engine_verify_time_sum"`
	Preemptions         int64   `json:"preemptions"`
	RequestsFinished    int64   `json:"requests_finished"`
	EventsDropped       int64   `json:"events_dropped"`         // emitter queue overflow
	EventsWriteFailed   int64   `json:"events_write_failed"`    // written in a batch whose write failed
	StepsDropped        int64   `json:"steps_dropped"`          // step records not carried
	PrefixQueries       int64   `json:"prefix_cache_queries"`   // prompt tokens looked up
	PrefixHits          int64   `json:"prefix_cache_hits"`      // of which found cached
	PrefixEvictions     int64   `json:"prefix_cache_evictions"` // cached blocks evicted

	// Live gauges at the time of the snapshot.
	Running        int     `json:"running"`
	Waiting        int     `json:"waiting"`
	Slots          int     `json:"slots"`
	KVCacheUsage   float64 `json:"kv_cache_usage"` // 0..1
	KVBlocksUsed   int     `json:"kv_blocks_used"`
	KVBlocksTotal  int     `json:"kv_blocks_total"`
	KVBlocksCached int     `json:"kv_blocks_cached"` // held by the prefix cache

	// Steps are the engine steps since the previous snapshot (not cumulative).
	Steps []StepRecord `json:"steps"`
}

// Engine is a cumulative engine snapshot, sent every interval and at shutdown.
type Engine struct {
	Header
	EngineBody
}

// Event is the union of all kinds, for decoding a line in one pass: the
// Header says which body is meaningful. The JSON keys of the bodies are
// disjoint (a test keeps them so).
type Event struct {
	Header
	HelloBody
	RequestBody
	EngineBody
	TotalsBody
}

// MLCRequestMetrics is MLC-LLM's RequestMetrics JSON, key for key. Note that
// MLC's inter_token_latency_s is end_to_end_latency_s / completion_tokens, not
// picometer's inter-token latency histogram (one observation per emitting
// step).
type MLCRequestMetrics struct {
	PromptTokens       int64   `json:"prompt_tokens"`
	CompletionTokens   int64   `json:"completion_tokens"`
	PrefillTokens      int64   `json:"prefill_tokens"`
	DecodeTokens       int64   `json:"decode_tokens"`
	JumpForwardTokens  int64   `json:"jump_forward_tokens"`
	PrefillTokensPerS  float64 `json:"prefill_tokens_per_s,omitempty"` // omitted when prefill_tokens is 0
	DecodeTokensPerS   float64 `json:"decode_tokens_per_s,omitempty"`  // omitted when decode_tokens is 0
	EndToEndLatencyS   float64 `json:"end_to_end_latency_s"`
	TTFTS              float64 `json:"ttft_s"`
	InterTokenLatencyS float64 `json:"inter_token_latency_s"`
}
