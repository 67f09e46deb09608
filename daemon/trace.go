package daemon

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/picometer/picometer/schema"
)

// This file is a request's trace context (issue 28): the W3C traceparent
// and tracestate it arrives with, the sampling decision, the ids of its
// SERVER span, and the traceresponse and X-Request-Id headers it answers
// with. The daemon only identifies the span; the sidecar builds and exports
// it from the request event, so nothing here is on the engine's path or
// exports anything. trace_test.go covers it (closure tables, the sampler
// against the OTel SDK's, fuzz tests of both parsers).

// traceCtx is the trace context of one request.
type traceCtx struct {
	traceID  [16]byte
	spanID   [8]byte // the request's SERVER span (new for every request)
	parentID [8]byte // the caller's span; zero for a root span
	remote   bool    // a valid traceparent came: parentID is the caller's
	sampled  bool
	state    string // the caller's tracestate when valid, else ""
}

// parseTraceparent parses a W3C Trace Context traceparent header value:
// version-traceid-parentid-flags, lowercase hex. Version 00 is exactly 55
// bytes; a later version (not ff) may carry more after a '-', which is
// ignored, as the specification says. ok is false for anything else, and
// for an all-zero trace or parent id: the caller then starts a new trace
// (the specification's rule for an invalid traceparent).
func parseTraceparent(v []byte) (tid [16]byte, pid [8]byte, flags byte, ok bool) {
	const n = 55
	if len(v) < n || v[2] != '-' || v[35] != '-' || v[52] != '-' {
		return tid, pid, 0, false
	}
	var ver [1]byte
	if !lowerHex(ver[:], v[0:2]) || ver[0] == 0xff || (ver[0] == 0 && len(v) != n) || (len(v) > n && v[n] != '-') {
		return tid, pid, 0, false
	}
	var fl [1]byte
	if !lowerHex(tid[:], v[3:35]) || !lowerHex(pid[:], v[36:52]) || !lowerHex(fl[:], v[53:55]) {
		return tid, pid, 0, false
	}
	if tid == [16]byte{} || pid == [8]byte{} {
		return tid, pid, 0, false
	}
	return tid, pid, fl[0], true
}

// lowerHex decodes src (lowercase hex digits only, 2 per byte of dst).
func lowerHex(dst, src []byte) bool {
	if len(src) != 2*len(dst) {
		return false
	}
	for i := range dst {
		hi, ok1 := hexVal(src[2*i])
		lo, ok2 := hexVal(src[2*i+1])
		if !ok1 || !ok2 {
			return false
		}
		dst[i] = hi<<4 | lo
	}
	return true
}

func hexVal(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

// Bounds of tracestate (W3C Trace Context): at most 32 list members, and
// a vendor may drop a longer value than 512 bytes.
const (
	maxTraceStateMembers = 32
	maxTraceStateBytes   = 512
)

// validTracestate reports whether v is a W3C tracestate list: members
// key=value separated by commas with optional spaces and tabs (empty
// members allowed), at most 32 members, keys unique, at most 512 bytes.
// An invalid tracestate is not propagated (the specification's rule); the
// trace itself goes on.
func validTracestate(v string) bool {
	if len(v) > maxTraceStateBytes {
		return false
	}
	var keys [maxTraceStateMembers]string
	n := 0
	for m := range strings.SplitSeq(v, ",") {
		m = strings.Trim(m, " \t")
		if m == "" {
			continue
		}
		k, val, ok := strings.Cut(m, "=")
		if !ok || !tracestateKey(k) || !tracestateValue(val) || n == maxTraceStateMembers {
			return false
		}
		for _, prev := range keys[:n] {
			if prev == k {
				return false
			}
		}
		keys[n] = k
		n++
	}
	return true
}

// tracestateKey: simple-key = lcalpha 0*255(lcalpha/DIGIT/"_"/"-"/"*"/"/"),
// or tenant-id "@" system-id (tenant: lcalpha/DIGIT then up to 240 of the
// same set; system: lcalpha then up to 13).
func tracestateKey(k string) bool {
	keyChars := func(s string, max int) bool {
		if len(s) > max {
			return false
		}
		for i := 0; i < len(s); i++ {
			c := s[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '*' || c == '/') {
				return false
			}
		}
		return true
	}
	isLower := func(c byte) bool { return c >= 'a' && c <= 'z' }
	if tenant, system, ok := strings.Cut(k, "@"); ok {
		return tenant != "" && (isLower(tenant[0]) || tenant[0] >= '0' && tenant[0] <= '9') && keyChars(tenant[1:], 240) &&
			system != "" && isLower(system[0]) && keyChars(system[1:], 13)
	}
	return k != "" && isLower(k[0]) && keyChars(k[1:], 255)
}

// tracestateValue: 0*255(chr) nblk-chr, chr = %x20 / nblk-chr, nblk-chr =
// %x21-2B / %x2D-3C / %x3E-7E (printable ASCII but ',' and '=').
func tracestateValue(v string) bool {
	if v == "" || len(v) > 256 || v[len(v)-1] == ' ' {
		return false
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 || c > 0x7e || c == ',' || c == '=' {
			return false
		}
	}
	return true
}

// --- sampling ---

// The samplers of the OpenTelemetry SDK specification
// (OTEL_TRACES_SAMPLER), those a process can decide alone.
const (
	samplerAlwaysOn        = "always_on"
	samplerAlwaysOff       = "always_off"
	samplerRatio           = "traceidratio"
	samplerParentAlwaysOn  = "parentbased_always_on"
	samplerParentAlwaysOff = "parentbased_always_off"
	samplerParentRatio     = "parentbased_traceidratio"
	defaultSampler         = samplerParentAlwaysOn
)

// remoteSamplers are the specification's samplers that need a remote
// service; refused by name.
var remoteSamplers = []string{"jaeger_remote", "parentbased_jaeger_remote", "xray"}

var samplerNames = []string{samplerAlwaysOn, samplerAlwaysOff, samplerRatio,
	samplerParentAlwaysOn, samplerParentAlwaysOff, samplerParentRatio}

// sampler is a parsed OTEL_TRACES_SAMPLER: the root decision (always,
// never, or by trace id ratio) and whether a caller's sampled flag
// overrides it.
type sampler struct {
	parentBased bool
	// bound: a root trace is sampled when the trace id's low 8 bytes,
	// big-endian, shifted right once, are below it (the SDK's
	// TraceIDRatioBased); 0 never, 1<<63 always.
	bound uint64
}

// newSampler parses a sampler name and its argument (the ratio of the
// traceidratio samplers, "" = 1). Errors name neither the key nor the
// variable: the caller prefixes the one it read.
func newSampler(name, arg string) (sampler, error) {
	if name == "" {
		name = defaultSampler
	}
	s := sampler{parentBased: strings.HasPrefix(name, "parentbased_")}
	switch name {
	case samplerAlwaysOn, samplerParentAlwaysOn:
		s.bound = 1 << 63
	case samplerAlwaysOff, samplerParentAlwaysOff:
	case samplerRatio, samplerParentRatio:
		ratio := 1.0
		if arg != "" {
			var err error
			ratio, err = strconv.ParseFloat(strings.TrimSpace(arg), 64)
			if err != nil || !(ratio >= 0 && ratio <= 1) {
				return s, fmt.Errorf("sampler argument %q is not a ratio in 0..1", arg)
			}
		}
		s.bound = ratioBound(ratio)
	default:
		if slices.Contains(remoteSamplers, name) {
			return s, fmt.Errorf("sampler %q is not supported (it needs a remote sampling service); use one of %s", name, strings.Join(samplerNames, ", "))
		}
		return s, fmt.Errorf("sampler %q is not one of %s", name, strings.Join(samplerNames, ", "))
	}
	return s, nil
}

// ratioBound is the SDK's TraceIDRatioBased bound for ratio: 1<<63 for 1,
// otherwise uint64(ratio * 2^63).
func ratioBound(ratio float64) uint64 {
	if ratio >= 1 {
		return 1 << 63
	}
	return uint64(ratio * math.Exp2(63))
}

// sampled decides for a trace: a parent-based sampler follows the
// caller's sampled flag when there is a caller, the root rule otherwise.
func (s sampler) sampled(tid *[16]byte, remote, parentSampled bool) bool {
	if s.parentBased && remote {
		return parentSampled
	}
	if s.bound == 1<<63 {
		return true
	}
	return binary.BigEndian.Uint64(tid[8:])>>1 < s.bound
}

// --- ids and headers ---

// newTrace returns the trace context of a request from its headers:
// continued from a valid traceparent (with its tracestate when valid), else
// a new root trace; the span id is new either way, and the sampler decides.
func (smp sampler) newTrace(h *fasthttp.RequestHeader) traceCtx {
	var t traceCtx
	if tp := h.Peek("traceparent"); tp != nil && singleHeader(h, "traceparent") {
		var flags byte
		if t.traceID, t.parentID, flags, t.remote = parseTraceparent(tp); t.remote {
			t.sampled = flags&1 == 1
			if ts := tracestateOf(h); validTracestate(ts) {
				t.state = ts
			}
		}
	}
	if !t.remote {
		t.traceID = randomTraceID()
	}
	t.spanID = randomSpanID()
	t.sampled = smp.sampled(&t.traceID, t.remote, t.sampled)
	return t
}

// singleHeader reports whether h holds the header key once: two
// traceparent headers make the context invalid.
func singleHeader(h *fasthttp.RequestHeader, key string) bool {
	return len(h.PeekAll(key)) == 1
}

// tracestateOf joins the tracestate headers (a list may be split across
// several, which combine in order, as RFC 9110 lists do).
func tracestateOf(h *fasthttp.RequestHeader) string {
	all := h.PeekAll("tracestate")
	switch len(all) {
	case 0:
		return ""
	case 1:
		return string(all[0])
	}
	parts := make([]string, len(all))
	for i, v := range all {
		parts[i] = string(v)
	}
	return strings.Join(parts, ",")
}

// randomTraceID and randomSpanID draw from math/rand/v2's ChaCha8
// generator (per-thread, seeded from the system's entropy: unpredictable
// enough for ids, and it takes no lock); never all zero.
func randomTraceID() (id [16]byte) {
	for id == [16]byte{} {
		binary.BigEndian.PutUint64(id[:8], rand.Uint64())
		binary.BigEndian.PutUint64(id[8:], rand.Uint64())
	}
	return id
}

func randomSpanID() (id [8]byte) {
	for id == [8]byte{} {
		binary.BigEndian.PutUint64(id[:], rand.Uint64())
	}
	return id
}

// traceResponse is the W3C Trace Context Level 2 traceresponse header
// value: version 00, the trace id, the request's own span id (the child a
// caller should link to) and the sampled flag.
func (t *traceCtx) traceResponse() []byte {
	b := make([]byte, 0, 55)
	b = append(b, "00-"...)
	b = hex.AppendEncode(b, t.traceID[:])
	b = append(b, '-')
	b = hex.AppendEncode(b, t.spanID[:])
	if t.sampled {
		return append(b, "-01"...)
	}
	return append(b, "-00"...)
}

// maxRequestIDBytes bounds an X-Request-Id.
const maxRequestIDBytes = 128

// validRequestID reports whether an X-Request-Id can be the suffix of a
// response id: 1..128 bytes of letters, digits and - _ . : ~ + / = @ (a
// UUID, a ULID, a hex or base64 id), nothing a log line or JSON string
// would have to escape.
func validRequestID(v []byte) bool {
	if len(v) == 0 || len(v) > maxRequestIDBytes {
		return false
	}
	for _, c := range v {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-_.:~+/=@", c) >= 0) {
			return false
		}
	}
	return true
}

// traceWire is a trace context as the request event carries it (hex ids),
// encoded by the handler so that the engine loop, which sends the event,
// does not.
type traceWire struct {
	traceID, spanID, parentID, state string
	sampled                          bool
	startUnixNano                    int64
}

// wire encodes t; start is the wall clock at arrival (the span's start).
func (t traceCtx) wire(start int64) traceWire {
	w := traceWire{traceID: hex.EncodeToString(t.traceID[:]), spanID: hex.EncodeToString(t.spanID[:]),
		sampled: t.sampled, state: t.state, startUnixNano: max(start, 0)}
	if t.remote {
		w.parentID = hex.EncodeToString(t.parentID[:])
	}
	return w
}

// fill sets b's trace fields; a zero traceWire (a seq made in a test)
// leaves them empty.
func (w *traceWire) fill(b *schema.RequestBody) {
	if w.traceID == "" {
		return
	}
	b.TraceID, b.SpanID, b.ParentSpanID = w.traceID, w.spanID, w.parentID
	b.Sampled, b.TraceState, b.StartUnixNano = w.sampled, w.state, w.startUnixNano
}

// requestID is the request's id: its X-Request-Id when one is sent (an
// invalid one is a 400 naming the header), else one of the daemon's own.
// The response id is its operation's prefix and the request id.
func (d *Daemon) requestID(ctx *fasthttp.RequestCtx) (string, *apiError) {
	v := ctx.Request.Header.Peek("X-Request-Id")
	if v == nil {
		return d.newRequestID(), nil
	}
	if !validRequestID(v) {
		return d.newRequestID(), badRequest("X-Request-Id", "invalid_request_id",
			"Invalid 'X-Request-Id' header: expected 1 to %d letters, digits or any of - _ . : ~ + / = @, but got %q.", maxRequestIDBytes, v)
	}
	return string(v), nil
}

// setTraceHeaders answers with the request's ids: traceresponse and
// X-Request-Id (the one sent, or the daemon's own).
func setTraceHeaders(ctx *fasthttp.RequestCtx, t *traceCtx, reqID string) {
	ctx.Response.Header.SetBytesV("traceresponse", t.traceResponse())
	ctx.Response.Header.Set("X-Request-Id", reqID)
}

// untraced is the trace context of an API request that is not a
// generation (/tokenize, /detokenize, /v1/models, /v1/models/{id},
// /v1/responses/{id}, an unknown route): no request event, so no span.
type untraced struct {
	tc    traceCtx
	reqID string
	err   *apiError // an invalid X-Request-Id: the answer instead
}

// untracedAPI returns the trace context of a request to path when it is an
// API request that is not a generation, else nil. It honours the caller's
// traceparent and tracestate as a generation does (the same trace, a new
// span id) but answers traceresponse with the sampled flag clear: nothing
// records a span for these requests (the sidecar builds spans from request
// events, which only generations have), and W3C Trace Context Level 2 says
// the flag tells the caller whether this server recorded its part. An
// X-Request-Id is echoed, or the daemon's own is sent; an invalid one is
// the same 400 as on a generation. The probes and scrape endpoints
// (/health, /ready, /metrics, /debug/engine_metrics) are not API requests
// and carry neither header.
func (d *Daemon) untracedAPI(ctx *fasthttp.RequestCtx, path []byte) *untraced {
	switch string(path) {
	case pathCompletions, pathChat, pathResponses, pathHealth, pathReady, pathDebug, pathRoutingMetrics:
		return nil
	}
	u := &untraced{tc: d.sampler.newTrace(&ctx.Request.Header)}
	u.tc.sampled = false
	u.reqID, u.err = d.requestID(ctx)
	return u
}
