/*
 * The emulated CUDA driver (libcuda.so.1 built from native/emu): a CUDA 13 driver API on host memory, used
 * to run redzone end to end on machines without a GPU. This header declares what the emulator exports
 * beyond cu.h: the `cuEmu*` extension functions (for tests and tools) and the extra driver entry points it
 * implements that cu.h does not list.
 *
 * Environment (read on the first driver call, never from a constructor):
 *   CUDA_EMU_DEVICES=<n>   number of devices, 1..8 (default 1)
 *   CUDA_EMU_MEM=<bytes>   device memory per device, decimal bytes with an optional K/M/G/T (binary) suffix
 *                          (default 16 GiB)
 *   CUDA_EMU_STATS=1       print `cuda-emu: <entry point> <calls>` on stderr at exit, for every entry point
 *                          called at least once
 *   CUDA_EMU_FAIL=<entry point>:<nth>[:<error>][,...]
 *                          the nth call (1-based, counted from process start or from the last
 *                          cuEmuResetCallCounts) of that exported entry point (its exported name, e.g.
 *                          cuMemAlloc_v2) returns <error> (a CUresult name or number) without doing anything.
 *                          Default error: CUDA_ERROR_OUT_OF_MEMORY for cuMemAlloc_v2, cuMemAllocPitch_v2,
 *                          cuMemAllocManaged, cuMemAllocHost_v2, the cuMemAlloc*Async entry points,
 *                          cuMemCreate and cuMemAddressReserve; CUDA_ERROR_UNKNOWN otherwise. Every
 *                          injected failure fires once; a sticky one (CUDA_ERROR_ILLEGAL_ADDRESS,
 *                          LAUNCH_FAILED, ...: RZCU_STICKY_RESULTS) then stays, the process's, and every later
 *                          call returns it, as a kernel fault's does (docs/emulated-driver.md, Sticky errors)
 *   CUDA_EMU_SIGNAL=<entry point>:<nth>:<signal number>[,...]
 *                          the nth call of that entry point raises the signal in the calling thread, then
 *                          runs normally if the handler returns (a signal in the middle of a library's
 *                          work, deterministically). Fires once.
 *   CUDA_EMU_SHUTDOWN_AT_EXIT=1
 *                          as a real driver does: cuInit registers an exit handler that shuts the driver
 *                          down; calls made after it (from exit handlers registered before cuInit) return
 *                          CUDA_ERROR_DEINITIALIZED
 *   CUDA_EMU_KERNEL_HOLD=1 a kernel starts only once some thread waits for device work that has not completed
 *                          (a synchronisation, a blocking call such as cuMemFree, a queued operation waiting
 *                          for another stream), as on a GPU busy with earlier work: a call that reads device
 *                          memory without first waiting for the kernels before it sees their effects never
 *                          (a program that polls for completion instead of waiting never finishes)
 *   CUDA_EMU_KERNEL_NS=<n> every kernel takes n nanoseconds (0..60e9, default 0): its stream's worker sleeps
 *                          that long after running it, so a host wait the program did not ask for shows in
 *                          wall time too (see cuEmuHostWaits for the count)
 *   CUDA_EMU_TRACE=<path>  append a `dev` line to <path> (%p: the process id) for every device allocation,
 *                          free and write the driver performs, naming the entry point and the object (and
 *                          its exported function) that called it; see docs/emulated-driver.md
 * A malformed value prints one `cuda-emu: warning: ...` line on stderr and the default is used (for
 * CUDA_EMU_FAIL: no injected failures).
 *
 * Kernels: cuModuleLoadData accepts any non-NULL image (PTX, cubin, fatbin: never interpreted). The kernels
 * themselves are host functions of the program, found by name when cuModuleGetFunction(&f, mod, "<name>")
 * is called (through dlsym(RTLD_DEFAULT), so the program links with -rdynamic / ENABLE_EXPORTS, or the
 * kernels live in a shared object):
 *   void cuda_emu_kernel_<name>(const cuda_emu_launch_t *launch, void **params);   the kernel (required:
 *                          else CUDA_ERROR_NOT_FOUND)
 *   const size_t cuda_emu_kernel_<name>_params[];   each parameter's size in bytes, ended by a 0 (what the
 *                          real driver reads from the kernel's metadata; absent: the kernel has no parameters)
 * CUDA_EMU_KERNEL(name, sizes...) / CUDA_EMU_KERNEL_NO_PARAMS(name) define both with default visibility. A
 * launch copies the parameters (kernelParams[i] points at parameter i, as on a GPU) when it is called, then
 * runs the kernel ONCE, asynchronously and in stream order, on the stream's worker thread: params[i] points
 * at the copy of parameter i, and the kernel loops over launch->grid and launch->block itself if it wants
 * to. Device pointers are host addresses in the emulator, so the kernel dereferences them directly (an
 * access outside mapped device memory faults, as a GPU raises an illegal address). Launch checks: grid and
 * block dimensions within the device's limits (none 0, at most 1024 threads a block), dynamic shared memory
 * at most 48 KiB, kernelParams and extra not both given; `extra` (a parameter buffer) is
 * CUDA_ERROR_NOT_SUPPORTED unless it is an empty list; cuLaunchKernelEx accepts the launch attributes that
 * do not change what a kernel computes (see docs/emulated-driver.md) and returns CUDA_ERROR_NOT_SUPPORTED for
 * the others (cluster dimensions, programmatic and completion events, device-updatable nodes).
 *
 * Emulation notes: device allocations are CUDA_EMU_ALLOC_ALIGN-aligned addresses in one reserved address
 * range shared by all devices (unified addressing), distinct from the host heap; device memory accounting
 * (cuMemGetInfo) counts each allocation rounded up to CUDA_EMU_ALLOC_ALIGN. A device range given to a copy
 * or memset must lie within the requested size of one live allocation. Work on streams runs in stream
 * order, with legacy default stream semantics, asynchronously on per-stream worker threads named
 * "cuda-emu-s<N>", except that a copy, memset, batched copy or event record submitted to an idle stream
 * (nothing queued or running) with no pending dependency (none on a non-blocking stream; earlier
 * blocking-stream work for the legacy stream, earlier legacy work for a blocking one) runs in the calling
 * thread before the call returns, as a GPU's copy engines need no host thread: a debugger that resumes
 * only one thread can still copy and synchronise on its own stream. Kernels and host functions always run
 * on the worker. Synchronising on completed work needs no other thread. As the driver documents, an
 * asynchronous copy from device memory into pageable host memory (not cuMemAllocHost/cuMemHostAlloc memory,
 * not registered) returns only once it has completed. cuMemAllocAsync allocates at the
 * call (the memory is valid earlier than the driver promises); cuMemFreeAsync (of memory from any
 * allocation call) takes the allocation out of use at the call (later copies, memsets and frees of it are
 * CUDA_ERROR_INVALID_VALUE) and releases it when the stream reaches the free.
 *
 * Virtual memory management (cuMemAddressReserve, cuMemCreate, cuMemMap, cuMemSetAccess, ...; details in
 * docs/emulated-driver.md): the granularity is CUDA_EMU_VMM_GRANULARITY (minimum and recommended).
 * Reservations are ranges of the device address range whose host pages stay PROT_NONE except where a handle
 * is mapped and cuMemSetAccess granted access (READ: PROT_READ, READWRITE: PROT_READ|PROT_WRITE), so a
 * kernel (host code) touching reserved-but-unmapped or mapped-but-inaccessible memory faults (SIGSEGV) at
 * the faulting instruction. Copies and memsets accept a device range inside one mapping that is readable
 * (sources) or read-write (destinations); anything else is CUDA_ERROR_INVALID_VALUE. Physical memory
 * (cuMemCreate) counts against CUDA_EMU_MEM and cuMemGetInfo; cuEmuVmmUsage reports what is held.
 */
#ifndef REDZONE_CUDA_EMU_H
#define REDZONE_CUDA_EMU_H

#include <stddef.h>

#include "cu.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CUDA_EMU_DRIVER_VERSION 13000
#define CUDA_EMU_ALLOC_ALIGN 256u
#define CUDA_EMU_PITCH_ALIGN 512u
#define CUDA_EMU_MAX_DEVICES 8
/* cuMemGetAllocationGranularity, minimum and recommended: 2 MiB, as on current GPUs. */
#define CUDA_EMU_VMM_GRANULARITY ((size_t)2 << 20)

/* ---- emulated kernels (see above) ---- */
typedef struct cuda_emu_dim3 {
    unsigned int x, y, z;
} cuda_emu_dim3;

/* What a kernel is launched with. */
typedef struct cuda_emu_launch {
    cuda_emu_dim3 grid;        /* blocks */
    cuda_emu_dim3 block;       /* threads per block */
    unsigned int shared_bytes; /* dynamic shared memory per block (nothing is allocated for it) */
} cuda_emu_launch_t;

typedef void cuda_emu_kernel_fn(const cuda_emu_launch_t *launch, void **params);

#define CUDA_EMU_KERNEL_PREFIX "cuda_emu_kernel_"
#define CUDA_EMU_KERNEL_PARAMS_SUFFIX "_params"

#ifdef __cplusplus
#define CUDA_EMU_KERNEL_LINKAGE_ extern "C" __attribute__((visibility("default"), used))
#define CUDA_EMU_KERNEL_TABLE_DECL_(name)
#else
#define CUDA_EMU_KERNEL_LINKAGE_ __attribute__((visibility("default"), used))
#define CUDA_EMU_KERNEL_TABLE_DECL_(name) extern const size_t cuda_emu_kernel_##name##_params[];
#endif

/*
 * Defines the emulated kernel `name` with the given parameter sizes (at least one; see
 * CUDA_EMU_KERNEL_NO_PARAMS); the body follows, with `launch` and `params` in scope:
 *     CUDA_EMU_KERNEL(fill, sizeof(CUdeviceptr), sizeof(size_t))
 *     {
 *         unsigned char *p = (unsigned char *)CUDA_EMU_PARAM(CUdeviceptr, 0);
 *         memset(p, 1, CUDA_EMU_PARAM(size_t, 1));
 *     }
 */
#define CUDA_EMU_KERNEL(name, ...)                                                                            \
    CUDA_EMU_KERNEL_TABLE_DECL_(name)                                                                         \
    CUDA_EMU_KERNEL_LINKAGE_ const size_t cuda_emu_kernel_##name##_params[] = {__VA_ARGS__, 0};              \
    CUDA_EMU_KERNEL_NO_TABLE_(name)
#define CUDA_EMU_KERNEL_NO_PARAMS(name) CUDA_EMU_KERNEL_NO_TABLE_(name)
#define CUDA_EMU_KERNEL_NO_TABLE_(name)                                                                       \
    CUDA_EMU_KERNEL_LINKAGE_ void cuda_emu_kernel_##name(const cuda_emu_launch_t *launch, void **params);    \
    CUDA_EMU_KERNEL_LINKAGE_ void cuda_emu_kernel_##name(const cuda_emu_launch_t *launch                     \
                                                         __attribute__((unused)),                             \
                                                         void **params __attribute__((unused)))
/* Parameter i of the running kernel, as a `type` lvalue (inside a CUDA_EMU_KERNEL body). */
#define CUDA_EMU_PARAM(type, i) (*(type *)params[i])

/* 1: the process runs on the emulated driver. */
int cuEmuIsEmulated(void);
/* Calls of an exported driver entry point (exact exported name) since process start or the last reset;
 * 0 for an unknown name. */
unsigned long long cuEmuCallCount(const char *entry_point);
/* Calls of every exported driver entry point together, since process start or the last reset. */
unsigned long long cuEmuCallCountAll(void);
/* Host waits since process start or the last reset: calls that, by their contract, return only once device
 * work has completed (context, stream and recorded-event synchronisations, synchronous copies and memsets,
 * asynchronous copies into pageable host memory, cuMemFree of memory not from the stream-ordered allocator,
 * cuMemFreeHost, cuMemHostUnregister, a context's destruction, ...), counted once per call whether or not
 * the work had completed (so the count is the same on every run). entry_point NULL: all of them; else those
 * of that exported entry point (0 for an unknown name). Reset with the call counts. */
unsigned long long cuEmuHostWaits(const char *entry_point);
/* Gives every kernel launched from now on a duration of ns nanoseconds (as CUDA_EMU_KERNEL_NS). */
void cuEmuSetKernelDuration(unsigned long long ns);
/* Sets every call count to 0. Pending CUDA_EMU_FAIL failures then count from here; pending
 * cuEmuInjectFailure ones keep their distance (nth = 1 still means the next call). */
void cuEmuResetCallCounts(void);
/* Makes the nth next call (nth = 1: the next one) of entry_point return `error` (nonzero) without doing
 * anything; fires once (a sticky error then stays, as with CUDA_EMU_FAIL). Returns 0, or -1 for an unknown entry point, nth == 0 or error == CUDA_SUCCESS. */
int cuEmuInjectFailure(const char *entry_point, unsigned long long nth, unsigned int error);
/* Drops every pending injected failure and signal (from the API, CUDA_EMU_FAIL and CUDA_EMU_SIGNAL). */
void cuEmuClearFailures(void);
/* Makes the nth next call of entry_point raise signal signo in the calling thread before it runs (the call
 * then runs normally if the handler returns); fires once. Returns 0, or -1 for an unknown entry point,
 * nth == 0 or a bad signal number. */
int cuEmuInjectSignal(const char *entry_point, unsigned long long nth, int signo);
/* With CUDA_EMU_TRACE: the serial number (a<k> in the trace's `dev` lines) of the live device allocation
 * containing p, and p's offset in it. Returns 0, or -1 when p is in no live allocation or there is no
 * trace. */
int cuEmuTraceSerial(rzcu_deviceptr p, unsigned long long *serial, unsigned long long *offset);
/* A store or load by device code that no interposer sees, for test programs: n bytes from host memory to
 * device memory (cuEmuDeviceStore) or back (cuEmuDeviceLoad), checked and ordered as cuMemcpyHtoD/cuMemcpyDtoH
 * are (one live allocation must hold the device range, else CUDA_ERROR_INVALID_VALUE and nothing moves; after
 * the legacy stream's earlier work), but not driver entry points: what a kernel writing or reading past a
 * buffer's end leaves behind, without a launch. An interposer that writes bands lazily has not seen device
 * work for it: a test makes some first (a zero-byte cuMemsetD8 is enough). */
rzcu_result cuEmuDeviceStore(rzcu_deviceptr dst, const void *src, size_t n);
rzcu_result cuEmuDeviceLoad(void *dst, rzcu_deviceptr src, size_t n);
/* Shuts the driver down as a real one does at process exit: every later call of every entry point returns
 * CUDA_ERROR_DEINITIALIZED. */
void cuEmuShutdown(void);

/* Virtual memory management held right now (all devices), to prove that memory is fully released. */
typedef struct cuda_emu_vmm_usage {
    size_t physical_bytes; /* cuMemCreate memory not yet freed (a released handle still mapped counts) */
    size_t allocations;    /* such physical allocations */
    size_t reserved_bytes; /* cuMemAddressReserve ranges not yet freed, in whole granules */
    size_t mapped_bytes;   /* cuMemMap mappings not yet unmapped */
} cuda_emu_vmm_usage_t;
/* Fills *usage; usable before cuInit (all zero then). */
void cuEmuVmmUsage(cuda_emu_vmm_usage_t *usage);

/*
 * The descriptors of cuMemcpy2D_v2 / cuMemcpy3D_v2 and their variants (CUDA_MEMCPY2D and CUDA_MEMCPY3D of
 * cuda.h, the _v2 layout with size_t fields), and the memory types they name (CUmemorytype). The emulator
 * has no CUDA arrays: CUDA_EMU_MEMORYTYPE_ARRAY is refused (see docs/emulated-driver.md).
 */
#define CUDA_EMU_MEMORYTYPE_HOST RZCU_MEMORYTYPE_HOST
#define CUDA_EMU_MEMORYTYPE_DEVICE RZCU_MEMORYTYPE_DEVICE
#define CUDA_EMU_MEMORYTYPE_ARRAY RZCU_MEMORYTYPE_ARRAY
#define CUDA_EMU_MEMORYTYPE_UNIFIED RZCU_MEMORYTYPE_UNIFIED

/* cu.h's descriptors (their layout checked against cuda.h by cu_check.c); reserved0/1 are srcContext and
 * dstContext there, and must be NULL. */
typedef rzcu_memcpy2d cuda_emu_memcpy2d_t;
typedef rzcu_memcpy3d cuda_emu_memcpy3d_t;

/* CUipcMemHandle: 64 opaque bytes, passed by value (cu.h's type, which libredzone's wrappers take). */
typedef rzcu_ipc_mem_handle cuda_emu_ipc_mem_handle_t;
#define CUDA_EMU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS RZCU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS
#define CUDA_EMU_MEMHOSTALLOC_PORTABLE 0x1
#define CUDA_EMU_MEMHOSTALLOC_DEVICEMAP 0x2
#define CUDA_EMU_MEMHOSTALLOC_WRITECOMBINED 0x4

/* Memory pools (emu_pool.c): CUmemPoolProps, CUmemPool_attribute and CUmemPoolPtrExportData of cuda.h
 * (their layout checked against cuda.h by tests/test_emu_mempool.c when the toolkit is there). */
typedef struct cuda_emu_mem_pool_props {
    unsigned int allocType;   /* CU_MEM_ALLOCATION_TYPE_PINNED */
    unsigned int handleTypes; /* CUmemAllocationHandleType bits */
    rzcu_mem_location location;
    void *win32SecurityAttributes;
    size_t maxSize;
    unsigned short usage;
    unsigned char reserved[54];
} cuda_emu_mem_pool_props_t;
typedef struct cuda_emu_mem_pool_ptr_export_data {
    unsigned char reserved[64];
} cuda_emu_mem_pool_ptr_export_data_t;
#define CUDA_EMU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES 1
#define CUDA_EMU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC 2
#define CUDA_EMU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES 3
#define CUDA_EMU_MEMPOOL_ATTR_RELEASE_THRESHOLD 4
#define CUDA_EMU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT 5
#define CUDA_EMU_MEMPOOL_ATTR_RESERVED_MEM_HIGH 6
#define CUDA_EMU_MEMPOOL_ATTR_USED_MEM_CURRENT 7
#define CUDA_EMU_MEMPOOL_ATTR_USED_MEM_HIGH 8

/* Driver entry points the emulator exports beyond cu.h's lists (X(name, ret, params), as in cu.h). */
struct CUgraph_st;     /* CUgraph */
struct CUgraphExec_st; /* CUgraphExec */
struct CUgraphNode_st; /* CUgraphNode */
struct CUgraphEdgeData_st; /* CUgraphEdgeData */
#define CUDA_EMU_EXTRA_ENTRY_POINTS(X)                                                                        \
    X(cuMemcpy2D_v2, rzcu_result, (const cuda_emu_memcpy2d_t *copy)) \
    X(cuMemcpy2D_v2_ptds, rzcu_result, (const cuda_emu_memcpy2d_t *copy)) \
    X(cuMemcpy2DUnaligned_v2, rzcu_result, (const cuda_emu_memcpy2d_t *copy)) \
    X(cuMemcpy2DUnaligned_v2_ptds, rzcu_result, (const cuda_emu_memcpy2d_t *copy)) \
    X(cuMemcpy2DAsync_v2, rzcu_result, (const cuda_emu_memcpy2d_t *copy, rzcu_stream s)) \
    X(cuMemcpy2DAsync_v2_ptsz, rzcu_result, (const cuda_emu_memcpy2d_t *copy, rzcu_stream s)) \
    X(cuMemcpy3D_v2, rzcu_result, (const cuda_emu_memcpy3d_t *copy)) \
    X(cuMemcpy3D_v2_ptds, rzcu_result, (const cuda_emu_memcpy3d_t *copy)) \
    X(cuMemcpy3DAsync_v2, rzcu_result, (const cuda_emu_memcpy3d_t *copy, rzcu_stream s)) \
    X(cuMemcpy3DAsync_v2_ptsz, rzcu_result, (const cuda_emu_memcpy3d_t *copy, rzcu_stream s)) \
    X(cuStreamWaitEvent_ptsz, rzcu_result, (rzcu_stream s, rzcu_event e, unsigned int flags)) \
    X(cuMemHostAlloc, rzcu_result, (void **pp, size_t bytesize, unsigned int flags)) \
    X(cuMemHostGetDevicePointer_v2, rzcu_result, (rzcu_deviceptr * pdptr, void *p, unsigned int flags)) \
    X(cuIpcGetMemHandle, rzcu_result, (cuda_emu_ipc_mem_handle_t * handle, rzcu_deviceptr dptr)) \
    X(cuIpcOpenMemHandle, rzcu_result, (rzcu_deviceptr * pdptr, cuda_emu_ipc_mem_handle_t handle, unsigned int flags)) \
    X(cuIpcOpenMemHandle_v2, rzcu_result, (rzcu_deviceptr * pdptr, cuda_emu_ipc_mem_handle_t handle, unsigned int flags)) \
    X(cuIpcCloseMemHandle, rzcu_result, (rzcu_deviceptr dptr)) \
    X(cuMemcpy, rzcu_result, (rzcu_deviceptr dst, rzcu_deviceptr src, size_t n)) \
    X(cuMemcpy_ptds, rzcu_result, (rzcu_deviceptr dst, rzcu_deviceptr src, size_t n)) \
    X(cuMemcpyAsync, rzcu_result, (rzcu_deviceptr dst, rzcu_deviceptr src, size_t n, rzcu_stream s)) \
    X(cuMemcpyAsync_ptsz, rzcu_result, (rzcu_deviceptr dst, rzcu_deviceptr src, size_t n, rzcu_stream s)) \
    X(cuMemsetD16_v2, rzcu_result, (rzcu_deviceptr dst, unsigned short value, size_t n)) \
    X(cuMemsetD16_v2_ptds, rzcu_result, (rzcu_deviceptr dst, unsigned short value, size_t n)) \
    X(cuMemsetD16Async, rzcu_result, (rzcu_deviceptr dst, unsigned short value, size_t n, rzcu_stream s)) \
    X(cuMemsetD16Async_ptsz, rzcu_result, (rzcu_deviceptr dst, unsigned short value, size_t n, rzcu_stream s)) \
    X(cuMemsetD32_v2, rzcu_result, (rzcu_deviceptr dst, unsigned int value, size_t n)) \
    X(cuMemsetD32_v2_ptds, rzcu_result, (rzcu_deviceptr dst, unsigned int value, size_t n)) \
    X(cuMemsetD32Async, rzcu_result, (rzcu_deviceptr dst, unsigned int value, size_t n, rzcu_stream s)) \
    X(cuMemsetD32Async_ptsz, rzcu_result, (rzcu_deviceptr dst, unsigned int value, size_t n, rzcu_stream s)) \
    X(cuMemsetD2D8_v2, rzcu_result, (rzcu_deviceptr dst, size_t pitch, unsigned char value, size_t width, size_t height)) \
    X(cuMemsetD2D8_v2_ptds, rzcu_result, (rzcu_deviceptr dst, size_t pitch, unsigned char value, size_t width, size_t height)) \
    X(cuMemsetD2D8Async, rzcu_result, (rzcu_deviceptr dst, size_t pitch, unsigned char value, size_t width, size_t height, rzcu_stream s)) \
    X(cuMemsetD2D8Async_ptsz, rzcu_result, (rzcu_deviceptr dst, size_t pitch, unsigned char value, size_t width, size_t height, rzcu_stream s)) \
    X(cuMemsetD2D16_v2, rzcu_result, (rzcu_deviceptr dst, size_t pitch, unsigned short value, size_t width, size_t height)) \
    X(cuMemsetD2D16_v2_ptds, rzcu_result, (rzcu_deviceptr dst, size_t pitch, unsigned short value, size_t width, size_t height)) \
    X(cuMemsetD2D16Async, rzcu_result, (rzcu_deviceptr dst, size_t pitch, unsigned short value, size_t width, size_t height, rzcu_stream s)) \
    X(cuMemsetD2D16Async_ptsz, rzcu_result, (rzcu_deviceptr dst, size_t pitch, unsigned short value, size_t width, size_t height, rzcu_stream s)) \
    X(cuMemsetD2D32_v2, rzcu_result, (rzcu_deviceptr dst, size_t pitch, unsigned int value, size_t width, size_t height)) \
    X(cuMemsetD2D32_v2_ptds, rzcu_result, (rzcu_deviceptr dst, size_t pitch, unsigned int value, size_t width, size_t height)) \
    X(cuMemsetD2D32Async, rzcu_result, (rzcu_deviceptr dst, size_t pitch, unsigned int value, size_t width, size_t height, rzcu_stream s)) \
    X(cuMemsetD2D32Async_ptsz, rzcu_result, (rzcu_deviceptr dst, size_t pitch, unsigned int value, size_t width, size_t height, rzcu_stream s)) \
    X(cuMemcpyBatchAsync, rzcu_result,                                                                        \
      (rzcu_deviceptr * dsts, rzcu_deviceptr * srcs, size_t * sizes, size_t count,                            \
       rzcu_memcpy_attributes * attrs, size_t * attrs_idxs, size_t num_attrs, size_t * fail_idx, rzcu_stream s)) \
    X(cuMemcpyBatchAsync_ptsz, rzcu_result,                                                                   \
      (rzcu_deviceptr * dsts, rzcu_deviceptr * srcs, size_t * sizes, size_t count,                            \
       rzcu_memcpy_attributes * attrs, size_t * attrs_idxs, size_t num_attrs, size_t * fail_idx, rzcu_stream s)) \
    X(cuMemcpy3DBatchAsync, rzcu_result,                                                                      \
      (size_t count, rzcu_memcpy3d_batch_op * ops, size_t * fail_idx, unsigned long long flags, rzcu_stream s)) \
    X(cuMemcpy3DBatchAsync_ptsz, rzcu_result,                                                                 \
      (size_t count, rzcu_memcpy3d_batch_op * ops, size_t * fail_idx, unsigned long long flags, rzcu_stream s)) \
    X(cuMemcpy3DBatchAsync_v2, rzcu_result,                                                                   \
      (size_t count, rzcu_memcpy3d_batch_op * ops, unsigned long long flags, rzcu_stream s))                  \
    X(cuMemcpy3DBatchAsync_v2_ptsz, rzcu_result,                                                              \
      (size_t count, rzcu_memcpy3d_batch_op * ops, unsigned long long flags, rzcu_stream s))                  \
    X(cuGetProcAddress, rzcu_result, (const char *symbol, void **pfn, int cuda_version, rzcu_uint64 flags))   \
    X(cuCtxGetDevice_v2, rzcu_result, (rzcu_device * dev, rzcu_context ctx))                                  \
    X(cuLibraryLoadData, rzcu_result,                                                                         \
      (rzcu_library * library, const void *code, void *jit_options, void **jit_option_values,                  \
       unsigned int num_jit_options, void *library_options, void **library_option_values,                     \
       unsigned int num_library_options))                                                                     \
    X(cuLibraryGetKernel, rzcu_result, (rzcu_kernel * pkernel, rzcu_library library, const char *name))       \
    X(cuKernelGetFunction, rzcu_result, (rzcu_function * pfunc, rzcu_kernel kernel))                                 \
    X(cuLaunchCooperativeKernel, rzcu_result,                                                                 \
      (rzcu_function f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx, unsigned int by,   \
       unsigned int bz, unsigned int shared, rzcu_stream s, void **params))                                   \
    X(cuLaunchCooperativeKernel_ptsz, rzcu_result,                                                            \
      (rzcu_function f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx, unsigned int by,   \
       unsigned int bz, unsigned int shared, rzcu_stream s, void **params))                                   \
    X(cuStreamIsCapturing_ptsz, rzcu_result, (rzcu_stream s, rzcu_capture_status *status))                    \
    X(cuStreamGetCaptureInfo_v2, rzcu_result,                                                                 \
      (rzcu_stream s, rzcu_capture_status *status, rzcu_uint64 *id, struct CUgraph_st **graph,                \
       struct CUgraphNode_st *const **deps, size_t *ndeps))                                                   \
    X(cuStreamGetCaptureInfo_v2_ptsz, rzcu_result,                                                            \
      (rzcu_stream s, rzcu_capture_status *status, rzcu_uint64 *id, struct CUgraph_st **graph,                \
       struct CUgraphNode_st *const **deps, size_t *ndeps))                                                   \
    X(cuStreamGetCaptureInfo_v3, rzcu_result,                                                                 \
      (rzcu_stream s, rzcu_capture_status *status, rzcu_uint64 *id, struct CUgraph_st **graph,                \
       struct CUgraphNode_st *const **deps, const struct CUgraphEdgeData_st **edges, size_t *ndeps))          \
    X(cuStreamGetCaptureInfo_v3_ptsz, rzcu_result,                                                            \
      (rzcu_stream s, rzcu_capture_status *status, rzcu_uint64 *id, struct CUgraph_st **graph,                \
       struct CUgraphNode_st *const **deps, const struct CUgraphEdgeData_st **edges, size_t *ndeps))          \
    X(cuGraphInstantiateWithFlags, rzcu_result,                                                               \
      (struct CUgraphExec_st **exec, struct CUgraph_st *graph, unsigned long long flags))                     \
    X(cuGraphLaunch, rzcu_result, (void *graph_exec, rzcu_stream s))                                          \
    X(cuGraphLaunch_ptsz, rzcu_result, (void *graph_exec, rzcu_stream s))                                     \
    X(cuGraphDestroy, rzcu_result, (struct CUgraph_st *graph))                                                \
    X(cuGraphExecDestroy, rzcu_result, (struct CUgraphExec_st *exec))                                        \
    X(cuCtxDestroy, rzcu_result, (rzcu_context ctx))                                                          \
    X(cuDevicePrimaryCtxRelease, rzcu_result, (rzcu_device dev))                                              \
    X(cuDevicePrimaryCtxReset, rzcu_result, (rzcu_device dev))                                                \
    CUDA_EMU_POOL_ENTRY_POINTS(X)

/* The memory pool entry points (emu_pool.c). */
#define CUDA_EMU_POOL_ENTRY_POINTS(X)                                                                         \
    X(cuMemPoolCreate, rzcu_result, (rzcu_mem_pool * pool, const cuda_emu_mem_pool_props_t *props))          \
    X(cuMemPoolDestroy, rzcu_result, (rzcu_mem_pool pool))                                                    \
    X(cuMemPoolSetAttribute, rzcu_result, (rzcu_mem_pool pool, int attr, void *value))                        \
    X(cuMemPoolGetAttribute, rzcu_result, (rzcu_mem_pool pool, int attr, void *value))                        \
    X(cuMemPoolTrimTo, rzcu_result, (rzcu_mem_pool pool, size_t min_bytes_to_keep))                           \
    X(cuDeviceGetMemPool, rzcu_result, (rzcu_mem_pool * pool, rzcu_device dev))                               \
    X(cuDeviceSetMemPool, rzcu_result, (rzcu_device dev, rzcu_mem_pool pool))                                 \
    X(cuMemPoolExportToShareableHandle, rzcu_result,                                                          \
      (void *handle_out, rzcu_mem_pool pool, unsigned int handle_type, unsigned long long flags))             \
    X(cuMemPoolImportFromShareableHandle, rzcu_result,                                                        \
      (rzcu_mem_pool * pool_out, void *handle, unsigned int handle_type, unsigned long long flags))           \
    X(cuMemPoolExportPointer, rzcu_result, (cuda_emu_mem_pool_ptr_export_data_t * out, rzcu_deviceptr ptr))   \
    X(cuMemPoolImportPointer, rzcu_result,                                                                    \
      (rzcu_deviceptr * ptr_out, rzcu_mem_pool pool, cuda_emu_mem_pool_ptr_export_data_t * data))

/* Declarations of every exported driver entry point (define CUDA_EMU_NO_DRIVER_DECLS to leave them out). */
#ifndef CUDA_EMU_NO_DRIVER_DECLS
#define CUDA_EMU_DECLARE_(name, ret, params) ret name params;
#define CUDA_EMU_DECLARE_VARIANT_(variant, base) rzcu_fn_##base variant;
RZCU_ENTRY_POINTS(CUDA_EMU_DECLARE_)
RZCU_PER_THREAD_VARIANTS(CUDA_EMU_DECLARE_VARIANT_)
CUDA_EMU_EXTRA_ENTRY_POINTS(CUDA_EMU_DECLARE_)
#undef CUDA_EMU_DECLARE_
#undef CUDA_EMU_DECLARE_VARIANT_
#endif

#ifdef __cplusplus
}
#endif

#endif /* REDZONE_CUDA_EMU_H */
