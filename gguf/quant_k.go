package gguf

import "math"

// The 256-wide "K" super-blocks. A super-block holds 256 consecutive
// elements of a row in sub-blocks with their own small integer scales,
// themselves scaled by F16 super-scales. Bytes, little-endian:
//
//	Q4_K (144)  d[2] dmin[2] scales[12] qs[128]
//	Q5_K (176)  d[2] dmin[2] scales[12] qh[32] qs[128]
//	Q6_K (210)  ql[128] qh[64] scales[16] d[2]
//
// Q4_K and Q5_K: 8 sub-blocks of 32 with a 6-bit scale sc and a 6-bit min
// m each, packed in scales[12] (sub-block s < 4: sc = scales[s] & 63,
// m = scales[s+4] & 63; s >= 4: sc = scales[s+4] & 15 | scales[s-4] >> 6 << 4,
// m = scales[s+4] >> 4 | scales[s] >> 6 << 4). The elements come in 4
// chunks of 64: chunk c's first 32 are the low nibbles of qs[32c..32c+32)
// (sub-block 2c), its last 32 the high nibbles (sub-block 2c+1). Q5_K adds
// a fifth bit: bit 2c of qh[l] for element 64c+l, bit 2c+1 for 64c+32+l.
//
//	y = (d·sc) · q - (dmin·m)          (two products, then one difference)
//
// Q6_K: 16 sub-blocks of 16 with an int8 scale each, q in 0..63 stored as
// 4 low bits (ql) and 2 high bits (qh), y = (d·scale) · (q - 32). In each
// half c (128 elements) and l < 32, ql[64c+l] holds the low bits of
// elements l (low nibble) and l+64 (high), ql[64c+l+32] those of l+32 and
// l+96, and qh[32c+l] the high bits of l, l+32, l+64, l+96 in bit pairs
// 0-1, 2-3, 4-5, 6-7 (element offsets within the half).

// kScaleMin returns sub-block s's 6-bit scale and min from scales[12].
func kScaleMin(sc []byte, s int) (int, int) {
	if s < 4 {
		return int(sc[s] & 63), int(sc[s+4] & 63)
	}
	return int(sc[s+4]&15 | sc[s-4]>>6<<4), int(sc[s+4]>>4 | sc[s]>>6<<4)
}

// encK encodes a Q4_K (bits 4) or Q5_K (bits 5) super-block and returns
// the 256 codes.
func encK(dst []byte, x []float32, bits int) []int {
	top := float32(int(1)<<bits - 1)
	var scale, mn [8]float32
	var maxScale, maxMin float32
	for s := range 8 {
		lo, hi := minMax(x[32*s : 32*s+32])
		lo = min(lo, 0)
		scale[s], mn[s] = (hi-lo)/top, -lo
		maxScale, maxMin = max(maxScale, scale[s]), max(maxMin, mn[s])
	}
	dh := f16Up(maxScale / 63)
	mh := F32ToF16(maxMin / 63)
	d, dmin := F16ToF32(dh), F16ToF32(mh)
	le.PutUint16(dst, dh)
	le.PutUint16(dst[2:], mh)
	var ls, lm [8]int
	for s := range 8 {
		if d > 0 {
			ls[s] = min(63, int(math.Ceil(float64(scale[s]/d))))
		}
		if dmin > 0 {
			lm[s] = roundClamp(mn[s]/dmin, 0, 63)
		}
	}
	sc := dst[4:16]
	clear(sc)
	for s := range 8 {
		if s < 4 {
			sc[s] |= byte(ls[s])
			sc[s+4] |= byte(lm[s])
		} else {
			sc[s+4] = byte(ls[s]&15 | (lm[s]&15)<<4)
			sc[s-4] |= byte(ls[s]>>4) << 6
			sc[s] |= byte(lm[s]>>4) << 6
		}
	}
	q := make([]int, 256)
	for s := range 8 {
		dl, ml := d*float32(ls[s]), dmin*float32(lm[s])
		id := inv(dl)
		for l := range 32 {
			q[32*s+l] = roundClamp((x[32*s+l]+ml)*id, 0, int(top))
		}
	}
	return q
}

// packK4 writes the low nibbles of q in the Q4_K/Q5_K chunk order.
func packK4(qs []byte, q []int) {
	for c := range 4 {
		for l := range 32 {
			qs[32*c+l] = byte(q[64*c+l]&15 | (q[64*c+32+l]&15)<<4)
		}
	}
}

func encQ4_K(dst []byte, x []float32) { packK4(dst[16:], encK(dst, x, 4)) }

func encQ5_K(dst []byte, x []float32) {
	q := encK(dst, x, 5)
	qh := dst[16:48]
	clear(qh)
	for c := range 4 {
		for l := range 32 {
			qh[l] |= byte(q[64*c+l]>>4&1)<<(2*c) | byte(q[64*c+32+l]>>4&1)<<(2*c+1)
		}
	}
	packK4(dst[48:], q)
}

func decK(y []float32, b []byte, qs, qh []byte) {
	d, dmin := f16At(b), f16At(b[2:])
	for c := range 4 {
		for h := range 2 {
			sc, m := kScaleMin(b[4:16], 2*c+h)
			d1, m1 := d*float32(sc), dmin*float32(m)
			for l := range 32 {
				q := int(qs[32*c+l] & 15)
				if h == 1 {
					q = int(qs[32*c+l] >> 4)
				}
				if qh != nil {
					q |= int(qh[l]>>(2*c+h)&1) << 4
				}
				y[64*c+32*h+l] = float32(d1*float32(q)) - m1
			}
		}
	}
}

func decQ4_K(y []float32, b []byte) { decK(y, b, b[16:144], nil) }
func decQ5_K(y []float32, b []byte) { decK(y, b, b[48:176], b[16:48]) }

func encQ6_K(dst []byte, x []float32) {
	var scale [16]float32
	var maxAbs float32
	for s := range 16 {
		scale[s] = absMax(x[16*s:16*s+16]) / -32
		maxAbs = max(maxAbs, abs32(scale[s]))
	}
	dh := f16Up(maxAbs / 127)
	d := F16ToF32(dh)
	var L [256]int
	for s := range 16 {
		ls := 0
		if d > 0 {
			ls = min(127, int(math.Ceil(float64(abs32(scale[s])/d))))
			if scale[s] < 0 {
				ls = -ls
			}
		}
		dst[192+s] = byte(int8(ls))
		id := inv(d * float32(ls))
		for l := range 16 {
			L[16*s+l] = roundClamp(x[16*s+l]*id, -32, 31) + 32
		}
	}
	ql, qh := dst[0:128], dst[128:192]
	for c := range 2 {
		for l := range 32 {
			q1, q2, q3, q4 := L[128*c+l], L[128*c+l+32], L[128*c+l+64], L[128*c+l+96]
			ql[64*c+l] = byte(q1&15 | (q3&15)<<4)
			ql[64*c+l+32] = byte(q2&15 | (q4&15)<<4)
			qh[32*c+l] = byte(q1>>4 | (q2>>4)<<2 | (q3>>4)<<4 | (q4>>4)<<6)
		}
	}
	le.PutUint16(dst[208:], dh)
}

func decQ6_K(y []float32, b []byte) {
	ql, qh, sc := b[0:128], b[128:192], b[192:208]
	d := f16At(b[208:])
	for c := range 2 {
		for l := range 32 {
			q := [4]int{
				int(ql[64*c+l]&15) | int(qh[32*c+l]&3)<<4,
				int(ql[64*c+l+32]&15) | int(qh[32*c+l]>>2&3)<<4,
				int(ql[64*c+l]>>4) | int(qh[32*c+l]>>4&3)<<4,
				int(ql[64*c+l+32]>>4) | int(qh[32*c+l]>>6&3)<<4,
			}
			for i, v := range q {
				e := 128*c + 32*i + l
				y[e] = d * float32(int8(sc[e/16])) * float32(v-32)
			}
		}
	}
}
