package tokenizer_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/picometer/picometer/modelgen"
	. "github.com/picometer/picometer/tokenizer"
)

// picometer-bytes: one token per byte; control tokens only with special.
func TestPicometerBytes(t *testing.T) {
	f, err := modelgen.Build(modelgen.Tiny)
	if err != nil {
		t.Fatal(err)
	}
	v, err := FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	tk, err := New(v)
	if err != nil {
		t.Fatal(err)
	}
	if got := tk.Encode(nil, "hé<|end|>", false); !slices.Equal(got, []int32{'h', 0xc3, 0xa9, '<', '|', 'e', 'n', 'd', '|', '>'}) {
		t.Errorf("plain: %v", got)
	}
	if got := tk.Encode(nil, "hi<|end|>", true); !slices.Equal(got, []int32{'h', 'i', modelgen.TokEnd}) {
		t.Errorf("special: %v", got)
	}
	if got := string(tk.Decode(nil, []int32{'h', 0xc3, 0xa9})); got != "hé" {
		t.Errorf("decode: %q", got)
	}
	if !tk.IsControl(modelgen.TokEnd) || tk.IsControl('a') || tk.BOS() != modelgen.TokBOS || !tk.AddBOS() {
		t.Error("control/BOS")
	}
}

func TestLoadErrors(t *testing.T) {
	f := func(v *Vocab, want string) {
		t.Helper()
		_, err := New(v)
		if err == nil || err.Error() != want {
			t.Errorf("got %v, want %q", err, want)
		}
	}
	tokens := []string{"a", "b"}
	f(&Vocab{Model: "wordpiece", Tokens: tokens}, `tokenizer.ggml.model: "wordpiece" is not a known tokenizer model (want gpt2, llama, gemma4 or picometer-bytes)`)
	if _, err := New(&Vocab{Model: "gpt2", Pre: "tekken", Tokens: tokens}); err == nil ||
		!strings.HasPrefix(err.Error(), `tokenizer.ggml.pre: "tekken" is not a known pre-tokenizer (want one of a.x-4.0, codeshell, command-r,`) {
		t.Errorf("unknown pre: %v", err)
	}
	f(&Vocab{Model: "gpt2", Tokens: tokens}, `tokenizer.ggml.merges: missing (model gpt2 needs them)`)
	f(&Vocab{Model: "llama"}, `tokenizer.ggml.tokens: missing or empty`)
	f(&Vocab{Model: "llama", Tokens: tokens, Types: []int32{1}}, `tokenizer.ggml.token_type: 1 entries for 2 tokens`)
}
