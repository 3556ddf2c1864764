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
 *                          cuMemAllocManaged, cuMemAllocHost_v2 and the cuMemAlloc*Async entry points;
 *                          CUDA_ERROR_UNKNOWN otherwise. Every
 *                          injected failure fires once.
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
 * on the worker. Synchronising on completed work needs no other thread. cuMemAllocAsync allocates at the
 * call (the memory is valid earlier than the driver promises); cuMemFreeAsync (of memory from any
 * allocation call) takes the allocation out of use at the call (later copies, memsets and frees of it are
 * CUDA_ERROR_INVALID_VALUE) and releases it when the stream reaches the free.
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
/* Sets every call count to 0. Pending CUDA_EMU_FAIL failures then count from here; pending
 * cuEmuInjectFailure ones keep their distance (nth = 1 still means the next call). */
void cuEmuResetCallCounts(void);
/* Makes the nth next call (nth = 1: the next one) of entry_point return `error` (nonzero) without doing
 * anything; fires once. Returns 0, or -1 for an unknown entry point, nth == 0 or error == CUDA_SUCCESS. */
int cuEmuInjectFailure(const char *entry_point, unsigned long long nth, unsigned int error);
/* Drops every pending injected failure (from the API and from CUDA_EMU_FAIL). */
void cuEmuClearFailures(void);

/* Driver entry points the emulator exports beyond cu.h's lists (X(name, ret, params), as in cu.h). */
#define CUDA_EMU_EXTRA_ENTRY_POINTS(X)                                                                        \
    X(cuMemcpyBatchAsync, rzcu_result,                                                                        \
      (rzcu_deviceptr * dsts, rzcu_deviceptr * srcs, size_t * sizes, size_t count,                            \
       rzcu_memcpy_attributes * attrs, size_t * attrs_idxs, size_t num_attrs, size_t * fail_idx, rzcu_stream s)) \
    X(cuMemcpyBatchAsync_ptsz, rzcu_result,                                                                   \
      (rzcu_deviceptr * dsts, rzcu_deviceptr * srcs, size_t * sizes, size_t count,                            \
       rzcu_memcpy_attributes * attrs, size_t * attrs_idxs, size_t num_attrs, size_t * fail_idx, rzcu_stream s)) \
    X(cuGetProcAddress, rzcu_result, (const char *symbol, void **pfn, int cuda_version, rzcu_uint64 flags))   \
    X(cuCtxGetDevice_v2, rzcu_result, (rzcu_device * dev, rzcu_context ctx))

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
