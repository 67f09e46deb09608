package daemon

import (
	"bytes"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"github.com/picometer/picometer/constraint"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/picometer/picometer/native"
	"github.com/picometer/picometer/schema"
)

// This file is the daemon's lifecycle (New, Serve, Shutdown) and routing:
// one handler that authenticates, answers Expect and oversized bodies, and
// sends each path to its room (generate.go, stream.go, endpoints.go).
// server_test.go, shutdown_test.go and e2e_test.go cover it.

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
	codec   *codec // the model's tokenizer and chat template (tokenize.go)

	grammarErr string                             // why constrained requests are refused ("": they are served; grammar.go)
	grammars   *constraint.Cache[*native.Grammar] // compiled grammars by text (grammar.go)

	loop *loop
	sink eventSink
	em   *Emitter // nil when the emitter is off
	srv  *fasthttp.Server

	clock func() int64
	wall  func() time.Time
	log   *slog.Logger

	ids      atomic.Uint64
	sampler  sampler // the trace sampler (trace.go), from cfg.Tracing
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
	d.sampler, _ = newSampler(cfg.Tracing.Sampler, cfg.Tracing.SamplerArg) // cfg is valid
	d.model = servedName(cfg, info)
	d.codec = codecFor(cfg.Model, cfg.ChatTemplate)
	d.setupGrammars(eng)
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

// servedName is the configured model name, else the model file's name
// (see [FileModelName]), else, for an engine opened without a file, the
// model's general.name.
func servedName(cfg Config, info native.ModelInfo) string {
	switch {
	case cfg.ModelName != "":
		return cfg.ModelName
	case FileModelName(cfg.Model) != "":
		return FileModelName(cfg.Model)
	}
	return info.Name
}

// FileModelName is the model name a file serves under by default: its base
// name without a .gguf extension (any case), "" when path names no file.
// It is what llama-server and Ollama users expect and can predict before
// the file is opened; general.name is free text a converter writes ("Smollm2
// 135M 8k Lc100K Mix1 Ep2" for SmolLM2-135M-Instruct) that a client would
// have to read from /v1/models first. Only .gguf is removed, so
// "llama-3.1-8b" keeps its ".1-8b".
func FileModelName(path string) string {
	base := filepath.Base(path)
	if path == "" || base == "." || base == string(filepath.Separator) {
		return ""
	}
	if ext := filepath.Ext(base); strings.EqualFold(ext, ".gguf") && len(base) > len(ext) {
		base = base[:len(base)-len(ext)]
	}
	return base
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
	return idPrefix(op) + d.newRequestID()
}

// idPrefix is the response id's prefix of operation op (a /v1/responses
// response has "resp_").
func idPrefix(op string) string {
	if op == schema.OpChat {
		return "chatcmpl-"
	}
	return "cmpl-"
}

// newRequestID is a request id of this daemon's own: its boot id and a
// counter, unique for the boot.
func (d *Daemon) newRequestID() string {
	return d.boot + strconv.FormatUint(d.ids.Add(1), 16)
}

// --- routing ---

const (
	pathCompletions = "/v1/completions"
	pathChat        = "/v1/chat/completions"
	pathResponses   = "/v1/responses"
	pathTokenize    = "/tokenize"
	pathDetokenize  = "/detokenize"
	pathModels      = "/v1/models"
	pathHealth      = "/health"
	pathReady       = "/ready"
	pathDebug       = "/debug/engine_metrics"
)

func (d *Daemon) handle(ctx *fasthttp.RequestCtx) {
	var tr *untraced
	defer func() {
		if r := recover(); r != nil {
			d.bug(ctx, r)
		}
		if tr != nil {
			setTraceHeaders(ctx, &tr.tc, tr.reqID) // after any error body (which resets the response)
		}
		d.corsHeaders(ctx)
		d.armWrite(ctx.Conn())
	}()
	d.chunked.take(&ctx.Request.Header)
	if d.preflight(ctx) {
		return
	}
	path := ctx.Path()
	if tr = d.untracedAPI(ctx, path); tr != nil && tr.err != nil {
		tr.err.write(ctx)
		return
	}
	switch string(path) {
	case pathCompletions:
		d.generate(ctx, epCompletions)
	case pathChat:
		d.generate(ctx, epChat)
	case pathResponses:
		d.generate(ctx, epResponses)
	case pathTokenize:
		d.tokenizeEndpoint(ctx, false)
	case pathDetokenize:
		d.tokenizeEndpoint(ctx, true)
	case pathModels:
		if d.get(ctx) && d.authorized(ctx) {
			d.models(ctx)
		}
	case pathHealth:
		if d.get(ctx) {
			d.health(ctx)
		}
	case pathReady:
		if d.get(ctx) {
			d.ready(ctx)
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
		if id, ok := bytes.CutPrefix(path, []byte(pathResponses+"/")); ok {
			if d.authorized(ctx) {
				errResponseNotFound(string(id)).write(ctx)
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
		d.emitError(failedSeq(d.newID(op), op, false, d.clock(), d.sampler.newTrace(&ctx.Request.Header).wire(d.wall().UnixNano())), e)
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
		d.emitError(failedSeq(d.newID(op), op, false, d.clock(), d.sampler.newTrace(&ctx.Request.Header).wire(d.wall().UnixNano())), e)
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
	case pathChat, pathResponses:
		return schema.OpChat
	}
	return ""
}
