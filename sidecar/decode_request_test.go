package sidecar

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

	"github.com/picometer/picometer/schema"
)

// sameDecode decodes line with the fast path and with schema.Decode, into
// events that start from the same state (prev, if not nil, decoded first
// into both), and fails unless both agree: the same Event (slices' nil-ness
// and the sign of zeros included) and the same validation result. It
// returns whether the fast path took the line.
func sameDecode(t *testing.T, line, prev []byte) bool {
	t.Helper()
	var fast, slow schema.Event
	if prev != nil {
		schema.Decode(prev, &fast)
		schema.Decode(prev, &slow)
	}
	var d requestDecoder
	if !d.decode(line, &fast) {
		return false
	}
	errFast := fast.Validate()
	errSlow := schema.Decode(line, &slow)
	if schema.ReasonOf(errSlow) == schema.ReasonMalformed {
		t.Fatalf("fast path took %q, which schema.Decode rejects: %v", line, errSlow)
	}
	if fmt.Sprint(errFast) != fmt.Sprint(errSlow) || schema.ReasonOf(errFast) != schema.ReasonOf(errSlow) {
		t.Fatalf("%q: fast path validates to %v, schema.Decode to %v", line, errFast, errSlow)
	}
	// %#v shows nil and empty slices apart, and -0 from 0.
	if f, s := fmt.Sprintf("%#v", fast), fmt.Sprintf("%#v", slow); f != s {
		t.Fatalf("%q decodes differently:\nfast   %s\nschema %s", line, f, s)
	}
	return true
}

// FuzzDecodeRequest holds the fast path to schema.Decode: whatever the
// bytes, a line the fast path takes decodes to the same event, with the same
// validation result, starting from an empty event or one that held another
// line.
func FuzzDecodeRequest(f *testing.F) {
	for _, line := range seedLines(f) {
		f.Add(line)
	}
	for _, line := range fastPathLines(f) {
		f.Add(line)
	}
	engine := bytes.TrimSuffix(mustAppend(f, nil, &schema.Engine{Header: schema.Header{V: 1, Kind: schema.KindEngine, Boot: "b", Seq: 1},
		EngineBody: schema.EngineBody{Steps: []schema.StepRecord{{Phase: "decode", BatchSize: 1}},
			DecodeTimeByBatchSize: schema.TimeByBatchSize{{}, {Count: 2, Sum: 1}}}}), []byte("\n"))
	request := bytes.TrimSuffix(mustAppend(f, nil, typicalRequest("b", 2)), []byte("\n"))
	f.Fuzz(func(t *testing.T, line []byte) {
		sameDecode(t, line, nil)
		sameDecode(t, line, engine)
		sameDecode(t, line, request)
	})
}

// fastPathLines are request lines in the daemons' form with values at the
// edges the fast path reads (and some it leaves to schema.Decode).
func fastPathLines(tb testing.TB) [][]byte {
	var out [][]byte
	add := func(r *schema.Request) {
		out = append(out, bytes.TrimSuffix(mustAppend(tb, nil, r), []byte("\n")))
	}
	r := typicalRequest("b0000000000000001", 7)
	add(r)
	r = typicalRequest("b", math.MaxInt64)
	r.TimeUnixNano, r.AdmittedUS, r.FinishUS = math.MinInt64+1, -1, math.MaxInt64
	r.ITLUS = []int64{}
	r.ErrorType, r.FinishReason = schema.ErrOther, schema.FinishAbort
	r.Metrics.TTFTS, r.Metrics.EndToEndLatencyS, r.Metrics.InterTokenLatencyS = 1e-7, 123456789012345678901234.0, math.SmallestNonzeroFloat64
	r.Metrics.DecodeTokensPerS = math.MaxFloat64
	add(r)
	r.ITLUS = nil
	add(r)
	line := out[0]
	for _, s := range []string{
		`"metrics":{}`, `"metrics":{"ttft_s":-0}`, `"metrics":{"ttft_s":1E+2,"end_to_end_latency_s":2.5e-3}`,
		`"metrics":{"ttft_s":0.1000000000000000055511151231257827}`, `"metrics":{"ttft_s":1e400}`, `"metrics":{"ttft_s":1e-400}`,
		`"metrics":{"ttft_s":01}`, `"metrics":{"ttft_s":1.}`, `"metrics":{"ttft_s":.5}`, `"metrics":{"ttft_s":1e}`,
		`"metrics":{"ttft_s":9007199254740993}`, `"metrics":{"ttft_s":1,"ttft_s":2}`, `"metrics":{"TTFT_s":1}`,
	} {
		out = append(out, replaceMetrics(line, s))
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

// replaceMetrics replaces the "metrics" member of a request line.
func replaceMetrics(line []byte, member string) []byte {
	i := bytes.Index(line, []byte(`"metrics":{`))
	j := bytes.IndexByte(line[i:], '}')
	return append(append(append([]byte(nil), line[:i]...), member...), line[i+j+1:]...)
}

func TestDecodeRequestEdges(t *testing.T) {
	took := 0
	for _, line := range fastPathLines(t) {
		if sameDecode(t, line, nil) {
			took++
		}
	}
	// The three encoded requests and the metrics objects that are in the
	// subset at least.
	if took < 6 {
		t.Fatalf("the fast path took %d of the edge lines", took)
	}
}

// TestDecodeRequestTakesDaemonLines: every request a daemon writes (through
// schema.Append) takes the fast path, whatever its values, and decodes as
// schema.Decode decodes it. Without this the fast path could silently stop
// being taken.
func TestDecodeRequestTakesDaemonLines(t *testing.T) {
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
	anyFloat := func() float64 {
		for {
			f := math.Float64frombits(rng.Uint64())
			if !math.IsNaN(f) && !math.IsInf(f, 0) {
				if rng.IntN(2) == 0 {
					return math.Abs(f)
				}
				return float64(rng.Int64N(1e9)) / 1e6
			}
		}
	}
	idChars := "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.:/"
	var d requestDecoder
	var ev schema.Event
	for n := range 5000 {
		r := &schema.Request{Header: schema.Header{V: schema.Version, Kind: schema.KindRequest,
			Boot: strconv.FormatUint(rng.Uint64(), 16), Seq: rng.Uint64() >> rng.UintN(64), TimeUnixNano: anyInt()}}
		var id strings.Builder
		for range rng.IntN(40) {
			id.WriteByte(idChars[rng.IntN(len(idChars))])
		}
		r.ID = id.String()
		r.Operation = schema.AttrOperation.Values[rng.IntN(len(schema.AttrOperation.Values))]
		r.Stream = rng.IntN(2) == 0
		r.AdmittedUS, r.FirstTokenUS, r.LastTokenUS, r.FinishUS = anyInt(), anyInt(), anyInt(), anyInt()
		r.PromptTokens, r.PrefillTokens, r.DecodeTokens = int(anyInt()), int(anyInt()), int(anyInt())
		r.CompletionTokens, r.DraftTokens, r.AcceptedTokens = int(anyInt()), int(anyInt()), int(anyInt())
		r.FinishReason = schema.FinishReasons[rng.IntN(len(schema.FinishReasons))]
		if rng.IntN(2) == 0 {
			r.ErrorType = schema.ErrorTypes[rng.IntN(len(schema.ErrorTypes))]
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
		m := &r.Metrics
		m.PromptTokens, m.CompletionTokens, m.PrefillTokens, m.DecodeTokens, m.JumpForwardTokens = anyInt(), anyInt(), anyInt(), anyInt(), anyInt()
		m.PrefillTokensPerS, m.DecodeTokensPerS, m.EndToEndLatencyS, m.TTFTS, m.InterTokenLatencyS = anyFloat(), anyFloat(), anyFloat(), anyFloat(), anyFloat()
		line := bytes.TrimSuffix(mustAppend(t, nil, r), []byte("\n"))
		if !sameDecode(t, line, nil) {
			t.Fatalf("request %d: the fast path did not take %s", n, line)
		}
		// With a decoder and an event that carry on from the previous line.
		if !d.decode(line, &ev) {
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

// TestDecodeRequestAllocs locks the fast path's allocations: none (the
// boot id, the operation and the finish reason are reused, the request id
// is in the decoder's buffer).
func TestDecodeRequestAllocs(t *testing.T) {
	line := bytes.TrimSuffix(mustAppend(t, nil, typicalRequest("b0000000000000001", 7)), []byte("\n"))
	var d lineDecoder
	var ev schema.Event
	if err := d.decode(line, &ev); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(1000, func() {
		if err := d.decode(line, &ev); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("decoding a typical request allocates %v times", allocs)
	}
}
