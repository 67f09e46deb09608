//go:build cgo

package native

/*
#include <stdlib.h>
#include "engine.h"

// The engine keeps no Go pointer and never calls back into Go.
#cgo noescape pm_engine_step
#cgo nocallback pm_engine_step
#cgo noescape pm_engine_submit
#cgo nocallback pm_engine_submit
#cgo noescape pm_engine_cancel
#cgo nocallback pm_engine_cancel
#cgo noescape pm_engine_load
#cgo nocallback pm_engine_load
#cgo noescape pm_engine_take_steps
#cgo nocallback pm_engine_take_steps
#cgo noescape pm_engine_get_metrics
#cgo nocallback pm_engine_get_metrics
#cgo noescape pm_engine_score
#cgo nocallback pm_engine_score
*/
import "C"

import (
	"fmt"
	"math"
	"strconv"
	"unsafe"
)

// Engine is a loaded model with its slots, KV cache, waiting queue and
// metrics. One goroutine owns it (see the package doc).
//
// Outputs, tokens and stats returned by its methods live in memory the C
// engine allocated at Open (Go slices point into it), so serving allocates
// nothing per step; they stay valid until the next call on the Engine.
type Engine struct {
	c    *C.pm_engine
	info ModelInfo
	cfg  Config

	outs        []Output           // Step's result, cap BMax
	stats       []RequestStats     // Step's finished stats, [BMax]
	cancelStats RequestStats       // Cancel's result
	steps       []C.pm_step_record // Snapshot's buffer, [StepRing]
}

var errClosed = &Error{Status: StatusState, Msg: "engine is closed"}

// Open loads the GGUF model at path and allocates everything the engine
// will ever use (slots, KV cache, waiting queue, scratch, step ring) for
// cfg, which is validated first. Errors name the problem (file, field,
// tensor).
func Open(path string, cfg Config) (*Engine, error) {
	if cfg.Kernel == "" {
		cfg.Kernel = "auto"
	}
	if err := cfg.Validate(); err != nil {
		return nil, &Error{Status: StatusArg, Msg: err.Error()}
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"prefill_chunk", cfg.PrefillChunk}, {"block_size", cfg.BlockSize}, {"kv_blocks", cfg.KVBlocks},
		{"max_waiting", cfg.MaxWaiting}, {"step_ring", cfg.StepRing}} {
		if f.v > math.MaxInt32 {
			return nil, &Error{Status: StatusArg, Msg: fmt.Sprintf("%s: %d is too large", f.name, f.v)}
		}
	}
	cc := C.pm_engine_config{
		b_max:          C.int32_t(cfg.BMax),
		spec_k:         C.int32_t(cfg.SpecK),
		spec_ngram_min: C.int32_t(cfg.SpecNgramMin),
		prefill_chunk:  C.int32_t(cfg.PrefillChunk),
		block_size:     C.int32_t(cfg.BlockSize),
		kv_blocks:      C.int32_t(cfg.KVBlocks),
		max_waiting:    C.int32_t(cfg.MaxWaiting),
		threads:        C.int32_t(cfg.Threads),
		step_ring:      C.int32_t(cfg.StepRing),
		kernel:         C.PM_KERNEL_AUTO,
		ctx:            C.int32_t(cfg.Context),
	}
	if cfg.NoMetrics {
		cc.no_metrics = 1
	}
	if cfg.NoPrefixCache {
		cc.no_prefix_cache = 1
	}
	cc.kernel = kernelCode(cfg.Kernel)
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var msg [512]C.char
	var ce *C.pm_engine
	if rc := C.pm_engine_open(cpath, &cc, &ce, &msg[0], C.size_t(len(msg))); rc != C.PM_OK {
		return nil, &Error{Status: Status(rc), Msg: C.GoString(&msg[0])}
	}
	var model *C.pm_model
	var kernel *C.char
	var panels, kx8, q32x8, rowCopy, llc, step C.uint64_t
	if C.pm_engine_get_config(ce, &cc) != C.PM_OK || C.pm_engine_model(ce, &model) != C.PM_OK ||
		C.pm_engine_kernel_name(ce, &kernel) != C.PM_OK || C.pm_engine_f16_panel_bytes(ce, &panels) != C.PM_OK ||
		C.pm_engine_kx8_bytes(ce, &kx8) != C.PM_OK || C.pm_engine_q32x8_bytes(ce, &q32x8) != C.PM_OK ||
		C.pm_engine_row_copy_bytes(ce, &rowCopy) != C.PM_OK ||
		C.pm_engine_cache_fit(ce, &llc, &step) != C.PM_OK {
		C.pm_engine_free(ce)
		return nil, &Error{Status: StatusInternal, Msg: "BUG: engine accessors failed on a new engine"}
	}
	e := &Engine{c: ce}
	e.cfg = Config{
		BMax:          int(cc.b_max),
		SpecK:         int(cc.spec_k),
		PrefillChunk:  int(cc.prefill_chunk),
		BlockSize:     int(cc.block_size),
		KVBlocks:      int(cc.kv_blocks),
		MaxWaiting:    int(cc.max_waiting),
		Threads:       int(cc.threads),
		StepRing:      int(cc.step_ring),
		NoMetrics:     cc.no_metrics != 0,
		NoPrefixCache: cc.no_prefix_cache != 0,
		Kernel:        cfg.Kernel,
		Context:       int(cc.ctx),
	}
	e.info = modelFile(model).Info
	e.info.Kernel = C.GoString(kernel)
	e.info.F16PanelBytes = int64(panels)
	e.info.KX8Bytes = int64(kx8)
	e.info.Q32X8Bytes = int64(q32x8)
	e.info.RowCopyBytes = int64(rowCopy)
	e.info.LLCBytes = int64(llc)
	e.info.StepWeightBytes = int64(step)
	e.info.ContextLength = e.cfg.Context
	e.outs = make([]Output, 0, e.cfg.BMax)
	e.stats = make([]RequestStats, e.cfg.BMax)
	e.steps = make([]C.pm_step_record, e.cfg.StepRing)
	return e, nil
}

// Info describes the loaded model.
func (e *Engine) Info() ModelInfo { return e.info }

// Config returns the effective configuration (defaults resolved, KVBlocks
// computed when it was 0).
func (e *Engine) Config() Config { return e.cfg }

func (e *Engine) fail(rc C.int) error {
	return &Error{Status: Status(rc), Msg: C.GoString(C.pm_engine_errmsg(e.c))}
}

// Submit copies prompt and p into the waiting queue and returns the
// request's id. It fails with ErrQueueFull when MaxWaiting requests are
// already waiting, and with ErrArg (message naming the argument) for an empty
// prompt, a prompt of ContextLength tokens or more, a token outside the
// vocabulary, MaxTokens < 1, or out-of-range sampling parameters.
//
// When no request waits and a slot and KV blocks are free, the request is
// admitted into a slot at once (AdmittedNS is then the Submit time); so
// MaxWaiting 0 means "no queue": Submit fails while every slot is busy.
// The context limit counts prompt and output together: generation ends
// (FinishLength) when they fill ContextLength tokens. ArrivalNS 0 means
// "now".
func (e *Engine) Submit(prompt []int32, p Params) (ID, error) {
	if e.c == nil {
		return 0, errClosed
	}
	if len(p.StopTokens) > C.PM_MAX_STOP {
		return 0, &Error{Status: StatusArg, Msg: "stop: " + strconv.Itoa(len(p.StopTokens)) + " tokens, at most 16"}
	}
	cp := C.pm_params{
		max_tokens:  C.int32_t(clampInt32(p.MaxTokens)),
		temperature: C.float(p.Temperature),
		top_k:       C.int32_t(clampInt32(p.TopK)),
		top_p:       C.float(p.TopP),
		seed:        C.uint64_t(p.Seed),
		n_stop:      C.int32_t(len(p.StopTokens)),
		arrival_ns:  C.int64_t(p.ArrivalNS),

		presence_penalty:   C.float(p.PresencePenalty),
		frequency_penalty:  C.float(p.FrequencyPenalty),
		repetition_penalty: C.float(p.RepetitionPenalty),
		top_logprobs:       C.int32_t(clampInt32(p.TopLogprobs)),
		min_p:              C.float(p.MinP),
	}
	if p.Grammar != nil {
		// Held across the call: the engine takes its own reference before
		// a concurrent Free can drop the Grammar's.
		p.Grammar.mu.Lock()
		defer p.Grammar.mu.Unlock()
		if p.Grammar.c == nil {
			return 0, &Error{Status: StatusArg, Msg: "grammar: used after Free"}
		}
		cp.grammar = p.Grammar.c
	}
	if p.Logprobs {
		cp.logprobs = 1
	}
	for i, t := range p.StopTokens {
		cp.stop[i] = C.int32_t(t)
	}
	var ptr *C.int32_t
	if len(prompt) > 0 {
		ptr = (*C.int32_t)(unsafe.Pointer(&prompt[0]))
	}
	var id C.uint64_t
	if rc := C.pm_engine_submit(e.c, ptr, C.int32_t(clampInt32(len(prompt))), &cp, &id); rc != C.PM_OK {
		return 0, e.fail(rc)
	}
	return ID(id), nil
}

func clampInt32(n int) int {
	switch {
	case n > 1<<31-1:
		return 1<<31 - 1
	case n < -1<<31:
		return -1 << 31
	}
	return n
}

// Step runs one scheduler iteration: admit waiting requests into free
// slots, run at most one prefill chunk per prefilling slot, then one decode
// step (or, with speculation, a draft lookup and one verify forward) over
// every slot that is decoding. It returns an Output for every request that
// emitted tokens or finished in this iteration; the slice and everything it
// points to belong to the engine and are valid until the next call. With
// nothing to do it returns (nil, nil) at once. An error means the engine
// failed and cannot continue.
func (e *Engine) Step() ([]Output, error) {
	if e.c == nil {
		return nil, errClosed
	}
	var outs *C.pm_output
	var n C.int32_t
	if rc := C.pm_engine_step(e.c, &outs, &n); rc != C.PM_OK {
		return nil, e.fail(rc)
	}
	if n == 0 {
		return nil, nil
	}
	e.outs = e.outs[:0]
	for i, o := range unsafe.Slice(outs, int(n)) {
		out := Output{
			ID:     ID(o.id),
			Tokens: unsafe.Slice((*int32)(unsafe.Pointer(o.tokens)), int(o.n_tokens)),
		}
		if o.logprobs != nil {
			nt, k := int(o.n_tokens), int(o.top_n)
			out.Logprobs = unsafe.Slice((*float32)(unsafe.Pointer(o.logprobs)), nt)
			out.TopN = k
			// Each token's alternatives are PM_MAX_TOP_LOGPROBS apart.
			if nt > 0 && k > 0 {
				n := (nt-1)*C.PM_MAX_TOP_LOGPROBS + k
				out.TopIDs = unsafe.Slice((*int32)(unsafe.Pointer(o.top_ids)), n)
				out.TopLogprobs = unsafe.Slice((*float32)(unsafe.Pointer(o.top_logprobs)), n)
			}
		}
		if o.finish != C.PM_FINISH_NONE {
			out.Finish = finishName(o.finish)
			out.Stats = &e.stats[i]
			fillStats(out.Stats, o.stats)
		}
		e.outs = append(e.outs, out)
	}
	return e.outs, nil
}

// MaxTopLogprobs is engine.h's PM_MAX_TOP_LOGPROBS (a compile error otherwise).
const _ = uint(C.PM_MAX_TOP_LOGPROBS-MaxTopLogprobs) + uint(MaxTopLogprobs-C.PM_MAX_TOP_LOGPROBS)

func finishName(f C.int32_t) string {
	switch f {
	case C.PM_FINISH_STOP:
		return FinishStop
	case C.PM_FINISH_LENGTH:
		return FinishLength
	case C.PM_FINISH_ABORT:
		return FinishAbort
	}
	return ""
}

func fillStats(s *RequestStats, c *C.pm_request_stats) {
	*s = RequestStats{
		ArrivalNS:        int64(c.arrival_ns),
		AdmittedNS:       int64(c.admitted_ns),
		FirstTokenNS:     int64(c.first_token_ns),
		LastTokenNS:      int64(c.last_token_ns),
		FinishNS:         int64(c.finish_ns),
		PromptTokens:     int(c.prompt_tokens),
		CachedTokens:     int(c.cached_tokens),
		PrefillTokens:    int(c.prefill_tokens),
		DecodeTokens:     int(c.decode_tokens),
		CompletionTokens: int(c.completion_tokens),
		DraftTokens:      int(c.draft_tokens),
		AcceptedTokens:   int(c.accepted_tokens),
		Preemptions:      int(c.preemptions),
		Finish:           finishName(c.finish),
		MaskNS:           int64(c.mask_ns),
		MaskedTokens:     int(c.masked_tokens),
	}
	switch c.grammar {
	case C.PM_GRAMMAR_COMPLETE:
		s.Grammar = GrammarComplete
	case C.PM_GRAMMAR_INCOMPLETE:
		s.Grammar = GrammarIncomplete
	case C.PM_GRAMMAR_DEAD:
		s.Grammar = GrammarDead
	}
	if c.n_emit > 0 && c.emit_ns != nil {
		s.EmitNS = unsafe.Slice((*int64)(unsafe.Pointer(c.emit_ns)), int(c.n_emit))
	}
}

// SetTokenBytes gives the engine the bytes of every token (tokens[i] for
// token i; len(tokens) must be the vocabulary size), which grammars are
// matched against: the tokenizer's piece of each token, and nil for a
// control token (never allowed by a grammar; EOS and a request's stop
// tokens are allowed where the grammar may end). Call it once before the
// first constrained request: it builds the token index and the mask cache
// (a few MB for a 128k vocabulary).
func (e *Engine) SetTokenBytes(tokens [][]byte) error {
	if e.c == nil {
		return errClosed
	}
	if len(tokens) != e.info.Vocab {
		return &Error{Status: StatusArg, Msg: fmt.Sprintf("token bytes: %d tokens, the vocabulary has %d", len(tokens), e.info.Vocab)}
	}
	total := 0
	for _, t := range tokens {
		total += len(t)
	}
	if total > math.MaxUint32 {
		return &Error{Status: StatusArg, Msg: "token bytes: over 4 GiB"}
	}
	buf := make([]byte, 0, total+1)
	offs := make([]uint32, len(tokens)+1)
	for i, t := range tokens {
		buf = append(buf, t...)
		offs[i+1] = uint32(len(buf))
	}
	buf = append(buf, 0) // &buf[0] exists even when every token is empty
	rc := C.pm_engine_set_token_bytes(e.c, (*C.uint8_t)(unsafe.Pointer(&buf[0])),
		(*C.uint32_t)(unsafe.Pointer(&offs[0])), C.int32_t(len(tokens)))
	if rc != C.PM_OK {
		return e.fail(rc)
	}
	return nil
}

// Cancel removes a waiting or running request, frees its slot and KV
// blocks, and returns its stats with Finish = FinishAbort (engine-owned,
// valid until the next call). ErrNotFound if id is unknown or finished.
func (e *Engine) Cancel(id ID) (*RequestStats, error) {
	if e.c == nil {
		return nil, errClosed
	}
	var st *C.pm_request_stats
	if rc := C.pm_engine_cancel(e.c, C.uint64_t(id), &st); rc != C.PM_OK {
		return nil, e.fail(rc)
	}
	fillStats(&e.cancelStats, st)
	return &e.cancelStats, nil
}

// Load returns the requests in slots and the requests waiting.
func (e *Engine) Load() (running, waiting int) {
	if e.c == nil {
		return 0, 0
	}
	var r, w C.int32_t
	if C.pm_engine_load(e.c, &r, &w) != C.PM_OK {
		return 0, 0
	}
	return int(r), int(w)
}

// Snapshot writes the engine's cumulative metrics and live gauges into dst
// (see [Snapshot] for units and definitions), and replaces dst.Steps with
// the step records since the previous snapshot (clearing the ring). dst's
// slices are reused.
func (e *Engine) Snapshot(dst *Snapshot) {
	if e.c == nil {
		return
	}
	var m *C.pm_engine_metrics
	if C.pm_engine_get_metrics(e.c, &m) != C.PM_OK {
		return
	}
	sec := func(ns C.int64_t) float64 { return float64(ns) / 1e9 }
	dst.EnginePrefillTimeSum = sec(m.prefill_ns)
	dst.EngineDecodeTimeSum = sec(m.decode_ns)
	dst.EngineDraftTimeSum = sec(m.draft_ns)
	dst.EngineVerifyTimeSum = sec(m.verify_ns)
	dst.PromptTokensSum = int64(m.prompt_tokens)
	dst.CompletionTokensSum = int64(m.completion_tokens)
	dst.PrefillTokensSum = int64(m.prefill_tokens)
	dst.DecodeTokensSum = int64(m.decode_tokens)
	dst.MaskTimeSum = sec(m.mask_ns)
	dst.MaskCount = int64(m.mask_count)
	dst.MaskCacheHits = int64(m.mask_cache_hits)
	dst.MaskCacheMisses = int64(m.mask_cache_misses)
	dst.HasLastFinished = m.has_last != 0
	dst.LastFinished = RequestStats{}
	if dst.HasLastFinished {
		fillStats(&dst.LastFinished, &m.last_finished)
		dst.LastFinished.EmitNS = nil
	}
	if e.cfg.SpecK > 0 {
		if dst.SpecDecode == nil {
			dst.SpecDecode = &SpecDecode{}
		}
		sd := dst.SpecDecode
		sd.DraftCount, sd.AcceptCount = sd.DraftCount[:0], sd.AcceptCount[:0]
		for i := 0; i < e.cfg.SpecK; i++ {
			sd.DraftCount = append(sd.DraftCount, int64(m.draft_count[i]))
			sd.AcceptCount = append(sd.AcceptCount, int64(m.accept_count[i]))
		}
	} else {
		dst.SpecDecode = nil
	}
	dst.DecodeTimeByBatchSize = timeCosts(dst.DecodeTimeByBatchSize, m.decode_by_bs[:e.cfg.BMax+1])
	dst.DraftTimeByBatchSize = timeCosts(dst.DraftTimeByBatchSize, m.draft_by_bs[:e.cfg.BMax+1])
	dst.VerifyTimeByBatchSize = timeCosts(dst.VerifyTimeByBatchSize, m.verify_by_bs[:e.cfg.BMax+1])
	var n C.int32_t
	if C.pm_engine_take_steps(e.c, &e.steps[0], C.int32_t(len(e.steps)), &n) != C.PM_OK {
		n = 0
	}
	dst.Steps = dst.Steps[:0]
	for _, r := range e.steps[:n] {
		dst.Steps = append(dst.Steps, StepRecord{
			Phase:      phaseName(r.phase),
			BatchSize:  int(r.batch_size),
			Tokens:     int(r.tokens),
			DurationUS: int64(r.duration_ns) / 1000,
		})
	}
	dst.Preemptions = int64(m.preemptions)
	dst.RequestsFinished = int64(m.requests_finished)
	dst.StepsDropped = int64(m.steps_dropped)
	dst.PrefixQueries = int64(m.prefix_queries)
	dst.PrefixHits = int64(m.prefix_hits)
	dst.PrefixEvictions = int64(m.prefix_evictions)
	dst.KVBlocksCached = int(m.kv_blocks_cached)
	dst.Running = int(m.running)
	dst.Waiting = int(m.waiting)
	dst.Slots = int(m.slots)
	dst.KVBlocksUsed = int(m.kv_blocks_used)
	dst.KVBlocksTotal = int(m.kv_blocks_total)
}

// The Go limits are the C ones (compile-time checks).
var (
	_ [C.PM_MAX_BATCH - MaxBatch]struct{}
	_ [MaxBatch - C.PM_MAX_BATCH]struct{}
	_ [C.PM_MAX_SPEC_K - MaxSpecK]struct{}
	_ [MaxSpecK - C.PM_MAX_SPEC_K]struct{}
)

func timeCosts(dst []TimeCost, src []C.pm_time_cost) []TimeCost {
	dst = dst[:0]
	for _, c := range src {
		dst = append(dst, TimeCost{Count: int64(c.count), Sum: float64(c.sum_ns) / 1e9})
	}
	return dst
}

func phaseName(p C.int32_t) string {
	switch p {
	case C.PM_PHASE_PREFILL:
		return PhasePrefill
	case C.PM_PHASE_DECODE:
		return PhaseDecode
	case C.PM_PHASE_DRAFT:
		return PhaseDraft
	case C.PM_PHASE_VERIFY:
		return PhaseVerify
	}
	return "unknown"
}

// Close frees everything. The Engine must not be used afterwards.
func (e *Engine) Close() error {
	if e.c != nil {
		C.pm_engine_free(e.c)
		e.c = nil
	}
	return nil
}

// setNoMetrics switches metric recording off or on between steps, for
// BenchmarkMetricsOverhead (see pm_engine_set_no_metrics).
func (e *Engine) setNoMetrics(off bool) {
	v := C.int32_t(0)
	if off {
		v = 1
	}
	C.pm_engine_set_no_metrics(e.c, v)
}

// score runs tokens through the model in one slot of an idle engine and
// returns the logits of every position ([len(tokens)][vocab]), computed by
// the same forward pass that serves requests. Tests compare it with the
// reference implementation.
func (e *Engine) score(tokens []int32) ([]float32, error) {
	if e.c == nil {
		return nil, errClosed
	}
	if len(tokens) == 0 {
		return nil, &Error{Status: StatusArg, Msg: "score: no tokens"}
	}
	out := make([]float32, len(tokens)*e.info.Vocab)
	rc := C.pm_engine_score(e.c, (*C.int32_t)(unsafe.Pointer(&tokens[0])), C.int32_t(clampInt32(len(tokens))),
		(*C.float)(unsafe.Pointer(&out[0])))
	if rc != C.PM_OK {
		return nil, e.fail(rc)
	}
	return out, nil
}

// kernelCode is name's PM_KERNEL_* ("auto" and "" are PM_KERNEL_AUTO;
// Validate has refused other names).
func kernelCode(name string) C.int32_t {
	switch name {
	case "avx512vnni":
		return C.PM_KERNEL_AVX512VNNI
	case "avxvnni":
		return C.PM_KERNEL_AVXVNNI
	case "avx2":
		return C.PM_KERNEL_AVX2
	case "neon":
		return C.PM_KERNEL_NEON
	case "portable":
		return C.PM_KERNEL_PORTABLE
	}
	return C.PM_KERNEL_AUTO
}

// CPUKernels returns the paths of Kernels this build and CPU run, in
// Kernels' order: the ones Config.Kernel may name here.
func CPUKernels() []string {
	var out []string
	for _, k := range Kernels {
		if C.pm_kernel_runs(kernelCode(k)) != 0 {
			out = append(out, k)
		}
	}
	return out
}
