package modelgen

import (
	"fmt"
	"strings"

	"github.com/picometer/picometer/gguf"
)

// Types are the file types Preset.Type accepts, as llama.cpp's quantize
// names them (lower case).
var Types = []string{"f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q4_k_m", "q5_k_m", "q6_k"}

// fileType is one entry of Types: the base tensor type and the
// general.file_type value (llama.cpp's enum llama_ftype).
type fileType struct {
	base  gguf.TensorType
	ftype uint32
	mix   bool // an _M mix (attn_v and ffn_down of some layers get Q6_K)
}

func lookupType(name string) (fileType, error) {
	switch strings.ToLower(name) {
	case "", "f32":
		return fileType{gguf.F32, 0, false}, nil
	case "f16":
		return fileType{gguf.F16, 1, false}, nil
	case "bf16":
		return fileType{gguf.BF16, 32, false}, nil
	case "q8_0":
		return fileType{gguf.Q8_0, 7, false}, nil
	case "q4_0":
		return fileType{gguf.Q4_0, 2, false}, nil
	case "q4_1":
		return fileType{gguf.Q4_1, 3, false}, nil
	case "q4_k_m":
		return fileType{gguf.Q4_K, 15, true}, nil
	case "q5_k_m":
		return fileType{gguf.Q5_K, 17, true}, nil
	case "q6_k":
		return fileType{gguf.Q6_K, 18, false}, nil
	}
	return fileType{}, fmt.Errorf("type %q: want one of %s", name, strings.Join(Types, ", "))
}

// useMoreBits is llama.cpp's choice of the layers whose attn_v and
// ffn_down an _M mix stores in Q6_K: the first and last eighth of the
// layers and every third layer between.
func useMoreBits(layer, layers int) bool {
	return layer < layers/8 || layer >= 7*layers/8 || (layer-layers/8)%3 == 2
}

// tensorType returns the type of a 2-D tensor named name (layer l of
// layers, -1 outside the blocks) whose rows have ne0 elements, following
// llama.cpp's rules for the file type:
//
//   - float file types store every matrix in their type;
//   - output.weight (token_embd.weight when tied, since it is the output
//     too) is Q6_K in every quantized type but Q8_0, which keeps Q8_0;
//   - in q4_k_m and q5_k_m, attn_v and ffn_down are Q6_K where useMoreBits;
//   - everything else is the base type;
//   - a row length that is not a whole number of blocks falls back as
//     llama.cpp does: Q4_K to Q5_0, Q5_K to Q5_1, Q6_K to Q8_0, and to F16
//     when even 32 does not divide it.
func (ft fileType) tensorType(name string, l, layers, ne0 int, tied bool) gguf.TensorType {
	t := ft.base
	if t == gguf.F32 || t == gguf.F16 || t == gguf.BF16 {
		return t
	}
	switch {
	case name == "output.weight" || tied && name == "token_embd.weight":
		if t != gguf.Q8_0 {
			t = gguf.Q6_K
		}
		if ne0%256 != 0 { // llama.cpp's own rule for the output
			t = gguf.Q8_0
		}
	case ft.mix && (strings.HasSuffix(name, ".attn_v.weight") || strings.HasSuffix(name, ".ffn_down.weight")):
		if useMoreBits(l, layers) {
			t = gguf.Q6_K
		}
	}
	if ne0%t.BlockSize() != 0 {
		switch t {
		case gguf.Q4_K:
			t = gguf.Q5_0
		case gguf.Q5_K:
			t = gguf.Q5_1
		case gguf.Q6_K:
			t = gguf.Q8_0
		}
		if ne0%t.BlockSize() != 0 {
			t = gguf.F16
		}
	}
	return t
}
