package gguf

// This file decodes metadata values. The file itself is parsed by the one
// GGUF parser, C's (native/gguf.c; native.ParseGGUF and native.ReadGGUF
// return a *File): it delimits each value and checks its type, lengths,
// bools and nesting, and DecodeValue turns those bytes into this package's
// Go types. DecodeValue still takes any bytes safely (FuzzDecodeValue).

import (
	"encoding/binary"
	"fmt"
	"math"
)

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
// of bytes it occupied, in the types the package doc lists. It is how Go
// reads the value bytes the C parser delimited.
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
