//go:build iree && cgo

// abi.h: the part of IREE's runtime C API that picometer calls, declared
// here from IREE's published headers (runtime/src/iree/{base,vm,hal,task,
// modules/hal}/*.h) at the revision the runtime library was built from:
// IREE tag iree-3.10.0rc20251203, which shortfin 3.9.0's libshortfin
// carries with its symbols visible (docs/IREE.md). Nothing here is copied;
// each declaration restates the published signature or layout, and
// runtime.c resolves every function by name with dlsym, so a library of
// another revision fails at load by naming the symbol it lacks rather than
// at link time. A layout change between revisions (a struct passed by
// value) is not detectable by name: pin the library, as scripts/iree.sh does.
#ifndef PM_IREE_ABI_H
#define PM_IREE_ABI_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

// ---- iree/base ----------------------------------------------------------

typedef size_t iree_host_size_t;
typedef size_t iree_device_size_t;  // IREE_DEVICE_SIZE_T
typedef int64_t iree_time_t;
typedef int64_t iree_duration_t;

// iree_status_t: NULL is OK; otherwise the low 5 bits are the code and the
// rest points at a heap payload that must be freed (iree_status_free).
typedef struct iree_status_handle_t* iree_status_t;
#define PM_IREE_STATUS_CODE_MASK 0x1Fu

typedef struct iree_string_view_t {
  const char* data;
  iree_host_size_t size;
} iree_string_view_t;

typedef struct iree_const_byte_span_t {
  const uint8_t* data;
  iree_host_size_t data_length;
} iree_const_byte_span_t;

// The allocator is an ioctl-style control function and its state; the
// system allocator is {NULL, iree_allocator_libc_ctl}.
typedef iree_status_t (*iree_allocator_ctl_fn_t)(void* self, int command,
                                                 const void* params,
                                                 void** inout_ptr);
typedef struct iree_allocator_t {
  void* self;
  iree_allocator_ctl_fn_t ctl;
} iree_allocator_t;

typedef struct iree_timeout_t {
  int type;  // 0: absolute deadline in nanos
  iree_time_t nanos;
} iree_timeout_t;
#define PM_IREE_TIME_INFINITE_FUTURE INT64_MAX

// ---- iree/task ----------------------------------------------------------

typedef struct iree_task_executor_t iree_task_executor_t;
// Passed by value to iree_task_executor_create.
typedef struct iree_task_executor_options_t {
  uint32_t scheduling_mode;
  iree_host_size_t worker_base_index;
  iree_duration_t worker_spin_ns;
  iree_host_size_t worker_stack_size;
  iree_host_size_t worker_local_memory_size;
} iree_task_executor_options_t;
// iree_task_topology_t is only handled by pointer: runtime.c gives it
// PM_IREE_TOPOLOGY_BYTES, well above its size (a count and 64 groups).
#define PM_IREE_TOPOLOGY_BYTES (64 * 1024)

// ---- iree/hal -----------------------------------------------------------

typedef struct iree_hal_device_t iree_hal_device_t;
typedef struct iree_hal_allocator_t iree_hal_allocator_t;
typedef struct iree_hal_buffer_t iree_hal_buffer_t;
typedef struct iree_hal_buffer_view_t iree_hal_buffer_view_t;
typedef struct iree_hal_executable_loader_t iree_hal_executable_loader_t;
typedef iree_device_size_t iree_hal_dim_t;

// Passed by value; zero fields are canonicalized to the defaults.
typedef struct iree_hal_buffer_params_t {
  uint32_t usage;
  uint16_t access;
  uint32_t type;
  uint64_t queue_affinity;
  iree_device_size_t min_alignment;
} iree_hal_buffer_params_t;

// IREE_HAL_MEMORY_TYPE_DEVICE_LOCAL (DEVICE_VISIBLE | 1 << 5) and
// IREE_HAL_BUFFER_USAGE_DEFAULT (TRANSFER | DISPATCH_STORAGE).
#define PM_IREE_MEMORY_TYPE_DEVICE_LOCAL ((1u << 4) | (1u << 5))
#define PM_IREE_BUFFER_USAGE_DEFAULT (3u | (1u << 10) | (1u << 11))

// IREE_HAL_ELEMENT_TYPE_VALUE(FLOAT_IEEE = 0x21, 32) and (SINT = 0x11, 32).
#define PM_IREE_ELEMENT_TYPE_FLOAT_32 ((0x21u << 24) | 32u)
#define PM_IREE_ELEMENT_TYPE_SINT_32 ((0x11u << 24) | 32u)
#define PM_IREE_ENCODING_TYPE_DENSE_ROW_MAJOR 1u

// hal/drivers/local_task/task_device.h
typedef struct iree_hal_task_device_params_t {
  iree_host_size_t arena_block_size;
  uint32_t queue_scope_flags;
} iree_hal_task_device_params_t;

// modules/hal/module.h: both passed by value.
typedef struct iree_hal_module_device_policy_t {
  void* allocator_select_fn;
  void* allocator_select_user_data;
} iree_hal_module_device_policy_t;
typedef struct iree_hal_module_debug_sink_t {
  void* release_fn;
  void* release_user_data;
  void* buffer_view_trace_fn;
  void* buffer_view_trace_user_data;
} iree_hal_module_debug_sink_t;

// ---- iree/vm ------------------------------------------------------------

typedef struct iree_vm_instance_t iree_vm_instance_t;
typedef struct iree_vm_module_t iree_vm_module_t;
typedef struct iree_vm_context_t iree_vm_context_t;
typedef struct iree_vm_list_t iree_vm_list_t;
typedef uintptr_t iree_vm_ref_type_t;

typedef struct iree_vm_ref_t {
  void* ptr;
  iree_vm_ref_type_t type;
} iree_vm_ref_t;

typedef struct iree_vm_function_t {
  iree_vm_module_t* module;
  uint16_t linkage;
  uint16_t ordinal;
} iree_vm_function_t;

// One machine word; all zero is the variant type (any value or ref).
typedef struct iree_vm_type_def_t {
  uintptr_t bits;
} iree_vm_type_def_t;

#define PM_IREE_VM_TYPE_CAPACITY_DEFAULT 32

#endif  // PM_IREE_ABI_H
