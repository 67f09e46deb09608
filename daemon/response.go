package daemon

import (
	"strconv"

	"github.com/picometer/picometer/schema"
)

// This file: usage_test.go, json_test.go and server_test.go cover it (usage
// and its extra, responses and chunks decoded back with encoding/json);
// TestChunkAllocs locks its allocations.

// respMeta is what every response and chunk of one request repeats.
type respMeta struct {
	id              string
	op              string
	model           string
	created         int64
	promptTokens    int
	tokenIDs        bool           // return_token_ids
	includeUsage    bool           // stream_options.include_usage
	continuousUsage bool           // stream_options.continuous_usage_stats
	resp            *responsesMeta // a /v1/responses request; nil otherwise
	tools           *toolsMeta     // the answer may hold tool calls (tools.go); nil otherwise

	// logprobs: the choice's logprobs are written (top alternatives
	// each), token strings by codec. lp is the log-probabilities of the
	// tokens being appended, set by the writer before each append, and
	// lpOff the text offset (completions' text_offset) of their first.
	logprobs bool
	topN     int
	codec    *codec
	lp       lpRun
	lpOff    int
}

// lpRun is the log-probabilities of a run of tokens (outBuf's, sliced).
type lpRun struct {
	lps    []float32
	topIDs []int32
	topLPs []float32
}

// run slices b's log-probabilities of the tokens [from, to) for m.
func (m *respMeta) run(b *outBuf, from, to int) lpRun {
	if !m.logprobs || len(b.lps) < to || len(b.topIDs) < to*m.topN {
		return lpRun{}
	}
	return lpRun{b.lps[from:to], b.topIDs[from*m.topN : to*m.topN], b.topLPs[from*m.topN : to*m.topN]}
}

// usageExtra is usage.extra: the request's own metrics, computed from the
// facts its request event carries (schema.RequestBody), in seconds and
// tokens per second. Definitions (DESIGN.md decision 3, MLC-LLM):
//
// Every time is on the engine's monotonic clock, from arrival: the moment
// the daemon has read the whole HTTP request and its handler starts.
//
//	ttft_s                   arrival → first output token left the engine (queue + prefill)
//	time_per_output_token_s  (last token − first token) / (completion tokens − 1); 0 with one token
//	itl_mean_s, itl_max_s    mean and largest gap between consecutive engine steps that emitted
//	                         tokens for the request (the request event's ITL gaps, which the
//	                         sidecar observes one by one in the ITL histogram); 0 with one step
//	e2e_s                    arrival → finish
//	queue_s                  arrival → admission into an engine slot
//	prefill_s                admission → first token
//	decode_s                 first token → finish
//	prefill_tokens_per_s     prefill tokens / prefill_s (MLC-LLM)
//	decode_tokens_per_s      decode tokens / decode_s (MLC-LLM)
//	inter_token_latency_s    e2e_s / completion tokens (MLC-LLM's definition, not the ITL histogram)
//	prompt/prefill/decode_tokens, draft_tokens, accepted_tokens, accept_rate (accepted / draft)
//	cached_tokens            prompt tokens whose K/V the prefix cache held (as prompt_tokens_details)
//	mask_s                   time the engine spent computing the grammar's token masks (0 unconstrained)
//	masked_tokens            tokens sampled under a mask
//	constraint_compile_s     compiling the request's grammar (0: unconstrained, or found in the cache)
//
// A time whose moment never came (no first token: queue_s of a request
// never admitted) is 0.
func appendUsage(dst []byte, b *schema.RequestBody, extra bool) []byte {
	dst = append(dst, `{"prompt_tokens":`...)
	dst = strconv.AppendInt(dst, int64(b.PromptTokens), 10)
	dst = append(dst, `,"completion_tokens":`...)
	dst = strconv.AppendInt(dst, int64(b.CompletionTokens), 10)
	dst = append(dst, `,"total_tokens":`...)
	dst = strconv.AppendInt(dst, int64(b.PromptTokens+b.CompletionTokens), 10)
	dst = append(dst, `,"prompt_tokens_details":{"cached_tokens":`...)
	dst = strconv.AppendInt(dst, int64(b.CachedTokens), 10)
	dst = append(dst, '}')
	if extra {
		dst = appendUsageExtra(dst, b)
	}
	return append(dst, '}')
}

// appendUsageExtra appends usage.extra (see appendUsage) as a field:
// ,"extra":{…}.
func appendUsageExtra(dst []byte, b *schema.RequestBody) []byte {
	s := func(us int64) float64 { return float64(max(us, 0)) / 1e6 }
	tpot := 0.0
	if b.CompletionTokens > 1 && b.FirstTokenUS >= 0 {
		tpot = s(b.LastTokenUS-b.FirstTokenUS) / float64(b.CompletionTokens-1)
	}
	prefill, decode := 0.0, 0.0
	if b.FirstTokenUS >= 0 {
		decode = s(b.FinishUS - b.FirstTokenUS)
		if b.AdmittedUS >= 0 {
			prefill = s(b.FirstTokenUS - b.AdmittedUS)
		}
	}
	acceptRate := 0.0
	if b.DraftTokens > 0 {
		acceptRate = float64(b.AcceptedTokens) / float64(b.DraftTokens)
	}
	var itlSum, itlMax int64
	for _, g := range b.ITLUS {
		itlSum += g
		itlMax = max(itlMax, g)
	}
	itlMean := 0.0
	if len(b.ITLUS) > 0 {
		itlMean = s(itlSum) / float64(len(b.ITLUS))
	}
	m := b.MLCMetrics()
	dst = append(dst, `,"extra":{"ttft_s":`...)
	dst = appendFloat(dst, s(b.FirstTokenUS))
	dst = append(dst, `,"time_per_output_token_s":`...)
	dst = appendFloat(dst, tpot)
	dst = append(dst, `,"itl_mean_s":`...)
	dst = appendFloat(dst, itlMean)
	dst = append(dst, `,"itl_max_s":`...)
	dst = appendFloat(dst, s(itlMax))
	dst = append(dst, `,"e2e_s":`...)
	dst = appendFloat(dst, s(b.FinishUS))
	dst = append(dst, `,"queue_s":`...)
	dst = appendFloat(dst, s(b.AdmittedUS))
	dst = append(dst, `,"prefill_s":`...)
	dst = appendFloat(dst, prefill)
	dst = append(dst, `,"decode_s":`...)
	dst = appendFloat(dst, decode)
	dst = append(dst, `,"prefill_tokens_per_s":`...)
	dst = appendFloat(dst, m.PrefillTokensPerS)
	dst = append(dst, `,"decode_tokens_per_s":`...)
	dst = appendFloat(dst, m.DecodeTokensPerS)
	dst = append(dst, `,"inter_token_latency_s":`...)
	dst = appendFloat(dst, m.InterTokenLatencyS)
	dst = append(dst, `,"prefill_tokens":`...)
	dst = strconv.AppendInt(dst, int64(b.PrefillTokens), 10)
	dst = append(dst, `,"decode_tokens":`...)
	dst = strconv.AppendInt(dst, int64(b.DecodeTokens), 10)
	dst = append(dst, `,"draft_tokens":`...)
	dst = strconv.AppendInt(dst, int64(b.DraftTokens), 10)
	dst = append(dst, `,"accepted_tokens":`...)
	dst = strconv.AppendInt(dst, int64(b.AcceptedTokens), 10)
	dst = append(dst, `,"cached_tokens":`...)
	dst = strconv.AppendInt(dst, int64(b.CachedTokens), 10)
	dst = append(dst, `,"accept_rate":`...)
	dst = appendFloat(dst, acceptRate)
	dst = append(dst, `,"mask_s":`...)
	dst = appendFloat(dst, s(b.MaskUS))
	dst = append(dst, `,"masked_tokens":`...)
	dst = strconv.AppendInt(dst, int64(b.MaskedTokens), 10)
	dst = append(dst, `,"constraint_compile_s":`...)
	dst = appendFloat(dst, s(b.CompileUS))
	dst = append(dst, '}')
	return dst
}

// appendRunningUsage appends the usage of a stream so far (vLLM's
// continuous_usage_stats).
func appendRunningUsage(dst []byte, prompt, completion int) []byte {
	dst = append(dst, `{"prompt_tokens":`...)
	dst = strconv.AppendInt(dst, int64(prompt), 10)
	dst = append(dst, `,"completion_tokens":`...)
	dst = strconv.AppendInt(dst, int64(completion), 10)
	dst = append(dst, `,"total_tokens":`...)
	dst = strconv.AppendInt(dst, int64(prompt+completion), 10)
	return append(dst, '}')
}

func appendFloat(dst []byte, v float64) []byte {
	return strconv.AppendFloat(dst, v, 'g', -1, 64)
}

func (m *respMeta) appendHead(dst []byte, object string) []byte {
	dst = append(dst, `{"id":`...)
	dst = appendJSONString(dst, m.id)
	dst = append(dst, `,"object":"`...)
	dst = append(dst, object...)
	dst = append(dst, `","created":`...)
	dst = strconv.AppendInt(dst, m.created, 10)
	dst = append(dst, `,"model":`...)
	dst = appendJSONString(dst, m.model)
	return dst
}

// appendTextChoice appends the head of a text completion (a response or a
// chunk: the same object) up to its choice's text.
func (m *respMeta) appendTextChoice(dst, text []byte) []byte {
	dst = m.appendHead(dst, "text_completion")
	dst = append(dst, `,"choices":[{"index":0,"text":`...)
	return appendJSONString(dst, text)
}

// appendChoiceTail closes a choice after its text or message: logprobs,
// the finish reason and, when asked, the token ids.
func (m *respMeta) appendChoiceTail(dst []byte, toks []int32, finish string) []byte {
	dst = append(dst, `,"logprobs":`...)
	dst = m.appendLogprobs(dst, toks)
	dst = append(dst, `,"finish_reason":`...)
	dst = appendJSONNullString(dst, finish)
	if m.tokenIDs {
		dst = append(dst, `,"token_ids":`...)
		dst = appendTokenIDs(dst, toks)
	}
	return append(dst, '}')
}

// appendResponse appends a whole (non-streamed) response.
func (m *respMeta) appendResponse(dst, text []byte, toks []int32, finish string, b *schema.RequestBody) []byte {
	if m.op == schema.OpChat {
		var calls []parsedCall
		if m.tools != nil {
			text, calls = m.tools.parseCalls(text, finish)
			if len(calls) > 0 && finish == schema.FinishStop {
				finish = finishToolCalls
			}
		}
		dst = m.appendHead(dst, "chat.completion")
		dst = append(dst, `,"choices":[{"index":0,"message":{"role":"assistant","content":`...)
		if len(calls) > 0 && len(text) == 0 {
			dst = append(dst, "null"...)
		} else {
			dst = appendJSONString(dst, text)
		}
		if len(calls) > 0 {
			dst = appendToolCalls(dst, calls)
		}
		dst = append(dst, '}')
	} else {
		dst = m.appendTextChoice(dst, text)
	}
	dst = m.appendChoiceTail(dst, toks, finish)
	dst = append(dst, `],"usage":`...)
	dst = appendUsage(dst, b, true)
	return append(dst, '}')
}

// appendChunk appends one server-sent event carrying a chunk: text (a
// delta for chat), the run's token ids when asked, a finish reason on the
// last chunk, and the usage so far when continuous usage is asked.
// completion is the number of tokens streamed so far.
func (m *respMeta) appendChunk(dst, text []byte, toks []int32, finish string, completion int) []byte {
	dst = append(dst, "data: "...)
	if m.op == schema.OpChat {
		dst = m.appendHead(dst, "chat.completion.chunk")
		dst = append(dst, `,"choices":[{"index":0,"delta":{`...)
		if len(text) > 0 || finish == "" {
			dst = append(dst, `"content":`...)
			dst = appendJSONString(dst, text)
		}
		dst = append(dst, '}')
	} else {
		dst = m.appendTextChoice(dst, text)
	}
	dst = m.appendChoiceTail(dst, toks, finish)
	dst = append(dst, ']')
	switch {
	case m.continuousUsage:
		dst = append(dst, `,"usage":`...)
		dst = appendRunningUsage(dst, m.promptTokens, completion)
	case m.includeUsage:
		dst = append(dst, `,"usage":null`...)
	}
	return append(dst, "}\n\n"...)
}

// appendRoleChunk appends the first chunk of a chat stream.
func (m *respMeta) appendRoleChunk(dst []byte) []byte {
	dst = append(dst, "data: "...)
	dst = m.appendHead(dst, "chat.completion.chunk")
	dst = append(dst, `,"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]`...)
	switch {
	case m.continuousUsage:
		dst = append(dst, `,"usage":`...)
		dst = appendRunningUsage(dst, m.promptTokens, 0)
	case m.includeUsage:
		dst = append(dst, `,"usage":null`...)
	}
	return append(dst, "}\n\n"...)
}

// appendUsageChunk appends the final usage chunk (stream_options.include_usage).
func (m *respMeta) appendUsageChunk(dst []byte, b *schema.RequestBody) []byte {
	dst = append(dst, "data: "...)
	if m.op == schema.OpChat {
		dst = m.appendHead(dst, "chat.completion.chunk")
	} else {
		dst = m.appendHead(dst, "text_completion")
	}
	dst = append(dst, `,"choices":[],"usage":`...)
	dst = appendUsage(dst, b, true)
	return append(dst, "}\n\n"...)
}

// appendErrorEvent appends an error as a server-sent event, for a stream
// whose 200 header has been sent.
func appendErrorEvent(dst []byte, e *apiError) []byte {
	dst = append(dst, "data: "...)
	dst = e.appendJSON(dst)
	return append(dst, "\n\n"...)
}

const sseDone = "data: [DONE]\n\n"

// appendLogprobs appends a choice's logprobs for toks (m.lp), in OpenAI's
// shape for chat ({"content":[{"token","logprob","bytes","top_logprobs"}]})
// or for completions ({"tokens","token_logprobs","top_logprobs",
// "text_offset"}); null when they were not asked or toks is empty. A
// token's string is its text (a control token's included; bytes that are
// no UTF-8 character become U+FFFD there, and bytes has them exactly).
func (m *respMeta) appendLogprobs(dst []byte, toks []int32) []byte {
	lp := m.lp
	if !m.logprobs || len(toks) == 0 || len(lp.lps) != len(toks) || len(lp.topIDs) != len(toks)*m.topN {
		return append(dst, "null"...)
	}
	if m.op == schema.OpChat {
		dst = append(dst, `{"content":[`...)
		for i, t := range toks {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = m.appendTokenLogprob(dst, t, lp.lps[i])
			dst = dst[:len(dst)-1]
			dst = append(dst, `,"top_logprobs":[`...)
			for k := 0; k < m.topN; k++ {
				if k > 0 {
					dst = append(dst, ',')
				}
				dst = m.appendTokenLogprob(dst, lp.topIDs[i*m.topN+k], lp.topLPs[i*m.topN+k])
			}
			dst = append(dst, "]}"...)
		}
		return append(dst, `],"refusal":null}`...)
	}
	dst = append(dst, `{"tokens":[`...)
	for i, t := range toks {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendJSONString(dst, m.codec.piece(t))
	}
	dst = append(dst, `],"token_logprobs":[`...)
	for i := range toks {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendFloat(dst, float64(lp.lps[i]))
	}
	dst = append(dst, `],"top_logprobs":[`...)
	for i := range toks {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '{')
		for k := 0; k < m.topN; k++ {
			if k > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONString(dst, m.codec.piece(lp.topIDs[i*m.topN+k]))
			dst = append(dst, ':')
			dst = appendFloat(dst, float64(lp.topLPs[i*m.topN+k]))
		}
		dst = append(dst, '}')
	}
	dst = append(dst, `],"text_offset":[`...)
	for i, t := range toks {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendInt(dst, int64(m.lpOff), 10)
		m.lpOff += len(m.codec.piece(t))
	}
	return append(dst, "]}"...)
}

// appendTokenLogprob appends {"token","logprob","bytes"} for token t.
func (m *respMeta) appendTokenLogprob(dst []byte, t int32, lp float32) []byte {
	p := m.codec.piece(t)
	dst = append(dst, `{"token":`...)
	dst = appendJSONString(dst, p)
	dst = append(dst, `,"logprob":`...)
	dst = appendFloat(dst, float64(lp))
	dst = append(dst, `,"bytes":[`...)
	for i, b := range p {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendInt(dst, int64(b), 10)
	}
	return append(dst, "]}"...)
}
