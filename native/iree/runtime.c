//go:build iree && cgo

// runtime.c: load an IREE runtime library by name and run compiled
// programs on its CPU device (runtime.h holds the contract, abi.h the
// declarations of IREE's API this file calls).
//
// Sections: symbol table · errors · library · module · call · buffers.

#include "runtime.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "abi.h"

// ===== symbol table =======================================================
// One row per IREE function or variable runtime.c uses: X(name, type). The
// loader resolves each by dlsym and names the first one missing.

#define PM_IREE_SYMBOLS(X)                                                     \
  X(iree_allocator_libc_ctl, iree_allocator_ctl_fn_t)                          \
  X(iree_allocator_free, void (*)(iree_allocator_t, void*))                    \
  X(iree_status_to_string,                                                     \
    bool (*)(iree_status_t, const iree_allocator_t*, char**,                   \
             iree_host_size_t*))                                               \
  X(iree_status_free, void (*)(iree_status_t))                                 \
  X(iree_vm_instance_create,                                                   \
    iree_status_t (*)(iree_host_size_t, iree_allocator_t,                      \
                      iree_vm_instance_t**))                                   \
  X(iree_vm_instance_release, void (*)(iree_vm_instance_t*))                   \
  X(iree_hal_module_register_all_types,                                        \
    iree_status_t (*)(iree_vm_instance_t*))                                    \
  X(iree_task_topology_initialize_from_group_count,                            \
    void (*)(iree_host_size_t, void*))                                         \
  X(iree_task_topology_deinitialize, void (*)(void*))                          \
  X(iree_task_executor_options_initialize,                                     \
    void (*)(iree_task_executor_options_t*))                                   \
  X(iree_task_executor_create,                                                 \
    iree_status_t (*)(iree_task_executor_options_t, const void*,               \
                      iree_allocator_t, iree_task_executor_t**))               \
  X(iree_task_executor_release, void (*)(iree_task_executor_t*))               \
  X(iree_hal_embedded_elf_loader_create,                                       \
    iree_status_t (*)(void*, iree_allocator_t,                                 \
                      iree_hal_executable_loader_t**))                         \
  X(iree_hal_executable_loader_release,                                        \
    void (*)(iree_hal_executable_loader_t*))                                   \
  X(iree_hal_allocator_create_heap,                                            \
    iree_status_t (*)(iree_string_view_t, iree_allocator_t, iree_allocator_t,  \
                      iree_hal_allocator_t**))                                 \
  X(iree_hal_allocator_release, void (*)(iree_hal_allocator_t*))               \
  X(iree_hal_task_device_params_initialize,                                    \
    void (*)(iree_hal_task_device_params_t*))                                  \
  X(iree_hal_task_device_create,                                               \
    iree_status_t (*)(iree_string_view_t,                                      \
                      const iree_hal_task_device_params_t*, iree_host_size_t,  \
                      iree_task_executor_t* const*, iree_host_size_t,          \
                      iree_hal_executable_loader_t**, iree_hal_allocator_t*,   \
                      iree_allocator_t, iree_hal_device_t**))                  \
  X(iree_hal_device_release, void (*)(iree_hal_device_t*))                     \
  X(iree_hal_device_allocator,                                                 \
    iree_hal_allocator_t* (*)(iree_hal_device_t*))                             \
  X(iree_hal_module_device_policy_default,                                     \
    iree_hal_module_device_policy_t (*)(void))                                 \
  X(iree_hal_module_debug_sink_null, iree_hal_module_debug_sink_t (*)(void))   \
  X(iree_hal_module_create,                                                    \
    iree_status_t (*)(iree_vm_instance_t*, iree_hal_module_device_policy_t,    \
                      iree_host_size_t, iree_hal_device_t**, uint32_t,         \
                      iree_hal_module_debug_sink_t, iree_allocator_t,          \
                      iree_vm_module_t**))                                     \
  X(iree_vm_bytecode_module_create,                                            \
    iree_status_t (*)(iree_vm_instance_t*, iree_const_byte_span_t,             \
                      iree_allocator_t, iree_allocator_t,                      \
                      iree_vm_module_t**))                                     \
  X(iree_vm_module_release, void (*)(iree_vm_module_t*))                       \
  X(iree_vm_context_create_with_modules,                                       \
    iree_status_t (*)(iree_vm_instance_t*, uint32_t, iree_host_size_t,         \
                      iree_vm_module_t**, iree_allocator_t,                    \
                      iree_vm_context_t**))                                    \
  X(iree_vm_context_release, void (*)(iree_vm_context_t*))                     \
  X(iree_vm_context_resolve_function,                                          \
    iree_status_t (*)(const iree_vm_context_t*, iree_string_view_t,            \
                      iree_vm_function_t*))                                    \
  X(iree_vm_list_create,                                                       \
    iree_status_t (*)(iree_vm_type_def_t, iree_host_size_t, iree_allocator_t,  \
                      iree_vm_list_t**))                                       \
  X(iree_vm_list_release, void (*)(iree_vm_list_t*))                           \
  X(iree_vm_list_size, iree_host_size_t (*)(const iree_vm_list_t*))            \
  X(iree_vm_list_push_ref_move,                                                \
    iree_status_t (*)(iree_vm_list_t*, iree_vm_ref_t*))                        \
  X(iree_vm_list_get_ref_assign,                                               \
    iree_status_t (*)(const iree_vm_list_t*, iree_host_size_t,                 \
                      iree_vm_ref_t*))                                         \
  X(iree_vm_invoke,                                                            \
    iree_status_t (*)(iree_vm_context_t*, iree_vm_function_t, uint32_t,       \
                      const void*, const iree_vm_list_t*, iree_vm_list_t*,     \
                      iree_allocator_t))                                       \
  X(iree_hal_buffer_view_allocate_buffer_copy,                                 \
    iree_status_t (*)(iree_hal_device_t*, iree_hal_allocator_t*,               \
                      iree_host_size_t, const iree_hal_dim_t*, uint32_t,       \
                      uint32_t, iree_hal_buffer_params_t,                      \
                      iree_const_byte_span_t, iree_hal_buffer_view_t**))       \
  X(iree_hal_buffer_view_move_ref,                                             \
    iree_vm_ref_t (*)(iree_hal_buffer_view_t*))                                \
  X(iree_hal_buffer_view_release, void (*)(iree_hal_buffer_view_t*))           \
  X(iree_hal_buffer_view_registration, iree_vm_ref_type_t*)                    \
  X(iree_hal_buffer_view_shape,                                                \
    iree_status_t (*)(const iree_hal_buffer_view_t*, iree_host_size_t,         \
                      iree_hal_dim_t*, iree_host_size_t*))                     \
  X(iree_hal_buffer_view_element_type,                                         \
    uint32_t (*)(const iree_hal_buffer_view_t*))                               \
  X(iree_hal_buffer_view_element_count,                                        \
    iree_device_size_t (*)(const iree_hal_buffer_view_t*))                     \
  X(iree_hal_buffer_view_buffer,                                               \
    iree_hal_buffer_t* (*)(const iree_hal_buffer_view_t*))                     \
  X(iree_hal_device_transfer_d2h,                                              \
    iree_status_t (*)(iree_hal_device_t*, iree_hal_buffer_t*,                  \
                      iree_device_size_t, void*, iree_device_size_t, uint32_t, \
                      iree_timeout_t))                                         \
  X(iree_hal_device_transfer_h2d,                                              \
    iree_status_t (*)(iree_hal_device_t*, const void*, iree_hal_buffer_t*,     \
                      iree_device_size_t, iree_device_size_t, uint32_t,        \
                      iree_timeout_t))                                         \
  X(iree_hal_buffer_view_retain_ref,                                           \
    iree_vm_ref_t (*)(iree_hal_buffer_view_t*))                                \
  X(iree_vm_list_clear, void (*)(iree_vm_list_t*))

struct pm_iree_rt {
  void* lib;
#define PM_IREE_FIELD(name, type) __typeof__(type) name;
  PM_IREE_SYMBOLS(PM_IREE_FIELD)
#undef PM_IREE_FIELD
};

// ===== errors =============================================================

static void pm_errf(char* err, size_t cap, const char* fmt, ...) {
  if (!err || cap == 0) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, cap, fmt, ap);
  va_end(ap);
}

static iree_allocator_t pm_host(const pm_iree_rt* rt) {
  iree_allocator_t a = {NULL, rt->iree_allocator_libc_ctl};
  return a;
}

// pm_status consumes s: it writes "what: IREE's message" into err and
// returns s's code (0 when s is OK).
static int pm_status(const pm_iree_rt* rt, iree_status_t s, const char* what,
                     char* err, size_t cap) {
  if (!s) return PM_IREE_OK;
  int code = (int)((uintptr_t)s & PM_IREE_STATUS_CODE_MASK);
  iree_allocator_t host = pm_host(rt);
  char* msg = NULL;
  iree_host_size_t len = 0;
  if (rt->iree_status_to_string(s, &host, &msg, &len) && msg) {
    pm_errf(err, cap, "%s: %.*s", what, (int)len, msg);
    rt->iree_allocator_free(host, msg);
  } else {
    pm_errf(err, cap, "%s: IREE status code %d", what, code);
  }
  rt->iree_status_free(s);
  return code ? code : PM_IREE_E_ARG;
}

// ===== library ============================================================

int pm_iree_rt_load(const char* path, pm_iree_rt** out, char* err,
                    size_t errcap) {
  *out = NULL;
  void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* why = dlerror();
    pm_errf(err, errcap, "%s", why ? why : "dlopen failed");
    return PM_IREE_E_DLOPEN;
  }
  pm_iree_rt* rt = calloc(1, sizeof(*rt));
  if (!rt) {
    dlclose(lib);
    return PM_IREE_E_NOMEM;
  }
  rt->lib = lib;
#define PM_IREE_RESOLVE(name, type)                                    \
  {                                                                    \
    void* p = dlsym(lib, #name);                                       \
    if (!p) {                                                          \
      pm_errf(err, errcap, "%s does not export %s", path, #name);      \
      free(rt);                                                        \
      dlclose(lib);                                                    \
      return PM_IREE_E_SYMBOL;                                         \
    }                                                                  \
    *(void**)&rt->name = p;                                            \
  }
  PM_IREE_SYMBOLS(PM_IREE_RESOLVE)
#undef PM_IREE_RESOLVE
  *out = rt;
  return PM_IREE_OK;
}

void pm_iree_rt_free(pm_iree_rt* rt) {
  if (!rt) return;
  dlclose(rt->lib);
  free(rt);
}

// ===== module =============================================================

struct pm_iree_module {
  pm_iree_rt* rt;
  void* archive;     // the .vmfb, 64-byte aligned, owned
  void* topology;    // PM_IREE_TOPOLOGY_BYTES, owned
  iree_vm_instance_t* instance;
  iree_task_executor_t* executor;
  iree_hal_executable_loader_t* loader;
  iree_hal_allocator_t* heap;
  iree_hal_device_t* device;
  iree_vm_module_t* hal;
  iree_vm_module_t* bytecode;
  iree_vm_context_t* context;
  iree_vm_list_t* results;  // the last call's, owned
  // Buffers the module keeps across calls (weights, KV caches, inputs
  // rewritten in place): buffer views, owned, and their element counts.
  iree_hal_buffer_view_t** bufs;
  size_t* buf_len;
  int n_bufs, cap_bufs;
  iree_vm_list_t* args;  // pm_iree_module_invoke's input list, reused
};

void pm_iree_module_close(pm_iree_module* m) {
  if (!m) return;
  const pm_iree_rt* rt = m->rt;
  if (m->results) rt->iree_vm_list_release(m->results);
  if (m->args) rt->iree_vm_list_release(m->args);
  for (int i = 0; i < m->n_bufs; i++)
    rt->iree_hal_buffer_view_release(m->bufs[i]);
  free(m->bufs);
  free(m->buf_len);
  if (m->context) rt->iree_vm_context_release(m->context);
  if (m->bytecode) rt->iree_vm_module_release(m->bytecode);
  if (m->hal) rt->iree_vm_module_release(m->hal);
  if (m->device) rt->iree_hal_device_release(m->device);
  if (m->heap) rt->iree_hal_allocator_release(m->heap);
  if (m->loader) rt->iree_hal_executable_loader_release(m->loader);
  if (m->executor) rt->iree_task_executor_release(m->executor);
  if (m->topology) {
    rt->iree_task_topology_deinitialize(m->topology);
    free(m->topology);
  }
  if (m->instance) rt->iree_vm_instance_release(m->instance);
  free(m->archive);
  free(m);
}

static iree_string_view_t pm_sv(const char* s) {
  iree_string_view_t v = {s, strlen(s)};
  return v;
}

int pm_iree_module_open(pm_iree_rt* rt, const void* vmfb, size_t len,
                        int threads, pm_iree_module** out, char* err,
                        size_t errcap) {
  *out = NULL;
  if (!vmfb || len == 0 || threads < 1 || threads > 64) {
    pm_errf(err, errcap, "bad arguments: %zu bytes, %d threads", len,
            threads);
    return PM_IREE_E_ARG;
  }
  pm_iree_module* m = calloc(1, sizeof(*m));
  if (!m) return PM_IREE_E_NOMEM;
  m->rt = rt;
  size_t rounded = (len + 63) & ~(size_t)63;
  m->archive = aligned_alloc(64, rounded);
  m->topology = calloc(1, PM_IREE_TOPOLOGY_BYTES);
  if (!m->archive || !m->topology) {
    pm_iree_module_close(m);
    return PM_IREE_E_NOMEM;
  }
  memcpy(m->archive, vmfb, len);
  iree_allocator_t host = pm_host(rt);
  iree_allocator_t none = {NULL, NULL};
  int rc;
#define PM_TRY(call, what)                                    \
  if ((rc = pm_status(rt, (call), what, err, errcap)) != 0) { \
    pm_iree_module_close(m);                                  \
    return rc;                                                \
  }
  PM_TRY(rt->iree_vm_instance_create(PM_IREE_VM_TYPE_CAPACITY_DEFAULT, host,
                                     &m->instance),
         "vm instance");
  PM_TRY(rt->iree_hal_module_register_all_types(m->instance), "hal types");

  rt->iree_task_topology_initialize_from_group_count((iree_host_size_t)threads,
                                                     m->topology);
  iree_task_executor_options_t opts;
  memset(&opts, 0, sizeof(opts));
  rt->iree_task_executor_options_initialize(&opts);
  PM_TRY(rt->iree_task_executor_create(opts, m->topology, host, &m->executor),
         "task executor");
  PM_TRY(rt->iree_hal_embedded_elf_loader_create(NULL, host, &m->loader),
         "embedded-elf loader");
  PM_TRY(rt->iree_hal_allocator_create_heap(pm_sv("local"), host, host,
                                            &m->heap),
         "heap allocator");
  iree_hal_task_device_params_t params;
  memset(&params, 0, sizeof(params));
  rt->iree_hal_task_device_params_initialize(&params);
  PM_TRY(rt->iree_hal_task_device_create(pm_sv("local-task"), &params, 1,
                                         &m->executor, 1, &m->loader, m->heap,
                                         host, &m->device),
         "local-task device");
  PM_TRY(rt->iree_hal_module_create(
             m->instance, rt->iree_hal_module_device_policy_default(), 1,
             &m->device, 0, rt->iree_hal_module_debug_sink_null(), host,
             &m->hal),
         "hal module");
  iree_const_byte_span_t span = {(const uint8_t*)m->archive, len};
  PM_TRY(rt->iree_vm_bytecode_module_create(m->instance, span, none, host,
                                            &m->bytecode),
         "bytecode module (.vmfb)");
  iree_vm_module_t* mods[2] = {m->hal, m->bytecode};
  PM_TRY(rt->iree_vm_context_create_with_modules(m->instance, 0, 2, mods, host,
                                                 &m->context),
         "vm context");
#undef PM_TRY
  *out = m;
  return PM_IREE_OK;
}

// ===== call ===============================================================

int pm_iree_module_call(pm_iree_module* m, const char* fn,
                        const pm_iree_tensor* in, int n_in, int* n_out,
                        char* err, size_t errcap) {
  const pm_iree_rt* rt = m->rt;
  iree_allocator_t host = pm_host(rt);
  *n_out = 0;
  if (m->results) {
    rt->iree_vm_list_release(m->results);
    m->results = NULL;
  }
  if (n_in < 0) {
    pm_errf(err, errcap, "bad input count %d", n_in);
    return PM_IREE_E_ARG;
  }
  iree_vm_function_t f;
  memset(&f, 0, sizeof(f));
  int rc = pm_status(rt,
                     rt->iree_vm_context_resolve_function(m->context,
                                                          pm_sv(fn), &f),
                     fn, err, errcap);
  if (rc) return rc;

  iree_vm_type_def_t variant = {0};
  iree_vm_list_t* inputs = NULL;
  iree_vm_list_t* outputs = NULL;
  rc = pm_status(rt,
                 rt->iree_vm_list_create(variant, (iree_host_size_t)n_in,
                                         host, &inputs),
                 "input list", err, errcap);
  if (!rc) {
    rc = pm_status(rt, rt->iree_vm_list_create(variant, 4, host, &outputs),
                   "output list", err, errcap);
  }
  iree_hal_allocator_t* dev_alloc =
      rc ? NULL : rt->iree_hal_device_allocator(m->device);
  for (int i = 0; !rc && i < n_in; i++) {
    const pm_iree_tensor* t = &in[i];
    if (t->rank < 0 || t->rank > PM_IREE_MAX_RANK) {
      pm_errf(err, errcap, "input %d: rank %d", i, t->rank);
      rc = PM_IREE_E_ARG;
      break;
    }
    iree_hal_dim_t dims[PM_IREE_MAX_RANK];
    size_t n = 1;
    for (int d = 0; d < t->rank; d++) {
      dims[d] = (iree_hal_dim_t)t->dims[d];
      n *= (size_t)t->dims[d];
    }
    iree_hal_buffer_params_t bp;
    memset(&bp, 0, sizeof(bp));
    bp.type = PM_IREE_MEMORY_TYPE_DEVICE_LOCAL;
    bp.usage = PM_IREE_BUFFER_USAGE_DEFAULT;
    iree_const_byte_span_t bytes = {(const uint8_t*)t->data, n * sizeof(float)};
    iree_hal_buffer_view_t* view = NULL;
    rc = pm_status(rt,
                   rt->iree_hal_buffer_view_allocate_buffer_copy(
                       m->device, dev_alloc, (iree_host_size_t)t->rank, dims,
                       PM_IREE_ELEMENT_TYPE_FLOAT_32,
                       PM_IREE_ENCODING_TYPE_DENSE_ROW_MAJOR, bp, bytes,
                       &view),
                   "input buffer", err, errcap);
    if (rc) break;
    iree_vm_ref_t ref = rt->iree_hal_buffer_view_move_ref(view);
    rc = pm_status(rt, rt->iree_vm_list_push_ref_move(inputs, &ref),
                   "input list push", err, errcap);
    if (rc) rt->iree_hal_buffer_view_release(view);
  }
  if (!rc) {
    rc = pm_status(rt,
                   rt->iree_vm_invoke(m->context, f, 0, NULL, inputs, outputs,
                                      host),
                   fn, err, errcap);
  }
  if (inputs) rt->iree_vm_list_release(inputs);
  if (rc) {
    if (outputs) rt->iree_vm_list_release(outputs);
    return rc;
  }
  m->results = outputs;
  *n_out = (int)rt->iree_vm_list_size(outputs);
  return PM_IREE_OK;
}

// pm_result returns result i as an f32 buffer view, or NULL with err set.
static iree_hal_buffer_view_t* pm_result(pm_iree_module* m, int i, char* err,
                                         size_t errcap) {
  const pm_iree_rt* rt = m->rt;
  if (!m->results || i < 0 ||
      (iree_host_size_t)i >= rt->iree_vm_list_size(m->results)) {
    pm_errf(err, errcap, "no result %d", i);
    return NULL;
  }
  iree_vm_ref_t ref = {NULL, 0};
  if (pm_status(rt, rt->iree_vm_list_get_ref_assign(m->results, i, &ref),
                "result", err, errcap)) {
    return NULL;
  }
  if (!ref.ptr || ref.type != *rt->iree_hal_buffer_view_registration) {
    pm_errf(err, errcap, "result %d is not a buffer view", i);
    return NULL;
  }
  iree_hal_buffer_view_t* view = (iree_hal_buffer_view_t*)ref.ptr;
  if (rt->iree_hal_buffer_view_element_type(view) !=
      PM_IREE_ELEMENT_TYPE_FLOAT_32) {
    pm_errf(err, errcap, "result %d is not f32", i);
    return NULL;
  }
  return view;
}

int pm_iree_module_result_shape(pm_iree_module* m, int i, int* rank,
                                int64_t* dims, size_t* count, char* err,
                                size_t errcap) {
  iree_hal_buffer_view_t* view = pm_result(m, i, err, errcap);
  if (!view) return PM_IREE_E_RESULT;
  const pm_iree_rt* rt = m->rt;
  iree_hal_dim_t d[PM_IREE_MAX_RANK];
  iree_host_size_t r = 0;
  int rc = pm_status(rt,
                     rt->iree_hal_buffer_view_shape(view, PM_IREE_MAX_RANK, d,
                                                    &r),
                     "result shape", err, errcap);
  if (rc) return rc;
  *rank = (int)r;
  for (iree_host_size_t k = 0; k < r; k++) dims[k] = (int64_t)d[k];
  *count = (size_t)rt->iree_hal_buffer_view_element_count(view);
  return PM_IREE_OK;
}

int pm_iree_module_result_read(pm_iree_module* m, int i, float* dst,
                               size_t count, char* err, size_t errcap) {
  iree_hal_buffer_view_t* view = pm_result(m, i, err, errcap);
  if (!view) return PM_IREE_E_RESULT;
  const pm_iree_rt* rt = m->rt;
  if ((size_t)rt->iree_hal_buffer_view_element_count(view) != count) {
    pm_errf(err, errcap, "result %d: reading %zu elements of %zu", i, count,
            (size_t)rt->iree_hal_buffer_view_element_count(view));
    return PM_IREE_E_ARG;
  }
  if (count == 0) return PM_IREE_OK;
  iree_timeout_t forever = {0, PM_IREE_TIME_INFINITE_FUTURE};
  return pm_status(rt,
                   rt->iree_hal_device_transfer_d2h(
                       m->device, rt->iree_hal_buffer_view_buffer(view), 0,
                       dst, count * sizeof(float), 0, forever),
                   "result read", err, errcap);
}

// ===== buffers ============================================================

int pm_iree_buffer_new(pm_iree_module* m, int rank, const int64_t* dims,
                       const float* data, int* id, char* err, size_t errcap) {
  const pm_iree_rt* rt = m->rt;
  *id = -1;
  if (rank < 0 || rank > PM_IREE_MAX_RANK || !data) {
    pm_errf(err, errcap, "buffer: rank %d, data %p", rank, (const void*)data);
    return PM_IREE_E_ARG;
  }
  if (m->n_bufs == m->cap_bufs) {
    int cap = m->cap_bufs ? 2 * m->cap_bufs : 64;
    iree_hal_buffer_view_t** b = realloc(m->bufs, sizeof(*b) * (size_t)cap);
    if (!b) return PM_IREE_E_NOMEM;
    m->bufs = b;
    size_t* l = realloc(m->buf_len, sizeof(*l) * (size_t)cap);
    if (!l) return PM_IREE_E_NOMEM;
    m->buf_len = l;
    m->cap_bufs = cap;
  }
  iree_hal_dim_t d[PM_IREE_MAX_RANK];
  size_t n = 1;
  for (int k = 0; k < rank; k++) {
    if (dims[k] < 0) {
      pm_errf(err, errcap, "buffer: dim %d is %lld", k, (long long)dims[k]);
      return PM_IREE_E_ARG;
    }
    d[k] = (iree_hal_dim_t)dims[k];
    n *= (size_t)dims[k];
  }
  iree_hal_buffer_params_t bp;
  memset(&bp, 0, sizeof(bp));
  bp.type = PM_IREE_MEMORY_TYPE_DEVICE_LOCAL;
  bp.usage = PM_IREE_BUFFER_USAGE_DEFAULT;
  iree_const_byte_span_t bytes = {(const uint8_t*)data, n * sizeof(float)};
  iree_hal_buffer_view_t* view = NULL;
  int rc = pm_status(rt,
                     rt->iree_hal_buffer_view_allocate_buffer_copy(
                         m->device, rt->iree_hal_device_allocator(m->device),
                         (iree_host_size_t)rank, d,
                         PM_IREE_ELEMENT_TYPE_FLOAT_32,
                         PM_IREE_ENCODING_TYPE_DENSE_ROW_MAJOR, bp, bytes,
                         &view),
                     "buffer", err, errcap);
  if (rc) return rc;
  m->bufs[m->n_bufs] = view;
  m->buf_len[m->n_bufs] = n;
  *id = m->n_bufs++;
  return PM_IREE_OK;
}

int pm_iree_buffer_write(pm_iree_module* m, int id, size_t offset,
                         const float* src, size_t count, char* err,
                         size_t errcap) {
  const pm_iree_rt* rt = m->rt;
  if (id < 0 || id >= m->n_bufs || !src || offset > m->buf_len[id] ||
      count > m->buf_len[id] - offset) {
    pm_errf(err, errcap, "buffer %d: writing %zu elements at %zu", id, count,
            offset);
    return PM_IREE_E_ARG;
  }
  if (count == 0) return PM_IREE_OK;
  iree_timeout_t forever = {0, PM_IREE_TIME_INFINITE_FUTURE};
  return pm_status(
      rt,
      rt->iree_hal_device_transfer_h2d(
          m->device, src, rt->iree_hal_buffer_view_buffer(m->bufs[id]),
          (iree_device_size_t)(offset * sizeof(float)),
          (iree_device_size_t)(count * sizeof(float)), 0, forever),
      "buffer write", err, errcap);
}

int pm_iree_module_invoke(pm_iree_module* m, const char* fn, const int* ids,
                          int n, int* n_out, char* err, size_t errcap) {
  const pm_iree_rt* rt = m->rt;
  iree_allocator_t host = pm_host(rt);
  *n_out = 0;
  if (m->results) {
    rt->iree_vm_list_release(m->results);
    m->results = NULL;
  }
  if (n < 0) {
    pm_errf(err, errcap, "bad input count %d", n);
    return PM_IREE_E_ARG;
  }
  iree_vm_function_t f;
  memset(&f, 0, sizeof(f));
  int rc = pm_status(rt,
                     rt->iree_vm_context_resolve_function(m->context,
                                                          pm_sv(fn), &f),
                     fn, err, errcap);
  if (rc) return rc;
  iree_vm_type_def_t variant = {0};
  if (!m->args) {
    rc = pm_status(rt,
                   rt->iree_vm_list_create(variant, (iree_host_size_t)n, host,
                                           &m->args),
                   "input list", err, errcap);
    if (rc) return rc;
  }
  rt->iree_vm_list_clear(m->args);
  for (int i = 0; i < n; i++) {
    if (ids[i] < 0 || ids[i] >= m->n_bufs) {
      pm_errf(err, errcap, "input %d: no buffer %d", i, ids[i]);
      rt->iree_vm_list_clear(m->args);
      return PM_IREE_E_ARG;
    }
    // The list holds a reference; the module keeps its own.
    iree_vm_ref_t ref = rt->iree_hal_buffer_view_retain_ref(m->bufs[ids[i]]);
    rc = pm_status(rt, rt->iree_vm_list_push_ref_move(m->args, &ref),
                   "input list push", err, errcap);
    if (rc) {
      rt->iree_hal_buffer_view_release(m->bufs[ids[i]]);
      rt->iree_vm_list_clear(m->args);
      return rc;
    }
  }
  iree_vm_list_t* outputs = NULL;
  rc = pm_status(rt, rt->iree_vm_list_create(variant, 4, host, &outputs),
                 "output list", err, errcap);
  if (!rc) {
    rc = pm_status(rt,
                   rt->iree_vm_invoke(m->context, f, 0, NULL, m->args,
                                      outputs, host),
                   fn, err, errcap);
  }
  rt->iree_vm_list_clear(m->args);
  if (rc) {
    if (outputs) rt->iree_vm_list_release(outputs);
    return rc;
  }
  m->results = outputs;
  *n_out = (int)rt->iree_vm_list_size(outputs);
  return PM_IREE_OK;
}
