/*
 * The interposed entry points' versions, as cuGetProcAddress hands them out: base name + requested CUDA
 * version + per-thread flag -> exported name. hooks.c uses it to recognise what a driver returned when the
 * pointer is not one the library resolved itself.
 */
#include <string.h>

#include "common.h"
#include "proc_names.h"

/*
 * Which exported entry point cuGetProcAddress hands out for a base name, by requested CUDA version and
 * per-thread flag (cudaTypedefs.h: PFN_<name>_v<version>[_ptsz]). Used when the driver's pointer is not one
 * of the entry points the library resolved (a driver that hands out internal addresses). A request below
 * every listed version gets an older ABI that redzone does not wrap, and passes through.
 */
static const struct versioned {
    const char *base;
    int since;
    int per_thread;
    const char *exported;
} g_versions[] = {
    {"cuMemAlloc", 3020, 0, "cuMemAlloc_v2"},
    {"cuMemAllocPitch", 3020, 0, "cuMemAllocPitch_v2"},
    {"cuMemAllocManaged", 6000, 0, "cuMemAllocManaged"},
    {"cuMemAllocAsync", 11020, 0, "cuMemAllocAsync"},
    {"cuMemAllocAsync", 11020, 1, "cuMemAllocAsync_ptsz"},
    {"cuMemAllocFromPoolAsync", 11020, 0, "cuMemAllocFromPoolAsync"},
    {"cuMemAllocFromPoolAsync", 11020, 1, "cuMemAllocFromPoolAsync_ptsz"},
    {"cuMemFree", 3020, 0, "cuMemFree_v2"},
    {"cuMemFreeAsync", 11020, 0, "cuMemFreeAsync"},
    {"cuMemFreeAsync", 11020, 1, "cuMemFreeAsync_ptsz"},
    {"cuMemGetAddressRange", 3020, 0, "cuMemGetAddressRange_v2"},
    {"cuMemCreate", 10020, 0, "cuMemCreate"},
    {"cuMemPoolGetAttribute", 11020, 0, "cuMemPoolGetAttribute"},
    {"cuMemPoolTrimTo", 11020, 0, "cuMemPoolTrimTo"},
    {"cuMemPoolDestroy", 11020, 0, "cuMemPoolDestroy"},
    {"cuIpcGetMemHandle", 4010, 0, "cuIpcGetMemHandle"},
    {"cuIpcOpenMemHandle", 4010, 0, "cuIpcOpenMemHandle"},
    {"cuIpcOpenMemHandle", 11000, 0, "cuIpcOpenMemHandle_v2"},
    {"cuIpcCloseMemHandle", 4010, 0, "cuIpcCloseMemHandle"},
    {"cuMemPoolExportPointer", 11020, 0, "cuMemPoolExportPointer"},
    {"cuMemPoolImportPointer", 11020, 0, "cuMemPoolImportPointer"},
    {"cuPointerGetAttribute", 4000, 0, "cuPointerGetAttribute"},
    {"cuCtxDestroy", 2000, 0, "cuCtxDestroy"},
    {"cuCtxDestroy", 4000, 0, "cuCtxDestroy_v2"},
    {"cuDevicePrimaryCtxRelease", 7000, 0, "cuDevicePrimaryCtxRelease"},
    {"cuDevicePrimaryCtxRelease", 11000, 0, "cuDevicePrimaryCtxRelease_v2"},
    {"cuDevicePrimaryCtxReset", 7000, 0, "cuDevicePrimaryCtxReset"},
    {"cuDevicePrimaryCtxReset", 11000, 0, "cuDevicePrimaryCtxReset_v2"},
    {"cuCtxSetCurrent", 4000, 0, "cuCtxSetCurrent"},
    {"cuCtxPushCurrent", 2000, 0, "cuCtxPushCurrent"},
    {"cuCtxPushCurrent", 4000, 0, "cuCtxPushCurrent_v2"},
    {"cuCtxPopCurrent", 2000, 0, "cuCtxPopCurrent"},
    {"cuCtxPopCurrent", 4000, 0, "cuCtxPopCurrent_v2"},
    {"cuCtxCreate", 2000, 0, "cuCtxCreate"},
    {"cuCtxCreate", 3020, 0, "cuCtxCreate_v2"},
    {"cuCtxCreate", 11040, 0, "cuCtxCreate_v3"},
    {"cuCtxCreate", 12050, 0, "cuCtxCreate_v4"},
    {"cuCtxSynchronize", 2000, 0, "cuCtxSynchronize"},
    {"cuCtxSynchronize", 13000, 0, "cuCtxSynchronize_v2"},
    {"cuStreamSynchronize", 2000, 0, "cuStreamSynchronize"},
    {"cuStreamSynchronize", 7000, 1, "cuStreamSynchronize_ptsz"},
    {"cuEventSynchronize", 2000, 0, "cuEventSynchronize"},
    {"cuStreamDestroy", 4000, 0, "cuStreamDestroy_v2"},
    {"cuLaunchKernel", 4000, 0, "cuLaunchKernel"},
    {"cuLaunchKernel", 7000, 1, "cuLaunchKernel_ptsz"},
    {"cuLaunchKernelEx", 11060, 0, "cuLaunchKernelEx"},
    {"cuLaunchKernelEx", 11060, 1, "cuLaunchKernelEx_ptsz"},
    {"cuModuleUnload", 2000, 0, "cuModuleUnload"},
    {"cuLibraryUnload", 12000, 0, "cuLibraryUnload"},
    {"cuStreamBeginCapture", 10000, 0, "cuStreamBeginCapture"},
    {"cuStreamBeginCapture", 10000, 1, "cuStreamBeginCapture_ptsz"},
    {"cuStreamBeginCapture", 10010, 0, "cuStreamBeginCapture_v2"},
    {"cuStreamBeginCapture", 10010, 1, "cuStreamBeginCapture_v2_ptsz"},
    {"cuStreamBeginCaptureToGraph", 12030, 0, "cuStreamBeginCaptureToGraph"},
    {"cuStreamBeginCaptureToGraph", 12030, 1, "cuStreamBeginCaptureToGraph_ptsz"},
    {"cuStreamEndCapture", 10000, 0, "cuStreamEndCapture"},
    {"cuStreamEndCapture", 10000, 1, "cuStreamEndCapture_ptsz"},
    {"cuInit", 2000, 0, "cuInit"},
    {"cuGetProcAddress", 11030, 0, "cuGetProcAddress"},
    {"cuGetProcAddress", 12000, 0, "cuGetProcAddress_v2"},
#define RZ_WRITER_VERSION(exported, base, since, per_thread, params, args) {#base, since, per_thread, #exported},
    RZCU_DEVICE_WRITERS(RZ_WRITER_VERSION)
#undef RZ_WRITER_VERSION
};

const char *rz__proc_exported_name(const char *symbol, int version, rzcu_uint64 flags) {
    int want_pt = (flags & RZCU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
    const struct versioned *best = NULL;
    for (int pass = want_pt ? 1 : 0; pass >= 0 && best == NULL; pass--) {
        for (size_t i = 0; i < sizeof g_versions / sizeof g_versions[0]; i++) {
            const struct versioned *v = &g_versions[i];
            if (v->per_thread == pass && v->since <= version && strcmp(v->base, symbol) == 0 &&
                (best == NULL || v->since > best->since))
                best = v;
        }
    }
    return best ? best->exported : NULL;
}

