//go:build cgo

package native

// Tests of the C engine through its Go binding, on the tiny model written by
// modelgen into a temporary directory, with the pure-Go
// reference forward pass (native/internal/reference) as the oracle.

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/picometer/picometer/modelgen"
	"github.com/picometer/picometer/native/internal/reference"
)

var tiny struct {
	once sync.Once
	dir  string
	path string
	ref  *reference.Model
	err  error
}

// tinyModel writes the tiny preset once per test binary and loads its
// reference model.
func tinyModel(t testing.TB) (string, *reference.Model) {
	t.Helper()
	tiny.once.Do(func() {
		dir, err := os.MkdirTemp("", "picometer-native-test-")
		if err != nil {
			tiny.err = err
			return
		}
		tiny.dir = dir
		tiny.path = filepath.Join(dir, "tiny.gguf")
		if tiny.err = modelgen.Write(tiny.path, modelgen.Tiny); tiny.err != nil {
			return
		}
		tiny.ref, tiny.err = loadReference(tiny.path)
	})
	if tiny.err != nil {
		t.Fatal(tiny.err)
	}
	return tiny.path, tiny.ref
}

func TestMain(m *testing.M) {
	code := m.Run()
	if tiny.dir != "" {
		os.RemoveAll(tiny.dir)
	}
	if pmbench.path != "" {
		os.RemoveAll(filepath.Dir(pmbench.path)) // pmbenchBinary's build directory
	}
	os.Exit(code)
}

func open(t testing.TB, mod func(*Config)) *Engine {
	t.Helper()
	path, _ := tinyModel(t)
	return openFile(t, path, mod)
}

// openFile opens the model at path with the default configuration changed
// by mod (nil: none), closing it when t ends.
func openFile(t testing.TB, path string, mod func(*Config)) *Engine {
	t.Helper()
	cfg := DefaultConfig()
	if mod != nil {
		mod(&cfg)
	}
	e, err := Open(path, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// prompt returns a deterministic prompt of n tokens: BOS then bytes.
func prompt(i, n int) []int32 {
	p := []int32{TokBOS}
	for len(p) < n {
		p = append(p, int32((len(p)*31+i*17)%256))
	}
	return p
}

// repetitive returns a prompt that repeats a phrase, so n-gram drafts hit.
func repetitive(i, n int) []int32 {
	phrase := []string{"the cat sat on the mat. ", "one two three one two four. ", "abcabdabcabe"}[i%3]
	p := []int32{TokBOS}
	for len(p) < n {
		p = append(p, int32(phrase[len(p)%len(phrase)]))
	}
	return p
}

// refGreedy is the reference's greedy continuation as the engine serves it:
// at most n tokens, ending at EOS (included).
func refGreedy(t testing.TB, ref *reference.Model, prompt []int32, n int) []int32 {
	t.Helper()
	toks, err := ref.Greedy(prompt, n)
	if err != nil {
		t.Fatal(err)
	}
	if k := slices.Index(toks, TokEOS); k >= 0 {
		toks = toks[:k+1]
	}
	return toks
}

// longPrompt returns a prompt of n tokens whose greedy continuation runs
// for `out` tokens without EOS (the tiny model's EOS comes often).
func longPrompt(t testing.TB, ref *reference.Model, seed, n, out int) []int32 {
	t.Helper()
	for i := seed; i < seed+500; i++ {
		p := prompt(i, n)
		if toks := refGreedy(t, ref, p, out); len(toks) == out && toks[out-1] != TokEOS {
			return p
		}
	}
	t.Fatalf("no prompt of %d tokens continues for %d tokens without EOS", n, out)
	return nil
}

// request is one request of a test run and what it produced.
type request struct {
	prompt []int32
	p      Params
	id     ID
	out    []int32
	finish string
	stats  RequestStats
	done   bool
}

// runWant runs the requests mk(0..len(want)-1) (stagger 2) and fails for
// each whose greedy tokens differ from want's; it returns them for the
// caller's further checks.
func runWant(t testing.TB, e *Engine, mk func(int) *request, want [][]int32) []*request {
	t.Helper()
	reqs := make([]*request, len(want))
	for i := range reqs {
		reqs[i] = mk(i)
	}
	run(t, e, reqs, 2)
	for i, r := range reqs {
		if !slices.Equal(r.out, want[i]) {
			t.Errorf("request %d (%+v): engine %v\nreference %v", i, r.p, r.out, want[i])
		}
	}
	return reqs
}

// run submits reqs (request i once i*stagger steps ran) and steps until all
// finished; it returns the number of steps.
func run(t testing.TB, e *Engine, reqs []*request, stagger int) int {
	t.Helper()
	byID := map[ID]*request{}
	submitted, done, steps := 0, 0, 0
	for done < len(reqs) {
		for submitted < len(reqs) && submitted*stagger <= steps {
			r := reqs[submitted]
			id, err := e.Submit(r.prompt, r.p)
			if err != nil {
				t.Fatalf("submit %d: %v", submitted, err)
			}
			r.id = id
			byID[id] = r
			submitted++
		}
		outs, err := e.Step()
		if err != nil {
			t.Fatal(err)
		}
		if steps++; steps > 100000 {
			t.Fatal("no progress")
		}
		for _, o := range outs {
			r := byID[o.ID]
			if r == nil || r.done {
				t.Fatalf("output for unknown or finished request %d", o.ID)
			}
			if len(o.Tokens) == 0 && o.Finish == "" {
				t.Fatalf("request %d: empty output", o.ID)
			}
			r.out = append(r.out, o.Tokens...)
			if o.Finish != "" {
				r.done, r.finish = true, o.Finish
				r.stats = *o.Stats
				r.stats.EmitNS = slices.Clone(o.Stats.EmitNS)
				done++
			}
		}
	}
	return steps
}

func solo(t testing.TB, e *Engine, prompt []int32, p Params) *request {
	t.Helper()
	r := &request{prompt: prompt, p: p}
	run(t, e, []*request{r}, 0)
	return r
}

func TestLogitsMatchReference(t *testing.T) {
	_, ref := tinyModel(t)
	toks := prompt(3, 60)
	want, err := ref.Logits(toks)
	if err != nil {
		t.Fatal(err)
	}
	for _, kernel := range append([]string{"auto"}, CPUKernels()...) {
		t.Run(kernel, func(t *testing.T) {
			e := open(t, func(c *Config) { c.Kernel = kernel; c.PrefillChunk = 7 })
			got, err := e.score(toks)
			if err != nil {
				t.Fatal(err)
			}
			worst := 0.0
			for i := range toks {
				for v := 0; v < ref.Vocab; v++ {
					d := math.Abs(float64(got[i*ref.Vocab+v] - want[i][v]))
					worst = max(worst, d)
				}
			}
			// Measured: ~2.5e-6 (float32 kernels against the float64
			// reference). 1e-4 let a 4x wrong RMSNorm epsilon (~3e-5) pass.
			if worst > 1e-5 {
				t.Fatalf("%s: logits differ from the reference by %g", e.Info().Kernel, worst)
			}
			t.Logf("%s: max |logit - reference| = %.2g", e.Info().Kernel, worst)
		})
	}
}

func TestGreedyMatchesReference(t *testing.T) {
	_, ref := tinyModel(t)
	for _, kernel := range append([]string{"auto"}, CPUKernels()...) {
		for i := 0; i < 4; i++ {
			t.Run(fmt.Sprintf("%s/prompt%d", kernel, i), func(t *testing.T) {
				e := open(t, func(c *Config) { c.Kernel = kernel })
				p := prompt(i, 5+i*20)
				want := refGreedy(t, ref, p, 48)
				got := solo(t, e, p, Params{MaxTokens: 48})
				if !slices.Equal(got.out, want) {
					t.Fatalf("engine %v\nreference %v", got.out, want)
				}
			})
		}
	}
}

// TestBatchingReferenceExact: N > B_max requests with staggered admission
// (slots recycle) each produce exactly their solo greedy tokens, which are
// the reference's, with and without speculation.
func TestBatchingReferenceExact(t *testing.T) {
	_, ref := tinyModel(t)
	const n = 13
	want := make([][]int32, n)
	mk := func(i int) *request {
		p := prompt(i, 3+(i*11)%60)
		if i%2 == 1 {
			p = repetitive(i, 10+(i*7)%50)
		}
		return &request{prompt: p, p: Params{MaxTokens: 10 + (i*17)%40}}
	}
	for i := range want {
		r := mk(i)
		want[i] = refGreedy(t, ref, r.prompt, r.p.MaxTokens)
	}
	for _, bmax := range []int{4, 8} {
		for _, specK := range []int{0, 4} {
			t.Run(fmt.Sprintf("bmax=%d/spec=%d", bmax, specK), func(t *testing.T) {
				e := open(t, func(c *Config) { c.BMax = bmax; c.SpecK = specK; c.PrefillChunk = 16 })
				reqs := runWant(t, e, mk, want)
				accepted := 0
				for _, r := range reqs {
					accepted += r.stats.AcceptedTokens
				}
				if specK > 0 && accepted == 0 {
					t.Error("speculation on, but no draft token was accepted")
				}
				if specK == 0 && accepted != 0 {
					t.Errorf("speculation off, but %d draft tokens accepted", accepted)
				}
				// The run must really have batched: a full batch of bmax
				// decoding slots, drafts of several slots verified in one
				// forward, and requests that waited for a slot (recycled).
				var s Snapshot
				e.Snapshot(&s)
				full, multiVerify := 0, 0
				for _, st := range s.Steps {
					if (st.Phase == PhaseDecode || st.Phase == PhaseVerify) && st.BatchSize == bmax {
						full++
					}
					if st.Phase == PhaseVerify && st.BatchSize > 1 {
						multiVerify++
					}
				}
				waited := 0
				for _, r := range reqs {
					if r.stats.AdmittedNS > r.stats.ArrivalNS {
						waited++
					}
				}
				if full == 0 || waited == 0 || specK > 0 && multiVerify == 0 {
					t.Errorf("not a batching test: %d steps at batch %d, %d verify steps of several slots, %d requests waited for a slot",
						full, bmax, multiVerify, waited)
				}
			})
		}
	}
}

// TestSpecOnOffIdentical: greedy and seeded sampling give the same tokens
// with speculation on and off.
func TestSpecOnOffIdentical(t *testing.T) {
	params := map[string]Params{
		"greedy":  {MaxTokens: 60},
		"sampled": {MaxTokens: 60, Temperature: 0.7, TopK: 40, TopP: 0.95, Seed: 11},
		"hot":     {MaxTokens: 60, Temperature: 1.5, Seed: 5},
	}
	for name, p := range params {
		t.Run(name, func(t *testing.T) {
			off := open(t, func(c *Config) { c.SpecK = 0 })
			on := open(t, func(c *Config) { c.SpecK = 8; c.SpecNgramMin = 2 })
			drafted := 0
			for i := 0; i < 4; i++ {
				a := solo(t, off, repetitive(i, 40), p)
				b := solo(t, on, repetitive(i, 40), p)
				if !slices.Equal(a.out, b.out) {
					t.Fatalf("prompt %d: spec off %v\nspec on %v", i, a.out, b.out)
				}
				drafted += b.stats.DraftTokens
			}
			if drafted == 0 {
				t.Fatal("no draft was proposed: the test proves nothing")
			}
		})
	}
}

// TestSpecNgramMin: the shortest match that drafts changes how much is
// drafted, never the tokens: every minimum gives spec off's greedy output,
// and requiring 8 matching tokens drafts less than requiring 1.
func TestSpecNgramMin(t *testing.T) {
	p := Params{MaxTokens: 60}
	off := open(t, func(c *Config) { c.SpecK = 0 })
	drafted := map[int]int{}
	for _, n := range []int{1, 2, 4, 8} {
		on := open(t, func(c *Config) { c.SpecK = 4; c.SpecNgramMin = n })
		for i := 0; i < 4; i++ {
			a := solo(t, off, repetitive(i, 40), p)
			b := solo(t, on, repetitive(i, 40), p)
			if !slices.Equal(a.out, b.out) {
				t.Fatalf("spec_ngram_min %d, prompt %d: spec off %v\nspec on %v", n, i, a.out, b.out)
			}
			drafted[n] += b.stats.DraftTokens
		}
	}
	if drafted[1] == 0 || drafted[8] >= drafted[1] {
		t.Fatalf("drafted tokens by spec_ngram_min: %v; want some at 1 and fewer at 8", drafted)
	}
	bad := DefaultConfig()
	bad.SpecNgramMin = 9
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "spec_ngram_min") {
		t.Fatalf("spec_ngram_min 9: %v, want an error naming it", err)
	}
}

func TestSeedDeterminism(t *testing.T) {
	p := Params{MaxTokens: 40, Temperature: 1, Seed: 42}
	e := open(t, nil)
	a := solo(t, e, prompt(1, 20), p)
	b := solo(t, e, prompt(1, 20), p)
	if !slices.Equal(a.out, b.out) {
		t.Fatalf("same seed, different tokens:\n%v\n%v", a.out, b.out)
	}
	// batched with other sampled requests
	reqs := []*request{{prompt: prompt(1, 20), p: p}}
	for i := 0; i < 6; i++ {
		reqs = append(reqs, &request{prompt: prompt(i+5, 10+i), p: Params{MaxTokens: 30, Temperature: 1, Seed: uint64(i)}})
	}
	run(t, e, reqs, 1)
	if !slices.Equal(reqs[0].out, a.out) {
		t.Fatalf("batched run differs from the solo run:\n%v\n%v", reqs[0].out, a.out)
	}
	p.Seed = 43
	c := solo(t, e, prompt(1, 20), p)
	if slices.Equal(c.out, a.out) {
		t.Fatal("seeds 42 and 43 gave the same 40 tokens")
	}
}

// TestSamplingParams: top-k 1 and a tiny top-p are greedy; with top-k 3
// every token is among the 3 most likely under the reference.
func TestSamplingParams(t *testing.T) {
	_, ref := tinyModel(t)
	e := open(t, nil)
	pr := prompt(2, 12)
	greedy := solo(t, e, pr, Params{MaxTokens: 30})
	for name, p := range map[string]Params{
		"top_k=1":      {MaxTokens: 30, Temperature: 1.3, TopK: 1, Seed: 3},
		"top_p=0.0001": {MaxTokens: 30, Temperature: 1.3, TopP: 0.0001, Seed: 3},
	} {
		if got := solo(t, e, pr, p); !slices.Equal(got.out, greedy.out) {
			t.Errorf("%s: %v, greedy %v", name, got.out, greedy.out)
		}
	}
	got := solo(t, e, pr, Params{MaxTokens: 30, Temperature: 2, TopK: 3, Seed: 9})
	logits, err := ref.Logits(append(slices.Clone(pr), got.out...))
	if err != nil {
		t.Fatal(err)
	}
	notGreedy := 0
	for i, tok := range got.out {
		l := logits[len(pr)-1+i]
		rank := 0
		for _, v := range l {
			if v > l[tok] {
				rank++
			}
		}
		if rank >= 3 {
			t.Errorf("token %d (%d) has rank %d under top_k=3", i, tok, rank)
		}
		if rank > 0 {
			notGreedy++
		}
	}
	if notGreedy == 0 {
		t.Error("temperature 2 with top_k 3 always picked the most likely token")
	}
}

func TestFinish(t *testing.T) {
	path, ref := tinyModel(t)
	_ = path
	pr := longPrompt(t, ref, 4, 9, 30)
	greedy := refGreedy(t, ref, pr, 30)
	ctx := ref.Context
	long := longPrompt(t, ref, 5, ctx-5, 5)
	tests := []struct {
		name   string
		prompt []int32
		p      Params
		want   []int32
		finish string
	}{
		{"max_tokens", pr, Params{MaxTokens: 7}, greedy[:7], FinishLength},
		{"max_tokens=1", pr, Params{MaxTokens: 1}, greedy[:1], FinishLength},
		{"stop token", pr, Params{MaxTokens: 30, StopTokens: []int32{TokPad, greedy[5]}}, greedy[:1+slices.Index(greedy, greedy[5])], FinishStop},
		{"context limit", long, Params{MaxTokens: 100}, nil, FinishLength},
	}
	for _, tt := range tests {
		for _, specK := range []int{0, 4} {
			t.Run(fmt.Sprintf("%s/spec=%d", tt.name, specK), func(t *testing.T) {
				e := open(t, func(c *Config) { c.SpecK = specK })
				got := solo(t, e, tt.prompt, tt.p)
				if got.finish != tt.finish {
					t.Errorf("finish %q, want %q", got.finish, tt.finish)
				}
				want := tt.want
				if want == nil { // context limit: prompt + output fill the context
					want = refGreedy(t, ref, tt.prompt, ctx-len(tt.prompt))
				}
				if !slices.Equal(got.out, want) {
					t.Errorf("tokens %v, want %v", got.out, want)
				}
				if got.stats.CompletionTokens != len(got.out) || got.stats.Finish != tt.finish {
					t.Errorf("stats: completion %d finish %q; %d tokens emitted", got.stats.CompletionTokens, got.stats.Finish, len(got.out))
				}
			})
		}
	}
}

// The model's EOS ends generation with finish reason stop, EOS emitted.
func TestEOS(t *testing.T) {
	_, ref := tinyModel(t)
	// find a prompt whose greedy continuation contains EOS
	for i := 0; i < 400; i++ {
		pr := prompt(i, 4+i%30)
		toks, err := ref.Greedy(pr, 60)
		if err != nil {
			t.Fatal(err)
		}
		k := slices.Index(toks, TokEOS)
		if k < 0 {
			continue
		}
		e := open(t, nil)
		got := solo(t, e, pr, Params{MaxTokens: 60})
		if got.finish != FinishStop || !slices.Equal(got.out, toks[:k+1]) {
			t.Fatalf("finish %q tokens %v, want stop and %v", got.finish, got.out, toks[:k+1])
		}
		return
	}
	// The tiny model is deterministic: a change that loses every EOS is a
	// failure, not a reason to skip.
	t.Fatal("no prompt tried makes the tiny model emit EOS")
}

func TestSubmitErrors(t *testing.T) {
	e := open(t, func(c *Config) { c.BMax = 1; c.MaxWaiting = 2 })
	ctx := e.Info().ContextLength
	ok := []int32{TokBOS, 'a'}
	tests := []struct {
		name   string
		prompt []int32
		p      Params
		msg    string
	}{
		{"empty prompt", nil, Params{MaxTokens: 1}, "native: prompt: empty"},
		{"prompt too long", make([]int32, ctx), Params{MaxTokens: 1}, fmt.Sprintf("native: prompt: %d tokens do not fit the context of %d (at most %d)", ctx, ctx, ctx-1)},
		{"negative token", []int32{1, -1}, Params{MaxTokens: 1}, "native: prompt[1]: token -1 outside the vocabulary 0..263"},
		{"token beyond vocabulary", []int32{264}, Params{MaxTokens: 1}, "native: prompt[0]: token 264 outside the vocabulary 0..263"},
		{"max_tokens 0", ok, Params{}, "native: max_tokens: 0 < 1"},
		{"negative temperature", ok, Params{MaxTokens: 1, Temperature: -0.5}, "native: temperature: -0.5 is not a finite number >= 0"},
		{"NaN temperature", ok, Params{MaxTokens: 1, Temperature: float32(math.NaN())}, "native: temperature: nan is not a finite number >= 0"},
		{"infinite temperature", ok, Params{MaxTokens: 1, Temperature: float32(math.Inf(1))}, "native: temperature: inf is not a finite number >= 0"},
		{"negative top_k", ok, Params{MaxTokens: 1, TopK: -1}, "native: top_k: -1 < 0"},
		{"top_p above 1", ok, Params{MaxTokens: 1, TopP: 1.5}, "native: top_p: 1.5 not in 0..1"},
		{"17 stop tokens", ok, Params{MaxTokens: 1, StopTokens: make([]int32, 17)}, "native: stop: 17 tokens, at most 16"},
		{"stop token beyond vocabulary", ok, Params{MaxTokens: 1, StopTokens: []int32{3, 300}}, "native: stop[1]: token 300 outside the vocabulary 0..263"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.Submit(tt.prompt, tt.p)
			if !errors.Is(err, ErrArg) || err.Error() != tt.msg {
				t.Fatalf("got %v, want ErrArg %q", err, tt.msg)
			}
		})
	}
	t.Run("queue full", func(t *testing.T) {
		for i := 0; i < 3; i++ { // one admitted into the slot, two waiting
			if _, err := e.Submit(ok, Params{MaxTokens: 5}); err != nil {
				t.Fatal(err)
			}
		}
		_, err := e.Submit(ok, Params{MaxTokens: 5})
		if !errors.Is(err, ErrQueueFull) || err.Error() != "native: waiting queue full (2 requests wait)" {
			t.Fatalf("got %v, want ErrQueueFull", err)
		}
		if r, w := e.Load(); r != 1 || w != 2 {
			t.Fatalf("Load() = %d, %d; want 1, 2", r, w)
		}
	})
}

func TestMaxWaitingZero(t *testing.T) {
	e := open(t, func(c *Config) { c.BMax = 2; c.MaxWaiting = 0 })
	p := Params{MaxTokens: 50}
	for i := 0; i < 2; i++ {
		if _, err := e.Submit(prompt(i, 5), p); err != nil {
			t.Fatalf("submit %d with a free slot: %v", i, err)
		}
	}
	if _, err := e.Submit(prompt(3, 5), p); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("submit with every slot busy: %v, want ErrQueueFull", err)
	}
}

// TestCancel: cancelling a request mid-prefill, mid-decode or while it
// waits ends it with finish reason abort and gives its slot and KV blocks
// back at once: the gauges drop right after each Cancel, and the freed
// slots take new requests.
func TestCancel(t *testing.T) {
	e := open(t, func(c *Config) { c.BMax = 2; c.PrefillChunk = 8 })
	p := Params{MaxTokens: 100}
	gauges := func(t *testing.T, running, waiting, blocks int) {
		t.Helper()
		var s Snapshot
		e.Snapshot(&s)
		if s.Running != running || s.Waiting != waiting || s.KVBlocksUsed != blocks {
			t.Fatalf("running %d, waiting %d, KV blocks used %d; want %d, %d, %d",
				s.Running, s.Waiting, s.KVBlocksUsed, running, waiting, blocks)
		}
	}
	long, err := e.Submit(prompt(1, 40), p) // prefills 8 tokens per step
	if err != nil {
		t.Fatal(err)
	}
	short, _ := e.Submit(prompt(2, 3), p)
	waiting, _ := e.Submit(prompt(3, 3), p)
	for i := 0; i < 3; i++ {
		if _, err := e.Step(); err != nil {
			t.Fatal(err)
		}
	}
	// long has 24 of its 40 prompt tokens in 2 blocks of 16; short decodes
	// its 6th position in 1 block; the third request waits for a slot.
	gauges(t, 2, 1, 3)
	t.Run("mid-prefill", func(t *testing.T) {
		st, err := e.Cancel(long)
		if err != nil {
			t.Fatal(err)
		}
		if st.Finish != FinishAbort || st.CompletionTokens != 0 || st.PrefillTokens != 24 || st.FirstTokenNS != 0 || st.FinishNS == 0 {
			t.Fatalf("stats %+v", *st)
		}
		gauges(t, 1, 1, 1) // long's slot and its 2 blocks are free
	})
	t.Run("mid-decode", func(t *testing.T) {
		st, err := e.Cancel(short)
		if err != nil {
			t.Fatal(err)
		}
		if st.Finish != FinishAbort || st.CompletionTokens < 2 || st.FirstTokenNS == 0 {
			t.Fatalf("stats %+v", *st)
		}
		gauges(t, 0, 1, 0) // short's slot and block are free too
	})
	t.Run("unknown or finished", func(t *testing.T) {
		for _, id := range []ID{long, short, 999} {
			if _, err := e.Cancel(id); !errors.Is(err, ErrNotFound) {
				t.Fatalf("cancel %d: %v, want ErrNotFound", id, err)
			}
		}
	})
	// The waiting request takes a freed slot at the next step, and a new
	// request the other one at once: both slots came back.
	if _, err := e.Step(); err != nil {
		t.Fatal(err)
	}
	if r, w := e.Load(); r != 1 || w != 0 {
		t.Fatalf("after cancels Load() = %d, %d; want 1, 0", r, w)
	}
	next, err := e.Submit(prompt(4, 3), p)
	if err != nil {
		t.Fatal(err)
	}
	if r, w := e.Load(); r != 2 || w != 0 {
		t.Fatalf("a new request was not admitted into the second freed slot: Load() = %d, %d; want 2, 0", r, w)
	}
	t.Run("waiting", func(t *testing.T) {
		e2 := open(t, func(c *Config) { c.BMax = 1 })
		e2.Submit(prompt(1, 5), p)
		id, _ := e2.Submit(prompt(2, 5), p)
		st, err := e2.Cancel(id)
		if err != nil || st.AdmittedNS != 0 || st.Finish != FinishAbort {
			t.Fatalf("cancel waiting: %v %+v", err, st)
		}
		if r, w := e2.Load(); r != 1 || w != 0 {
			t.Fatalf("Load() = %d, %d", r, w)
		}
	})
	for _, id := range []ID{waiting, next} {
		if _, err := e.Cancel(id); err != nil {
			t.Fatal(err)
		}
	}
	var snap Snapshot
	e.Snapshot(&snap)
	if snap.KVBlocksUsed != 0 || snap.Running != 0 || snap.Waiting != 0 || snap.RequestsFinished != 4 {
		t.Fatalf("after all cancels: %d blocks used, %d running, %d waiting, %d finished", snap.KVBlocksUsed, snap.Running, snap.Waiting, snap.RequestsFinished)
	}
}

// TestPrefillChunking: a long prompt is prefilled one chunk per step, so
// a request that is decoding keeps emitting a token every step meanwhile,
// and the long request's first token comes with its last chunk.
func TestPrefillChunking(t *testing.T) {
	_, ref := tinyModel(t)
	const chunk = 16
	e := open(t, func(c *Config) { c.BMax = 2; c.SpecK = 0; c.PrefillChunk = chunk })
	long := prompt(7, 150) // 10 chunks: 9 of 16 tokens, then 6
	chunks := (len(long) + chunk - 1) / chunk
	short := longPrompt(t, ref, 3, 5, chunks+2)
	a, err := e.Submit(short, Params{MaxTokens: chunks + 2})
	if err != nil {
		t.Fatal(err)
	}
	if outs, err := e.Step(); err != nil || len(outs) != 1 || outs[0].ID != a {
		t.Fatalf("first step: %+v, %v", outs, err) // a's prefill and first token
	}
	b, err := e.Submit(long, Params{MaxTokens: 1})
	if err != nil {
		t.Fatal(err)
	}
	var s Snapshot
	e.Snapshot(&s) // drop a's prefill record
	for step := 1; step <= chunks; step++ {
		outs, err := e.Step()
		if err != nil {
			t.Fatal(err)
		}
		got := map[ID]int{}
		for _, o := range outs {
			got[o.ID] = len(o.Tokens)
		}
		if got[a] != 1 {
			t.Errorf("step %d of b's prefill: a emitted %d tokens, want 1 (decoding must not stall)", step, got[a])
		}
		if _, ok := got[b]; ok != (step == chunks) {
			t.Errorf("step %d of %d: b emitted %v (its first token belongs to its last chunk)", step, chunks, ok)
		}
	}
	e.Snapshot(&s)
	prefilled, prefills := 0, 0
	for _, st := range s.Steps {
		if st.Phase != PhasePrefill {
			continue
		}
		prefills++
		prefilled += st.Tokens
		if st.Tokens > chunk {
			t.Errorf("a prefill step ran %d tokens of one slot, more than the chunk of %d", st.Tokens, chunk)
		}
	}
	if prefills != chunks || prefilled != len(long) {
		t.Errorf("%d prefill steps of %d tokens in all; want %d steps, %d tokens", prefills, prefilled, chunks, len(long))
	}
}

// TestMetricsConsistency runs a mixed workload and checks the cumulative
// engine metrics against the requests' own stats and the step records.
func TestMetricsConsistency(t *testing.T) {
	e := open(t, func(c *Config) { c.BMax = 4; c.SpecK = 4; c.SpecNgramMin = 2; c.PrefillChunk = 16 })
	var reqs []*request
	for i := 0; i < 14; i++ {
		p := Params{MaxTokens: 8 + i*5}
		if i%3 == 0 {
			p.Temperature, p.Seed = 0.8, uint64(i)
		}
		pr := prompt(i, 4+i*4)
		if i%2 == 1 {
			pr = repetitive(i, 30)
		}
		reqs = append(reqs, &request{prompt: pr, p: p})
	}
	var steps []StepRecord
	var snap Snapshot
	byID := map[ID]*request{}
	for i, r := range reqs {
		var err error
		if r.id, err = e.Submit(r.prompt, r.p); err != nil {
			t.Fatalf("submit %d: %v", i, err)
		}
		byID[r.id] = r
	}
	// What the test sees, independently of the engine's records: a request
	// that already had a token and emits again in a step took part in that
	// step's decode (or verify) forward, so the number of such requests is
	// the step's decode batch size and their tokens are decode tokens. (No
	// request is preempted here: the default KV cache fits every slot.)
	seenDecodeSteps := make([]int64, e.Config().BMax+1) // by batch size
	var seenDecodeTokens int64
	// cancel one while running
	cancelled := reqs[6]
	for n := 0; ; n++ {
		outs, err := e.Step()
		if err != nil {
			t.Fatal(err)
		}
		batch := 0
		for _, o := range outs {
			r := byID[o.ID]
			if len(r.out) > 0 {
				batch++
				seenDecodeTokens += int64(len(o.Tokens))
			}
			r.out = append(r.out, o.Tokens...)
			if o.Finish != "" {
				r.done, r.stats = true, *o.Stats
			}
		}
		if batch > 0 {
			seenDecodeSteps[batch]++
		}
		if n == 12 && !cancelled.done {
			st, err := e.Cancel(cancelled.id)
			if err != nil {
				t.Fatal(err)
			}
			cancelled.done, cancelled.stats = true, *st
		}
		if n%5 == 0 {
			e.Snapshot(&snap)
			steps = append(steps, snap.Steps...)
		}
		if r, w := e.Load(); r+w == 0 {
			break
		}
	}
	e.Snapshot(&snap)
	steps = append(steps, snap.Steps...)
	if snap.StepsDropped != 0 {
		t.Fatalf("%d steps dropped", snap.StepsDropped)
	}

	var prompt, completion, prefill, decode, drafted, accepted int64
	for i, r := range reqs {
		if !r.done {
			t.Fatalf("request %d never finished", i)
		}
		s := r.stats
		prompt += int64(s.PromptTokens)
		completion += int64(s.CompletionTokens)
		prefill += int64(s.PrefillTokens)
		decode += int64(s.DecodeTokens)
		drafted += int64(s.DraftTokens)
		accepted += int64(s.AcceptedTokens)
		if s.CompletionTokens != len(r.out) {
			t.Errorf("request %d: completion_tokens %d, %d tokens emitted", i, s.CompletionTokens, len(r.out))
		}
		if s.AcceptedTokens > s.DraftTokens {
			t.Errorf("request %d: accepted %d > drafted %d", i, s.AcceptedTokens, s.DraftTokens)
		}
		if r != cancelled && s.CompletionTokens != s.DecodeTokens+1 {
			t.Errorf("request %d: completion %d != decode %d + 1 (first token from prefill)", i, s.CompletionTokens, s.DecodeTokens)
		}
		if s.CompletionTokens > 0 && (s.FirstTokenNS < s.AdmittedNS || s.LastTokenNS < s.FirstTokenNS || s.FinishNS < s.LastTokenNS || s.AdmittedNS < s.ArrivalNS) {
			t.Errorf("request %d: times out of order %+v", i, s)
		}
	}
	check := func(name string, got, want int64) {
		t.Helper()
		if got != want {
			t.Errorf("%s: engine %d, want %d (from the requests and outputs)", name, got, want)
		}
	}
	check("prompt_tokens_sum", snap.PromptTokensSum, prompt)
	check("completion_tokens_sum", snap.CompletionTokensSum, completion)
	check("prefill_tokens_sum", snap.PrefillTokensSum, prefill)
	check("decode_tokens_sum", snap.DecodeTokensSum, decode)
	check("requests_finished", snap.RequestsFinished, int64(len(reqs)))
	var dc, ac int64
	for i := range snap.SpecDecode.DraftCount {
		d, a := snap.SpecDecode.DraftCount[i], snap.SpecDecode.AcceptCount[i]
		if a > d {
			t.Errorf("position %d: accepted %d > drafted %d", i, a, d)
		}
		if i > 0 && d > snap.SpecDecode.DraftCount[i-1] {
			t.Errorf("position %d drafted %d > position %d drafted %d", i, d, i-1, snap.SpecDecode.DraftCount[i-1])
		}
		dc += d
		ac += a
	}
	check("spec draft tokens", dc, drafted)
	check("spec accepted tokens", ac, accepted)
	if accepted == 0 {
		t.Error("no draft accepted: spec counters untested")
	}

	// steps by phase and batch size vs TimeCost counts (+1 warm-up each)
	counts := map[string][]int64{}
	var prefillSteps, prefillRows int64
	for _, s := range steps {
		if s.Phase == PhasePrefill {
			prefillSteps++
			prefillRows += int64(s.Tokens)
			continue
		}
		if counts[s.Phase] == nil {
			counts[s.Phase] = make([]int64, e.Config().BMax+1)
		}
		counts[s.Phase][s.BatchSize]++
	}
	check("prefill rows in step records", prefillRows, snap.PrefillTokensSum)
	check("decode_tokens_sum vs tokens seen in decode steps", snap.DecodeTokensSum, seenDecodeTokens)
	// Decode-step counts by batch size add up: every step the test saw
	// decoding at batch size b is one decode or verify record of batch b
	// (and, speculation being on, one draft lookup of batch b).
	var seenSteps, recordedSteps int64
	for bs := 1; bs <= e.Config().BMax; bs++ {
		var dec, ver, dra int64
		if counts[PhaseDecode] != nil {
			dec = counts[PhaseDecode][bs]
		}
		if counts[PhaseVerify] != nil {
			ver = counts[PhaseVerify][bs]
		}
		if counts[PhaseDraft] != nil {
			dra = counts[PhaseDraft][bs]
		}
		check(fmt.Sprintf("decode+verify steps at batch %d", bs), dec+ver, seenDecodeSteps[bs])
		check(fmt.Sprintf("draft lookups at batch %d", bs), dra, seenDecodeSteps[bs])
		seenSteps += seenDecodeSteps[bs]
		recordedSteps += dec + ver
	}
	check("decode steps", recordedSteps, seenSteps)
	if seenDecodeSteps[1] == 0 || seenDecodeSteps[e.Config().BMax] == 0 {
		t.Errorf("decode steps by batch size %v: want both batch 1 and a full batch", seenDecodeSteps)
	}
	for phase, tc := range map[string][]TimeCost{
		PhaseDecode: snap.DecodeTimeByBatchSize,
		PhaseDraft:  snap.DraftTimeByBatchSize,
		PhaseVerify: snap.VerifyTimeByBatchSize,
	} {
		ran := counts[phase]
		if ran == nil {
			t.Errorf("no %s steps recorded", phase)
			continue
		}
		for bs := 1; bs < len(tc); bs++ {
			want := ran[bs]
			if want > 0 {
				want-- // the warm-up step of each batch size is not counted
			}
			if tc[bs].Count != want {
				t.Errorf("%s batch %d: TimeCost count %d, %d steps recorded (minus warm-up)", phase, bs, tc[bs].Count, ran[bs])
			}
			if tc[bs].Count > 0 && tc[bs].Sum <= 0 {
				t.Errorf("%s batch %d: sum %g", phase, bs, tc[bs].Sum)
			}
		}
	}
	if snap.EngineDecodeTimeSum < snap.EngineDraftTimeSum+snap.EngineVerifyTimeSum {
		t.Errorf("decode time %g < draft %g + verify %g", snap.EngineDecodeTimeSum, snap.EngineDraftTimeSum, snap.EngineVerifyTimeSum)
	}
	if snap.KVBlocksUsed != 0 {
		t.Errorf("KV blocks still used: %d", snap.KVBlocksUsed)
	}
}

// TestPreemption: with too few KV blocks for every slot to reach the
// context limit, the newest request is evicted and recomputed later; its
// tokens do not change.
func TestPreemption(t *testing.T) {
	_, ref := tinyModel(t)
	const n = 6
	prompts := make([][]int32, n)
	for i := range prompts {
		prompts[i] = longPrompt(t, ref, 100*i, 20+i*9, 120)
	}
	mk := func(i int) *request {
		return &request{prompt: prompts[i], p: Params{MaxTokens: 120}}
	}
	for _, specK := range []int{0, 4} {
		t.Run(fmt.Sprintf("spec=%d", specK), func(t *testing.T) {
			// four requests of 140-167 tokens need 40 blocks of 16; there are 30
			// (a request needs 16 to reach the context limit)
			e := open(t, func(c *Config) { c.BMax = 4; c.KVBlocks = 30; c.SpecK = specK })
			var reqs []*request
			for i := 0; i < n; i++ {
				reqs = append(reqs, mk(i))
			}
			run(t, e, reqs, 0)
			var snap Snapshot
			e.Snapshot(&snap)
			if snap.Preemptions == 0 {
				t.Fatal("no request was preempted")
			}
			per := 0
			for i, r := range reqs {
				want := refGreedy(t, ref, r.prompt, r.p.MaxTokens)
				if !slices.Equal(r.out, want) {
					t.Errorf("request %d (%d preemptions): %v\nreference %v", i, r.stats.Preemptions, r.out, want)
				}
				per += r.stats.Preemptions
				if r.stats.Preemptions > 0 && r.stats.PrefillTokens <= r.stats.PromptTokens {
					t.Errorf("request %d preempted but prefill_tokens %d <= prompt %d", i, r.stats.PrefillTokens, r.stats.PromptTokens)
				}
			}
			if int64(per) != snap.Preemptions {
				t.Errorf("per-request preemptions %d, engine %d", per, snap.Preemptions)
			}
			if snap.KVBlocksUsed != 0 || snap.KVBlocksTotal != 30 {
				t.Errorf("blocks used %d of %d after all finished", snap.KVBlocksUsed, snap.KVBlocksTotal)
			}
		})
	}
}

func TestSnapshot(t *testing.T) {
	t.Run("TimeCost warm-up", func(t *testing.T) {
		e := open(t, func(c *Config) { c.SpecK = 0 })
		r := solo(t, e, prompt(1, 5), Params{MaxTokens: 10}) // 1 prefill + 9 decode steps at batch 1
		var s Snapshot
		e.Snapshot(&s)
		if got := s.DecodeTimeByBatchSize[1].Count; got != 8 {
			t.Fatalf("decode count at batch 1: %d, want 9 steps - 1 warm-up", got)
		}
		if r.stats.DecodeTokens != 9 || s.DecodeTokensSum != 9 || s.SpecDecode != nil {
			t.Fatalf("decode tokens %d / %d, spec %v", r.stats.DecodeTokens, s.DecodeTokensSum, s.SpecDecode)
		}
		if len(s.Steps) != 10 || s.Steps[0].Phase != PhasePrefill || s.Steps[0].Tokens != 5 || s.Steps[1].Phase != PhaseDecode {
			t.Fatalf("steps %+v", s.Steps)
		}
		e.Snapshot(&s)
		if len(s.Steps) != 0 {
			t.Fatalf("second snapshot carries %d old steps", len(s.Steps))
		}
		m := s.LastFinished
		if !s.HasLastFinished || m.PromptTokens != 5 || m.CompletionTokens != 10 || m.DecodeTokens != 9 ||
			m.FirstTokenNS <= m.ArrivalNS || m.FinishNS < m.FirstTokenNS || m.EmitNS != nil {
			t.Fatalf("last finished request %+v", m)
		}
		if s.EngineDecodeTimeSum <= 0 || s.EnginePrefillTimeSum <= 0 {
			t.Fatalf("time sums %g %g", s.EngineDecodeTimeSum, s.EnginePrefillTimeSum)
		}
	})
	t.Run("recording off", func(t *testing.T) {
		e := open(t, func(c *Config) { c.SpecK = 0 })
		e.Submit(prompt(1, 5), Params{MaxTokens: 50})
		e.Step()
		var s Snapshot
		e.Snapshot(&s)
		e.setNoMetrics(true)
		for i := 0; i < 5; i++ {
			e.Step()
		}
		var off Snapshot
		e.Snapshot(&off)
		if len(off.Steps) != 0 || off.DecodeTokensSum != s.DecodeTokensSum || off.EngineDecodeTimeSum != s.EngineDecodeTimeSum {
			t.Fatalf("recorded while off: %d steps, decode tokens %d -> %d", len(off.Steps), s.DecodeTokensSum, off.DecodeTokensSum)
		}
		e.setNoMetrics(false)
		e.Step()
		e.Snapshot(&s)
		if len(s.Steps) != 1 || s.DecodeTokensSum != off.DecodeTokensSum+1 {
			t.Fatalf("not recording after on: %d steps, decode tokens %d", len(s.Steps), s.DecodeTokensSum)
		}
	})
	t.Run("step ring overflow", func(t *testing.T) {
		e := open(t, func(c *Config) { c.SpecK = 0; c.StepRing = 4 })
		solo(t, e, prompt(1, 5), Params{MaxTokens: 10})
		var s Snapshot
		e.Snapshot(&s)
		if len(s.Steps) != 4 || s.StepsDropped != 6 {
			t.Fatalf("%d steps carried, %d dropped; want 4 and 6", len(s.Steps), s.StepsDropped)
		}
	})
	t.Run("gauges", func(t *testing.T) {
		e := open(t, func(c *Config) { c.BMax = 2; c.BlockSize = 8 })
		for i := 0; i < 3; i++ {
			e.Submit(prompt(i, 20), Params{MaxTokens: 50})
		}
		e.Step()
		var s Snapshot
		e.Snapshot(&s)
		// two slots hold 20 prompt tokens + 1 = 3 blocks of 8 each
		if s.Running != 2 || s.Waiting != 1 || s.Slots != 2 || s.KVBlocksTotal != 2*32 || s.KVBlocksUsed != 6 {
			t.Fatalf("gauges: running %d waiting %d slots %d blocks %d/%d", s.Running, s.Waiting, s.Slots, s.KVBlocksUsed, s.KVBlocksTotal)
		}
	})
}

// TestEmitTimes: a token leaves the engine when Step returns, so every
// request that emitted in a step — in its prefill or its decode phase — gets
// that step's end as its emit (and finish) time.
func TestEmitTimes(t *testing.T) {
	_, ref := tinyModel(t)
	e := open(t, func(c *Config) { c.SpecK = 0 })
	a := longPrompt(t, ref, 1, 5, 4)
	arrival := Now()
	ida, err := e.Submit(a, Params{MaxTokens: 4, ArrivalNS: arrival})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ { // prefill (token 1) and two decode steps
		if outs, err := e.Step(); err != nil || len(outs) != 1 {
			t.Fatalf("step %d: %v %v", i, outs, err)
		}
	}
	idb, err := e.Submit(prompt(2, 9), Params{MaxTokens: 1, ArrivalNS: Now()})
	if err != nil {
		t.Fatal(err)
	}
	before := Now()
	outs, err := e.Step() // b's prefill emits and ends it; a's decode emits its 4th and last token
	after := Now()
	if err != nil || len(outs) != 2 {
		t.Fatalf("%d outputs, %v", len(outs), err)
	}
	st := map[ID]*RequestStats{}
	for _, o := range outs {
		if o.Finish != FinishLength {
			t.Fatalf("request %d: finish %q", o.ID, o.Finish)
		}
		st[o.ID] = o.Stats
	}
	sa, sb := st[ida], st[idb]
	if sa == nil || sb == nil {
		t.Fatalf("outputs %+v", outs)
	}
	end := sb.FirstTokenNS
	if end < before || end > after {
		t.Fatalf("b's first token at %d, outside the step [%d, %d]", end, before, after)
	}
	if sb.FinishNS != end || sa.LastTokenNS != end || sa.FinishNS != end || sb.EmitNS[0] != end || sa.EmitNS[3] != end {
		t.Fatalf("emit/finish times of one step differ: a %+v\nb %+v", *sa, *sb)
	}
	if len(sa.EmitNS) != 4 || sa.ArrivalNS != arrival || sa.FirstTokenNS != sa.EmitNS[0] || !slices.IsSorted(sa.EmitNS) {
		t.Fatalf("a's stats %+v", *sa)
	}
}

// TestStepAllocs: once running, Step and Snapshot allocate nothing in Go.
func TestStepAllocs(t *testing.T) {
	e := open(t, func(c *Config) { c.BMax = 4; c.SpecK = 4 })
	for i := 0; i < 4; i++ {
		if _, err := e.Submit(repetitive(i, 30), Params{MaxTokens: 200, Temperature: float32(i % 2), Seed: 1}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 3; i++ {
		e.Step()
	}
	if n := testing.AllocsPerRun(20, func() {
		if _, err := e.Step(); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("Step allocates %g times", n)
	}
	var s Snapshot
	e.Snapshot(&s)
	if n := testing.AllocsPerRun(20, func() {
		e.Step()
		e.Snapshot(&s)
	}); n != 0 {
		t.Fatalf("Snapshot allocates %g times", n)
	}
}

func TestThreads(t *testing.T) {
	reqs := func() []*request {
		var rs []*request
		for i := 0; i < 6; i++ {
			rs = append(rs, &request{prompt: prompt(i, 10+i*13), p: Params{MaxTokens: 30, Temperature: float32(i % 2), Seed: 7}})
		}
		return rs
	}
	one, two := reqs(), reqs()
	run(t, open(t, func(c *Config) { c.Threads = 1 }), one, 1)
	run(t, open(t, func(c *Config) { c.Threads = 2 }), two, 1)
	for i := range one {
		if !slices.Equal(one[i].out, two[i].out) {
			t.Errorf("request %d: 1 thread %v\n2 threads %v", i, one[i].out, two[i].out)
		}
	}
}

func TestOpen(t *testing.T) {
	path, ref := tinyModel(t)
	t.Run("info", func(t *testing.T) {
		e := open(t, nil)
		in := e.Info()
		if in.Name != "picometer-tiny" || in.Arch != "llama" || in.Dim != 64 || in.Layers != 2 || in.Heads != 4 || in.KVHeads != 2 ||
			in.FFN != 172 || in.Vocab != VocabSize || in.ContextLength != ref.Context || in.BOS != TokBOS || in.EOS != TokEOS ||
			len(in.Tokens) != VocabSize || in.Tokens[TokEOS] != "<|eos|>" || in.ChatTemplate == "" {
			t.Fatalf("info %+v", in)
		}
		// auto: the most capable path this CPU runs, except avxvnni,
		// which runs only when named (never measured end to end)
		measured := slices.DeleteFunc(CPUKernels(), func(k string) bool { return k == "avxvnni" })
		if in.Kernel != measured[0] {
			t.Fatalf("kernel %q, want %q, the first of %q", in.Kernel, measured[0], measured)
		}
		c := e.Config()
		if c.KVBlocks != 8*(ref.Context/16) || c.BMax != 8 || c.Kernel != "auto" {
			t.Fatalf("config %+v", c)
		}
	})
	t.Run("each path", func(t *testing.T) {
		for _, want := range CPUKernels() {
			if k := open(t, func(c *Config) { c.Kernel = want }).Info().Kernel; k != want {
				t.Fatalf("kernel %q, want %q", k, want)
			}
		}
	})
	t.Run("a path the CPU lacks", func(t *testing.T) {
		lacks := 0
		for _, k := range Kernels {
			if slices.Contains(CPUKernels(), k) {
				continue
			}
			lacks++
			_, err := Open(path, func() Config { c := DefaultConfig(); c.Kernel = k; return c }())
			want := fmt.Sprintf("native: kernel: %q requested but this CPU cannot run it", k)
			if !errors.Is(err, ErrArg) || err.Error() != want {
				t.Errorf("kernel %s: error %v, want %q", k, err, want)
			}
		}
		if lacks == 0 {
			t.Skip("this CPU runs every path")
		}
	})
	tests := []struct {
		name string
		path string
		mod  func(*Config)
		is   error
		msg  string
	}{
		{"missing file", filepath.Join(t.TempDir(), "nope.gguf"), nil, nil, "no such file or directory"},
		{"not a model", "engine_test.go", nil, nil, "engine_test.go"},
		{"b_max", path, func(c *Config) { c.BMax = 0 }, ErrArg, "native: b_max: 0 not in 1..64"},
		{"spec_k", path, func(c *Config) { c.SpecK = 9 }, ErrArg, "native: spec_k: 9 not in 0..8"},
		{"kernel", path, func(c *Config) { c.Kernel = "gpu" }, ErrArg, `native: kernel: "gpu" is not auto, avx512vnni, avxvnni, avx2, neon or portable`},
		{"max_waiting beyond int32", path, func(c *Config) { c.MaxWaiting = 1 << 40 }, ErrArg, "native: max_waiting: 1099511627776 not in 0..16777216"},
		{"max_waiting beyond the engine", path, func(c *Config) { c.MaxWaiting = 1 << 25 }, ErrArg, "native: max_waiting: 33554432 not in 0..16777216"},
		{"step_ring", path, func(c *Config) { c.StepRing = 1 << 30 }, ErrArg, "native: step_ring: 1073741824 not in 1..16777216"},
		{"kv_blocks", path, func(c *Config) { c.KVBlocks = 3 }, ErrArg,
			fmt.Sprintf("native: kv_blocks: 3 is fewer than the %d blocks one request needs to reach the context limit (%d tokens, block_size 16)", ref.Context/16, ref.Context)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			if tt.mod != nil {
				tt.mod(&cfg)
			}
			e, err := Open(tt.path, cfg)
			if err == nil {
				e.Close()
				t.Fatal("no error")
			}
			if tt.is != nil && (!errors.Is(err, tt.is) || err.Error() != tt.msg) {
				t.Fatalf("got %v, want %q", err, tt.msg)
			}
			if tt.is == nil && !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(tt.msg)) {
				t.Fatalf("got %v, want it to mention %q", err, tt.msg)
			}
		})
	}
	t.Run("closed", func(t *testing.T) {
		e, err := Open(path, DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		e.Close()
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Submit([]int32{1}, Params{MaxTokens: 1}); err == nil {
			t.Fatal("Submit on a closed engine")
		}
		if _, err := e.Step(); err == nil {
			t.Fatal("Step on a closed engine")
		}
		if r, w := e.Load(); r != 0 || w != 0 {
			t.Fatal("Load on a closed engine")
		}
	})
}

// loadReference reads the GGUF file at path with the C parser (ReadGGUF)
// and loads the reference model from it.
func loadReference(path string) (*reference.Model, error) {
	f, err := ReadGGUF(path)
	if err != nil {
		return nil, err
	}
	return reference.Load(f)
}
