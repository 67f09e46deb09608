package gguf

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
)

// oneKV encodes a file with the single metadata entry k = v.
func oneKV(t testing.TB, v any) []byte {
	t.Helper()
	b, err := (&File{KV: []KV{{Key: "k", Value: v}}}).Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestValueEncoding checks the bytes of each value against the GGUF
// specification, independently of the reader.
func TestValueEncoding(t *testing.T) {
	f := func(v any, want string) {
		t.Helper()
		b := oneKV(t, v)
		// header (24) + key "k" (8 + 1), then type and value, then zeros
		// padding the file to the alignment (32)
		w, err := hex.DecodeString(strings.ReplaceAll(want, " ", ""))
		if err != nil {
			t.Fatal(err)
		}
		n := 24 + 9 + len(w)
		if got := b[24+9 : n]; !bytes.Equal(got, w) {
			t.Errorf("%#v: got %x, want %x", v, got, w)
		}
		if len(b) != int(alignUp(uint64(n), 32)) || !bytes.Equal(b[n:], make([]byte, len(b)-n)) {
			t.Errorf("%#v: %d bytes, want %d padded with zeros to %d", v, len(b), n, alignUp(uint64(n), 32))
		}
	}
	f(uint8(7), "00000000 07")
	f(int8(-2), "01000000 fe")
	f(uint16(0x1234), "02000000 3412")
	f(int16(-1), "03000000 ffff")
	f(uint32(0x12345678), "04000000 78563412")
	f(int32(-2), "05000000 feffffff")
	f(float32(1), "06000000 0000803f")
	f(true, "07000000 01")
	f("ab", "08000000 0200000000000000 6162")
	f([]int16{-1, 2}, "09000000 03000000 0200000000000000 ffff 0200")
	f(uint64(1), "0a000000 0100000000000000")
	f(int64(-1), "0b000000 ffffffffffffffff")
	f(float64(1), "0c000000 000000000000f03f")
	f([]string{"x"}, "09000000 08000000 0100000000000000 0100000000000000 78")
	f([]any{[]uint8{5}}, "09000000 09000000 0100000000000000 00000000 0100000000000000 05")
	f([]bool{}, "09000000 07000000 0000000000000000")
}

func TestFileLayout(t *testing.T) {
	b, err := (&File{}).Encode()
	if err != nil {
		t.Fatal(err)
	}
	// magic "GGUF", version 3, no tensors, no metadata (padded to 32)
	want := "47475546 03000000 0000000000000000 0000000000000000 0000000000000000"
	if got := hex.EncodeToString(b); got != strings.ReplaceAll(want, " ", "") {
		t.Errorf("empty file: %s, want %s", got, want)
	}
	if len(b) != 32 {
		t.Errorf("empty file has %d bytes, want 32 (header padded to the alignment)", len(b))
	}
}

func tensors() []Tensor {
	return []Tensor{
		{Name: "a", Dims: []uint64{3}, Type: F32, Data: Float32Bytes([]float32{1, 2, 3})},
		{Name: "b", Dims: []uint64{2, 2}, Type: F16, Data: Float16Bytes([]float32{1, -2, 0.5, 65504})},
		{Name: "c", Dims: []uint64{32, 1, 1, 2}, Type: Q8_0, Data: bytes.Repeat([]byte{9}, 68)},
		{Name: "d", Dims: []uint64{5}, Type: I8, Data: []byte{1, 2, 3, 4, 5}},
	}
}

func TestWriteErrors(t *testing.T) {
	f := func(name string, file *File, want string) {
		t.Helper()
		_, err := file.Encode()
		if err == nil || err.Error() != want {
			t.Errorf("%s: got %v, want %q", name, err, want)
		}
	}
	tooDeep := any([]uint8{7})
	for i := 0; i < MaxArrayDepth; i++ {
		tooDeep = []any{tooDeep}
	}
	f("duplicate key", &File{KV: []KV{{"a", 1.0}, {"a", 2.0}}}, `gguf: duplicate metadata key "a"`)
	f("Go int", &File{KV: []KV{{"a", 1}}}, "gguf: metadata a: gguf: no GGUF type for Go type int")
	f("Go []int", &File{KV: []KV{{"a", []int{1}}}}, "gguf: metadata a: gguf: no GGUF type for Go type []int")
	f("array of non-arrays", &File{KV: []KV{{"a", []any{"x"}}}},
		"gguf: metadata a: element 0 of an array of arrays is string, not an array")
	f("too deep", &File{KV: []KV{{"a", tooDeep}}}, "gguf: metadata a: arrays nested deeper than 8")
	f("alignment 3", &File{KV: []KV{{KeyAlignment, uint32(3)}}}, "gguf: general.alignment: 3 is not a power of two")
	f("alignment type", &File{KV: []KV{{KeyAlignment, uint64(32)}}}, "gguf: general.alignment: type uint64, want uint32")
	f("duplicate tensor", &File{Tensors: []Tensor{tensors()[0], tensors()[0]}}, `gguf: duplicate tensor "a"`)
	f("no dims", &File{Tensors: []Tensor{{Name: "t", Type: F32}}}, "gguf: tensor t: 0 dimensions (want 1..4)")
	f("5 dims", &File{Tensors: []Tensor{{Name: "t", Dims: []uint64{1, 1, 1, 1, 1}, Type: F32, Data: make([]byte, 4)}}},
		"gguf: tensor t: 5 dimensions (want 1..4)")
	f("short data", &File{Tensors: []Tensor{{Name: "t", Dims: []uint64{2, 3}, Type: F32, Data: make([]byte, 20)}}},
		"gguf: tensor t: 20 data bytes, shape [2 3] of f32 needs 24")
	f("unknown type", &File{Tensors: []Tensor{{Name: "t", Dims: []uint64{1}, Type: 99, Data: make([]byte, 4)}}},
		"gguf: tensor t: unknown type 99")
	f("partial block", &File{Tensors: []Tensor{{Name: "t", Dims: []uint64{16}, Type: Q4_0, Data: make([]byte, 9)}}},
		"gguf: tensor t: dims[0] 16 is not a multiple of the q4_0 block size 32")
}

func TestFloat32s(t *testing.T) {
	ts := tensors()
	a, err := ts[0].Float32s()
	if err != nil || !reflect.DeepEqual(a, []float32{1, 2, 3}) {
		t.Errorf("f32: %v %v", a, err)
	}
	b, err := ts[1].Float32s()
	if err != nil || !reflect.DeepEqual(b, []float32{1, -2, 0.5, 65504}) {
		t.Errorf("f16: %v %v", b, err)
	}
	// Q8_0 bytes all 9: d = F16 0x0909, q = 9.
	if c, err := ts[2].Float32s(); err != nil || len(c) != 64 || c[0] != 9*F16ToF32(0x0909) || c[63] != c[0] {
		t.Errorf("q8_0: %v %v", c, err)
	}
	if _, err := ts[3].Float32s(); !errors.Is(err, ErrNotFloat) {
		t.Errorf("i8: %v", err)
	}
	short := ts[0]
	short.Data = short.Data[:8]
	if _, err := short.Float32s(); err == nil || err.Error() != "gguf: tensor a: 8 data bytes, want 12" {
		t.Errorf("short: %v", err)
	}
	if n := (&Tensor{Dims: []uint64{2, 3, 4}}).Elements(); n != 24 {
		t.Errorf("Elements = %d", n)
	}
}

func TestF16(t *testing.T) {
	f := func(x float32, want uint16) {
		t.Helper()
		if got := F32ToF16(x); got != want {
			t.Errorf("F32ToF16(%g) = %#04x, want %#04x", x, got, want)
		}
	}
	f(0, 0x0000)
	f(float32(math.Copysign(0, -1)), 0x8000)
	f(1, 0x3c00)
	f(-2, 0xc000)
	f(0.5, 0x3800)
	f(65504, 0x7bff)                              // largest half
	f(65519, 0x7bff)                              // rounds down
	f(65520, 0x7c00)                              // rounds to inf
	f(1e10, 0x7c00)                               // overflow
	f(float32(math.Inf(-1)), 0xfc00)              // -inf
	f(float32(math.NaN()), 0x7e00)                // NaN stays NaN
	f(float32(math.Ldexp(1, -14)), 0x0400)        // smallest normal
	f(float32(math.Ldexp(1, -24)), 0x0001)        // smallest subnormal
	f(float32(math.Ldexp(1, -25)), 0x0000)        // tie: to even (0)
	f(float32(math.Ldexp(3, -25)), 0x0002)        // tie: to even (2)
	f(float32(math.Ldexp(1.5, -24)), 0x0002)      // tie 1.5: to even (2)
	f(float32(math.Ldexp(1, -26)), 0x0000)        // underflow
	f(1+float32(math.Ldexp(1, -11)), 0x3c00)      // tie at 1: to even
	f(1+float32(math.Ldexp(3, -11)), 0x3c02)      // tie: to even
	f(1+float32(math.Ldexp(1, -11))*1.01, 0x3c01) // above the tie
	f(float32(math.Ldexp(1023, -24)), 0x03ff)     // largest subnormal
	f(float32(math.Ldexp(2047, -25)), 0x0400)     // rounds up into the normals

	// Every half widens exactly and narrows back to itself.
	for h := 0; h < 1<<16; h++ {
		x := F16ToF32(uint16(h))
		if h&0x7c00 == 0x7c00 && h&0x3ff != 0 {
			if !math.IsNaN(float64(x)) {
				t.Fatalf("F16ToF32(%#04x) = %g, want NaN", h, x)
			}
			continue
		}
		if back := F32ToF16(x); back != uint16(h) {
			t.Fatalf("F32ToF16(F16ToF32(%#04x) = %g) = %#04x", h, x, back)
		}
	}
	g := func(h uint16, want float64) {
		t.Helper()
		if got := F16ToF32(h); float64(got) != want {
			t.Errorf("F16ToF32(%#04x) = %g, want %g", h, got, want)
		}
	}
	g(0x3c00, 1)
	g(0xc000, -2)
	g(0x0001, math.Ldexp(1, -24))
	g(0x8001, -math.Ldexp(1, -24))
	g(0x7bff, 65504)
	g(0x7c00, math.Inf(1))
}

func TestDataSize(t *testing.T) {
	f := func(typ TensorType, dims []uint64, want uint64, wantErr string) {
		t.Helper()
		got, err := typ.DataSize(dims)
		if wantErr != "" {
			if err == nil || err.Error() != wantErr {
				t.Errorf("%s %v: got %v, want error %q", typ, dims, err, wantErr)
			}
			return
		}
		if err != nil || got != want {
			t.Errorf("%s %v: got %d, %v, want %d", typ, dims, got, err, want)
		}
	}
	f(F32, []uint64{512, 264}, 512*264*4, "")
	f(F16, []uint64{3}, 6, "")
	f(Q4_0, []uint64{64, 2}, 4*18, "")
	f(Q8_0, []uint64{32}, 34, "")
	f(Q4_K, []uint64{256, 3}, 3*144, "")
	f(BF16, []uint64{0, 7}, 0, "")
	f(Q8_0, []uint64{33}, 0, "dims[0] 33 is not a multiple of the q8_0 block size 32")
	f(F32, []uint64{1 << 32, 1 << 32}, 0, "element count overflows")
	f(F32, []uint64{1 << 62}, 0, "byte size overflows")
	f(TensorType(4), []uint64{1}, 0, "unknown type 4")
	if s := TensorType(99).String(); s != "type(99)" {
		t.Errorf("String of an unknown type: %s", s)
	}
	if s := ValueType(13).String(); s != "type(13)" {
		t.Errorf("String of an unknown value type: %s", s)
	}
}

// FuzzDecodeValue feeds arbitrary bytes to DecodeValue, as every type:
// never a panic, and a value it accepts encodes back to the bytes it
// consumed. (The file around the values is C's to parse: native's
// FuzzParseGGUF and FuzzLoad.)
func FuzzDecodeValue(f *testing.F) {
	for _, v := range []any{uint8(1), "s", []any{[]int8{1}, []string{"s"}}, true, 1.5, []bool{true}, []uint64{7}} {
		b := oneKV(f, v)
		t, _, _ := TypeOf(v)
		f.Add(uint32(t), b[24+9+4:len(b)])
	}
	f.Fuzz(func(t *testing.T, typ uint32, b []byte) {
		v, n, err := DecodeValue(ValueType(typ), b)
		if err != nil {
			return
		}
		if n < 0 || n > len(b) {
			t.Fatalf("used %d of %d bytes", n, len(b))
		}
		vt, _, err := TypeOf(v)
		if err != nil || vt != ValueType(typ) {
			t.Fatalf("decoded %T as %v (%v), want type %d", v, vt, err, typ)
		}
		var enc []byte
		if enc, err = appendValue(nil, v, 0); err != nil {
			t.Fatalf("a decoded value does not encode: %v", err)
		}
		if !bytes.Equal(enc, b[:n]) {
			t.Fatalf("re-encoded %x, consumed %x", enc, b[:n])
		}
	})
}
