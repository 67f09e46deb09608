package reference

import "github.com/picometer/picometer/gguf"

// The K-quants compute with activations quantized per 256 elements, as the
// engine's integer kernels in native/qmm_k.c do.
func init() {
	actBlock[gguf.Q4_K] = 256
	actBlock[gguf.Q5_K] = 256
	actBlock[gguf.Q6_K] = 256
}
