package gguf

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math"
	"os"
	"path/filepath"
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

func TestValueRoundTrip(t *testing.T) {
	f := func(v any) {
		t.Helper()
		g, err := Parse(oneKV(t, v))
		if err != nil {
			t.Fatalf("%#v: %v", v, err)
		}
		if len(g.KV) != 1 || g.KV[0].Key != "k" || !reflect.DeepEqual(g.KV[0].Value, v) {
			t.Errorf("wrote %#v, read %#v", v, g.KV)
		}
	}
	f(uint8(0))
	f(uint8(255))
	f(int8(-128))
	f(uint16(65535))
	f(int16(-32768))
	f(uint32(math.MaxUint32))
	f(int32(math.MinInt32))
	f(float32(-1.5))
	f(float32(math.Inf(1)))
	f(true)
	f(false)
	f("")
	f("h\xc3\xa9llo \x00 world")
	f(uint64(math.MaxUint64))
	f(int64(math.MinInt64))
	f(math.SmallestNonzeroFloat64)
	f([]uint8{})
	f([]uint8{0, 1, 255})
	f([]int8{-1, 1})
	f([]uint16{1, 2})
	f([]int16{-1})
	f([]uint32{1 << 31})
	f([]int32{-1, 0, 1})
	f([]float32{0.25, -0})
	f([]bool{true, false})
	f([]string{"", "a", strings.Repeat("z", 1000)})
	f([]uint64{1 << 63})
	f([]int64{-1 << 63})
	f([]float64{math.Pi})
	f([]any{})
	f([]any{[]string{"x"}, []int32{}, []any{[]bool{true}}})
	deep := any([]uint8{7})
	for i := 1; i < MaxArrayDepth; i++ {
		deep = []any{deep}
	}
	f(deep)
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

func TestAlignment(t *testing.T) {
	for _, align := range []uint32{0, 1, 2, 8, 32, 64, 4096} {
		f := &File{KV: []KV{{Key: "x", Value: "odd length"}}, Tensors: tensors()}
		want := uint64(DefaultAlignment)
		if align != 0 {
			f.KV = append(f.KV, KV{Key: KeyAlignment, Value: align})
			want = uint64(align)
		}
		b, err := f.Encode()
		if err != nil {
			t.Fatal(err)
		}
		g, err := Parse(b)
		if err != nil {
			t.Fatalf("alignment %d: %v", align, err)
		}
		if uint64(g.DataOffset)%want != 0 || g.DataOffset < g.InfoOffset {
			t.Errorf("alignment %d: data at %d", align, g.DataOffset)
		}
		if uint64(len(b))%want != 0 {
			t.Errorf("alignment %d: file of %d bytes is not padded", align, len(b))
		}
		off := uint64(0)
		for i, tn := range g.Tensors {
			if tn.Offset%want != 0 || tn.Offset != off {
				t.Errorf("alignment %d: tensor %s at %d, want %d", align, tn.Name, tn.Offset, off)
			}
			off = alignUp(off+uint64(len(tn.Data)), want)
			if w := f.Tensors[i]; tn.Name != w.Name || !reflect.DeepEqual(tn.Dims, w.Dims) || tn.Type != w.Type ||
				!bytes.Equal(tn.Data, w.Data) {
				t.Errorf("alignment %d: tensor %d read back as %+v", align, i, tn)
			}
		}
		// the padding between tensors is zeros
		for i := int(g.DataOffset); i < len(b); {
			in := false
			for _, tn := range g.Tensors {
				s := int(g.DataOffset) + int(tn.Offset)
				if i >= s && i < s+len(tn.Data) {
					i, in = s+len(tn.Data), true
				}
			}
			if !in {
				if b[i] != 0 {
					t.Fatalf("alignment %d: padding byte %d is %d", align, i, b[i])
				}
				i++
			}
		}
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

// TestParseErrors covers what the C loader's tests (native/model_test.go,
// which compare both parsers message for message) do not.
func TestParseErrors(t *testing.T) {
	le := binary.LittleEndian
	f := func(name string, b []byte, want string) {
		t.Helper()
		if _, err := Parse(b); err == nil || err.Error() != want {
			t.Errorf("%s: got %v, want %q", name, err, want)
		}
	}
	bools := oneKV(t, []bool{true, false})
	bools[24+9+4+4+8+1] = 2 // header, key, type, element type, count, first bool
	f("bool array", bools, "gguf: metadata k: bool value 2 (want 0 or 1)")
	bad := oneKV(t, true)
	bad[24+9+4] = 3
	f("bool", bad, "gguf: metadata k: bool value 3 (want 0 or 1)")
	two := (&File{KV: []KV{{"ab", uint8(1)}, {"cd", uint8(2)}}})
	b, err := two.Encode()
	if err != nil {
		t.Fatal(err)
	}
	copy(b[bytes.Index(b, []byte("cd")):], "ab")
	f("duplicate key", b, "gguf: duplicate metadata ab")
	weird := oneKV(t, "v")
	weird = append(weird[:24], binary.LittleEndian.AppendUint64(nil, 70)...)
	weird = append(weird, "\x01name\xff"+strings.Repeat("n", 64)...)
	f("printable key", weird, "gguf: truncated: metadata ?name?"+strings.Repeat("n", 58)+"... needs 4 bytes at offset 102, file has 102 bytes")
	noData := append(le.AppendUint32(le.AppendUint32(nil, Magic), 3), make([]byte, 16)...)
	le.PutUint64(noData[8:], 1)
	noData = append(noData, le.AppendUint64(nil, 1)...)
	noData = append(noData, 't')
	noData = le.AppendUint32(noData, 1)
	noData = le.AppendUint64(noData, 4)
	noData = le.AppendUint32(noData, uint32(F32))
	noData = le.AppendUint64(noData, 0)
	f("tensor without data", noData, "gguf: truncated: tensor data of t ends at 80, file has 57 bytes")
}

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.gguf")
	want := &File{KV: []KV{{"general.name", "m"}, {"n", []float32{1}}}, Tensors: tensors()}
	if err := WriteFile(path, want); err != nil {
		t.Fatal(err)
	}
	g, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g.KV, want.KV) || len(g.Tensors) != len(want.Tensors) {
		t.Errorf("read back %+v", g)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("WriteFile left %d files, want 1", len(entries))
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, %v", fi.Mode(), err)
	}
	if _, err := ReadFile(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	if err := WriteFile(filepath.Join(dir, "no", "such", "dir"), want); err == nil {
		t.Errorf("WriteFile into a missing directory: no error")
	}
	// a File that cannot be encoded leaves nothing behind
	if err := WriteFile(filepath.Join(dir, "bad.gguf"), &File{KV: []KV{{"a", 1}}}); err == nil {
		t.Errorf("WriteFile of a bad File: no error")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("a failed WriteFile left %d files, want 1", len(entries))
	}
	if err := os.WriteFile(path, []byte("GGUF"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(path); err == nil || err.Error() != path+": gguf: truncated: header needs 4 bytes at offset 4, file has 4 bytes" {
		t.Errorf("truncated file: %v", err)
	}
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

func TestPrintable(t *testing.T) {
	f := func(in, want string) {
		t.Helper()
		if got := printable(in); got != want {
			t.Errorf("printable(%q) = %q, want %q", in, got, want)
		}
	}
	f("", "")
	f("blk.0.attn_q.weight", "blk.0.attn_q.weight")
	f("a\nb\x00c\xff", "a?b?c?")
	f(strings.Repeat("x", 64), strings.Repeat("x", 64))
	f(strings.Repeat("x", 65), strings.Repeat("x", 64)+"...")
}

// FuzzRead feeds arbitrary bytes to Parse: never a panic, and whatever it
// accepts re-encodes to a file that parses to the same encoding again.
func FuzzRead(f *testing.F) {
	full := &File{KV: []KV{{"general.name", "fuzz"}, {"all", []any{[]int8{1}, []string{"s"}}}, {"b", true},
		{"f", 1.5}, {KeyAlignment, uint32(16)}}, Tensors: tensors()}
	b, err := full.Encode()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	for _, n := range []int{0, 4, 8, 24, 40, 100, len(b) - 1} {
		f.Add(b[:n])
	}
	f.Add(oneKV(f, []bool{true}))
	f.Fuzz(func(t *testing.T, b []byte) {
		g, err := Parse(b)
		if err != nil {
			return
		}
		once, err := g.Encode()
		if err != nil {
			t.Fatalf("a parsed file does not encode: %v", err)
		}
		g2, err := Parse(once)
		if err != nil {
			t.Fatalf("a re-encoded file does not parse: %v", err)
		}
		twice, err := g2.Encode()
		if err != nil || !bytes.Equal(once, twice) {
			t.Fatalf("encoding is not stable (%v)", err)
		}
	})
}

func BenchmarkParse(b *testing.B) {
	f := &File{KV: []KV{{"tokens", make([]string, 264)}}, Tensors: tensors()}
	data, err := f.Encode()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := Parse(data); err != nil {
			b.Fatal(err)
		}
	}
}
