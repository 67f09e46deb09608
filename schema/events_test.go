package schema

import (
	"bytes"
	"encoding/json"
	"flag"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

const eventsDir = "../testdata/events"

func hdr(kind string, seq uint64) Header {
	return Header{V: Version, Kind: kind, Boot: "9f1c2e7a5b3d4c61", Seq: seq, TimeUnixNano: 1795000000123456789}
}

// exampleBlockSize is the KV-cache block size of the golden hello.
const exampleBlockSize = 16

// exampleEvents are the golden examples, one per kind and outcome.
func exampleEvents() map[string]any {
	ok := &Request{Header: hdr(KindRequest, 2), RequestBody: RequestBody{
		ID: "cmpl-7", Operation: OpTextCompletion, Stream: true,
		AdmittedUS: 120, FirstTokenUS: 9500, LastTokenUS: 30500, FinishUS: 30550,
		PromptTokens: 12, PrefillTokens: 12, DecodeTokens: 7, CompletionTokens: 8,
		DraftTokens: 6, AcceptedTokens: 3, FinishReason: FinishLength,
		ITLUS: []int64{4100, 2900, 3000, 3500, 2500, 2000, 3000},
	}}
	abort := &Request{Header: hdr(KindRequest, 3), RequestBody: RequestBody{
		ID: "chatcmpl-8", Operation: OpChat, Stream: true,
		AdmittedUS: 80, FirstTokenUS: 7000, LastTokenUS: 10000, FinishUS: 10400,
		PromptTokens: 30, PrefillTokens: 14, DecodeTokens: 2, CompletionTokens: 3, CachedTokens: 16,
		FinishReason: FinishAbort, ErrorType: ErrCancelled, ITLUS: []int64{1500, 1500},
	}}
	failed := &Request{Header: hdr(KindRequest, 4), RequestBody: RequestBody{
		ID: "cmpl-9", Operation: OpTextCompletion, AdmittedUS: -1, FirstTokenUS: -1, LastTokenUS: -1,
		FinishUS: 35, FinishReason: FinishError, ErrorType: ErrInvalidRequest, ITLUS: []int64{},
	}}
	traced := &Request{Header: hdr(KindRequest, 7), RequestBody: ok.RequestBody}
	traced.ID = "chatcmpl-req-42"
	traced.Operation = OpChat
	setTrace(traced)
	dec := make(TimeByBatchSize, 5)
	dec[1] = TimeCost{Count: 40, Sum: 0.16}
	dec[4] = TimeCost{Count: 10, Sum: 0.07}
	ver := make(TimeByBatchSize, 3)
	ver[2] = TimeCost{Count: 5, Sum: 0.05}
	engine := &Engine{Header: hdr(KindEngine, 5), EngineBody: EngineBody{
		EnginePrefillTimeSum: 0.25, EngineDecodeTimeSum: 0.23, PromptTokensSum: 42, CompletionTokensSum: 11,
		PrefillTokensSum: 42, DecodeTokensSum: 9, PrefillTokensPerS: 168, DecodeTokensPerS: 39.130434782608695,
		LastFinishedRequest:   abort.MLCMetrics(),
		SpecDecode:            &SpecDecode{DraftCount: []int64{6, 5, 3, 1}, AcceptCount: []int64{3, 2, 1, 0}},
		DecodeTimeByBatchSize: dec, DraftTimeByBatchSize: nil, VerifyTimeByBatchSize: ver,
		EngineDraftTimeSum: 0.0004, EngineVerifyTimeSum: 0.06, RequestsFinished: 3,
		Running: 1, Waiting: 2, Slots: 8, KVCacheUsage: 0.0625, KVBlocksUsed: 16, KVBlocksTotal: 256,
		PrefixQueries: 42, PrefixHits: 16, PrefixEvictions: 2, KVBlocksCached: 20,
		Steps: []StepRecord{
			{Phase: PhasePrefill, BatchSize: 1, Tokens: 12, DurationUS: 9000},
			{Phase: PhaseDecode, BatchSize: 2, Tokens: 2, DurationUS: 4100},
			{Phase: PhaseDraft, BatchSize: 2, Tokens: 6, DurationUS: 12},
			{Phase: PhaseVerify, BatchSize: 2, Tokens: 8, DurationUS: 5200},
		},
	}}
	totals := &Totals{Header: hdr(KindTotals, 6), TotalsBody: NewTotals()}
	for _, r := range []*Request{ok, abort, failed} {
		totals.Add(&r.RequestBody, exampleBlockSize)
	}
	return map[string]any{
		"totals.ndjson": totals,
		"hello.ndjson": &Hello{Header: hdr(KindHello, 1), HelloBody: HelloBody{
			PID: 4242, Model: "picometer-tiny", Engine: "picometer", Daemon: "0.1.0",
			Config: EngineConfig{BMax: 8, ContextLength: 256, BlockSize: exampleBlockSize, KVBlocks: 128, SpecK: 4, PrefillChunk: 64},
		}},
		"request_length.ndjson": ok,
		"request_abort.ndjson":  abort,
		"request_error.ndjson":  failed,
		"request_traced.ndjson": traced,
		"engine.ndjson":         engine,
	}
}

func TestGoldenEvents(t *testing.T) {
	for name, ev := range exampleEvents() {
		t.Run(name, func(t *testing.T) {
			got, err := Append(nil, ev)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(eventsDir, name)
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./schema -update)", err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("encoding changed (run go test ./schema -update after checking):\n got %s\nwant %s", got, want)
			}
			// Decode the golden line and encode it again: identical bytes.
			var e Event
			if err := Decode(bytes.TrimSuffix(want, []byte("\n")), &e); err != nil {
				t.Fatalf("Decode(golden): %v", err)
			}
			var again any
			switch e.Kind {
			case KindHello:
				again = &Hello{e.Header, e.HelloBody}
			case KindRequest:
				again = &Request{e.Header, e.RequestBody}
			case KindEngine:
				again = &Engine{e.Header, e.EngineBody}
			case KindTotals:
				again = &Totals{e.Header, e.TotalsBody}
			}
			if !reflect.DeepEqual(again, ev) {
				t.Fatalf("round trip changed the event:\n got %+v\nwant %+v", again, ev)
			}
			re, _ := Append(nil, again)
			if !bytes.Equal(re, want) {
				t.Fatalf("re-encoding differs:\n got %s\nwant %s", re, want)
			}
		})
	}
}

func TestMLCShapes(t *testing.T) {
	line, err := os.ReadFile(filepath.Join(eventsDir, "engine.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := json.Unmarshal(line, &raw); err != nil {
		t.Fatal(err)
	}
	dec := raw["decode_time_by_batch_size"].(map[string]any)
	for _, k := range []string{"mean{batch_size=1}", "count{batch_size=1}", "sum{batch_size=1}", "count{batch_size=4}"} {
		if _, ok := dec[k]; !ok {
			t.Errorf("decode_time_by_batch_size lacks %q: %v", k, dec)
		}
	}
	if _, ok := dec["count{batch_size=2}"]; ok {
		t.Errorf("batch sizes with count 0 must be omitted, as MLC-LLM does")
	}
	sd := raw["spec_decode"].(map[string]any)
	if p := sd["accept_prob"].(map[string]any)["accept_prob{step=0}"]; p != 0.5 {
		t.Errorf("accept_prob{step=0} = %v, want 0.5", p)
	}
	if r := sd["accept_rate"].(map[string]any)["accept_rate{step=1}"]; r != 2.0/3 {
		t.Errorf("accept_rate{step=1} = %v, want 2/3", r)
	}
	if l := sd["accept_len"].(map[string]any)["accept_len{step=1}"]; l != 0.5+0.4 {
		t.Errorf("accept_len{step=1} = %v, want 0.9", l)
	}
	// MLC-LLM RequestMetrics keys, exactly, in the engine snapshot's
	// last_finished_request (the abort example).
	var keys []string
	m := raw["last_finished_request"].(map[string]any)
	for k := range m {
		keys = append(keys, k)
	}
	want := "completion_tokens decode_tokens decode_tokens_per_s end_to_end_latency_s inter_token_latency_s jump_forward_tokens prefill_tokens prefill_tokens_per_s prompt_tokens ttft_s"
	if got := strings.Join(sorted(keys), " "); got != want {
		t.Errorf("MLC request metrics keys:\n got %s\nwant %s", got, want)
	}
	if m["ttft_s"] != 0.007 || m["end_to_end_latency_s"] != 0.0104 || m["inter_token_latency_s"] != 0.0104/3 {
		t.Errorf("MLC times: %v", m)
	}
	// A request event carries raw facts only: nothing derived.
	rline, _ := os.ReadFile(filepath.Join(eventsDir, "request_length.ndjson"))
	var req map[string]any
	if err := json.Unmarshal(rline, &req); err != nil {
		t.Fatal(err)
	}
	if _, ok := req["metrics"]; ok {
		t.Errorf("a request event carries a derived metrics object: %s", rline)
	}
}

func sorted(s []string) []string {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	return s
}

// The bodies share one Event for single-pass decoding: their JSON keys must
// be disjoint, or encoding/json rules would silently drop the clashing ones.
func TestEventBodyKeysDisjoint(t *testing.T) {
	seen := map[string]string{}
	for _, typ := range []reflect.Type{reflect.TypeOf(Header{}), reflect.TypeOf(HelloBody{}), reflect.TypeOf(RequestBody{}), reflect.TypeOf(EngineBody{}), reflect.TypeOf(TotalsBody{})} {
		for i := 0; i < typ.NumField(); i++ {
			key, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
			if prev, dup := seen[key]; dup {
				t.Errorf("JSON key %q in both %s and %s", key, prev, typ.Name())
			}
			seen[key] = typ.Name()
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	good := `{"v":1,"kind":"request","boot":"b","seq":9,"id":"x","operation":"chat","admitted_us":1,"first_token_us":2,"last_token_us":3,"finish_us":4,"completion_tokens":2,"finish_reason":"stop","itl_us":[1]}`
	f := func(line, reason, msg string) {
		t.Helper()
		var ev Event
		err := Decode([]byte(line), &ev)
		if err == nil {
			t.Errorf("Decode(%s): no error, want %s", line, reason)
			return
		}
		if got := ReasonOf(err); got != reason {
			t.Errorf("Decode(%s): reason %q, want %q (%v)", line, got, reason, err)
		}
		if !strings.Contains(err.Error(), msg) {
			t.Errorf("Decode(%s): error %q does not mention %q", line, err, msg)
		}
	}
	sub := func(old, new string) string { return strings.Replace(good, old, new, 1) }
	f(``, ReasonMalformed, "malformed event")
	f(`{`, ReasonMalformed, "malformed event")
	f(`[1,2]`, ReasonMalformed, "malformed event")
	f(`{"v":"1"}`, ReasonMalformed, "malformed event")
	f(sub(`"seq":9`, `"seq":-9`), ReasonMalformed, "malformed event")
	f(sub(`"itl_us":[1]`, `"itl_us":["a"]`), ReasonMalformed, "malformed event")
	f(`{"kind":"hello"}`, ReasonUnsupportedVersion, "no version")
	f(sub(`"v":1`, `"v":2`), ReasonUnsupportedVersion, "unsupported event version 2")
	f(sub(`"kind":"request"`, `"kind":"trace"`), ReasonUnknownKind, `unknown event kind "trace"`)
	f(sub(`"kind":"request",`, ``), ReasonInvalidField, "kind: missing")
	f(sub(`"boot":"b",`, ``), ReasonInvalidField, "boot: missing")
	f(sub(`"seq":9,`, ``), ReasonInvalidField, "seq: missing")
	f(sub(`"id":"x",`, ``), ReasonInvalidField, "id: missing")
	f(sub(`"operation":"chat"`, `"operation":"embed"`), ReasonInvalidField, "operation")
	f(sub(`"finish_reason":"stop"`, `"finish_reason":"done"`), ReasonInvalidField, "finish_reason")
	f(sub(`"finish_reason":"stop"`, `"finish_reason":"error"`), ReasonInvalidField, "error_type: missing")
	f(sub(`"finish_reason":"stop"`, `"finish_reason":"error","error_type":"oops"`), ReasonInvalidField, "error_type")
	f(sub(`"finish_us":4`, `"finish_us":-4`), ReasonInvalidField, "finish_us")
	f(sub(`"first_token_us":2`, `"first_token_us":7`), ReasonInvalidField, "first_token_us")
	f(sub(`"admitted_us":1`, `"admitted_us":3`), ReasonInvalidField, "first_token_us: 2 before admitted_us 3")
	f(sub(`"itl_us":[1]`, `"itl_us":[1,2,3]`), ReasonInvalidField, "itl_us")
	f(sub(`"itl_us":[1]`, `"itl_us":[-1]`), ReasonInvalidField, "itl_us[0]")
	f(sub(`"completion_tokens":2`, `"completion_tokens":2,"draft_tokens":1,"accepted_tokens":2`), ReasonInvalidField, "accepted_tokens")
	// cached_tokens decides the TTFT's cache label: never more than the prompt.
	f(sub(`"completion_tokens":2`, `"completion_tokens":2,"prompt_tokens":30,"cached_tokens":31`), ReasonInvalidField, "cached_tokens: 31 not in 0..prompt_tokens (30)")
	f(sub(`"completion_tokens":2`, `"completion_tokens":2,"prompt_tokens":30,"cached_tokens":-1`), ReasonInvalidField, "cached_tokens: -1 not in 0..prompt_tokens (30)")
	f(sub(`"completion_tokens":2`, `"completion_tokens":2,"cached_tokens":16`), ReasonInvalidField, "cached_tokens: 16 not in 0..prompt_tokens (0)")
	f(sub(`"completion_tokens":2`, `"completion_tokens":2,"prompt_tokens":30,"cached_tokens":"16"`), ReasonMalformed, "malformed event")
	f(`{"v":1,"kind":"hello","boot":"b","seq":1,"model":"m","engine":"e","daemon":"d","config":{"b_max":0,"context_length":1}}`, ReasonInvalidField, "config.b_max")
	f(`{"v":1,"kind":"hello","boot":"b","seq":1,"engine":"e","config":{"b_max":1,"context_length":1}}`, ReasonInvalidField, "model: missing")
	f(`{"v":1,"kind":"hello","boot":"b","seq":1,"model":"m","engine":"e","config":{"b_max":1,"context_length":1}}`, ReasonInvalidField, "daemon: missing")
	f(`{"v":1,"kind":"engine","boot":"b","seq":1,"kv_cache_usage":1.5}`, ReasonInvalidField, "kv_cache_usage")
	f(`{"v":1,"kind":"engine","boot":"b","seq":1,"running":-1}`, ReasonInvalidField, "running")
	f(`{"v":1,"kind":"engine","boot":"b","seq":1,"steps":[{"phase":"warp","batch_size":1}]}`, ReasonInvalidField, "steps[0].phase")
	f(`{"v":1,"kind":"engine","boot":"b","seq":1,"steps":[{"phase":"decode","batch_size":65}]}`, ReasonInvalidField, "steps[0].batch_size")
	f(`{"v":1,"kind":"engine","boot":"b","seq":1,"decode_time_by_batch_size":{"median{batch_size=1}":1}}`, ReasonMalformed, "median")
	f(`{"v":1,"kind":"engine","boot":"b","seq":1,"decode_time_by_batch_size":{"count{batch_size=99}":1}}`, ReasonMalformed, "batch size")
	f(`{"v":1,"kind":"engine","boot":"b","seq":1,"spec_decode":{"draft_count":[1,2],"accept_count":[1]}}`, ReasonMalformed, "spec_decode")

	// Range checks: absurd counts and durations (issue 13, the counter wrap).
	f(sub(`"completion_tokens":2`, `"completion_tokens":9223372036854775807`), ReasonInvalidField, "completion_tokens: 9223372036854775807 not in 0..1073741824")
	f(sub(`"completion_tokens":2`, `"completion_tokens":2,"prompt_tokens":1073741825`), ReasonInvalidField, "prompt_tokens: 1073741825 not in 0..1073741824")
	f(sub(`"finish_us":4`, `"finish_us":604800000001`), ReasonInvalidField, "finish_us: 604800000001 not in 0..604800000000")
	f(sub(`"itl_us":[1]`, `"itl_us":[5]`), ReasonInvalidField, "itl_us[0]: 5 not in 0..finish_us (4)")
	f(`{"v":1,"kind":"engine","boot":"b","seq":1,"preemptions":9007199254740993}`, ReasonInvalidField, "preemptions: 9007199254740993 not in 0..9007199254740992")
	f(`{"v":1,"kind":"engine","boot":"b","seq":1,"events_dropped":9223372036854775807}`, ReasonInvalidField, "events_dropped")
	f(`{"v":1,"kind":"engine","boot":"b","seq":1,"engine_decode_time_sum":1e300}`, ReasonInvalidField, "engine_decode_time_sum")
	f(`{"v":1,"kind":"engine","boot":"b","seq":1,"waiting":1073741825}`, ReasonInvalidField, "waiting: 1073741825 not in 0..1073741824")
	f(`{"v":1,"kind":"engine","boot":"b","seq":1,"spec_decode":{"draft_count":[9007199254740993],"accept_count":[1]}}`, ReasonInvalidField, "spec_decode: count at position 0")
	f(`{"v":1,"kind":"engine","boot":"b","seq":1,"decode_time_by_batch_size":{"count{batch_size=2}":1,"sum{batch_size=2}":1e13}}`, ReasonInvalidField, "decode_time_by_batch_size: batch_size 2")
	f(`{"v":1,"kind":"engine","boot":"b","seq":1,"steps":[{"phase":"decode","batch_size":1,"duration_us":604800000001}]}`, ReasonInvalidField, "steps[0]: tokens 0")

	// The good line decodes; unknown fields are tolerated.
	var ev Event
	if err := Decode([]byte(sub(`"v":1`, `"v":1,"future":{"x":[1,2]}`)), &ev); err != nil {
		t.Fatalf("good line with an unknown field: %v", err)
	}
	if ev.ID != "x" || ev.Seq != 9 || len(ev.ITLUS) != 1 {
		t.Fatalf("decoded %+v", ev)
	}
}

// An MLC-LLM producer writes no sum{…}: it is reconstructed from mean×count.
func TestTimeByBatchSizeFromMLC(t *testing.T) {
	var tb TimeByBatchSize
	if err := json.Unmarshal([]byte(`{"mean{batch_size=3}":0.5,"count{batch_size=3}":4}`), &tb); err != nil {
		t.Fatal(err)
	}
	if len(tb) != 4 || tb[3].Count != 4 || tb[3].Sum != 2 {
		t.Fatalf("got %+v", tb)
	}
}

// Decoding into a used Event reuses its slices' storage: the ITL slice keeps
// its backing array, and the allocations of a decode (the strings') do not
// grow with the number of ITL gaps.
func TestDecodeReusesStorage(t *testing.T) {
	long, err := os.ReadFile(filepath.Join(eventsDir, "request_length.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	long = bytes.TrimSpace(long)
	var ev Event
	if err := Decode(long, &ev); err != nil {
		t.Fatal(err)
	}
	if len(ev.ITLUS) < 4 {
		t.Fatalf("request_length.ndjson has %d ITL gaps; the test wants a long request", len(ev.ITLUS))
	}
	req := Request{Header: ev.Header, RequestBody: ev.RequestBody}
	req.ITLUS = []int64{req.ITLUS[0]}
	short, err := Append(nil, &req)
	if err != nil {
		t.Fatal(err)
	}
	short = bytes.TrimSpace(short)
	if err := Decode(long, &ev); err != nil {
		t.Fatal(err)
	}
	backing := &ev.ITLUS[0]
	for _, line := range [][]byte{short, long} {
		if err := Decode(line, &ev); err != nil {
			t.Fatal(err)
		}
		if &ev.ITLUS[0] != backing {
			t.Fatalf("Decode gave ITLUS a new backing array")
		}
	}
	allocs := func(line []byte) float64 {
		return testing.AllocsPerRun(100, func() {
			if err := Decode(line, &ev); err != nil {
				t.Fatal(err)
			}
		})
	}
	if a, b := allocs(short), allocs(long); a != b {
		t.Errorf("Decode allocates %v times for 1 ITL gap and %v times for %d: the ITL slice allocates", a, b, len(ev.ITLUS))
	}
}

func FuzzDecode(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join(eventsDir, "*.ndjson"))
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(bytes.TrimSpace(b))
	}
	f.Add([]byte(`{"v":1,"kind":"engine","boot":"b","seq":1,"decode_time_by_batch_size":{"count{batch_size=1}":1e308}}`))
	f.Add([]byte(`{"v":1,"kind":"request","itl_us":[1,2,3],"finish_us":9223372036854775807}`))
	f.Add([]byte("\xff\xfe{"))
	// Range-check edges (issue 13).
	f.Add([]byte(`{"v":1,"kind":"request","boot":"b","seq":1,"id":"x","operation":"chat","admitted_us":1,"first_token_us":2,"last_token_us":3,"finish_us":604800000000,"completion_tokens":1073741824,"prompt_tokens":1073741824,"finish_reason":"stop","itl_us":[604800000000]}`))
	f.Add([]byte(`{"v":1,"kind":"engine","boot":"b","seq":1,"preemptions":9007199254740992,"engine_decode_time_sum":1e12,"spec_decode":{"draft_count":[9007199254740992],"accept_count":[9007199254740992]}}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		var ev Event
		err := Decode(line, &ev)
		if err != nil {
			if ReasonOf(err) == "" {
				t.Fatalf("error without a reason: %v", err)
			}
			return
		}
		// A valid event re-encodes and decodes to a valid event.
		var enc any
		switch ev.Kind {
		case KindHello:
			enc = &Hello{ev.Header, ev.HelloBody}
		case KindRequest:
			enc = &Request{ev.Header, ev.RequestBody}
		case KindTotals:
			enc = &Totals{ev.Header, ev.TotalsBody}
		default:
			enc = &Engine{ev.Header, ev.EngineBody}
		}
		b, err := Append(nil, enc)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		var ev2 Event
		if err := Decode(bytes.TrimSuffix(b, []byte("\n")), &ev2); err != nil {
			t.Fatalf("re-decode of %s: %v", b, err)
		}
	})
}

func BenchmarkDecodeRequest(b *testing.B) {
	r := exampleEvents()["request_length.ndjson"].(*Request)
	r.ITLUS = make([]int64, 63)
	for i := range r.ITLUS {
		r.ITLUS[i] = int64(3000 + i)
	}
	r.CompletionTokens = 64
	line, _ := Append(nil, r)
	line = bytes.TrimSuffix(line, []byte("\n"))
	var ev Event
	b.ReportAllocs()
	b.SetBytes(int64(len(line)))
	for b.Loop() {
		if err := Decode(line, &ev); err != nil {
			b.Fatal(err)
		}
	}
}

// TestMLCMetrics checks every field of MLCMetrics against values worked out
// by hand from its documented definitions (times are microseconds after
// arrival; -1 means the moment never came).
func TestMLCMetrics(t *testing.T) {
	f := func(name string, b RequestBody, want MLCRequestMetrics) {
		t.Helper()
		got := b.MLCMetrics()
		near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-12*math.Max(1, math.Abs(b)) }
		if got.PromptTokens != want.PromptTokens || got.CompletionTokens != want.CompletionTokens ||
			got.PrefillTokens != want.PrefillTokens || got.DecodeTokens != want.DecodeTokens || got.JumpForwardTokens != 0 ||
			!near(got.PrefillTokensPerS, want.PrefillTokensPerS) || !near(got.DecodeTokensPerS, want.DecodeTokensPerS) ||
			!near(got.EndToEndLatencyS, want.EndToEndLatencyS) || !near(got.TTFTS, want.TTFTS) ||
			!near(got.InterTokenLatencyS, want.InterTokenLatencyS) {
			t.Errorf("%s:\n got %+v\nwant %+v", name, got, want)
		}
	}
	// 12 prompt tokens prefilled from admission (120 us) to the first token
	// (9.5 ms): 12 / 9.38 ms; 7 decode tokens from then to the finish
	// (30.55 ms): 7 / 21.05 ms; MLC's inter-token latency is 30.55 ms / 8.
	f("finished", RequestBody{AdmittedUS: 120, FirstTokenUS: 9500, LastTokenUS: 30500, FinishUS: 30550,
		PromptTokens: 12, PrefillTokens: 12, DecodeTokens: 7, CompletionTokens: 8},
		MLCRequestMetrics{PromptTokens: 12, CompletionTokens: 8, PrefillTokens: 12, DecodeTokens: 7,
			PrefillTokensPerS: 12 / 0.00938, DecodeTokensPerS: 7 / 0.02105,
			EndToEndLatencyS: 0.03055, TTFTS: 0.0095, InterTokenLatencyS: 0.03055 / 8})
	// One token, from the prefill: no decode rate.
	f("one token", RequestBody{AdmittedUS: 0, FirstTokenUS: 2000, LastTokenUS: 2000, FinishUS: 2000,
		PromptTokens: 5, PrefillTokens: 5, CompletionTokens: 1},
		MLCRequestMetrics{PromptTokens: 5, CompletionTokens: 1, PrefillTokens: 5,
			PrefillTokensPerS: 5 / 0.002, EndToEndLatencyS: 0.002, TTFTS: 0.002, InterTokenLatencyS: 0.002})
	// Cancelled mid-prefill: no token, so no TTFT and no rates.
	f("aborted before the first token", RequestBody{AdmittedUS: 80, FirstTokenUS: -1, LastTokenUS: -1, FinishUS: 400,
		PromptTokens: 40, PrefillTokens: 24},
		MLCRequestMetrics{PromptTokens: 40, PrefillTokens: 24, EndToEndLatencyS: 0.0004})
	// Rejected before admission.
	f("failed", RequestBody{AdmittedUS: -1, FirstTokenUS: -1, LastTokenUS: -1, FinishUS: 35},
		MLCRequestMetrics{EndToEndLatencyS: 0.000035})
}

// TestReasonOfAllocatesNothing: the sidecar asks ReasonOf of every applied
// line's nil error; errors.As alone moved its target to the heap, one
// allocation per event on the ingest path.
func TestReasonOfAllocatesNothing(t *testing.T) {
	if allocs := testing.AllocsPerRun(100, func() { _ = ReasonOf(nil) }); allocs != 0 {
		t.Errorf("ReasonOf(nil) allocates %v times", allocs)
	}
	if got := ReasonOf(&DecodeError{Reason: ReasonInvalidField}); got != ReasonInvalidField {
		t.Errorf("ReasonOf(invalid_field error) = %q", got)
	}
}
