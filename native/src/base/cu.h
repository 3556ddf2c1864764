/*
 * The subset of the CUDA driver API that redzone and its emulated driver use, declared here so that the
 * project builds on machines without the CUDA toolkit. Names mirror cuda.h with an `rzcu_` prefix (types)
 * or `RZCU_` prefix (constants); function types are `rzcu_fn_<entry point>`. Handles reuse cuda.h's
 * struct tags, so pointers are interchangeable with the real ones. When cuda.h is present the build
 * compiles cu_check.c, which proves every declaration here matches it (types, values, layouts).
 */
#ifndef REDZONE_CU_H
#define REDZONE_CU_H

#include <stddef.h>
#include <stdint.h>

typedef unsigned int rzcu_result;          /* CUresult (an enum of non-negative values) */
typedef unsigned long long rzcu_deviceptr; /* CUdeviceptr */
typedef int rzcu_device;                   /* CUdevice */
typedef unsigned int rzcu_device_attribute;
typedef unsigned int rzcu_pointer_attribute;
#define RZCU_POINTER_ATTRIBUTE_CONTEXT 1
#define RZCU_MEMHOSTREGISTER_PORTABLE 0x01
#define RZCU_POINTER_ATTRIBUTE_DEVICE_ORDINAL 9
#define RZCU_POINTER_ATTRIBUTE_RANGE_START_ADDR 11
#define RZCU_POINTER_ATTRIBUTE_RANGE_SIZE 12
typedef unsigned int rzcu_proc_query_result; /* CUdriverProcAddressQueryResult */
typedef uint64_t rzcu_uint64;              /* cuuint64_t */
typedef struct CUctx_st *rzcu_context;
typedef struct CUstream_st *rzcu_stream;
typedef struct CUevent_st *rzcu_event;
typedef struct CUmod_st *rzcu_module;
typedef struct CUfunc_st *rzcu_function;
typedef struct CUkern_st *rzcu_kernel; /* CUkernel: a library's kernel, context-independent (CUDA 12) */
typedef struct CUlib_st *rzcu_library;  /* CUlibrary */
typedef unsigned int rzcu_capture_status; /* CUstreamCaptureStatus: 0 none, 1 active, 2 invalidated */
typedef unsigned int rzcu_capture_mode;   /* CUstreamCaptureMode: 0 global, 1 thread-local, 2 relaxed */
struct CUgraph_st;         /* CUgraph: opaque here */
struct CUgraphNode_st;     /* CUgraphNode: opaque here */
struct CUgraphEdgeData_st; /* CUgraphEdgeData: passed through by pointer */
#define RZCU_STREAM_CAPTURE_MODE_GLOBAL 0
#define RZCU_STREAM_CAPTURE_MODE_THREAD_LOCAL 1
#define RZCU_STREAM_CAPTURE_MODE_RELAXED 2
typedef struct CUmemPoolHandle_st *rzcu_mem_pool;
typedef void (*rzcu_host_fn)(void *user_data);

/* Result codes used by the project (values from cuda.h). */
#define RZCU_RESULTS(X)                                  \
    X(CUDA_SUCCESS, 0)                                   \
    X(CUDA_ERROR_INVALID_VALUE, 1)                       \
    X(CUDA_ERROR_OUT_OF_MEMORY, 2)                       \
    X(CUDA_ERROR_NOT_INITIALIZED, 3)                     \
    X(CUDA_ERROR_DEINITIALIZED, 4)                       \
    X(CUDA_ERROR_NO_DEVICE, 100)                         \
    X(CUDA_ERROR_CONTAINED, 226)                         \
    X(CUDA_ERROR_INVALID_DEVICE, 101)                    \
    X(CUDA_ERROR_INVALID_CONTEXT, 201)                   \
    X(CUDA_ERROR_CONTEXT_ALREADY_IN_USE, 216)            \
    X(CUDA_ERROR_INVALID_HANDLE, 400)                    \
    X(CUDA_ERROR_ILLEGAL_STATE, 401)                     \
    X(CUDA_ERROR_NOT_FOUND, 500)                         \
    X(CUDA_ERROR_NOT_READY, 600)                         \
    X(CUDA_ERROR_ILLEGAL_ADDRESS, 700)                   \
    X(CUDA_ERROR_LAUNCH_TIMEOUT, 702)                    \
    X(CUDA_ERROR_CONTEXT_IS_DESTROYED, 709)              \
    X(CUDA_ERROR_ASSERT, 710)                            \
    X(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, 712)    \
    X(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, 713)        \
    X(CUDA_ERROR_HARDWARE_STACK_ERROR, 714)              \
    X(CUDA_ERROR_ILLEGAL_INSTRUCTION, 715)               \
    X(CUDA_ERROR_MISALIGNED_ADDRESS, 716)                \
    X(CUDA_ERROR_INVALID_ADDRESS_SPACE, 717)             \
    X(CUDA_ERROR_INVALID_PC, 718)                        \
    X(CUDA_ERROR_LAUNCH_FAILED, 719)                     \
    X(CUDA_ERROR_TENSOR_MEMORY_LEAK, 721)                \
    X(CUDA_ERROR_NOT_PERMITTED, 800)                     \
    X(CUDA_ERROR_NOT_SUPPORTED, 801)                     \
    X(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, 900)        \
    X(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, 901)        \
    X(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, 906)           \
    X(CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, 908)       \
    X(CUDA_ERROR_EXTERNAL_DEVICE, 911)                   \
    X(CUDA_ERROR_UNKNOWN, 999)

enum {
#define RZCU_RESULT_ENUM(name, value) RZ##name = value,
    RZCU_RESULTS(RZCU_RESULT_ENUM)
#undef RZCU_RESULT_ENUM
};

/* The sticky results: those cuda.h documents as leaving "the process in an inconsistent state and any further
 * CUDA work will return the same error. To continue using CUDA, the process must be terminated and
 * relaunched." (the kernel faults, a launch timeout, a contained or external-device error). */
#define RZCU_STICKY_RESULTS(X)                                                                             \
    X(CUDA_ERROR_CONTAINED) X(CUDA_ERROR_ILLEGAL_ADDRESS) X(CUDA_ERROR_LAUNCH_TIMEOUT)                      \
        X(CUDA_ERROR_HARDWARE_STACK_ERROR) X(CUDA_ERROR_ILLEGAL_INSTRUCTION) X(CUDA_ERROR_MISALIGNED_ADDRESS)  \
            X(CUDA_ERROR_INVALID_ADDRESS_SPACE) X(CUDA_ERROR_INVALID_PC) X(CUDA_ERROR_LAUNCH_FAILED)          \
                X(CUDA_ERROR_TENSOR_MEMORY_LEAK) X(CUDA_ERROR_EXTERNAL_DEVICE)

#define RZCU_STREAM_LEGACY ((rzcu_stream)0x1)
#define RZCU_STREAM_PER_THREAD ((rzcu_stream)0x2)
#define RZCU_STREAM_DEFAULT 0x0
#define RZCU_STREAM_NON_BLOCKING 0x1
#define RZCU_MEM_ATTACH_GLOBAL 0x1
#define RZCU_MEM_ATTACH_HOST 0x2
#define RZCU_GET_PROC_ADDRESS_DEFAULT 0
#define RZCU_GET_PROC_ADDRESS_LEGACY_STREAM 1
#define RZCU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM 2
#define RZCU_GET_PROC_ADDRESS_SUCCESS 0
#define RZCU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND 1
#define RZCU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT 2
#define RZCU_MEMCPY_SRC_ACCESS_ORDER_STREAM 0x1
#define RZCU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL 0x2
#define RZCU_MEMCPY_SRC_ACCESS_ORDER_ANY 0x3
#define RZCU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK 1
#define RZCU_DEVICE_ATTRIBUTE_WARP_SIZE 10
#define RZCU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT 16
#define RZCU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING 41
#define RZCU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR 75
#define RZCU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR 76

/* CUmemLocation and CUmemcpyAttributes (CUDA 12.8+), laid out as in cuda.h. */
typedef struct rzcu_mem_location {
    unsigned int type;
    int id;
} rzcu_mem_location;

typedef struct rzcu_memcpy_attributes {
    unsigned int srcAccessOrder;
    rzcu_mem_location srcLocHint;
    rzcu_mem_location dstLocHint;
    unsigned int flags;
} rzcu_memcpy_attributes;

/* CUDA_MEMCPY3D_BATCH_OP and its parts (CUDA 12.8+: cuMemcpy3DBatchAsync), laid out as in cuda.h. A pointer
 * operand's rowLength and layerHeight count elements (1 byte for pointer-to-pointer copies); 0 means tightly
 * packed by the copy's extent. */
#define RZCU_MEMCPY_OPERAND_TYPE_POINTER 0x1
#define RZCU_MEMCPY_OPERAND_TYPE_ARRAY 0x2

typedef struct rzcu_extent3d {
    size_t width, height, depth;
} rzcu_extent3d;

typedef struct rzcu_offset3d {
    size_t x, y, z;
} rzcu_offset3d;

typedef struct rzcu_memcpy3d_operand {
    unsigned int type; /* CUmemcpy3DOperandType */
    union {
        struct {
            rzcu_deviceptr ptr;
            size_t rowLength;
            size_t layerHeight;
            rzcu_mem_location locHint;
        } ptr;
        struct {
            void *array; /* CUarray */
            rzcu_offset3d offset;
        } array;
    } op;
} rzcu_memcpy3d_operand;

typedef struct rzcu_memcpy3d_batch_op {
    rzcu_memcpy3d_operand src, dst;
    rzcu_extent3d extent;
    unsigned int srcAccessOrder; /* CUmemcpySrcAccessOrder */
    unsigned int flags;          /* CUmemcpyFlags */
} rzcu_memcpy3d_batch_op;

/* CUlaunchConfig (CUDA 11.8+), laid out as in cuda.h; attributes are only passed through. */
typedef struct rzcu_launch_config {
    unsigned int gridDimX, gridDimY, gridDimZ;
    unsigned int blockDimX, blockDimY, blockDimZ;
    unsigned int sharedMemBytes;
    rzcu_stream hStream;
    struct CUlaunchAttribute_st *attrs;
    unsigned int numAttrs;
} rzcu_launch_config;

/*
 * Virtual memory management (CUDA 10.2+): CUmemGenericAllocationHandle, CUmemAllocationProp and
 * CUmemAccessDesc, laid out as in cuda.h, and the enum values the project uses.
 */
typedef unsigned long long rzcu_mem_generic_alloc_handle; /* CUmemGenericAllocationHandle */
typedef unsigned int rzcu_mem_granularity_flags;          /* CUmemAllocationGranularity_flags */
#define RZCU_MEM_ALLOCATION_TYPE_PINNED 0x1
#define RZCU_MEM_LOCATION_TYPE_DEVICE 0x1
#define RZCU_MEM_HANDLE_TYPE_NONE 0x0
#define RZCU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR 0x1
#define RZCU_MEM_ACCESS_FLAGS_PROT_NONE 0x0
#define RZCU_MEM_ACCESS_FLAGS_PROT_READ 0x1
#define RZCU_MEM_ACCESS_FLAGS_PROT_READWRITE 0x3
#define RZCU_MEM_ALLOC_GRANULARITY_MINIMUM 0x0
#define RZCU_MEM_ALLOC_GRANULARITY_RECOMMENDED 0x1

typedef struct rzcu_mem_allocation_prop {
    unsigned int type;                 /* CUmemAllocationType */
    unsigned int requestedHandleTypes; /* CUmemAllocationHandleType bits */
    rzcu_mem_location location;
    void *win32HandleMetaData;
    struct {
        unsigned char compressionType;
        unsigned char gpuDirectRDMACapable;
        unsigned short usage;
        unsigned char reserved[4];
    } allocFlags;
} rzcu_mem_allocation_prop;

typedef struct rzcu_mem_access_desc {
    rzcu_mem_location location;
    unsigned int flags; /* CUmemAccess_flags */
} rzcu_mem_access_desc;

/*
 * CUDA_MEMCPY2D, CUDA_MEMCPY3D and CUDA_MEMCPY3D_PEER (CUmemorytype: CU_MEMORYTYPE_*), laid out as in cuda.h.
 * The 3D and 3D-peer descriptors differ only in the pointer after each side's array (reserved, or its
 * context), so one layout reads both. The copy wrappers read them to check the device ranges they touch.
 */
#define RZCU_MEMORYTYPE_HOST 0x1
#define RZCU_MEMORYTYPE_DEVICE 0x2
#define RZCU_MEMORYTYPE_ARRAY 0x3
#define RZCU_MEMORYTYPE_UNIFIED 0x4

typedef struct rzcu_memcpy2d {
    size_t srcXInBytes, srcY;
    unsigned int srcMemoryType;
    const void *srcHost;
    rzcu_deviceptr srcDevice;
    void *srcArray;
    size_t srcPitch;
    size_t dstXInBytes, dstY;
    unsigned int dstMemoryType;
    void *dstHost;
    rzcu_deviceptr dstDevice;
    void *dstArray;
    size_t dstPitch;
    size_t WidthInBytes, Height;
} rzcu_memcpy2d;

typedef struct rzcu_memcpy3d {
    size_t srcXInBytes, srcY, srcZ, srcLOD;
    unsigned int srcMemoryType;
    const void *srcHost;
    rzcu_deviceptr srcDevice;
    void *srcArray;
    void *srcContext; /* CUDA_MEMCPY3D: reserved0 */
    size_t srcPitch, srcHeight;
    size_t dstXInBytes, dstY, dstZ, dstLOD;
    unsigned int dstMemoryType;
    void *dstHost;
    rzcu_deviceptr dstDevice;
    void *dstArray;
    void *dstContext; /* CUDA_MEMCPY3D: reserved1 */
    size_t dstPitch, dstHeight;
    size_t WidthInBytes, Height, Depth;
} rzcu_memcpy3d;

/* cu_check.c compiles this header with cuda.h's own struct names, so the function types can be compared. */
#ifndef RZCU_MEMCPY_ATTRIBUTES
#define RZCU_MEMCPY_ATTRIBUTES rzcu_memcpy_attributes
#endif
#ifndef RZCU_LAUNCH_CONFIG
#define RZCU_LAUNCH_CONFIG rzcu_launch_config
#endif
#ifndef RZCU_MEM_ALLOCATION_PROP
#define RZCU_MEM_ALLOCATION_PROP rzcu_mem_allocation_prop
#endif
#ifndef RZCU_MEM_ACCESS_DESC
#define RZCU_MEM_ACCESS_DESC rzcu_mem_access_desc
#endif
struct CUctxCreateParams_st; /* only ever passed by pointer (NULL is valid) */

/*
 * X(name, return type, parameter list): every driver entry point the project declares, by its exported
 * (versioned) name. The list drives the function typedefs here, the symbol table in band_io.c, the
 * emulator's exports, and cu_check.c.
 */
#define RZCU_ENTRY_POINTS(X)                                                                                 \
    X(cuInit, rzcu_result, (unsigned int flags))                                                            \
    X(cuDriverGetVersion, rzcu_result, (int *version))                                                      \
    X(cuDeviceGet, rzcu_result, (rzcu_device * dev, int ordinal))                                           \
    X(cuDeviceGetCount, rzcu_result, (int *count))                                                          \
    X(cuDeviceGetName, rzcu_result, (char *name, int len, rzcu_device dev))                                 \
    X(cuDeviceGetAttribute, rzcu_result, (int *pi, rzcu_device_attribute attrib, rzcu_device dev))          \
    X(cuDeviceTotalMem_v2, rzcu_result, (size_t * bytes, rzcu_device dev))                                  \
    X(cuDevicePrimaryCtxRetain, rzcu_result, (rzcu_context * pctx, rzcu_device dev))                        \
    X(cuDevicePrimaryCtxRelease_v2, rzcu_result, (rzcu_device dev))                                         \
    X(cuDevicePrimaryCtxReset_v2, rzcu_result, (rzcu_device dev))                                           \
    X(cuDevicePrimaryCtxGetState, rzcu_result, (rzcu_device dev, unsigned int *flags, int *active))          \
    X(cuCtxCreate_v4, rzcu_result,                                                                          \
      (rzcu_context * pctx, struct CUctxCreateParams_st * params, unsigned int flags, rzcu_device dev))      \
    X(cuCtxDestroy_v2, rzcu_result, (rzcu_context ctx))                                                     \
    X(cuCtxGetCurrent, rzcu_result, (rzcu_context * pctx))                                                  \
    X(cuCtxSetCurrent, rzcu_result, (rzcu_context ctx))                                                     \
    X(cuCtxPushCurrent_v2, rzcu_result, (rzcu_context ctx))                                                 \
    X(cuCtxPopCurrent_v2, rzcu_result, (rzcu_context * pctx))                                               \
    X(cuCtxGetDevice, rzcu_result, (rzcu_device * dev))                                                     \
    X(cuCtxSynchronize, rzcu_result, (void))                                                                \
    X(cuCtxSynchronize_v2, rzcu_result, (rzcu_context ctx))                                                 \
    X(cuMemAlloc_v2, rzcu_result, (rzcu_deviceptr * dptr, size_t bytesize))                                 \
    X(cuMemAllocPitch_v2, rzcu_result,                                                                      \
      (rzcu_deviceptr * dptr, size_t * pitch, size_t width_bytes, size_t height, unsigned int element_bytes)) \
    X(cuMemAllocManaged, rzcu_result, (rzcu_deviceptr * dptr, size_t bytesize, unsigned int flags))         \
    X(cuMemAllocHost_v2, rzcu_result, (void **pp, size_t bytesize))                                         \
    X(cuMemFreeHost, rzcu_result, (void *p))                                                                \
    X(cuMemHostRegister_v2, rzcu_result, (void *p, size_t bytesize, unsigned int flags))                    \
    X(cuMemHostUnregister, rzcu_result, (void *p))                                                          \
    X(cuMemFree_v2, rzcu_result, (rzcu_deviceptr dptr))                                                     \
    X(cuMemAllocAsync, rzcu_result, (rzcu_deviceptr * dptr, size_t bytesize, rzcu_stream s))                \
    X(cuMemAllocFromPoolAsync, rzcu_result,                                                                 \
      (rzcu_deviceptr * dptr, size_t bytesize, rzcu_mem_pool pool, rzcu_stream s))                          \
    X(cuMemFreeAsync, rzcu_result, (rzcu_deviceptr dptr, rzcu_stream s))                                    \
    X(cuDeviceGetDefaultMemPool, rzcu_result, (rzcu_mem_pool * pool, rzcu_device dev))                      \
    X(cuMemGetAddressRange_v2, rzcu_result, (rzcu_deviceptr * pbase, size_t * psize, rzcu_deviceptr dptr))  \
    X(cuMemGetInfo_v2, rzcu_result, (size_t * free_bytes, size_t * total_bytes))                            \
    X(cuPointerGetAttribute, rzcu_result, (void *data, rzcu_pointer_attribute attribute, rzcu_deviceptr ptr)) \
    X(cuPointerGetAttributes, rzcu_result,                                                                  \
      (unsigned int num_attributes, rzcu_pointer_attribute *attributes, void **data, rzcu_deviceptr ptr))   \
    X(cuMemsetD8_v2, rzcu_result, (rzcu_deviceptr dst, unsigned char uc, size_t n))                         \
    X(cuMemsetD8Async, rzcu_result, (rzcu_deviceptr dst, unsigned char uc, size_t n, rzcu_stream s))        \
    X(cuMemcpyHtoD_v2, rzcu_result, (rzcu_deviceptr dst, const void *src, size_t n))                        \
    X(cuMemcpyDtoH_v2, rzcu_result, (void *dst, rzcu_deviceptr src, size_t n))                              \
    X(cuMemcpyDtoD_v2, rzcu_result, (rzcu_deviceptr dst, rzcu_deviceptr src, size_t n))                     \
    X(cuMemcpyHtoDAsync_v2, rzcu_result, (rzcu_deviceptr dst, const void *src, size_t n, rzcu_stream s))    \
    X(cuMemcpyDtoHAsync_v2, rzcu_result, (void *dst, rzcu_deviceptr src, size_t n, rzcu_stream s))          \
    X(cuMemcpyDtoDAsync_v2, rzcu_result, (rzcu_deviceptr dst, rzcu_deviceptr src, size_t n, rzcu_stream s)) \
    X(cuMemcpyBatchAsync_v2, rzcu_result,                                                                   \
      (rzcu_deviceptr * dsts, rzcu_deviceptr * srcs, size_t * sizes, size_t count,                          \
       RZCU_MEMCPY_ATTRIBUTES * attrs, size_t * attrs_idxs, size_t num_attrs, rzcu_stream s))               \
    X(cuStreamCreate, rzcu_result, (rzcu_stream * ps, unsigned int flags))                                  \
    X(cuStreamDestroy_v2, rzcu_result, (rzcu_stream s))                                                     \
    X(cuStreamSynchronize, rzcu_result, (rzcu_stream s))                                                    \
    X(cuStreamQuery, rzcu_result, (rzcu_stream s))                                                          \
    X(cuLaunchHostFunc, rzcu_result, (rzcu_stream s, rzcu_host_fn fn, void *user_data))                     \
    X(cuEventCreate, rzcu_result, (rzcu_event * pe, unsigned int flags))                                    \
    X(cuEventRecord, rzcu_result, (rzcu_event e, rzcu_stream s))                                            \
    X(cuEventSynchronize, rzcu_result, (rzcu_event e))                                                      \
    X(cuEventQuery, rzcu_result, (rzcu_event e))                                                            \
    X(cuEventDestroy_v2, rzcu_result, (rzcu_event e))                                                       \
    X(cuStreamWaitEvent, rzcu_result, (rzcu_stream s, rzcu_event e, unsigned int flags))                    \
    X(cuModuleLoadData, rzcu_result, (rzcu_module * pmod, const void *image))                               \
    X(cuModuleUnload, rzcu_result, (rzcu_module mod))                                                       \
    X(cuLibraryUnload, rzcu_result, (rzcu_library library))                                                 \
    X(cuModuleGetFunction, rzcu_result, (rzcu_function * pf, rzcu_module mod, const char *name))            \
    X(cuFuncGetName, rzcu_result, (const char **name, rzcu_function f))                                     \
    X(cuKernelGetName, rzcu_result, (const char **name, rzcu_kernel hfunc))                                \
    X(cuStreamIsCapturing, rzcu_result, (rzcu_stream s, rzcu_capture_status *status))                      \
    X(cuThreadExchangeStreamCaptureMode, rzcu_result, (rzcu_capture_mode * mode))                           \
    X(cuStreamBeginCapture_v2, rzcu_result, (rzcu_stream s, rzcu_capture_mode mode))                         \
    X(cuStreamEndCapture, rzcu_result, (rzcu_stream s, struct CUgraph_st **graph))                          \
    X(cuLaunchKernel, rzcu_result,                                                                          \
      (rzcu_function f, unsigned int grid_x, unsigned int grid_y, unsigned int grid_z, unsigned int block_x, \
       unsigned int block_y, unsigned int block_z, unsigned int shared_bytes, rzcu_stream s, void **params,  \
       void **extra))                                                                                       \
    X(cuLaunchKernelEx, rzcu_result,                                                                        \
      (const RZCU_LAUNCH_CONFIG *config, rzcu_function f, void **params, void **extra))                     \
    X(cuMemGetAllocationGranularity, rzcu_result,                                                           \
      (size_t * granularity, const RZCU_MEM_ALLOCATION_PROP *prop, rzcu_mem_granularity_flags option))      \
    X(cuMemAddressReserve, rzcu_result,                                                                     \
      (rzcu_deviceptr * ptr, size_t size, size_t alignment, rzcu_deviceptr addr, unsigned long long flags)) \
    X(cuMemAddressFree, rzcu_result, (rzcu_deviceptr ptr, size_t size))                                     \
    X(cuMemCreate, rzcu_result,                                                                             \
      (rzcu_mem_generic_alloc_handle * handle, size_t size, const RZCU_MEM_ALLOCATION_PROP *prop,           \
       unsigned long long flags))                                                                           \
    X(cuMemRelease, rzcu_result, (rzcu_mem_generic_alloc_handle handle))                                    \
    X(cuMemMap, rzcu_result,                                                                                \
      (rzcu_deviceptr ptr, size_t size, size_t offset, rzcu_mem_generic_alloc_handle handle,                \
       unsigned long long flags))                                                                           \
    X(cuMemUnmap, rzcu_result, (rzcu_deviceptr ptr, size_t size))                                           \
    X(cuMemSetAccess, rzcu_result,                                                                          \
      (rzcu_deviceptr ptr, size_t size, const RZCU_MEM_ACCESS_DESC *desc, size_t count))                    \
    X(cuGetErrorName, rzcu_result, (rzcu_result error, const char **pstr))                                  \
    X(cuGetErrorString, rzcu_result, (rzcu_result error, const char **pstr))                                \
    X(cuGetProcAddress_v2, rzcu_result,                                                                     \
      (const char *symbol, void **pfn, int cuda_version, rzcu_uint64 flags, rzcu_proc_query_result *status))

/*
 * Y(variant, base): per-thread-default-stream variants, exported by libcuda with their base entry point's
 * signature (cuda.h declares them only under its own internal macros, so cu_check.c checks the base).
 */
#define RZCU_PER_THREAD_VARIANTS(Y)                      \
    Y(cuMemsetD8_v2_ptds, cuMemsetD8_v2)                 \
    Y(cuMemsetD8Async_ptsz, cuMemsetD8Async)             \
    Y(cuMemcpyHtoD_v2_ptds, cuMemcpyHtoD_v2)             \
    Y(cuMemcpyDtoH_v2_ptds, cuMemcpyDtoH_v2)             \
    Y(cuMemcpyDtoD_v2_ptds, cuMemcpyDtoD_v2)             \
    Y(cuMemcpyHtoDAsync_v2_ptsz, cuMemcpyHtoDAsync_v2)   \
    Y(cuMemcpyDtoHAsync_v2_ptsz, cuMemcpyDtoHAsync_v2)   \
    Y(cuMemcpyDtoDAsync_v2_ptsz, cuMemcpyDtoDAsync_v2)   \
    Y(cuMemcpyBatchAsync_v2_ptsz, cuMemcpyBatchAsync_v2) \
    Y(cuStreamSynchronize_ptsz, cuStreamSynchronize)     \
    Y(cuStreamQuery_ptsz, cuStreamQuery)                 \
    Y(cuLaunchHostFunc_ptsz, cuLaunchHostFunc)           \
    Y(cuMemAllocAsync_ptsz, cuMemAllocAsync)             \
    Y(cuMemAllocFromPoolAsync_ptsz, cuMemAllocFromPoolAsync) \
    Y(cuMemFreeAsync_ptsz, cuMemFreeAsync)               \
    Y(cuEventRecord_ptsz, cuEventRecord)                 \
    Y(cuLaunchKernel_ptsz, cuLaunchKernel)               \
    Y(cuLaunchKernelEx_ptsz, cuLaunchKernelEx)           \
    Y(cuStreamBeginCapture_v2_ptsz, cuStreamBeginCapture_v2) \
    Y(cuStreamEndCapture_ptsz, cuStreamEndCapture)

#define RZCU_FN_TYPEDEF_(name, ret, params) typedef ret rzcu_fn_##name params;
RZCU_ENTRY_POINTS(RZCU_FN_TYPEDEF_)
#define RZCU_VARIANT_TYPEDEF_(variant, base) typedef rzcu_fn_##base rzcu_fn_##variant;
RZCU_PER_THREAD_VARIANTS(RZCU_VARIANT_TYPEDEF_)

/*
 * Y(exported name, newer name): older ABIs of the entry points that end a context (CUDA 2.0 cuCtxDestroy,
 * CUDA 7.0 cuDevicePrimaryCtxRelease/Reset), with the newer one's parameters. Drivers still export them for
 * programs built against old headers, and cuGetProcAddress hands them out for old versions; cuda.h 13 no
 * longer declares them, so they cannot be checked against it.
 */
#define RZCU_LEGACY_ENTRY_POINTS(Y)                                                                          \
    Y(cuCtxDestroy, cuCtxDestroy_v2)                                                                         \
    Y(cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease_v2)                                               \
    Y(cuDevicePrimaryCtxReset, cuDevicePrimaryCtxReset_v2)

/*
 * The older ABIs of the entry points that change a thread's current context, only interposed (hooks_ctx.c:
 * the library keeps each thread's current context without asking the driver at every allocation), never
 * called by the library: Y(exported name, newer name) with the newer one's parameters (CUDA 2.0 push and pop),
 * and X(...) for the creations cuda.h 13 no longer declares (CUDA 3.2 cuCtxCreate_v2, 11.4 cuCtxCreate_v3;
 * cuCtxCreate is the 2.0 ABI of _v2). Not checked against cuda.h, not in the emulated driver.
 */
#define RZCU_CTX_LEGACY_ENTRY_POINTS(Y) Y(cuCtxPushCurrent, cuCtxPushCurrent_v2) Y(cuCtxPopCurrent, cuCtxPopCurrent_v2)
#define RZCU_CTX_CREATE_ENTRY_POINTS(X)                                                                      \
    X(cuCtxCreate_v2, rzcu_result, (rzcu_context * pctx, unsigned int flags, rzcu_device dev))              \
    X(cuCtxCreate_v3, rzcu_result,                                                                          \
      (rzcu_context * pctx, void *params, int nparams, unsigned int flags, rzcu_device dev))
#define RZCU_CTX_CREATE_VARIANTS(Y) Y(cuCtxCreate, cuCtxCreate_v2)

/*
 * X(...): entry points only interposed, never called by the library, that a driver may lack (CUDA 12.3
 * cuStreamBeginCaptureToGraph). Checked against cuda.h like the others.
 */
#define RZCU_OPTIONAL_ENTRY_POINTS(X)                                                                        \
    X(cuStreamBeginCaptureToGraph, rzcu_result,                                                             \
      (rzcu_stream s, struct CUgraph_st * graph, struct CUgraphNode_st *const *deps,                         \
       const struct CUgraphEdgeData_st *edge_data, size_t ndeps, rzcu_capture_mode mode))
RZCU_OPTIONAL_ENTRY_POINTS(RZCU_FN_TYPEDEF_)
RZCU_CTX_CREATE_ENTRY_POINTS(RZCU_FN_TYPEDEF_)
/* Y(variant, base) as above, for the optional entry points. */
#define RZCU_OPTIONAL_VARIANTS(Y) Y(cuStreamBeginCaptureToGraph_ptsz, cuStreamBeginCaptureToGraph)
RZCU_OPTIONAL_VARIANTS(RZCU_VARIANT_TYPEDEF_)

/*
 * The CUDA 10.0 cuStreamBeginCapture (and _ptsz), without a capture mode: still exported for programs built
 * against old headers, and handed out by cuGetProcAddress for version 10000; cuda.h 13 no longer declares
 * it under this name.
 */
typedef rzcu_result rzcu_fn_cuStreamBeginCapture(rzcu_stream s);

/*
 * X(name, return type, parameter list): IPC memory handles (CUipcMemHandle: 64 opaque bytes, passed by value;
 * and pool pointer exports, CUmemPoolPtrExportData, 64 bytes too, and the pool calls the quarantine answers
 * for (hooks_vmm.c);
 * the driver's, never changed by redzone). A list apart from RZCU_ENTRY_POINTS: only libredzone resolves and
 * wraps them (hooks_ipc.c); the emulated driver declares them among its extras, and the call-trace shim does
 * not trace them (a handle is no argument it can write). Y(exported name, newer name): cuIpcOpenMemHandle, the
 * CUDA 4.1 ABI of cuIpcOpenMemHandle_v2 (cuda.h renames the one to the other, so only _v2 is checked).
 */
#define RZCU_IPC_HANDLE_SIZE 64
#define RZCU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS 0x1
typedef struct rzcu_ipc_mem_handle {
    char reserved[RZCU_IPC_HANDLE_SIZE];
} rzcu_ipc_mem_handle;
#ifndef RZCU_IPC_MEM_HANDLE
#define RZCU_IPC_MEM_HANDLE rzcu_ipc_mem_handle
#endif
/* CUmemPoolPtrExportData: a pool allocation's export (cuMemPoolExportPointer), 64 opaque bytes, the same way. */
typedef struct rzcu_mem_pool_ptr_export_data {
    unsigned char reserved[RZCU_IPC_HANDLE_SIZE];
} rzcu_mem_pool_ptr_export_data;
/* CUmemPool_attribute: only CU_MEMPOOL_ATTR_USED_MEM_CURRENT is looked at (hooks_vmm.c). */
#ifndef RZCU_MEMPOOL_ATTRIBUTE
#define RZCU_MEMPOOL_ATTRIBUTE int
#endif
#define RZCU_MEMPOOL_ATTR_USED_MEM_CURRENT 7
#ifndef RZCU_MEM_POOL_PTR_EXPORT_DATA
#define RZCU_MEM_POOL_PTR_EXPORT_DATA rzcu_mem_pool_ptr_export_data
#endif
#define RZCU_IPC_ENTRY_POINTS(X)                                                                             \
    X(cuIpcGetMemHandle, rzcu_result, (RZCU_IPC_MEM_HANDLE * handle, rzcu_deviceptr dptr))                  \
    X(cuIpcOpenMemHandle_v2, rzcu_result,                                                                   \
      (rzcu_deviceptr * pdptr, RZCU_IPC_MEM_HANDLE handle, unsigned int flags))                             \
    X(cuIpcCloseMemHandle, rzcu_result, (rzcu_deviceptr dptr))                                              \
    X(cuMemPoolExportPointer, rzcu_result, (RZCU_MEM_POOL_PTR_EXPORT_DATA * data, rzcu_deviceptr ptr))      \
    X(cuMemPoolImportPointer, rzcu_result,                                                                  \
      (rzcu_deviceptr * ptr_out, rzcu_mem_pool pool, RZCU_MEM_POOL_PTR_EXPORT_DATA * data))                  \
    X(cuMemPoolGetAttribute, rzcu_result, (rzcu_mem_pool pool, RZCU_MEMPOOL_ATTRIBUTE attr, void *value))    \
    X(cuMemPoolTrimTo, rzcu_result, (rzcu_mem_pool pool, size_t min_bytes_to_keep))                         \
    X(cuMemPoolDestroy, rzcu_result, (rzcu_mem_pool pool))
#define RZCU_IPC_LEGACY_ENTRY_POINTS(Y) Y(cuIpcOpenMemHandle, cuIpcOpenMemHandle_v2)
RZCU_IPC_ENTRY_POINTS(RZCU_FN_TYPEDEF_)

/*
 * The CUDA 11.3 entry point cuGetProcAddress (no status out-parameter). Still exported by CUDA 13 drivers
 * and used by older runtimes; cuda.h 13 no longer declares it, so it cannot be checked against it.
 */
typedef rzcu_result rzcu_fn_cuGetProcAddress(const char *symbol, void **pfn, int cuda_version, rzcu_uint64 flags);

/*
 * X(exported name, base name, since version, per-thread, parameter list, argument list): the entry points
 * through which a program's copies, memsets and launches (other than cuLaunchKernel/Ex, wrapped with kernel
 * attribution) reach device memory. libredzone wraps each to install waiting bands first (lazy install) and
 * otherwise forwards it untouched; descriptors and handles are passed through as opaque pointers. The
 * version and flag columns are cuGetProcAddress's (cudaTypedefs.h: PFN_<base>_v<since>[_ptds|_ptsz]).
 */
#define RZCU_DEVICE_WRITERS(X) \
    X(cuMemcpy, cuMemcpy, 4000, 0, (rzcu_deviceptr dst, rzcu_deviceptr src, size_t n), (dst, src, n)) \
    X(cuMemcpy_ptds, cuMemcpy, 7000, 1, (rzcu_deviceptr dst, rzcu_deviceptr src, size_t n), (dst, src, n)) \
    X(cuMemcpyAsync, cuMemcpyAsync, 4000, 0, (rzcu_deviceptr dst, rzcu_deviceptr src, size_t n, rzcu_stream s), (dst, src, n, s)) \
    X(cuMemcpyAsync_ptsz, cuMemcpyAsync, 7000, 1, (rzcu_deviceptr dst, rzcu_deviceptr src, size_t n, rzcu_stream s), (dst, src, n, s)) \
    X(cuMemcpyPeer, cuMemcpyPeer, 4000, 0, (rzcu_deviceptr dst, rzcu_context dctx, rzcu_deviceptr src, rzcu_context sctx, size_t n), (dst, dctx, src, sctx, n)) \
    X(cuMemcpyPeer_ptds, cuMemcpyPeer, 7000, 1, (rzcu_deviceptr dst, rzcu_context dctx, rzcu_deviceptr src, rzcu_context sctx, size_t n), (dst, dctx, src, sctx, n)) \
    X(cuMemcpyPeerAsync, cuMemcpyPeerAsync, 4000, 0, (rzcu_deviceptr dst, rzcu_context dctx, rzcu_deviceptr src, rzcu_context sctx, size_t n, rzcu_stream s), (dst, dctx, src, sctx, n, s)) \
    X(cuMemcpyPeerAsync_ptsz, cuMemcpyPeerAsync, 7000, 1, (rzcu_deviceptr dst, rzcu_context dctx, rzcu_deviceptr src, rzcu_context sctx, size_t n, rzcu_stream s), (dst, dctx, src, sctx, n, s)) \
    X(cuMemcpyHtoD_v2, cuMemcpyHtoD, 3020, 0, (rzcu_deviceptr dst, const void *src, size_t n), (dst, src, n)) \
    X(cuMemcpyHtoD_v2_ptds, cuMemcpyHtoD, 7000, 1, (rzcu_deviceptr dst, const void *src, size_t n), (dst, src, n)) \
    X(cuMemcpyDtoH_v2, cuMemcpyDtoH, 3020, 0, (void *dst, rzcu_deviceptr src, size_t n), (dst, src, n)) \
    X(cuMemcpyDtoH_v2_ptds, cuMemcpyDtoH, 7000, 1, (void *dst, rzcu_deviceptr src, size_t n), (dst, src, n)) \
    X(cuMemcpyDtoD_v2, cuMemcpyDtoD, 3020, 0, (rzcu_deviceptr dst, rzcu_deviceptr src, size_t n), (dst, src, n)) \
    X(cuMemcpyDtoD_v2_ptds, cuMemcpyDtoD, 7000, 1, (rzcu_deviceptr dst, rzcu_deviceptr src, size_t n), (dst, src, n)) \
    X(cuMemcpyHtoDAsync_v2, cuMemcpyHtoDAsync, 3020, 0, (rzcu_deviceptr dst, const void *src, size_t n, rzcu_stream s), (dst, src, n, s)) \
    X(cuMemcpyHtoDAsync_v2_ptsz, cuMemcpyHtoDAsync, 7000, 1, (rzcu_deviceptr dst, const void *src, size_t n, rzcu_stream s), (dst, src, n, s)) \
    X(cuMemcpyDtoHAsync_v2, cuMemcpyDtoHAsync, 3020, 0, (void *dst, rzcu_deviceptr src, size_t n, rzcu_stream s), (dst, src, n, s)) \
    X(cuMemcpyDtoHAsync_v2_ptsz, cuMemcpyDtoHAsync, 7000, 1, (void *dst, rzcu_deviceptr src, size_t n, rzcu_stream s), (dst, src, n, s)) \
    X(cuMemcpyDtoDAsync_v2, cuMemcpyDtoDAsync, 3020, 0, (rzcu_deviceptr dst, rzcu_deviceptr src, size_t n, rzcu_stream s), (dst, src, n, s)) \
    X(cuMemcpyDtoDAsync_v2_ptsz, cuMemcpyDtoDAsync, 7000, 1, (rzcu_deviceptr dst, rzcu_deviceptr src, size_t n, rzcu_stream s), (dst, src, n, s)) \
    X(cuMemcpyDtoA_v2, cuMemcpyDtoA, 3020, 0, (void *dst_array, size_t dst_offset, rzcu_deviceptr src, size_t n), (dst_array, dst_offset, src, n)) \
    X(cuMemcpyDtoA_v2_ptds, cuMemcpyDtoA, 7000, 1, (void *dst_array, size_t dst_offset, rzcu_deviceptr src, size_t n), (dst_array, dst_offset, src, n)) \
    X(cuMemcpyAtoD_v2, cuMemcpyAtoD, 3020, 0, (rzcu_deviceptr dst, void *src_array, size_t src_offset, size_t n), (dst, src_array, src_offset, n)) \
    X(cuMemcpyAtoD_v2_ptds, cuMemcpyAtoD, 7000, 1, (rzcu_deviceptr dst, void *src_array, size_t src_offset, size_t n), (dst, src_array, src_offset, n)) \
    X(cuMemcpy2D_v2, cuMemcpy2D, 3020, 0, (const void *desc), (desc)) \
    X(cuMemcpy2D_v2_ptds, cuMemcpy2D, 7000, 1, (const void *desc), (desc)) \
    X(cuMemcpy2DUnaligned_v2, cuMemcpy2DUnaligned, 3020, 0, (const void *desc), (desc)) \
    X(cuMemcpy2DUnaligned_v2_ptds, cuMemcpy2DUnaligned, 7000, 1, (const void *desc), (desc)) \
    X(cuMemcpy3D_v2, cuMemcpy3D, 3020, 0, (const void *desc), (desc)) \
    X(cuMemcpy3D_v2_ptds, cuMemcpy3D, 7000, 1, (const void *desc), (desc)) \
    X(cuMemcpy2DAsync_v2, cuMemcpy2DAsync, 3020, 0, (const void *desc, rzcu_stream s), (desc, s)) \
    X(cuMemcpy2DAsync_v2_ptsz, cuMemcpy2DAsync, 7000, 1, (const void *desc, rzcu_stream s), (desc, s)) \
    X(cuMemcpy3DAsync_v2, cuMemcpy3DAsync, 3020, 0, (const void *desc, rzcu_stream s), (desc, s)) \
    X(cuMemcpy3DAsync_v2_ptsz, cuMemcpy3DAsync, 7000, 1, (const void *desc, rzcu_stream s), (desc, s)) \
    X(cuMemcpy3DPeer, cuMemcpy3DPeer, 4000, 0, (const void *desc), (desc)) \
    X(cuMemcpy3DPeer_ptds, cuMemcpy3DPeer, 7000, 1, (const void *desc), (desc)) \
    X(cuMemcpy3DPeerAsync, cuMemcpy3DPeerAsync, 4000, 0, (const void *desc, rzcu_stream s), (desc, s)) \
    X(cuMemcpy3DPeerAsync_ptsz, cuMemcpy3DPeerAsync, 7000, 1, (const void *desc, rzcu_stream s), (desc, s)) \
    X(cuMemcpyBatchAsync, cuMemcpyBatchAsync, 12080, 0, (rzcu_deviceptr *dsts, rzcu_deviceptr *srcs, size_t *sizes, size_t count, void *attrs, size_t *attrs_idxs, size_t num_attrs, size_t *fail_idx, rzcu_stream s), (dsts, srcs, sizes, count, attrs, attrs_idxs, num_attrs, fail_idx, s)) \
    X(cuMemcpyBatchAsync_ptsz, cuMemcpyBatchAsync, 12080, 1, (rzcu_deviceptr *dsts, rzcu_deviceptr *srcs, size_t *sizes, size_t count, void *attrs, size_t *attrs_idxs, size_t num_attrs, size_t *fail_idx, rzcu_stream s), (dsts, srcs, sizes, count, attrs, attrs_idxs, num_attrs, fail_idx, s)) \
    X(cuMemcpyBatchAsync_v2, cuMemcpyBatchAsync, 13000, 0, (rzcu_deviceptr *dsts, rzcu_deviceptr *srcs, size_t *sizes, size_t count, void *attrs, size_t *attrs_idxs, size_t num_attrs, rzcu_stream s), (dsts, srcs, sizes, count, attrs, attrs_idxs, num_attrs, s)) \
    X(cuMemcpyBatchAsync_v2_ptsz, cuMemcpyBatchAsync, 13000, 1, (rzcu_deviceptr *dsts, rzcu_deviceptr *srcs, size_t *sizes, size_t count, void *attrs, size_t *attrs_idxs, size_t num_attrs, rzcu_stream s), (dsts, srcs, sizes, count, attrs, attrs_idxs, num_attrs, s)) \
    X(cuMemcpy3DBatchAsync, cuMemcpy3DBatchAsync, 12080, 0, (size_t count, void *ops, size_t *fail_idx, unsigned long long flags, rzcu_stream s), (count, ops, fail_idx, flags, s)) \
    X(cuMemcpy3DBatchAsync_ptsz, cuMemcpy3DBatchAsync, 12080, 1, (size_t count, void *ops, size_t *fail_idx, unsigned long long flags, rzcu_stream s), (count, ops, fail_idx, flags, s)) \
    X(cuMemcpy3DBatchAsync_v2, cuMemcpy3DBatchAsync, 13000, 0, (size_t count, void *ops, unsigned long long flags, rzcu_stream s), (count, ops, flags, s)) \
    X(cuMemcpy3DBatchAsync_v2_ptsz, cuMemcpy3DBatchAsync, 13000, 1, (size_t count, void *ops, unsigned long long flags, rzcu_stream s), (count, ops, flags, s)) \
    X(cuMemsetD8_v2, cuMemsetD8, 3020, 0, (rzcu_deviceptr dst, unsigned char value, size_t n), (dst, value, n)) \
    X(cuMemsetD8_v2_ptds, cuMemsetD8, 7000, 1, (rzcu_deviceptr dst, unsigned char value, size_t n), (dst, value, n)) \
    X(cuMemsetD8Async, cuMemsetD8Async, 3020, 0, (rzcu_deviceptr dst, unsigned char value, size_t n, rzcu_stream s), (dst, value, n, s)) \
    X(cuMemsetD8Async_ptsz, cuMemsetD8Async, 7000, 1, (rzcu_deviceptr dst, unsigned char value, size_t n, rzcu_stream s), (dst, value, n, s)) \
    X(cuMemsetD2D8_v2, cuMemsetD2D8, 3020, 0, (rzcu_deviceptr dst, size_t pitch, unsigned char value, size_t width, size_t height), (dst, pitch, value, width, height)) \
    X(cuMemsetD2D8_v2_ptds, cuMemsetD2D8, 7000, 1, (rzcu_deviceptr dst, size_t pitch, unsigned char value, size_t width, size_t height), (dst, pitch, value, width, height)) \
    X(cuMemsetD2D8Async, cuMemsetD2D8Async, 3020, 0, (rzcu_deviceptr dst, size_t pitch, unsigned char value, size_t width, size_t height, rzcu_stream s), (dst, pitch, value, width, height, s)) \
    X(cuMemsetD2D8Async_ptsz, cuMemsetD2D8Async, 7000, 1, (rzcu_deviceptr dst, size_t pitch, unsigned char value, size_t width, size_t height, rzcu_stream s), (dst, pitch, value, width, height, s)) \
    X(cuMemsetD16_v2, cuMemsetD16, 3020, 0, (rzcu_deviceptr dst, unsigned short value, size_t n), (dst, value, n)) \
    X(cuMemsetD16_v2_ptds, cuMemsetD16, 7000, 1, (rzcu_deviceptr dst, unsigned short value, size_t n), (dst, value, n)) \
    X(cuMemsetD16Async, cuMemsetD16Async, 3020, 0, (rzcu_deviceptr dst, unsigned short value, size_t n, rzcu_stream s), (dst, value, n, s)) \
    X(cuMemsetD16Async_ptsz, cuMemsetD16Async, 7000, 1, (rzcu_deviceptr dst, unsigned short value, size_t n, rzcu_stream s), (dst, value, n, s)) \
    X(cuMemsetD2D16_v2, cuMemsetD2D16, 3020, 0, (rzcu_deviceptr dst, size_t pitch, unsigned short value, size_t width, size_t height), (dst, pitch, value, width, height)) \
    X(cuMemsetD2D16_v2_ptds, cuMemsetD2D16, 7000, 1, (rzcu_deviceptr dst, size_t pitch, unsigned short value, size_t width, size_t height), (dst, pitch, value, width, height)) \
    X(cuMemsetD2D16Async, cuMemsetD2D16Async, 3020, 0, (rzcu_deviceptr dst, size_t pitch, unsigned short value, size_t width, size_t height, rzcu_stream s), (dst, pitch, value, width, height, s)) \
    X(cuMemsetD2D16Async_ptsz, cuMemsetD2D16Async, 7000, 1, (rzcu_deviceptr dst, size_t pitch, unsigned short value, size_t width, size_t height, rzcu_stream s), (dst, pitch, value, width, height, s)) \
    X(cuMemsetD32_v2, cuMemsetD32, 3020, 0, (rzcu_deviceptr dst, unsigned int value, size_t n), (dst, value, n)) \
    X(cuMemsetD32_v2_ptds, cuMemsetD32, 7000, 1, (rzcu_deviceptr dst, unsigned int value, size_t n), (dst, value, n)) \
    X(cuMemsetD32Async, cuMemsetD32Async, 3020, 0, (rzcu_deviceptr dst, unsigned int value, size_t n, rzcu_stream s), (dst, value, n, s)) \
    X(cuMemsetD32Async_ptsz, cuMemsetD32Async, 7000, 1, (rzcu_deviceptr dst, unsigned int value, size_t n, rzcu_stream s), (dst, value, n, s)) \
    X(cuMemsetD2D32_v2, cuMemsetD2D32, 3020, 0, (rzcu_deviceptr dst, size_t pitch, unsigned int value, size_t width, size_t height), (dst, pitch, value, width, height)) \
    X(cuMemsetD2D32_v2_ptds, cuMemsetD2D32, 7000, 1, (rzcu_deviceptr dst, size_t pitch, unsigned int value, size_t width, size_t height), (dst, pitch, value, width, height)) \
    X(cuMemsetD2D32Async, cuMemsetD2D32Async, 3020, 0, (rzcu_deviceptr dst, size_t pitch, unsigned int value, size_t width, size_t height, rzcu_stream s), (dst, pitch, value, width, height, s)) \
    X(cuMemsetD2D32Async_ptsz, cuMemsetD2D32Async, 7000, 1, (rzcu_deviceptr dst, size_t pitch, unsigned int value, size_t width, size_t height, rzcu_stream s), (dst, pitch, value, width, height, s)) \
    X(cuLaunchCooperativeKernel, cuLaunchCooperativeKernel, 9000, 0, (rzcu_function f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared, rzcu_stream s, void **params), (f, gx, gy, gz, bx, by, bz, shared, s, params)) \
    X(cuLaunchCooperativeKernel_ptsz, cuLaunchCooperativeKernel, 9000, 1, (rzcu_function f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared, rzcu_stream s, void **params), (f, gx, gy, gz, bx, by, bz, shared, s, params)) \
    X(cuGraphLaunch, cuGraphLaunch, 10000, 0, (void *graph_exec, rzcu_stream s), (graph_exec, s)) \
    X(cuGraphLaunch_ptsz, cuGraphLaunch, 10000, 1, (void *graph_exec, rzcu_stream s), (graph_exec, s))

#define RZCU_WRITER_TYPEDEF(exported, base, since, per_thread, params, args) typedef rzcu_result rzcu_wfn_##exported params;
RZCU_DEVICE_WRITERS(RZCU_WRITER_TYPEDEF)
#undef RZCU_WRITER_TYPEDEF

#endif /* REDZONE_CU_H */
