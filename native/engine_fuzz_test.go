//go:build cgo

package native

import (
	"errors"
	"math"
	"slices"
	"testing"
)

// FuzzEngine drives one engine with arbitrary configurations, prompts
// (tokens out of range included), sampling parameters and interleavings of
// Submit, Step and Cancel, and checks what the engine promises after every
// call: only the documented errors, tokens in the vocabulary, finish reasons
// and token counts consistent with the parameters, and nothing left behind.
func FuzzEngine(f *testing.F) {
	f.Add([]byte("\x02\x04\x10\x04\x00" + "s\x05abcde\x10\x00\x00\x00" + "ssss" + "ccs\x03xyz\x03\x80\x05\x60"))
	f.Add([]byte("\x00\x00\x01\x01\x01" + "s\x01\x01\xff\x7f\x00\x00" + "s\x02\x01\x02\x01\xff\x02\x00"))
	f.Add([]byte("\x03\x08\x03\x02\x02" + "s\x20the cat sat on the mat the cat s\x40\x00\x00\x00" + "s\x08abababab\x40\x40\x03\x40" + "sssssscsssssss"))
	f.Add([]byte("\x07\x02\x40\x10\x01" + "s\xf0" + "s\x00" + "c\x09" + "s\x04\x00\x00\x00\x00\xff\xff\xff\xff"))
	path, _ := tinyModel(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		in := fuzzInput{b: data}
		cfg := DefaultConfig()
		cfg.BMax = 1 + int(in.byte()%4)
		cfg.SpecK = int(in.byte() % 9)
		cfg.PrefillChunk = 1 + int(in.byte()%64)
		cfg.BlockSize = 1 + int(in.byte()%32)
		cfg.MaxWaiting = int(in.byte() % 4)
		e, err := Open(path, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		ctx, vocab := e.Info().ContextLength, e.Info().Vocab
		type live struct {
			p      Params
			prompt int
			tokens int
		}
		reqs := map[ID]*live{}
		check := func(outs []Output) {
			for _, o := range outs {
				r := reqs[o.ID]
				if r == nil {
					t.Fatalf("output for unknown or finished request %d", o.ID)
				}
				for _, tok := range o.Tokens {
					if tok < 0 || int(tok) >= vocab {
						t.Fatalf("request %d: token %d outside the vocabulary", o.ID, tok)
					}
				}
				r.tokens += len(o.Tokens)
				if r.tokens > r.p.MaxTokens || r.prompt+r.tokens > ctx {
					t.Fatalf("request %d: %d tokens after a %d-token prompt (max %d, context %d)", o.ID, r.tokens, r.prompt, r.p.MaxTokens, ctx)
				}
				switch o.Finish {
				case "":
					continue
				case FinishStop:
					last := o.Tokens[len(o.Tokens)-1]
					if last != TokEOS && !slices.Contains(r.p.StopTokens, last) {
						t.Fatalf("request %d: stop after token %d, neither EOS nor a stop token", o.ID, last)
					}
				case FinishLength:
					if r.tokens != r.p.MaxTokens && r.prompt+r.tokens != ctx {
						t.Fatalf("request %d: length after %d tokens (max %d, prompt %d, context %d)", o.ID, r.tokens, r.p.MaxTokens, r.prompt, ctx)
					}
				default:
					t.Fatalf("request %d: finish %q", o.ID, o.Finish)
				}
				if o.Stats == nil || o.Stats.CompletionTokens != r.tokens || o.Stats.PromptTokens != r.prompt {
					t.Fatalf("request %d: stats %+v, %d tokens seen", o.ID, o.Stats, r.tokens)
				}
				delete(reqs, o.ID)
			}
		}
		var ids []ID
		for in.more() {
			switch in.byte() % 3 {
			case 0: // submit
				n := int(in.byte())
				if n > 200 {
					n = ctx + n - 200 // around and beyond the context
				}
				prompt := make([]int32, n)
				for i := range prompt {
					prompt[i] = int32(int8(in.byte())) * 3 // negatives and > vocab included
				}
				p := Params{
					MaxTokens:   int(int8(in.byte())),
					Temperature: float32(in.byte()) / 64,
					TopK:        int(int8(in.byte())),
					TopP:        float32(in.byte()) / 200,
					Seed:        uint64(in.byte()),
				}
				switch in.byte() % 8 {
				case 0:
					p.Temperature = float32(math.NaN())
				case 1:
					p.StopTokens = []int32{int32(in.byte()), int32(in.byte())}
				case 2:
					p.StopTokens = make([]int32, 17)
				case 3: // penalties, in range and out of it
					p.PresencePenalty = float32(int8(in.byte())) / 50
					p.FrequencyPenalty = float32(int8(in.byte())) / 50
					p.RepetitionPenalty = float32(in.byte()) / 64
				case 4:
					p.RepetitionPenalty = float32(math.Inf(1))
					p.FrequencyPenalty = float32(math.NaN())
				}
				id, err := e.Submit(prompt, p)
				switch {
				case err == nil:
					reqs[id] = &live{p: p, prompt: n}
					ids = append(ids, id)
				case errors.Is(err, ErrArg), errors.Is(err, ErrQueueFull):
				default:
					t.Fatalf("submit: unexpected error %v", err)
				}
			case 1: // step
				outs, err := e.Step()
				if err != nil {
					t.Fatal(err)
				}
				check(outs)
			case 2: // cancel a request submitted earlier (perhaps finished)
				if len(ids) == 0 {
					continue
				}
				id := ids[int(in.byte())%len(ids)]
				st, err := e.Cancel(id)
				_, running := reqs[id]
				switch {
				case err == nil && running:
					if st.Finish != FinishAbort || st.CompletionTokens != reqs[id].tokens {
						t.Fatalf("cancel %d: stats %+v, %d tokens seen", id, st, reqs[id].tokens)
					}
					delete(reqs, id)
				case errors.Is(err, ErrNotFound) && !running:
				default:
					t.Fatalf("cancel %d (running %v): %v", id, running, err)
				}
			}
		}
		for steps := 0; len(reqs) > 0; steps++ {
			if steps > 20*ctx {
				t.Fatalf("%d requests never finished", len(reqs))
			}
			outs, err := e.Step()
			if err != nil {
				t.Fatal(err)
			}
			check(outs)
		}
		var s Snapshot
		e.Snapshot(&s)
		if s.Running != 0 || s.Waiting != 0 || s.KVBlocksUsed != 0 {
			t.Fatalf("after all finished: running %d waiting %d blocks %d", s.Running, s.Waiting, s.KVBlocksUsed)
		}
	})
}

type fuzzInput struct{ b []byte }

func (in *fuzzInput) more() bool { return len(in.b) > 0 }

func (in *fuzzInput) byte() byte {
	if len(in.b) == 0 {
		return 0
	}
	c := in.b[0]
	in.b = in.b[1:]
	return c
}
