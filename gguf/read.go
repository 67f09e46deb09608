package gguf

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"strings"
)

// Minimum encoded sizes, used to reject counts no file of this length could
// hold before anything is allocated for them.
const (
	headerSize    = 4 + 4 + 8 + 8
	minKVSize     = 8 + 4 + 1         // empty key, type, one-byte value
	minTensorInfo = 8 + 4 + 8 + 4 + 8 // empty name, n_dims, one dim, type, offset
)

// ReadFile reads and parses the GGUF file at path.
func ReadFile(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	f, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

// Parse decodes a GGUF v3 file held in b. Tensor data is not copied: each
// Tensor.Data is a sub-slice of b. Every count, length and offset is checked
// against len(b) before use, so arbitrary bytes give an error, never a
// panic or an allocation larger than about twice len(b).
//
// Parse checks what the format defines (magic, version, value types,
// unique keys and tensor names, alignment, 1..4 dimensions, known tensor
// types, offsets aligned and inside the file); whether the tensors make a
// model is the caller's business.
func Parse(b []byte) (*File, error) {
	d := &decoder{b: b}
	f, err := d.file()
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	return f, nil
}

type decoder struct {
	b   []byte
	pos int
}

// take returns the next n bytes, or an error naming what was being read.
func (d *decoder) take(n uint64, what string) ([]byte, error) {
	if n > uint64(len(d.b)-d.pos) {
		return nil, fmt.Errorf("truncated: %s needs %d bytes at offset %d, file has %d bytes",
			what, n, d.pos, len(d.b))
	}
	p := d.b[d.pos : d.pos+int(n)]
	d.pos += int(n)
	return p, nil
}

func (d *decoder) u32(what string) (uint32, error) {
	p, err := d.take(4, what)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(p), nil
}

func (d *decoder) u64(what string) (uint64, error) {
	p, err := d.take(8, what)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(p), nil
}

func (d *decoder) str(what string) (string, error) {
	n, err := d.u64(what)
	if err != nil {
		return "", err
	}
	p, err := d.take(n, what)
	if err != nil {
		return "", err
	}
	return string(p), nil
}

func (d *decoder) file() (*File, error) {
	magic, err := d.u32("header")
	if err != nil {
		return nil, err
	}
	if magic != Magic {
		return nil, fmt.Errorf("bad magic 0x%08x, not a GGUF file", magic)
	}
	version, err := d.u32("header")
	if err != nil {
		return nil, err
	}
	if version != Version {
		return nil, fmt.Errorf("unsupported GGUF version %d", version)
	}
	nTensors, err := d.u64("header")
	if err != nil {
		return nil, err
	}
	nKV, err := d.u64("header")
	if err != nil {
		return nil, err
	}
	rest := uint64(len(d.b) - d.pos)
	if nTensors > rest/minTensorInfo {
		return nil, fmt.Errorf("tensor count %d is more than a %d-byte file can hold", nTensors, len(d.b))
	}
	if nKV > rest/minKVSize {
		return nil, fmt.Errorf("metadata count %d is more than a %d-byte file can hold", nKV, len(d.b))
	}

	f := &File{KV: make([]KV, 0, nKV)}
	seen := make(map[string]bool, nKV)
	for i := uint64(0); i < nKV; i++ {
		key, err := d.str(fmt.Sprintf("metadata key #%d", i))
		if err != nil {
			return nil, err
		}
		what := "metadata " + printable(key)
		if seen[key] {
			return nil, fmt.Errorf("duplicate %s", what)
		}
		seen[key] = true
		t, err := d.u32(what)
		if err != nil {
			return nil, err
		}
		v, err := d.value(ValueType(t), 0, what)
		if err != nil {
			return nil, err
		}
		f.KV = append(f.KV, KV{Key: key, Value: v})
	}
	align, err := f.Alignment()
	if err != nil {
		return nil, err
	}

	f.InfoOffset = int64(d.pos)
	f.Tensors = make([]Tensor, 0, nTensors)
	names := make(map[string]bool, nTensors)
	for i := uint64(0); i < nTensors; i++ {
		t, err := d.tensorInfo(i, uint64(align))
		if err != nil {
			return nil, err
		}
		if names[t.Name] {
			return nil, fmt.Errorf("duplicate tensor %s", printable(t.Name))
		}
		names[t.Name] = true
		f.Tensors = append(f.Tensors, t)
	}

	data := alignUp(uint64(d.pos), uint64(align))
	f.DataOffset = int64(data)
	size := uint64(len(d.b))
	for i := range f.Tensors {
		t := &f.Tensors[i]
		n, _ := t.Type.DataSize(t.Dims) // checked by tensorInfo
		if t.Offset > size {
			return nil, fmt.Errorf("tensor %s: offset %d is beyond the end of the file (%d bytes)",
				printable(t.Name), t.Offset, size)
		}
		// No overflow: data and Offset are at most size+align, n < 2^63.
		start := data + t.Offset
		end := start + n
		if end > size || end < start {
			return nil, fmt.Errorf("truncated: tensor data of %s ends at %d, file has %d bytes",
				printable(t.Name), end, size)
		}
		t.Data = d.b[start:end:end]
	}
	return f, nil
}

func (d *decoder) tensorInfo(i, align uint64) (Tensor, error) {
	name, err := d.str(fmt.Sprintf("tensor info #%d", i))
	if err != nil {
		return Tensor{}, err
	}
	what := "tensor " + printable(name)
	nDims, err := d.u32(what)
	if err != nil {
		return Tensor{}, err
	}
	if nDims < 1 || nDims > MaxDims {
		return Tensor{}, fmt.Errorf("%s: %d dimensions (want 1..%d)", what, nDims, MaxDims)
	}
	t := Tensor{Name: name, Dims: make([]uint64, nDims)}
	for j := range t.Dims {
		if t.Dims[j], err = d.u64(what); err != nil {
			return Tensor{}, err
		}
	}
	typ, err := d.u32(what)
	if err != nil {
		return Tensor{}, err
	}
	t.Type = TensorType(typ)
	if t.Offset, err = d.u64(what); err != nil {
		return Tensor{}, err
	}
	if _, err := t.Type.DataSize(t.Dims); err != nil {
		return Tensor{}, fmt.Errorf("%s: %w", what, err)
	}
	if t.Offset%align != 0 {
		return Tensor{}, fmt.Errorf("%s: offset %d is not a multiple of the alignment %d", what, t.Offset, align)
	}
	return t, nil
}

// value decodes one value of type t; depth counts enclosing arrays.
func (d *decoder) value(t ValueType, depth int, what string) (any, error) {
	switch t {
	case TypeString:
		return d.str(what)
	case TypeArray:
		return d.array(depth+1, what)
	}
	n := t.size()
	if n <= 0 {
		return nil, fmt.Errorf("%s: unknown value type %d", what, uint32(t))
	}
	p, err := d.take(uint64(n), what)
	if err != nil {
		return nil, err
	}
	v, err := scalar(t, p)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return v, nil
}

// The little-endian decoders of the scalar types, shared by scalars and
// arrays; p holds at least the value's size.
func readUint8(p []byte) uint8     { return p[0] }
func readInt8(p []byte) int8       { return int8(p[0]) }
func readInt16(p []byte) int16     { return int16(binary.LittleEndian.Uint16(p)) }
func readInt32(p []byte) int32     { return int32(binary.LittleEndian.Uint32(p)) }
func readInt64(p []byte) int64     { return int64(binary.LittleEndian.Uint64(p)) }
func readFloat32(p []byte) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(p)) }
func readFloat64(p []byte) float64 { return math.Float64frombits(binary.LittleEndian.Uint64(p)) }
func readBool(p []byte) bool       { return p[0] == 1 }

func scalar(t ValueType, p []byte) (any, error) {
	le := binary.LittleEndian
	switch t {
	case TypeUint8:
		return readUint8(p), nil
	case TypeInt8:
		return readInt8(p), nil
	case TypeUint16:
		return le.Uint16(p), nil
	case TypeInt16:
		return readInt16(p), nil
	case TypeUint32:
		return le.Uint32(p), nil
	case TypeInt32:
		return readInt32(p), nil
	case TypeFloat32:
		return readFloat32(p), nil
	case TypeBool:
		if p[0] > 1 {
			return nil, fmt.Errorf("bool value %d (want 0 or 1)", p[0])
		}
		return readBool(p), nil
	case TypeUint64:
		return le.Uint64(p), nil
	case TypeInt64:
		return readInt64(p), nil
	case TypeFloat64:
		return readFloat64(p), nil
	}
	panic("BUG: gguf: scalar of type " + t.String())
}

func (d *decoder) array(depth int, what string) (any, error) {
	if depth > MaxArrayDepth {
		return nil, fmt.Errorf("%s: arrays nested deeper than %d", what, MaxArrayDepth)
	}
	et, err := d.u32(what)
	if err != nil {
		return nil, err
	}
	elem := ValueType(et)
	n, err := d.u64(what)
	if err != nil {
		return nil, err
	}
	m := elem.minSize()
	if m < 0 {
		return nil, fmt.Errorf("%s: unknown array element type %d", what, et)
	}
	if n > uint64(len(d.b)-d.pos)/uint64(m) {
		return nil, fmt.Errorf("truncated: %s: array of %d %s at offset %d does not fit in a %d-byte file",
			what, n, elem, d.pos, len(d.b))
	}
	switch elem {
	case TypeString:
		a := make([]string, n)
		for i := range a {
			if a[i], err = d.str(what); err != nil {
				return nil, err
			}
		}
		return a, nil
	case TypeArray:
		a := make([]any, n)
		for i := range a {
			if a[i], err = d.array(depth+1, what); err != nil {
				return nil, err
			}
		}
		return a, nil
	}
	p, err := d.take(n*uint64(m), what) // no overflow: checked against the file size
	if err != nil {
		return nil, err
	}
	return scalarArray(elem, p, int(n), what)
}

// decodeArray decodes n elements of size bytes each from p with get.
func decodeArray[T any](p []byte, n, size int, get func([]byte) T) []T {
	a := make([]T, n)
	for i := range a {
		a[i] = get(p[size*i:])
	}
	return a
}

func scalarArray(t ValueType, p []byte, n int, what string) (any, error) {
	le := binary.LittleEndian
	switch t {
	case TypeUint8:
		return append([]uint8{}, p...), nil
	case TypeInt8:
		return decodeArray(p, n, 1, readInt8), nil
	case TypeBool:
		for _, c := range p[:n] {
			if c > 1 {
				return nil, fmt.Errorf("%s: bool value %d (want 0 or 1)", what, c)
			}
		}
		return decodeArray(p, n, 1, readBool), nil
	case TypeUint16:
		return decodeArray(p, n, 2, le.Uint16), nil
	case TypeInt16:
		return decodeArray(p, n, 2, readInt16), nil
	case TypeUint32:
		return decodeArray(p, n, 4, le.Uint32), nil
	case TypeInt32:
		return decodeArray(p, n, 4, readInt32), nil
	case TypeFloat32:
		return decodeArray(p, n, 4, readFloat32), nil
	case TypeUint64:
		return decodeArray(p, n, 8, le.Uint64), nil
	case TypeInt64:
		return decodeArray(p, n, 8, readInt64), nil
	case TypeFloat64:
		return decodeArray(p, n, 8, readFloat64), nil
	}
	panic("BUG: gguf: scalar array of type " + t.String())
}

// DecodeValue decodes one encoded value of type t from the start of b (for
// an array: element type, length, elements) and returns it with the number
// of bytes it occupied. It is how a test reads the raw value bytes another
// parser (the C loader) delimited.
func DecodeValue(t ValueType, b []byte) (v any, n int, err error) {
	d := &decoder{b: b}
	v, err = d.value(t, 0, "value")
	if err != nil {
		return nil, 0, fmt.Errorf("gguf: %w", err)
	}
	return v, d.pos, nil
}

// ErrNotFloat is returned by Tensor.Float32s for a tensor whose type has
// no codec (see Computable).
var ErrNotFloat = ErrNoCodec

// Float32s returns the tensor's elements as float32: float types are
// widened, quantized types dequantized (Dequantize).
func (t *Tensor) Float32s() ([]float32, error) {
	n, err := t.Type.DataSize(t.Dims)
	if err != nil {
		return nil, fmt.Errorf("gguf: tensor %s: %w", t.Name, err)
	}
	if uint64(len(t.Data)) != n {
		return nil, fmt.Errorf("gguf: tensor %s: %d data bytes, want %d", t.Name, len(t.Data), n)
	}
	if !t.Type.Computable() {
		return nil, fmt.Errorf("%w: %s is %s", ErrNotFloat, t.Name, t.Type)
	}
	return Dequantize(t.Type, t.Data, int(t.Elements()))
}

// printable shortens s to 64 bytes and replaces bytes outside printable
// ASCII with '?', so names from untrusted files are safe in messages. The
// C loader does the same.
func printable(s string) string {
	const max = 64
	long := len(s) > max
	if long {
		s = s[:max]
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c > 0x7e {
			c = '?'
		}
		b.WriteByte(c)
	}
	if long {
		b.WriteString("...")
	}
	return b.String()
}
