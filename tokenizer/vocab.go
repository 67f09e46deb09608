package tokenizer

import (
	"fmt"

	"github.com/picometer/picometer/gguf"
)

// llama.cpp's token types (enum llama_token_type), tokenizer.ggml.token_type.
const (
	TypeNormal      = 1
	TypeUnknown     = 2
	TypeControl     = 3 // special tokens: BOS, EOS, chat markers; never produced from user text
	TypeUserDefined = 4 // added tokens that are not special
	TypeUnused      = 5
	TypeByte        = 6 // SentencePiece byte fallback <0xXX>
)

// Vocab is a tokenizer as a GGUF file describes it (tokenizer.ggml.* and
// tokenizer.chat_template). [FromGGUF] reads it, [New] builds the encoder.
type Vocab struct {
	Model  string    // tokenizer.ggml.model: "gpt2", "llama", "gemma4" or "picometer-bytes"
	Pre    string    // tokenizer.ggml.pre (gpt2 only): the pre-tokenizer
	Tokens []string  // tokenizer.ggml.tokens, by id
	Types  []int32   // tokenizer.ggml.token_type (TypeNormal when absent)
	Scores []float32 // tokenizer.ggml.scores (llama)
	Merges []string  // tokenizer.ggml.merges: "left right", best first

	// Special ids (-1 when absent): tokenizer.ggml.bos_token_id, eos_token_id,
	// eot_token_id, eom_token_id, padding_token_id, unknown_token_id.
	BOS, EOS, EOT, EOM, Pad, Unk int32

	// AddBOS, AddEOS: tokenizer.ggml.add_bos_token, add_eos_token. Without
	// the key, as in llama.cpp: AddBOS for llama, gemma4 (always) and the
	// Llama 3 pre-tokenizers; AddEOS false.
	AddBOS, AddEOS bool
	// AddSpacePrefix (tokenizer.ggml.add_space_prefix, llama and gemma4;
	// default true for llama and false for gemma4, as in llama.cpp) puts ▁
	// before the text and before the text after each special token, and
	// decoding drops one leading space.
	AddSpacePrefix bool
	ChatTemplate   string // tokenizer.chat_template ("" when absent)
}

// FromGGUF reads the tokenizer metadata of a GGUF file. Every key is
// checked: a wrong type or an id outside the vocabulary is an error naming
// the key.
func FromGGUF(f *gguf.File) (*Vocab, error) {
	v := &Vocab{BOS: -1, EOS: -1, EOT: -1, EOM: -1, Pad: -1, Unk: -1, AddSpacePrefix: true}
	var err error
	str := func(key string, dst *string, required bool) {
		if err != nil {
			return
		}
		x, ok := f.Get(key)
		if !ok {
			if required {
				err = fmt.Errorf("%s: missing", key)
			}
			return
		}
		s, isStr := x.(string)
		if !isStr {
			err = fmt.Errorf("%s: %T, want a string", key, x)
			return
		}
		*dst = s
	}
	str("tokenizer.ggml.model", &v.Model, true)
	str("tokenizer.ggml.pre", &v.Pre, false)
	str("tokenizer.chat_template", &v.ChatTemplate, false)
	if err != nil {
		return nil, err
	}
	v.AddSpacePrefix = v.Model != "gemma4" // llama.cpp's default for a BPE model is false
	// add_bos_token when the file has none: llama.cpp's default, true for
	// SentencePiece and Gemma 4 and for the Llama 3 pre-tokenizers.
	v.AddBOS = v.Model == "llama" || v.Model == "gemma4" || v.Model == "gpt2" && preTokenizers[v.Pre].addBOS
	get := func(key string, dst any) error {
		x, ok := f.Get(key)
		if !ok {
			return nil
		}
		switch d := dst.(type) {
		case *[]string:
			s, ok := x.([]string)
			if !ok {
				return fmt.Errorf("%s: %T, want an array of string", key, x)
			}
			*d = s
		case *[]float32:
			s, ok := x.([]float32)
			if !ok {
				return fmt.Errorf("%s: %T, want an array of float32", key, x)
			}
			*d = s
		case *[]int32:
			s, ok := x.([]int32)
			if !ok {
				return fmt.Errorf("%s: %T, want an array of int32", key, x)
			}
			*d = s
		case *bool:
			s, ok := x.(bool)
			if !ok {
				return fmt.Errorf("%s: %T, want a bool", key, x)
			}
			*d = s
		case *int32:
			var n int64
			switch u := x.(type) {
			case uint32:
				n = int64(u)
			case int32:
				n = int64(u)
			case uint64:
				n = int64(min(u, 1<<40))
			case int64:
				n = u
			default:
				return fmt.Errorf("%s: %T, want an integer", key, x)
			}
			if n < 0 || n >= int64(len(v.Tokens)) {
				return fmt.Errorf("%s: %d is not a token id (0..%d)", key, n, len(v.Tokens)-1)
			}
			*d = int32(n)
		}
		return nil
	}
	for _, kv := range []struct {
		key string
		dst any
	}{
		{"tokenizer.ggml.tokens", &v.Tokens},
		{"tokenizer.ggml.token_type", &v.Types},
		{"tokenizer.ggml.scores", &v.Scores},
		{"tokenizer.ggml.merges", &v.Merges},
		{"tokenizer.ggml.bos_token_id", &v.BOS},
		{"tokenizer.ggml.eos_token_id", &v.EOS},
		{"tokenizer.ggml.eot_token_id", &v.EOT},
		{"tokenizer.ggml.eom_token_id", &v.EOM},
		{"tokenizer.ggml.padding_token_id", &v.Pad},
		{"tokenizer.ggml.unknown_token_id", &v.Unk},
		{"tokenizer.ggml.add_bos_token", &v.AddBOS},
		{"tokenizer.ggml.add_eos_token", &v.AddEOS},
		{"tokenizer.ggml.add_space_prefix", &v.AddSpacePrefix},
	} {
		if err := get(kv.key, kv.dst); err != nil {
			return nil, err
		}
	}
	if v.Model == "gemma4" {
		v.AddBOS = true // as llama.cpp forces it: Gemma 4 files say false and need BOS
	}
	return v, nil
}

// KV returns v as GGUF metadata, the way llama.cpp's converter writes it
// (the inverse of [FromGGUF]).
func (v *Vocab) KV() []gguf.KV {
	kv := []gguf.KV{
		{Key: "tokenizer.ggml.model", Value: v.Model},
	}
	if v.Pre != "" {
		kv = append(kv, gguf.KV{Key: "tokenizer.ggml.pre", Value: v.Pre})
	}
	kv = append(kv, gguf.KV{Key: "tokenizer.ggml.tokens", Value: v.Tokens})
	if v.Types != nil {
		kv = append(kv, gguf.KV{Key: "tokenizer.ggml.token_type", Value: v.Types})
	}
	if v.Scores != nil {
		kv = append(kv, gguf.KV{Key: "tokenizer.ggml.scores", Value: v.Scores})
	}
	if v.Merges != nil {
		kv = append(kv, gguf.KV{Key: "tokenizer.ggml.merges", Value: v.Merges})
	}
	for _, s := range []struct {
		key string
		id  int32
	}{
		{"tokenizer.ggml.bos_token_id", v.BOS}, {"tokenizer.ggml.eos_token_id", v.EOS},
		{"tokenizer.ggml.eot_token_id", v.EOT}, {"tokenizer.ggml.eom_token_id", v.EOM},
		{"tokenizer.ggml.padding_token_id", v.Pad}, {"tokenizer.ggml.unknown_token_id", v.Unk},
	} {
		if s.id >= 0 {
			kv = append(kv, gguf.KV{Key: s.key, Value: uint32(s.id)})
		}
	}
	kv = append(kv,
		gguf.KV{Key: "tokenizer.ggml.add_bos_token", Value: v.AddBOS},
		gguf.KV{Key: "tokenizer.ggml.add_eos_token", Value: v.AddEOS})
	if v.Model == "llama" || v.Model == "gemma4" {
		kv = append(kv, gguf.KV{Key: "tokenizer.ggml.add_space_prefix", Value: v.AddSpacePrefix})
	}
	if v.ChatTemplate != "" {
		kv = append(kv, gguf.KV{Key: "tokenizer.chat_template", Value: v.ChatTemplate})
	}
	return kv
}
