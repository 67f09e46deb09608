//go:build iree && cgo

// runtime.h: picometer's C face of an IREE runtime library, loaded at run
// time (dlopen) so a binary built with -tags iree still starts, and says
// what is missing, where the library is absent.
//
// Contract: every function returns 0 or a status (PM_IREE_E_* below, or an
// IREE status code 1..31) and writes a NUL-terminated message into err
// (capacity errcap) on failure; nothing exits or aborts. A pm_iree_rt is the
// loaded library (shared by modules, freed last); a pm_iree_module is one
// compiled program (.vmfb) with its own VM context, HAL device and task
// executor. Neither is safe for concurrent use.
#ifndef PM_IREE_RUNTIME_H
#define PM_IREE_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

enum {
  PM_IREE_OK = 0,
  PM_IREE_E_DLOPEN = -1,   // the library could not be loaded
  PM_IREE_E_SYMBOL = -2,   // the library lacks a symbol of abi.h
  PM_IREE_E_NOMEM = -3,
  PM_IREE_E_ARG = -4,      // a bad argument (rank, count, capacity)
  PM_IREE_E_RESULT = -5,   // a result is not an f32 buffer view, or too big
};

#define PM_IREE_MAX_RANK 8

typedef struct pm_iree_rt pm_iree_rt;
typedef struct pm_iree_module pm_iree_module;

// pm_iree_rt_load loads the library at path and resolves every symbol.
int pm_iree_rt_load(const char* path, pm_iree_rt** out, char* err,
                    size_t errcap);
void pm_iree_rt_free(pm_iree_rt* rt);

// pm_iree_module_open creates a VM instance with the HAL types, a task
// executor of `threads` workers, a local-task device with the embedded-ELF
// loader (llvm-cpu executables), and a context of the HAL module and the
// bytecode module in vmfb (copied: the caller may free it on return).
int pm_iree_module_open(pm_iree_rt* rt, const void* vmfb, size_t len,
                        int threads, pm_iree_module** out, char* err,
                        size_t errcap);
void pm_iree_module_close(pm_iree_module* m);

// pm_iree_tensor is one f32 input: shape dims[0..rank) and its data,
// row-major, borrowed for the call.
typedef struct pm_iree_tensor {
  int rank;
  int64_t dims[PM_IREE_MAX_RANK];
  const float* data;
} pm_iree_tensor;

// pm_iree_module_call invokes function fn (e.g. "module.matvec") on n_in
// f32 inputs. Its results stay in m until the next call or close; *n_out
// receives their count.
int pm_iree_module_call(pm_iree_module* m, const char* fn,
                        const pm_iree_tensor* in, int n_in, int* n_out,
                        char* err, size_t errcap);

// pm_iree_module_result_shape reads result i's shape (it must be an f32
// buffer view) into rank (at most PM_IREE_MAX_RANK), dims and count.
int pm_iree_module_result_shape(pm_iree_module* m, int i, int* rank,
                                int64_t* dims, size_t* count, char* err,
                                size_t errcap);

// pm_iree_module_result_read copies result i's count elements into dst.
int pm_iree_module_result_read(pm_iree_module* m, int i, float* dst,
                               size_t count, char* err, size_t errcap);

// Buffers a module keeps across calls: weights loaded once, KV caches and
// per-step inputs rewritten in place. Each is an f32 buffer view on m's
// device, named by the id pm_iree_buffer_new returns; they live until m is
// closed.

// pm_iree_buffer_new allocates a device buffer of shape dims[0..rank) and
// copies data (the product of dims f32 values) into it.
int pm_iree_buffer_new(pm_iree_module* m, int rank, const int64_t* dims,
                       const float* data, int* id, char* err, size_t errcap);

// pm_iree_buffer_write copies count values from src into buffer id at
// element offset (a host-to-device transfer; no call may be running).
int pm_iree_buffer_write(pm_iree_module* m, int id, size_t offset,
                         const float* src, size_t count, char* err,
                         size_t errcap);

// pm_iree_module_invoke invokes fn on the buffers ids[0..n), passed by
// reference (nothing is copied). Results are read as after
// pm_iree_module_call.
int pm_iree_module_invoke(pm_iree_module* m, const char* fn, const int* ids,
                          int n, int* n_out, char* err, size_t errcap);

#endif  // PM_IREE_RUNTIME_H
