package schema

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestBucketIndex(t *testing.T) {
	f := func(bounds []float64, v float64, want int) {
		t.Helper()
		if got := BucketIndex(bounds, v); got != want {
			t.Errorf("BucketIndex(%v, %v) = %d, want %d", bounds, v, got, want)
		}
	}
	b := []float64{1, 2, 5}
	f(b, 0, 0)
	f(b, 1, 0) // le: the bound itself is in its bucket
	f(b, 1.0000001, 1)
	f(b, 5, 2)
	f(b, 5.5, 3) // +Inf
	f(nil, 3, 0)
}

// TestTotalsAdd: each request lands where the sidecar exports it.
func TestTotalsAdd(t *testing.T) {
	ev := exampleEvents()
	tot := NewTotals()
	for _, name := range []string{"request_length.ndjson", "request_abort.ndjson", "request_error.ndjson"} {
		tot.Add(&ev[name].(*Request).RequestBody, exampleBlockSize)
	}
	chat, text := &tot.Ops[opIndex(OpChat)], &tot.Ops[opIndex(OpTextCompletion)]
	if got := tot.Requests(); got != 3 {
		t.Errorf("Requests() = %d, want 3", got)
	}
	if text.PromptTokens != 12 || text.CompletionTokens != 8 || chat.PromptTokens != 30 || chat.CompletionTokens != 3 {
		t.Errorf("tokens: text %d/%d chat %d/%d, want 12/8 30/3", text.PromptTokens, text.CompletionTokens, chat.PromptTokens, chat.CompletionTokens)
	}
	if text.Finished[indexIn(FinishReasons, FinishLength)] != 1 || text.Finished[indexIn(FinishReasons, FinishError)] != 1 ||
		chat.Finished[indexIn(FinishReasons, FinishAbort)] != 1 {
		t.Errorf("finished: text %v chat %v", text.Finished, chat.Finished)
	}
	if text.Failed[indexIn(ErrorTypes, ErrInvalidRequest)] != 1 || chat.Failed[indexIn(ErrorTypes, ErrCancelled)] != 1 {
		t.Errorf("failed: text %v chat %v", text.Failed, chat.Failed)
	}
	// The length request: 7 ITL gaps, TTFT 9.5 ms, succeeded.
	if n := text.Hists[HistInterTokenLatency].Count(); n != 7 {
		t.Errorf("text ITL count %d, want 7", n)
	}
	if h := text.Hists[HistTTFT]; h.Count() != 1 || h.Sum != 0.0095 || h.Counts[BucketIndex(TTFTBuckets, 0.0095)] != 1 {
		t.Errorf("text TTFT %+v", h)
	}
	if h := text.Hists[HistRequestDuration]; h.Count() != 1 || h.Sum != 0.03055 {
		t.Errorf("text duration %+v", h)
	}
	// The failed request never reached the engine: only its duration, by error type.
	if h := text.DurationByError[indexIn(ErrorTypes, ErrInvalidRequest)]; h.Count() != 1 || h.Sum != 0.000035 {
		t.Errorf("text duration of invalid_request %+v", h)
	}
	if n := text.Hists[HistPromptLength].Count(); n != 1 {
		t.Errorf("text prompt length count %d, want 1 (the failed request was not admitted)", n)
	}
	if h := chat.Hists[HistRequestDuration]; h.Count() != 0 {
		t.Errorf("chat duration of successes %+v, want none (the chat request was aborted)", h)
	}
	if h := chat.Hists[HistTimePerOutputToken]; h.Count() != 1 || h.Sum != 0.0015 {
		t.Errorf("chat time per output token %+v, want (10000-7000)/2 µs", h)
	}
}

// TestCacheOutcome: hit when at most the block holding the last prompt
// token was recomputed, partial when more was, miss when nothing was cached.
func TestCacheOutcome(t *testing.T) {
	f := func(prompt, cached, blockSize int, want string) {
		t.Helper()
		if got := CacheOutcome(&RequestBody{PromptTokens: prompt, CachedTokens: cached}, blockSize); got != want {
			t.Errorf("CacheOutcome(prompt %d, cached %d, block %d) = %q, want %q", prompt, cached, blockSize, got, want)
		}
	}
	f(2030, 2016, 16, CacheHit)     // a repeated prompt: all full blocks before the last token
	f(2032, 2016, 16, CacheHit)     // the last block ends at the last token, which is recomputed: 16 left
	f(2033, 2016, 16, CachePartial) // 17 recomputed: more than a block was new
	f(2051, 2032, 16, CachePartial) // turn 2 of a chat: the new turn's tokens
	f(48, 16, 16, CachePartial)
	f(30, 0, 16, CacheMiss)
	f(10, 0, 16, CacheMiss) // shorter than a block: never cached
	f(0, 0, 16, CacheMiss)  // failed before tokenizing
	f(17, 16, 1, CacheHit)  // blocks of one token: only the last token recomputed
	f(18, 16, 1, CachePartial)
	f(17, 16, 0, CacheHit) // no block size known: counts as 1
	f(18, 16, 0, CachePartial)
	f(18, 16, -4, CachePartial)
	f(16, 15, -4, CacheHit)
	for _, v := range []string{CacheHit, CachePartial, CacheMiss} {
		if !AttrCache.Allows(v) {
			t.Errorf("AttrCache does not allow %q", v)
		}
	}
}

// TestTotalsTTFTCache: a request's TTFT lands in Hists[HistTTFT] and in the
// TTFTCache histogram of its outcome, which the sidecar exports.
func TestTotalsTTFTCache(t *testing.T) {
	tot := NewTotals()
	add := func(prompt, cached int, ttftUS int64) {
		r := typicalRequest("c", 1).RequestBody
		r.PromptTokens, r.CachedTokens, r.FirstTokenUS = prompt, cached, ttftUS
		if !tot.Add(&r, 16) {
			t.Fatalf("Add refused %+v", r)
		}
	}
	add(100, 96, 2000)  // hit
	add(100, 96, 3000)  // hit
	add(100, 32, 50000) // partial
	add(100, 0, 900000) // miss
	r := typicalRequest("c", 1).RequestBody
	op := &tot.Ops[opIndex(r.Operation)]
	for c, want := range []struct {
		n   uint64
		sum float64
	}{{2, 0.005}, {1, 0.05}, {1, 0.9}} {
		if h := op.TTFTCache[c]; h.Count() != want.n || math.Abs(h.Sum-want.sum) > 1e-12 {
			t.Errorf("ttft_cache[%s] = %d observations, sum %v; want %d, %v", CacheOutcomes[c], h.Count(), h.Sum, want.n, want.sum)
		}
	}
	if n := op.Hists[HistTTFT].Count(); n != 4 {
		t.Errorf("hists[ttft] has %d observations, want 4", n)
	}
	if err := tot.validate(); err != nil {
		t.Errorf("validate: %v", err)
	}
}

func TestTotalsAddAllocs(t *testing.T) {
	tot := NewTotals()
	r := typicalRequest("b", 1)
	if n := testing.AllocsPerRun(100, func() { tot.Add(&r.RequestBody, 16) }); n != 0 {
		t.Errorf("Add allocates %v times per request, want 0", n)
	}
}

// TestTotalsRejected: every range and shape check of a totals event.
func TestTotalsRejected(t *testing.T) {
	good, err := os.ReadFile(filepath.Join(eventsDir, "totals.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	good = bytes.TrimSuffix(good, []byte("\n"))
	var ev Event
	if err := Decode(good, &ev); err != nil {
		t.Fatalf("golden totals: %v", err)
	}
	f := func(old, new, msg string) {
		t.Helper()
		line := bytes.Replace(good, []byte(old), []byte(new), 1)
		if bytes.Equal(line, good) {
			t.Fatalf("%q not in the golden line", old)
		}
		err := Decode(line, &ev)
		if ReasonOf(err) != ReasonInvalidField || !strings.Contains(err.Error(), msg) {
			t.Errorf("%s → %s: got %v, want invalid_field mentioning %q", old, new, err, msg)
		}
	}
	f(`"ops":[{`, `"ops":[{},{`, "ops: 3 entries")
	f(`"prompt_tokens":30`, `"prompt_tokens":9007199254740993`, "ops[chat]: prompt_tokens 9007199254740993")
	f(`"prompt_tokens":30`, `"prompt_tokens":-1`, "ops[chat]: prompt_tokens -1")
	f(`"finished":[0,0,1,0]`, `"finished":[0,0,1]`, "ops[chat].finished: 3 entries")
	f(`"finished":[0,0,1,0]`, `"finished":[0,0,-1,0]`, "ops[chat].finished[2]: -1")
	f(`"failed":[0,0,0,0,0,0,0,1,0,0,0]`, `"failed":[0,0,0,0,0,0,0,9007199254740993,0,0,0]`, "ops[chat].failed[7]")
	f(`{"counts":[0,0,1,`, `{"counts":[0,1,`, "ops[chat].hists[ttft]: counts has the wrong number of buckets")
	f(`{"counts":[0,0,1,`, `{"counts":[9007199254740992,0,1,`, "ops[chat].hists[ttft]: counts above 2^53")
	f(`"sum":0.007`, `"sum":-0.007`, "ops[chat].hists[ttft]: sum out of range")
	f(`"sum":0.007`, `"sum":1e300`, "ops[chat].hists[ttft]: sum out of range")
	f(`"duration_by_error":[`, `"duration_by_error":[{"counts":null,"sum":1},`, "ops[chat].duration_by_error: 12 entries")
	f(`"duration_by_error":[{"counts":null,"sum":0}`, `"duration_by_error":[{"counts":null,"sum":1}`, "ops[chat].duration_by_error["+ErrorTypes[0]+"]: a sum without counts")
	// The chat request was a hit: ttft_cache's first histogram holds it.
	f(`"ttft_cache":[`, `"ttft_cache":[{"counts":null,"sum":0},`, "ops[chat].ttft_cache: 4 entries, want 3")
	f(`"ttft_cache":[{"counts":[0,0,1,`, `"ttft_cache":[{"counts":[0,0,2,`, "ops[chat].ttft_cache: bucket 2: the outcomes count 2, hists[ttft] 1")
	f(`"ttft_cache":[{"counts":[0,0,1,`, `"ttft_cache":[{"counts":[0,0,0,`, "ops[chat].ttft_cache: bucket 2: the outcomes count 0, hists[ttft] 1")
	f(`"ttft_cache":[{"counts":[0,0,1,`, `"ttft_cache":[{"counts":[0,1,`, "ops[chat].ttft_cache: hit: counts has the wrong number of buckets")
	f(`"ttft_cache":[{"counts":[0,0,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0],"sum":0.007}`,
		`"ttft_cache":[{"counts":[0,0,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0],"sum":-1}`, "ops[chat].ttft_cache: hit: sum out of range")
}

// TestTotalsWithoutTTFTCache: a daemon that predates the split sends no
// ttft_cache; its totals decode, with TTFTCache nil.
func TestTotalsWithoutTTFTCache(t *testing.T) {
	good, err := os.ReadFile(filepath.Join(eventsDir, "totals.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	tot := NewTotals()
	for i := range tot.Ops {
		tot.Ops[i].TTFTCache = nil
	}
	var ev Event
	if err := json.Unmarshal(good, &ev); err != nil {
		t.Fatal(err)
	}
	ev.TotalsBody.Ops[0].TTFTCache, ev.TotalsBody.Ops[1].TTFTCache = nil, nil
	line := mustAppend(t, nil, &Totals{Header: ev.Header, TotalsBody: ev.TotalsBody})
	if bytes.Contains(line, []byte("ttft_cache")) {
		t.Fatalf("ttft_cache not omitted: %s", line)
	}
	var back Event
	if err := Decode(bytes.TrimSuffix(line, []byte("\n")), &back); err != nil {
		t.Fatalf("totals without ttft_cache: %v", err)
	}
	if back.Ops[0].TTFTCache != nil {
		t.Errorf("TTFTCache = %v, want nil", back.Ops[0].TTFTCache)
	}
}

// FuzzTotals: whatever the bytes, a totals event is rejected with a schema
// reason or accepted with every count and sum in range, and encodes and
// decodes again to the same totals.
func FuzzTotals(f *testing.F) {
	good, err := os.ReadFile(filepath.Join(eventsDir, "totals.ndjson"))
	if err != nil {
		f.Fatal(err)
	}
	good = bytes.TrimSuffix(good, []byte("\n"))
	f.Add(good)
	f.Add(bytes.Replace(good, []byte(`"sum":0.007`), []byte(`"sum":1e300`), 1))
	f.Add(bytes.Replace(good, []byte(`"finished":[0,0,1,0]`), []byte(`"finished":[0,0,9007199254740992,0]`), 1))
	f.Add(bytes.Replace(good, []byte(`"counts":[0,0,1,`), []byte(`"counts":[4503599627370496,4503599627370496,1,`), 1))
	f.Add([]byte(`{"v":1,"kind":"totals","boot":"b","seq":1,"ops":null}`))
	f.Add(bytes.Replace(good, []byte(`"ttft_cache":[{"counts":[0,0,1,`), []byte(`"ttft_cache":[{"counts":[0,0,2,`), 1))
	f.Add(bytes.Replace(good, []byte(`,"ttft_cache":[`), []byte(`,"ttft_cache":null,"x":[`), 1))
	f.Fuzz(func(t *testing.T, line []byte) {
		var ev Event
		err := Decode(line, &ev)
		if err != nil || ev.Kind != KindTotals {
			if err != nil && !validReason(ReasonOf(err)) {
				t.Fatalf("reason %q: %v", ReasonOf(err), err)
			}
			return
		}
		for i := range ev.Ops {
			o := &ev.Ops[i]
			for _, h := range append(append(append([]Hist{}, o.Hists...), o.DurationByError...), o.TTFTCache...) {
				if h.Count() > MaxCumulative || !(h.Sum >= 0) || math.IsInf(h.Sum, 0) {
					t.Fatalf("accepted a histogram out of range: %+v", h)
				}
			}
		}
		if n := ev.Requests(); n < 0 || n > int64(len(ev.Ops)*len(FinishReasons))*MaxCumulative {
			t.Fatalf("accepted %d requests", n)
		}
		enc := mustAppend(t, nil, &Totals{Header: ev.Header, TotalsBody: ev.TotalsBody})
		var ev2 Event
		if err := Decode(bytes.TrimSuffix(enc, []byte("\n")), &ev2); err != nil {
			t.Fatalf("accepted %q but not its re-encoding %q: %v", line, enc, err)
		}
	})
}
