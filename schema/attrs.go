package schema

import (
	"path"
	"strconv"
	"strings"
)

// This file: family_test.go covers it (closed value sets, the attributes of
// every family).

// Finish reasons of a request (the finish_reason attribute and the
// finish_reason field of request events).
const (
	FinishStop   = "stop"   // EOS, a stop token or a stop string
	FinishLength = "length" // max_tokens or the context limit
	FinishAbort  = "abort"  // cancelled: client disconnect, deadline, shutdown
	FinishError  = "error"  // failed: rejected input or an engine failure
)

// FinishReasons is the closed set of finish reasons.
var FinishReasons = []string{FinishStop, FinishLength, FinishAbort, FinishError}

// Error types (the error.type attribute and the error_type field of request
// events). A request that finished normally has none. The list maps onto the
// daemon's HTTP errors; "_OTHER" is the OpenTelemetry fallback.
const (
	ErrInvalidRequest   = "invalid_request"    // 400: malformed or unsupported input
	ErrUnauthorized     = "unauthorized"       // 401: missing or wrong API key
	ErrNotFound         = "not_found"          // 404: unknown route or model
	ErrMethodNotAllowed = "method_not_allowed" // 405
	ErrPayloadTooLarge  = "payload_too_large"  // 413: body over the limit
	ErrQueueFull        = "queue_full"         // 429/503: waiting queue full
	ErrTimeout          = "timeout"            // the request's deadline passed (finish_reason abort)
	ErrCancelled        = "cancelled"          // the client went away (finish_reason abort)
	ErrShutdown         = "shutdown"           // aborted by a daemon shutdown (finish_reason abort)
	ErrEngine           = "engine_error"       // 500: the engine failed
	ErrOther            = "_OTHER"             // anything else
)

// ErrorTypes is the closed set of error types.
var ErrorTypes = []string{
	ErrInvalidRequest, ErrUnauthorized, ErrNotFound, ErrMethodNotAllowed,
	ErrPayloadTooLarge, ErrQueueFull, ErrTimeout, ErrCancelled, ErrShutdown,
	ErrEngine, ErrOther,
}

// Constraint kinds (the constraint attribute and the constraint field of
// request events): what a request held its output to (issue 26).
const (
	ConstraintJSONSchema = "json_schema" // a JSON schema (response_format, text.format, guided_json, json_schema, format)
	ConstraintJSONObject = "json_object" // JSON mode: any object
	ConstraintRegex      = "regex"       // guided_regex, regex
	ConstraintChoice     = "choice"      // guided_choice
	ConstraintGrammar    = "grammar"     // a GBNF grammar (grammar, guided_grammar)
	ConstraintTools      = "tools"       // tool calls in the model's format
)

// Constraints is the closed set of constraint kinds.
var Constraints = []string{ConstraintJSONSchema, ConstraintJSONObject, ConstraintRegex, ConstraintChoice, ConstraintGrammar, ConstraintTools}

// Constraint outcomes (the outcome attribute): valid, the output is a
// whole sentence of its grammar; length, it was cut by max_tokens or the
// context first; rejected, the request was refused (a constraint that
// does not translate or compile) or no token could continue it.
const (
	OutcomeValid    = "valid"
	OutcomeLength   = "length"
	OutcomeRejected = "rejected"
	OutcomeAborted  = "aborted" // cancelled (client gone, deadline, shutdown) before it completed
)

// ConstraintOutcomes is the closed set of constraint outcomes.
var ConstraintOutcomes = []string{OutcomeValid, OutcomeLength, OutcomeRejected, OutcomeAborted}

// Grammar states of a constrained request when it finished (the grammar
// field of request events; the engine's native.Grammar* values).
const (
	GrammarComplete   = "complete"   // the output is a whole sentence of the grammar
	GrammarIncomplete = "incomplete" // it ended (length, abort) before the grammar could end
	GrammarDead       = "dead_end"   // no token could continue it
)

// GrammarStates is the closed set of grammar states.
var GrammarStates = []string{GrammarComplete, GrammarIncomplete, GrammarDead}

// Tool-call formats (the tool_format attribute; package constraint's
// ToolFormat values).
var ToolFormats = []string{"picometer", "hermes", "llama3_json", "mistral", "mistral_args"}

// ConstraintOutcome is the outcome of a request event's constraint ("" for
// an unconstrained request): rejected when the request failed before
// running (error) or no token could continue the grammar, valid when the
// output completed the grammar, length when max_tokens or the context cut
// it, aborted otherwise.
func ConstraintOutcome(b *RequestBody) string {
	switch {
	case b.Constraint == "":
		return ""
	case b.FinishReason == FinishError || b.Grammar == GrammarDead:
		return OutcomeRejected
	case b.Grammar == GrammarComplete:
		return OutcomeValid
	case b.FinishReason == FinishLength:
		return OutcomeLength
	}
	return OutcomeAborted
}

// Prefix-cache outcomes of a request (the cache attribute of the time to
// first token, issue 27): how much of its prompt's K/V the engine's prefix
// cache served at the request's first admission.
const (
	// CacheHit: everything a block-granular cache could serve was served.
	// The cache reuses whole blocks and never the last prompt token (whose
	// logits the prefill computes), so at most the block holding the last
	// prompt token is recomputed: prompt_tokens - cached_tokens <=
	// block_size, with cached_tokens > 0.
	CacheHit = "hit"
	// CachePartial: some of the prompt came from the cache, and more than
	// one block of it was recomputed (a conversation's new turn, a shared
	// system prompt before a new document).
	CachePartial = "partial"
	// CacheMiss: nothing came from the cache (cached_tokens 0), also when
	// caching is off (engine.prefix_caching = false) or the prompt is too
	// short to fill a block before its last token.
	CacheMiss = "miss"
)

// CacheOutcomes is the closed set of prefix-cache outcomes.
var CacheOutcomes = []string{CacheHit, CachePartial, CacheMiss}

// CacheOutcome is the prefix-cache outcome of a request event for an engine
// whose KV-cache blocks hold blockSize tokens (the hello event's
// config.block_size; a size below 1 counts as 1, so only a prompt cached up
// to its last token is a hit). It is the one rule, in the daemon's totals
// and in the sidecar alike.
func CacheOutcome(r *RequestBody, blockSize int) string {
	switch {
	case r.CachedTokens <= 0:
		return CacheMiss
	case r.PromptTokens-r.CachedTokens <= max(blockSize, 1):
		return CacheHit
	}
	return CachePartial
}

// Operation names (gen_ai.operation.name).
const (
	OpChat           = "chat"            // POST /v1/chat/completions
	OpTextCompletion = "text_completion" // POST /v1/completions
)

// Engine phases (the phase attribute and step records).
const (
	PhasePrefill = "prefill"
	PhaseDecode  = "decode"
	PhaseDraft   = "draft"
	PhaseVerify  = "verify"
)

// Event kinds on the socket.
const (
	KindHello   = "hello"
	KindRequest = "request"
	KindEngine  = "engine"
)

// Decode error reasons (the reason attribute of the sidecar's decode errors).
const (
	ReasonMalformed          = "malformed_json"       // not JSON, or a field of the wrong type
	ReasonUnsupportedVersion = "unsupported_version"  // v is not a version this build reads (closes the connection)
	ReasonUnknownKind        = "unknown_kind"         // kind is not hello, request, engine or totals
	ReasonInvalidField       = "invalid_field"        // a field is missing or out of range
	ReasonLineTooLong        = "line_too_long"        // a line exceeded the limit (closes the connection)
	ReasonNoHello            = "no_hello"             // an event arrived before the connection's hello
	ReasonStaleSeq           = "stale_seq"            // seq is not after the last one seen on the connection (duplicate or replay); skipped
	ReasonBootInUse          = "boot_in_use"          // a hello claimed a boot id another connection holds (closes the connection)
	ReasonTooManyTargets     = "too_many_targets"     // a hello would pass the sidecar's cap on targets (closes the connection)
	ReasonTooManyConnections = "too_many_connections" // a connection past the sidecar's cap (closed before reading)
	ReasonBufferFull         = "buffer_full"          // a partial line needs more buffer than the connections' shared budget leaves (closes the connection)
	ReasonPeerNotAllowed     = "peer_not_allowed"     // the connecting process's uid and gid are not allowed (SO_PEERCRED; closed before reading)
)

// DecodeReasons is the closed set of decode error reasons.
var DecodeReasons = []string{
	ReasonMalformed, ReasonUnsupportedVersion, ReasonUnknownKind,
	ReasonInvalidField, ReasonLineTooLong, ReasonNoHello, ReasonStaleSeq,
	ReasonBootInUse, ReasonTooManyTargets, ReasonTooManyConnections, ReasonBufferFull,
	ReasonPeerNotAllowed,
}

// DefaultSocketPath returns the unix socket the daemon writes events to and
// the sidecar listens on, unless both are configured otherwise, for a
// process of effective uid euid whose environment getenv reads:
// $XDG_RUNTIME_DIR/picometer/metrics.sock when XDG_RUNTIME_DIR is set (an
// absolute path), else /run/picometer/metrics.sock for root, else
// /tmp/picometer-<uid>/metrics.sock. Never a fixed path in a directory
// anyone can write: the sidecar creates the directory with mode 0700 and
// refuses one it does not own (a squatter's).
func DefaultSocketPath(getenv func(string) string, euid int) string {
	if d := getenv("XDG_RUNTIME_DIR"); strings.HasPrefix(d, "/") {
		return path.Join(d, "picometer", "metrics.sock")
	}
	if euid == 0 {
		return "/run/picometer/metrics.sock"
	}
	return "/tmp/picometer-" + strconv.Itoa(euid) + "/metrics.sock"
}

// Daemon-side drop reasons (the reason attribute of dropped events).
const (
	DropQueueFull = "queue_full"   // the emitter's bounded queue was full
	DropStepRing  = "step_ring"    // the engine's step-record ring overflowed between snapshots
	DropWriteFail = "write_failed" // written in a batch whose socket write failed (the sidecar went away)
)

// MaxSpecK is the largest speculative draft length; positions are 0..MaxSpecK-1.
const MaxSpecK = 8

// Why the sidecar lost a request's span (picometer.sidecar.spans.lost).
const (
	// SpanLossNotReceived: the request is known only from the daemon's
	// totals (a sidecar restart, an event lost or dropped on the way), which
	// carry no ids or moments to build a span from.
	SpanLossNotReceived = "not_received"
	// SpanLossQueueFull: the span export queue was full.
	SpanLossQueueFull = "queue_full"
	// SpanLossExportFailed: the OTLP export of its batch failed.
	SpanLossExportFailed = "export_failed"
)

// SpanLossReasons are the values of AttrSpanLossReason.
var SpanLossReasons = []string{SpanLossNotReceived, SpanLossQueueFull, SpanLossExportFailed}

// MaxBatch is the largest number of engine slots; batch sizes are 1..MaxBatch.
const MaxBatch = 64

// Attributes. Model and engine are on every engine and request family.
var (
	AttrModel = &Attr{Key: "gen_ai.request.model",
		Doc: "model name served by the daemon (from its hello event): its model_name, by default the model file's name without .gguf"}
	AttrEngine = &Attr{Key: "engine",
		Doc: "engine identifier configured on the daemon (from its hello event)"}
	AttrOperation = &Attr{Key: "gen_ai.operation.name", Values: []string{OpChat, OpTextCompletion},
		Doc: "OpenAI endpoint: chat completions or completions"}
	AttrConstraint = &Attr{Key: "constraint", Values: Constraints,
		Doc: "what a request held its output to"}
	AttrOutcome = &Attr{Key: "outcome", Values: ConstraintOutcomes,
		Doc: "how a constrained request ended"}
	AttrToolFormat = &Attr{Key: "tool_format", Values: ToolFormats,
		Doc: "the model's tool-call format, read from its chat template"}
	AttrCache = &Attr{Key: "cache", Values: CacheOutcomes,
		Doc: "how much of the prompt the prefix cache served: hit (all but at most the block holding the last prompt token: prompt_tokens - cached_tokens <= block_size), partial (some, and more than a block recomputed), miss (none; also with caching off)"}
	AttrFinishReason = &Attr{Key: "finish_reason", Values: FinishReasons,
		Doc: "why the request finished"}
	AttrErrorType = &Attr{Key: "error.type", Values: ErrorTypes,
		Doc: "why the request failed or was aborted"}
	AttrPhase = &Attr{Key: "phase", Values: []string{PhasePrefill, PhaseDecode, PhaseDraft, PhaseVerify},
		Doc: "engine step phase"}
	AttrBatchPhase = &Attr{Key: "phase", Values: []string{PhaseDecode, PhaseDraft, PhaseVerify},
		Doc: "engine step phase tracked by batch size (MLC-LLM's decode, draft and verify)"}
	AttrBatchSize = &Attr{Key: "batch_size", Values: numbers(1, MaxBatch),
		Doc: "requests in the step's batch"}
	AttrPosition = &Attr{Key: "position", Values: numbers(0, MaxSpecK-1),
		Doc: "index of the draft token within a speculative draft"}
	AttrEventKind = &Attr{Key: "kind", Values: []string{KindHello, KindRequest, KindEngine, KindTotals},
		Doc: "event kind"}
	AttrDecodeReason = &Attr{Key: "reason", Values: DecodeReasons,
		Doc: "why a line was rejected"}
	AttrDropReason = &Attr{Key: "reason", Values: []string{DropQueueFull, DropStepRing, DropWriteFail},
		Doc: "where the daemon dropped events"}
	AttrSpanLossReason = &Attr{Key: "reason", Values: SpanLossReasons,
		Doc: "why a request's span was lost"}

	// Info attributes: the engine's configuration, as decimal numbers.
	AttrBMax          = &Attr{Key: "b_max", Doc: "engine slots (B_max), from the hello event"}
	AttrContextLength = &Attr{Key: "context_length", Doc: "model context length in tokens, from the hello event"}
	AttrBlockSize     = &Attr{Key: "block_size", Doc: "KV-cache block size in tokens, from the hello event"}
	AttrSpecK         = &Attr{Key: "spec_k", Doc: "speculative draft length (0 = off), from the hello event"}
	AttrVersion       = &Attr{Key: "version", Doc: "picometerd version, from the hello event"}
)

func numbers(lo, hi int) []string {
	out := make([]string, 0, hi-lo+1)
	for i := lo; i <= hi; i++ {
		out = append(out, strconv.Itoa(i))
	}
	return out
}
