// Package daemon is picometerd: an OpenAI-compatible HTTP server (fasthttp)
// over picometer's native engine, which streams NDJSON metric events to the
// sidecar's unix socket.
//
// # Endpoints
//
//	POST /v1/completions       prompt: a string, a list of one string, a list of token ids,
//	                           or a list of one list of token ids
//	POST /v1/chat/completions  messages with system (or developer), user and assistant roles
//	POST /v1/responses         the text subset of OpenAI's Responses API (responses.go):
//	                           input (a string or message items), instructions,
//	                           max_output_tokens, temperature, top_p, stream; a chat
//	                           (gen_ai.operation.name "chat") answered as a Responses
//	                           object or its server-sent events (responses_stream.go);
//	                           GET /v1/responses/{id} is a 404: no response is stored
//	GET  /v1/models            the one model served (and GET /v1/models/{id})
//	POST /tokenize             vLLM's: a prompt or messages to the model's token ids (count,
//	                           max_model_len, tokens, token_strs when return_token_strs)
//	POST /detokenize           vLLM's: token ids to text (tokenize_endpoints.go)
//	GET  /health               liveness: {"status":"ok"}; 503 when shutting down or after an engine failure
//	GET  /ready                readiness: {"status":"ready","model":…} once the model is loaded and
//	                           while the engine loop steps; 503 shutting_down, engine_failed, or
//	                           engine_stalled when no loop iteration ended for max(5 s, 5 × the
//	                           snapshot interval) (endpoints.go)
//	GET  /debug/engine_metrics a fresh engine snapshot in MLC-LLM's EngineMetrics shape
//	                           (schema.EngineBody), with the emitter's events_dropped
//
// Both generation endpoints take max_tokens (max_completion_tokens for
// chat), temperature (0..2; 0 is greedy), top_p ((0,1]), top_k (-1 or 0 =
// all), seed, stop (a string or up to 16 strings), stream,
// stream_options.include_usage, user (accepted, unused), model (absent or
// empty means the served model; another name is a 404), and vLLM's
// extensions return_token_ids (the token ids of each choice or chunk) and
// stream_options.continuous_usage_stats (usage so far in every chunk).
// presence_penalty and frequency_penalty (-2..2, OpenAI's: a token the
// output holds c times loses c*frequency + presence from its logit) and
// vLLM's repetition_penalty ((0, 10]; 1 is off: the logit of a prompt or
// output token is divided by it when positive, multiplied when negative)
// are applied in the engine per request, before temperature; greedy
// output stays batch-invariant with them.
// logprobs and top_logprobs (0..20; top_logprobs needs logprobs true) on
// chat and logprobs (0..5) on completions return, per output token
// (control tokens and a stop string's tokens included, as token_ids),
// OpenAI's logprobs objects, streamed chunk by chunk or whole: the
// log-softmax of the logits the engine sampled the token from (after the
// penalties and temperature, 1 when greedy; before top-k/top-p). A token's
// string is its text; bytes that are no character show as U+FFFD there,
// and bytes (chat) has them exactly; completions' text_offset counts
// token bytes.
// n ≠ 1, best_of ≠ 1, echo, suffix, logit_bias, the deprecated functions
// and non-text content are rejected with a 400 naming the parameter, and
// so is every other server's sampling or constraint field picometer does
// not implement (foreign.go lists them); unknown fields are ignored, as
// OpenAI-compatible servers do.
//
// # Constraints and tools
//
// response_format, text.format, vLLM's guided_* and structured_outputs,
// llama.cpp's grammar and json_schema, SGLang's regex, TGI's grammar
// object and Ollama's format become one GBNF grammar (constraint.go, the
// package constraint), compiled and cached (grammar.go) and enforced by
// the engine's token masks. tools, tool_choice and parallel_tool_calls
// (tools.go) render through the chat template, and with tool_choice
// other than "none" the answer is held to the model's own tool-call
// format (read from the template) and parsed back into tool_calls or
// function_call items. A constraint that does not translate or compile is
// a 400 naming the field and the schema keyword.
//
// # Tokens, context and usage
//
// The tokenizer and chat template come from the model file (tokenize.go,
// package tokenizer): a model with a real vocabulary (tokenizer.ggml.model
// gpt2 or llama) tokenizes text prompts with it (BOS/EOS as its
// add_bos_token/add_eos_token say; special-token text in a text prompt is
// that token, as vLLM and llama.cpp's server read it) and renders chats with its
// tokenizer.chat_template; special tokens the template writes are single
// tokens, their text inside a message's content is text. The chat_template
// config key (--chat-template) replaces the file's template. A template
// that fails (raise_exception, or one the Jinja engine cannot parse) is a
// 400 with param messages naming the template's error; a model whose
// template cannot be parsed still loads and serves completions. /tokenize
// renders tools and tool messages as chat completions do (chat.go:
// decodeToolCalls, decodeTools). A chat turn stops at the
// vocabulary's EOS, EOT or EOM; usage.prompt_tokens counts the rendered
// prompt's tokens. An unknown tokenizer model or pre-tokenizer stops Run.
//
// Models with picometer's byte vocabulary (native/vocab.go, what mkmodel
// writes without -tokenizer): a text prompt is <|bos|> and its UTF-8
// bytes. The chat template is:
//
//	<|bos|>
//	for each message:  <|system|> | <|user|> | <|assistant|>   (by role; developer → <|system|>)
//	                   the UTF-8 bytes of its content
//	                   <|end|>
//	<|assistant|>
//
// A chat turn stops at <|end|> or <|eos|>. Control tokens produce no text.
// A prompt must leave room for one output token (else 400, param prompt or
// messages, code context_length_exceeded). An explicit max_tokens that does
// not fit beside the prompt is a 400 (as vLLM and OpenAI do); without one,
// completions default to 16 tokens (OpenAI's default) and chat to the room
// left, both clamped to the room left.
//
// usage.completion_tokens counts every token the engine generated for the
// request, control tokens included. With a stop string, that includes the
// tokens that spelled it and any the same engine step produced after it
// (a speculative step emits up to spec_k+1): they are counted and returned
// in token_ids, but cut from the text. So usage.completion_tokens always
// equals the number of token ids returned. usage.extra carries the
// request's own metrics (see appendUsage for their definitions).
//
// # Text
//
// Output bytes that are not yet a whole UTF-8 character are held back until
// they are, so a streamed character is never split; bytes that can never
// become one are replaced by U+FFFD at once (one per maximal ill-formed
// subpart), and an incomplete character left at the end becomes U+FFFD.
// Stop strings are matched on that text, across runs; the text up to the
// stop string is returned, finish_reason is "stop", and the request is
// cancelled in the engine at once. Streams send one chunk per engine run
// that produced text (or tokens, when token ids or continuous usage are
// asked), then a chunk with the finish reason, the usage chunk when asked,
// and data: [DONE].
//
// # Errors
//
// Errors are OpenAI-shaped {"error":{"message","type","param","code"}}:
// 400 invalid_request_error, 401 authentication_error (when api_keys are
// set; /v1/*, /tokenize and /detokenize), 404 not_found_error, 405 with an Allow header, 413 for a
// body over max_body_bytes (before the body is sent when the client asks
// Expect: 100-continue; otherwise after reading and discarding up to 64 MiB
// of it, so that the client reads the 413 rather than a connection reset),
// 429 rate_limit_error (code queue_full, with
// Retry-After: 1) when the engine's waiting queue is full (429 rather than
// 503: the server is healthy, the client should retry later), 500
// server_error on an engine failure, 503 while shutting down, 504 (code
// timeout) when a request's deadline passes. An error after a stream's
// header went out is sent as an error event followed by data: [DONE]. Every
// failed completion request is also a request event (finish_reason error or
// abort, with its error type).
//
// # Trace context (trace.go)
//
// A generation request's W3C traceparent (and tracestate) make it a span in
// the caller's trace; an invalid traceparent starts a new root trace and an
// invalid tracestate is dropped (the W3C rules), never an error. Sampling
// is decided here (tracing.sampler, OTEL_TRACES_SAMPLER; parent-based
// always-on by default). Every answer, error or not, carries traceresponse
// (00-trace-span-flags, the request's own span) and X-Request-Id: the one
// sent, which becomes the response id's suffix (cmpl-ID, chatcmpl-ID,
// resp_ID; an invalid one, not 1..128 of [A-Za-z0-9-_.:~+/=@], is a 400
// with param X-Request-Id), or the daemon's own. The ids go on the request
// event; the sidecar builds and exports the span. The API's other requests
// (/tokenize, /detokenize, /v1/models, /v1/models/{id}, /v1/responses/{id},
// an unknown route) continue the caller's trace the same way and answer
// both headers, with traceresponse's sampled flag clear: they have no
// request event, so no span is recorded for them. Probes and scrape
// endpoints (/health, /ready, /metrics, /debug/engine_metrics) carry neither.
//
// # Engine loop, deadlines, disconnects
//
// One goroutine owns the engine (see loop). Requests reach it over a
// channel; each request's output is handed back through its own buffer, so
// a slow client never slows the loop or other requests. Deadlines
// (request_timeout) are enforced by the loop, not by socket write timeouts,
// which would cut long streams. A client that disconnects cancels its
// request (finish reason abort, error type cancelled): a stream notices at
// the next chunk's Flush; a request with nothing to write (non-streamed,
// or a stream still queued or prefilling) peeks at its socket every 100 ms
// (recv with MSG_PEEK, which consumes nothing) and notices the client's
// FIN or reset. A client that stops reading a response, streamed or not,
// is disconnected after stream_stall_timeout (a write deadline armed
// before each response and each batch of chunks). Limits: a client that half-closes its sending side
// after the request counts as gone (as in Go's net/http); one that has
// pipelined another request before leaving, or whose host vanished without
// a FIN, is not noticed before its deadline; on platforms other than Linux
// only Flush errors are noticed.
//
// # Logs
//
// log/slog text records on stderr, like the sidecar's, at log_level
// (default info). Nothing is logged per request at info or above unless
// something is wrong; fasthttp's per-connection errors (a malformed
// request, a body over the limit) are debug records. A failure logged is
// counted too: a failed request in its request event, a lost event as a
// sequence gap, in events_dropped or in events_write_failed (and its
// request counts come back with the next totals event). Only the log reports fasthttp's
// server-wide warnings (accept errors, the connection limit) and the
// events still queued when the final flush times out at shutdown.
//
// # Metrics events and shutdown
//
// See [Emitter]. Delivery loses no request count (issue 13): the emitter
// keeps the boot's cumulative request totals (schema.TotalsBody: token
// counters, requests by finish reason and error type, every request
// histogram bucketed with schema's bounds) and sends them in a totals event
// after every hello and right after every engine snapshot. A totals event
// holds exactly the requests numbered before it and every request dropped
// so far, so a sidecar that crashed, hung, restarted or missed events
// exports this daemon's own numbers again after the next snapshot, without
// counting any request twice. Acknowledged delivery with a replay buffer was
// the alternative and was not taken: an acknowledgement cannot bring back
// what a killed sidecar had aggregated and nobody had scraped. A request
// costs the emitter one schema.TotalsBody.Add in its writer goroutine (no
// allocation); a totals event is about 3 KB of JSON per snapshot interval.
// What stays lost is counted: events dropped at the queue (events_dropped),
// events in a batch whose write failed (events_write_failed, both in the
// next engine snapshot), and, for a dropped snapshot, its step records.
//
// The emitter connects only to a socket file owned by the
// daemon's own uid, or by a uid or gid in metrics.trusted_uids /
// metrics.trusted_gids (socket_owner.go): a socket another local user made
// first at that path (a squatter's) gets no events; the daemon logs why and
// retries with its backoff, events queuing as when the sidecar is away.
//
// On SIGINT/SIGTERM the daemon stops accepting, lets in-flight requests
// finish for shutdown_grace, aborts the rest (error type shutdown), emits a
// final engine snapshot and flushes it within metrics.flush_timeout.
//
// # JSON
//
// Request bodies are decoded with github.com/goccy/go-json (openai.go,
// chat.go), chosen by measurement: BenchmarkJSONSideBySide runs the JSON
// work of the request decoder and of encoding a chat response with
// encoding/json and goccy in alternating rounds under the same load. Medians
// of 5 runs (2-core shared machine), goccy's speedup over encoding/json:
// decoding a completion request 2.64×, a chat request 2.97×, encoding a
// response 2.42×. Both exceed the 1.5× bar, so goccy decodes requests
// (BenchmarkDecodeCompletion went from 59 to 37 allocations, chat from 78
// to 50). Responses and stream chunks are not written by a JSON library at
// all: the hand-written appenders of response.go and json.go allocate
// nothing and beat both (BenchmarkJSONEncode). The debug endpoint, off the
// hot path, and schema/ (so the sidecar binary carries no goccy) use
// encoding/json.
package daemon
