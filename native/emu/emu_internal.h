/* Internal interfaces of the emulated CUDA driver (see cuda_emu.h). */
#ifndef REDZONE_EMU_INTERNAL_H
#define REDZONE_EMU_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cu.h"

#include "emu_entry.h"

/* ---- device trace (emu_devtrace.c): CUDA_EMU_TRACE `dev` lines ---- */
/* The entry point being run on this thread and its caller (set by emu_enter). */
void emu_trace_enter(enum emu_ep ep, void *caller);
bool emu_trace_on(void);
/* Reads CUDA_EMU_TRACE (once, with the rest of the configuration). */
void emu_trace_configure(const char *path);
/* A device allocation was made / freed (or its stream-ordered free called) by the current entry point. */
void emu_trace_alloc(rzcu_deviceptr base, size_t size);
void emu_trace_free(rzcu_deviceptr base);
/* The serial number of the allocation last made at base (false: none known); a `dev` line for what the
 * current entry point did (what: "alloc a3 size=1064", ...). */
bool emu_trace_serial_of(rzcu_deviceptr base, unsigned long long *serial);
void emu_trace_emit(const char *what);
/* The current entry point writes [dst, dst + n) of device memory (copies, memsets, batch items):
 * emu_trace_writes.c. */
void emu_trace_write(rzcu_deviceptr dst, size_t n);

/* ---- error codes (emu_errors.c) ---- */
const char *emu_error_name(rzcu_result r);   /* NULL when unknown */
const char *emu_error_string(rzcu_result r); /* NULL when unknown */
bool emu_error_by_name(const char *name, rzcu_result *out);
/* r is one of the errors cuda.h says leave "the process in an inconsistent state and any further CUDA work
 * will return the same error" (ILLEGAL_ADDRESS, LAUNCH_FAILED, ...). */
bool emu_error_is_sticky(rzcu_result r);

/* ---- cuGetProcAddress (emu_proc_address.c) ---- */
rzcu_result emu_get_proc_address(const char *symbol, void **pfn, int cuda_version, rzcu_uint64 flags,
                                 rzcu_proc_query_result *status);

/* ---- memory (emu_mem.c) ---- */
struct CUctx_st;
rzcu_result emu_mem_init(void);
/* device: the device whose memory it is (accounting); ctx: the owner, whose teardown frees it. */
rzcu_result emu_mem_alloc(struct CUctx_st *ctx, int device, size_t size, rzcu_deviceptr *out);
/* CUDA_SUCCESS, or CUDA_ERROR_INVALID_VALUE when p is not the base of a live allocation. */
rzcu_result emu_mem_free(rzcu_deviceptr p);
/*
 * Stream-ordered free, in two steps: at the call, the allocation (a live base) is marked free-pending; from
 * then on it is no longer live for lookups, range checks and frees (CUDA_ERROR_INVALID_VALUE when p is not a
 * live base). When the stream reaches the free, emu_mem_free_pending releases it (a no-op unless p is still
 * a free-pending base).
 */
rzcu_result emu_mem_mark_free_pending(rzcu_deviceptr p);
void emu_mem_free_pending(rzcu_deviceptr p);
bool emu_mem_is_base(rzcu_deviceptr p);
/*
 * Graph memory (emu_mem.c): the allocation of a graph's allocation node, with the graph memory id `id`
 * (nonzero). cuMemFree and cuMemFreeAsync give it back to its graph (not live: no lookup, range check or
 * free finds it) instead of releasing it. emu_mem_graph_id: the id of the live graph allocation whose base
 * is p (0: none). emu_mem_graph_state: 1 live, 0 not live, -1 no such allocation. emu_mem_graph_release:
 * the graph is gone; released when not live, else left to the program's free.
 */
rzcu_result emu_mem_graph_alloc(struct CUctx_st *ctx, int device, size_t size, uint64_t id, rzcu_deviceptr *out);
uint64_t emu_mem_graph_id(rzcu_deviceptr p);
int emu_mem_graph_state(rzcu_deviceptr p, uint64_t id);
void emu_mem_graph_set_live(rzcu_deviceptr p, uint64_t id, bool live);
void emu_mem_graph_release(rzcu_deviceptr p, uint64_t id);
/* p is the base of a live allocation: its serial number (unique in the process, never reused). */
bool emu_mem_base_serial(rzcu_deviceptr p, uint64_t *serial);
/* p is the base of a live allocation from the stream-ordered allocator (emu_alloc.c). */
bool emu_mem_is_pool(rzcu_deviceptr p);
bool emu_mem_lookup(rzcu_deviceptr p, rzcu_deviceptr *base, size_t *size);
/* Index of the first of count ranges (device ones only; sizes[i] == 0 is skipped) that is not inside one
 * allocation, or count when all are. One lock for the lot. */
size_t emu_mem_ranges_ok(const rzcu_deviceptr *ptrs, const size_t *sizes, size_t count);
/* The context that allocated the device allocation containing p, and its device. */
bool emu_mem_owner(rzcu_deviceptr p, struct CUctx_st **ctx, int *device);
/* [p, p+n) within one live allocation, or within one VMM mapping and readable (n > 0). */
bool emu_mem_range_ok(rzcu_deviceptr p, size_t n);
/* The same for ranges that are written: a VMM range must be read-write. */
bool emu_mem_range_writable(rzcu_deviceptr p, size_t n);
size_t emu_mem_ranges_writable(const rzcu_deviceptr *ptrs, const size_t *sizes, size_t count);
/* p lies in the emulated device address range. */
bool emu_mem_is_device_address(uintptr_t p);
void emu_mem_free_context(struct CUctx_st *ctx);
void emu_mem_info(int device, size_t *free_bytes, size_t *total_bytes);
/* ---- copies (emu_copy.c) ---- */
/* Whether a copy's call returns only once it has completed: a synchronous one, and an asynchronous one from
 * device memory into pageable host memory [host, host + n) (not cuMemAllocHost/cuMemHostAlloc memory nor
 * registered), as the driver documents. */
bool emu_copy_waits(bool async, bool device_to_host, const void *host, size_t n);
/* ---- IPC memory handles (emu_ipc.c) ---- */
/* The context ends: its opened handles are closed. */
void emu_ipc_free_context(struct CUctx_st *ctx);
/* ---- pinned host memory (emu_host.c) ---- */
void emu_host_free_context(struct CUctx_st *ctx);
/* [p, p + n) lies in one cuMemAllocHost / cuMemHostAlloc block or cuMemHostRegister range. */
bool emu_host_is_pinned(const void *p, size_t n);

/*
 * ---- virtual memory management (state in emu_mem_vmm.c, entry points in emu_vmm.c) ----
 * The entry points check what needs no state (NULL pointers, flags, alignment to the granularity, the
 * properties and access descriptors); these check the rest under the memory lock and return the result.
 */
rzcu_result emu_vmm_reserve(size_t size, size_t alignment, rzcu_deviceptr hint, rzcu_deviceptr *out);
rzcu_result emu_vmm_address_free(rzcu_deviceptr p, size_t size);
rzcu_result emu_vmm_create(int device, size_t size, rzcu_mem_generic_alloc_handle *out);
rzcu_result emu_vmm_release(rzcu_mem_generic_alloc_handle h);
rzcu_result emu_vmm_map(rzcu_deviceptr p, size_t size, size_t offset, rzcu_mem_generic_alloc_handle h);
rzcu_result emu_vmm_unmap(rzcu_deviceptr p, size_t size);
rzcu_result emu_vmm_set_access(rzcu_deviceptr p, size_t size, const rzcu_mem_access_desc *desc, size_t count);
void emu_vmm_usage(cuda_emu_vmm_usage_t *usage);

/* ---- contexts (emu_context.c; emu_sync_outstanding: emu_stream.c) ---- */
int emu_context_device(struct CUctx_st *ctx);
unsigned emu_context_gen(struct CUctx_st *ctx);
/* ctx is alive in activation gen (a primary context released and retained again is a new activation). */
bool emu_context_live(struct CUctx_st *ctx, unsigned gen);
/* Completes all outstanding work of every context (the driver's implicit synchronisation before memory
 * leaves use: queued copies and kernels never touch memory unmapped or made inaccessible after them). */
void emu_sync_outstanding(void);

/* ---- handle tables (emu_table.c) ---- */
/* A reserved table of fixed-size slots, never reused: a handle is validated by range and alignment without
 * touching foreign memory; only the used part is dumped to core files. */
struct emu_table {
    const char *what;
    size_t elem, max;
    char *base;
    atomic_size_t n;
    pthread_mutex_t dump_mu;
    size_t dump_mark;
};
#define EMU_TABLE_INIT(what, type, max) {what, sizeof(type), max, NULL, 0, PTHREAD_MUTEX_INITIALIZER, 0}
bool emu_table_init(struct emu_table *t);
void *emu_table_new(struct emu_table *t);            /* a zeroed slot, NULL when full */
void *emu_table_slot(struct emu_table *t, const void *h); /* h when it is a handed-out slot, else NULL */

/* ---- modules and functions (emu_module.c) ---- */
bool emu_modules_init(void);
struct CUfunc_st;
/* A function handle whose module is loaded in a live context: its kernel, parameter sizes and context. */
struct emu_kernel {
    cuda_emu_kernel_fn *fn;
    const size_t *sizes; /* nparams sizes */
    size_t nparams;
    struct CUctx_st *ctx;
};
/* A function handle of a loaded module: CUDA_SUCCESS, or CUDA_ERROR_INVALID_HANDLE for NULL, unknown or
 * unloaded functions. */
rzcu_result emu_module_function_resolve(rzcu_function f, struct emu_kernel *out);
/* Internal halves of cuModuleLoadData, cuModuleUnload, cuModuleGetFunction (no call counting, no checks of
 * the current context), and the lookup of a kernel's host function and parameter sizes by name. */
rzcu_result emu_module_new(struct CUctx_st *c, rzcu_module *pmod);
rzcu_result emu_module_unload(rzcu_module hmod);
rzcu_result emu_module_get_function(rzcu_function *pf, rzcu_module hmod, const char *name);
rzcu_result emu_kernel_lookup(const char *name, cuda_emu_kernel_fn **fn, const size_t **sizes, size_t *n);
/* emu_twins.c: the host twin of a kernel of the library's module (false: none of that name). */
bool emu_twin_lookup(const char *name, cuda_emu_kernel_fn **fn, const size_t **sizes, size_t *n);

/* ---- libraries and their kernels (emu_library.c) ---- */
bool emu_libraries_init(void);
/* A live kernel handle: its kernel, with ctx NULL. CUDA_ERROR_INVALID_HANDLE otherwise. */
rzcu_result emu_library_kernel_resolve(rzcu_kernel k, struct emu_kernel *out);
/* What a launch runs (emu_library.c): CUDA_SUCCESS, or CUDA_ERROR_INVALID_HANDLE for NULL, unknown or
 * unloaded functions. A CUkernel passed as a CUfunction (as cudart 12 launches library kernels) resolves
 * with ctx NULL: it runs in any context. */
rzcu_result emu_function_resolve(rzcu_function f, struct emu_kernel *out);

/* ---- capture modes (emu_capture.c) ---- */
/* At the entry of a potentially unsafe call (the allocation family cuThreadExchangeStreamCaptureMode's
 * documentation names; the queries and synchronisations of events, streams and contexts; the pointer
 * attribute queries): CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, invalidating the captures concerned, when the
 * calling thread's mode and the captures in progress prohibit it; CUDA_SUCCESS otherwise. */
rzcu_result emu_capture_unsafe_call(void);

#endif /* REDZONE_EMU_INTERNAL_H */
