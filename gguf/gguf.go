// Package gguf reads and writes GGUF version 3 files, the model format of
// llama.cpp/ggml: a header, typed metadata (key → value), tensor infos and
// aligned tensor data, all little-endian.
//
// Layout of a file:
//
//	magic "GGUF" (uint32 0x46554747) · version uint32 (3)
//	tensor count uint64 · metadata count uint64
//	metadata:    key string · value type uint32 · value          (× count)
//	tensor info: name string · n_dims uint32 · dims uint64[n_dims]
//	             · type uint32 · offset uint64                   (× count)
//	padding to the alignment (general.alignment, default 32)
//	tensor data: each tensor at its offset from here, a multiple of the alignment
//
// A string is a uint64 byte length and the bytes (no NUL). An array is an
// element type uint32, a uint64 length and the elements.
//
// # Metadata values
//
// A metadata value is one of these Go types, which fix its GGUF type:
//
//	uint8 int8 uint16 int16 uint32 int32 uint64 int64 float32 float64 bool string
//	[]uint8 []int8 []uint16 []int16 []uint32 []int32 []uint64 []int64
//	[]float32 []float64 []bool []string   (arrays of scalars)
//	[]any                                  (an array of arrays: every element is an array value)
//
// [DecodeValue] returns values in exactly these types (arrays never nil),
// so a value written and read back is reflect.DeepEqual to the original.
//
// This package holds the format's Go side: the types, the writer behind the
// model tool, value decoding and the quantizers. Files are parsed by the
// project's one GGUF parser, C's (native/gguf.c): native.ParseGGUF and
// native.ReadGGUF return a *File, its values decoded by [DecodeValue].
package gguf

import (
	"fmt"
	"math"
)

const (
	// Magic is the first four bytes of a GGUF file ("GGUF") read as a
	// little-endian uint32.
	Magic = 0x46554747
	// Version is the only GGUF version this package reads and writes.
	Version = 3
	// DefaultAlignment is the tensor data alignment when the file has no
	// general.alignment key.
	DefaultAlignment = 32
	// KeyAlignment is the metadata key that sets the alignment (uint32,
	// a power of two).
	KeyAlignment = "general.alignment"
	// MaxDims is the most dimensions a tensor may have (GGML_MAX_DIMS).
	MaxDims = 4
	// MaxArrayDepth bounds the nesting of arrays of arrays; deeper input is
	// rejected rather than recursed into.
	MaxArrayDepth = 8
)

// ValueType is the GGUF type of a metadata value.
type ValueType uint32

// The 13 GGUF metadata value types.
const (
	TypeUint8   ValueType = 0
	TypeInt8    ValueType = 1
	TypeUint16  ValueType = 2
	TypeInt16   ValueType = 3
	TypeUint32  ValueType = 4
	TypeInt32   ValueType = 5
	TypeFloat32 ValueType = 6
	TypeBool    ValueType = 7
	TypeString  ValueType = 8
	TypeArray   ValueType = 9
	TypeUint64  ValueType = 10
	TypeInt64   ValueType = 11
	TypeFloat64 ValueType = 12
)

var valueTypeNames = [...]string{"uint8", "int8", "uint16", "int16", "uint32", "int32",
	"float32", "bool", "string", "array", "uint64", "int64", "float64"}

// String returns the type's name ("uint32", "array", …) or "type(N)".
func (t ValueType) String() string {
	if int(t) < len(valueTypeNames) {
		return valueTypeNames[t]
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// size is the encoded size of a fixed-size scalar type, 0 for string and
// array, -1 for an unknown type.
func (t ValueType) size() int {
	switch t {
	case TypeUint8, TypeInt8, TypeBool:
		return 1
	case TypeUint16, TypeInt16:
		return 2
	case TypeUint32, TypeInt32, TypeFloat32:
		return 4
	case TypeUint64, TypeInt64, TypeFloat64:
		return 8
	case TypeString, TypeArray:
		return 0
	}
	return -1
}

// minSize is the fewest bytes one value of type t occupies (a string is at
// least its length, an array at least its element type and length).
func (t ValueType) minSize() int {
	switch t {
	case TypeString:
		return 8
	case TypeArray:
		return 12
	}
	return t.size()
}

// TypeOf returns the GGUF type of a metadata value and, for an array, its
// element type. It fails for a Go type that has no GGUF encoding.
func TypeOf(v any) (t, elem ValueType, err error) {
	switch v.(type) {
	case uint8:
		return TypeUint8, 0, nil
	case int8:
		return TypeInt8, 0, nil
	case uint16:
		return TypeUint16, 0, nil
	case int16:
		return TypeInt16, 0, nil
	case uint32:
		return TypeUint32, 0, nil
	case int32:
		return TypeInt32, 0, nil
	case float32:
		return TypeFloat32, 0, nil
	case bool:
		return TypeBool, 0, nil
	case string:
		return TypeString, 0, nil
	case uint64:
		return TypeUint64, 0, nil
	case int64:
		return TypeInt64, 0, nil
	case float64:
		return TypeFloat64, 0, nil
	case []uint8:
		return TypeArray, TypeUint8, nil
	case []int8:
		return TypeArray, TypeInt8, nil
	case []uint16:
		return TypeArray, TypeUint16, nil
	case []int16:
		return TypeArray, TypeInt16, nil
	case []uint32:
		return TypeArray, TypeUint32, nil
	case []int32:
		return TypeArray, TypeInt32, nil
	case []float32:
		return TypeArray, TypeFloat32, nil
	case []bool:
		return TypeArray, TypeBool, nil
	case []string:
		return TypeArray, TypeString, nil
	case []uint64:
		return TypeArray, TypeUint64, nil
	case []int64:
		return TypeArray, TypeInt64, nil
	case []float64:
		return TypeArray, TypeFloat64, nil
	case []any:
		return TypeArray, TypeArray, nil
	}
	return 0, 0, fmt.Errorf("gguf: no GGUF type for Go type %T", v)
}

// TensorType is a ggml tensor type (enum ggml_type).
type TensorType uint32

// The tensor types this package knows the sizes of. Only F32 and F16 carry
// data the loader and the reference can use; the others can be written and
// read as raw blocks.
const (
	F32     TensorType = 0
	F16     TensorType = 1
	Q4_0    TensorType = 2
	Q4_1    TensorType = 3
	Q5_0    TensorType = 6
	Q5_1    TensorType = 7
	Q8_0    TensorType = 8
	Q8_1    TensorType = 9
	Q2_K    TensorType = 10
	Q3_K    TensorType = 11
	Q4_K    TensorType = 12
	Q5_K    TensorType = 13
	Q6_K    TensorType = 14
	Q8_K    TensorType = 15
	IQ2_XXS TensorType = 16
	IQ2_XS  TensorType = 17
	IQ3_XXS TensorType = 18
	IQ1_S   TensorType = 19
	IQ4_NL  TensorType = 20
	IQ3_S   TensorType = 21
	IQ2_S   TensorType = 22
	IQ4_XS  TensorType = 23
	I8      TensorType = 24
	I16     TensorType = 25
	I32     TensorType = 26
	I64     TensorType = 27
	F64     TensorType = 28
	IQ1_M   TensorType = 29
	BF16    TensorType = 30
	TQ1_0   TensorType = 34
	TQ2_0   TensorType = 35
	MXFP4   TensorType = 39
)

// tensorTypes holds each type's name, block size (elements) and block
// bytes, as ggml's type traits (gguf-py GGML_QUANT_SIZES). native/gguf.c
// has the same table.
var tensorTypes = map[TensorType]struct {
	name         string
	block, bytes uint64
}{
	F32: {"f32", 1, 4}, F16: {"f16", 1, 2},
	Q4_0: {"q4_0", 32, 18}, Q4_1: {"q4_1", 32, 20}, Q5_0: {"q5_0", 32, 22}, Q5_1: {"q5_1", 32, 24},
	Q8_0: {"q8_0", 32, 34}, Q8_1: {"q8_1", 32, 40},
	Q2_K: {"q2_K", 256, 84}, Q3_K: {"q3_K", 256, 110}, Q4_K: {"q4_K", 256, 144},
	Q5_K: {"q5_K", 256, 176}, Q6_K: {"q6_K", 256, 210}, Q8_K: {"q8_K", 256, 292},
	IQ2_XXS: {"iq2_xxs", 256, 66}, IQ2_XS: {"iq2_xs", 256, 74}, IQ3_XXS: {"iq3_xxs", 256, 98},
	IQ1_S: {"iq1_s", 256, 50}, IQ4_NL: {"iq4_nl", 32, 18}, IQ3_S: {"iq3_s", 256, 110},
	IQ2_S: {"iq2_s", 256, 82}, IQ4_XS: {"iq4_xs", 256, 136},
	I8: {"i8", 1, 1}, I16: {"i16", 1, 2}, I32: {"i32", 1, 4}, I64: {"i64", 1, 8}, F64: {"f64", 1, 8},
	IQ1_M: {"iq1_m", 256, 56}, BF16: {"bf16", 1, 2},
	TQ1_0: {"tq1_0", 256, 54}, TQ2_0: {"tq2_0", 256, 66}, MXFP4: {"mxfp4", 32, 17},
}

// String returns ggml's name of the type ("f32", "q8_0", …) or "type(N)".
func (t TensorType) String() string {
	if tt, ok := tensorTypes[t]; ok {
		return tt.name
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// DataSize returns the bytes a tensor of type t with dims occupies. It
// fails for an unknown type, a dims[0] that is not a whole number of
// blocks, or a size that overflows int64.
func (t TensorType) DataSize(dims []uint64) (uint64, error) {
	tt, ok := tensorTypes[t]
	if !ok {
		return 0, fmt.Errorf("unknown type %d", uint32(t))
	}
	n := uint64(1)
	for _, d := range dims {
		if d > math.MaxInt64 || (d != 0 && n > math.MaxInt64/d) {
			return 0, fmt.Errorf("element count overflows")
		}
		n *= d
	}
	if len(dims) > 0 && dims[0]%tt.block != 0 {
		return 0, fmt.Errorf("dims[0] %d is not a multiple of the %s block size %d", dims[0], tt.name, tt.block)
	}
	blocks := n / tt.block
	if blocks > math.MaxInt64/tt.bytes {
		return 0, fmt.Errorf("byte size overflows")
	}
	return blocks * tt.bytes, nil
}

// KV is one metadata entry.
type KV struct {
	Key   string
	Value any // one of the types listed in the package doc
}

// Tensor is one tensor: its info and its data.
type Tensor struct {
	Name string
	// Dims are the dimensions innermost first: Dims[0] is contiguous, so a
	// Llama weight with Dims [in, out] is a row-major [out][in] matrix.
	Dims []uint64
	Type TensorType
	// Offset is the data's offset from the start of the tensor data
	// section. The parser sets it; the writer computes it (packed in order,
	// each padded to the alignment) and ignores this field.
	Offset uint64
	// Data is the tensor's bytes, little-endian (native.ParseGGUF: a
	// sub-slice of the input).
	Data []byte
}

// Elements returns the number of elements (the product of Dims).
func (t *Tensor) Elements() uint64 {
	n := uint64(1)
	for _, d := range t.Dims {
		n *= d
	}
	return n
}

// File is a GGUF file: metadata in file order and tensors in file order.
type File struct {
	KV      []KV
	Tensors []Tensor

	// Set by the parser (zero when the File was built in memory): the offset of
	// the first tensor info and of the tensor data section.
	InfoOffset, DataOffset int64
}

// Get returns the value of key, or false.
func (f *File) Get(key string) (any, bool) {
	for i := range f.KV {
		if f.KV[i].Key == key {
			return f.KV[i].Value, true
		}
	}
	return nil, false
}

// Tensor returns the tensor named name, or nil.
func (f *File) Tensor(name string) *Tensor {
	for i := range f.Tensors {
		if f.Tensors[i].Name == name {
			return &f.Tensors[i]
		}
	}
	return nil
}

// Alignment returns the tensor data alignment: general.alignment, or
// DefaultAlignment when absent. It fails when the key is not a uint32 power
// of two.
func (f *File) Alignment() (uint32, error) {
	v, ok := f.Get(KeyAlignment)
	if !ok {
		return DefaultAlignment, nil
	}
	a, ok := v.(uint32)
	if !ok {
		t, _, _ := TypeOf(v)
		return 0, fmt.Errorf("%s: type %s, want uint32", KeyAlignment, t)
	}
	if a == 0 || a&(a-1) != 0 {
		return 0, fmt.Errorf("%s: %d is not a power of two", KeyAlignment, a)
	}
	return a, nil
}

func alignUp(n, a uint64) uint64 { return (n + a - 1) / a * a }
