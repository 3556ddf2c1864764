/*
 * Compiled only when cuda.h is found: proves at compile time that every declaration in cu.h matches the
 * real driver header (function types, scalar types, result codes, struct layouts). An empty object file.
 */
#ifndef RZCU_MEMCPY_ATTRIBUTES /* the cu_check_detects_mismatch test passes a wrong one */
#define RZCU_MEMCPY_ATTRIBUTES CUmemcpyAttributes
#endif
#define RZCU_LAUNCH_CONFIG CUlaunchConfig
#define RZCU_MEM_ALLOCATION_PROP CUmemAllocationProp
#define RZCU_MEM_ACCESS_DESC CUmemAccessDesc
#define RZCU_IPC_MEM_HANDLE CUipcMemHandle
#define RZCU_MEM_POOL_PTR_EXPORT_DATA CUmemPoolPtrExportData
#define RZCU_MEMPOOL_ATTRIBUTE CUmemPool_attribute
#include <cuda.h>
#include <stddef.h>

#include "cu.h"

#define SAME(a, b) _Static_assert(__builtin_types_compatible_p(a, b), #a " differs from " #b)

SAME(rzcu_result, CUresult);
SAME(rzcu_deviceptr, CUdeviceptr);
SAME(rzcu_device, CUdevice);
SAME(rzcu_device_attribute, CUdevice_attribute);
SAME(rzcu_pointer_attribute, CUpointer_attribute);
_Static_assert(RZCU_POINTER_ATTRIBUTE_CONTEXT == CU_POINTER_ATTRIBUTE_CONTEXT, "pointer attribute");
_Static_assert(RZCU_MEMPOOL_ATTR_USED_MEM_CURRENT == CU_MEMPOOL_ATTR_USED_MEM_CURRENT, "pool attribute");
_Static_assert(RZCU_MEMHOSTREGISTER_PORTABLE == CU_MEMHOSTREGISTER_PORTABLE, "host register flag");
_Static_assert(RZCU_POINTER_ATTRIBUTE_DEVICE_ORDINAL == CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, "pointer attribute");
SAME(rzcu_proc_query_result, CUdriverProcAddressQueryResult);
SAME(rzcu_uint64, cuuint64_t);
SAME(rzcu_context, CUcontext);
SAME(rzcu_stream, CUstream);
SAME(rzcu_host_fn, CUhostFn);
SAME(rzcu_event, CUevent);
SAME(rzcu_module, CUmodule);
SAME(rzcu_function, CUfunction);
SAME(rzcu_mem_pool, CUmemoryPool);
SAME(rzcu_mem_generic_alloc_handle, CUmemGenericAllocationHandle);
SAME(rzcu_mem_granularity_flags, CUmemAllocationGranularity_flags);

/* Each entry point: the name as exported by libcuda (no cuda.h macro renaming) has our function type. */
#define CHECK_FN(name, ret, params) SAME(rzcu_fn_##name, __typeof__(name));
RZCU_ENTRY_POINTS(CHECK_FN)
RZCU_OPTIONAL_ENTRY_POINTS(CHECK_FN)
RZCU_IPC_ENTRY_POINTS(CHECK_FN)
_Static_assert(sizeof(rzcu_ipc_mem_handle) == sizeof(CUipcMemHandle), "CUipcMemHandle layout");
_Static_assert(RZCU_IPC_HANDLE_SIZE == CU_IPC_HANDLE_SIZE, "IPC handle size");
_Static_assert(RZCU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS == CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS, "IPC open flag");

#define CHECK_RESULT(name, value) _Static_assert((int)name == value && (int)RZ##name == value, #name);
RZCU_RESULTS(CHECK_RESULT)

#define CHECK_CONST(ours, theirs) _Static_assert((ours) == (theirs), #ours)
CHECK_CONST(RZCU_STREAM_LEGACY, CU_STREAM_LEGACY);
CHECK_CONST(RZCU_STREAM_PER_THREAD, CU_STREAM_PER_THREAD);
CHECK_CONST(RZCU_STREAM_DEFAULT, CU_STREAM_DEFAULT);
CHECK_CONST(RZCU_STREAM_NON_BLOCKING, CU_STREAM_NON_BLOCKING);
CHECK_CONST(RZCU_STREAM_CAPTURE_MODE_RELAXED, CU_STREAM_CAPTURE_MODE_RELAXED);
CHECK_CONST(RZCU_MEM_ATTACH_GLOBAL, CU_MEM_ATTACH_GLOBAL);
CHECK_CONST(RZCU_MEM_ATTACH_HOST, CU_MEM_ATTACH_HOST);
CHECK_CONST(RZCU_GET_PROC_ADDRESS_DEFAULT, CU_GET_PROC_ADDRESS_DEFAULT);
CHECK_CONST(RZCU_GET_PROC_ADDRESS_LEGACY_STREAM, CU_GET_PROC_ADDRESS_LEGACY_STREAM);
CHECK_CONST(RZCU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
CHECK_CONST(RZCU_GET_PROC_ADDRESS_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS);
CHECK_CONST(RZCU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
CHECK_CONST(RZCU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
CHECK_CONST(RZCU_MEMCPY_SRC_ACCESS_ORDER_STREAM, CU_MEMCPY_SRC_ACCESS_ORDER_STREAM);
CHECK_CONST(RZCU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL, CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL);
CHECK_CONST(RZCU_MEMCPY_SRC_ACCESS_ORDER_ANY, CU_MEMCPY_SRC_ACCESS_ORDER_ANY);
CHECK_CONST(RZCU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
CHECK_CONST(RZCU_DEVICE_ATTRIBUTE_WARP_SIZE, CU_DEVICE_ATTRIBUTE_WARP_SIZE);
CHECK_CONST(RZCU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
CHECK_CONST(RZCU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING);
CHECK_CONST(RZCU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
CHECK_CONST(RZCU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
CHECK_CONST(RZCU_MEM_ALLOCATION_TYPE_PINNED, CU_MEM_ALLOCATION_TYPE_PINNED);
CHECK_CONST(RZCU_MEM_LOCATION_TYPE_DEVICE, CU_MEM_LOCATION_TYPE_DEVICE);
CHECK_CONST(RZCU_MEM_HANDLE_TYPE_NONE, CU_MEM_HANDLE_TYPE_NONE);
CHECK_CONST(RZCU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
CHECK_CONST(RZCU_MEM_ACCESS_FLAGS_PROT_NONE, CU_MEM_ACCESS_FLAGS_PROT_NONE);
CHECK_CONST(RZCU_MEM_ACCESS_FLAGS_PROT_READ, CU_MEM_ACCESS_FLAGS_PROT_READ);
CHECK_CONST(RZCU_MEM_ACCESS_FLAGS_PROT_READWRITE, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
CHECK_CONST(RZCU_MEM_ALLOC_GRANULARITY_MINIMUM, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
CHECK_CONST(RZCU_MEM_ALLOC_GRANULARITY_RECOMMENDED, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);

#define SAME_LAYOUT(ours, theirs, field)                                                                     \
    _Static_assert(offsetof(ours, field) == offsetof(theirs, field) &&                                       \
                       sizeof(((ours *)0)->field) == sizeof(((theirs *)0)->field),                           \
                   #ours "." #field)
_Static_assert(sizeof(rzcu_mem_location) == sizeof(CUmemLocation), "CUmemLocation size");
SAME_LAYOUT(rzcu_mem_location, CUmemLocation, type);
SAME_LAYOUT(rzcu_mem_location, CUmemLocation, id);
_Static_assert(sizeof(rzcu_memcpy_attributes) == sizeof(CUmemcpyAttributes), "CUmemcpyAttributes size");
SAME_LAYOUT(rzcu_memcpy_attributes, CUmemcpyAttributes, srcAccessOrder);
SAME_LAYOUT(rzcu_memcpy_attributes, CUmemcpyAttributes, srcLocHint);
SAME_LAYOUT(rzcu_memcpy_attributes, CUmemcpyAttributes, dstLocHint);
SAME_LAYOUT(rzcu_memcpy_attributes, CUmemcpyAttributes, flags);

_Static_assert(sizeof(rzcu_launch_config) == sizeof(CUlaunchConfig), "CUlaunchConfig size");
SAME_LAYOUT(rzcu_launch_config, CUlaunchConfig, gridDimX);
SAME_LAYOUT(rzcu_launch_config, CUlaunchConfig, gridDimZ);
SAME_LAYOUT(rzcu_launch_config, CUlaunchConfig, blockDimX);
SAME_LAYOUT(rzcu_launch_config, CUlaunchConfig, blockDimZ);
SAME_LAYOUT(rzcu_launch_config, CUlaunchConfig, sharedMemBytes);
SAME_LAYOUT(rzcu_launch_config, CUlaunchConfig, hStream);
SAME_LAYOUT(rzcu_launch_config, CUlaunchConfig, attrs);
SAME_LAYOUT(rzcu_launch_config, CUlaunchConfig, numAttrs);

_Static_assert(sizeof(rzcu_mem_allocation_prop) == sizeof(CUmemAllocationProp), "CUmemAllocationProp size");
SAME_LAYOUT(rzcu_mem_allocation_prop, CUmemAllocationProp, type);
SAME_LAYOUT(rzcu_mem_allocation_prop, CUmemAllocationProp, requestedHandleTypes);
SAME_LAYOUT(rzcu_mem_allocation_prop, CUmemAllocationProp, location);
SAME_LAYOUT(rzcu_mem_allocation_prop, CUmemAllocationProp, win32HandleMetaData);
SAME_LAYOUT(rzcu_mem_allocation_prop, CUmemAllocationProp, allocFlags);
SAME_LAYOUT(rzcu_mem_allocation_prop, CUmemAllocationProp, allocFlags.compressionType);
SAME_LAYOUT(rzcu_mem_allocation_prop, CUmemAllocationProp, allocFlags.gpuDirectRDMACapable);
SAME_LAYOUT(rzcu_mem_allocation_prop, CUmemAllocationProp, allocFlags.usage);
SAME_LAYOUT(rzcu_mem_allocation_prop, CUmemAllocationProp, allocFlags.reserved);
_Static_assert(sizeof(rzcu_mem_access_desc) == sizeof(CUmemAccessDesc), "CUmemAccessDesc size");
SAME_LAYOUT(rzcu_mem_access_desc, CUmemAccessDesc, location);
SAME_LAYOUT(rzcu_mem_access_desc, CUmemAccessDesc, flags);

/* The copy descriptors (one rzcu_memcpy3d layout reads CUDA_MEMCPY3D and CUDA_MEMCPY3D_PEER). */
CHECK_CONST(RZCU_MEMORYTYPE_HOST, CU_MEMORYTYPE_HOST);
CHECK_CONST(RZCU_MEMORYTYPE_DEVICE, CU_MEMORYTYPE_DEVICE);
CHECK_CONST(RZCU_MEMORYTYPE_ARRAY, CU_MEMORYTYPE_ARRAY);
CHECK_CONST(RZCU_MEMORYTYPE_UNIFIED, CU_MEMORYTYPE_UNIFIED);
_Static_assert(sizeof(rzcu_memcpy2d) == sizeof(CUDA_MEMCPY2D), "CUDA_MEMCPY2D size");
#define CHECK_2D(field) SAME_LAYOUT(rzcu_memcpy2d, CUDA_MEMCPY2D, field);
CHECK_2D(srcXInBytes) CHECK_2D(srcY) CHECK_2D(srcMemoryType) CHECK_2D(srcHost) CHECK_2D(srcDevice)
CHECK_2D(srcArray) CHECK_2D(srcPitch) CHECK_2D(dstXInBytes) CHECK_2D(dstY) CHECK_2D(dstMemoryType)
CHECK_2D(dstHost) CHECK_2D(dstDevice) CHECK_2D(dstArray) CHECK_2D(dstPitch) CHECK_2D(WidthInBytes) CHECK_2D(Height)
_Static_assert(sizeof(rzcu_memcpy3d) == sizeof(CUDA_MEMCPY3D), "CUDA_MEMCPY3D size");
_Static_assert(sizeof(rzcu_memcpy3d) == sizeof(CUDA_MEMCPY3D_PEER), "CUDA_MEMCPY3D_PEER size");
#define CHECK_3D(field)                                                                                      \
    SAME_LAYOUT(rzcu_memcpy3d, CUDA_MEMCPY3D, field);                                                        \
    SAME_LAYOUT(rzcu_memcpy3d, CUDA_MEMCPY3D_PEER, field);
CHECK_3D(srcXInBytes) CHECK_3D(srcY) CHECK_3D(srcZ) CHECK_3D(srcLOD) CHECK_3D(srcMemoryType) CHECK_3D(srcHost)
CHECK_3D(srcDevice) CHECK_3D(srcArray) CHECK_3D(srcPitch) CHECK_3D(srcHeight) CHECK_3D(dstXInBytes) CHECK_3D(dstY)
CHECK_3D(dstZ) CHECK_3D(dstLOD) CHECK_3D(dstMemoryType) CHECK_3D(dstHost) CHECK_3D(dstDevice) CHECK_3D(dstArray)
CHECK_3D(dstPitch) CHECK_3D(dstHeight) CHECK_3D(WidthInBytes) CHECK_3D(Height) CHECK_3D(Depth)
SAME_LAYOUT(rzcu_memcpy3d, CUDA_MEMCPY3D_PEER, srcContext);
SAME_LAYOUT(rzcu_memcpy3d, CUDA_MEMCPY3D_PEER, dstContext);

/* cuMemcpy3DBatchAsync's operations. */
CHECK_CONST(RZCU_MEMCPY_OPERAND_TYPE_POINTER, CU_MEMCPY_OPERAND_TYPE_POINTER);
CHECK_CONST(RZCU_MEMCPY_OPERAND_TYPE_ARRAY, CU_MEMCPY_OPERAND_TYPE_ARRAY);
_Static_assert(sizeof(rzcu_memcpy3d_batch_op) == sizeof(CUDA_MEMCPY3D_BATCH_OP), "CUDA_MEMCPY3D_BATCH_OP size");
#define CHECK_OP(field) SAME_LAYOUT(rzcu_memcpy3d_batch_op, CUDA_MEMCPY3D_BATCH_OP, field);
CHECK_OP(src) CHECK_OP(src.type) CHECK_OP(src.op.ptr.ptr) CHECK_OP(src.op.ptr.rowLength)
CHECK_OP(src.op.ptr.layerHeight) CHECK_OP(src.op.ptr.locHint) CHECK_OP(src.op.array.array)
CHECK_OP(src.op.array.offset.x) CHECK_OP(src.op.array.offset.z) CHECK_OP(dst) CHECK_OP(dst.type)
CHECK_OP(dst.op.ptr.ptr) CHECK_OP(dst.op.ptr.rowLength) CHECK_OP(dst.op.ptr.layerHeight) CHECK_OP(extent.width)
CHECK_OP(extent.height) CHECK_OP(extent.depth) CHECK_OP(srcAccessOrder) CHECK_OP(flags)

typedef int rz_cu_check_translation_unit_is_not_empty;
