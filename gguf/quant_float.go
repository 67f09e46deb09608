package gguf

import "math"

// The float formats, one element per "block":
//
//	F32   4 bytes, IEEE 754 binary32, little-endian
//	F16   2 bytes, IEEE 754 binary16 (F32ToF16 rounds to nearest even)
//	BF16  2 bytes, the upper half of a binary32 (F32ToBF16 rounds to
//	      nearest even; NaN stays a quiet NaN)

// BF16ToF32 widens a bfloat16 (exact).
func BF16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// F32ToBF16 narrows f to bfloat16, rounding to nearest even.
func F32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 { // NaN: keep it a (quiet) NaN
		return uint16(b>>16) | 0x40
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

func encF32(dst []byte, x []float32)  { le.PutUint32(dst, math.Float32bits(x[0])) }
func decF32(dst []float32, b []byte)  { dst[0] = math.Float32frombits(le.Uint32(b)) }
func encF16(dst []byte, x []float32)  { le.PutUint16(dst, F32ToF16(x[0])) }
func decF16(dst []float32, b []byte)  { dst[0] = F16ToF32(le.Uint16(b)) }
func encBF16(dst []byte, x []float32) { le.PutUint16(dst, F32ToBF16(x[0])) }
func decBF16(dst []float32, b []byte) { dst[0] = BF16ToF32(le.Uint16(b)) }
