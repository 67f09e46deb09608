package schema

// This file: family_test.go and naming_test.go cover it (the table: names
// derived, units, labels, buckets).

// Family IDs. Code refers to families by these constants through [Lookup].
const (
	IDTTFT                   = "ttft"
	IDTimePerOutputToken     = "time_per_output_token"
	IDRequestDuration        = "request_duration"
	IDInterTokenLatency      = "inter_token_latency"
	IDQueueDuration          = "queue_duration"
	IDPrefillDuration        = "prefill_duration"
	IDDecodeDuration         = "decode_duration"
	IDPromptTokens           = "prompt_tokens"
	IDGenerationTokens       = "generation_tokens"
	IDRequestPromptLength    = "request_prompt_length"
	IDRequestGenLength       = "request_generation_length"
	IDRequestsFinished       = "requests_finished"
	IDRequestsFailed         = "requests_failed"
	IDPreemptions            = "preemptions"
	IDPrefixQueries          = "prefix_cache_queries"
	IDPrefixHits             = "prefix_cache_hits"
	IDPrefixEvictions        = "prefix_cache_evictions"
	IDKVBlocksCached         = "kv_blocks_cached"
	IDRequestsRunning        = "requests_running"
	IDRequestsWaiting        = "requests_waiting"
	IDKVCacheUsage           = "kv_cache_usage"
	IDSlots                  = "slots"
	IDEngineInfo             = "engine_info"
	IDStepDuration           = "step_duration"
	IDStepTokens             = "step_tokens"
	IDStepBatchSize          = "step_batch_size"
	IDBatchTime              = "batch_time"
	IDBatchSteps             = "batch_steps"
	IDSpecDrafts             = "spec_drafts"
	IDSpecDraftTokens        = "spec_draft_tokens"
	IDSpecAcceptedTokens     = "spec_accepted_tokens"
	IDDaemonEventsDropped    = "daemon_events_dropped"
	IDSidecarEvents          = "sidecar_events"
	IDSidecarDecodeErrors    = "sidecar_decode_errors"
	IDSidecarEventsLost      = "sidecar_events_lost"
	IDSidecarEventsRecovered = "sidecar_events_recovered"
	IDSidecarConnections     = "sidecar_connections"
	IDSidecarLastEventAge    = "sidecar_last_event_age"
	IDSidecarExportFailure   = "sidecar_otlp_export_failures"
	IDSidecarHeartbeat       = "sidecar_heartbeat"
	IDSidecarSpansLost       = "sidecar_spans_lost"
	IDConstraintRequests     = "constraint_requests"
	IDConstraintCompile      = "constraint_compile"
	IDConstraintMask         = "constraint_mask"
	IDToolCalls              = "tool_calls"
)

// Families is the metric table: every family picometer exports, once.
// Add a family by appending a declaration; names, labels and METRICS.md follow.
var Families = []*Family{
	// ---- request latency -------------------------------------------------
	{
		ID: IDTTFT, Name: "gen_ai.server.time_to_first_token", Unit: "s", Kind: KindHistogram,
		Help:    "Time from the request's HTTP arrival until its first output token leaves the engine (includes queueing and prefill), by how much of the prompt the prefix cache served (cache: hit, partial, miss).",
		Attrs:   []*Attr{AttrModel, AttrEngine, AttrOperation, AttrCache},
		Buckets: TTFTBuckets, Source: SourceRequest,
	},
	{
		ID: IDTimePerOutputToken, Name: "gen_ai.server.time_per_output_token", Unit: "s", Kind: KindHistogram,
		Help:    "Per request, (last token time - first token time) / (output tokens - 1); requests with fewer than two output tokens are not observed.",
		Attrs:   []*Attr{AttrModel, AttrEngine, AttrOperation},
		Buckets: TokenLatencyBuckets, Source: SourceRequest,
	},
	{
		ID: IDRequestDuration, Name: "gen_ai.server.request.duration", Unit: "s", Kind: KindHistogram,
		Help:     "Time from the request's HTTP arrival until it finished, successfully or not (error.type is set on failures and aborts).",
		Attrs:    []*Attr{AttrModel, AttrEngine, AttrOperation},
		Optional: []*Attr{AttrErrorType},
		Buckets:  RequestPhaseBuckets, Source: SourceRequest,
	},
	{
		ID: IDInterTokenLatency, Name: "picometer.request.inter_token_latency", Unit: "s", Kind: KindHistogram,
		Help:    "Gap between consecutive engine steps that emitted tokens for a request; one observation per emitting step after the first token.",
		Attrs:   []*Attr{AttrModel, AttrEngine, AttrOperation},
		Buckets: TokenLatencyBuckets, Source: SourceRequest,
	},
	{
		ID: IDQueueDuration, Name: "picometer.request.queue.duration", Unit: "s", Kind: KindHistogram,
		Help:    "Time a request waited between HTTP arrival and admission into an engine slot.",
		Attrs:   []*Attr{AttrModel, AttrEngine, AttrOperation},
		Buckets: RequestPhaseBuckets, Source: SourceRequest,
	},
	{
		ID: IDPrefillDuration, Name: "picometer.request.prefill.duration", Unit: "s", Kind: KindHistogram,
		Help:    "Time from admission into an engine slot until the first output token (prompt prefill).",
		Attrs:   []*Attr{AttrModel, AttrEngine, AttrOperation},
		Buckets: RequestPhaseBuckets, Source: SourceRequest,
	},
	{
		ID: IDDecodeDuration, Name: "picometer.request.decode.duration", Unit: "s", Kind: KindHistogram,
		Help:    "Time from a request's first output token until it finished.",
		Attrs:   []*Attr{AttrModel, AttrEngine, AttrOperation},
		Buckets: RequestPhaseBuckets, Source: SourceRequest,
	},

	// ---- tokens -------------------------------------------------------------
	{
		ID: IDPromptTokens, Name: "picometer.prompt.tokens", Unit: "{token}", Kind: KindCounter,
		Help:   "Prompt tokens of finished requests.",
		Attrs:  []*Attr{AttrModel, AttrEngine, AttrOperation},
		Source: SourceRequest,
	},
	{
		ID: IDGenerationTokens, Name: "picometer.generation.tokens", Unit: "{token}", Kind: KindCounter,
		Help:   "Output tokens of finished requests (including aborted ones).",
		Attrs:  []*Attr{AttrModel, AttrEngine, AttrOperation},
		Source: SourceRequest,
	},
	{
		ID: IDRequestPromptLength, Name: "picometer.request.prompt_tokens", Unit: "{token}", Kind: KindHistogram,
		Help:    "Prompt length of each finished request.",
		Attrs:   []*Attr{AttrModel, AttrEngine, AttrOperation},
		Buckets: LengthBuckets, Source: SourceRequest,
	},
	{
		ID: IDRequestGenLength, Name: "picometer.request.generation_tokens", Unit: "{token}", Kind: KindHistogram,
		Help:    "Output length of each finished request.",
		Attrs:   []*Attr{AttrModel, AttrEngine, AttrOperation},
		Buckets: LengthBuckets, Source: SourceRequest,
	},

	// ---- outcomes -----------------------------------------------------------
	{
		ID: IDRequestsFinished, Name: "picometer.requests.finished", Unit: "{request}", Kind: KindCounter,
		Help:   "Finished requests by finish reason (stop, length, abort, error).",
		Attrs:  []*Attr{AttrModel, AttrEngine, AttrOperation, AttrFinishReason},
		Source: SourceRequest,
	},
	{
		ID: IDRequestsFailed, Name: "picometer.requests.failed", Unit: "{request}", Kind: KindCounter,
		Help:   "Requests that failed or were aborted, by error type.",
		Attrs:  []*Attr{AttrModel, AttrEngine, AttrOperation, AttrErrorType},
		Source: SourceRequest,
	},

	// ---- constrained decoding and tool calls (issue 26) -----------------
	{
		ID: IDConstraintRequests, Name: "picometer.constraint.requests", Unit: "{request}", Kind: KindCounter,
		Help:   "Requests whose output was constrained, by constraint kind (json_schema, json_object, regex, choice, grammar, tools) and outcome: valid (the output completed the grammar), length (cut by max_tokens or the context first), rejected (the constraint was refused, or no token could continue it), aborted.",
		Attrs:  []*Attr{AttrModel, AttrEngine, AttrConstraint, AttrOutcome},
		Source: SourceRequest,
	},
	{
		ID: IDConstraintCompile, Name: "picometer.constraint.compile.duration", Unit: "s", Kind: KindHistogram,
		Help:    "Time compiling a request's grammar, by constraint kind; requests whose grammar was cached are not observed.",
		Attrs:   []*Attr{AttrModel, AttrEngine, AttrConstraint},
		Buckets: StepDurationBuckets, Source: SourceRequest,
	},
	{
		ID: IDConstraintMask, Name: "picometer.constraint.mask.duration", Unit: "s", Kind: KindHistogram,
		Help:    "Per constrained request, the engine's time computing token masks divided by the tokens sampled under a mask: the mean mask time per step.",
		Attrs:   []*Attr{AttrModel, AttrEngine},
		Buckets: MaskBuckets, Source: SourceRequest,
	},
	{
		ID: IDToolCalls, Name: "picometer.tool_calls", Unit: "{call}", Kind: KindCounter,
		Help:   "Tool calls parsed from answers, by the model's tool-call format.",
		Attrs:  []*Attr{AttrModel, AttrEngine, AttrToolFormat},
		Source: SourceRequest,
	},
	{
		ID: IDPreemptions, Name: "picometer.engine.preemptions", Unit: "{request}", Kind: KindCounter,
		Help:   "Requests evicted from their slot because the KV cache ran out of blocks (they are recomputed later).",
		Attrs:  []*Attr{AttrModel, AttrEngine},
		Source: SourceEngine,
	},
	{
		ID: IDPrefixQueries, Name: "picometer.engine.prefix_cache.queries", Unit: "{token}", Kind: KindCounter,
		Help:   "Prompt tokens looked up in the prefix cache, at every admission (a recomputation after preemption too); 0 with engine.prefix_caching off. Hit ratio: rate(hits) / rate(queries).",
		Attrs:  []*Attr{AttrModel, AttrEngine},
		Source: SourceEngine,
	},
	{
		ID: IDPrefixHits, Name: "picometer.engine.prefix_cache.hits", Unit: "{token}", Kind: KindCounter,
		Help:   "Prompt tokens found in the prefix cache (their KV reused, not recomputed), counted like queries.",
		Attrs:  []*Attr{AttrModel, AttrEngine},
		Source: SourceEngine,
	},
	{
		ID: IDPrefixEvictions, Name: "picometer.engine.prefix_cache.evictions", Unit: "{block}", Kind: KindCounter,
		Help:   "Cached KV blocks evicted from the prefix cache (least recently used first) to make room for new ones.",
		Attrs:  []*Attr{AttrModel, AttrEngine},
		Source: SourceEngine,
	},

	// ---- scheduler state ----------------------------------------------------
	{
		ID: IDRequestsRunning, Name: "picometer.engine.requests.running", Unit: "{request}", Kind: KindGauge,
		Help:   "Requests holding an engine slot at the last snapshot.",
		Attrs:  []*Attr{AttrModel, AttrEngine},
		Source: SourceEngine,
	},
	{
		ID: IDRequestsWaiting, Name: "picometer.engine.requests.waiting", Unit: "{request}", Kind: KindGauge,
		Help:   "Requests waiting for an engine slot at the last snapshot.",
		Attrs:  []*Attr{AttrModel, AttrEngine},
		Source: SourceEngine,
	},
	{
		ID: IDKVCacheUsage, Name: "picometer.engine.kv_cache.usage", Unit: "1", Kind: KindGauge,
		Help:   "Fraction of KV-cache blocks in use at the last snapshot (0 to 1).",
		Attrs:  []*Attr{AttrModel, AttrEngine},
		Source: SourceEngine,
	},
	{
		ID: IDKVBlocksCached, Name: "picometer.engine.prefix_cache.blocks", Unit: "{block}", Kind: KindGauge,
		Help:   "KV blocks the prefix cache holds (in use by a request or free for reuse) at the last snapshot.",
		Attrs:  []*Attr{AttrModel, AttrEngine},
		Source: SourceEngine,
	},
	{
		ID: IDSlots, Name: "picometer.engine.slots", Unit: "{slot}", Kind: KindGauge,
		Help:   "Engine slots (B_max): the most requests decoded in one batch.",
		Attrs:  []*Attr{AttrModel, AttrEngine},
		Source: SourceEngine,
	},
	{
		ID: IDEngineInfo, Name: "picometer.engine.info", Unit: "", Kind: KindInfo,
		Help:   "Engine configuration; the value is always 1.",
		Attrs:  []*Attr{AttrModel, AttrEngine, AttrBMax, AttrContextLength, AttrBlockSize, AttrSpecK, AttrVersion},
		Source: SourceEngine,
	},

	// ---- engine steps -------------------------------------------------------
	{
		ID: IDStepDuration, Name: "picometer.engine.step.duration", Unit: "s", Kind: KindHistogram,
		Help:    "Duration of engine steps by phase (prefill chunk, decode, draft lookup, verify forward).",
		Attrs:   []*Attr{AttrModel, AttrEngine, AttrPhase},
		Buckets: StepDurationBuckets, Source: SourceSteps,
	},
	{
		ID: IDStepTokens, Name: "picometer.engine.step.tokens", Unit: "{token}", Kind: KindHistogram,
		Help:    "Tokens processed by one engine step (the rows of its forward pass), by phase.",
		Attrs:   []*Attr{AttrModel, AttrEngine, AttrPhase},
		Buckets: StepTokenBuckets, Source: SourceSteps,
	},
	{
		ID: IDStepBatchSize, Name: "picometer.engine.step.batch_size", Unit: "{request}", Kind: KindHistogram,
		Help:    "Requests in one engine step's batch, by phase; sum/count is the mean batch occupancy.",
		Attrs:   []*Attr{AttrModel, AttrEngine, AttrPhase},
		Buckets: BatchSizeBuckets, Source: SourceSteps,
	},
	{
		ID: IDBatchTime, Name: "picometer.engine.batch.time", Unit: "s", Kind: KindCounter,
		Help:   "MLC-LLM TimeCost sum: step time by phase and batch size (the first step of each batch size is discarded as warm-up).",
		Attrs:  []*Attr{AttrModel, AttrEngine, AttrBatchPhase, AttrBatchSize},
		Source: SourceEngine,
	},
	{
		ID: IDBatchSteps, Name: "picometer.engine.batch.steps", Unit: "{step}", Kind: KindCounter,
		Help:   "MLC-LLM TimeCost count: steps by phase and batch size (the first step of each batch size is discarded as warm-up).",
		Attrs:  []*Attr{AttrModel, AttrEngine, AttrBatchPhase, AttrBatchSize},
		Source: SourceEngine,
	},

	// ---- speculative decoding -----------------------------------------------
	{
		ID: IDSpecDrafts, Name: "picometer.spec_decode.drafts", Unit: "{draft}", Kind: KindCounter,
		Help:   "Speculative drafts proposed (one per request per verify step that drafted at least one token).",
		Attrs:  []*Attr{AttrModel, AttrEngine},
		Source: SourceEngine,
	},
	{
		ID: IDSpecDraftTokens, Name: "picometer.spec_decode.draft_tokens", Unit: "{token}", Kind: KindCounter,
		Help:   "Draft tokens proposed, by position within the draft (MLC-LLM draft_count).",
		Attrs:  []*Attr{AttrModel, AttrEngine, AttrPosition},
		Source: SourceEngine,
	},
	{
		ID: IDSpecAcceptedTokens, Name: "picometer.spec_decode.accepted_tokens", Unit: "{token}", Kind: KindCounter,
		Help:   "Draft tokens accepted by verification, by position within the draft (MLC-LLM accept_count).",
		Attrs:  []*Attr{AttrModel, AttrEngine, AttrPosition},
		Source: SourceEngine,
	},

	// ---- daemon emitter -----------------------------------------------------
	{
		ID: IDDaemonEventsDropped, Name: "picometer.daemon.events.dropped", Unit: "{event}", Kind: KindCounter,
		Help:   "Events or step records the daemon dropped instead of blocking (reported in its engine snapshots).",
		Attrs:  []*Attr{AttrModel, AttrEngine, AttrDropReason},
		Source: SourceEngine,
	},

	// ---- sidecar self-metrics -----------------------------------------------
	{
		ID: IDSidecarEvents, Name: "picometer.sidecar.events", Unit: "{event}", Kind: KindCounter,
		Help:   "Events the sidecar decoded and applied, by kind.",
		Attrs:  []*Attr{AttrEventKind},
		Source: SourceSidecar,
	},
	{
		ID: IDSidecarDecodeErrors, Name: "picometer.sidecar.decode_errors", Unit: "{event}", Kind: KindCounter,
		Help:   "Socket lines the sidecar rejected, by reason.",
		Attrs:  []*Attr{AttrDecodeReason},
		Source: SourceSidecar,
	},
	{
		ID: IDSidecarEventsLost, Name: "picometer.sidecar.events.lost", Unit: "{event}", Kind: KindCounter,
		Help:   "Events missing from a daemon's sequence numbers (gaps), i.e. lost between the daemon and the sidecar.",
		Attrs:  []*Attr{AttrModel, AttrEngine},
		Source: SourceSidecar,
	},
	{
		ID: IDSidecarEventsRecovered, Name: "picometer.sidecar.events.recovered", Unit: "{event}", Kind: KindCounter,
		Help: "Request events the sidecar did not receive (lost in transit, dropped by the daemon, or sent to an earlier sidecar) " +
			"whose counts it took from the daemon's cumulative totals instead.",
		Attrs:  []*Attr{AttrModel, AttrEngine},
		Source: SourceSidecar,
	},
	{
		ID: IDSidecarConnections, Name: "picometer.sidecar.connections", Unit: "{connection}", Kind: KindUpDownCounter,
		Help:   "Daemon connections currently open on the sidecar's socket.",
		Source: SourceSidecar,
	},
	{
		ID: IDSidecarLastEventAge, Name: "picometer.sidecar.last_event.age", Unit: "s", Kind: KindGauge,
		Help:   "Seconds since the sidecar last received an event from a daemon.",
		Attrs:  []*Attr{AttrModel, AttrEngine},
		Source: SourceSidecar,
	},
	{
		ID: IDSidecarExportFailure, Name: "picometer.sidecar.otlp.export.failures", Unit: "{export}", Kind: KindCounter,
		Help:   "OTLP exports that failed (the data of a failed export is retried by the next export, cumulatively).",
		Source: SourceSidecar,
	},
	{
		ID: IDSidecarSpansLost, Name: "picometer.sidecar.spans.lost", Unit: "{request}", Kind: KindCounter,
		Help: "Requests whose span the sidecar could not export, by reason: not_received (known only from the daemon's totals, " +
			"which cannot rebuild a span; sampled or not), queue_full, export_failed. Only counted while tracing is on.",
		Attrs:  []*Attr{AttrSpanLossReason},
		Source: SourceSidecar,
	},
	{
		ID: IDSidecarHeartbeat, Name: "picometer.sidecar.heartbeat", Unit: "s", Kind: KindGauge,
		Help:   "Unix time at which the sidecar produced this sample (a scrape or an OTLP export): liveness whether it is scraped or pushes.",
		Source: SourceSidecar,
	},
}
