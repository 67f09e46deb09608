package sidecar

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/picometer/picometer/schema"
)

func TestDecodeLine(t *testing.T) {
	f := func(line, reason, msg string) {
		t.Helper()
		var ev schema.Event
		err := decodeLine([]byte(line), &ev)
		if reason == "" {
			if err != nil {
				t.Fatalf("decodeLine(%s): %v", line, err)
			}
			return
		}
		if schema.ReasonOf(err) != reason || (msg != "" && err.Error() != msg) {
			t.Fatalf("decodeLine(%s)\n got %q (%s)\nwant %q (%s)", line, err, schema.ReasonOf(err), msg, reason)
		}
	}
	hello := func(model, engine, daemon string) string {
		return `{"v":1,"kind":"hello","boot":"b","seq":1,"model":` + model + `,"engine":` + engine + `,"daemon":` + daemon +
			`,"config":{"b_max":8,"context_length":256}}`
	}
	f(hello(`"m"`, `"e"`, `"0.1.0"`), "", "")
	f(hello(`"m"`, `"e"`, `""`), schema.ReasonInvalidField, "daemon: missing")
	f(hello(`"`+strings.Repeat("x", 257)+`"`, `"e"`, `"1"`), schema.ReasonInvalidField, "model: 257 bytes, more than 256")
	f(hello(`"m"`, `"e\u0007"`, `"1"`), schema.ReasonInvalidField, `engine: "e\a" contains a control character`)
	f(hello(`"m\n"`, `"e"`, `"1"`), schema.ReasonInvalidField, `model: "m\n" contains a control character`)
	// Invalid UTF-8 becomes U+FFFD in the decoder (the UTF-8 check is a
	// second line of defence for label values).
	var ev schema.Event
	if err := decodeLine([]byte(hello("\"\xff\"", `"e"`, `"1"`)), &ev); err != nil || ev.Model != "\ufffd" {
		t.Fatalf("invalid UTF-8 model: %v, %q", err, ev.Model)
	}
	if err := checkHello(&schema.HelloBody{Model: "\xff", Engine: "e", Daemon: "1"}); err == nil || err.Error() != `model: "\xff" is not valid UTF-8` {
		t.Fatalf("checkHello: %v", err)
	}
	f(hello(`""`, `"e"`, `"1"`), schema.ReasonInvalidField, "model: missing")

	req := func(fields string) string {
		return `{"v":1,"kind":"request","boot":"b","seq":2,"id":"r","operation":"chat","finish_reason":"stop","finish_us":100,` + fields + `}`
	}
	f(req(`"admitted_us":10,"first_token_us":20,"last_token_us":30`), "", "")
	f(req(`"admitted_us":50,"first_token_us":20,"last_token_us":30`), schema.ReasonInvalidField, "first_token_us: 20 before admitted_us 50")
	f(req(`"admitted_us":-1,"first_token_us":-1,"last_token_us":-1`), "", "")
	f(req(`"admitted_us":1,"first_token_us":2,"last_token_us":3,"finish_reason":"timeout"`), schema.ReasonInvalidField,
		`finish_reason: "timeout" is not one of [stop length abort error]`)

	// The schema's reasons come through unchanged.
	f(`not json`, schema.ReasonMalformed, "")
	f(``, schema.ReasonMalformed, "")
	f(`[1,2]`, schema.ReasonMalformed, "")
	f(`{"v":2,"kind":"hello","boot":"b","seq":1}`, schema.ReasonUnsupportedVersion, "unsupported event version 2; this build reads version 1")
	f(`{"kind":"hello","boot":"b","seq":1}`, schema.ReasonUnsupportedVersion, "event has no version (field v); this build reads version 1")
	f(`{"v":1,"kind":"log","boot":"b","seq":1}`, schema.ReasonUnknownKind, `unknown event kind "log"`)
	f(`{"v":1,"kind":"engine","boot":"b","seq":0}`, schema.ReasonInvalidField, "seq: missing or 0")
	f(`{"v":1,"kind":"engine","boot":"b","seq":3,"kv_cache_usage":1.5}`, schema.ReasonInvalidField, "kv_cache_usage: 1.5 not in 0..1")
	f(`{"v":1,"kind":"engine","boot":"b","seq":3,"steps":[{"phase":"sleep","batch_size":1}]}`, schema.ReasonInvalidField, "")
}

func TestClosesConnection(t *testing.T) {
	for _, r := range schema.DecodeReasons {
		want := r == schema.ReasonUnsupportedVersion || r == schema.ReasonLineTooLong
		if closesConnection(r) != want {
			t.Errorf("closesConnection(%s) = %v", r, !want)
		}
	}
}

// FuzzDecode: decodeLine never panics; it either accepts an event that
// encodes and decodes again to an accepted event, or rejects it with one of
// the schema's reasons.
func FuzzDecode(f *testing.F) {
	for _, line := range seedLines(f) {
		f.Add(line)
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		var ev schema.Event
		err := decodeLine(line, &ev)
		if err != nil {
			if r := schema.ReasonOf(err); !validReason(r) || r == schema.ReasonLineTooLong || r == schema.ReasonNoHello || r == schema.ReasonStaleSeq {
				t.Fatalf("reason %q for %q: %v", r, line, err)
			}
			return
		}
		var again any
		switch ev.Kind {
		case schema.KindHello:
			again = &schema.Hello{Header: ev.Header, HelloBody: ev.HelloBody}
		case schema.KindRequest:
			again = &schema.Request{Header: ev.Header, RequestBody: ev.RequestBody}
		case schema.KindEngine:
			again = &schema.Engine{Header: ev.Header, EngineBody: ev.EngineBody}
		default:
			t.Fatalf("accepted kind %q", ev.Kind)
		}
		enc, err := schema.Append(nil, again)
		if err != nil {
			t.Fatalf("re-encoding an accepted event: %v", err)
		}
		var ev2 schema.Event
		if err := decodeLine(bytes.TrimSuffix(enc, []byte("\n")), &ev2); err != nil {
			t.Fatalf("accepted %q but not its re-encoding %q: %v", line, enc, err)
		}
	})
}

func validReason(r string) bool {
	for _, x := range schema.DecodeReasons {
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
	streams, _ := filepath.Glob(filepath.Join(streamsDir, "*.ndjson"))
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
