package daemon

import (
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/picometer/picometer/native"
)

// fakeEngine is an in-test engine, fast and scriptable, that keeps the
// native.Engine contract the daemon relies on: bounded waiting queue,
// B_max slots, one Output per emitting request per step, stop tokens and
// EOS, max tokens, Cancel, stats on the engine clock, and engine-owned
// result memory that it poisons on the next call (so a daemon that kept it
// would see garbage). It is unit-test speed only; the e2e tests use the
// real engine.
type fakeEngine struct {
	mu sync.Mutex

	cfg  native.Config
	info native.ModelInfo

	// Knobs (set before use).
	runLen    int                          // tokens per request per step (>1 emulates speculative runs); default 1
	stepDelay time.Duration                // sleep per step with work
	failAt    int                          // the Step call that fails (0: never)
	panicAt   int                          // the Step call that panics (0: never)
	panicSub  bool                         // Submit panics
	hold      chan struct{}                // when set, a Step with work waits until it is closed
	gen       func(prompt []int32) []int32 // scripted output; then 'z' forever. Default: echo the prompt's bytes, then EOS (or <|end|> for chat)

	next    native.ID
	waiting []*fakeReq
	running []*fakeReq

	// Engine-owned results, poisoned on every call.
	outs  []native.Output
	toks  []int32
	stats []native.RequestStats

	// Observations.
	stepCalls  int
	cancelled  []native.ID
	submitted  int
	maxBatch   int
	decodeTime []native.TimeCost
	records    []native.StepRecord
	finished   int64
}

type fakeReq struct {
	id     native.ID
	prompt []int32
	p      native.Params
	out    []int32
	stats  native.RequestStats
	emit   []int64
}

func newFakeEngine(contextLen int) *fakeEngine {
	cfg := native.DefaultConfig()
	cfg.KVBlocks = cfg.BMax * (contextLen + cfg.BlockSize - 1) / cfg.BlockSize
	return &fakeEngine{
		cfg:    cfg,
		info:   native.ModelInfo{Name: "fake-model", Arch: "llama", Vocab: native.VocabSize, ContextLength: contextLen, BOS: native.TokBOS, EOS: native.TokEOS, Kernel: "portable"},
		runLen: 1,
	}
}

// echo is the default script: the prompt's byte tokens, then the end token.
func echo(prompt []int32, stopTokens []int32) []int32 {
	var out []int32
	for _, t := range prompt {
		if native.IsByte(t) {
			out = append(out, t)
		}
	}
	end := int32(native.TokEOS)
	if slices.Contains(stopTokens, native.TokEnd) {
		end = native.TokEnd
	}
	return append(out, end)
}

// forever is a script that never ends by itself.
func forever([]int32) []int32 { return nil }

func (f *fakeEngine) Info() native.ModelInfo { return f.info }
func (f *fakeEngine) Config() native.Config  { return f.cfg }

// poison overwrites what the previous call returned.
func (f *fakeEngine) poison() {
	for i := range f.toks[:cap(f.toks)] {
		f.toks[:cap(f.toks)][i] = native.TokUnk
	}
	for i := range f.stats {
		f.stats[i] = native.RequestStats{CompletionTokens: -999, Finish: "poisoned"}
	}
	for i := range f.outs {
		f.outs[i] = native.Output{ID: 1 << 60}
	}
	f.toks, f.stats, f.outs = f.toks[:0], f.stats[:0], f.outs[:0]
}

func (f *fakeEngine) Submit(prompt []int32, p native.Params) (native.ID, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.poison()
	if f.panicSub {
		panic("fake engine: injected panic in Submit")
	}
	switch {
	case len(prompt) == 0 || len(prompt) >= f.info.ContextLength:
		return 0, &native.Error{Status: native.StatusArg, Msg: "prompt: bad length"}
	case p.MaxTokens < 1:
		return 0, &native.Error{Status: native.StatusArg, Msg: "max_tokens < 1"}
	case len(f.waiting) >= f.cfg.MaxWaiting:
		return 0, &native.Error{Status: native.StatusFull, Msg: "waiting queue full"}
	}
	f.next++
	f.submitted++
	gen := f.gen
	var out []int32
	if gen == nil {
		out = echo(prompt, p.StopTokens)
	} else {
		out = gen(prompt)
	}
	r := &fakeReq{id: f.next, prompt: slices.Clone(prompt), p: p, out: out}
	r.p.StopTokens = slices.Clone(p.StopTokens)
	r.stats = native.RequestStats{ArrivalNS: p.ArrivalNS, PromptTokens: len(prompt)}
	f.waiting = append(f.waiting, r)
	return r.id, nil
}

func (f *fakeEngine) Step() ([]native.Output, error) {
	f.mu.Lock()
	f.poison()
	f.stepCalls++
	if f.failAt > 0 && f.stepCalls >= f.failAt {
		f.mu.Unlock()
		return nil, errors.New("fake engine: injected failure")
	}
	if f.panicAt > 0 && f.stepCalls == f.panicAt {
		f.mu.Unlock()
		panic("fake engine: injected panic")
	}
	for len(f.running) < f.cfg.BMax && len(f.waiting) > 0 {
		r := f.waiting[0]
		f.waiting = f.waiting[1:]
		r.stats.AdmittedNS = native.Now()
		r.stats.PrefillTokens = len(r.prompt)
		f.running = append(f.running, r)
	}
	if len(f.running) == 0 {
		f.mu.Unlock()
		return nil, nil
	}
	delay, hold := f.stepDelay, f.hold
	f.mu.Unlock()
	if hold != nil {
		<-hold
	}
	start := native.Now()
	if delay > 0 {
		time.Sleep(delay)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	now := native.Now()
	batch := len(f.running)
	f.maxBatch = max(f.maxBatch, batch)
	for len(f.decodeTime) <= batch {
		f.decodeTime = append(f.decodeTime, native.TimeCost{})
	}
	f.decodeTime[batch].Count++
	f.decodeTime[batch].Sum += float64(now-start) / 1e9
	f.records = append(f.records, native.StepRecord{Phase: native.PhaseDecode, BatchSize: batch, Tokens: batch, DurationUS: (now - start) / 1000})
	if n := batch * max(f.runLen, 1); cap(f.toks) < n {
		f.toks = make([]int32, 0, n)
	}
	keep := f.running[:0]
	for _, r := range f.running {
		from := len(f.toks)
		finish := ""
		for k := 0; k < max(f.runLen, 1); k++ {
			n := r.stats.CompletionTokens
			tok := int32('z')
			if n < len(r.out) {
				tok = r.out[n]
			}
			f.toks = append(f.toks, tok)
			r.stats.CompletionTokens++
			if tok == native.TokEOS || slices.Contains(r.p.StopTokens, tok) {
				finish = native.FinishStop
			} else if r.stats.CompletionTokens >= r.p.MaxTokens || len(r.prompt)+r.stats.CompletionTokens >= f.info.ContextLength {
				finish = native.FinishLength
			}
			if finish != "" {
				break
			}
		}
		if r.stats.FirstTokenNS == 0 {
			r.stats.FirstTokenNS = now
		}
		r.stats.LastTokenNS = now
		r.stats.DecodeTokens = r.stats.CompletionTokens - 1
		r.emit = append(r.emit, now)
		o := native.Output{ID: r.id, Tokens: f.toks[from:len(f.toks):len(f.toks)], Finish: finish}
		if finish != "" {
			r.stats.FinishNS, r.stats.Finish, r.stats.EmitNS = now, finish, r.emit
			f.stats = append(f.stats, r.stats)
			f.finished++
		} else {
			keep = append(keep, r)
		}
		f.outs = append(f.outs, o)
	}
	f.running = keep
	// Stats pointers are taken once f.stats stops growing.
	si := 0
	for i := range f.outs {
		if f.outs[i].Finish != "" {
			f.outs[i].Stats = &f.stats[si]
			si++
		}
	}
	return f.outs, nil
}

func (f *fakeEngine) Cancel(id native.ID) (*native.RequestStats, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.poison()
	for _, q := range []*[]*fakeReq{&f.waiting, &f.running} {
		for i, r := range *q {
			if r.id != id {
				continue
			}
			*q = slices.Delete(*q, i, i+1)
			f.cancelled = append(f.cancelled, id)
			r.stats.FinishNS, r.stats.Finish, r.stats.EmitNS = native.Now(), native.FinishAbort, r.emit
			r.stats.DecodeTokens = max(0, r.stats.CompletionTokens-1)
			f.stats = append(f.stats, r.stats)
			return &f.stats[len(f.stats)-1], nil
		}
	}
	return nil, &native.Error{Status: native.StatusNotFound, Msg: "no such request"}
}

func (f *fakeEngine) Load() (running, waiting int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.running), len(f.waiting)
}

func (f *fakeEngine) Snapshot(dst *native.Snapshot) {
	f.mu.Lock()
	defer f.mu.Unlock()
	dst.DecodeTimeByBatchSize = slices.Clone(f.decodeTime)
	dst.RequestsFinished = f.finished
	dst.Running, dst.Waiting, dst.Slots = len(f.running), len(f.waiting), f.cfg.BMax
	dst.KVBlocksTotal = f.cfg.KVBlocks
	dst.Steps = append(dst.Steps[:0], f.records...)
	f.records = f.records[:0]
}

// observe runs fn with the fake's lock held, for tests reading observations.
func (f *fakeEngine) observe(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn()
}

// SetTokenBytes accepts the token bytes: the fake writes scripted answers
// and enforces no grammar, so tests of how answers are written (tool
// calls) run on it.
func (f *fakeEngine) SetTokenBytes(tokens [][]byte) error { return nil }
