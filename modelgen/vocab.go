package modelgen

import (
	"fmt"
	"math"
	"strings"

	"github.com/picometer/picometer/gguf"
	"github.com/picometer/picometer/tokenizer"
)

// BuildWithVocab generates p's model with a real vocabulary (for example
// tokenizer.FromHF of a Hugging Face tokenizer.json) instead of the byte
// vocabulary: the tokenizer.* metadata is v's, <arch>.vocab_size and the
// rows of token_embd and output are v's token count, everything else is
// [Build]'s. Any preset shape works; keep test models small (tiny dims):
// a 128k-262k vocabulary makes the embedding the largest tensor.
func BuildWithVocab(p Preset, v *tokenizer.Vocab) (*gguf.File, error) {
	if v == nil || len(v.Tokens) == 0 {
		return nil, fmt.Errorf("modelgen: empty vocabulary")
	}
	f, err := Build(p)
	if err != nil {
		return nil, err
	}
	n := len(v.Tokens)
	kv := f.KV[:0:0]
	for _, e := range f.KV {
		if strings.HasPrefix(e.Key, "tokenizer.") {
			continue
		}
		if strings.HasSuffix(e.Key, ".vocab_size") {
			e.Value = uint32(n)
		}
		kv = append(kv, e)
	}
	f.KV = append(kv, v.KV()...)
	for i := range f.Tensors {
		t := &f.Tensors[i]
		switch t.Name { // the same type Build chose: it depends on the row length, not the vocabulary
		case "token_embd.weight":
			*t = tensor(p, t.Name, p.Dim, n, 1, 0, t.Type)
		case "output.weight":
			*t = tensor(p, t.Name, p.Dim, n, 1/math.Sqrt(float64(p.Dim)), 0, t.Type)
		}
	}
	return f, nil
}

// WriteWithVocab is [BuildWithVocab] written to path atomically.
func WriteWithVocab(path string, p Preset, v *tokenizer.Vocab) error {
	f, err := BuildWithVocab(p, v)
	if err != nil {
		return err
	}
	return gguf.WriteFile(path, f)
}
