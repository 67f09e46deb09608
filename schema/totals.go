package schema

import (
	"fmt"
	"math"
)

// This file is the cumulative request state of one boot: what a daemon has
// served since it started, in the exact form the sidecar exports it (token
// counters, requests by finish reason and error type, and every request
// histogram bucketed with the families' bounds). The daemon adds each
// finished request to its totals and sends them in a totals event after
// every hello and with every engine snapshot; the sidecar adds each request
// event it receives to its copy of the boot's totals with the same
// [RequestTotals.Add], and raises that copy to each totals event it
// receives. So a sidecar that crashed, hung or restarted, or missed events,
// exports the daemon's own numbers again at the next totals event.
// totals_test.go covers it.

// KindTotals is the kind of a totals event.
const KindTotals = "totals"

// Request histograms, in the order of [OpTotals.Hists] on the wire.
const (
	HistTTFT = iota
	HistTimePerOutputToken
	HistRequestDuration // requests that did not fail; failures are in OpTotals.DurationByError
	HistInterTokenLatency
	HistQueue
	HistPrefill
	HistDecode
	HistPromptLength
	HistGenLength
	NumRequestHists
)

// RequestHistFamilies are the family IDs of the request histograms, by
// Hist* index.
var RequestHistFamilies = [NumRequestHists]string{IDTTFT, IDTimePerOutputToken, IDRequestDuration,
	IDInterTokenLatency, IDQueueDuration, IDPrefillDuration, IDDecodeDuration, IDRequestPromptLength, IDRequestGenLength}

// requestHistBounds are the bucket bounds of the request histograms, by
// Hist* index (from their families).
var requestHistBounds = func() (b [NumRequestHists][]float64) {
	for i, id := range RequestHistFamilies {
		for _, f := range Families { // before init's index: package variables come first
			if f.ID == id {
				b[i] = f.Buckets
			}
		}
		if b[i] == nil {
			panic("BUG: schema: request histogram " + id + " has no family with buckets")
		}
	}
	return b
}()

// RequestHistBounds returns the bucket bounds of request histogram h.
func RequestHistBounds(h int) []float64 { return requestHistBounds[h] }

// BucketIndex returns the bucket of v in a histogram with the given upper
// bounds: the first bound >= v (Prometheus' le), or len(bounds) for +Inf.
// It is the one bucketing rule of request histograms, in the daemon's
// totals and in the sidecar alike.
func BucketIndex(bounds []float64, v float64) int {
	i := 0
	for i < len(bounds) && v > bounds[i] {
		i++
	}
	return i
}

// Hist is a cumulative histogram: the observations per bucket (not
// cumulative; len(bounds)+1 of them, the last is +Inf) and their sum. An
// empty Counts means no observation.
type Hist struct {
	Counts []uint64 `json:"counts"`
	Sum    float64  `json:"sum"`
}

// Count returns the number of observations.
func (h *Hist) Count() uint64 {
	var n uint64
	for _, c := range h.Counts {
		n += c
	}
	return n
}

// Observe adds v to h (bounds are h's). Negative values and NaN are
// ignored (the decoder never produces them).
func (h *Hist) Observe(bounds []float64, v float64) {
	if !(v >= 0) {
		return
	}
	if h.Counts == nil {
		h.Counts = make([]uint64, len(bounds)+1)
	}
	h.Counts[BucketIndex(bounds, v)]++
	h.Sum += v
}

// OpTotals are the cumulative request totals of one operation.
type OpTotals struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	// Finished counts requests by finish reason, in [FinishReasons] order.
	Finished []int64 `json:"finished"`
	// Failed counts failed and aborted requests by error type, in
	// [ErrorTypes] order.
	Failed []int64 `json:"failed"`
	// Hists are the request histograms, by Hist* index.
	Hists []Hist `json:"hists"`
	// DurationByError is the request duration of failed and aborted
	// requests, by error type in [ErrorTypes] order.
	DurationByError []Hist `json:"duration_by_error"`
	// TTFTCache is the time to first token by prefix-cache outcome, in
	// [CacheOutcomes] order: Hists[HistTTFT] split by [CacheOutcome], which
	// the sidecar exports (the cache attribute). Hists[HistTTFT] stays on
	// the wire, so a sidecar that predates the split still reads the TTFT.
	// Absent from daemons that predate it: the sidecar then takes
	// Hists[HistTTFT] as misses, as it takes their request events (which
	// carry no cached_tokens).
	TTFTCache []Hist `json:"ttft_cache,omitempty"`
}

// TotalsBody is the payload of a totals event: the boot's cumulative
// request totals, by operation in [AttrOperation] order.
type TotalsBody struct {
	Ops []OpTotals `json:"ops"`
	// Constraints are the constrained-decoding totals (issue 26); absent
	// from daemons that predate them (then nothing is raised).
	Constraints *ConstraintTotals `json:"constraints,omitempty"`
}

// ConstraintTotals are the cumulative constrained-decoding totals of one
// boot (all operations).
type ConstraintTotals struct {
	// Requests counts constrained requests by kind and outcome:
	// Requests[k*len(ConstraintOutcomes)+o] for Constraints[k] and
	// ConstraintOutcomes[o].
	Requests []int64 `json:"requests"`
	// ToolCalls counts parsed tool calls by format, in ToolFormats order.
	ToolCalls []int64 `json:"tool_calls"`
	// Compile is the compile-duration histogram by kind (Constraints order),
	// Mask the mask time per step.
	Compile []Hist `json:"compile"`
	Mask    Hist   `json:"mask"`
}

// NewConstraintTotals returns empty constraint totals of the right shape.
func NewConstraintTotals() *ConstraintTotals {
	c := &ConstraintTotals{Requests: make([]int64, len(Constraints)*len(ConstraintOutcomes)),
		ToolCalls: make([]int64, len(ToolFormats)), Compile: make([]Hist, len(Constraints))}
	for i := range c.Compile {
		c.Compile[i].Counts = make([]uint64, len(StepDurationBuckets)+1)
	}
	c.Mask.Counts = make([]uint64, len(MaskBuckets)+1)
	return c
}

// addConstraint adds a request's constraint facts to c.
func (c *ConstraintTotals) add(r *RequestBody) {
	if k := indexIn(Constraints, r.Constraint); k >= 0 {
		if o := indexIn(ConstraintOutcomes, ConstraintOutcome(r)); o >= 0 {
			c.Requests[k*len(ConstraintOutcomes)+o]++
		}
		if r.CompileUS > 0 {
			c.Compile[k].Observe(StepDurationBuckets, us(r.CompileUS))
		}
		if r.MaskedTokens > 0 {
			c.Mask.Observe(MaskBuckets, us(r.MaskUS)/float64(r.MaskedTokens))
		}
	}
	if f := indexIn(ToolFormats, r.ToolFormat); f >= 0 && r.ToolCalls > 0 {
		c.ToolCalls[f] += int64(r.ToolCalls)
	}
}

func (c *ConstraintTotals) validate() error {
	if len(c.Requests) != len(Constraints)*len(ConstraintOutcomes) || len(c.ToolCalls) != len(ToolFormats) || len(c.Compile) != len(Constraints) {
		return invalid("constraints: wrong shape")
	}
	for _, v := range append(append([]int64(nil), c.Requests...), c.ToolCalls...) {
		if v < 0 || v > MaxCumulative {
			return invalid("constraints: count %d not in 0..%d", v, int64(MaxCumulative))
		}
	}
	for k := range c.Compile {
		if err := c.Compile[k].validate(StepDurationBuckets); err != nil {
			return invalid("constraints.compile[%s]: %v", Constraints[k], err)
		}
	}
	if err := c.Mask.validate(MaskBuckets); err != nil {
		return invalid("constraints.mask: %v", err)
	}
	return nil
}

// Totals is the event a daemon sends after every hello and with every
// engine snapshot: everything it has served since it started.
type Totals struct {
	Header
	TotalsBody
}

// NewTotals returns empty totals of the right shape.
func NewTotals() TotalsBody {
	t := TotalsBody{Ops: make([]OpTotals, len(AttrOperation.Values))} // Constraints: made by the first constrained request
	for i := range t.Ops {
		o := &t.Ops[i]
		o.Finished = make([]int64, len(FinishReasons))
		o.Failed = make([]int64, len(ErrorTypes))
		o.Hists = make([]Hist, NumRequestHists)
		for h := range o.Hists {
			o.Hists[h].Counts = make([]uint64, len(requestHistBounds[h])+1)
		}
		o.DurationByError = make([]Hist, len(ErrorTypes)) // counts made at the first failure of each type
		o.TTFTCache = make([]Hist, len(CacheOutcomes))
		for c := range o.TTFTCache {
			o.TTFTCache[c].Counts = make([]uint64, len(TTFTBuckets)+1)
		}
	}
	return t
}

// RequestErrorType is the error type a request's duration and failure are
// counted under: its own on an error or abort (an abort without one is
// [ErrOther]), "" when it did not fail.
func RequestErrorType(r *RequestBody) string {
	if r.FinishReason != FinishError && r.FinishReason != FinishAbort {
		return ""
	}
	if r.ErrorType == "" {
		return ErrOther
	}
	return r.ErrorType
}

func us(v int64) float64 { return float64(v) / 1e6 }

// Add adds one finished request of an engine with KV-cache blocks of
// blockSize tokens to t, which must have [NewTotals]' shape: one
// observation per histogram the request reaches (the time to first token
// under its [CacheOutcome] too), one per ITL gap, its tokens, its finish
// reason and its error type. It allocates only at the
// first failure of each error type. A request that would not pass
// validation (its operation or finish reason outside their sets; a daemon
// never makes one) is left out and Add returns false; an error type outside
// its set counts as [ErrOther].
func (t *TotalsBody) Add(r *RequestBody, blockSize int) bool {
	op, f := indexIn(AttrOperation.Values, r.Operation), indexIn(FinishReasons, r.FinishReason)
	if op < 0 || f < 0 {
		return false
	}
	o := &t.Ops[op]
	obs := func(h int, v float64) { o.Hists[h].Observe(requestHistBounds[h], v) }
	if r.AdmittedUS >= 0 {
		obs(HistQueue, us(r.AdmittedUS))
	}
	if r.FirstTokenUS >= 0 {
		obs(HistTTFT, us(r.FirstTokenUS))
		o.TTFTCache[indexIn(CacheOutcomes, CacheOutcome(r, blockSize))].Observe(TTFTBuckets, us(r.FirstTokenUS))
		if r.AdmittedUS >= 0 {
			obs(HistPrefill, us(r.FirstTokenUS-r.AdmittedUS))
		}
		obs(HistDecode, us(r.FinishUS-r.FirstTokenUS))
		if r.CompletionTokens >= 2 {
			obs(HistTimePerOutputToken, us(r.LastTokenUS-r.FirstTokenUS)/float64(r.CompletionTokens-1))
		}
	}
	for _, g := range r.ITLUS {
		obs(HistInterTokenLatency, us(g))
	}
	if et := RequestErrorType(r); et == "" {
		obs(HistRequestDuration, us(r.FinishUS))
	} else {
		e := indexIn(ErrorTypes, et)
		if e < 0 {
			e = indexIn(ErrorTypes, ErrOther)
		}
		o.DurationByError[e].Observe(requestHistBounds[HistRequestDuration], us(r.FinishUS))
		o.Failed[e]++
	}
	o.PromptTokens += int64(r.PromptTokens)
	o.CompletionTokens += int64(r.CompletionTokens)
	if r.AdmittedUS >= 0 {
		obs(HistPromptLength, float64(r.PromptTokens))
		obs(HistGenLength, float64(r.CompletionTokens))
	}
	o.Finished[f]++
	if r.Constraint != "" || r.ToolCalls > 0 {
		if t.Constraints == nil {
			t.Constraints = NewConstraintTotals()
		}
		t.Constraints.add(r)
	}
	return true
}

// Requests returns the number of requests in t (all finish reasons).
func (t *TotalsBody) Requests() int64 {
	var n int64
	for i := range t.Ops {
		for _, c := range t.Ops[i].Finished {
			n += c
		}
	}
	return n
}

func opIndex(op string) int { return indexIn(AttrOperation.Values, op) }

// indexIn returns the index of v in values, or -1.
func indexIn(values []string, v string) int {
	for i, x := range values {
		if x == v {
			return i
		}
	}
	return -1
}

// MaxCumulativeObservedSum bounds a cumulative histogram sum in a totals
// event: token lengths reach MaxCumulative * MaxTokens at most.
const MaxCumulativeObservedSum = float64(MaxCumulative) * MaxTokens

func (b *TotalsBody) validate() error {
	if b.Constraints != nil {
		if err := b.Constraints.validate(); err != nil {
			return err
		}
	}
	if len(b.Ops) != len(AttrOperation.Values) {
		return invalid("ops: %d entries, want %d (%v)", len(b.Ops), len(AttrOperation.Values), AttrOperation.Values)
	}
	for i := range b.Ops {
		o := &b.Ops[i]
		op := AttrOperation.Values[i]
		if o.PromptTokens < 0 || o.PromptTokens > MaxCumulative || o.CompletionTokens < 0 || o.CompletionTokens > MaxCumulative {
			return invalid("ops[%s]: prompt_tokens %d or completion_tokens %d not in 0..%d", op, o.PromptTokens, o.CompletionTokens, int64(MaxCumulative))
		}
		for _, c := range []struct {
			name string
			v    []int64
			n    int
		}{{"finished", o.Finished, len(FinishReasons)}, {"failed", o.Failed, len(ErrorTypes)}} {
			if len(c.v) != c.n {
				return invalid("ops[%s].%s: %d entries, want %d", op, c.name, len(c.v), c.n)
			}
			for j, v := range c.v {
				if v < 0 || v > MaxCumulative {
					return invalid("ops[%s].%s[%d]: %d not in 0..%d", op, c.name, j, v, int64(MaxCumulative))
				}
			}
		}
		if len(o.Hists) != NumRequestHists {
			return invalid("ops[%s].hists: %d entries, want %d", op, len(o.Hists), NumRequestHists)
		}
		for h := range o.Hists {
			if err := o.Hists[h].validate(requestHistBounds[h]); err != nil {
				return invalid("ops[%s].hists[%s]: %v", op, RequestHistFamilies[h], err)
			}
		}
		if len(o.DurationByError) != len(ErrorTypes) {
			return invalid("ops[%s].duration_by_error: %d entries, want %d", op, len(o.DurationByError), len(ErrorTypes))
		}
		for e := range o.DurationByError {
			if err := o.DurationByError[e].validate(requestHistBounds[HistRequestDuration]); err != nil {
				return invalid("ops[%s].duration_by_error[%s]: %v", op, ErrorTypes[e], err)
			}
		}
		if err := o.validateTTFTCache(); err != nil {
			return invalid("ops[%s].ttft_cache: %v", op, err)
		}
	}
	return nil
}

// validateTTFTCache checks that TTFTCache, when present, holds one TTFT
// histogram per cache outcome whose bucket counts add up to Hists[HistTTFT]'s
// (the daemon adds each request to both). The sums are not compared: the
// same values added in another order may differ in the last bit.
func (o *OpTotals) validateTTFTCache() error {
	if o.TTFTCache == nil {
		return nil
	}
	if len(o.TTFTCache) != len(CacheOutcomes) {
		return histError(fmt.Sprintf("%d entries, want %d (%v)", len(o.TTFTCache), len(CacheOutcomes), CacheOutcomes))
	}
	sum := make([]uint64, len(TTFTBuckets)+1)
	for c := range o.TTFTCache {
		h := &o.TTFTCache[c]
		if err := h.validate(TTFTBuckets); err != nil {
			return histError(CacheOutcomes[c] + ": " + err.Error())
		}
		for i, n := range h.Counts {
			sum[i] += n // each below 2^53: no wrap
		}
	}
	all := o.Hists[HistTTFT].Counts
	for i, n := range sum {
		var want uint64
		if all != nil {
			want = all[i]
		}
		if n != want {
			return histError(fmt.Sprintf("bucket %d: the outcomes count %d, hists[ttft] %d", i, n, want))
		}
	}
	return nil
}

type histError string

func (e histError) Error() string { return string(e) }

func (h *Hist) validate(bounds []float64) error {
	if len(h.Counts) == 0 {
		if h.Sum != 0 {
			return histError("a sum without counts")
		}
		return nil
	}
	if len(h.Counts) != len(bounds)+1 {
		return histError("counts has the wrong number of buckets")
	}
	var n uint64
	for _, c := range h.Counts {
		if c > MaxCumulative || n+c > MaxCumulative {
			return histError("counts above 2^53")
		}
		n += c
	}
	if !(h.Sum >= 0 && h.Sum <= MaxCumulativeObservedSum) || math.IsInf(h.Sum, 0) {
		return histError("sum out of range")
	}
	return nil
}
