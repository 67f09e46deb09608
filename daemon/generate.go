package daemon

import (
	"bufio"
	"math/rand/v2"

	"github.com/picometer/picometer/native"
	"github.com/picometer/picometer/schema"
	"github.com/valyala/fasthttp"
)

// This file is generation: a completion or chat request from its body to
// its answer (generate), fitted to the context (fitContext), and answered
// whole or handed to the stream (respond). server_test.go, openai_test.go
// and e2e_test.go cover it over real HTTP.

// emitError sends the request event of a request that failed before the
// engine saw it (s is not submitted: only its id, operation, stream flag,
// arrival, trace and, when read, parameters are set).
func (d *Daemon) emitError(s *seq, e *apiError) {
	body := requestBody(s, nil, schema.FinishError, e.Kind, d.clock())
	d.sink.Request(&schema.Request{RequestBody: body})
}

// failedSeq is the seq of a request refused before its body was read.
func failedSeq(id, op string, stream bool, arrival int64, tw traceWire) *seq {
	s := &seq{id: id, op: op, stream: stream, trace: tw}
	s.params.ArrivalNS = arrival
	return s
}

// Endpoints that generate.
type endpoint uint8

const (
	epCompletions endpoint = iota // POST /v1/completions
	epChat                        // POST /v1/chat/completions
	epResponses                   // POST /v1/responses (a chat, answered as a Responses object)
)

// op is the endpoint's gen_ai.operation.name.
func (ep endpoint) op() string {
	if ep == epCompletions {
		return schema.OpTextCompletion
	}
	return schema.OpChat
}

func (d *Daemon) generate(ctx *fasthttp.RequestCtx, ep endpoint) {
	arrival := d.clock()
	tc := d.sampler.newTrace(&ctx.Request.Header)
	tw := tc.wire(d.wall().UnixNano())
	op := ep.op()
	reqID, idErr := d.requestID(ctx)
	id := idPrefix(op) + reqID
	if ep == epResponses {
		id = "resp_" + reqID
	}
	defer setTraceHeaders(ctx, &tc, reqID) // after any error body (which resets the response)
	var r genRequest
	var s *seq // once submitted, the loop sends its request event
	paramsRead := false
	fs := func() *seq { // the event of a request that failed before submission
		f := failedSeq(id, op, r.Stream, arrival, tw)
		if paramsRead {
			f.params, f.paramsRead = s.params, true
		}
		return f
	}
	defer func() {
		if p := recover(); p != nil {
			e := d.bug(ctx, p)
			if s != nil {
				d.loop.cancel(s, schema.ErrOther)
			} else {
				d.emitError(fs(), e)
			}
		}
	}()
	fail := func(e *apiError) {
		e.write(ctx)
		if e.Status == fasthttp.StatusMethodNotAllowed {
			ctx.Response.Header.Set("Allow", "POST")
		}
		f := fs()
		switch {
		case e.Constraint != "": // the constraint itself was refused
			f.constraint = e.Constraint
		case r.Constraint != nil: // a constrained request refused for another reason
			f.constraint = r.Constraint.kind
		}
		d.emitError(f, e)
	}
	if idErr != nil {
		fail(idErr)
		return
	}
	if !ctx.IsPost() {
		fail(errMethod(ctx.Method(), "POST"))
		return
	}
	if e := d.auth(ctx); e != nil {
		fail(e)
		return
	}
	var e *apiError
	switch ep {
	case epChat:
		e = decodeChatVocab(ctx.PostBody(), &r, d.codec.size)
	case epResponses:
		e = decodeResponses(ctx.PostBody(), &r, d.codec.size)
	default:
		e = decodeCompletionVocab(ctx.PostBody(), &r, d.codec.size)
	}
	if e == nil {
		e = d.codec.prompt(&r)
	}
	if e == nil {
		e = d.codec.toolConstraint(&r)
	}
	var grammar *native.Grammar
	var compileNS int64
	if e == nil {
		grammar, compileNS, e = d.compileConstraint(r.Constraint)
	}
	if e != nil {
		fail(e)
		return
	}
	if r.Model != "" && r.Model != d.model {
		fail(errModelNotFound(r.Model, d.model))
		return
	}
	var rm *responsesMeta
	if r.Responses {
		rm = newResponsesMeta(id, &r)
	}
	if e := d.fitContext(&r); e != nil {
		fail(e)
		return
	}
	if d.draining.Load() {
		fail(errShuttingDown)
		return
	}
	s = newSeq()
	s.id, s.op, s.stream, s.prompt, s.codec = id, op, r.Stream, r.Prompt, d.codec
	s.trace, s.paramsRead = tw, true
	s.stop = newStopMatcher(r.Stop)
	if r.Constraint != nil {
		s.constraint, s.compileNS = r.Constraint.kind, compileNS
	}
	if r.Tools.active() {
		s.tools = &toolsMeta{format: d.codec.toolFormat}
	}
	s.params = native.Params{MaxTokens: r.MaxTokens, Temperature: r.Temperature, TopK: r.TopK, TopP: r.TopP,
		Seed: r.Seed, ArrivalNS: arrival,
		PresencePenalty: r.PresencePenalty, FrequencyPenalty: r.FrequencyPenalty, RepetitionPenalty: r.RepetitionPenalty,
		Logprobs: r.Logprobs, TopLogprobs: r.TopLogprobs, MinP: r.MinP, Grammar: grammar}
	if !r.HasSeed {
		s.params.Seed = rand.Uint64()
	}
	if op == schema.OpChat {
		s.params.StopTokens = d.codec.stops
	}
	s.deadline = arrival + int64(d.cfg.RequestTimeout)
	paramsRead = true
	if e := d.loop.submit(s); e != nil {
		fail(e)
		s = nil
		return
	}
	m := respMeta{id: id, op: op, model: d.model, created: d.wall().Unix(), promptTokens: len(r.Prompt),
		tokenIDs: r.ReturnTokenIDs, includeUsage: r.IncludeUsage, continuousUsage: r.ContinuousUsage, resp: rm,
		logprobs: r.Logprobs, topN: r.TopLogprobs, codec: d.codec}
	if r.Tools.active() {
		m.tools = &toolsMeta{format: d.codec.toolFormat}
	}
	if r.Stream {
		ctx.SetStatusCode(fasthttp.StatusOK)
		ctx.SetContentType("text/event-stream")
		ctx.Response.Header.Set("Cache-Control", "no-cache")
		ctx.Response.Header.Set("X-Accel-Buffering", "no")
		ctx.Response.ImmediateHeaderFlush = true
		conn := ctx.Conn()
		if rm != nil {
			ctx.SetBodyStreamWriter(func(w *bufio.Writer) { d.streamResponse(w, conn, s, &m) })
		} else {
			ctx.SetBodyStreamWriter(func(w *bufio.Writer) { d.stream(w, conn, s, &m) })
		}
		return
	}
	d.respond(ctx, s, &m)
}

// fitContext checks the prompt against the context and resolves max_tokens.
// A prompt must leave room for one token. Like vLLM and OpenAI, an explicit
// max_tokens that does not fit with the prompt is a 400, not clamped; when
// max_tokens is absent it is 16 for completions (OpenAI's default) and the
// whole room left for chat, in both cases clamped to the room left.
func (d *Daemon) fitContext(r *genRequest) *apiError {
	n := len(r.Prompt)
	if n >= d.ctxLen {
		return badRequest(r.PromptParam, "context_length_exceeded",
			"This model's maximum context length is %d tokens. However, your %s resulted in %d tokens; at most %d leave room for one output token.",
			d.ctxLen, r.PromptParam, n, d.ctxLen-1)
	}
	room := d.ctxLen - n
	switch {
	case r.MaxTokens == 0 && r.Op == schema.OpTextCompletion:
		r.MaxTokens = min(16, room)
	case r.MaxTokens == 0:
		r.MaxTokens = room
	case r.MaxTokens > room:
		return badRequest(r.MaxTokensParam, "context_length_exceeded",
			"This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the %s, %d in the completion). Please reduce the length of the %s or completion.",
			d.ctxLen, n+r.MaxTokens, n, r.PromptParam, r.MaxTokens, r.PromptParam)
	}
	return nil
}

// respond waits for a non-streamed request and writes its response. A
// client that disconnects meanwhile cancels the request (see [waiter]).
func (d *Daemon) respond(ctx *fasthttp.RequestCtx, s *seq, m *respMeta) {
	var part, all outBuf
	var res result
	w := waiter{d: d, s: s, conn: ctx.Conn()}
	defer w.stop()
	for {
		w.wait()
		var done bool
		done, res = s.take(&part)
		all.text = append(all.text, part.text...)
		all.toks = append(all.toks, part.toks...)
		all.lps = append(all.lps, part.lps...)
		all.topIDs = append(all.topIDs, part.topIDs...)
		all.topLPs = append(all.topLPs, part.topLPs...)
		if done {
			break
		}
	}
	if res.err != nil {
		res.err.write(ctx)
		return
	}
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetContentType("application/json")
	if m.resp != nil {
		ctx.SetBody(m.appendResponseObject(nil, all.text, res.finish, &res.body))
		return
	}
	m.lp = m.run(&all, 0, len(all.toks))
	ctx.SetBody(m.appendResponse(nil, all.text, all.toks, res.finish, &res.body))
}
