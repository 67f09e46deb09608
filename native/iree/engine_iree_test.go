//go:build iree && cgo

package iree

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/picometer/picometer/modelgen"
	"github.com/picometer/picometer/native"
)

// The engine tests share one tiny model file and one compile cache, so the
// step is compiled once per batch size for the whole run.
var (
	tinyOnce     sync.Once
	tinyDir      string
	tinyPath     string
	tinyCacheDir string
	tinyErr      error
)

func tinyModel(tb testing.TB) (path, cache string) {
	tb.Helper()
	tinyOnce.Do(func() {
		tinyDir, tinyErr = os.MkdirTemp("", "picometer-iree-test-")
		if tinyErr != nil {
			return
		}
		tinyPath = filepath.Join(tinyDir, "tiny.gguf")
		tinyCacheDir = filepath.Join(tinyDir, "cache")
		tinyErr = modelgen.Write(tinyPath, modelgen.Tiny)
	})
	if tinyErr != nil {
		tb.Fatal(tinyErr)
	}
	return tinyPath, tinyCacheDir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if tinyDir != "" {
		os.RemoveAll(tinyDir)
	}
	os.Exit(code)
}

func engineConfig(bmax int) native.Config {
	c := native.DefaultConfig()
	c.BMax, c.SpecK, c.Threads = bmax, 0, 1
	return c
}

func openTiny(tb testing.TB, cfg native.Config) *Engine {
	tb.Helper()
	lib, compiler := needRuntime(tb)
	path, cache := tinyModel(tb)
	e, err := OpenEngine(path, Options{Runtime: lib, Compiler: compiler, CacheDir: cache, Config: cfg})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { e.Close() })
	return e
}

// runner is what run drives: the IREE engine or the C one.
type runner interface {
	Submit([]int32, native.Params) (native.ID, error)
	Step() ([]native.Output, error)
}

type result struct {
	tokens []int32
	finish string
	stats  native.RequestStats
	lps    []float32
}

// run submits every prompt at once and steps until all finish.
func run(tb testing.TB, e runner, prompts [][]int32, p native.Params) []result {
	tb.Helper()
	ids := map[native.ID]int{}
	for i, pr := range prompts {
		id, err := e.Submit(pr, p)
		if err != nil {
			tb.Fatal(err)
		}
		ids[id] = i
	}
	res := make([]result, len(prompts))
	for left := len(prompts); left > 0; {
		outs, err := e.Step()
		if err != nil {
			tb.Fatal(err)
		}
		for _, o := range outs {
			r := &res[ids[o.ID]]
			r.tokens = append(r.tokens, o.Tokens...)
			r.lps = append(r.lps, o.Logprobs...)
			if o.Finish != "" {
				r.finish, r.stats = o.Finish, *o.Stats
				r.stats.EmitNS = slices.Clone(o.Stats.EmitNS)
				left--
			}
		}
	}
	return res
}

var prompts = [][]int32{
	{256, 'H', 'e', 'l', 'l', 'o'},
	{256, 'T', 'h', 'e', ' ', 'q', 'u', 'i', 'c', 'k', ' ', 'b', 'r', 'o', 'w', 'n'},
	{256, 'a'},
	{256, '1', '2', '3', '4', '5', '6', '7', '8', '9', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9', '0'},
	{256, 'x', 'y', 'z'},
}

// TestEngineGreedyMatchesReference: greedy output of the IREE engine, for
// prompts run one at a time, equals the Go reference forward pass's and the
// C engine's (speculation off) on the same weights.
func TestEngineGreedyMatchesReference(t *testing.T) {
	e := openTiny(t, engineConfig(4))
	path, _ := tinyModel(t)
	ref, err := loadReference(path)
	if err != nil {
		t.Fatal(err)
	}
	c, err := native.Open(path, engineConfig(4))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const n = 24
	for _, pr := range prompts {
		want, err := ref.Greedy(pr, n)
		if err != nil {
			t.Fatal(err)
		}
		got := run(t, e, [][]int32{pr}, native.Params{MaxTokens: n})[0]
		cgot := run(t, c, [][]int32{pr}, native.Params{MaxTokens: n})[0]
		if !slices.Equal(got.tokens, want) || !slices.Equal(cgot.tokens, want) {
			t.Fatalf("prompt %v:\niree      %v\nC engine  %v\nreference %v", pr, got.tokens, cgot.tokens, want)
		}
		if got.finish != native.FinishLength {
			t.Errorf("finish %q, want length", got.finish)
		}
	}
}

// TestEngineBatchEqualsSequential: prompts of different lengths run
// together (batched in one call per step, prefilled in chunks of 3 next to
// others' decoding, more requests than slots so some wait) give each the
// tokens it gets alone, and the stats and snapshot add up.
func TestEngineBatchEqualsSequential(t *testing.T) {
	cfg := engineConfig(4)
	cfg.PrefillChunk = 3
	e := openTiny(t, cfg)
	const n = 20
	p := native.Params{MaxTokens: n}
	var alone []result
	for _, pr := range prompts {
		alone = append(alone, run(t, e, [][]int32{pr}, p)[0])
	}
	var snap native.Snapshot
	e.Snapshot(&snap) // reset the step records
	start := native.Now()
	together := run(t, e, prompts, p)
	for i := range prompts {
		if !slices.Equal(together[i].tokens, alone[i].tokens) {
			t.Errorf("prompt %d batched %v, alone %v", i, together[i].tokens, alone[i].tokens)
		}
		st := together[i].stats
		if st.PromptTokens != len(prompts[i]) || st.PrefillTokens != len(prompts[i]) || st.CompletionTokens != n ||
			st.DecodeTokens != n-1 || st.Finish != native.FinishLength || len(st.EmitNS) != n {
			t.Errorf("prompt %d stats %+v", i, st)
		}
		if !(start <= st.ArrivalNS && st.ArrivalNS <= st.AdmittedNS && st.AdmittedNS < st.FirstTokenNS &&
			st.FirstTokenNS == st.EmitNS[0] && st.LastTokenNS == st.EmitNS[n-1] && st.LastTokenNS == st.FinishNS) {
			t.Errorf("prompt %d times %+v", i, st)
		}
		if !slices.IsSorted(st.EmitNS) {
			t.Errorf("prompt %d emit times not increasing: %v", i, st.EmitNS)
		}
	}
	e.Snapshot(&snap)
	promptSum := 0
	for _, pr := range prompts {
		promptSum += len(pr)
	}
	if snap.RequestsFinished != int64(2*len(prompts)) || snap.PromptTokensSum != int64(2*promptSum) ||
		snap.CompletionTokensSum != int64(2*n*len(prompts)) || snap.PrefillTokensSum != int64(2*promptSum) ||
		snap.DecodeTokensSum != int64(2*(n-1)*len(prompts)) || !snap.HasLastFinished || snap.Slots != 4 ||
		snap.Running != 0 || snap.Waiting != 0 || snap.KVBlocksUsed != 0 || snap.KVBlocksTotal != 4*256/16 ||
		snap.SpecDecode != nil || len(snap.DecodeTimeByBatchSize) != 5 {
		t.Errorf("snapshot %+v", snap)
	}
	var prefill, decode, batch4 int
	for _, s := range snap.Steps {
		switch s.Phase {
		case native.PhasePrefill:
			prefill += s.Tokens
		case native.PhaseDecode:
			decode += s.Tokens
			if s.BatchSize == 4 {
				batch4++
			}
		}
	}
	if prefill != promptSum || decode != (n-1)*len(prompts) || batch4 == 0 {
		t.Errorf("step records: %d prefill tokens (want %d), %d decode tokens (want %d), %d decode steps of 4",
			prefill, promptSum, decode, (n-1)*len(prompts), batch4)
	}
	if snap.EnginePrefillTimeSum <= 0 || snap.EngineDecodeTimeSum <= 0 || snap.DecodeTimeByBatchSize[4].Count == 0 {
		t.Errorf("times: prefill %g decode %g by batch size %+v", snap.EnginePrefillTimeSum, snap.EngineDecodeTimeSum, snap.DecodeTimeByBatchSize)
	}
}

// TestEngineSamplingMatchesNative: seeded sampling with penalties, and
// logprobs, give the C engine's tokens (the same rules and random stream
// over logits equal to float rounding), and a seed replays.
func TestEngineSamplingMatchesNative(t *testing.T) {
	e := openTiny(t, engineConfig(4))
	path, _ := tinyModel(t)
	c, err := native.Open(path, engineConfig(4))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, p := range []native.Params{
		{MaxTokens: 16, Temperature: 0.9, Seed: 7},
		{MaxTokens: 16, Temperature: 1.3, TopK: 12, TopP: 0.9, Seed: 99},
		{MaxTokens: 16, Temperature: 0.7, Seed: 3, PresencePenalty: 0.5, FrequencyPenalty: 0.3, RepetitionPenalty: 1.2},
		{MaxTokens: 8, Logprobs: true, TopLogprobs: 3},
	} {
		got := run(t, e, prompts[:3], p)
		want := run(t, c, prompts[:3], p)
		again := run(t, e, prompts[:3], p)
		for i := range got {
			if !slices.Equal(got[i].tokens, want[i].tokens) || !slices.Equal(got[i].tokens, again[i].tokens) {
				t.Errorf("%+v prompt %d: iree %v, again %v, C %v", p, i, got[i].tokens, again[i].tokens, want[i].tokens)
			}
			for j := range got[i].lps {
				if d := got[i].lps[j] - want[i].lps[j]; d > 1e-3 || d < -1e-3 {
					t.Errorf("prompt %d logprob %d: %g, C %g", i, j, got[i].lps[j], want[i].lps[j])
				}
			}
			if p.Logprobs && len(got[i].lps) != len(got[i].tokens) {
				t.Errorf("prompt %d: %d logprobs for %d tokens", i, len(got[i].lps), len(got[i].tokens))
			}
		}
	}
}

// TestEngineLimits: stop tokens, the context limit, cancel, a full queue
// and bad arguments behave as the C engine's contract says.
func TestEngineLimits(t *testing.T) {
	cfg := engineConfig(4)
	cfg.MaxWaiting = 1
	e := openTiny(t, cfg)
	greedy := run(t, e, prompts[:1], native.Params{MaxTokens: 10})[0].tokens
	stop := run(t, e, prompts[:1], native.Params{MaxTokens: 10, StopTokens: []int32{greedy[3]}})[0]
	if want := greedy[:slices.Index(greedy, greedy[3])+1]; !slices.Equal(stop.tokens, want) || stop.finish != native.FinishStop {
		t.Errorf("stop token %d: %v %q, want %v stop", greedy[3], stop.tokens, stop.finish, want)
	}
	long := make([]int32, 250)
	for i := range long {
		long[i] = int32('a' + i%26)
	}
	ctx := run(t, e, [][]int32{long}, native.Params{MaxTokens: 100})[0]
	if len(ctx.tokens) != 256-250 || ctx.finish != native.FinishLength {
		t.Errorf("context: %d tokens %q, want %d length", len(ctx.tokens), ctx.finish, 256-250)
	}

	var ids []native.ID
	for range 5 { // 4 slots and 1 waiting
		id, err := e.Submit(prompts[1], native.Params{MaxTokens: 50})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if _, err := e.Submit(prompts[1], native.Params{MaxTokens: 50}); !errors.Is(err, native.ErrQueueFull) {
		t.Errorf("sixth submit: %v, want queue full", err)
	}
	if _, err := e.Step(); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		st, err := e.Cancel(id)
		if err != nil || st.Finish != native.FinishAbort || st.FinishNS == 0 {
			t.Fatalf("cancel %d: %+v %v", id, st, err)
		}
	}
	if _, err := e.Cancel(ids[0]); !errors.Is(err, native.ErrNotFound) {
		t.Errorf("second cancel: %v, want not found", err)
	}
	if r, w := e.Load(); r+w != 0 {
		t.Errorf("load %d+%d after cancelling everything", r, w)
	}
	for _, c := range []struct {
		prompt []int32
		p      native.Params
		want   string
	}{
		{nil, native.Params{MaxTokens: 1}, "iree engine: prompt: empty"},
		{make([]int32, 256), native.Params{MaxTokens: 1}, "iree engine: prompt: 256 tokens do not fit the context of 256 (at most 255)"},
		{[]int32{1 << 20}, native.Params{MaxTokens: 1}, "iree engine: prompt[0]: token 1048576 outside the vocabulary 0..263"},
		{[]int32{1}, native.Params{}, "iree engine: max_tokens: 0 < 1"},
		{[]int32{1}, native.Params{MaxTokens: 1, TopP: 2}, "iree engine: top_p: 2 not in 0..1"},
		{[]int32{1}, native.Params{MaxTokens: 1, TopLogprobs: 21}, "iree engine: top_logprobs: 21 not in 0..20"},
		{[]int32{1}, native.Params{MaxTokens: 1, StopTokens: []int32{-1}}, "iree engine: stop[0]: token -1 outside the vocabulary 0..263"},
	} {
		if _, err := e.Submit(c.prompt, c.p); !errors.Is(err, native.ErrArg) || err.Error() != c.want {
			t.Errorf("submit %v %+v: %v, want %q", c.prompt, c.p, err, c.want)
		}
	}
}

// TestEngineModels: an F16 file runs reference-exact (its matrices
// widened to f32 on the device, as the reference widens them); what the
// IREE step does not compute as the C engine does is refused by name:
// quantized matrices (whose activations the C engine quantizes) and
// qwen2's q/k/v biases.
func TestEngineModels(t *testing.T) {
	lib, compiler := needRuntime(t)
	_, cache := tinyModel(t)
	dir := t.TempDir()
	f16, q8, qwen := modelgen.Tiny, modelgen.Tiny, modelgen.TinyQwen2
	f16.Type, q8.Type = "f16", "q8_0"
	for _, c := range []struct {
		p    modelgen.Preset
		want string // "" opens and matches the reference
	}{
		{f16, ""},
		{q8, "blk.0 has quantized matrices"},
		{qwen, "blk.0 has q/k/v biases (qwen2)"},
	} {
		path := filepath.Join(dir, c.p.Name+c.p.Type+".gguf")
		if err := modelgen.Write(path, c.p); err != nil {
			t.Fatal(err)
		}
		e, err := OpenEngine(path, Options{Runtime: lib, Compiler: compiler, CacheDir: cache, Config: engineConfig(4)})
		if c.want != "" {
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s %s: %v, want an error containing %q", c.p.Name, c.p.Type, err, c.want)
			}
			if e != nil {
				e.Close()
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s %s: %v", c.p.Name, c.p.Type, err)
		}
		ref, err := loadReference(path)
		if err != nil {
			t.Fatal(err)
		}
		want, err := ref.Greedy(prompts[1], 16)
		if err != nil {
			t.Fatal(err)
		}
		if got := run(t, e, prompts[1:2], native.Params{MaxTokens: 16})[0].tokens; !slices.Equal(got, want) {
			t.Errorf("%s %s: %v, reference %v", c.p.Name, c.p.Type, got, want)
		}
		e.Close()
	}
}
