package native

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	_ "unsafe" // go:linkname
)

// Limits of the engine (engine.h PM_MAX_BATCH, PM_MAX_SPEC_K; engine_cgo.go
// checks them at compile time). MaxBatch and MaxSpecK are the
// same numbers on the wire; a daemon test keeps them equal.
const (
	MaxBatch = 64 // largest BMax
	MaxSpecK = 8  // largest SpecK
	// MaxSpecNgram is the longest n-gram the draft lookup matches, the
	// largest SpecNgramMin.
	MaxSpecNgram = 8
)

// Config configures an engine. Start from [DefaultConfig]; [Config.Validate]
// says what is out of range.
type Config struct {
	// BMax is the number of slots sharing the KV cache: the most requests
	// decoded in one batch. Default 8, 1..MaxBatch.
	BMax int
	// SpecK is the n-gram speculative draft length; 0 turns speculation off.
	// Default 4, 0..MaxSpecK.
	SpecK int
	// SpecNgramMin is the shortest n-gram match (the request's last tokens
	// seen earlier in its prompt or output) that proposes a draft; longer
	// matches are preferred up to 8 tokens. 0 means the default, 3
	// (docs/SPECULATIVE.md); otherwise 1..8.
	SpecNgramMin int
	// PrefillChunk is the most prompt tokens one slot prefills per step, so a
	// long prompt stalls the decoding of others for at most one chunk.
	// Default 64.
	PrefillChunk int
	// BlockSize is the KV-cache block size in tokens. Default 16.
	BlockSize int
	// KVBlocks is the number of KV-cache blocks shared by all slots. 0 (the
	// default) means BMax*ceil(context/BlockSize): every slot can always
	// reach the context limit and nothing is ever preempted. Fewer blocks
	// save memory; a slot that cannot get a block then preempts the most
	// recently admitted request, which is recomputed later.
	KVBlocks int
	// MaxWaiting bounds the waiting queue (requests submitted while every
	// slot is taken). Submit returns ErrQueueFull beyond it; 0 means no
	// queue: a request is admitted at once or refused. Default 256.
	MaxWaiting int
	// Threads is the number of compute threads (decode, batched decode and
	// prefill). Default: the online CPUs (runtime.NumCPU), at most 64.
	Threads int
	// StepRing is how many step records are kept between two snapshots;
	// older ones are dropped and counted (steps_dropped). Default 4096.
	StepRing int
	// NoMetrics turns metric recording off. It exists only so a benchmark
	// can measure what recording costs; the default (false) records.
	NoMetrics bool
	// Kernel selects the instruction-set path of every kernel (float
	// tiles, attention, integer products): "auto" (default: the fastest
	// path measured end to end that the CPU runs: "avx512vnni", else
	// "avx2", else "portable"; on ARM64 "neon"), or one of Kernels by
	// name; Open refuses a path the CPU cannot run, naming it.
	Kernel string
	// Context is the most tokens (prompt plus output) one request holds;
	// the KV cache and the per-request buffers are sized by it, not by the
	// file's training context. 0 (the default) means the model's
	// context_length, at most DefaultContext; otherwise 2..the model's
	// context_length. Engine.Info().ContextLength reports the value in use.
	Context int
	// NoPrefixCache turns prefix caching off. By default (false) full KV
	// blocks are identified by a hash of their tokens chained with the
	// previous block's, shared by requests whose sequences start alike, and
	// kept after use until their space is needed (least recently used
	// first); a request's prefill starts after the longest cached prefix
	// (never covering its last token). Output is the same either way.
	NoPrefixCache bool
}

// DefaultContext is the context an engine uses when Config.Context is 0 and
// the model was trained on a longer one (engine.h PM_DEFAULT_CTX).
const DefaultContext = 4096

// Kernels are the kernel paths Config.Kernel names, most capable first:
// AVX-512 VNNI (512-bit vpdpbusd), AVX-VNNI (256-bit VEX vpdpbusd, no
// AVX-512), AVX2+FMA (maddubs), NEON (AArch64 only: vmull_s8 or vdotq_s32
// integer products, never measured for speed) and portable C. The x86
// paths give bitwise the same results; NEON bitwise portable's; the two
// groups agree closely.
var Kernels = []string{"avx512vnni", "avxvnni", "avx2", "neon", "portable"}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{BMax: 8, SpecK: 4, SpecNgramMin: 3, PrefillChunk: 64, BlockSize: 16, MaxWaiting: 256,
		Threads: min(runtime.NumCPU(), 64), StepRing: 4096, Kernel: "auto"}
}

// Validate returns an error naming the first field out of range.
func (c *Config) Validate() error {
	const maxRing = 1 << 24
	switch {
	case c.BMax < 1 || c.BMax > MaxBatch:
		return fmt.Errorf("b_max: %d not in 1..%d", c.BMax, MaxBatch)
	case c.SpecK < 0 || c.SpecK > MaxSpecK:
		return fmt.Errorf("spec_k: %d not in 0..%d", c.SpecK, MaxSpecK)
	case c.SpecNgramMin < 0 || c.SpecNgramMin > MaxSpecNgram:
		return fmt.Errorf("spec_ngram_min: %d not 0 or in 1..%d", c.SpecNgramMin, MaxSpecNgram)
	case c.PrefillChunk < 1 || c.PrefillChunk > math.MaxInt32:
		return fmt.Errorf("prefill_chunk: %d not in 1..%d", c.PrefillChunk, math.MaxInt32)
	case c.BlockSize < 1 || c.BlockSize > math.MaxInt32:
		return fmt.Errorf("block_size: %d not in 1..%d", c.BlockSize, math.MaxInt32)
	case c.KVBlocks < 0 || c.KVBlocks > math.MaxInt32:
		return fmt.Errorf("kv_blocks: %d not in 0..%d", c.KVBlocks, math.MaxInt32)
	case c.MaxWaiting < 0 || c.MaxWaiting > maxRing:
		return fmt.Errorf("max_waiting: %d not in 0..%d", c.MaxWaiting, maxRing)
	case c.Threads < 1 || c.Threads > 64:
		return fmt.Errorf("threads: %d not in 1..64", c.Threads)
	case c.StepRing < 1 || c.StepRing > maxRing:
		return fmt.Errorf("step_ring: %d not in 1..%d", c.StepRing, maxRing)
	case c.Context != 0 && (c.Context < 2 || c.Context > 1<<22):
		return fmt.Errorf("context: %d not 0 or in 2..%d", c.Context, 1<<22)
	}
	if c.Kernel != "" && c.Kernel != "auto" && !slices.Contains(Kernels, c.Kernel) {
		n := len(Kernels)
		return fmt.Errorf("kernel: %q is not auto, %s or %s", c.Kernel, strings.Join(Kernels[:n-1], ", "), Kernels[n-1])
	}
	return nil
}

// ModelInfo describes the loaded model.
type ModelInfo struct {
	Name    string // general.name
	Arch    string // general.architecture ("llama", "qwen2" or "qwen3")
	Dim     int
	Layers  int
	Heads   int
	KVHeads int
	FFN     int
	Vocab   int
	// ContextLength is the model's context_length as read from the file;
	// for an open engine (Engine.Info) it is the engine's context
	// (Config.Context as resolved), which bounds every request.
	ContextLength int
	BOS, EOS, Pad int32    // -1 when the file names none
	Tokens        []string // tokenizer.ggml.tokens, by id
	ChatTemplate  string   // tokenizer.chat_template ("" if absent)
	Kernel        string   // the kernel path in use: one of Kernels
	// F16PanelBytes (an open engine's Info) is the bytes of F16 matrices
	// the engine repacked into panels of 8 rows, the layout its x86 F16
	// kernels compute with; 0 when it computes in the file's rows
	// (portable, NEON, or no F16 matrix whose rows are whole panels).
	F16PanelBytes int64
	// KX8Bytes (an open engine's Info) is the bytes of Q4_K and Q6_K
	// matrices the engine repacked into tiles of 8 rows, the layout its
	// x86 K-quant kernels compute with; 0 when it computes in the file's
	// rows (portable, NEON).
	KX8Bytes int64
	// Q32X8Bytes (an open engine's Info) is the bytes of Q4_0 matrices
	// the engine repacked into tiles of 8 rows (q32x8.h), the layout its
	// AVX2 and AVX-512 VNNI kernels compute with; 0 on every other path
	// (AVX-VNNI, NEON, portable), which reads the file's rows.
	Q32X8Bytes int64
	// RowCopyBytes (an open engine's Info) is the bytes of the other
	// matrices (Q8_0, Q4_0 on AVX-VNNI, F32, an output left in rows, ...) the engine
	// copied, rows as they are, next to the repacked ones in 2 MiB pages,
	// so decode streams no weight from the file's 4 KiB pages; 0 on the
	// portable and NEON paths.
	RowCopyBytes int64
	// LLCBytes (an open engine's Info) is the last-level cache the engine
	// found (CPU 0's, from Linux's sysfs) and StepWeightBytes the bytes of
	// the matrices one decode step reads; both 0 where unknown or on a
	// path whose kernels do not prefetch (portable, NEON). When
	// StepWeightBytes > LLCBytes > 0 (WeightsBeyondLLC) each token streams
	// the weights from memory and the decode kernels prefetch into L2.
	LLCBytes        int64
	StepWeightBytes int64
}

// WeightsBeyondLLC reports whether a decode step reads more weight bytes
// than the last-level cache holds (Info.LLCBytes, Info.StepWeightBytes).
func (i ModelInfo) WeightsBeyondLLC() bool {
	return i.LLCBytes > 0 && i.StepWeightBytes > i.LLCBytes
}

// ID identifies a submitted request within one engine.
type ID uint64

// Finish reasons the engine reports (the wire's finish_reason values, a
// subset of schema.FinishReasons; a daemon test keeps them equal).
const (
	FinishStop   = "stop"   // EOS or a stop token
	FinishLength = "length" // max tokens or the context limit
	FinishAbort  = "abort"  // cancelled
)

// Params are one request's generation parameters.
type Params struct {
	// MaxTokens is the most output tokens (>= 1). Generation also stops,
	// with finish reason length, when prompt and output fill ContextLength
	// tokens.
	MaxTokens int
	// Temperature 0 means greedy decoding; otherwise logits are divided by
	// it before top-k/top-p sampling.
	Temperature float32
	// TopK keeps the K most likely tokens (0 = all).
	TopK int
	// TopP keeps the smallest set of tokens whose probability reaches P
	// (0 or 1 = all).
	TopP float32
	// Seed seeds the request's own random stream: the same seed, prompt and
	// parameters give the same tokens, whatever else is in the batch.
	Seed uint64
	// StopTokens end generation (finish reason stop) in addition to EOS; the
	// stop token itself is emitted. At most 16.
	StopTokens []int32
	// ArrivalNS is [Now] at the request's HTTP arrival. Every time in its
	// RequestStats is on the same clock.
	ArrivalNS int64
	// PresencePenalty and FrequencyPenalty (-2..2, 0 = off) are OpenAI's:
	// before temperature, a token the output so far holds c times loses
	// c*FrequencyPenalty + PresencePenalty from its logit.
	PresencePenalty, FrequencyPenalty float32
	// RepetitionPenalty (0 or 1 = off, else > 0) is vLLM's (the CTRL rule),
	// applied before the other two: the logit of a token in the prompt or
	// the output so far is divided by it when positive, multiplied when
	// negative. Greedy decoding takes the argmax of the penalized logits.
	RepetitionPenalty float32
	// Logprobs reports each output token's log-probability, and
	// TopLogprobs (0..20) the most likely tokens' at its position, in
	// Output: the log-softmax of the logits the token was sampled from
	// (after the penalties and temperature, 1 when greedy; before
	// top-k/top-p).
	Logprobs    bool
	TopLogprobs int
	// MinP (0..1, 0 = off) is vLLM's and llama.cpp's min-p: after
	// temperature, tokens whose probability is below MinP times the most
	// likely token's are dropped before top-p. Greedy ignores it.
	MinP float32
	// Grammar, when not nil, constrains the output: at every step the
	// tokens whose bytes the grammar cannot accept next are masked out
	// before sampling (greedy, sampled and speculative alike), EOS and
	// StopTokens are allowed only where the grammar may end, and once the
	// grammar is complete only they are. nil means unconstrained (and costs
	// nothing). The engine needs the token bytes first
	// ([Engine.SetTokenBytes]); Submit refuses a grammar without them.
	Grammar *Grammar
}

// How a constrained request's output stood against its grammar when it
// finished (RequestStats.Grammar).
const (
	GrammarComplete   = "complete"   // the output is a whole sentence of the grammar
	GrammarIncomplete = "incomplete" // it ended (length, abort) before the grammar could end
	GrammarDead       = "dead_end"   // no token of the vocabulary could continue: EOS was forced
)

// RequestStats are the raw facts of one finished request. Times are [Now]
// readings (CLOCK_MONOTONIC nanoseconds); 0 means the moment never came.
type RequestStats struct {
	ArrivalNS    int64
	AdmittedNS   int64 // admitted into a slot (the first time, if preempted)
	FirstTokenNS int64 // the step that emitted the first output token ended
	LastTokenNS  int64 // the step that emitted the last output token ended
	FinishNS     int64 // finished or cancelled

	PromptTokens     int
	CachedTokens     int // prompt tokens whose K/V came from the prefix cache (first admission)
	PrefillTokens    int // tokens run through prefill (prompt + recomputation, less what the cache held)
	DecodeTokens     int // output tokens of decode/verify steps: not the token a prefill ends with (the first, and one per recomputation after a preemption)
	CompletionTokens int
	DraftTokens      int // speculative tokens proposed
	AcceptedTokens   int // speculative tokens accepted
	Preemptions      int

	// EmitNS holds the end time of every step that emitted tokens for the
	// request, the first being FirstTokenNS. Its storage belongs to the
	// engine: it is valid until the next call on the engine.
	EmitNS []int64

	Finish string // FinishStop, FinishLength or FinishAbort

	// Grammar is "" for an unconstrained request, else GrammarComplete,
	// GrammarIncomplete or GrammarDead.
	Grammar string
	// MaskNS is the time spent computing the request's grammar masks, and
	// MaskedTokens how many tokens were sampled under one (0 when
	// unconstrained).
	MaskNS       int64
	MaskedTokens int
}

// Output is what one step produced for one request.
type Output struct {
	ID ID
	// Tokens are the tokens the request emitted in this step (one for a
	// decode step, up to SpecK+1 for a verify step, one for the step that
	// ends its prefill). Engine-owned: valid until the next call.
	Tokens []int32
	// Finish is "" while the request runs, else FinishStop or FinishLength.
	Finish string
	// Stats is set when Finish is set. Engine-owned like Tokens.
	Stats *RequestStats
	// With Params.Logprobs (else nil): Logprobs[i] is Tokens[i]'s
	// log-probability, and its TopN most likely alternatives (most likely
	// first, ties by lower id) are TopIDs[i*MaxTopLogprobs:][:TopN] with
	// TopLogprobs at the same indices. Engine-owned like Tokens.
	Logprobs    []float32
	TopIDs      []int32
	TopLogprobs []float32
	TopN        int
}

// MaxTopLogprobs is the most alternatives per token (Params.TopLogprobs),
// and the stride of Output.TopIDs and Output.TopLogprobs.
const MaxTopLogprobs = 20

// Status is a native status code (model.h PM_*).
type Status int

// Status codes, as in model.h.
const (
	StatusOK       Status = 0
	StatusIO       Status = 1 // open/read/mmap failed
	StatusFormat   Status = 2 // not a valid GGUF v3 file
	StatusModel    Status = 3 // a GGUF file, but not a model the engine runs
	StatusNoMem    Status = 4 // allocation failed
	StatusArg      Status = 5 // invalid argument
	StatusFull     Status = 6 // waiting queue full
	StatusNotFound Status = 7 // unknown request id
	StatusState    Status = 8 // call not valid now
	StatusInternal Status = 9 // broken invariant
)

// Error is a native failure: a status and the engine's message.
type Error struct {
	Status Status
	Msg    string
}

func (e *Error) Error() string { return "native: " + e.Msg }

// Is makes errors.Is(err, ErrQueueFull) and the like match on the status.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Msg == "" && t.Status == e.Status
}

// Sentinels for errors.Is.
var (
	ErrQueueFull = &Error{Status: StatusFull}     // Submit: the waiting queue is full
	ErrNotFound  = &Error{Status: StatusNotFound} // Cancel: no such request
	ErrArg       = &Error{Status: StatusArg}      // an argument was rejected (the message says which)
	ErrNoCgo     = errors.New("native: built without cgo; the engine is unavailable")
)

// Now returns CLOCK_MONOTONIC in nanoseconds: the engine's clock (stepmetrics.c
// reads clock_gettime(CLOCK_MONOTONIC)). It is the Go runtime's own reading
// of that clock (through the vDSO, ~20 ns), not a system call.
func Now() int64 { return nanotime() }

// nanotime is the runtime's CLOCK_MONOTONIC reading on Linux. The runtime
// keeps this symbol reachable by linkname on purpose (see
// runtime/time_nofake.go); TestNowIsClockMonotonic checks the clock.
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64
