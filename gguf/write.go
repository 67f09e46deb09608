package gguf

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
)

// Encode returns f as GGUF v3 bytes (see WriteTo).
func (f *File) Encode() ([]byte, error) {
	var b bytes.Buffer
	if _, err := f.WriteTo(&b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// WriteTo writes f as a GGUF v3 file: the metadata in order, then the
// tensor infos, then each tensor's data in order at the next multiple of the
// alignment (general.alignment, default 32), zero-padded. Before writing
// anything it checks that keys and tensor names are unique, every value has
// a GGUF type, the alignment is valid, and every tensor has 1..4 dimensions,
// a known type and exactly the data its shape needs.
func (f *File) WriteTo(w io.Writer) (int64, error) {
	head, offsets, align, err := f.header()
	if err != nil {
		return 0, err
	}
	cw := &countWriter{w: w}
	bw := bufio.NewWriterSize(cw, 1<<20)
	bw.Write(head)
	var zeros [256]byte
	pad := func(n uint64) {
		for n > 0 {
			k := min(n, uint64(len(zeros)))
			bw.Write(zeros[:k])
			n -= k
		}
	}
	pad(alignUp(uint64(len(head)), align) - uint64(len(head)))
	pos := uint64(0)
	for i := range f.Tensors {
		t := &f.Tensors[i]
		pad(offsets[i] - pos)
		bw.Write(t.Data)
		pos = offsets[i] + uint64(len(t.Data))
	}
	pad(alignUp(pos, align) - pos)
	if err := bw.Flush(); err != nil {
		return cw.n, fmt.Errorf("gguf: write: %w", err)
	}
	return cw.n, nil
}

// WriteFile writes f to path atomically: into a temporary file in the same
// directory, synced and renamed over path, so a reader never sees a partial
// model.
func WriteFile(path string, f *File) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err = f.WriteTo(tmp); err != nil {
		return err
	}
	if err = tmp.Sync(); err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	if err = os.Chmod(tmp.Name(), 0o644); err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	return nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// header validates f and encodes everything before the tensor data; it
// returns each tensor's data offset and the alignment.
func (f *File) header() (head []byte, offsets []uint64, align uint64, err error) {
	a, err := f.Alignment()
	if err != nil {
		return nil, nil, 0, fmt.Errorf("gguf: %w", err)
	}
	align = uint64(a)
	le := binary.LittleEndian
	b := le.AppendUint32(nil, Magic)
	b = le.AppendUint32(b, Version)
	b = le.AppendUint64(b, uint64(len(f.Tensors)))
	b = le.AppendUint64(b, uint64(len(f.KV)))
	keys := make(map[string]bool, len(f.KV))
	for _, kv := range f.KV {
		if keys[kv.Key] {
			return nil, nil, 0, fmt.Errorf("gguf: duplicate metadata key %q", kv.Key)
		}
		keys[kv.Key] = true
		b = appendString(b, kv.Key)
		t, _, err := TypeOf(kv.Value)
		if err != nil {
			return nil, nil, 0, fmt.Errorf("gguf: metadata %s: %w", kv.Key, err)
		}
		b = le.AppendUint32(b, uint32(t))
		if b, err = appendValue(b, kv.Value, 0); err != nil {
			return nil, nil, 0, fmt.Errorf("gguf: metadata %s: %w", kv.Key, err)
		}
	}
	names := make(map[string]bool, len(f.Tensors))
	offsets = make([]uint64, len(f.Tensors))
	off := uint64(0)
	for i := range f.Tensors {
		t := &f.Tensors[i]
		if names[t.Name] {
			return nil, nil, 0, fmt.Errorf("gguf: duplicate tensor %q", t.Name)
		}
		names[t.Name] = true
		if len(t.Dims) < 1 || len(t.Dims) > MaxDims {
			return nil, nil, 0, fmt.Errorf("gguf: tensor %s: %d dimensions (want 1..%d)", t.Name, len(t.Dims), MaxDims)
		}
		n, err := t.Type.DataSize(t.Dims)
		if err != nil {
			return nil, nil, 0, fmt.Errorf("gguf: tensor %s: %w", t.Name, err)
		}
		if uint64(len(t.Data)) != n {
			return nil, nil, 0, fmt.Errorf("gguf: tensor %s: %d data bytes, shape %v of %s needs %d",
				t.Name, len(t.Data), t.Dims, t.Type, n)
		}
		offsets[i] = off
		off = alignUp(off+n, align)
		b = appendString(b, t.Name)
		b = le.AppendUint32(b, uint32(len(t.Dims)))
		for _, d := range t.Dims {
			b = le.AppendUint64(b, d)
		}
		b = le.AppendUint32(b, uint32(t.Type))
		b = le.AppendUint64(b, offsets[i])
	}
	return b, offsets, align, nil
}

// appendArrayHeader appends what precedes an array's elements: their
// type and their count.
func appendArrayHeader(b []byte, elem ValueType, n int) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(elem))
	return binary.LittleEndian.AppendUint64(b, uint64(n))
}

// appendArray appends an array of elem values: its header, then each
// element as put encodes it.
func appendArray[T any](b []byte, elem ValueType, x []T, put func([]byte, T) []byte) []byte {
	b = appendArrayHeader(b, elem, len(x))
	for _, e := range x {
		b = put(b, e)
	}
	return b
}

// The little-endian encoders of the scalar types the binary package does
// not append directly, shared by scalars and arrays.
func appendInt8(b []byte, x int8) []byte       { return append(b, byte(x)) }
func appendInt16(b []byte, x int16) []byte     { return binary.LittleEndian.AppendUint16(b, uint16(x)) }
func appendInt32(b []byte, x int32) []byte     { return binary.LittleEndian.AppendUint32(b, uint32(x)) }
func appendInt64(b []byte, x int64) []byte     { return binary.LittleEndian.AppendUint64(b, uint64(x)) }
func appendFloat32(b []byte, x float32) []byte { return appendUint32(b, math.Float32bits(x)) }
func appendFloat64(b []byte, x float64) []byte { return appendUint64(b, math.Float64bits(x)) }
func appendUint8(b []byte, x uint8) []byte     { return append(b, x) }
func appendUint16(b []byte, x uint16) []byte   { return binary.LittleEndian.AppendUint16(b, x) }
func appendUint32(b []byte, x uint32) []byte   { return binary.LittleEndian.AppendUint32(b, x) }
func appendUint64(b []byte, x uint64) []byte   { return binary.LittleEndian.AppendUint64(b, x) }

func appendBool(b []byte, x bool) []byte {
	if x {
		return append(b, 1)
	}
	return append(b, 0)
}

func appendString(b []byte, s string) []byte {
	b = binary.LittleEndian.AppendUint64(b, uint64(len(s)))
	return append(b, s...)
}

// appendValue appends the encoding of v (without its type); depth counts
// enclosing arrays.
func appendValue(b []byte, v any, depth int) ([]byte, error) {
	switch x := v.(type) {
	case uint8:
		return appendUint8(b, x), nil
	case int8:
		return appendInt8(b, x), nil
	case uint16:
		return appendUint16(b, x), nil
	case int16:
		return appendInt16(b, x), nil
	case uint32:
		return appendUint32(b, x), nil
	case int32:
		return appendInt32(b, x), nil
	case float32:
		return appendFloat32(b, x), nil
	case bool:
		return appendBool(b, x), nil
	case string:
		return appendString(b, x), nil
	case uint64:
		return appendUint64(b, x), nil
	case int64:
		return appendInt64(b, x), nil
	case float64:
		return appendFloat64(b, x), nil
	}
	if depth+1 > MaxArrayDepth {
		return nil, fmt.Errorf("arrays nested deeper than %d", MaxArrayDepth)
	}
	switch x := v.(type) {
	case []uint8:
		return append(appendArrayHeader(b, TypeUint8, len(x)), x...), nil
	case []int8:
		return appendArray(b, TypeInt8, x, appendInt8), nil
	case []bool:
		return appendArray(b, TypeBool, x, appendBool), nil
	case []uint16:
		return appendArray(b, TypeUint16, x, appendUint16), nil
	case []int16:
		return appendArray(b, TypeInt16, x, appendInt16), nil
	case []uint32:
		return appendArray(b, TypeUint32, x, appendUint32), nil
	case []int32:
		return appendArray(b, TypeInt32, x, appendInt32), nil
	case []float32:
		return appendArray(b, TypeFloat32, x, appendFloat32), nil
	case []uint64:
		return appendArray(b, TypeUint64, x, appendUint64), nil
	case []int64:
		return appendArray(b, TypeInt64, x, appendInt64), nil
	case []float64:
		return appendArray(b, TypeFloat64, x, appendFloat64), nil
	case []string:
		return appendArray(b, TypeString, x, appendString), nil
	case []any:
		b = appendArrayHeader(b, TypeArray, len(x))
		for i, e := range x {
			if t, _, err := TypeOf(e); err != nil || t != TypeArray {
				return nil, fmt.Errorf("element %d of an array of arrays is %T, not an array", i, e)
			}
			var err error
			if b, err = appendValue(b, e, depth+1); err != nil {
				return nil, err
			}
		}
		return b, nil
	}
	return nil, fmt.Errorf("no GGUF type for Go type %T", v)
}
