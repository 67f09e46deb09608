package daemon

import (
	"bufio"
	"bytes"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	json "github.com/goccy/go-json"
	"github.com/valyala/fasthttp"

	"github.com/picometer/picometer/native"
	"github.com/picometer/picometer/schema"
)

// Version is picometerd's version, sent in hello events.
const Version = "0.1.0"

// EngineName is the engine identifier sent in hello events (the engine
// attribute of every metric).
const EngineName = "picometer"

// Deps are the daemon's outside dependencies, passed in rather than
// reached through package variables. Zero fields take the defaults.
type Deps struct {
	// Clock returns monotonic nanoseconds; it must be the engine's clock
	// (request times are compared with its stats). Default native.Now.
	Clock func() int64
	// Wall returns the wall-clock time (created fields, event timestamps).
	// Default time.Now.
	Wall func() time.Time
	// Logger receives the daemon's log records. Nothing is logged per
	// request at info level or below unless something is wrong. Default
	// slog.Default().
	Logger *slog.Logger
}

func (deps Deps) withDefaults() Deps {
	if deps.Clock == nil {
		deps.Clock = native.Now
	}
	if deps.Wall == nil {
		deps.Wall = time.Now
	}
	if deps.Logger == nil {
		deps.Logger = slog.Default()
	}
	return deps
}

// Daemon serves the OpenAI-compatible API over one engine.
type Daemon struct {
	cfg     Config
	info    native.ModelInfo
	model   string
	ctxLen  int
	boot    string
	created int64
	keys    [][]byte

	loop *loop
	sink eventSink
	em   *Emitter // nil when the emitter is off
	srv  *fasthttp.Server

	clock func() int64
	wall  func() time.Time
	log   *slog.Logger

	ids      atomic.Uint64
	draining atomic.Bool
	chunked  chunkedOps
}

// New starts the engine loop (and the emitter, unless cfg.Metrics.Socket
// is empty) over eng, which the daemon then owns until [Daemon.Shutdown]
// returns; closing eng stays the caller's job. cfg must be valid.
func New(cfg Config, eng Engine, deps Deps) *Daemon {
	deps = deps.withDefaults()
	info := eng.Info()
	d := &Daemon{
		cfg: cfg, info: info, ctxLen: info.ContextLength, boot: NewBootID(),
		clock: deps.Clock, wall: deps.Wall, log: deps.Logger,
	}
	d.created = d.wall().Unix()
	d.model = servedName(cfg, info)
	for _, k := range cfg.APIKeys {
		d.keys = append(d.keys, []byte(k))
	}
	d.sink = nopSink{}
	if cfg.Metrics.Socket != "" {
		ec := eng.Config()
		hello := schema.HelloBody{PID: os.Getpid(), Model: d.model, Engine: EngineName, Daemon: Version,
			Config: schema.EngineConfig{BMax: ec.BMax, ContextLength: info.ContextLength, BlockSize: ec.BlockSize,
				KVBlocks: ec.KVBlocks, SpecK: ec.SpecK, PrefillChunk: ec.PrefillChunk}}
		d.em = NewEmitter(cfg.Metrics, d.boot, hello, d.log, d.wall)
		d.sink = d.em
	}
	d.loop = newLoop(eng, d.sink, d.clock, d.log, cfg.Metrics.SnapshotInterval, cfg.RequestTimeout)
	go d.loop.run()
	d.srv = &fasthttp.Server{
		Handler:            d.handle,
		ErrorHandler:       d.handleError,
		ExpectHandler:      d.expect,
		HeaderReceived:     d.chunked.headerReceived,
		Name:               "picometerd",
		MaxRequestBodySize: cfg.MaxBodyBytes,
		ReadTimeout:        cfg.ReadTimeout,
		IdleTimeout:        cfg.IdleTimeout,
		// No WriteTimeout: it would cut long SSE streams. Deadlines are the
		// engine loop's job, stalled readers the stream's (StreamStallTimeout).
		CloseOnShutdown:              true,
		NoDefaultContentType:         true,
		DisablePreParseMultipartForm: true,
		Logger:                       fasthttpLogger{d.log},
	}
	return d
}

// fasthttpLogger routes fasthttp's messages to slog. Its per-connection
// errors ("error when serving connection …": a malformed request, a body
// over the limit, a client that reset) come once per bad request, so they
// are debug records; a bad request on a completions endpoint is counted as
// a request event by handleError. Its other messages (accept errors, the
// connection limit) concern the server as a whole and are warnings.
type fasthttpLogger struct{ log *slog.Logger }

func (l fasthttpLogger) Printf(format string, args ...any) {
	level := slog.LevelWarn
	if strings.HasPrefix(format, "error when serving connection") {
		level = slog.LevelDebug
	}
	if l.log.Enabled(context.Background(), level) {
		l.log.Log(context.Background(), level, "http: "+fmt.Sprintf(format, args...))
	}
}

// servedName is the configured model name, else the model's general.name,
// else its file name without extension.
func servedName(cfg Config, info native.ModelInfo) string {
	switch {
	case cfg.ModelName != "":
		return cfg.ModelName
	case info.Name != "":
		return info.Name
	}
	return strings.TrimSuffix(filepath.Base(cfg.Model), filepath.Ext(cfg.Model))
}

// ModelName is the served model name.
func (d *Daemon) ModelName() string { return d.model }

// BootID identifies this run in metric events.
func (d *Daemon) BootID() string { return d.boot }

// Emitter returns the metrics emitter, or nil when it is off.
func (d *Daemon) Emitter() *Emitter { return d.em }

// Serve serves HTTP on ln until Shutdown.
func (d *Daemon) Serve(ln net.Listener) error { return d.srv.Serve(ln) }

// Shutdown stops gracefully: no new connections or requests (503), then
// in-flight requests get grace to finish, then the rest are aborted (error
// type shutdown); the engine loop stops after a final snapshot, which the
// emitter flushes within its flush timeout.
func (d *Daemon) Shutdown(grace time.Duration) error {
	d.draining.Store(true)
	d.loop.control(ctlDrain)
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	err := d.srv.ShutdownWithContext(ctx)
	cancel()
	if err != nil {
		d.log.Warn("shutdown: the grace period is over; aborting the requests still running", "grace", grace)
		d.loop.control(ctlAbort)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = d.srv.ShutdownWithContext(ctx)
		cancel()
	}
	d.loop.control(ctlStop)
	if d.em != nil {
		d.em.Close(d.cfg.Metrics.FlushTimeout)
	}
	return err
}

func (d *Daemon) newID(op string) string {
	prefix := "cmpl-"
	if op == schema.OpChat {
		prefix = "chatcmpl-"
	}
	return prefix + d.boot + strconv.FormatUint(d.ids.Add(1), 16)
}

// --- routing ---

const (
	pathCompletions = "/v1/completions"
	pathChat        = "/v1/chat/completions"
	pathModels      = "/v1/models"
	pathHealth      = "/health"
	pathDebug       = "/debug/engine_metrics"
)

func (d *Daemon) handle(ctx *fasthttp.RequestCtx) {
	defer func() {
		if r := recover(); r != nil {
			d.bug(ctx, r)
		}
		d.armWrite(ctx.Conn())
	}()
	d.chunked.take(&ctx.Request.Header)
	path := ctx.Path()
	switch string(path) {
	case pathCompletions:
		d.generate(ctx, schema.OpTextCompletion)
	case pathChat:
		d.generate(ctx, schema.OpChat)
	case pathModels:
		if d.get(ctx) && d.authorized(ctx) {
			d.models(ctx)
		}
	case pathHealth:
		if d.get(ctx) {
			d.health(ctx)
		}
	case pathDebug:
		if d.get(ctx) {
			d.debugMetrics(ctx)
		}
	case pathRoutingMetrics:
		d.routingMetrics(ctx)
	default:
		if id, ok := bytes.CutPrefix(path, []byte(pathModels+"/")); ok {
			if d.get(ctx) && d.authorized(ctx) {
				d.model1(ctx, string(id))
			}
			return
		}
		errUnknownRoute(ctx.Method(), path).write(ctx)
	}
}

// bug logs a panic while serving ctx (a broken invariant) and answers 500.
func (d *Daemon) bug(ctx *fasthttp.RequestCtx, r any) *apiError {
	d.log.Error("BUG: panic serving a request", "method", string(ctx.Method()), "path", string(ctx.Path()),
		"panic", r, "stack", string(debug.Stack()))
	e := errInternal("Internal error.")
	e.write(ctx)
	return e
}

// get answers 405 to anything but GET and HEAD.
func (d *Daemon) get(ctx *fasthttp.RequestCtx) bool {
	if ctx.IsGet() || ctx.IsHead() {
		return true
	}
	errMethod(ctx.Method(), "GET").write(ctx)
	ctx.Response.Header.Set("Allow", "GET, HEAD")
	return false
}

// auth returns the 401 to answer, or nil when the key is right or no keys
// are configured.
func (d *Daemon) auth(ctx *fasthttp.RequestCtx) *apiError {
	if len(d.keys) == 0 {
		return nil
	}
	h := ctx.Request.Header.Peek("Authorization")
	const bearer = "bearer "
	if len(h) < len(bearer) || !strings.EqualFold(string(h[:len(bearer)]), bearer) {
		return errMissingKey
	}
	key := bytes.TrimSpace(h[len(bearer):])
	ok := 0
	for _, k := range d.keys {
		ok |= subtle.ConstantTimeCompare(key, k)
	}
	if ok == 0 {
		return errWrongKey
	}
	return nil
}

func (d *Daemon) authorized(ctx *fasthttp.RequestCtx) bool {
	if e := d.auth(ctx); e != nil {
		e.write(ctx)
		return false
	}
	return true
}

// handleError answers requests fasthttp could not read: an OpenAI-shaped
// 413 for a body over the limit (counted as a request event when it was
// meant for a completions endpoint), 408 for a read timeout, 400 else.
// fasthttp closes the connection afterwards, so before a 413 the rest of
// the body is read and discarded (see drainBody).
func (d *Daemon) handleError(ctx *fasthttp.RequestCtx, err error) {
	var e *apiError
	var netErr *net.OpError
	switch {
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		e = errTooLarge(d.cfg.MaxBodyBytes)
		drainBody(ctx.Conn(), ctx.Request.Header.ContentLength())
	case errors.As(err, &netErr) && netErr.Timeout():
		e = &apiError{Status: fasthttp.StatusRequestTimeout, Type: typeInvalidRequest, Code: "request_timeout",
			Message: "Timed out reading the request.", Kind: schema.ErrInvalidRequest}
	default:
		e = badRequest("", "malformed_http", "Malformed HTTP request: %v", err)
	}
	e.write(ctx)
	op := d.chunked.take(&ctx.Request.Header)
	if p := opOf(ctx.Path()); p != "" {
		op = p
	}
	if op != "" {
		d.emitError(d.newID(op), op, false, e, d.clock())
	}
	d.armWrite(ctx.Conn())
}

// expect answers "Expect: 100-continue": a body announced over the limit
// gets its 413 at once, before the client sends it (RFC 9110 §10.1.1).
func (d *Daemon) expect(ctx *fasthttp.RequestCtx) int {
	if ctx.Request.Header.ContentLength() <= d.cfg.MaxBodyBytes {
		return fasthttp.StatusContinue
	}
	e := errTooLarge(d.cfg.MaxBodyBytes)
	e.write(ctx)
	if op := opOf(ctx.Path()); op != "" {
		d.emitError(d.newID(op), op, false, e, d.clock())
	}
	d.armWrite(ctx.Conn())
	return e.Status
}

// Bounds of drainBody.
const (
	maxDrainBytes = 64 << 20
	drainTime     = 2 * time.Second
	drainQuiet    = 50 * time.Millisecond
)

// drainBody reads and discards what a client still sends of a body over
// the limit (contentLength bytes in all; 0 or less: unknown), at most
// maxDrainBytes and for at most drainTime, stopping after drainQuiet
// without data. Closing a socket with unread data resets the connection,
// which destroys the 413 before the client reads it; a client that sent
// more than the bounds may still see a reset.
func drainBody(conn net.Conn, contentLength int) {
	if conn == nil {
		return
	}
	end := time.Now().Add(drainTime)
	buf := make([]byte, 32<<10)
	total := 0
	for total < maxDrainBytes && (contentLength <= 0 || total < contentLength) {
		deadline := time.Now().Add(drainQuiet)
		if deadline.After(end) {
			deadline = end
		}
		if err := conn.SetReadDeadline(deadline); err != nil {
			return
		}
		n, err := conn.Read(buf)
		total += n
		if err != nil {
			return
		}
	}
}

// opOf returns the operation of a completions endpoint's path, else "".
func opOf(path []byte) string {
	switch string(path) {
	case pathCompletions:
		return schema.OpTextCompletion
	case pathChat:
		return schema.OpChat
	}
	return ""
}

// emitError sends the request event of a request that failed before the
// engine saw it.
func (d *Daemon) emitError(id, op string, stream bool, e *apiError, arrival int64) {
	s := seq{id: id, op: op, stream: stream}
	s.params.ArrivalNS = arrival
	body := requestBody(&s, nil, schema.FinishError, e.Kind, d.clock())
	d.sink.Request(&schema.Request{RequestBody: body})
}

// --- generation ---

func (d *Daemon) generate(ctx *fasthttp.RequestCtx, op string) {
	arrival := d.clock()
	id := d.newID(op)
	var r genRequest
	var s *seq // once submitted, the loop sends its request event
	defer func() {
		if p := recover(); p != nil {
			e := d.bug(ctx, p)
			if s != nil {
				d.loop.cancel(s, schema.ErrOther)
			} else {
				d.emitError(id, op, r.Stream, e, arrival)
			}
		}
	}()
	fail := func(e *apiError) {
		e.write(ctx)
		if e.Status == fasthttp.StatusMethodNotAllowed {
			ctx.Response.Header.Set("Allow", "POST")
		}
		d.emitError(id, op, r.Stream, e, arrival)
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
	if op == schema.OpChat {
		e = decodeChat(ctx.PostBody(), &r)
	} else {
		e = decodeCompletion(ctx.PostBody(), &r)
	}
	if e != nil {
		fail(e)
		return
	}
	if r.Model != "" && r.Model != d.model {
		fail(errModelNotFound(r.Model, d.model))
		return
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
	s.id, s.op, s.stream, s.prompt = id, op, r.Stream, r.Prompt
	s.stop = newStopMatcher(r.Stop)
	s.params = native.Params{MaxTokens: r.MaxTokens, Temperature: r.Temperature, TopK: r.TopK, TopP: r.TopP,
		Seed: r.Seed, ArrivalNS: arrival}
	if !r.HasSeed {
		s.params.Seed = rand.Uint64()
	}
	if op == schema.OpChat {
		s.params.StopTokens = []int32{native.TokEnd}
	}
	s.deadline = arrival + int64(d.cfg.RequestTimeout)
	if e := d.loop.submit(s); e != nil {
		s = nil
		fail(e)
		return
	}
	m := respMeta{id: id, op: op, model: d.model, created: d.wall().Unix(), promptTokens: len(r.Prompt),
		tokenIDs: r.ReturnTokenIDs, includeUsage: r.IncludeUsage, continuousUsage: r.ContinuousUsage}
	if r.Stream {
		ctx.SetStatusCode(fasthttp.StatusOK)
		ctx.SetContentType("text/event-stream")
		ctx.Response.Header.Set("Cache-Control", "no-cache")
		ctx.Response.Header.Set("X-Accel-Buffering", "no")
		ctx.Response.ImmediateHeaderFlush = true
		conn := ctx.Conn()
		ctx.SetBodyStreamWriter(func(w *bufio.Writer) { d.stream(w, conn, s, &m) })
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
	ctx.SetBody(m.appendResponse(nil, all.text, all.toks, res.finish, &res.body))
}

// stream writes a request's server-sent events: one chunk per engine run
// that produced text (or tokens, when token ids or continuous usage are
// asked), a last chunk with the finish reason, the usage chunk when asked,
// and data: [DONE]. An error after the header went out is an error event.
// The first failed Flush means the client left: the request is cancelled
// in the engine (finish reason abort, error type cancelled); so does a
// client that leaves while its stream is silent (see [waiter]).
func (d *Daemon) stream(w *bufio.Writer, conn net.Conn, s *seq, m *respMeta) {
	defer func() {
		if r := recover(); r != nil {
			d.log.Error("BUG: panic streaming a response", "id", s.id, "panic", r, "stack", string(debug.Stack()))
			d.loop.cancel(s, schema.ErrOther)
		}
	}()
	flush := func() bool {
		if err := w.Flush(); err != nil {
			d.loop.cancel(s, schema.ErrCancelled)
			return false
		}
		return true
	}
	buf := make([]byte, 0, 512)
	if m.op == schema.OpChat {
		d.armWrite(conn)
		buf = m.appendRoleChunk(buf)
		w.Write(buf)
		if !flush() {
			return
		}
	}
	var out outBuf
	completion := 0
	wt := waiter{d: d, s: s, conn: conn}
	defer wt.stop()
	for {
		wt.wait()
		done, res := s.take(&out)
		if len(out.runs) > 0 || done {
			// Before anything reaches the connection (a large write
			// flushes by itself): the engine may have been silent for
			// longer than the stall timeout.
			d.armWrite(conn)
		}
		wrote := false
		var start runEnd
		for _, end := range out.runs {
			text, toks := out.text[start.text:end.text], out.toks[start.toks:end.toks]
			start = end
			completion += len(toks)
			if len(text) == 0 && (len(toks) == 0 || !(m.tokenIDs || m.continuousUsage)) {
				continue
			}
			buf = m.appendChunk(buf[:0], text, toks, "", completion)
			w.Write(buf)
			wrote = true
		}
		if done {
			if res.err != nil {
				buf = appendErrorEvent(buf[:0], res.err)
			} else {
				buf = m.appendChunk(buf[:0], nil, nil, res.finish, completion)
				if m.includeUsage {
					buf = m.appendUsageChunk(buf, &res.body)
				}
			}
			buf = append(buf, sseDone...)
			w.Write(buf)
			flush()
			return
		}
		if wrote && !flush() {
			return
		}
	}
}

// armWrite gives the writes about to happen on conn stream_stall_timeout
// to complete. fasthttp's WriteTimeout cannot do it (it would cut long
// streams), and without a deadline a client that stops reading would hold
// its connection and goroutine forever. Every response arms it: handle
// when it returns (fasthttp writes the response next), a stream before
// each batch of chunks; so a deadline left by an earlier response on a
// keep-alive connection never applies to a later one.
func (d *Daemon) armWrite(conn net.Conn) {
	if conn != nil {
		conn.SetWriteDeadline(time.Now().Add(d.cfg.StreamStallTimeout))
	}
}

// --- other endpoints ---

func (d *Daemon) models(ctx *fasthttp.RequestCtx) {
	b := []byte(`{"object":"list","data":[`)
	b = d.appendModel(b)
	b = append(b, "]}"...)
	ctx.SetContentType("application/json")
	ctx.SetBody(b)
}

func (d *Daemon) model1(ctx *fasthttp.RequestCtx, id string) {
	if id != d.model {
		errModelNotFound(id, d.model).write(ctx)
		return
	}
	ctx.SetContentType("application/json")
	ctx.SetBody(d.appendModel(nil))
}

func (d *Daemon) appendModel(b []byte) []byte {
	b = append(b, `{"id":`...)
	b = appendJSONString(b, d.model)
	b = append(b, `,"object":"model","created":`...)
	b = strconv.AppendInt(b, d.created, 10)
	b = append(b, `,"owned_by":"picometer","max_model_len":`...)
	b = strconv.AppendInt(b, int64(d.ctxLen), 10)
	return append(b, '}')
}

func (d *Daemon) health(ctx *fasthttp.RequestCtx) {
	ctx.SetContentType("application/json")
	switch {
	case d.draining.Load():
		ctx.SetStatusCode(fasthttp.StatusServiceUnavailable)
		ctx.SetBodyString(`{"status":"shutting_down"}`)
	case d.loop.failedFlag.Load():
		ctx.SetStatusCode(fasthttp.StatusServiceUnavailable)
		ctx.SetBodyString(`{"status":"engine_failed"}`)
	default:
		ctx.SetBodyString(`{"status":"ok"}`)
	}
}

// debugMetrics serves a fresh engine snapshot in MLC-LLM's EngineMetrics
// shape (schema.EngineBody), with the emitter's events_dropped. Its steps
// list is empty: step records go to the sidecar.
func (d *Daemon) debugMetrics(ctx *fasthttp.RequestCtx) {
	b := d.loop.snapshot()
	if b == nil {
		errShuttingDown.write(ctx)
		return
	}
	out, err := json.Marshal(b)
	if err != nil {
		errInternal(fmt.Sprintf("encode engine metrics: %v", err)).write(ctx)
		return
	}
	ctx.SetContentType("application/json")
	ctx.SetBody(out)
}
