package daemon

import (
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/picometer/picometer/schema"
)

func TestParseTraceparent(t *testing.T) {
	const tid, pid = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	f := func(in string, ok bool, flags byte) {
		t.Helper()
		gt, gp, gf, gok := parseTraceparent([]byte(in))
		if gok != ok {
			t.Fatalf("parseTraceparent(%q) ok = %v, want %v", in, gok, ok)
		}
		if ok && (hex.EncodeToString(gt[:]) != tid || hex.EncodeToString(gp[:]) != pid || gf != flags) {
			t.Fatalf("parseTraceparent(%q) = %x %x %x", in, gt, gp, gf)
		}
	}
	f("00-"+tid+"-"+pid+"-01", true, 1)
	f("00-"+tid+"-"+pid+"-00", true, 0)
	f("00-"+tid+"-"+pid+"-09", true, 9) // other flags are kept; sampled is bit 0
	f("01-"+tid+"-"+pid+"-01-what-the-future-holds", true, 1)
	f("cc-"+tid+"-"+pid+"-01", true, 1)
	f("00-"+tid+"-"+pid+"-01-x", false, 0) // version 00 is exactly 55 bytes
	f("01-"+tid+"-"+pid+"-01x", false, 0)  // a later version continues with '-'
	f("ff-"+tid+"-"+pid+"-01", false, 0)   // version ff is invalid
	f("00-"+strings.ToUpper(tid)+"-"+pid+"-01", false, 0)
	f("00-00000000000000000000000000000000-"+pid+"-01", false, 0)
	f("00-"+tid+"-0000000000000000-01", false, 0)
	f("00-"+tid+"-"+pid+"-0g", false, 0)
	f("00-"+tid+"-"+pid, false, 0)
	f("00_"+tid+"-"+pid+"-01", false, 0)
	f("0-"+tid+"-"+pid+"-01-", false, 0)
	f(" 00-"+tid+"-"+pid+"-01", false, 0)
	f("", false, 0)
}

func TestValidTracestate(t *testing.T) {
	f := func(in string, ok bool) {
		t.Helper()
		if got := validTracestate(in); got != ok {
			t.Fatalf("validTracestate(%q) = %v, want %v", in, got, ok)
		}
	}
	f("", true)
	f("congo=t61rcWkgMzE", true)
	f("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE", true)
	f("rojo=1 , congo=2,\t,", true) // optional whitespace, empty members
	f("fw529a3039@dt=x", true)
	f("0tenant@sys=x", true)
	f("a=b c", true)
	f("a=b ", true) // the trailing space is optional whitespace around the member
	f("a=", false)
	f("A=b", false)
	f("1a=b", false)
	f("a=b=c", false)
	f("a=b,a=c", false)
	f("a", false)
	f("a=\x7f", false)
	f("@sys=x", false)
	f("t@=x", false)
	f("t@1sys=x", false)
	f(strings.Repeat("a=b,", 32)[:4*32-1], false) // duplicate keys
	var m []string
	for i := range 32 {
		m = append(m, fmt.Sprintf("k%d=v", i))
	}
	f(strings.Join(m, ","), true)
	f(strings.Join(append(m, "k32=v"), ","), false) // 33 members
	f("a="+strings.Repeat("x", 511), false)         // over 512 bytes
}

// TestSamplerMatchesSDK holds newSampler to the OTel SDK's samplers of the
// same names: the same decision for every trace id, with and without a
// (sampled or unsampled) remote parent.
func TestSamplerMatchesSDK(t *testing.T) {
	for _, c := range []struct {
		name, arg string
		sdk       sdktrace.Sampler
	}{
		{"always_on", "", sdktrace.AlwaysSample()},
		{"always_off", "", sdktrace.NeverSample()},
		{"traceidratio", "0.25", sdktrace.TraceIDRatioBased(0.25)},
		{"traceidratio", "0", sdktrace.TraceIDRatioBased(0)},
		{"traceidratio", "1", sdktrace.TraceIDRatioBased(1)},
		{"parentbased_always_on", "", sdktrace.ParentBased(sdktrace.AlwaysSample())},
		{"parentbased_always_off", "", sdktrace.ParentBased(sdktrace.NeverSample())},
		{"parentbased_traceidratio", "0.5", sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0.5))},
		{"", "", sdktrace.ParentBased(sdktrace.AlwaysSample())}, // the default
	} {
		s, err := newSampler(c.name, c.arg)
		if err != nil {
			t.Fatalf("%s %s: %v", c.name, c.arg, err)
		}
		hits := 0
		for i := range 2000 {
			tid := randomTraceID()
			for _, parent := range []int{0, 1, 2} { // none, unsampled, sampled
				p := sdktrace.SamplingParameters{TraceID: trace.TraceID(tid), Name: "x"}
				if parent > 0 {
					sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID(tid), SpanID: trace.SpanID(randomSpanID()),
						TraceFlags: trace.TraceFlags(parent - 1), Remote: true})
					p.ParentContext = trace.ContextWithRemoteSpanContext(t.Context(), sc)
				}
				want := c.sdk.ShouldSample(p).Decision == sdktrace.RecordAndSample
				if got := s.sampled(&tid, parent > 0, parent == 2); got != want {
					t.Fatalf("%s(%s) trace %x parent %d: sampled %v, the SDK says %v", c.name, c.arg, tid, parent, got, want)
				}
				if parent == 0 && want {
					hits++
				}
			}
			_ = i
		}
		if c.name == "traceidratio" && c.arg == "0.25" && (hits < 400 || hits > 600) {
			t.Fatalf("traceidratio 0.25 sampled %d of 2000 root traces", hits)
		}
	}
}

func TestSamplerErrors(t *testing.T) {
	f := func(name, arg, want string) {
		t.Helper()
		_, err := newSampler(name, arg)
		if fmt.Sprint(err) != want {
			t.Fatalf("newSampler(%q, %q) = %v, want %s", name, arg, err, want)
		}
	}
	f("always", "", `sampler "always" is not one of always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio`)
	f("xray", "", `sampler "xray" is not supported (it needs a remote sampling service); use one of always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio`)
	f("traceidratio", "1.5", `sampler argument "1.5" is not a ratio in 0..1`)
	f("traceidratio", "half", `sampler argument "half" is not a ratio in 0..1`)
	f("traceidratio", "NaN", `sampler argument "NaN" is not a ratio in 0..1`)

	env := func(k, v string) func(string) string {
		return func(key string) string {
			if key == k {
				return v
			}
			return ""
		}
	}
	c := DefaultConfig()
	if err := c.ApplyEnv(env("OTEL_TRACES_SAMPLER", "nope")); err == nil || !strings.HasPrefix(err.Error(), "OTEL_TRACES_SAMPLER / OTEL_TRACES_SAMPLER_ARG: ") {
		t.Fatalf("ApplyEnv: %v", err)
	}
	c = DefaultConfig()
	c.Tracing.Sampler = "traceidratio"
	if err := c.ApplyEnv(env("OTEL_TRACES_SAMPLER_ARG", "0.1")); err != nil || c.Tracing.SamplerArg != "0.1" {
		t.Fatalf("ApplyEnv: %v, arg %q", err, c.Tracing.SamplerArg)
	}
	c.Tracing.SamplerArg = "2"
	if err := c.Validate(); fmt.Sprint(err) != `tracing.sampler / tracing.sampler_arg: sampler argument "2" is not a ratio in 0..1` {
		t.Fatalf("Validate: %v", err)
	}
}

func TestValidRequestID(t *testing.T) {
	f := func(in string, ok bool) {
		t.Helper()
		if got := validRequestID([]byte(in)); got != ok {
			t.Fatalf("validRequestID(%q) = %v, want %v", in, got, ok)
		}
	}
	f("req-42", true)
	f("0f8fad5b-d9cb-469f-a165-70867728950e", true)
	f("a+b/c=@x:y~z_.", true)
	f(strings.Repeat("x", 128), true)
	f(strings.Repeat("x", 129), false)
	f("", false)
	f("a b", false)
	f(`a"b`, false)
	f("a\\b", false)
	f("é", false)
}

// FuzzTraceHeaders: whatever the bytes, the parsers of traceparent,
// tracestate and X-Request-Id never panic, a traceparent they accept is
// re-encoded to the same bytes (its first 55), and a tracestate or request
// id they accept fits the wire (schema validates the event it ends in).
func FuzzTraceHeaders(f *testing.F) {
	f.Add([]byte("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"), "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7")
	f.Add([]byte("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00-x"), "a@b=c")
	f.Add([]byte("ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"), "a=b,a=c")
	f.Add([]byte("00-00000000000000000000000000000000-00f067aa0ba902b7-01"), "a=\"<&>\\")
	f.Fuzz(func(t *testing.T, tp []byte, ts string) {
		tid, pid, flags, ok := parseTraceparent(tp)
		if ok {
			want := fmt.Sprintf("%s-%x-%x-%02x", tp[:2], tid, pid, flags)
			if string(tp[:55]) != want {
				t.Fatalf("%q parses to %s", tp, want)
			}
		}
		validRequestID(tp)
		b := schema.RequestBody{ID: "x", Operation: schema.OpChat, FinishReason: schema.FinishStop, ITLUS: []int64{}}
		if validTracestate(ts) {
			tc := traceCtx{traceID: randomTraceID(), spanID: randomSpanID(), state: ts}
			w := tc.wire(1)
			w.fill(&b)
			ev := schema.Event{Header: schema.Header{V: schema.Version, Kind: schema.KindRequest, Boot: "b", Seq: 1}, RequestBody: b}
			if err := ev.Validate(); err != nil {
				t.Fatalf("tracestate %q is valid but its event is not: %v", ts, err)
			}
		}
		if validRequestID([]byte(ts)) {
			ev := schema.Event{Header: schema.Header{V: schema.Version, Kind: schema.KindRequest, Boot: "b", Seq: 1}, RequestBody: b}
			ev.ID = "chatcmpl-" + ts
			if err := ev.Validate(); err != nil {
				t.Fatalf("request id %q is valid but its event is not: %v", ts, err)
			}
		}
	})
}

func TestTraceResponse(t *testing.T) {
	tc := traceCtx{sampled: true}
	copy(tc.traceID[:], []byte{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36})
	copy(tc.spanID[:], []byte{0x53, 0x99, 0x5c, 0x3f, 0x42, 0xcd, 0x8a, 0xd8})
	if got := string(tc.traceResponse()); got != "00-4bf92f3577b34da6a3ce929d0e0e4736-53995c3f42cd8ad8-01" {
		t.Fatal(got)
	}
	tc.sampled = false
	if got := string(tc.traceResponse()); !strings.HasSuffix(got, "-00") {
		t.Fatal(got)
	}
}

// TestTraceOverHTTP: a request's traceparent, tracestate and X-Request-Id
// reach its event and come back in traceresponse and X-Request-Id; without
// them the daemon starts a root trace and makes its own id; a failed
// request (400) and a bad X-Request-Id are traced too.
func TestTraceOverHTTP(t *testing.T) {
	ts := startServer(t, newFakeEngine(256), nil)
	const tid, pid = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	body := `{"prompt":"hello","max_tokens":4,"temperature":0.7,"top_p":0.9}`
	res := ts.post("/v1/completions", body, "traceparent", "00-"+tid+"-"+pid+"-01", "tracestate", "rojo=1,congo=2", "X-Request-Id", "req-42")
	if res.status != 200 {
		t.Fatalf("status %d: %s", res.status, res.body)
	}
	c := decodeCompletionResponse(t, res.body)
	if c.ID != "cmpl-req-42" || res.header.Get("X-Request-Id") != "req-42" {
		t.Fatalf("id %q, X-Request-Id %q", c.ID, res.header.Get("X-Request-Id"))
	}
	ev := ts.sink.request(c.ID)
	tr := res.header.Get("traceresponse")
	if ev.TraceID != tid || ev.ParentSpanID != pid || !ev.Sampled || ev.TraceState != "rojo=1,congo=2" ||
		tr != "00-"+tid+"-"+ev.SpanID+"-01" || ev.StartUnixNano == 0 {
		t.Fatalf("traceresponse %q, event %+v", tr, ev.RequestBody)
	}
	if ev.MaxTokens != 4 || ev.Temperature != 0.7 || float32(ev.TopP) != 0.9 {
		t.Fatalf("parameters %d %v %v", ev.MaxTokens, ev.Temperature, ev.TopP)
	}

	// No header: a root trace, sampled (parentbased_always_on), the daemon's id.
	res = ts.post("/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":2}`)
	c = decodeCompletionResponse(t, res.body)
	rid := res.header.Get("X-Request-Id")
	if rid == "" || c.ID != "chatcmpl-"+rid {
		t.Fatalf("id %q, X-Request-Id %q", c.ID, rid)
	}
	ev = ts.sink.request(c.ID)
	if !schema.IsTraceHex(ev.TraceID, 32) || ev.ParentSpanID != "" || !ev.Sampled ||
		res.header.Get("traceresponse") != "00-"+ev.TraceID+"-"+ev.SpanID+"-01" {
		t.Fatalf("traceresponse %q, event %+v", res.header.Get("traceresponse"), ev.RequestBody)
	}

	// An unsampled caller, a 400: traced, not sampled, no parameters.
	res = ts.post("/v1/completions", `{"prompt":"x","max_tokens":-1}`, "traceparent", "00-"+tid+"-"+pid+"-00", "X-Request-Id", "bad-1")
	if res.status != 400 || res.header.Get("X-Request-Id") != "bad-1" || !strings.HasSuffix(res.header.Get("traceresponse"), "-00") {
		t.Fatalf("status %d, headers %v", res.status, res.header)
	}
	ev = ts.sink.request("cmpl-bad-1")
	if ev.TraceID != tid || ev.Sampled || ev.ErrorType != schema.ErrInvalidRequest || ev.MaxTokens != 0 {
		t.Fatalf("event %+v", ev.RequestBody)
	}

	// A bad X-Request-Id is a 400 naming it; the response carries the
	// daemon's own id instead. A bad traceparent starts a new trace.
	res = ts.post("/v1/completions", body, "X-Request-Id", "a b", "traceparent", "00-"+tid+"-"+pid+"-0x")
	e := decodeError(t, res.body)
	rid = res.header.Get("X-Request-Id")
	if res.status != 400 || e.Param == nil || *e.Param != "X-Request-Id" || rid == "" || rid == "a b" {
		t.Fatalf("status %d, %s, X-Request-Id %q", res.status, res.body, rid)
	}
	ev = ts.sink.request("cmpl-" + rid)
	if ev.TraceID == tid || ev.ParentSpanID != "" {
		t.Fatalf("event %+v", ev.RequestBody)
	}
}

// TestTraceNonGeneration: the API's other requests honour traceparent (the
// caller's trace, a span id of their own) and answer traceresponse with the
// sampled flag clear (no span is recorded for them) and X-Request-Id, an
// error too; an invalid X-Request-Id is the generations' 400; probes and
// scrape endpoints carry neither header.
func TestTraceNonGeneration(t *testing.T) {
	ts := startServer(t, newFakeEngine(256), nil)
	const tid, pid = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	tp := "00-" + tid + "-" + pid + "-01"
	traced := regexp.MustCompile(`^00-([0-9a-f]{32})-([0-9a-f]{16})-00$`)
	f := func(method, path, body string, status int) {
		t.Helper()
		res := ts.do(method, path, body, "traceparent", tp, "X-Request-Id", "nt-1")
		m := traced.FindStringSubmatch(res.header.Get("traceresponse"))
		if res.status != status || m == nil || m[1] != tid || m[2] == pid || m[2] == "0000000000000000" || res.header.Get("X-Request-Id") != "nt-1" {
			t.Errorf("%s %s: status %d, traceresponse %q, X-Request-Id %q", method, path, res.status,
				res.header.Get("traceresponse"), res.header.Get("X-Request-Id"))
		}
		// Without headers: a new trace and the daemon's own request id.
		res = ts.do(method, path, body)
		m = traced.FindStringSubmatch(res.header.Get("traceresponse"))
		if res.status != status || m == nil || m[1] == tid || res.header.Get("X-Request-Id") == "" {
			t.Errorf("%s %s without headers: status %d, traceresponse %q, X-Request-Id %q", method, path, res.status,
				res.header.Get("traceresponse"), res.header.Get("X-Request-Id"))
		}
	}
	f("POST", "/tokenize", `{"prompt":"hello"}`, 200)
	f("POST", "/detokenize", `{"tokens":[104,105]}`, 200)
	f("GET", "/v1/models", "", 200)
	f("GET", "/v1/models/fake-model", "", 200)
	f("GET", "/v1/models/other", "", 404)
	f("POST", "/tokenize", `{"prompt":`, 400)
	f("GET", "/v1/responses/resp_x", "", 404)
	f("GET", "/v1/nothing", "", 404)

	res := ts.do("GET", "/v1/models", "", "X-Request-Id", "a b")
	if e := decodeError(t, res.body); res.status != 400 || e.Param == nil || *e.Param != "X-Request-Id" ||
		res.header.Get("traceresponse") == "" || res.header.Get("X-Request-Id") == "a b" {
		t.Errorf("bad X-Request-Id: status %d, %s, headers %v", res.status, res.body, res.header)
	}
	for _, path := range []string{"/health", "/ready", "/metrics", "/debug/engine_metrics"} {
		res := ts.do("GET", path, "", "traceparent", tp, "X-Request-Id", "nt-2")
		if res.header.Get("traceresponse") != "" || res.header.Get("X-Request-Id") != "" {
			t.Errorf("%s: traceresponse %q, X-Request-Id %q", path, res.header.Get("traceresponse"), res.header.Get("X-Request-Id"))
		}
	}
	// Nothing of these is a request event.
	if evs := ts.sink.requests(); len(evs) != 0 {
		t.Errorf("%d request events", len(evs))
	}
}
