// Package iree runs programs compiled by IREE's compiler (iree-compile,
// a .vmfb for the llvm-cpu target) on an IREE runtime library loaded at run
// time, through IREE's C API (abi.h, declared from IREE's published
// headers; runtime.h is the contract of the C side).
//
// The runtime is built only with -tags iree (and cgo): without it, [Load]
// returns [ErrNotBuilt], so the default picometerd carries no IREE code
// and refuses the iree backend by name. With it, [Load] opens the library
// (dlopen) and resolves every function it uses, naming the first one the
// library lacks. PyPI's iree-base-runtime wheel exports none of IREE's C
// API (its runtime is linked into the Python extension with hidden
// symbols); shortfin 3.9.0's libshortfin exports it, from IREE
// iree-3.10.0rc20251203, the revision abi.h is written against.
// docs/IREE.md holds the evidence and scripts/iree.sh fetches the pinned
// wheels into build/iree.
//
// On top of the binding, [Engine] (engine_iree.go, with -tags iree) is a
// serving engine with native.Engine's contract over a batched step
// ([StepMLIR]) compiled for the model's shape ([Compile]); the daemon
// opens it for engine.backend "iree". docs/IREE.md section 5 describes it.
//
// Concurrency: a [Module] is used by one goroutine at a time; a [Runtime]
// may be shared by modules and is closed after them. An [Engine] has one
// owner, like native.Engine.
package iree

import "errors"

// ErrNotBuilt is returned by [Load] in a binary built without -tags iree.
var ErrNotBuilt = errors.New("iree: this binary was built without the IREE runtime binding (rebuild with -tags iree; docs/IREE.md)")

// Tensor is a dense row-major f32 tensor.
type Tensor struct {
	Dims []int64
	Data []float32
}

// elements is the product of t's dims.
func (t Tensor) elements() int64 {
	n := int64(1)
	for _, d := range t.Dims {
		n *= d
	}
	return n
}
