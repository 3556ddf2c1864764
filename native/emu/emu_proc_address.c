/*
 * cuGetProcAddress: base symbol name + CUDA version + stream flags -> exported entry point. Each row gives
 * the CUDA version that introduced a versioned variant (cudaTypedefs.h's PFN_<name>_v<version>); the newest
 * row not newer than the requested version wins. Versions of entry points the emulator does not implement
 * (e.g. cuMemAlloc before 3.2) are absent, so asking for them reports VERSION_NOT_SUFFICIENT.
 */
#define _GNU_SOURCE
#include <string.h>

#include "emu_internal.h"

struct proc_row {
    const char *symbol;
    int version;    /* introduced in */
    void *legacy;   /* the variant for the legacy default stream */
    void *per_thread; /* the _ptds/_ptsz variant, NULL when there is none */
    int per_thread_version;
};

#define FN(f) ((void *)(uintptr_t)&(f))

static const struct proc_row rows[] = {
    {"cuInit", 2000, FN(cuInit), NULL, 0},
    {"cuDriverGetVersion", 2020, FN(cuDriverGetVersion), NULL, 0},
    {"cuDeviceGet", 2000, FN(cuDeviceGet), NULL, 0},
    {"cuDeviceGetCount", 2000, FN(cuDeviceGetCount), NULL, 0},
    {"cuDeviceGetName", 2000, FN(cuDeviceGetName), NULL, 0},
    {"cuDeviceGetAttribute", 2000, FN(cuDeviceGetAttribute), NULL, 0},
    {"cuDeviceTotalMem", 3020, FN(cuDeviceTotalMem_v2), NULL, 0},
    {"cuDevicePrimaryCtxRetain", 7000, FN(cuDevicePrimaryCtxRetain), NULL, 0},
    {"cuDevicePrimaryCtxRelease", 7000, FN(cuDevicePrimaryCtxRelease), NULL, 0},
    {"cuDevicePrimaryCtxRelease", 11000, FN(cuDevicePrimaryCtxRelease_v2), NULL, 0},
    {"cuDevicePrimaryCtxReset", 7000, FN(cuDevicePrimaryCtxReset), NULL, 0},
    {"cuDevicePrimaryCtxReset", 11000, FN(cuDevicePrimaryCtxReset_v2), NULL, 0},
    {"cuDevicePrimaryCtxGetState", 7000, FN(cuDevicePrimaryCtxGetState), NULL, 0},
    {"cuCtxCreate", 12050, FN(cuCtxCreate_v4), NULL, 0},
    {"cuCtxDestroy", 2000, FN(cuCtxDestroy), NULL, 0},
    {"cuCtxDestroy", 4000, FN(cuCtxDestroy_v2), NULL, 0},
    {"cuCtxGetCurrent", 4000, FN(cuCtxGetCurrent), NULL, 0},
    {"cuCtxSetCurrent", 4000, FN(cuCtxSetCurrent), NULL, 0},
    {"cuCtxPushCurrent", 4000, FN(cuCtxPushCurrent_v2), NULL, 0},
    {"cuCtxPopCurrent", 4000, FN(cuCtxPopCurrent_v2), NULL, 0},
    {"cuCtxGetDevice", 2000, FN(cuCtxGetDevice), NULL, 0},
    {"cuCtxGetDevice", 13000, FN(cuCtxGetDevice_v2), NULL, 0},
    {"cuCtxSynchronize", 2000, FN(cuCtxSynchronize), NULL, 0},
    {"cuCtxSynchronize", 13000, FN(cuCtxSynchronize_v2), NULL, 0},
    {"cuMemAlloc", 3020, FN(cuMemAlloc_v2), NULL, 0},
    {"cuMemAllocPitch", 3020, FN(cuMemAllocPitch_v2), NULL, 0},
    {"cuMemAllocManaged", 6000, FN(cuMemAllocManaged), NULL, 0},
    {"cuMemAllocHost", 3020, FN(cuMemAllocHost_v2), NULL, 0},
    {"cuMemFreeHost", 2000, FN(cuMemFreeHost), NULL, 0},
    {"cuMemHostAlloc", 2020, FN(cuMemHostAlloc), NULL, 0},
    {"cuMemHostGetDevicePointer", 3020, FN(cuMemHostGetDevicePointer_v2), NULL, 0},
    {"cuMemFree", 3020, FN(cuMemFree_v2), NULL, 0},
    {"cuIpcGetMemHandle", 4010, FN(cuIpcGetMemHandle), NULL, 0},
    {"cuIpcOpenMemHandle", 4010, FN(cuIpcOpenMemHandle), NULL, 0},
    {"cuIpcOpenMemHandle", 11000, FN(cuIpcOpenMemHandle_v2), NULL, 0},
    {"cuIpcCloseMemHandle", 4010, FN(cuIpcCloseMemHandle), NULL, 0},
    {"cuMemGetAddressRange", 3020, FN(cuMemGetAddressRange_v2), NULL, 0},
    {"cuMemGetInfo", 3020, FN(cuMemGetInfo_v2), NULL, 0},
    {"cuPointerGetAttribute", 4000, FN(cuPointerGetAttribute), NULL, 0},
    {"cuPointerGetAttributes", 7000, FN(cuPointerGetAttributes), NULL, 0},
    {"cuMemsetD8", 3020, FN(cuMemsetD8_v2), FN(cuMemsetD8_v2_ptds), 7000},
    {"cuMemsetD8Async", 3020, FN(cuMemsetD8Async), FN(cuMemsetD8Async_ptsz), 7000},
    {"cuMemsetD16", 3020, FN(cuMemsetD16_v2), FN(cuMemsetD16_v2_ptds), 7000},
    {"cuMemsetD16Async", 3020, FN(cuMemsetD16Async), FN(cuMemsetD16Async_ptsz), 7000},
    {"cuMemsetD32", 3020, FN(cuMemsetD32_v2), FN(cuMemsetD32_v2_ptds), 7000},
    {"cuMemsetD32Async", 3020, FN(cuMemsetD32Async), FN(cuMemsetD32Async_ptsz), 7000},
    {"cuMemsetD2D8", 3020, FN(cuMemsetD2D8_v2), FN(cuMemsetD2D8_v2_ptds), 7000},
    {"cuMemsetD2D8Async", 3020, FN(cuMemsetD2D8Async), FN(cuMemsetD2D8Async_ptsz), 7000},
    {"cuMemsetD2D16", 3020, FN(cuMemsetD2D16_v2), FN(cuMemsetD2D16_v2_ptds), 7000},
    {"cuMemsetD2D16Async", 3020, FN(cuMemsetD2D16Async), FN(cuMemsetD2D16Async_ptsz), 7000},
    {"cuMemsetD2D32", 3020, FN(cuMemsetD2D32_v2), FN(cuMemsetD2D32_v2_ptds), 7000},
    {"cuMemsetD2D32Async", 3020, FN(cuMemsetD2D32Async), FN(cuMemsetD2D32Async_ptsz), 7000},
    {"cuMemcpy", 4000, FN(cuMemcpy), FN(cuMemcpy_ptds), 7000},
    {"cuMemcpyAsync", 4000, FN(cuMemcpyAsync), FN(cuMemcpyAsync_ptsz), 7000},
    {"cuMemcpyHtoD", 3020, FN(cuMemcpyHtoD_v2), FN(cuMemcpyHtoD_v2_ptds), 7000},
    {"cuMemcpyDtoH", 3020, FN(cuMemcpyDtoH_v2), FN(cuMemcpyDtoH_v2_ptds), 7000},
    {"cuMemcpyDtoD", 3020, FN(cuMemcpyDtoD_v2), FN(cuMemcpyDtoD_v2_ptds), 7000},
    {"cuMemcpyHtoDAsync", 3020, FN(cuMemcpyHtoDAsync_v2), FN(cuMemcpyHtoDAsync_v2_ptsz), 7000},
    {"cuMemcpyDtoHAsync", 3020, FN(cuMemcpyDtoHAsync_v2), FN(cuMemcpyDtoHAsync_v2_ptsz), 7000},
    {"cuMemcpyDtoDAsync", 3020, FN(cuMemcpyDtoDAsync_v2), FN(cuMemcpyDtoDAsync_v2_ptsz), 7000},
    {"cuMemcpy2D", 3020, FN(cuMemcpy2D_v2), FN(cuMemcpy2D_v2_ptds), 7000},
    {"cuMemcpy2DUnaligned", 3020, FN(cuMemcpy2DUnaligned_v2), FN(cuMemcpy2DUnaligned_v2_ptds), 7000},
    {"cuMemcpy2DAsync", 3020, FN(cuMemcpy2DAsync_v2), FN(cuMemcpy2DAsync_v2_ptsz), 7000},
    {"cuMemcpy3D", 3020, FN(cuMemcpy3D_v2), FN(cuMemcpy3D_v2_ptds), 7000},
    {"cuMemcpy3DAsync", 3020, FN(cuMemcpy3DAsync_v2), FN(cuMemcpy3DAsync_v2_ptsz), 7000},
    {"cuMemcpyBatchAsync", 12080, FN(cuMemcpyBatchAsync), FN(cuMemcpyBatchAsync_ptsz), 12080},
    {"cuMemcpyBatchAsync", 13000, FN(cuMemcpyBatchAsync_v2), FN(cuMemcpyBatchAsync_v2_ptsz), 13000},
    {"cuMemcpy3DBatchAsync", 12080, FN(cuMemcpy3DBatchAsync), FN(cuMemcpy3DBatchAsync_ptsz), 12080},
    {"cuMemcpy3DBatchAsync", 13000, FN(cuMemcpy3DBatchAsync_v2), FN(cuMemcpy3DBatchAsync_v2_ptsz), 13000},
    {"cuStreamCreate", 2000, FN(cuStreamCreate), NULL, 0},
    {"cuStreamDestroy", 4000, FN(cuStreamDestroy_v2), NULL, 0},
    {"cuStreamSynchronize", 2000, FN(cuStreamSynchronize), FN(cuStreamSynchronize_ptsz), 7000},
    {"cuStreamQuery", 2000, FN(cuStreamQuery), FN(cuStreamQuery_ptsz), 7000},
    {"cuLaunchHostFunc", 10000, FN(cuLaunchHostFunc), FN(cuLaunchHostFunc_ptsz), 10000},
    {"cuMemAllocAsync", 11020, FN(cuMemAllocAsync), FN(cuMemAllocAsync_ptsz), 11020},
    {"cuMemAllocFromPoolAsync", 11020, FN(cuMemAllocFromPoolAsync), FN(cuMemAllocFromPoolAsync_ptsz), 11020},
    {"cuMemFreeAsync", 11020, FN(cuMemFreeAsync), FN(cuMemFreeAsync_ptsz), 11020},
    {"cuDeviceGetDefaultMemPool", 11020, FN(cuDeviceGetDefaultMemPool), NULL, 0},
    {"cuMemPoolCreate", 11020, FN(cuMemPoolCreate), NULL, 0},
    {"cuMemPoolDestroy", 11020, FN(cuMemPoolDestroy), NULL, 0},
    {"cuMemPoolSetAttribute", 11020, FN(cuMemPoolSetAttribute), NULL, 0},
    {"cuMemPoolGetAttribute", 11020, FN(cuMemPoolGetAttribute), NULL, 0},
    {"cuMemPoolTrimTo", 11020, FN(cuMemPoolTrimTo), NULL, 0},
    {"cuDeviceGetMemPool", 11020, FN(cuDeviceGetMemPool), NULL, 0},
    {"cuDeviceSetMemPool", 11020, FN(cuDeviceSetMemPool), NULL, 0},
    {"cuMemPoolExportToShareableHandle", 11020, FN(cuMemPoolExportToShareableHandle), NULL, 0},
    {"cuMemPoolImportFromShareableHandle", 11020, FN(cuMemPoolImportFromShareableHandle), NULL, 0},
    {"cuMemPoolExportPointer", 11020, FN(cuMemPoolExportPointer), NULL, 0},
    {"cuMemPoolImportPointer", 11020, FN(cuMemPoolImportPointer), NULL, 0},
    {"cuMemGetAllocationGranularity", 10020, FN(cuMemGetAllocationGranularity), NULL, 0},
    {"cuMemAddressReserve", 10020, FN(cuMemAddressReserve), NULL, 0},
    {"cuMemAddressFree", 10020, FN(cuMemAddressFree), NULL, 0},
    {"cuMemCreate", 10020, FN(cuMemCreate), NULL, 0},
    {"cuMemRelease", 10020, FN(cuMemRelease), NULL, 0},
    {"cuMemMap", 10020, FN(cuMemMap), NULL, 0},
    {"cuMemUnmap", 10020, FN(cuMemUnmap), NULL, 0},
    {"cuMemSetAccess", 10020, FN(cuMemSetAccess), NULL, 0},
    {"cuStreamWaitEvent", 3020, FN(cuStreamWaitEvent), FN(cuStreamWaitEvent_ptsz), 7000},
    {"cuEventCreate", 2000, FN(cuEventCreate), NULL, 0},
    {"cuEventRecord", 2000, FN(cuEventRecord), FN(cuEventRecord_ptsz), 7000},
    {"cuEventSynchronize", 2000, FN(cuEventSynchronize), NULL, 0},
    {"cuEventQuery", 2000, FN(cuEventQuery), NULL, 0},
    {"cuEventDestroy", 4000, FN(cuEventDestroy_v2), NULL, 0},
    {"cuModuleLoadData", 2000, FN(cuModuleLoadData), NULL, 0},
    {"cuModuleUnload", 2000, FN(cuModuleUnload), NULL, 0},
    {"cuModuleGetFunction", 2000, FN(cuModuleGetFunction), NULL, 0},
    {"cuFuncGetName", 12030, FN(cuFuncGetName), NULL, 0},
    {"cuKernelGetName", 12030, FN(cuKernelGetName), NULL, 0},
    {"cuStreamBeginCapture", 10010, FN(cuStreamBeginCapture_v2), FN(cuStreamBeginCapture_v2_ptsz), 10010},
    {"cuStreamEndCapture", 10000, FN(cuStreamEndCapture), FN(cuStreamEndCapture_ptsz), 10000},
    {"cuThreadExchangeStreamCaptureMode", 10010, FN(cuThreadExchangeStreamCaptureMode), NULL, 0},
    {"cuStreamIsCapturing", 10000, FN(cuStreamIsCapturing), FN(cuStreamIsCapturing_ptsz), 10000},
    {"cuStreamGetCaptureInfo", 11030, FN(cuStreamGetCaptureInfo_v2), FN(cuStreamGetCaptureInfo_v2_ptsz), 11030},
    {"cuStreamGetCaptureInfo", 12030, FN(cuStreamGetCaptureInfo_v3), FN(cuStreamGetCaptureInfo_v3_ptsz), 12030},
    {"cuGraphInstantiateWithFlags", 11040, FN(cuGraphInstantiateWithFlags), NULL, 0},
    {"cuGraphLaunch", 10000, FN(cuGraphLaunch), FN(cuGraphLaunch_ptsz), 10000},
    {"cuGraphDestroy", 10000, FN(cuGraphDestroy), NULL, 0},
    {"cuGraphExecDestroy", 10000, FN(cuGraphExecDestroy), NULL, 0},
    {"cuLibraryLoadData", 12000, FN(cuLibraryLoadData), NULL, 0},
    {"cuLibraryUnload", 12000, FN(cuLibraryUnload), NULL, 0},
    {"cuLibraryGetKernel", 12000, FN(cuLibraryGetKernel), NULL, 0},
    {"cuKernelGetFunction", 12000, FN(cuKernelGetFunction), NULL, 0},
    {"cuLaunchKernel", 4000, FN(cuLaunchKernel), FN(cuLaunchKernel_ptsz), 7000},
    {"cuLaunchCooperativeKernel", 9000, FN(cuLaunchCooperativeKernel), FN(cuLaunchCooperativeKernel_ptsz), 9000},
    {"cuLaunchKernelEx", 11060, FN(cuLaunchKernelEx), FN(cuLaunchKernelEx_ptsz), 11060},
    {"cuGetErrorName", 6000, FN(cuGetErrorName), NULL, 0},
    {"cuGetErrorString", 6000, FN(cuGetErrorString), NULL, 0},
    {"cuGetProcAddress", 11030, FN(cuGetProcAddress), NULL, 0},
    {"cuGetProcAddress", 12000, FN(cuGetProcAddress_v2), NULL, 0},
};

/*
 * Returns CUDA_SUCCESS with the function; CUDA_ERROR_NOT_FOUND with *pfn = NULL and status SYMBOL_NOT_FOUND
 * (unknown symbol) or VERSION_NOT_SUFFICIENT (known, but introduced after cuda_version);
 * CUDA_ERROR_INVALID_VALUE for NULL arguments, unknown flags, or a cuda_version above the driver's (as
 * documented), with status SYMBOL_NOT_FOUND.
 */
rzcu_result emu_get_proc_address(const char *symbol, void **pfn, int cuda_version, rzcu_uint64 flags,
                                 rzcu_proc_query_result *status)
{
    if (pfn)
        *pfn = NULL;
    if (status)
        *status = RZCU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    if (!symbol || !pfn || cuda_version <= 0 || cuda_version > CUDA_EMU_DRIVER_VERSION ||
        (flags & ~(rzcu_uint64)(RZCU_GET_PROC_ADDRESS_LEGACY_STREAM | RZCU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)))
        return RZCUDA_ERROR_INVALID_VALUE;
    /* DEFAULT follows CUDA_API_PER_THREAD_DEFAULT_STREAM of the caller's build; for a driver that is legacy */
    bool per_thread = (flags & RZCU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
    const struct proc_row *best = NULL;
    bool known = false;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        if (strcmp(rows[i].symbol, symbol) != 0)
            continue;
        known = true;
        if (rows[i].version <= cuda_version && (!best || rows[i].version > best->version))
            best = &rows[i];
    }
    if (!best) {
        if (known && status)
            *status = RZCU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
        return RZCUDA_ERROR_NOT_FOUND;
    }
    *pfn = per_thread && best->per_thread && cuda_version >= best->per_thread_version ? best->per_thread
                                                                                        : best->legacy;
    if (status)
        *status = RZCU_GET_PROC_ADDRESS_SUCCESS;
    return RZCUDA_SUCCESS;
}

EMU_API rzcu_result cuGetProcAddress_v2(const char *symbol, void **pfn, int cuda_version, rzcu_uint64 flags,
                                        rzcu_proc_query_result *status)
{
    ENTER_NOINIT(cuGetProcAddress_v2);
    return emu_get_proc_address(symbol, pfn, cuda_version, flags, status);
}

EMU_API rzcu_result cuGetProcAddress(const char *symbol, void **pfn, int cuda_version, rzcu_uint64 flags)
{
    ENTER_NOINIT(cuGetProcAddress);
    return emu_get_proc_address(symbol, pfn, cuda_version, flags, NULL);
}

