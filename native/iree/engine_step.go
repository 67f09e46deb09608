//go:build iree && cgo

package iree

import (
	"cmp"
	"math"
	"slices"

	"github.com/picometer/picometer/native"
)

// This file: the IREE engine's step (admission, prefill calls, the decode
// call, token choice and delivery) and its metrics, which follow the C
// engine's definitions (native.Snapshot) so the daemon's events and the
// sidecar's metrics mean the same on either backend.

// Step runs one scheduler iteration: admit waiting requests into free
// slots, advance every prefilling slot by up to PrefillChunk tokens (one
// @step call per token position, all prefilling slots batched), then run
// one @step call for every decoding slot that did not prefill in this
// step. It returns an Output for every request that emitted a token;
// (nil, nil) with nothing to do. An error means the engine failed.
func (e *Engine) Step() ([]native.Output, error) {
	if e.mod == nil {
		return nil, &engError{native.StatusState, "engine is closed"}
	}
	if r, w := e.Load(); r+w == 0 {
		return nil, nil
	}
	e.outs, e.emitted = e.outs[:0], e.emitted[:0]
	now := native.Now()
	for len(e.waiting) > 0 {
		s := e.freeSlot()
		if s == nil {
			break
		}
		r := e.waiting[0]
		e.waiting = slices.Delete(e.waiting, 0, 1)
		e.admit(r, s, now)
	}
	for i := range e.slots {
		e.slots[i].busy, e.slots[i].emitted = false, false
	}
	if err := e.prefill(); err != nil {
		return nil, err
	}
	if err := e.decode(); err != nil {
		return nil, err
	}
	e.stamp()
	if len(e.outs) == 0 {
		return nil, nil
	}
	return e.outs, nil
}

// collect returns the slots in state st not busy, oldest admission first.
func (e *Engine) collect(st slotState, dst []*slot) []*slot {
	dst = dst[:0]
	for i := range e.slots {
		if s := &e.slots[i]; s.state == st && !s.busy {
			dst = append(dst, s)
		}
	}
	slices.SortFunc(dst, func(a, b *slot) int { return cmp.Compare(a.order, b.order) })
	return dst
}

func (e *Engine) prefill() error {
	order := e.collect(slotPrefill, e.scratch[:0])
	if len(order) == 0 {
		return nil
	}
	t0 := native.Now()
	total := 0
	for _, s := range order {
		s.busy = true
		s.start = s.pos
		s.end = min(s.r.nPrompt, s.pos+e.cfg.PrefillChunk)
		total += s.end - s.start
	}
	for {
		rows := e.rows[:0]
		for _, s := range order {
			if s.pos < s.end {
				rows = append(rows, s)
			}
		}
		if len(rows) == 0 {
			break
		}
		for _, s := range rows {
			e.setRow(s.i, s.r.seq[s.pos], s.pos)
		}
		if err := e.forward(rows); err != nil {
			return err
		}
		for _, s := range rows {
			s.pos++
			if s.pos == s.r.nPrompt {
				e.choose(s)
				s.state = slotDecode
			}
		}
	}
	t1 := native.Now()
	for _, s := range order {
		s.r.st.PrefillTokens += s.end - s.start
		if s.emitted {
			e.deliver(s)
		}
	}
	e.met.prefillNS += t1 - t0
	e.met.prefillTokens += int64(total)
	e.met.record(native.PhasePrefill, len(order), total, t1-t0)
	return nil
}

func (e *Engine) decode() error {
	rows := e.collect(slotDecode, e.rows[:0])
	if len(rows) == 0 {
		return nil
	}
	t0 := native.Now()
	for _, s := range rows {
		e.setRow(s.i, s.r.seq[len(s.r.seq)-1], s.pos)
	}
	if err := e.forward(rows); err != nil {
		return err
	}
	for _, s := range rows {
		s.pos++
		e.choose(s)
		s.r.st.DecodeTokens++
	}
	t1 := native.Now()
	for _, s := range rows {
		e.deliver(s)
	}
	n, d := len(rows), t1-t0
	e.met.decodeNS += d
	e.met.decodeTokens += int64(n)
	e.met.decodeByBS[n].add(d)
	e.met.record(native.PhaseDecode, n, n, d)
	return nil
}

// setRow puts token tok at position pos into batch row i of the next call.
func (e *Engine) setRow(i int, tok int32, pos int) {
	s := e.sh
	copy(e.hx[i*s.Dim:(i+1)*s.Dim], e.emb[int(tok)*s.Dim:])
	h2 := s.HeadDim / 2
	for j, f := range e.ropeFreq {
		sin, cos := math.Sincos(float64(pos) * f)
		e.hcos[i*h2+j], e.hsin[i*h2+j] = float32(cos), float32(sin)
	}
	m := e.hmask[i*s.Context : (i+1)*s.Context]
	for t := range m {
		m[t] = 0
		if t >= pos {
			m[t] = -1e30
		}
	}
	e.live[i] = true
}

// forward runs @step on the rows set since the last call (the other rows
// get a zero embedding and a full mask), reads the logits, and writes each
// row's new k and v into its slot's cache at its position (rows[i].pos).
func (e *Engine) forward(rows []*slot) error {
	s := e.sh
	h2 := s.HeadDim / 2
	for i, live := range e.live {
		if live {
			continue
		}
		clear(e.hx[i*s.Dim : (i+1)*s.Dim])
		for j := 0; j < h2; j++ {
			e.hcos[i*h2+j], e.hsin[i*h2+j] = 1, 0
		}
		m := e.hmask[i*s.Context : (i+1)*s.Context]
		for t := range m {
			m[t] = -1e30
		}
	}
	clear(e.live)
	for _, w := range []struct {
		b Buffer
		d []float32
	}{{e.x, e.hx}, {e.cs, e.hcos}, {e.sn, e.hsin}, {e.mask, e.hmask}} {
		if err := e.mod.Write(w.b, 0, w.d); err != nil {
			return err
		}
	}
	if _, err := e.mod.Invoke(e.step, e.args); err != nil {
		return err
	}
	if err := e.mod.ReadResult(0, e.logits); err != nil {
		return err
	}
	hd := s.HeadDim
	for l := 0; l < s.Layers; l++ {
		for j, cache := range []Buffer{e.kc[l], e.vc[l]} {
			if err := e.mod.ReadResult(1+2*l+j, e.kv); err != nil {
				return err
			}
			// The caches are head-major: row (slot, kv head) p holds that
			// head's [Context][HeadDim].
			for _, r := range rows {
				for h := 0; h < s.KVHeads; h++ {
					p := r.i*s.KVHeads + h
					src := e.kv[(p)*hd : (p+1)*hd]
					if err := e.mod.Write(cache, (p*s.Context+r.pos)*hd, src); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

// choose picks slot s's next token from its logits row and appends it.
func (e *Engine) choose(s *slot) {
	r := s.r
	V := e.sh.Vocab
	l := e.sam.penalize(&r.p, r.seq, r.nPrompt, e.logits[s.i*V:(s.i+1)*V])
	tok := e.sam.draw(&r.p, &r.rng, l)
	if r.p.Logprobs {
		s.lp[0] = logprobs(r.p.Temperature, l, tok, r.p.TopLogprobs, s.topID[:], s.topLP[:])
	}
	r.seq = append(r.seq, tok)
	r.st.CompletionTokens++
	s.tok[0], s.fin, s.emitted = tok, "", true
	switch {
	case tok == e.info.EOS || slices.Contains(r.p.StopTokens, tok):
		s.fin = native.FinishStop
	case r.st.CompletionTokens >= r.p.MaxTokens || len(r.seq) >= e.cfg.Context:
		s.fin = native.FinishLength
	}
}

// deliver publishes what slot s emitted, and finishes its request if done.
func (e *Engine) deliver(s *slot) {
	r := s.r
	o := native.Output{ID: r.id, Tokens: s.tok[:], Finish: s.fin}
	if r.p.Logprobs {
		k := r.p.TopLogprobs
		o.Logprobs, o.TopN, o.TopIDs, o.TopLogprobs = s.lp[:], k, s.topID[:k], s.topLP[:k]
	}
	if s.fin != "" {
		o.Stats = &r.st
		e.finish(r, s.fin)
	}
	e.outs = append(e.outs, o)
	e.outReqs = append(e.outReqs[:len(e.outs)-1], r)
}

// stamp gives every output of the step the step's end time as its emit
// (and finish) time, as the C engine does.
func (e *Engine) stamp() {
	if len(e.outs) == 0 {
		return
	}
	t := native.Now()
	for i := range e.outs {
		r := e.outReqs[i]
		if r.st.FirstTokenNS == 0 {
			r.st.FirstTokenNS = t
		}
		r.st.LastTokenNS = t
		if len(r.emit) < cap(r.emit) {
			r.emit = append(r.emit, t)
		}
		r.st.EmitNS = r.emit
		if e.outs[i].Finish != "" {
			e.met.finishedAt(&r.st, t)
		}
	}
}

// timeCost is MLC-LLM's TimeCost: the first sample is a warm-up.
type timeCost struct {
	warm       bool
	count, sum int64
}

func (c *timeCost) add(ns int64) {
	if !c.warm {
		c.warm = true
		return
	}
	c.count++
	c.sum += ns
}

// metrics are the engine's counters, as the C engine's pm_engine_metrics.
type metrics struct {
	prefillNS, decodeNS                          int64
	promptTokens, completionTokens               int64
	prefillTokens, decodeTokens                  int64
	requestsFinished, stepsDropped               int64
	last                                         native.RequestStats
	hasLast                                      bool
	decodeByBS                                   []timeCost // [BMax+1]
	ring                                         []native.StepRecord
	head, n                                      int
	blockSize, blocksPerSlot, slots, contextSize int
}

func (m *metrics) init(cfg native.Config) {
	m.decodeByBS = make([]timeCost, cfg.BMax+1)
	m.ring = make([]native.StepRecord, cfg.StepRing)
	m.blockSize, m.slots = cfg.BlockSize, cfg.BMax
	m.blocksPerSlot = (cfg.Context + cfg.BlockSize - 1) / cfg.BlockSize
}

// record appends a step record; a full ring drops (and counts) the oldest.
func (m *metrics) record(phase string, batch, tokens int, ns int64) {
	var rec *native.StepRecord
	if m.n == len(m.ring) {
		rec = &m.ring[m.head]
		m.head = (m.head + 1) % len(m.ring)
		m.stepsDropped++
	} else {
		rec = &m.ring[(m.head+m.n)%len(m.ring)]
		m.n++
	}
	*rec = native.StepRecord{Phase: phase, BatchSize: batch, Tokens: tokens, DurationUS: ns / 1000}
}

// finishedAt stamps st's finish time; it is now the last finished request.
func (m *metrics) finishedAt(st *native.RequestStats, t int64) {
	st.FinishNS = t
	m.last, m.hasLast = *st, true
	m.last.EmitNS = nil
}

// Snapshot writes the cumulative metrics and live gauges into dst and
// moves the step records since the previous snapshot into dst.Steps (see
// native.Snapshot). KV blocks are BlockSize-token units of the slots'
// reserved rows: the total is BMax*ceil(Context/BlockSize), the used ones
// cover each slot's cached tokens.
func (e *Engine) Snapshot(dst *native.Snapshot) {
	m := &e.met
	sec := func(ns int64) float64 { return float64(ns) / 1e9 }
	dst.EnginePrefillTimeSum = sec(m.prefillNS)
	dst.EngineDecodeTimeSum = sec(m.decodeNS)
	dst.EngineDraftTimeSum, dst.EngineVerifyTimeSum = 0, 0
	dst.PromptTokensSum, dst.CompletionTokensSum = m.promptTokens, m.completionTokens
	dst.PrefillTokensSum, dst.DecodeTokensSum = m.prefillTokens, m.decodeTokens
	dst.Preemptions = 0
	dst.RequestsFinished, dst.StepsDropped = m.requestsFinished, m.stepsDropped
	dst.LastFinished, dst.HasLastFinished = m.last, m.hasLast
	dst.SpecDecode = nil
	dst.DecodeTimeByBatchSize = dst.DecodeTimeByBatchSize[:0]
	dst.DraftTimeByBatchSize = dst.DraftTimeByBatchSize[:0]
	dst.VerifyTimeByBatchSize = dst.VerifyTimeByBatchSize[:0]
	for _, c := range m.decodeByBS {
		dst.DecodeTimeByBatchSize = append(dst.DecodeTimeByBatchSize, native.TimeCost{Count: c.count, Sum: sec(c.sum)})
		dst.DraftTimeByBatchSize = append(dst.DraftTimeByBatchSize, native.TimeCost{})
		dst.VerifyTimeByBatchSize = append(dst.VerifyTimeByBatchSize, native.TimeCost{})
	}
	dst.Steps = dst.Steps[:0]
	for i := 0; i < m.n; i++ {
		dst.Steps = append(dst.Steps, m.ring[(m.head+i)%len(m.ring)])
	}
	m.head, m.n = 0, 0
	dst.Running, dst.Waiting = e.Load()
	dst.Slots = m.slots
	dst.KVBlocksTotal = m.slots * m.blocksPerSlot
	dst.KVBlocksUsed = 0
	for i := range e.slots {
		if s := &e.slots[i]; s.state != slotFree {
			dst.KVBlocksUsed += (s.pos + m.blockSize - 1) / m.blockSize
		}
	}
}
