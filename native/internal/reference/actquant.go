package reference

import (
	"math"

	"github.com/picometer/picometer/gguf"
)

// actBlock maps a weight type to the block size its activations are
// quantized with before the product (32 or 256), as the engine's integer
// kernels do (native/actquant.h). A type that is absent computes with
// float activations. The families register their types in init functions
// beside this file (act32.go, actk.go), each in the same change as the C
// kernels, so the engine and the reference always agree on which types
// quantize.
var actBlock = map[gguf.TensorType]int{}

// ActBlock returns the block size activations are quantized with before
// the product with a weight of type t, or 0 for float activations.
func ActBlock(t gguf.TensorType) int { return actBlock[t] }

// quantAct sets out to x with each block of the given size rounded to
// int8 codes exactly as native/actquant.h specifies: in float32,
// amax = max |x|, d = amax/127, id = 127/amax (0 when amax is 0),
// q = rint(x*id) clamped to [-127, 127], and out = d*q. block 0 copies x.
func quantAct(out, x []float64, block int) {
	if block == 0 {
		copy(out, x)
		return
	}
	for b := 0; b+block <= len(x); b += block {
		var amax float32
		for _, v := range x[b : b+block] {
			if a := float32(math.Abs(float64(float32(v)))); a > amax {
				amax = a
			}
		}
		d := amax / 127
		var id float32
		if amax > 0 {
			id = 127 / amax
		}
		for i, v := range x[b : b+block] {
			p := float32(v) * id
			q := math.RoundToEven(float64(p))
			switch {
			case q != q:
				q = 0
			case q > 127:
				q = 127
			case q < -127:
				q = -127
			}
			out[b+i] = float64(d) * q
		}
	}
}
