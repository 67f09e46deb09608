package native

// This file: engine_test.go (TestSnapshot and the metric tests) covers it;
// daemon/events_test.go checks its conversion to the wire.

// Snapshot is the engine's cumulative metrics since it was opened, its live
// gauges, and the step records since the previous snapshot: raw facts in
// the engine's own terms. The daemon turns it into a wire event (MLC-LLM's
// EngineMetrics shape, schema.EngineBody); native/ knows nothing of the
// wire.
//
// Units and definitions: time sums are seconds. EngineDecodeTimeSum is all
// time spent producing decode tokens — decode, draft and verify steps, as
// in MLC-LLM — and EngineDraftTimeSum/EngineVerifyTimeSum are its
// speculative parts. Decode/Draft/VerifyTimeByBatchSize are MLC's TimeCost:
// the first step of each batch size is discarded as warm-up (as MLC does),
// so Count is one less than the steps of that size that ran. Prompt and
// completion token sums grow when a request finishes (aborted ones
// included); prefill and decode token sums grow every step.
type Snapshot struct {
	EnginePrefillTimeSum float64
	EngineDecodeTimeSum  float64
	EngineDraftTimeSum   float64
	EngineVerifyTimeSum  float64
	PromptTokensSum      int64
	CompletionTokensSum  int64
	PrefillTokensSum     int64
	DecodeTokensSum      int64
	Preemptions          int64
	RequestsFinished     int64
	StepsDropped         int64 // step records the ring could not keep

	// Grammar masks (constrained decoding): MaskTimeSum is the time spent
	// computing them (seconds), MaskCount how many were computed (one per
	// constrained token sampled); MaskCacheHits and MaskCacheMisses count
	// lookups of the per-vocabulary mask cache (a miss walks the token
	// index once for that grammar position).
	MaskTimeSum     float64
	MaskCount       int64
	MaskCacheHits   int64
	MaskCacheMisses int64

	// LastFinished is the last request that finished, when HasLastFinished
	// (its EmitNS is nil).
	LastFinished    RequestStats
	HasLastFinished bool

	// SpecDecode is nil when speculation is off (SpecK 0).
	SpecDecode *SpecDecode

	// Indexed by batch size (index 0 unused), up to BMax.
	DecodeTimeByBatchSize []TimeCost
	DraftTimeByBatchSize  []TimeCost
	VerifyTimeByBatchSize []TimeCost

	// Live gauges.
	Running       int
	Waiting       int
	Slots         int
	KVBlocksUsed  int
	KVBlocksTotal int

	// Steps are the engine steps since the previous snapshot.
	Steps []StepRecord
}

// TimeCost is the count and sum (seconds) of step times for one batch
// size, excluding the warm-up step.
type TimeCost struct {
	Count int64
	Sum   float64
}

// SpecDecode counts draft tokens proposed and accepted per draft position
// (length SpecK), cumulative.
type SpecDecode struct {
	DraftCount  []int64
	AcceptCount []int64
}

// StepRecord is one engine step.
type StepRecord struct {
	Phase      string // PhasePrefill, PhaseDecode, PhaseDraft or PhaseVerify
	BatchSize  int    // requests in the step
	Tokens     int    // rows of the forward pass
	DurationUS int64  // wall time of the step
}

// Step phases (the values of schema's phase attribute).
const (
	PhasePrefill = "prefill"
	PhaseDecode  = "decode"
	PhaseDraft   = "draft"
	PhaseVerify  = "verify"
)
