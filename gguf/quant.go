package gguf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// This file is the entry to the weight formats: Quantize encodes float32
// rows in a ggml type, Dequantize decodes them. Each family of formats is
// one file with its block layout: quant_float.go (F32, F16, BF16),
// quant_32.go (the 32-wide Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 blocks) and
// quant_k.go (the 256-wide Q4_K, Q5_K and Q6_K super-blocks). The C engine
// (native/quant_*.c) reads the same bytes; its dequantizers compute each
// element with the same float32 operations as these.

// ErrNoCodec is returned for a type this package cannot encode or decode.
var ErrNoCodec = errors.New("gguf: no codec for tensor type")

// codec is one format: block elements, block bytes, and the block coders.
type codec struct {
	block, bytes int
	enc          func(dst []byte, x []float32) // one block
	dec          func(dst []float32, b []byte) // one block
}

func codecOf(t TensorType) (codec, bool) {
	switch t {
	case F32:
		return codec{1, 4, encF32, decF32}, true
	case F16:
		return codec{1, 2, encF16, decF16}, true
	case BF16:
		return codec{1, 2, encBF16, decBF16}, true
	case Q4_0:
		return codec{32, 18, encQ4_0, decQ4_0}, true
	case Q4_1:
		return codec{32, 20, encQ4_1, decQ4_1}, true
	case Q5_0:
		return codec{32, 22, encQ5_0, decQ5_0}, true
	case Q5_1:
		return codec{32, 24, encQ5_1, decQ5_1}, true
	case Q8_0:
		return codec{32, 34, encQ8_0, decQ8_0}, true
	case Q4_K:
		return codec{256, 144, encQ4_K, decQ4_K}, true
	case Q5_K:
		return codec{256, 176, encQ5_K, decQ5_K}, true
	case Q6_K:
		return codec{256, 210, encQ6_K, decQ6_K}, true
	}
	return codec{}, false
}

// Computable reports whether t has a codec here (and kernels in the C
// engine): F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K.
func (t TensorType) Computable() bool {
	_, ok := codecOf(t)
	return ok
}

// BlockSize returns the elements per block of t (1 for float types), or
// 0 for an unknown type.
func (t TensorType) BlockSize() int {
	if tt, ok := tensorTypes[t]; ok {
		return int(tt.block)
	}
	return 0
}

// Quantize encodes x in type t. len(x) must be a whole number of t's
// blocks (rows of a tensor are encoded one after another, and a row
// length is always a multiple of the block).
func Quantize(t TensorType, x []float32) ([]byte, error) {
	c, ok := codecOf(t)
	if !ok {
		return nil, fmt.Errorf("%w %s", ErrNoCodec, t)
	}
	if len(x)%c.block != 0 {
		return nil, fmt.Errorf("gguf: quantize %s: %d elements are not a whole number of %d-element blocks", t, len(x), c.block)
	}
	n := len(x) / c.block
	out := make([]byte, n*c.bytes)
	for i := 0; i < n; i++ {
		c.enc(out[i*c.bytes:(i+1)*c.bytes], x[i*c.block:(i+1)*c.block])
	}
	return out, nil
}

// Dequantize decodes n elements of type t from data, which must hold
// exactly n elements (a whole number of blocks).
func Dequantize(t TensorType, data []byte, n int) ([]float32, error) {
	c, ok := codecOf(t)
	if !ok {
		return nil, fmt.Errorf("%w %s", ErrNoCodec, t)
	}
	if n < 0 || n%c.block != 0 || len(data) != n/c.block*c.bytes {
		return nil, fmt.Errorf("gguf: dequantize %s: %d bytes do not hold %d elements", t, len(data), n)
	}
	out := make([]float32, n)
	for i := 0; i < n/c.block; i++ {
		c.dec(out[i*c.block:(i+1)*c.block], data[i*c.bytes:(i+1)*c.bytes])
	}
	return out, nil
}

var le = binary.LittleEndian

func f16At(b []byte) float32 { return F16ToF32(le.Uint16(b)) }

// absMax returns the element of largest magnitude, with its sign.
func absMax(x []float32) float32 {
	var m float32
	for _, v := range x {
		if abs32(v) > abs32(m) {
			m = v
		}
	}
	return m
}

func abs32(v float32) float32 { return float32(math.Abs(float64(v))) }

func minMax(x []float32) (lo, hi float32) {
	lo, hi = x[0], x[0]
	for _, v := range x[1:] {
		lo, hi = min(lo, v), max(hi, v)
	}
	return lo, hi
}

// roundClamp rounds v to the nearest integer (halves away from zero) and
// clamps it to [lo, hi].
func roundClamp(v float32, lo, hi int) int {
	r := math.Round(float64(v))
	if !(r >= float64(lo)) { // also NaN
		return lo
	}
	if r > float64(hi) {
		return hi
	}
	return int(r)
}

// f16Up returns the F16 bits of the smallest half >= v > 0 (v when exact),
// so a scale rounded to F16 still covers the range it was computed for.
func f16Up(v float32) uint16 {
	h := F32ToF16(v)
	if F16ToF32(h) < v && h < 0x7bff {
		h++
	}
	return h
}
