package reference

import (
	"math"
	"testing"
)

// TestQuantActGolden works blocks by hand: with amax 127 the scale is
// exactly 1, so the codes are x rounded half to even.
func TestQuantActGolden(t *testing.T) {
	x := make([]float64, 32)
	copy(x, []float64{127, 0.5, 1.5, 2.5, -2.5, -0.49, 3.51, -127})
	want := make([]float64, 32)
	copy(want, []float64{127, 0, 2, 2, -2, 0, 4, -127})
	out := make([]float64, 32)
	quantAct(out, x, 32)
	for i := range want {
		if out[i] != want[i] {
			t.Errorf("element %d: %v -> %v, want %v", i, x[i], out[i], want[i])
		}
	}
	// all zeros: scale 0, codes 0
	zero := make([]float64, 256)
	quantAct(out[:0], zero[:0], 256)
	got := make([]float64, 256)
	for i := range got {
		got[i] = 1
	}
	quantAct(got, zero, 256)
	for i, v := range got {
		if v != 0 {
			t.Fatalf("zero block element %d = %v", i, v)
		}
	}
}

// TestQuantActBound checks every block keeps its largest element exactly
// (code ±127) and every other within half a step of d = amax/127.
func TestQuantActBound(t *testing.T) {
	for _, block := range []int{32, 256} {
		x := make([]float64, 4*block)
		for i := range x {
			x[i] = math.Sin(float64(i)*0.37) * float64(1+i%block)
		}
		out := make([]float64, len(x))
		quantAct(out, x, block)
		for b := 0; b < len(x); b += block {
			var amax float32
			for _, v := range x[b : b+block] {
				amax = max(amax, float32(math.Abs(v)))
			}
			d := float64(amax / 127)
			for i := b; i < b+block; i++ {
				if e := math.Abs(out[i] - x[i]); e > d/2*(1+1e-5)+1e-6*math.Abs(x[i]) {
					t.Errorf("block %d element %d: |%v - %v| = %v > d/2 = %v", block, i, out[i], x[i], e, d/2)
				}
				if math.Abs(float64(float32(math.Abs(x[i])))-float64(amax)) == 0 && math.Abs(math.Abs(out[i])-127*d) > 0 {
					t.Errorf("block %d element %d: the largest element %v became %v, want ±127·d", block, i, x[i], out[i])
				}
			}
		}
	}
	// block 0 copies
	x := []float64{0.1, 0.2}
	out := make([]float64, 2)
	quantAct(out, x, 0)
	if out[0] != 0.1 || out[1] != 0.2 {
		t.Errorf("block 0: %v, want a copy of %v", out, x)
	}
}
