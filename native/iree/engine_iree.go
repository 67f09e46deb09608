//go:build iree && cgo

package iree

import (
	"fmt"
	"math"
	"slices"

	"github.com/picometer/picometer/native"
	"github.com/picometer/picometer/native/internal/reference"
)

// Options configure OpenEngine.
type Options struct {
	Runtime  string        // IREE's runtime library (build/iree/lib/libshortfin.so)
	Compiler string        // iree-compile; "" means CompilerBeside(Runtime)
	CacheDir string        // where compiled programs are kept; "" compiles every time
	Config   native.Config // the engine's configuration (see OpenEngine for what applies)
}

// Engine serves a Llama-family model on IREE's runtime with the C engine's
// contract (native.Engine's doc comments; daemon.Engine is the seam): B =
// Config.BMax slots, each with its own rows of a KV cache shared by all
// slots, batched into one program call per step.
//
// The model's weights are device buffers, loaded once. Each layer's K and
// V cache is one device buffer [B][Context][KVHeads*HeadDim]; slot s owns
// rows [s][*]. A call of @step (StepMLIR, compiled for batch B) runs one
// token for every slot that has one; the program reads the caches by
// reference and returns the new tokens' k and v, which the engine writes
// into each slot's row at its position. Slots with nothing to run pass a
// zero row that the engine ignores: a call always costs B rows.
//
// Prefill is successive @step calls, one prompt token per prefilling slot
// per call, up to PrefillChunk tokens per slot per Step; then one decode
// call runs every decoding slot. There is no speculation (Config.SpecK is
// 0) and no preemption: every slot reserves the whole context, as the C
// engine does with KVBlocks 0.
//
// One goroutine owns an Engine. Outputs and stats belong to it until the
// next call.
type Engine struct {
	rt   *Runtime
	mod  *Module
	step Func
	info native.ModelInfo
	cfg  native.Config
	sh   Shape

	emb       []float32 // [Vocab][Dim], host: the program takes embedding rows
	ropeFreq  []float64 // [HeadDim/2]: angle per position of each pair
	args      []Buffer  // @step's arguments, in order
	x, cs, sn Buffer    // per-call inputs, rewritten in place
	mask      Buffer
	kc, vc    []Buffer // per layer [B][C][K]

	// Host scratch, sized at open.
	hx, hcos, hsin, hmask []float32
	logits, kv            []float32
	sam                   *sampler

	slots   []slot
	waiting []*request // FIFO
	nextID  native.ID
	admits  uint64
	byID    map[native.ID]*request

	scratch, rows []*slot // step scratch, [BMax]
	live          []bool  // rows set for the next call, [BMax]
	outs          []native.Output
	outReqs       []*request // outs[i]'s request
	emitted       []*slot    // slots that emitted in this step, in order
	cancelStats   native.RequestStats
	met           metrics
}

type slotState int

const (
	slotFree slotState = iota
	slotPrefill
	slotDecode
)

type slot struct {
	i       int
	state   slotState
	r       *request
	pos     int // tokens in the slot's cache
	order   uint64
	busy    bool // ran its prefill in this step
	start   int  // the prefill chunk of this step: positions start..end-1
	end     int
	emitted bool
	fin     string
	tok     [1]int32
	lp      [1]float32
	topID   [native.MaxTopLogprobs]int32
	topLP   [native.MaxTopLogprobs]float32
}

type request struct {
	id      native.ID
	p       native.Params
	seq     []int32 // prompt, then output
	nPrompt int
	rng     rng
	st      native.RequestStats
	emit    []int64
	slot    *slot
}

// engError is an engine error that errors.Is matches against native's
// sentinels (native.ErrArg, ErrQueueFull, ErrNotFound) by status.
type engError struct {
	status native.Status
	msg    string
}

func (e *engError) Error() string { return "iree engine: " + e.msg }

func (e *engError) Is(target error) bool {
	t, ok := target.(*native.Error)
	return ok && t.Msg == "" && t.Status == e.status
}

func argErr(format string, a ...any) error {
	return &engError{native.StatusArg, fmt.Sprintf(format, a...)}
}

// OpenEngine loads the model at path, checks that the IREE step computes
// it as the C engine does, compiles (or finds in o.CacheDir) the step for
// its shape and o.Config.BMax, loads the runtime and puts the weights and
// caches on its device.
//
// Of o.Config: BMax, PrefillChunk, MaxWaiting, Threads, StepRing, Context
// and BlockSize (for the KV gauges) apply; SpecK is reported as 0 (this
// engine does not speculate); KVBlocks other than 0 and a Kernel other than
// "" or "auto" are refused by name.
func OpenEngine(path string, o Options) (*Engine, error) {
	cfg := o.Config
	if cfg.Kernel == "" {
		cfg.Kernel = "auto"
	}
	if err := cfg.Validate(); err != nil {
		return nil, argErr("%v", err)
	}
	if cfg.KVBlocks != 0 {
		return nil, argErr("kv_blocks: %d: the iree engine reserves the whole context for every slot; set 0", cfg.KVBlocks)
	}
	if cfg.Kernel != "auto" {
		return nil, argErr("kernel: %q: the iree engine's kernels are iree-compile's; set auto", cfg.Kernel)
	}
	mf, err := native.ReadModelFile(path)
	if err != nil {
		return nil, err
	}
	f, err := native.ReadGGUF(path)
	if err != nil {
		return nil, err
	}
	m, err := reference.Load(f)
	if err != nil {
		return nil, fmt.Errorf("iree engine: %s: %w", path, err)
	}
	if err := supported(m); err != nil {
		return nil, fmt.Errorf("iree engine: %s: %w", path, err)
	}
	ctx := cfg.Context
	switch {
	case ctx == 0:
		ctx = min(m.Context, native.DefaultContext)
	case ctx > m.Context:
		return nil, argErr("context: %d exceeds the model's context_length %d", ctx, m.Context)
	}
	cfg.Context, cfg.SpecK = ctx, 0
	cfg.KVBlocks = cfg.BMax * ((ctx + cfg.BlockSize - 1) / cfg.BlockSize) // what the slots reserve
	sh := Shape{Dim: m.Dim, Layers: len(m.Layers), Heads: m.Heads, KVHeads: m.KVHeads, HeadDim: m.HeadDim,
		FFN: m.FFN, Vocab: m.Vocab, Context: ctx, RMSEps: m.RMSEps, RopeNeox: m.RopeNeox}
	src, err := StepMLIR(sh, cfg.BMax)
	if err != nil {
		return nil, err
	}
	compiler := o.Compiler
	if compiler == "" {
		compiler = CompilerBeside(o.Runtime)
	}
	vmfb, err := Compile(compiler, o.CacheDir, src)
	if err != nil {
		return nil, err
	}
	rt, err := Load(o.Runtime)
	if err != nil {
		return nil, err
	}
	e := &Engine{rt: rt, info: mf.Info, cfg: cfg, sh: sh, emb: m.TokEmbd, byID: map[native.ID]*request{}}
	e.info.ContextLength = ctx
	e.info.Kernel = "iree-llvm-cpu"
	if e.mod, err = rt.Open(vmfb, cfg.Threads); err != nil {
		rt.Close()
		return nil, err
	}
	if err := e.load(m); err != nil {
		e.Close()
		return nil, err
	}
	e.step = e.mod.Func("module.step")
	e.ropeFreq = make([]float64, m.HeadDim/2)
	for i := range e.ropeFreq {
		f := m.RopeScale * math.Pow(m.RopeTheta, -2*float64(i)/float64(m.HeadDim))
		if m.RopeFactors != nil {
			f /= float64(m.RopeFactors[i])
		}
		e.ropeFreq[i] = f
	}
	e.slots = make([]slot, cfg.BMax)
	for i := range e.slots {
		e.slots[i].i = i
	}
	e.outs = make([]native.Output, 0, cfg.BMax)
	e.outReqs = make([]*request, 0, cfg.BMax)
	e.scratch, e.rows = make([]*slot, 0, cfg.BMax), make([]*slot, 0, cfg.BMax)
	e.live = make([]bool, cfg.BMax)
	e.emitted = make([]*slot, 0, cfg.BMax)
	e.sam = newSampler(m.Vocab)
	e.met.init(cfg)
	return e, nil
}

// supported refuses, by name, what the IREE step does not compute as the
// C engine does.
func supported(m *reference.Model) error {
	for l, L := range m.Layers {
		switch {
		case L.Bq != nil || L.Bk != nil || L.Bv != nil:
			return fmt.Errorf("blk.%d has q/k/v biases (%s): the IREE step has none", l, m.Arch)
		case L.QNorm != nil || L.KNorm != nil:
			return fmt.Errorf("blk.%d has q/k norms (%s): the IREE step has none", l, m.Arch)
		case L.Act != struct{ Q, K, V, O, Gate, Up, Down int }{}:
			return fmt.Errorf("blk.%d has quantized matrices: the C engine quantizes their activations, the IREE step computes in f32 (F32, F16 or BF16 files only)", l)
		}
	}
	if m.OutputAct != 0 {
		return fmt.Errorf("the output matrix is quantized: the IREE step computes in f32 (F32, F16 or BF16 files only)")
	}
	return nil
}

// load puts the weights, the caches and the per-call inputs on the device.
func (e *Engine) load(m *reference.Model) error {
	s, b := e.sh, e.cfg.BMax
	q, k := int64(s.Heads*s.HeadDim), int64(s.KVHeads*s.HeadDim)
	d, ffn, c := int64(s.Dim), int64(s.FFN), int64(s.Context)
	var err error
	buf := func(data []float32, dims ...int64) Buffer {
		if err != nil {
			return -1
		}
		var id Buffer
		id, err = e.mod.NewBuffer(dims, data)
		e.args = append(e.args, id)
		return id
	}
	h2 := int64(s.HeadDim / 2)
	e.hx, e.hcos, e.hsin = make([]float32, b*s.Dim), make([]float32, b*s.HeadDim/2), make([]float32, b*s.HeadDim/2)
	e.hmask = make([]float32, b*s.Context)
	e.x = buf(e.hx, int64(b), d)
	e.cs = buf(e.hcos, int64(b), h2)
	e.sn = buf(e.hsin, int64(b), h2)
	e.mask = buf(e.hmask, int64(b), c)
	for _, L := range m.Layers {
		buf(L.AttnNorm, d)
		buf(L.Wq, q, d)
		buf(L.Wk, k, d)
		buf(L.Wv, k, d)
		buf(L.Wo, d, q)
		buf(L.FFNNorm, d)
		buf(L.WGate, ffn, d)
		buf(L.WUp, ffn, d)
		buf(L.WDown, d, ffn)
	}
	buf(m.OutNorm, d)
	buf(m.Output, int64(s.Vocab), d)
	zero := make([]float32, int64(b)*c*k)
	p, hd := int64(b*s.KVHeads), int64(s.HeadDim)
	for range m.Layers {
		e.kc = append(e.kc, buf(zero, p, c, hd))
		e.vc = append(e.vc, buf(zero, p, c, hd))
	}
	if err != nil {
		return err
	}
	if len(e.args) != StepArgs(s) {
		return fmt.Errorf("iree engine: BUG: %d arguments for @step, want %d", len(e.args), StepArgs(s))
	}
	e.logits = make([]float32, b*s.Vocab)
	e.kv = make([]float32, int64(b)*k)
	return nil
}

// Info describes the loaded model; ContextLength is the engine's context.
func (e *Engine) Info() native.ModelInfo { return e.info }

// Config returns the effective configuration (SpecK 0, Context resolved,
// KVBlocks the blocks the slots reserve).
func (e *Engine) Config() native.Config { return e.cfg }

// Close frees the device, its buffers and the runtime.
func (e *Engine) Close() error {
	if e.mod != nil {
		e.mod.Close()
		e.mod = nil
	}
	if e.rt != nil {
		e.rt.Close()
		e.rt = nil
	}
	return nil
}

// Submit queues a request (admitting it at once when a slot is free and
// nothing waits), with the C engine's checks and messages.
func (e *Engine) Submit(prompt []int32, p native.Params) (native.ID, error) {
	if e.mod == nil {
		return 0, &engError{native.StatusState, "engine is closed"}
	}
	ctx, V := e.cfg.Context, int32(e.sh.Vocab)
	switch {
	case len(prompt) < 1:
		return 0, argErr("prompt: empty")
	case len(prompt) >= ctx:
		return 0, argErr("prompt: %d tokens do not fit the context of %d (at most %d)", len(prompt), ctx, ctx-1)
	case p.MaxTokens < 1:
		return 0, argErr("max_tokens: %d < 1", p.MaxTokens)
	case !(p.Temperature >= 0) || math.IsInf(float64(p.Temperature), 0):
		return 0, argErr("temperature: %g is not a finite number >= 0", p.Temperature)
	case p.TopK < 0:
		return 0, argErr("top_k: %d < 0", p.TopK)
	case !(p.TopP >= 0 && p.TopP <= 1):
		return 0, argErr("top_p: %g not in 0..1", p.TopP)
	case !(p.PresencePenalty >= -2 && p.PresencePenalty <= 2):
		return 0, argErr("presence_penalty: %g not in -2..2", p.PresencePenalty)
	case !(p.FrequencyPenalty >= -2 && p.FrequencyPenalty <= 2):
		return 0, argErr("frequency_penalty: %g not in -2..2", p.FrequencyPenalty)
	case !(p.RepetitionPenalty >= 0) || math.IsInf(float64(p.RepetitionPenalty), 0):
		return 0, argErr("repetition_penalty: %g is not a finite number >= 0", p.RepetitionPenalty)
	case p.TopLogprobs < 0 || p.TopLogprobs > native.MaxTopLogprobs:
		return 0, argErr("top_logprobs: %d not in 0..%d", p.TopLogprobs, native.MaxTopLogprobs)
	case len(p.StopTokens) > 16:
		return 0, argErr("stop: %d tokens, at most 16", len(p.StopTokens))
	}
	for _, c := range []struct {
		what string
		toks []int32
	}{{"prompt", prompt}, {"stop", p.StopTokens}} {
		for i, t := range c.toks {
			if t < 0 || t >= V {
				return 0, argErr("%s[%d]: token %d outside the vocabulary 0..%d", c.what, i, t, V-1)
			}
		}
	}
	free := e.freeSlot()
	direct := len(e.waiting) == 0 && free != nil
	if !direct && len(e.waiting) >= e.cfg.MaxWaiting {
		return 0, &engError{native.StatusFull, fmt.Sprintf("waiting queue full (%d requests wait)", len(e.waiting))}
	}
	now := native.Now()
	e.nextID++
	r := &request{id: e.nextID, p: p, seq: make([]int32, len(prompt), ctx), nPrompt: len(prompt),
		rng: newRNG(p.Seed), emit: make([]int64, 0, ctx)}
	r.p.StopTokens = slices.Clone(p.StopTokens)
	copy(r.seq, prompt)
	r.st.ArrivalNS = p.ArrivalNS
	if r.st.ArrivalNS == 0 {
		r.st.ArrivalNS = now
	}
	r.st.PromptTokens = len(prompt)
	e.byID[r.id] = r
	if direct {
		e.admit(r, free, now)
	} else {
		e.waiting = append(e.waiting, r)
	}
	return r.id, nil
}

func (e *Engine) freeSlot() *slot {
	for i := range e.slots {
		if e.slots[i].state == slotFree {
			return &e.slots[i]
		}
	}
	return nil
}

func (e *Engine) admit(r *request, s *slot, now int64) {
	e.admits++
	*s = slot{i: s.i, state: slotPrefill, r: r, order: e.admits}
	r.slot = s
	if r.st.AdmittedNS == 0 {
		r.st.AdmittedNS = now
	}
}

// Load returns the requests in slots and the requests waiting.
func (e *Engine) Load() (running, waiting int) {
	for i := range e.slots {
		if e.slots[i].state != slotFree {
			running++
		}
	}
	return running, len(e.waiting)
}

// Cancel removes a waiting or running request and returns its stats
// (FinishAbort); native.ErrNotFound for an unknown or finished id.
func (e *Engine) Cancel(id native.ID) (*native.RequestStats, error) {
	r := e.byID[id]
	if r == nil {
		return nil, &engError{native.StatusNotFound, fmt.Sprintf("cancel: no running or waiting request %d", id)}
	}
	if i := slices.Index(e.waiting, r); i >= 0 {
		e.waiting = slices.Delete(e.waiting, i, i+1)
	}
	e.finish(r, native.FinishAbort)
	e.met.finishedAt(&r.st, native.Now())
	e.cancelStats = r.st
	e.cancelStats.EmitNS = r.emit
	return &e.cancelStats, nil
}

// finish ends r: frees its slot and counts it.
func (e *Engine) finish(r *request, reason string) {
	if r.slot != nil {
		r.slot.state, r.slot.r = slotFree, nil
		r.slot = nil
	}
	delete(e.byID, r.id)
	r.st.Finish = reason
	e.met.requestsFinished++
	e.met.promptTokens += int64(r.st.PromptTokens)
	e.met.completionTokens += int64(r.st.CompletionTokens)
}
