//go:build iree && cgo

package iree

/*
#cgo CFLAGS: -std=c11 -O2 -Wall -Wextra -Wno-unused-parameter -D_GNU_SOURCE
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "runtime.h"
*/
import "C"

import (
	"fmt"
	"unsafe"
)

const errCap = 1024

// Runtime is a loaded IREE runtime library.
type Runtime struct {
	c    *C.pm_iree_rt
	path string
}

// Module is one compiled program (.vmfb) in its own VM context, on its own
// local-task device.
type Module struct {
	c  *C.pm_iree_module
	rt *Runtime
}

func cerr(buf []C.char) string { return C.GoString(&buf[0]) }

// Load opens the IREE runtime library at path and resolves every IREE
// function the binding calls; the error names the library and the first
// missing symbol.
func Load(path string) (*Runtime, error) {
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var buf [errCap]C.char
	var rt *C.pm_iree_rt
	if rc := C.pm_iree_rt_load(cpath, &rt, &buf[0], errCap); rc != 0 {
		return nil, fmt.Errorf("iree: load runtime: %s", cerr(buf[:]))
	}
	return &Runtime{c: rt, path: path}, nil
}

// Close unloads the library; every Module opened from r must be closed first.
func (r *Runtime) Close() {
	if r != nil && r.c != nil {
		C.pm_iree_rt_free(r.c)
		r.c = nil
	}
}

// Open loads a compiled program on a local-task device with threads workers.
func (r *Runtime) Open(vmfb []byte, threads int) (*Module, error) {
	if len(vmfb) == 0 {
		return nil, fmt.Errorf("iree: open: empty program")
	}
	var buf [errCap]C.char
	var m *C.pm_iree_module
	// The C side copies vmfb before returning: pinning for the call suffices.
	if rc := C.pm_iree_module_open(r.c, unsafe.Pointer(&vmfb[0]), C.size_t(len(vmfb)), C.int(threads), &m, &buf[0], errCap); rc != 0 {
		return nil, fmt.Errorf("iree: open program (%s): %s", r.path, cerr(buf[:]))
	}
	return &Module{c: m, rt: r}, nil
}

// Close releases the program, its device and its workers.
func (m *Module) Close() {
	if m != nil && m.c != nil {
		C.pm_iree_module_close(m.c)
		m.c = nil
	}
}

// Call invokes fn ("module.NAME") on f32 inputs and returns its first nOut
// results, which must be f32 tensors of at most 1<<24 elements each.
func (m *Module) Call(fn string, in []Tensor, nOut int) ([]Tensor, error) {
	const maxOut = 1 << 24
	cin := (*[1 << 16]C.pm_iree_tensor)(C.malloc(C.size_t(len(in)+nOut+1) * C.size_t(unsafe.Sizeof(C.pm_iree_tensor{}))))[: len(in)+nOut : len(in)+nOut]
	defer C.free(unsafe.Pointer(&cin[0]))
	var keep []unsafe.Pointer
	defer func() {
		for _, p := range keep {
			C.free(p)
		}
	}()
	for i, t := range in {
		if len(t.Dims) > C.PM_IREE_MAX_RANK {
			return nil, fmt.Errorf("iree: %s: input %d has rank %d, at most %d", fn, i, len(t.Dims), C.PM_IREE_MAX_RANK)
		}
		if t.elements() != int64(len(t.Data)) {
			return nil, fmt.Errorf("iree: %s: input %d has %d values for dims %v", fn, i, len(t.Data), t.Dims)
		}
		c := &cin[i]
		*c = C.pm_iree_tensor{rank: C.int(len(t.Dims))}
		for d, v := range t.Dims {
			c.dims[d] = C.int64_t(v)
		}
		// C memory: the pointer is stored in C memory (cin), which cgo's
		// pointer rules forbid for Go memory.
		n := len(t.Data)
		p := C.malloc(C.size_t(n+1) * 4)
		keep = append(keep, p)
		if n > 0 {
			copy(unsafe.Slice((*float32)(p), n), t.Data)
		}
		c.data = (*C.float)(p)
	}
	outs := cin[len(in):]
	for i := range outs {
		p := C.malloc(maxOut * 4)
		if p == nil {
			return nil, fmt.Errorf("iree: %s: out of memory", fn)
		}
		keep = append(keep, p)
		outs[i] = C.pm_iree_tensor{data: (*C.float)(p), cap: maxOut}
	}
	cfn := C.CString(fn)
	defer C.free(unsafe.Pointer(cfn))
	var buf [errCap]C.char
	var inPtr, outPtr *C.pm_iree_tensor
	if len(in) > 0 {
		inPtr = &cin[0]
	}
	if nOut > 0 {
		outPtr = &outs[0]
	}
	if rc := C.pm_iree_module_call(m.c, cfn, inPtr, C.int(len(in)), outPtr, C.int(nOut), &buf[0], errCap); rc != 0 {
		return nil, fmt.Errorf("iree: call %s: %s", fn, cerr(buf[:]))
	}
	res := make([]Tensor, nOut)
	for i := range res {
		o := &outs[i]
		dims := make([]int64, int(o.rank))
		for d := range dims {
			dims[d] = int64(o.dims[d])
		}
		data := make([]float32, int(o.count))
		copy(data, unsafe.Slice((*float32)(unsafe.Pointer(o.data)), int(o.count)))
		res[i] = Tensor{Dims: dims, Data: data}
	}
	return res, nil
}
