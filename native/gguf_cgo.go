//go:build cgo

package native

/*
#include <stdlib.h>
#include "gguf.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/picometer/picometer/gguf"
)

// ParseGGUF parses a GGUF v3 file held in b with the C parser (gguf.c, the
// project's only one) and returns it as a [gguf.File]: metadata decoded to
// gguf's Go types, tensors in file order with Data a sub-slice of b. Any b
// is safe input; a file that is not GGUF gives an *Error (StatusFormat)
// naming the problem. It checks the format only: whether the tensors make
// a model is ParseModel's question.
func ParseGGUF(b []byte) (*gguf.File, error) {
	var buf unsafe.Pointer
	if len(b) > 0 {
		buf = C.CBytes(b) // the parser keeps pointers into its input: not Go memory
		defer C.free(buf)
	}
	var g C.pm_gguf
	var msg [512]C.char
	if rc := C.pm_gguf_parse(buf, C.size_t(len(b)), &g, &msg[0], C.size_t(len(msg))); rc != C.PM_OK {
		return nil, &Error{Status: Status(rc), Msg: C.GoString(&msg[0])}
	}
	defer C.pm_gguf_free(&g)
	return goFile(&g, buf, b)
}

// ReadGGUF reads the GGUF file at path with the C parser: the file is
// mapped, parsed, and copied once into Go memory that the tensors' Data
// slice. Errors are *Error ("<path>: <problem>").
func ReadGGUF(path string) (*gguf.File, error) {
	g, err := openGGUF(path)
	if err != nil {
		return nil, err
	}
	defer C.pm_gguf_free(g)
	var b []byte
	if g.map_len > 0 {
		b = C.GoBytes(g._map, C.int(g.map_len))
	}
	return goFile(g, g._map, b)
}

// ReadGGUFMeta reads the metadata and tensor infos of the GGUF file at
// path with the C parser; tensors have no Data. The file is mapped, not
// read, so only the pages the metadata occupies are touched.
func ReadGGUFMeta(path string) (*gguf.File, error) {
	g, err := openGGUF(path)
	if err != nil {
		return nil, err
	}
	defer C.pm_gguf_free(g)
	return goFile(g, nil, nil)
}

func openGGUF(path string) (*C.pm_gguf, error) {
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	g := new(C.pm_gguf)
	var msg [512]C.char
	if rc := C.pm_gguf_open(cpath, g, &msg[0], C.size_t(len(msg))); rc != C.PM_OK {
		return nil, &Error{Status: Status(rc), Msg: C.GoString(&msg[0])}
	}
	return g, nil
}

// goFile converts what the parser found. The parser delimited every value
// and checked its type, lengths, bools and nesting, so decoding cannot fail
// on a file it accepted (an error here is a bug, reported as one). When b
// is not nil it holds the bytes the parser read at base, and each tensor's
// Data is its sub-slice.
func goFile(g *C.pm_gguf, base unsafe.Pointer, b []byte) (*gguf.File, error) {
	f := &gguf.File{
		KV:         make([]gguf.KV, 0, int(g.n_kv)),
		Tensors:    make([]gguf.Tensor, 0, int(g.n_tensors)),
		InfoOffset: int64(g.info_offset),
		DataOffset: int64(g.data_offset),
	}
	if n := int(g.n_kv); n > 0 {
		for _, kv := range unsafe.Slice(g.kv, n) {
			key := C.GoStringN(kv.key, C.int(kv.key_len))
			v, used, err := gguf.DecodeValue(gguf.ValueType(kv._type), cslice(unsafe.Pointer(kv.value), uint64(kv.value_len)))
			if err != nil || uint64(used) != uint64(kv.value_len) {
				return nil, &Error{Status: StatusInternal, Msg: fmt.Sprintf("BUG: metadata %q the parser accepted does not decode: %v", key, err)}
			}
			f.KV = append(f.KV, gguf.KV{Key: key, Value: v})
		}
	}
	if n := int(g.n_tensors); n > 0 {
		for _, t := range unsafe.Slice(g.tensors, n) {
			gt := gguf.Tensor{
				Name:   C.GoStringN((*C.char)(unsafe.Pointer(t.name)), C.int(t.name_len)),
				Dims:   make([]uint64, int(t.n_dims)),
				Type:   gguf.TensorType(t._type),
				Offset: uint64(t.offset),
			}
			for j := range gt.Dims {
				gt.Dims[j] = uint64(t.ne[j])
			}
			if b != nil {
				start := uint64(uintptr(unsafe.Pointer(t.data)) - uintptr(base))
				end := start + uint64(t.nbytes)
				gt.Data = b[start:end:end]
			}
			f.Tensors = append(f.Tensors, gt)
		}
	}
	return f, nil
}

// cslice views n bytes of C memory (an empty, non-nil slice when n is 0).
func cslice(p unsafe.Pointer, n uint64) []byte {
	if n == 0 {
		return []byte{}
	}
	return unsafe.Slice((*byte)(p), n)
}
