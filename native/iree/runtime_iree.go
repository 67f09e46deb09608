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
	"runtime"
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
	c     *C.pm_iree_module
	rt    *Runtime
	names []*C.char // Func's C strings
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
		for _, n := range m.names {
			C.free(unsafe.Pointer(n))
		}
		m.names = nil
	}
}

// Call invokes fn ("module.NAME") on f32 inputs and returns its first
// nOut results, which must be f32 tensors. The inputs are read in place
// (pinned for the call) and copied into device buffers by the runtime.
func (m *Module) Call(fn string, in []Tensor, nOut int) ([]Tensor, error) {
	if nOut < 0 {
		return nil, fmt.Errorf("iree: %s: %d results", fn, nOut)
	}
	var pin runtime.Pinner
	defer pin.Unpin()
	cin := make([]C.pm_iree_tensor, len(in)+1) // +1: never empty
	pin.Pin(&cin[0])
	for i, t := range in {
		if len(t.Dims) > C.PM_IREE_MAX_RANK {
			return nil, fmt.Errorf("iree: %s: input %d has rank %d, at most %d", fn, i, len(t.Dims), C.PM_IREE_MAX_RANK)
		}
		if t.elements() != int64(len(t.Data)) {
			return nil, fmt.Errorf("iree: %s: input %d has %d values for dims %v", fn, i, len(t.Data), t.Dims)
		}
		c := &cin[i]
		c.rank = C.int(len(t.Dims))
		for d, v := range t.Dims {
			c.dims[d] = C.int64_t(v)
		}
		if len(t.Data) > 0 {
			pin.Pin(&t.Data[0])
			c.data = (*C.float)(unsafe.Pointer(&t.Data[0]))
		}
	}
	cfn := C.CString(fn)
	defer C.free(unsafe.Pointer(cfn))
	var buf [errCap]C.char
	var got C.int
	if rc := C.pm_iree_module_call(m.c, cfn, &cin[0], C.int(len(in)), &got, &buf[0], errCap); rc != 0 {
		return nil, fmt.Errorf("iree: call %s: %s", fn, cerr(buf[:]))
	}
	if int(got) < nOut {
		return nil, fmt.Errorf("iree: call %s: %d results, want %d", fn, got, nOut)
	}
	res := make([]Tensor, nOut)
	for i := range res {
		var rank C.int
		var dims [C.PM_IREE_MAX_RANK]C.int64_t
		var count C.size_t
		if rc := C.pm_iree_module_result_shape(m.c, C.int(i), &rank, &dims[0], &count, &buf[0], errCap); rc != 0 {
			return nil, fmt.Errorf("iree: call %s: %s", fn, cerr(buf[:]))
		}
		t := Tensor{Dims: make([]int64, int(rank)), Data: make([]float32, int(count))}
		for d := range t.Dims {
			t.Dims[d] = int64(dims[d])
		}
		var dst *C.float
		if count > 0 {
			dst = (*C.float)(unsafe.Pointer(&t.Data[0]))
		}
		if rc := C.pm_iree_module_result_read(m.c, C.int(i), dst, count, &buf[0], errCap); rc != 0 {
			return nil, fmt.Errorf("iree: call %s: %s", fn, cerr(buf[:]))
		}
		res[i] = t
	}
	return res, nil
}

// Buffer names a device buffer a Module keeps across calls (see NewBuffer).
type Buffer int32 // a C int: Invoke passes a []Buffer as int*

// NewBuffer allocates an f32 buffer of shape dims on m's device, holding
// data (len(data) must be the product of dims). It lives until m closes.
func (m *Module) NewBuffer(dims []int64, data []float32) (Buffer, error) {
	t := Tensor{Dims: dims, Data: data}
	if len(dims) > C.PM_IREE_MAX_RANK || t.elements() != int64(len(data)) || len(data) == 0 {
		return -1, fmt.Errorf("iree: buffer: %d values for dims %v", len(data), dims)
	}
	var cd [C.PM_IREE_MAX_RANK]C.int64_t
	for i, d := range dims {
		cd[i] = C.int64_t(d)
	}
	var buf [errCap]C.char
	var id C.int
	if rc := C.pm_iree_buffer_new(m.c, C.int(len(dims)), &cd[0], (*C.float)(unsafe.Pointer(&data[0])), &id, &buf[0], errCap); rc != 0 {
		return -1, fmt.Errorf("iree: buffer %v: %s", dims, cerr(buf[:]))
	}
	return Buffer(id), nil
}

// Write copies src into b at element offset.
func (m *Module) Write(b Buffer, offset int, src []float32) error {
	if len(src) == 0 {
		return nil
	}
	var buf [errCap]C.char
	if rc := C.pm_iree_buffer_write(m.c, C.int(b), C.size_t(offset), (*C.float)(unsafe.Pointer(&src[0])), C.size_t(len(src)), &buf[0], errCap); rc != 0 {
		return fmt.Errorf("iree: write buffer %d: %s", b, cerr(buf[:]))
	}
	return nil
}

// Func is a function name ready for Invoke (a C string kept by the Module).
type Func struct{ c *C.char }

// Func prepares the function name fn ("module.NAME") for Invoke.
func (m *Module) Func(fn string) Func {
	f := Func{C.CString(fn)}
	m.names = append(m.names, f.c)
	return f
}

// Invoke calls fn on the buffers args, passed by reference, and returns the
// number of results, which ReadResult reads until the next call.
func (m *Module) Invoke(fn Func, args []Buffer) (int, error) {
	if len(args) == 0 {
		return 0, fmt.Errorf("iree: invoke %s: no arguments", C.GoString(fn.c))
	}
	var buf [errCap]C.char
	var n C.int
	if rc := C.pm_iree_module_invoke(m.c, fn.c, (*C.int)(unsafe.Pointer(&args[0])), C.int(len(args)), &n, &buf[0], errCap); rc != 0 {
		return 0, fmt.Errorf("iree: invoke %s: %s", C.GoString(fn.c), cerr(buf[:]))
	}
	return int(n), nil
}

// ReadResult copies result i of the last call, which must hold exactly
// len(dst) f32 values, into dst.
func (m *Module) ReadResult(i int, dst []float32) error {
	var buf [errCap]C.char
	var p *C.float
	if len(dst) > 0 {
		p = (*C.float)(unsafe.Pointer(&dst[0]))
	}
	if rc := C.pm_iree_module_result_read(m.c, C.int(i), p, C.size_t(len(dst)), &buf[0], errCap); rc != 0 {
		return fmt.Errorf("iree: result %d: %s", i, cerr(buf[:]))
	}
	return nil
}
