package reference

import "github.com/picometer/picometer/gguf"

// The 32-wide block types compute with activations quantized per 32
// elements (native/qmm_32.c registers their integer kernels).
func init() {
	for _, t := range []gguf.TensorType{gguf.Q8_0, gguf.Q4_0, gguf.Q4_1, gguf.Q5_0, gguf.Q5_1} {
		actBlock[t] = 32
	}
}
