package gguf

import (
	"encoding/hex"
	"math"
	"slices"
	"testing"
)

// quantTypes are the types with a codec, in the order of the issue.
var quantTypes = []TensorType{F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K}

// testRows returns rows of 512 values of several shapes: uniform, heavy
// tailed with outliers, constant, all zero, all positive, tiny.
func testRows() [][]float32 {
	rng := uint64(7)
	next := func() float64 {
		rng = rng*6364136223846793005 + 1442695040888963407
		return float64(rng>>11) / (1 << 53)
	}
	var rows [][]float32
	mk := func(f func(i int) float64) {
		r := make([]float32, 512)
		for i := range r {
			r[i] = float32(f(i))
		}
		rows = append(rows, r)
	}
	mk(func(int) float64 { return 2*next() - 1 })
	mk(func(i int) float64 {
		v := math.Tan((next() - 0.5) * 3) // heavy tails
		if i%97 == 5 {
			v *= 40
		}
		return v
	})
	mk(func(int) float64 { return 0.75 })
	mk(func(int) float64 { return 0 })
	mk(func(int) float64 { return 3 + next() })
	mk(func(int) float64 { return (next() - 0.5) * 1e-3 })
	return rows
}

// bound returns the largest error the format allows for element j of the
// block b (encoded from x).
func bound(t TensorType, b []byte, x []float32, j int) float64 {
	ax := math.Abs(float64(x[j]))
	switch t {
	case F32:
		return 0
	case F16:
		return ax*math.Ldexp(1, -11) + math.Ldexp(1, -25)
	case BF16:
		return ax * math.Ldexp(1, -8)
	case Q8_0: // round to nearest step
		return 0.5*math.Abs(float64(f16At(b))) + 1e-7
	case Q4_0, Q5_0: // one step at the clamped end, else half a step
		return math.Abs(float64(f16At(b))) * 1.0001
	case Q4_1, Q5_1: // half a step plus the F16 rounding of the minimum
		lo, _ := minMax(x)
		return 0.5*float64(f16At(b)) + math.Abs(float64(lo-f16At(b[2:]))) + 1e-7
	case Q4_K, Q5_K: // half a step plus the 6-bit rounding of the minimum
		sc, _ := kScaleMin(b[4:16], j/32)
		return 0.5*float64(f16At(b))*float64(sc) + float64(f16At(b[2:])) + 1e-6*ax + 1e-7
	case Q6_K: // one step at the clamped end
		return math.Abs(float64(f16At(b[208:]))*float64(int8(b[192+j/16]))) * 1.0001
	}
	panic("BUG: no bound for " + t.String())
}

func TestQuantRoundTrip(t *testing.T) {
	// rmsMax is the largest RMS error relative to the row's RMS on the
	// uniform row: it catches a codec that is within its bound only
	// because the bound is loose.
	rmsMax := map[TensorType]float64{F32: 0, F16: 1e-3, BF16: 5e-3, Q8_0: 0.01, Q4_0: 0.15, Q4_1: 0.1,
		Q5_0: 0.07, Q5_1: 0.05, Q4_K: 0.1, Q5_K: 0.05, Q6_K: 0.03}
	for _, typ := range quantTypes {
		c, _ := codecOf(typ)
		for ri, x := range testRows() {
			b, err := Quantize(typ, x)
			if err != nil {
				t.Fatal(err)
			}
			if len(b) != len(x)/c.block*c.bytes {
				t.Fatalf("%s: %d bytes for %d elements", typ, len(b), len(x))
			}
			y, err := Dequantize(typ, b, len(x))
			if err != nil {
				t.Fatal(err)
			}
			var se, sx float64
			for j := range x {
				blk := j / c.block
				e := math.Abs(float64(y[j] - x[j]))
				if lim := bound(typ, b[blk*c.bytes:(blk+1)*c.bytes], x[blk*c.block:(blk+1)*c.block], j%c.block); !(e <= lim) {
					t.Fatalf("%s row %d: element %d = %g decodes to %g: error %g > bound %g", typ, ri, j, x[j], y[j], e, lim)
				}
				se += e * e
				sx += float64(x[j]) * float64(x[j])
			}
			if ri == 0 && math.Sqrt(se/sx) > rmsMax[typ] {
				t.Errorf("%s: relative RMS error %.3g > %.3g", typ, math.Sqrt(se/sx), rmsMax[typ])
			}
			// Encoding decoded values again must not drift further.
			b2, _ := Quantize(typ, y)
			y2, _ := Dequantize(typ, b2, len(y))
			for j := range y {
				blk := j / c.block
				if e := math.Abs(float64(y2[j] - y[j])); !(e <= bound(typ, b2[blk*c.bytes:(blk+1)*c.bytes], y[blk*c.block:(blk+1)*c.block], j%c.block)) {
					t.Fatalf("%s row %d: re-encoding element %d moved it by %g", typ, ri, j, e)
				}
			}
		}
	}
}

func TestQuantErrors(t *testing.T) {
	if _, err := Quantize(Q4_K, make([]float32, 32)); err == nil {
		t.Error("Q4_K accepted 32 elements")
	}
	if _, err := Dequantize(Q8_0, make([]byte, 33), 32); err == nil {
		t.Error("Q8_0 accepted 33 bytes for 32 elements")
	}
	if _, err := Quantize(Q2_K, make([]float32, 256)); err == nil {
		t.Error("Q2_K has no codec, but Quantize accepted it")
	}
	for _, typ := range quantTypes {
		if !typ.Computable() {
			t.Errorf("%s not computable", typ)
		}
	}
	if Q2_K.Computable() || I8.Computable() {
		t.Error("Q2_K or I8 computable")
	}
}

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestQuantGoldenEncode: blocks whose bytes follow from the format's
// definition by hand.
func TestQuantGoldenEncode(t *testing.T) {
	// Q8_0: max |x| = 127, so d = 1 (F16 0x3c00) and q = x.
	x := make([]float32, 32)
	for j := range x {
		x[j] = float32(j - 16)
	}
	x[0], x[1] = 127, -127
	b, _ := Quantize(Q8_0, x)
	want := "003c" + "7f81" + "f2f3f4f5f6f7f8f9fafbfcfdfeff" + "000102030405060708090a0b0c0d0e0f"
	if hex.EncodeToString(b) != want {
		t.Errorf("Q8_0 %x\nwant %s", b, want)
	}
	// Q4_0: x[j] = 2(j-16): the largest magnitude is -32, so d = -32/-8 = 4
	// (0x4400) and q = x/4 + 8 rounded: j even → j/2, j odd → (j+1)/2
	// (halves away from zero from 8), clamped at 15; byte j packs q[j]
	// (low) and q[j+16] (high).
	for j := range x {
		x[j] = float32(2 * (j - 16))
	}
	b, _ = Quantize(Q4_0, x)
	q := func(j int) int { // round(2(j-16)/4) + 8, halves away from zero
		v := float64(j-16) / 2
		return min(15, int(math.Round(v))+8)
	}
	wb := []byte{0x00, 0x44}
	for j := range 16 {
		wb = append(wb, byte(q(j)|q(j+16)<<4))
	}
	if !slices.Equal(b, wb) {
		t.Errorf("Q4_0 %x\nwant %x", b, wb)
	}
	// By hand: x = -32 -30 -28 -26 give x/4 = -8 -7.5 -7 -6.5, so q = 0 0 1 1;
	// x = 0 2 4 6 (j = 16..19) give 0 0.5 1 1.5, so q = 8 9 9 10.
	if hex.EncodeToString(wb[2:6]) != "809091a1" {
		t.Errorf("hand-worked Q4_0 nibbles %x", wb[2:6])
	}
}

// TestQuantGoldenDecode: hand-written blocks decode to the values the
// published definitions give.
func TestQuantGoldenDecode(t *testing.T) {
	dec := func(typ TensorType, b []byte, n int) []float32 {
		t.Helper()
		y, err := Dequantize(typ, b, n)
		if err != nil {
			t.Fatal(err)
		}
		return y
	}
	check := func(name string, got []float32, want func(j int) float32) {
		t.Helper()
		for j := range got {
			if got[j] != want(j) {
				t.Fatalf("%s: element %d = %g, want %g", name, j, got[j], want(j))
			}
		}
	}
	// Q4_1: d = 0.5 (0x3800), m = -1 (0xbc00), qs[j] = j | (15-j)<<4.
	b := unhex(t, "0038"+"00bc")
	for j := range 16 {
		b = append(b, byte(j|(15-j)<<4))
	}
	check("Q4_1", dec(Q4_1, b, 32), func(j int) float32 {
		if j < 16 {
			return 0.5*float32(j) - 1
		}
		return 0.5*float32(31-j) - 1
	})
	// Q5_0: d = 2 (0x4000), qh = 0xffff0000 (high bit set on the upper 16), qs = 0x00:
	// q = 0 → -16·2, q = 16 → 0.
	b = append(unhex(t, "0040"+"0000ffff"), make([]byte, 16)...)
	check("Q5_0", dec(Q5_0, b, 32), func(j int) float32 {
		if j < 16 {
			return -32
		}
		return 0
	})
	// Q5_1: d = 1, m = 0.5 (0x3800), qh bit j set for odd j, qs = 0x33.
	b = append(unhex(t, "003c"+"0038"+"aaaaaaaa"), slices.Repeat([]byte{0x33}, 16)...)
	check("Q5_1", dec(Q5_1, b, 32), func(j int) float32 { return float32(3+16*(j&1)) + 0.5 })
	// BF16: 0x3f80 = 1, 0xc040 = -3.
	check("BF16", dec(BF16, unhex(t, "803f40c0"), 2), func(j int) float32 { return []float32{1, -3}[j] })
	// Q4_K: d = 1, dmin = 0.5; sub-block s has scale s+1 and min 2s:
	// scales[0..3] = 1 2 3 4 (scale) with bits 6-7 = high bits of scale 4+s
	// (5..8: 0,0,0,0 since < 16), scales[4..7] = 0 2 4 6 (min, high bits of
	// mins 8..14 = 0), scales[8..11] = (scale 5+s)&15 | (min 8+2s)&15<<4.
	sc := []byte{1, 2, 3, 4, 0, 2, 4, 6, 5 | 8<<4, 6 | 10<<4, 7 | 12<<4, 8 | 14<<4}
	qs := slices.Repeat([]byte{0x21}, 128) // low nibble 1, high nibble 2
	b = append(append(unhex(t, "003c"+"0038"), sc...), qs...)
	kWant := func(j int, q int) float32 {
		s := j / 32
		return float32(s+1)*float32(q) - 0.5*float32(2*s)
	}
	check("Q4_K", dec(Q4_K, b, 256), func(j int) float32 { return kWant(j, 1+(j/32)%2) })
	// Q5_K: the same with qh = 0xff: every fifth bit set (q = 17 and 18).
	b = append(append(append(unhex(t, "003c"+"0038"), sc...), slices.Repeat([]byte{0xff}, 32)...), qs...)
	check("Q5_K", dec(Q5_K, b, 256), func(j int) float32 { return kWant(j, 17+(j/32)%2) })
	// Q6_K: d = 0.25 (0x3400); scale of sub-block s = s-8; ql = 0x21 (low
	// nibble 1 for elements l, l+32; high 2 for l+64, l+96), qh = 0b11100100
	// (high bits 0, 1, 2, 3 for l, l+32, l+64, l+96): q = 1, 17, 34, 50.
	b = append(slices.Repeat([]byte{0x21}, 128), slices.Repeat([]byte{0xe4}, 64)...)
	for s := range 16 {
		b = append(b, byte(int8(s-8)))
	}
	b = append(b, 0x00, 0x34)
	check("Q6_K", dec(Q6_K, b, 256), func(j int) float32 {
		q := []int{1, 17, 34, 50}[(j%128)/32]
		return 0.25 * float32(j/16-8) * float32(q-32)
	})
}
