package schema

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// sameDecode decodes line with the fast path and with Decode, into
// events that start from the same state (prev, if not nil, decoded first
// into both), and fails unless both agree: the same Event (slices' nil-ness
// and the sign of zeros included) and the same validation result. It
// returns whether the fast path took the line.
func sameDecode(t *testing.T, line, prev []byte) bool {
	t.Helper()
	var fast, slow Event
	if prev != nil {
		Decode(prev, &fast)
		Decode(prev, &slow)
	}
	var d Decoder
	if !d.fast(line, &fast) {
		return false
	}
	errFast := fast.Validate()
	errSlow := Decode(line, &slow)
	if ReasonOf(errSlow) == ReasonMalformed {
		t.Fatalf("fast path took %q, which Decode rejects: %v", line, errSlow)
	}
	if fmt.Sprint(errFast) != fmt.Sprint(errSlow) || ReasonOf(errFast) != ReasonOf(errSlow) {
		t.Fatalf("%q: fast path validates to %v, Decode to %v", line, errFast, errSlow)
	}
	// %#v shows nil and empty slices apart, and -0 from 0.
	if f, s := fmt.Sprintf("%#v", fast), fmt.Sprintf("%#v", slow); f != s {
		t.Fatalf("%q decodes differently:\nfast   %s\nschema %s", line, f, s)
	}
	return true
}

// FuzzDecoder holds the fast path to Decode: whatever the
// bytes, a line the fast path takes decodes to the same event, with the same
// validation result, starting from an empty event or one that held another
// line.
func FuzzDecoder(f *testing.F) {
	for _, line := range seedLines(f) {
		f.Add(line)
	}
	for _, line := range fastPathLines(f) {
		f.Add(line)
	}
	// Range-check edges (issue 13): the fast path must reject what Decode rejects.
	f.Add([]byte(`{"v":1,"kind":"request","boot":"b","seq":2,"ts":1,"id":"x","operation":"chat","stream":false,"admitted_us":1,"first_token_us":2,"last_token_us":3,"finish_us":4,"prompt_tokens":1073741825,"prefill_tokens":0,"decode_tokens":0,"completion_tokens":9223372036854775807,"draft_tokens":0,"accepted_tokens":0,"finish_reason":"stop","itl_us":[1]}`))
	f.Add([]byte(`{"v":1,"kind":"request","boot":"b","seq":2,"ts":1,"id":"x","operation":"chat","stream":false,"admitted_us":1,"first_token_us":2,"last_token_us":3,"finish_us":604800000001,"prompt_tokens":1,"prefill_tokens":0,"decode_tokens":0,"completion_tokens":2,"draft_tokens":0,"accepted_tokens":0,"finish_reason":"stop","itl_us":[604800000001]}`))
	engine := bytes.TrimSuffix(mustAppend(f, nil, &Engine{Header: Header{V: 1, Kind: KindEngine, Boot: "b", Seq: 1},
		EngineBody: EngineBody{Steps: []StepRecord{{Phase: "decode", BatchSize: 1}},
			DecodeTimeByBatchSize: TimeByBatchSize{{}, {Count: 2, Sum: 1}}}}), []byte("\n"))
	request := bytes.TrimSuffix(mustAppend(f, nil, typicalRequest("b", 2)), []byte("\n"))
	f.Fuzz(func(t *testing.T, line []byte) {
		sameDecode(t, line, nil)
		sameDecode(t, line, engine)
		sameDecode(t, line, request)
	})
}

// fastPathLines are request lines in the daemons' form with values at the
// edges the fast path reads (and some it leaves to Decode).
func fastPathLines(tb testing.TB) [][]byte {
	var out [][]byte
	add := func(r *Request) {
		out = append(out, bytes.TrimSuffix(mustAppend(tb, nil, r), []byte("\n")))
	}
	r := typicalRequest("b0000000000000001", 7)
	add(r)
	c := typicalRequest("b", 8) // a constrained request that called tools (issue 26)
	c.Constraint, c.Grammar, c.CompileUS, c.MaskUS, c.MaskedTokens, c.ToolCalls, c.ToolFormat = ConstraintTools, GrammarComplete, 1234, 567, 40, 2, "hermes"
	add(c)
	c = typicalRequest("b", 9)
	c.Constraint, c.Grammar = ConstraintRegex, GrammarDead
	add(c)
	r = typicalRequest("b", math.MaxInt64)
	r.TimeUnixNano, r.AdmittedUS, r.FinishUS = math.MinInt64+1, -1, math.MaxInt64
	r.ITLUS = []int64{}
	r.ErrorType, r.FinishReason = ErrOther, FinishAbort
	add(r)
	r.ITLUS = nil
	add(r)
	// A traced request (issue 28), and edges of its fields.
	r = typicalRequest("b", 8)
	setTrace(r)
	add(r)
	traced := out[len(out)-1]
	for _, s := range []string{`"temperature":0.7`, `"temperature":0`, `"temperature":-0`, `"temperature":2`, `"temperature":2.0000001`,
		`"temperature":1e-7`, `"temperature":1E+0`, `"temperature":1e400`, `"temperature":.5`, `"temperature":5.`, `"temperature":01`,
		`"temperature":-1`, `"temperature":null`, `"temperature":"0.7"`, `"temperature":NaN`, `"temperature":1e`, `"temperature":0x1p-2`,
		`"temperature":0.7,"temperature":0.8`} {
		out = append(out, bytes.Replace(traced, []byte(`"temperature":0.7`), []byte(s), 1))
	}
	for _, s := range []string{`"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736"`, `"trace_id":"00000000000000000000000000000000"`,
		`"trace_id":"4BF92F3577B34DA6A3CE929D0E0E4736"`, `"trace_id":"4bf92f3577b34da6a3ce929d0e0e473"`, `"trace_id":""`,
		`"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736","parent_span_id":"00f067aa0ba902b7"`} {
		out = append(out, bytes.Replace(traced, []byte(`"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736"`), []byte(s), 1))
	}
	for _, s := range []string{`"tracestate":"congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"`, `"tracestate":"a=\u003cb\u003e"`,
		`"tracestate":"a=\"b"`, `"tracestate":""`, `"sampled":false,"tracestate":"x=1"`} {
		out = append(out, bytes.Replace(traced, []byte(`"tracestate":"congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"`), []byte(s), 1))
	}
	line := out[0]
	// A line from before the request event dropped its derived metrics
	// object, and other members the fast path leaves to Decode.
	for _, s := range []string{`"itl_us":[3000,`, `"metrics":{"ttft_s":0.1},"itl_us":[3000,`,
		`"metrics":{},"itl_us":[3000,`, `"future":1.5,"itl_us":[3000,`} {
		out = append(out, bytes.Replace(line, []byte(`"itl_us":[3000,`), []byte(s), 1))
	}
	for _, s := range []string{`"seq":-0`, `"seq":18446744073709551615`, `"seq":9999999999999999999`, `"seq":01`,
		`"seq":1.0`, `"seq":1e2`, `"seq":null`, `"seq":"7"`, `"seq":7,"seq":8`, `"Seq":7`, `"seq" :7`, `"seq": 7`,
		`"seq":7,"model":"m"`, `"seq":7,"future":1`, `"seq":7,"ts":-9223372036854775808`, `"seq":7,"ts":-9223372036854775809`,
		`"seq":18446744073709551616`, `"seq":99999999999999999999`, `"seq":100000000000000000000`, `"seq":10000000000000000000`} {
		out = append(out, bytes.Replace(line, []byte(`"seq":7`), []byte(s), 1))
	}
	for _, s := range []string{`"id":""`, `"id":"a\"b"`, `"id":"a\u0041"`, "\"id\":\"\xc3\xa9\"", "\"id\":\"a\x01\"", `"id":"<&>"`} {
		out = append(out, bytes.Replace(line, []byte(`"id":"chatcmpl-0123456789abcdef"`), []byte(s), 1))
	}
	for _, s := range []string{`"kind":"hello"`, `"kind":"engine"`, `"kind":"Request"`, `"kind":"log"`} {
		out = append(out, bytes.Replace(line, []byte(`"kind":"request"`), []byte(s), 1))
	}
	out = append(out, bytes.Replace(line, []byte(`"operation":"chat"`), []byte(`"operation":"embeddings"`), 1),
		bytes.Replace(line, []byte(`"stream":true`), []byte(`"stream":1`), 1),
		bytes.Replace(line, []byte(`"itl_us":[3000,`), []byte(`"itl_us":[-1,`), 1),
		bytes.Replace(line, []byte(`"itl_us":[3000,`), []byte(`"itl_us":[ 3000,`), 1),
		bytes.Replace(line, []byte(`"itl_us":[3000,`), []byte(`"itl_us":[999999999999999999,1000000000000000000,-9223372036854775808,`), 1),
		bytes.Replace(line, []byte(`"itl_us":[3000,`), []byte(`"itl_us":[9223372036854775808,`), 1),
		bytes.Replace(line, []byte(`"itl_us":[3000,`), []byte(`"itl_us":[-0,00,`), 1),
		append(bytes.Clone(line), ' '), append([]byte(" "), line...), line[:len(line)-1], append(bytes.Clone(line), '}'))
	return out
}

func TestDecoderEdges(t *testing.T) {
	took := 0
	for _, line := range fastPathLines(t) {
		if sameDecode(t, line, nil) {
			took++
		}
	}
	// The three encoded requests and the unchanged copy at least.
	if took < 4 {
		t.Fatalf("the fast path took %d of the edge lines", took)
	}
}

// TestDecoderTakesAppendedRequests: every request a daemon writes (through
// Append) takes the fast path, whatever its values, and decodes as
// Decode decodes it. Without this the fast path could silently stop
// being taken.
func TestDecoderTakesAppendedRequests(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	anyInt := func() int64 {
		switch rng.IntN(4) {
		case 0:
			return -1
		case 1:
			return rng.Int64N(100)
		case 2:
			return rng.Int64()
		}
		return -rng.Int64()
	}
	idChars := "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.:/"
	var d Decoder
	var ev Event
	for n := range 5000 {
		r := &Request{Header: Header{V: Version, Kind: KindRequest,
			Boot: strconv.FormatUint(rng.Uint64(), 16), Seq: rng.Uint64() >> rng.UintN(64), TimeUnixNano: anyInt()}}
		var id strings.Builder
		for range rng.IntN(40) {
			id.WriteByte(idChars[rng.IntN(len(idChars))])
		}
		r.ID = id.String()
		r.Operation = AttrOperation.Values[rng.IntN(len(AttrOperation.Values))]
		r.Stream = rng.IntN(2) == 0
		r.AdmittedUS, r.FirstTokenUS, r.LastTokenUS, r.FinishUS = anyInt(), anyInt(), anyInt(), anyInt()
		r.PromptTokens, r.PrefillTokens, r.DecodeTokens = int(anyInt()), int(anyInt()), int(anyInt())
		r.CompletionTokens, r.DraftTokens, r.AcceptedTokens = int(anyInt()), int(anyInt()), int(anyInt())
		r.FinishReason = FinishReasons[rng.IntN(len(FinishReasons))]
		if rng.IntN(2) == 0 {
			r.ErrorType = ErrorTypes[rng.IntN(len(ErrorTypes))]
		}
		switch rng.IntN(3) {
		case 0:
			r.ITLUS = nil
		case 1:
			r.ITLUS = []int64{}
		default:
			for range rng.IntN(200) {
				r.ITLUS = append(r.ITLUS, anyInt())
			}
		}
		line := bytes.TrimSuffix(mustAppend(t, nil, r), []byte("\n"))
		if !sameDecode(t, line, nil) {
			t.Fatalf("request %d: the fast path did not take %s", n, line)
		}
		// With a decoder and an event that carry on from the previous line.
		if !d.fast(line, &ev) {
			t.Fatalf("request %d: the fast path did not take it on a used decoder", n)
		}
	}
	for _, name := range []string{"request_abort.ndjson", "request_error.ndjson", "request_length.ndjson"} {
		data, err := os.ReadFile(filepath.Join(eventsDir, name))
		if err != nil {
			t.Fatal(err)
		}
		if !sameDecode(t, bytes.TrimSuffix(data, []byte("\n")), nil) {
			t.Errorf("%s: the fast path did not take it", name)
		}
	}
}

// TestDecoderAllocs locks the fast path's allocations: none (the
// boot id, the operation and the finish reason are reused, the request id
// is in the decoder's buffer).
func TestDecoderAllocs(t *testing.T) {
	line := bytes.TrimSuffix(mustAppend(t, nil, typicalRequest("b0000000000000001", 7)), []byte("\n"))
	var d Decoder
	var ev Event
	if err := d.Decode(line, &ev); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(1000, func() {
		if err := d.Decode(line, &ev); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("decoding a typical request allocates %v times", allocs)
	}
}

func TestDecoderDecode(t *testing.T) {
	f := func(line, reason, msg string) {
		t.Helper()
		var ev Event
		err := decodeOne([]byte(line), &ev)
		if reason == "" {
			if err != nil {
				t.Fatalf("decodeOne(%s): %v", line, err)
			}
			return
		}
		if ReasonOf(err) != reason || (msg != "" && err.Error() != msg) {
			t.Fatalf("decodeOne(%s)\n got %q (%s)\nwant %q (%s)", line, err, ReasonOf(err), msg, reason)
		}
	}
	hello := func(model, engine, daemon string) string {
		return `{"v":1,"kind":"hello","boot":"b","seq":1,"model":` + model + `,"engine":` + engine + `,"daemon":` + daemon +
			`,"config":{"b_max":8,"context_length":256}}`
	}
	f(hello(`"m"`, `"e"`, `"0.1.0"`), "", "")
	f(hello(`"m"`, `"e"`, `""`), ReasonInvalidField, "daemon: missing")
	f(hello(`"`+strings.Repeat("x", 257)+`"`, `"e"`, `"1"`), ReasonInvalidField, "model: 257 bytes, more than 256")
	f(hello(`"m"`, `"e\u0007"`, `"1"`), ReasonInvalidField, `engine: "e\a" contains a control character`)
	f(hello(`"m\n"`, `"e"`, `"1"`), ReasonInvalidField, `model: "m\n" contains a control character`)
	// Invalid UTF-8 becomes U+FFFD in the decoder (the UTF-8 check is a
	// second line of defence for label values).
	var ev Event
	if err := decodeOne([]byte(hello("\"\xff\"", `"e"`, `"1"`)), &ev); err != nil || ev.Model != "\ufffd" {
		t.Fatalf("invalid UTF-8 model: %v, %q", err, ev.Model)
	}
	if err := (&HelloBody{Model: "\xff", Engine: "e", Daemon: "1", Config: EngineConfig{BMax: 1, ContextLength: 1}}).validate(); err == nil || err.Error() != `model: "\xff" is not valid UTF-8` {
		t.Fatalf("HelloBody.validate: %v", err)
	}
	f(hello(`""`, `"e"`, `"1"`), ReasonInvalidField, "model: missing")

	req := func(fields string) string {
		return `{"v":1,"kind":"request","boot":"b","seq":2,"id":"r","operation":"chat","finish_reason":"stop","finish_us":100,` + fields + `}`
	}
	f(req(`"admitted_us":10,"first_token_us":20,"last_token_us":30`), "", "")
	f(req(`"admitted_us":50,"first_token_us":20,"last_token_us":30`), ReasonInvalidField, "first_token_us: 20 before admitted_us 50")
	f(req(`"admitted_us":-1,"first_token_us":-1,"last_token_us":-1`), "", "")
	f(req(`"admitted_us":1,"first_token_us":2,"last_token_us":3,"finish_reason":"timeout"`), ReasonInvalidField,
		`finish_reason: "timeout" is not one of [stop length abort error]`)

	// The schema's reasons come through unchanged.
	f(`not json`, ReasonMalformed, "")
	f(``, ReasonMalformed, "")
	f(`[1,2]`, ReasonMalformed, "")
	f(`{"v":2,"kind":"hello","boot":"b","seq":1}`, ReasonUnsupportedVersion, "unsupported event version 2; this build reads version 1")
	f(`{"kind":"hello","boot":"b","seq":1}`, ReasonUnsupportedVersion, "event has no version (field v); this build reads version 1")
	f(`{"v":1,"kind":"log","boot":"b","seq":1}`, ReasonUnknownKind, `unknown event kind "log"`)
	f(`{"v":1,"kind":"engine","boot":"b","seq":0}`, ReasonInvalidField, "seq: missing or 0")
	f(`{"v":1,"kind":"engine","boot":"b","seq":3,"kv_cache_usage":1.5}`, ReasonInvalidField, "kv_cache_usage: 1.5 not in 0..1")
	f(`{"v":1,"kind":"engine","boot":"b","seq":3,"steps":[{"phase":"sleep","batch_size":1}]}`, ReasonInvalidField, "")
}

// FuzzDecoderRoundTrip: a Decoder never panics; it either accepts an event that
// encodes and decodes again to an accepted event, or rejects it with one of
// the schema's reasons.
func FuzzDecoderRoundTrip(f *testing.F) {
	for _, line := range seedLines(f) {
		f.Add(line)
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		var ev Event
		err := decodeOne(line, &ev)
		if err != nil {
			if r := ReasonOf(err); !validReason(r) || r == ReasonLineTooLong || r == ReasonNoHello || r == ReasonStaleSeq {
				t.Fatalf("reason %q for %q: %v", r, line, err)
			}
			return
		}
		var again any
		switch ev.Kind {
		case KindHello:
			again = &Hello{Header: ev.Header, HelloBody: ev.HelloBody}
		case KindRequest:
			again = &Request{Header: ev.Header, RequestBody: ev.RequestBody}
		case KindEngine:
			again = &Engine{Header: ev.Header, EngineBody: ev.EngineBody}
		case KindTotals:
			again = &Totals{Header: ev.Header, TotalsBody: ev.TotalsBody}
		default:
			t.Fatalf("accepted kind %q", ev.Kind)
		}
		enc, err := Append(nil, again)
		if err != nil {
			t.Fatalf("re-encoding an accepted event: %v", err)
		}
		var ev2 Event
		if err := decodeOne(bytes.TrimSuffix(enc, []byte("\n")), &ev2); err != nil {
			t.Fatalf("accepted %q but not its re-encoding %q: %v", line, enc, err)
		}
	})
}

func validReason(r string) bool {
	for _, x := range DecodeReasons {
		if x == r {
			return true
		}
	}
	return false
}

// seedLines are the golden events and a few broken lines.
func seedLines(tb testing.TB) [][]byte {
	tb.Helper()
	var out [][]byte
	files, _ := filepath.Glob(filepath.Join(eventsDir, "*.ndjson"))
	streams, _ := filepath.Glob(filepath.Join("../testdata/sidecar/streams", "*.ndjson"))
	for _, path := range append(files, streams...) {
		data, err := os.ReadFile(path)
		if err != nil {
			tb.Fatal(err)
		}
		for _, l := range bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n")) {
			out = append(out, l)
		}
	}
	if len(out) == 0 {
		tb.Fatal("no seed lines")
	}
	for _, s := range []string{``, `{}`, `null`, `{"v":1}`, `{"v":1,"kind":"engine","boot":"b","seq":1,"decode_time_by_batch_size":{"count{batch_size=99}":1}}`,
		`{"v":1,"kind":"engine","boot":"b","seq":1,"spec_decode":{"draft_count":[1],"accept_count":[]}}`,
		`{"v":1,"kind":"request","boot":"b","seq":1,"itl_us":[1,2,3]}`} {
		out = append(out, []byte(s))
	}
	return out
}

// decodeOne decodes line with a fresh Decoder.
func decodeOne(line []byte, ev *Event) error {
	var d Decoder
	return d.Decode(line, ev)
}

func mustAppend(tb testing.TB, dst []byte, ev any) []byte {
	tb.Helper()
	out, err := Append(dst, ev)
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// typicalRequest is a streamed chat request of 64 tokens, as a daemon
// sends it.
func typicalRequest(boot string, seq uint64) *Request {
	r := &Request{Header: Header{V: Version, Kind: KindRequest, Boot: boot, Seq: seq, TimeUnixNano: 1795000000123456789}}
	r.ID = "chatcmpl-0123456789abcdef"
	r.Operation = OpChat
	r.Stream = true
	r.AdmittedUS, r.FirstTokenUS = 150, 12000
	r.PromptTokens, r.PrefillTokens, r.DecodeTokens, r.CompletionTokens = 100, 100, 63, 64
	for i := range 63 {
		r.ITLUS = append(r.ITLUS, int64(3000+i*37))
	}
	r.LastTokenUS = r.FirstTokenUS + 63*4152
	r.FinishUS = r.LastTokenUS + 50
	r.FinishReason = FinishLength
	return r
}

// setTrace gives r the trace fields of a sampled request with a parent.
func setTrace(r *Request) {
	r.TraceID, r.SpanID, r.ParentSpanID = "4bf92f3577b34da6a3ce929d0e0e4736", "53995c3f42cd8ad8", "00f067aa0ba902b7"
	r.Sampled, r.TraceState = true, "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"
	r.StartUnixNano = 1795000000100000000
	r.MaxTokens, r.Temperature, r.TopP = 64, 0.7, 0.95
}

// TestDecoderTakesTracedRequests: the fast path reads the trace and
// parameter fields (issue 28) as Append writes them, not only Decode.
func TestDecoderTakesTracedRequests(t *testing.T) {
	r := typicalRequest("b", 9)
	setTrace(r)
	for _, temp := range []float64{0, 0.7, 1, 2, 1e-7, 0.30000000000000004} {
		r.Temperature = temp
		line := bytes.TrimSuffix(mustAppend(t, nil, r), []byte("\n"))
		if !sameDecode(t, line, nil) {
			t.Fatalf("the fast path did not take %s", line)
		}
		var d Decoder
		var ev Event
		if err := d.Decode(line, &ev); err != nil || ev.TraceID != r.TraceID || ev.ParentSpanID != r.ParentSpanID ||
			ev.TraceState != r.TraceState || ev.Temperature != temp || !ev.Sampled || ev.MaxTokens != 64 {
			t.Fatalf("%s decodes to %+v, %v", line, ev.RequestBody, err)
		}
	}
}
