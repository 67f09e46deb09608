package daemon

import (
	"sync"

	"github.com/picometer/picometer/native"
	"github.com/picometer/picometer/schema"
)

// This file: server_test.go, utf8_test.go and e2e_test.go cover it (streams,
// hold-back and stop strings end to end).

// seq is one generation request on its way through the engine loop. The
// handler fills the first block and submits it; from then on the loop owns
// the middle block and hands output over through the mutex-guarded last
// block, signalling notify (never blocking: a slow client only makes its
// own buffer grow, bounded by max_tokens).
type seq struct {
	// Set by the handler before submission, read-only afterwards.
	id       string // response id (cmpl-… / chatcmpl-…)
	op       string // schema.OpTextCompletion or schema.OpChat
	stream   bool
	prompt   []int32
	codec    *codec // the model's tokens → text (nil: the byte vocabulary)
	params   native.Params
	deadline int64     // clock reading at which the loop aborts the request
	trace    traceWire // the request's span, as its event carries it
	// paramsRead: the body was read and params hold what the engine runs
	// with (the event's max_tokens, temperature, top_p).
	paramsRead bool
	// Constraints (issue 26): the constraint kind ("" for none), the time
	// compiling its grammar took (0: cached), and the tool-call format when
	// the answer may hold calls (nil otherwise).
	constraint string
	compileNS  int64
	tools      *toolsMeta

	submitted chan *apiError // the loop's answer to the submission (buffered)
	notify    chan struct{}  // cap 1: new output or completion

	// Loop-owned.
	engID   native.ID
	utf8    utf8Hold
	stop    stopMatcher
	bytes   []byte // scratch: the byte tokens of one run
	text    []byte // scratch: the text of one run
	matched bool   // a stop string was seen
	ntoks   int    // tokens received from the engine
	answer  []byte // the whole answer, kept when it may hold tool calls

	mu   sync.Mutex
	out  outBuf
	done bool
	res  result
}

// outBuf is output not yet taken by the handler: text and tokens, and
// where each engine run ends in them (one streamed chunk per run).
type outBuf struct {
	text []byte
	toks []int32
	runs []runEnd
	// With logprobs asked: per token its log-probability, and its top
	// alternatives (stride: the request's top_logprobs).
	lps    []float32
	topIDs []int32
	topLPs []float32
}

// runEnd is the cumulative end of one run in an outBuf.
type runEnd struct{ text, toks int }

func (b *outBuf) reset() {
	b.text, b.toks, b.runs = b.text[:0], b.toks[:0], b.runs[:0]
	b.lps, b.topIDs, b.topLPs = b.lps[:0], b.topIDs[:0], b.topLPs[:0]
}

// result is how a request ended.
type result struct {
	finish string    // schema.FinishStop, FinishLength, FinishAbort or FinishError
	err    *apiError // set when finish is abort or error
	body   schema.RequestBody
}

func newSeq() *seq {
	return &seq{submitted: make(chan *apiError, 1), notify: make(chan struct{}, 1)}
}

// consume turns one engine run into text (UTF-8 hold-back, then stop
// strings) and hands both over. It reports whether a stop string was seen.
// toks (and o's log-probabilities, when o is not nil) are engine-owned and
// copied.
func (s *seq) consume(toks []int32, o *native.Output) bool {
	s.ntoks += len(toks)
	s.bytes = s.bytes[:0]
	c := s.codec
	if c == nil {
		c = bytesCodec
	}
	for _, t := range toks {
		s.bytes = c.appendText(s.bytes, t)
	}
	s.text = s.utf8.Append(s.text[:0], s.bytes)
	var out []byte
	out, s.matched = s.stop.Append(s.bytes[:0], s.text)
	s.bytes = out
	s.push(out, toks, o)
	return s.matched
}

// flushText hands over what is still held back when a request ends
// normally: an incomplete character (as U+FFFD) and a tail that did not
// become a stop string.
func (s *seq) flushText() {
	if s.matched {
		return
	}
	s.text = s.utf8.Flush(s.text[:0])
	var out []byte
	out, _ = s.stop.Append(s.bytes[:0], s.text)
	out = s.stop.Flush(out)
	s.bytes = out
	if len(out) > 0 {
		s.push(out, nil, nil)
	}
}

func (s *seq) push(text []byte, toks []int32, o *native.Output) {
	if s.tools != nil {
		s.answer = append(s.answer, text...)
	}
	s.mu.Lock()
	s.out.text = append(s.out.text, text...)
	s.out.toks = append(s.out.toks, toks...)
	if o != nil && s.params.Logprobs && len(o.Logprobs) == len(toks) {
		s.out.lps = append(s.out.lps, o.Logprobs...)
		for i := range toks {
			if n := min(o.TopN, s.params.TopLogprobs); n > 0 {
				s.out.topIDs = append(s.out.topIDs, o.TopIDs[i*native.MaxTopLogprobs:][:n]...)
				s.out.topLPs = append(s.out.topLPs, o.TopLogprobs[i*native.MaxTopLogprobs:][:n]...)
			}
		}
	}
	s.out.runs = append(s.out.runs, runEnd{len(s.out.text), len(s.out.toks)})
	s.mu.Unlock()
	s.signal()
}

func (s *seq) complete(r result) {
	s.mu.Lock()
	s.done, s.res = true, r
	s.mu.Unlock()
	s.signal()
}

func (s *seq) signal() {
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// take swaps the pending output into dst (whose old storage s reuses) and
// reports whether the request has ended, with how.
func (s *seq) take(dst *outBuf) (bool, result) {
	dst.reset()
	s.mu.Lock()
	s.out, *dst = *dst, s.out
	done, res := s.done, s.res
	s.mu.Unlock()
	return done, res
}
