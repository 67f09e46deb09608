//go:build cgo

package gguf_test

// The writer's round trips, read back by the project's one GGUF parser:
// C's, through native (a test may; gguf itself imports nothing of ours).

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	. "github.com/picometer/picometer/gguf"
	"github.com/picometer/picometer/native"
)

// Parse and ReadFile are the C parser's, so the tests below read as before.
var (
	Parse    = native.ParseGGUF
	ReadFile = native.ReadGGUF
)

func oneKV(t testing.TB, v any) []byte {
	t.Helper()
	b, err := (&File{KV: []KV{{Key: "k", Value: v}}}).Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func tensors() []Tensor {
	return []Tensor{
		{Name: "a", Dims: []uint64{3}, Type: F32, Data: Float32Bytes([]float32{1, 2, 3})},
		{Name: "b", Dims: []uint64{2, 2}, Type: F16, Data: Float16Bytes([]float32{1, -2, 0.5, 65504})},
		{Name: "c", Dims: []uint64{32, 1, 1, 2}, Type: Q8_0, Data: bytes.Repeat([]byte{9}, 68)},
		{Name: "d", Dims: []uint64{5}, Type: I8, Data: []byte{1, 2, 3, 4, 5}},
	}
}

func alignUp(n, a uint64) uint64 { return (n + a - 1) / a * a }

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

// TestParseErrors covers format errors native/model_test.go's loader
// cases do not.
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
	f("bool array", bools, "native: metadata k: bool value 2 (want 0 or 1)")
	bad := oneKV(t, true)
	bad[24+9+4] = 3
	f("bool", bad, "native: metadata k: bool value 3 (want 0 or 1)")
	two := (&File{KV: []KV{{"ab", uint8(1)}, {"cd", uint8(2)}}})
	b, err := two.Encode()
	if err != nil {
		t.Fatal(err)
	}
	copy(b[bytes.Index(b, []byte("cd")):], "ab")
	f("duplicate key", b, "native: duplicate metadata ab")
	weird := oneKV(t, "v")
	weird = append(weird[:24], binary.LittleEndian.AppendUint64(nil, 70)...)
	weird = append(weird, "\x01name\xff"+strings.Repeat("n", 64)...)
	f("printable key", weird, "native: truncated: metadata ?name?"+strings.Repeat("n", 58)+"... needs 4 bytes at offset 102, file has 102 bytes")
	noData := append(le.AppendUint32(le.AppendUint32(nil, Magic), 3), make([]byte, 16)...)
	le.PutUint64(noData[8:], 1)
	noData = append(noData, le.AppendUint64(nil, 1)...)
	noData = append(noData, 't')
	noData = le.AppendUint32(noData, 1)
	noData = le.AppendUint64(noData, 4)
	noData = le.AppendUint32(noData, uint32(F32))
	noData = le.AppendUint64(noData, 0)
	f("tensor without data", noData, "native: truncated: tensor data of t ends at 80, file has 57 bytes")
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
	if _, err := ReadFile(filepath.Join(dir, "missing")); !errors.Is(err, &native.Error{Status: native.StatusIO}) {
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
	if _, err := ReadFile(path); err == nil || err.Error() != "native: "+path+": truncated: header needs 4 bytes at offset 4, file has 4 bytes" {
		t.Errorf("truncated file: %v", err)
	}
}

// FuzzParseGGUF feeds arbitrary bytes to the C parser: never a panic, and whatever it
// accepts re-encodes to a file that parses to the same encoding again.
func FuzzParseGGUF(f *testing.F) {
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
