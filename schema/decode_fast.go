package schema

import (
	"math"
	"strconv"
	"unsafe"
)

// A request event is most of what a sidecar reads (one per finished request,
// against one engine snapshot a second), and decoding it with [Decode]
// costs about as much as every other step of ingesting it together. The
// fast path of [Decoder] reads request lines of the exact form [Append]
// writes (compact JSON, the keys of Header and RequestBody each at most
// once and in their declared order, ASCII strings without escapes, plain
// integers) in one pass without reflection, and gives up on anything else,
// which [Decode] then decodes. It lives beside Append because it depends on
// Append's key order: reorder a field of Header or RequestBody and
// TestDecoderTakesAppendedRequests fails. The fast path is an
// optimisation, never a second dialect: for every line it accepts, Decode
// yields the same Event (FuzzDecoder holds it to that), and the Event is
// validated by the same [Event.Validate].

// Decoder decodes the lines of one stream (one daemon connection): the
// single entry point a reader of events calls. Its state is the boot id of
// the last line, reused while the lines repeat it (a connection carries one
// boot), and the buffer that holds the request id, so that decoding a
// request allocates nothing. Ingest then makes no garbage, which matters
// under the sidecar's small memory limit: a 32-byte id per event kept the
// garbage collector running all the time (370 cycles and 16% of the CPU for
// 8 daemons × 40,000 events, against 135 and 5% without).
//
// ev.ID therefore aliases the decoder's buffer: like ev's slices, it is
// valid until the next line is decoded, and must be copied to be kept.
// The zero Decoder is ready to use.
type Decoder struct {
	boot string
	id   []byte
	// The trace fields' storage, like id's (ev.TraceID and the others alias
	// it until the next line).
	traceID, spanID, parentID, state []byte
}

// Decode decodes one line (without its newline) into ev, which is reset and
// reused, and validates it, with the result and errors of [Decode]. It
// never panics.
func (d *Decoder) Decode(line []byte, ev *Event) error {
	if d.fast(line, ev) {
		return ev.Validate()
	}
	return Decode(line, ev)
}

// requestKeys are a request's keys in the order Append writes them (the
// order of Header and RequestBody), with their quotes and
// colon: the decoder expects the next one and looks a key up only when
// another comes.
var requestKeys = [...]string{
	rkV: `"v":`, rkKind: `"kind":`, rkBoot: `"boot":`, rkSeq: `"seq":`, rkTS: `"ts":`,
	rkID: `"id":`, rkOperation: `"operation":`, rkStream: `"stream":`,
	rkAdmitted: `"admitted_us":`, rkFirstToken: `"first_token_us":`, rkLastToken: `"last_token_us":`, rkFinish: `"finish_us":`,
	rkPromptTokens: `"prompt_tokens":`, rkPrefillTokens: `"prefill_tokens":`, rkDecodeTokens: `"decode_tokens":`,
	rkCompletionTokens: `"completion_tokens":`, rkDraftTokens: `"draft_tokens":`, rkAcceptedTokens: `"accepted_tokens":`,
	rkFinishReason: `"finish_reason":`, rkErrorType: `"error_type":`, rkITL: `"itl_us":`,
	rkTraceID: `"trace_id":`, rkSpanID: `"span_id":`, rkParentSpanID: `"parent_span_id":`, rkSampled: `"sampled":`,
	rkTraceState: `"tracestate":`, rkStartUnixNano: `"start_unix_nano":`,
	rkMaxTokens: `"max_tokens":`, rkTemperature: `"temperature":`, rkTopP: `"top_p":`,
	rkConstraint: `"constraint":`, rkGrammar: `"grammar":`, rkCompileUS: `"compile_us":`, rkMaskUS: `"mask_us":`,
	rkMaskedTokens: `"masked_tokens":`, rkToolCalls: `"tool_calls":`, rkToolFormat: `"tool_format":`,
	rkCachedTokens: `"cached_tokens":`,
}

const (
	rkV = iota
	rkKind
	rkBoot
	rkSeq
	rkTS
	rkID
	rkOperation
	rkStream
	rkAdmitted
	rkFirstToken
	rkLastToken
	rkFinish
	rkPromptTokens
	rkPrefillTokens
	rkDecodeTokens
	rkCompletionTokens
	rkDraftTokens
	rkAcceptedTokens
	rkFinishReason
	rkErrorType
	rkITL
	rkTraceID
	rkSpanID
	rkParentSpanID
	rkSampled
	rkTraceState
	rkStartUnixNano
	rkMaxTokens
	rkTemperature
	rkTopP
	rkConstraint
	rkGrammar
	rkCompileUS
	rkMaskUS
	rkMaskedTokens
	rkToolCalls
	rkToolFormat
	rkCachedTokens
)

// fast decodes line into ev if it is a request event the fast path reads,
// and reports whether it did. When it returns false, ev holds anything and
// the caller decodes the line with Decode, which resets ev.
func (d *Decoder) fast(line []byte, ev *Event) bool {
	b := line
	if len(b) < 2 || b[0] != '{' || b[len(b)-1] != '}' {
		return false
	}
	ev.reset()
	i := 1
	var seen uint64
	k := 0 // the key expected next
	for {
		k, i = nextKey(b, i, requestKeys[:], k)
		if i < 0 || seen&(1<<k) != 0 {
			// Another event's key, a newer daemon's, one in another case
			// (which encoding/json matches too) or a repeat (Decode keeps
			// the last value).
			return false
		}
		seen |= 1 << k
		var s []byte
		switch k {
		case rkV:
			ev.V, i = scanInt(b, i)
		case rkKind:
			if s, i = scanString(b, i); i < 0 || string(s) != KindRequest {
				return false // another kind: Decode's business
			}
			ev.Kind = KindRequest
		case rkBoot:
			if s, i = scanString(b, i); i >= 0 {
				if string(s) != d.boot {
					d.boot = string(s)
				}
				ev.Boot = d.boot
			}
		case rkSeq:
			ev.Seq, i = scanDigits(b, i)
		case rkTS:
			ev.TimeUnixNano, i = scanInt64(b, i)
		case rkID:
			if s, i = scanString(b, i); i >= 0 {
				d.id = append(d.id[:0], s...)
				ev.ID = unsafe.String(unsafe.SliceData(d.id), len(d.id))
			}
		case rkOperation:
			ev.Operation, i = scanClosed(b, i, AttrOperation.Values)
		case rkStream:
			ev.Stream, i = scanBool(b, i)
		case rkAdmitted:
			ev.AdmittedUS, i = scanInt64(b, i)
		case rkFirstToken:
			ev.FirstTokenUS, i = scanInt64(b, i)
		case rkLastToken:
			ev.LastTokenUS, i = scanInt64(b, i)
		case rkFinish:
			ev.FinishUS, i = scanInt64(b, i)
		case rkPromptTokens:
			ev.PromptTokens, i = scanInt(b, i)
		case rkPrefillTokens:
			ev.PrefillTokens, i = scanInt(b, i)
		case rkDecodeTokens:
			ev.DecodeTokens, i = scanInt(b, i)
		case rkCompletionTokens:
			ev.CompletionTokens, i = scanInt(b, i)
		case rkDraftTokens:
			ev.DraftTokens, i = scanInt(b, i)
		case rkAcceptedTokens:
			ev.AcceptedTokens, i = scanInt(b, i)
		case rkFinishReason:
			ev.FinishReason, i = scanClosed(b, i, FinishReasons)
		case rkErrorType:
			ev.ErrorType, i = scanClosed(b, i, ErrorTypes)
		case rkITL:
			ev.ITLUS, i = scanInt64s(b, i, ev.ITLUS)
		case rkTraceID:
			ev.TraceID, i = d.scanHex(b, i, &d.traceID)
		case rkSpanID:
			ev.SpanID, i = d.scanHex(b, i, &d.spanID)
		case rkParentSpanID:
			ev.ParentSpanID, i = d.scanHex(b, i, &d.parentID)
		case rkSampled:
			ev.Sampled, i = scanBool(b, i)
		case rkTraceState:
			if s, i = scanString(b, i); i >= 0 {
				d.state = append(d.state[:0], s...)
				ev.TraceState = unsafe.String(unsafe.SliceData(d.state), len(d.state))
			}
		case rkStartUnixNano:
			ev.StartUnixNano, i = scanInt64(b, i)
		case rkMaxTokens:
			ev.MaxTokens, i = scanInt(b, i)
		case rkTemperature:
			ev.Temperature, i = scanFloat(b, i)
		case rkTopP:
			ev.TopP, i = scanFloat(b, i)
		case rkConstraint:
			ev.Constraint, i = scanClosed(b, i, Constraints)
		case rkGrammar:
			ev.Grammar, i = scanClosed(b, i, GrammarStates)
		case rkCompileUS:
			ev.CompileUS, i = scanInt64(b, i)
		case rkMaskUS:
			ev.MaskUS, i = scanInt64(b, i)
		case rkMaskedTokens:
			ev.MaskedTokens, i = scanInt(b, i)
		case rkToolCalls:
			ev.ToolCalls, i = scanInt(b, i)
		case rkToolFormat:
			ev.ToolFormat, i = scanClosed(b, i, ToolFormats)
		case rkCachedTokens:
			ev.CachedTokens, i = scanInt(b, i)
		}
		if i < 0 || i >= len(b) {
			return false
		}
		if b[i] == ',' {
			i++
			k++
			continue
		}
		// b ends with the object's '}': it must be this one.
		return b[i] == '}' && i == len(b)-1 && seen&(1<<rkKind) != 0
	}
}

// nextKey reads the key at b[i:] (with its colon) and returns its index in
// keys and the position after it, or i < 0 for a key not in keys. keys[want]
// is tried first.
func nextKey(b []byte, i int, keys []string, want int) (int, int) {
	if want < len(keys) {
		if k := keys[want]; len(b)-i >= len(k) && string(b[i:i+len(k)]) == k {
			return want, i + len(k)
		}
	}
	s, j := scanString(b, i)
	if j < 0 || j >= len(b) || b[j] != ':' {
		return 0, -1
	}
	for k, key := range keys {
		if len(key) == len(s)+3 && string(s) == key[1:len(key)-2] {
			return k, j + 1
		}
	}
	return 0, -1
}

// The scan functions read one value at b[i:] and return it with the
// position after it, or a position < 0 for anything outside the subset the
// fast path reads.

// scanString reads a string of printable ASCII without escapes and returns
// its bytes (valid until b changes).
func scanString(b []byte, i int) ([]byte, int) {
	if i >= len(b) || b[i] != '"' {
		return nil, -1
	}
	i++
	for j := i; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return b[i:j], j + 1
		case c < 0x20 || c > 0x7e || c == '\\':
			return nil, -1
		}
	}
	return nil, -1
}

// scanHex reads a string into *buf and returns it aliasing *buf (the trace
// ids: validation checks their form).
func (d *Decoder) scanHex(b []byte, i int, buf *[]byte) (string, int) {
	s, i := scanString(b, i)
	if i < 0 {
		return "", -1
	}
	*buf = append((*buf)[:0], s...)
	return unsafe.String(unsafe.SliceData(*buf), len(*buf)), i
}

// scanFloat reads a JSON number (RFC 8259's grammar, which is stricter than
// strconv's) as encoding/json does: strconv.ParseFloat of its text. A
// number out of float64's range is left to Decode, which rejects it.
func scanFloat(b []byte, i int) (float64, int) {
	start := i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		return 0, -1
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return 0, -1
		}
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return 0, -1
		}
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	}
	v, err := strconv.ParseFloat(unsafe.String(&b[start], i-start), 64)
	if err != nil {
		return 0, -1
	}
	return v, i
}

// scanClosed reads a string and returns the member of values it equals (so
// that it does not allocate), or a copy of it when it is none (validation
// rejects it then, naming it).
func scanClosed(b []byte, i int, values []string) (string, int) {
	s, i := scanString(b, i)
	if i < 0 {
		return "", -1
	}
	for _, v := range values {
		if string(s) == v {
			return v, i
		}
	}
	return string(s), i
}

func scanBool(b []byte, i int) (bool, int) {
	switch {
	case len(b)-i >= 4 && string(b[i:i+4]) == "true":
		return true, i + 4
	case len(b)-i >= 5 && string(b[i:i+5]) == "false":
		return false, i + 5
	}
	return false, -1
}

// digitRun reads the decimal digits at b[i:] into u (wrapping past 19
// digits: callers check the length) and returns the position after them.
// It is small enough to be inlined into both of its hot callers.
func digitRun(b []byte, i int) (u uint64, end int) {
	for ; i < len(b); i++ {
		d := b[i] - '0'
		if d > 9 {
			break
		}
		u = u*10 + uint64(d)
	}
	return u, i
}

// scanDigits reads the digits of an integer ("0" or no leading zero) as a
// uint64; a number above math.MaxUint64 is not read.
func scanDigits(b []byte, i int) (uint64, int) {
	start := i
	u, i := digitRun(b, i)
	switch n := i - start; {
	case n == 0 || (n > 1 && b[start] == '0') || n > 20:
		return 0, -1
	case n == 20:
		// 19 digits cannot overflow a uint64; the 20th can.
		var hi uint64
		for _, c := range b[start : i-1] {
			hi = hi*10 + uint64(c-'0')
		}
		if d := uint64(b[i-1] - '0'); hi > (math.MaxUint64-d)/10 {
			return 0, -1
		}
	}
	return u, i
}

func scanInt64(b []byte, i int) (int64, int) {
	neg := i < len(b) && b[i] == '-'
	if neg {
		i++
	}
	u, i := scanDigits(b, i)
	switch {
	case i < 0:
		return 0, -1
	case neg && u <= 1<<63:
		return int64(-u), i // -(1<<63) wraps to math.MinInt64
	case !neg && u <= math.MaxInt64:
		return int64(u), i
	}
	return 0, -1
}

func scanInt(b []byte, i int) (int, int) {
	v, i := scanInt64(b, i)
	if v < math.MinInt || v > math.MaxInt {
		return 0, -1
	}
	return int(v), i
}

// scanInt64s reads an array of integers into dst[:0]. As with
// Decode, an empty array gives an empty, non-nil slice and null a nil
// one (what a nil slice encodes to). Numbers of up to 18 digits (every ITL
// gap) are read inline; longer ones by scanInt64.
func scanInt64s(b []byte, i int, dst []int64) ([]int64, int) {
	if len(b)-i >= 4 && string(b[i:i+4]) == "null" {
		return nil, i + 4
	}
	if i >= len(b) || b[i] != '[' {
		return dst, -1
	}
	i++
	dst = dst[:0]
	if dst == nil {
		dst = make([]int64, 0, 64)
	}
	if i < len(b) && b[i] == ']' {
		return dst, i + 1
	}
	for {
		start := i
		neg := i < len(b) && b[i] == '-'
		if neg {
			i++
		}
		u, j := digitRun(b, i)
		var v int64
		switch n := j - i; {
		case n == 0 || (n > 1 && b[i] == '0'):
			return dst, -1
		case n > 18:
			if v, j = scanInt64(b, start); j < 0 {
				return dst, -1
			}
		case neg:
			v = -int64(u)
		default:
			v = int64(u)
		}
		if j >= len(b) {
			return dst, -1
		}
		dst = append(dst, v)
		switch b[j] {
		case ',':
			i = j + 1
		case ']':
			return dst, j + 1
		default:
			return dst, -1
		}
	}
}
