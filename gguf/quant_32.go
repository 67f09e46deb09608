package gguf

// The 32-wide block formats (ggml's "legacy" quants). Every block holds 32
// consecutive elements of a row; d and m are F16; q are unsigned except in
// Q8_0. Bytes, little-endian:
//
//	Q8_0 (34)  d[2] qs[32]            y[j] = d · int8(qs[j])
//	Q4_0 (18)  d[2] qs[16]            y[j]    = d · (lo4(qs[j]) - 8)
//	                                  y[j+16] = d · (hi4(qs[j]) - 8)       j < 16
//	Q4_1 (20)  d[2] m[2] qs[16]       y[j] = d · lo4(qs[j]) + m, y[j+16] = d · hi4(qs[j]) + m
//	Q5_0 (22)  d[2] qh[4] qs[16]      q[j] = lo4(qs[j]) | bit j of qh << 4,
//	                                  q[j+16] = hi4(qs[j]) | bit j+16 of qh << 4 (qh a uint32),
//	                                  y = d · (q - 16)
//	Q5_1 (24)  d[2] m[2] qh[4] qs[16] the 5-bit q of Q5_0, y = d · q + m
//
// Each product and sum is one float32 operation (d · q, then + m): the C
// dequantizers compute the same, so both sides see the same weights.

// scaleOf returns the F16 bits of v/div and its float32 value, rounded
// away from zero so the scaled range still covers v.
func scaleOf(v float32, div float32) (uint16, float32) {
	s := v / div
	h := f16Up(abs32(s))
	if s < 0 {
		h |= 0x8000
	}
	return h, F16ToF32(h)
}

func inv(d float32) float32 {
	if d == 0 {
		return 0
	}
	return 1 / d
}

func encQ8_0(dst []byte, x []float32) {
	var amax float32
	for _, v := range x {
		amax = max(amax, abs32(v))
	}
	h, d := scaleOf(amax, 127)
	le.PutUint16(dst, h)
	id := inv(d)
	for j, v := range x {
		dst[2+j] = byte(int8(roundClamp(v*id, -128, 127)))
	}
}

func decQ8_0(y []float32, b []byte) {
	d := f16At(b)
	for j := range 32 {
		y[j] = d * float32(int8(b[2+j]))
	}
}

// encSym packs a symmetric block (Q4_0: bits 4, Q5_0: bits 5): the element
// of largest magnitude maps to the most negative code.
func encSym(dst []byte, x []float32, bits int) []int {
	half := 1 << (bits - 1)
	h, d := scaleOf(absMax(x), -float32(half))
	le.PutUint16(dst, h)
	id := inv(d)
	q := make([]int, 32)
	for j, v := range x {
		q[j] = roundClamp(v*id, -half, half-1) + half
	}
	return q
}

// encAsym packs a min/scale block (Q4_1, Q5_1): y = d·q + m, m the minimum.
func encAsym(dst []byte, x []float32, bits int) []int {
	top := 1<<bits - 1
	lo, hi := minMax(x)
	mh := F32ToF16(lo)
	m := F16ToF32(mh)
	var dh uint16
	if hi > m {
		dh = f16Up((hi - m) / float32(top))
	}
	d := F16ToF32(dh)
	le.PutUint16(dst, dh)
	le.PutUint16(dst[2:], mh)
	id := inv(d)
	q := make([]int, 32)
	for j, v := range x {
		q[j] = roundClamp((v-m)*id, 0, top)
	}
	return q
}

func pack4(qs []byte, q []int) {
	for j := range 16 {
		qs[j] = byte(q[j]&15 | (q[j+16]&15)<<4)
	}
}

func packHigh(qh []byte, q []int) {
	var h uint32
	for j := range 32 {
		h |= uint32(q[j]>>4&1) << j
	}
	le.PutUint32(qh, h)
}

func encQ4_0(dst []byte, x []float32) { pack4(dst[2:], encSym(dst, x, 4)) }
func encQ4_1(dst []byte, x []float32) { pack4(dst[4:], encAsym(dst, x, 4)) }

func encQ5_0(dst []byte, x []float32) {
	q := encSym(dst, x, 5)
	packHigh(dst[2:], q)
	pack4(dst[6:], q)
}

func encQ5_1(dst []byte, x []float32) {
	q := encAsym(dst, x, 5)
	packHigh(dst[4:], q)
	pack4(dst[8:], q)
}

// unpack returns block element j's low 4 bits from qs.
func nib(qs []byte, j int) int {
	if j < 16 {
		return int(qs[j] & 15)
	}
	return int(qs[j-16] >> 4)
}

func decQ4_0(y []float32, b []byte) {
	d := f16At(b)
	for j := range 32 {
		y[j] = d * float32(nib(b[2:], j)-8)
	}
}

func decQ4_1(y []float32, b []byte) {
	d, m := f16At(b), f16At(b[2:])
	for j := range 32 {
		y[j] = float32(d*float32(nib(b[4:], j))) + m
	}
}

func decQ5_0(y []float32, b []byte) {
	d, qh := f16At(b), le.Uint32(b[2:])
	for j := range 32 {
		q := nib(b[6:], j) | int(qh>>j&1)<<4
		y[j] = d * float32(q-16)
	}
}

func decQ5_1(y []float32, b []byte) {
	d, m, qh := f16At(b), f16At(b[2:]), le.Uint32(b[4:])
	for j := range 32 {
		q := nib(b[8:], j) | int(qh>>j&1)<<4
		y[j] = float32(d*float32(q)) + m
	}
}
