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
 *                          cuMemAllocManaged and cuMemAllocHost_v2; CUDA_ERROR_UNKNOWN otherwise. Every
 *                          injected failure fires once.
 * A malformed value prints one `cuda-emu: warning: ...` line on stderr and the default is used (for
 * CUDA_EMU_FAIL: no injected failures).
 *
 * Emulation notes: device allocations are CUDA_EMU_ALLOC_ALIGN-aligned addresses in one reserved address
 * range shared by all devices (unified addressing), distinct from the host heap; device memory accounting
 * (cuMemGetInfo) counts each allocation rounded up to CUDA_EMU_ALLOC_ALIGN. A device range given to a copy
 * or memset must lie within the requested size of one live allocation. Work on streams runs asynchronously
 * on worker threads, in stream order, with legacy default stream semantics.
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
    X(cuCtxGetDevice_v2, rzcu_result, (rzcu_device * dev, rzcu_context ctx))                                  \
    X(cuCtxSynchronize_v2, rzcu_result, (rzcu_context ctx))

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
