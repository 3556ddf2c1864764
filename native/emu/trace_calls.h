/*
 * The entry points the call-trace shim (trace_shim.c) forwards and traces, beside cu.h's device writers
 * (RZCU_DEVICE_WRITERS, which come with their argument names): X-macro lists expanded there into the
 * forwarders and the table of entries.
 */
#ifndef REDZONE_TRACE_CALLS_H
#define REDZONE_TRACE_CALLS_H

/* Entry points of cu.h that are not device writers (those come with their argument names in cu.h):
 * X(name, type of its function, params, args). */
#define SHIM_CALLS(X)                                                                                        \
    X(cuInit, rzcu_fn_cuInit, (unsigned int flags), (flags))                                                \
    X(cuDriverGetVersion, rzcu_fn_cuDriverGetVersion, (int *version), (version))                            \
    X(cuDeviceGet, rzcu_fn_cuDeviceGet, (rzcu_device * dev, int ordinal), (dev, ordinal))                   \
    X(cuDeviceGetCount, rzcu_fn_cuDeviceGetCount, (int *count), (count))                                    \
    X(cuDeviceGetName, rzcu_fn_cuDeviceGetName, (char *name, int len, rzcu_device dev), (name, len, dev))   \
    X(cuDeviceGetAttribute, rzcu_fn_cuDeviceGetAttribute, (int *pi, rzcu_device_attribute attrib, rzcu_device dev), \
      (pi, attrib, dev))                                                                                    \
    X(cuDeviceTotalMem_v2, rzcu_fn_cuDeviceTotalMem_v2, (size_t * bytes, rzcu_device dev), (bytes, dev))    \
    X(cuDevicePrimaryCtxRetain, rzcu_fn_cuDevicePrimaryCtxRetain, (rzcu_context * pctx, rzcu_device dev),   \
      (pctx, dev))                                                                                          \
    X(cuDevicePrimaryCtxRelease_v2, rzcu_fn_cuDevicePrimaryCtxRelease_v2, (rzcu_device dev), (dev))         \
    X(cuDevicePrimaryCtxReset_v2, rzcu_fn_cuDevicePrimaryCtxReset_v2, (rzcu_device dev), (dev))             \
    X(cuDevicePrimaryCtxRelease, rzcu_fn_cuDevicePrimaryCtxRelease_v2, (rzcu_device dev), (dev))            \
    X(cuDevicePrimaryCtxReset, rzcu_fn_cuDevicePrimaryCtxReset_v2, (rzcu_device dev), (dev))                \
    X(cuDevicePrimaryCtxGetState, rzcu_fn_cuDevicePrimaryCtxGetState, (rzcu_device dev, unsigned int *flags, int *active), \
      (dev, flags, active))                                                                                 \
    X(cuCtxCreate_v4, rzcu_fn_cuCtxCreate_v4,                                                               \
      (rzcu_context * pctx, struct CUctxCreateParams_st * params, unsigned int flags, rzcu_device dev),      \
      (pctx, params, flags, dev))                                                                           \
    X(cuCtxDestroy_v2, rzcu_fn_cuCtxDestroy_v2, (rzcu_context ctx), (ctx))                                  \
    X(cuCtxDestroy, rzcu_fn_cuCtxDestroy_v2, (rzcu_context ctx), (ctx))                                     \
    X(cuCtxGetCurrent, rzcu_fn_cuCtxGetCurrent, (rzcu_context * pctx), (pctx))                              \
    X(cuCtxSetCurrent, rzcu_fn_cuCtxSetCurrent, (rzcu_context ctx), (ctx))                                  \
    X(cuCtxPushCurrent_v2, rzcu_fn_cuCtxPushCurrent_v2, (rzcu_context ctx), (ctx))                          \
    X(cuCtxPopCurrent_v2, rzcu_fn_cuCtxPopCurrent_v2, (rzcu_context * pctx), (pctx))                        \
    X(cuCtxGetDevice, rzcu_fn_cuCtxGetDevice, (rzcu_device * dev), (dev))                                   \
    X(cuCtxGetDevice_v2, shim_fn_cuCtxGetDevice_v2, (rzcu_device * dev, rzcu_context ctx), (dev, ctx))      \
    X(cuCtxSynchronize_v2, rzcu_fn_cuCtxSynchronize_v2, (rzcu_context ctx), (ctx))                          \
    X(cuMemAlloc_v2, rzcu_fn_cuMemAlloc_v2, (rzcu_deviceptr * dptr, size_t bytesize), (dptr, bytesize))     \
    X(cuMemAllocPitch_v2, rzcu_fn_cuMemAllocPitch_v2,                                                       \
      (rzcu_deviceptr * dptr, size_t * pitch, size_t width_bytes, size_t height, unsigned int element_bytes), \
      (dptr, pitch, width_bytes, height, element_bytes))                                                    \
    X(cuMemAllocManaged, rzcu_fn_cuMemAllocManaged, (rzcu_deviceptr * dptr, size_t bytesize, unsigned int flags), \
      (dptr, bytesize, flags))                                                                              \
    X(cuMemAllocHost_v2, rzcu_fn_cuMemAllocHost_v2, (void **pp, size_t bytesize), (pp, bytesize))           \
    X(cuMemFreeHost, rzcu_fn_cuMemFreeHost, (void *p), (p))                                                 \
    X(cuMemHostRegister_v2, rzcu_fn_cuMemHostRegister_v2, (void *p, size_t bytesize, unsigned int flags),   \
      (p, bytesize, flags))                                                                                 \
    X(cuMemHostUnregister, rzcu_fn_cuMemHostUnregister, (void *p), (p))                                     \
    X(cuMemFree_v2, rzcu_fn_cuMemFree_v2, (rzcu_deviceptr dptr), (dptr))                                    \
    X(cuMemAllocAsync, rzcu_fn_cuMemAllocAsync, (rzcu_deviceptr * dptr, size_t bytesize, rzcu_stream s),    \
      (dptr, bytesize, s))                                                                                  \
    X(cuMemAllocAsync_ptsz, rzcu_fn_cuMemAllocAsync, (rzcu_deviceptr * dptr, size_t bytesize, rzcu_stream s), \
      (dptr, bytesize, s))                                                                                  \
    X(cuMemAllocFromPoolAsync, rzcu_fn_cuMemAllocFromPoolAsync,                                             \
      (rzcu_deviceptr * dptr, size_t bytesize, rzcu_mem_pool pool, rzcu_stream s), (dptr, bytesize, pool, s)) \
    X(cuMemAllocFromPoolAsync_ptsz, rzcu_fn_cuMemAllocFromPoolAsync,                                        \
      (rzcu_deviceptr * dptr, size_t bytesize, rzcu_mem_pool pool, rzcu_stream s), (dptr, bytesize, pool, s)) \
    X(cuMemFreeAsync, rzcu_fn_cuMemFreeAsync, (rzcu_deviceptr dptr, rzcu_stream s), (dptr, s))              \
    X(cuMemFreeAsync_ptsz, rzcu_fn_cuMemFreeAsync, (rzcu_deviceptr dptr, rzcu_stream s), (dptr, s))         \
    X(cuDeviceGetDefaultMemPool, rzcu_fn_cuDeviceGetDefaultMemPool, (rzcu_mem_pool * pool, rzcu_device dev), \
      (pool, dev))                                                                                          \
    X(cuMemGetAddressRange_v2, rzcu_fn_cuMemGetAddressRange_v2,                                             \
      (rzcu_deviceptr * pbase, size_t * psize, rzcu_deviceptr dptr), (pbase, psize, dptr))                  \
    X(cuMemGetInfo_v2, rzcu_fn_cuMemGetInfo_v2, (size_t * free_bytes, size_t * total_bytes), (free_bytes, total_bytes)) \
    X(cuPointerGetAttribute, rzcu_fn_cuPointerGetAttribute,                                                 \
      (void *data, rzcu_pointer_attribute attribute, rzcu_deviceptr ptr), (data, attribute, ptr))           \
    X(cuPointerGetAttributes, rzcu_fn_cuPointerGetAttributes,                                               \
      (unsigned int num, rzcu_pointer_attribute *attributes, void **data, rzcu_deviceptr ptr),              \
      (num, attributes, data, ptr))                                                                         \
    X(cuStreamCreate, rzcu_fn_cuStreamCreate, (rzcu_stream * ps, unsigned int flags), (ps, flags))          \
    X(cuStreamDestroy_v2, rzcu_fn_cuStreamDestroy_v2, (rzcu_stream s), (s))                                 \
    X(cuStreamSynchronize, rzcu_fn_cuStreamSynchronize, (rzcu_stream s), (s))                               \
    X(cuStreamSynchronize_ptsz, rzcu_fn_cuStreamSynchronize, (rzcu_stream s), (s))                          \
    X(cuStreamQuery, rzcu_fn_cuStreamQuery, (rzcu_stream s), (s))                                           \
    X(cuStreamQuery_ptsz, rzcu_fn_cuStreamQuery, (rzcu_stream s), (s))                                      \
    X(cuLaunchHostFunc, rzcu_fn_cuLaunchHostFunc, (rzcu_stream s, rzcu_host_fn fn, void *user_data),        \
      (s, fn, user_data))                                                                                   \
    X(cuLaunchHostFunc_ptsz, rzcu_fn_cuLaunchHostFunc, (rzcu_stream s, rzcu_host_fn fn, void *user_data),   \
      (s, fn, user_data))                                                                                   \
    X(cuEventCreate, rzcu_fn_cuEventCreate, (rzcu_event * pe, unsigned int flags), (pe, flags))             \
    X(cuEventRecord, rzcu_fn_cuEventRecord, (rzcu_event e, rzcu_stream s), (e, s))                          \
    X(cuEventRecord_ptsz, rzcu_fn_cuEventRecord, (rzcu_event e, rzcu_stream s), (e, s))                     \
    X(cuEventSynchronize, rzcu_fn_cuEventSynchronize, (rzcu_event e), (e))                                  \
    X(cuEventQuery, rzcu_fn_cuEventQuery, (rzcu_event e), (e))                                              \
    X(cuEventDestroy_v2, rzcu_fn_cuEventDestroy_v2, (rzcu_event e), (e))                                    \
    X(cuStreamWaitEvent, rzcu_fn_cuStreamWaitEvent, (rzcu_stream s, rzcu_event e, unsigned int flags),      \
      (s, e, flags))                                                                                        \
    X(cuModuleLoadData, rzcu_fn_cuModuleLoadData, (rzcu_module * pmod, const void *image), (pmod, image))   \
    X(cuModuleUnload, rzcu_fn_cuModuleUnload, (rzcu_module mod), (mod))                                     \
    X(cuLibraryUnload, rzcu_fn_cuLibraryUnload, (rzcu_library library), (library))                          \
    X(cuModuleGetFunction, rzcu_fn_cuModuleGetFunction, (rzcu_function * pf, rzcu_module mod, const char *name), \
      (pf, mod, name))                                                                                      \
    X(cuFuncGetName, rzcu_fn_cuFuncGetName, (const char **name, rzcu_function f), (name, f))                \
    X(cuKernelGetName, rzcu_fn_cuKernelGetName, (const char **name, rzcu_kernel hfunc), (name, hfunc))      \
    X(cuStreamIsCapturing, rzcu_fn_cuStreamIsCapturing, (rzcu_stream s, rzcu_capture_status *status), (s, status)) \
    X(cuThreadExchangeStreamCaptureMode, rzcu_fn_cuThreadExchangeStreamCaptureMode, (rzcu_capture_mode * mode), (mode)) \
    X(cuStreamBeginCapture_v2, rzcu_fn_cuStreamBeginCapture_v2, (rzcu_stream s, rzcu_capture_mode mode), (s, mode)) \
    X(cuStreamBeginCapture_v2_ptsz, rzcu_fn_cuStreamBeginCapture_v2, (rzcu_stream s, rzcu_capture_mode mode),   \
      (s, mode))                                                                                            \
    X(cuStreamEndCapture, rzcu_fn_cuStreamEndCapture, (rzcu_stream s, struct CUgraph_st **graph), (s, graph)) \
    X(cuStreamEndCapture_ptsz, rzcu_fn_cuStreamEndCapture, (rzcu_stream s, struct CUgraph_st **graph),        \
      (s, graph))                                                                                           \
    X(cuLaunchKernel, rzcu_fn_cuLaunchKernel,                                                               \
      (rzcu_function f, unsigned int grid_x, unsigned int grid_y, unsigned int grid_z, unsigned int block_x, \
       unsigned int block_y, unsigned int block_z, unsigned int shared_bytes, rzcu_stream s, void **params, \
       void **extra),                                                                                       \
      (f, grid_x, grid_y, grid_z, block_x, block_y, block_z, shared_bytes, s, params, extra))               \
    X(cuLaunchKernel_ptsz, rzcu_fn_cuLaunchKernel,                                                          \
      (rzcu_function f, unsigned int grid_x, unsigned int grid_y, unsigned int grid_z, unsigned int block_x, \
       unsigned int block_y, unsigned int block_z, unsigned int shared_bytes, rzcu_stream s, void **params, \
       void **extra),                                                                                       \
      (f, grid_x, grid_y, grid_z, block_x, block_y, block_z, shared_bytes, s, params, extra))               \
    X(cuLaunchKernelEx, rzcu_fn_cuLaunchKernelEx,                                                           \
      (const RZCU_LAUNCH_CONFIG *config, rzcu_function f, void **params, void **extra), (config, f, params, extra)) \
    X(cuLaunchKernelEx_ptsz, rzcu_fn_cuLaunchKernelEx,                                                      \
      (const RZCU_LAUNCH_CONFIG *config, rzcu_function f, void **params, void **extra), (config, f, params, extra)) \
    X(cuGetErrorName, rzcu_fn_cuGetErrorName, (rzcu_result error, const char **pstr), (error, pstr))        \
    X(cuGetErrorString, rzcu_fn_cuGetErrorString, (rzcu_result error, const char **pstr), (error, pstr))    \
    X(cuGetProcAddress_v2, rzcu_fn_cuGetProcAddress_v2,                                                     \
      (const char *symbol, void **pfn, int cuda_version, rzcu_uint64 flags, rzcu_proc_query_result *status), \
      (symbol, pfn, cuda_version, flags, status))                                                           \
    X(cuGetProcAddress, rzcu_fn_cuGetProcAddress, (const char *symbol, void **pfn, int cuda_version, rzcu_uint64 flags), \
      (symbol, pfn, cuda_version, flags))

/* Virtual memory management (in cu.h together with RZCU_MEM_ALLOCATION_PROP). */
#ifdef RZCU_MEM_ALLOCATION_PROP
#define SHIM_VMM_CALLS(X)                                                                                    \
    X(cuMemGetAllocationGranularity, rzcu_fn_cuMemGetAllocationGranularity,                                 \
      (size_t * granularity, const RZCU_MEM_ALLOCATION_PROP *prop, rzcu_mem_granularity_flags option),      \
      (granularity, prop, option))                                                                          \
    X(cuMemAddressReserve, rzcu_fn_cuMemAddressReserve,                                                     \
      (rzcu_deviceptr * ptr, size_t size, size_t alignment, rzcu_deviceptr addr, unsigned long long flags), \
      (ptr, size, alignment, addr, flags))                                                                  \
    X(cuMemAddressFree, rzcu_fn_cuMemAddressFree, (rzcu_deviceptr ptr, size_t size), (ptr, size))           \
    X(cuMemCreate, rzcu_fn_cuMemCreate,                                                                     \
      (rzcu_mem_generic_alloc_handle * handle, size_t size, const RZCU_MEM_ALLOCATION_PROP *prop,           \
       unsigned long long flags),                                                                           \
      (handle, size, prop, flags))                                                                          \
    X(cuMemRelease, rzcu_fn_cuMemRelease, (rzcu_mem_generic_alloc_handle handle), (handle))                 \
    X(cuMemMap, rzcu_fn_cuMemMap,                                                                           \
      (rzcu_deviceptr ptr, size_t size, size_t offset, rzcu_mem_generic_alloc_handle handle,                \
       unsigned long long flags),                                                                           \
      (ptr, size, offset, handle, flags))                                                                   \
    X(cuMemUnmap, rzcu_fn_cuMemUnmap, (rzcu_deviceptr ptr, size_t size), (ptr, size))                       \
    X(cuMemSetAccess, rzcu_fn_cuMemSetAccess,                                                               \
      (rzcu_deviceptr ptr, size_t size, const RZCU_MEM_ACCESS_DESC *desc, size_t count), (ptr, size, desc, count))
#else
#define SHIM_VMM_CALLS(X)
#endif

#endif /* REDZONE_TRACE_CALLS_H */
