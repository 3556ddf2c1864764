/*
 * CUresult names and numbers (as in cuda.h's CUresult enum) with the emulator's own short descriptions,
 * for cuGetErrorName / cuGetErrorString and for parsing CUDA_EMU_FAIL; and which of them are sticky.
 */
#define _GNU_SOURCE
#include <string.h>

#include "emu_internal.h"

/* X(name, value, description) */
#define EMU_ERRORS(X) \
    X(CUDA_SUCCESS, 0, "no error") \
    X(CUDA_ERROR_INVALID_VALUE, 1, "invalid argument") \
    X(CUDA_ERROR_OUT_OF_MEMORY, 2, "out of memory") \
    X(CUDA_ERROR_NOT_INITIALIZED, 3, "initialization error") \
    X(CUDA_ERROR_DEINITIALIZED, 4, "driver shutting down") \
    X(CUDA_ERROR_PROFILER_DISABLED, 5, "profiler disabled") \
    X(CUDA_ERROR_PROFILER_NOT_INITIALIZED, 6, "profiler not initialized") \
    X(CUDA_ERROR_PROFILER_ALREADY_STARTED, 7, "profiler already started") \
    X(CUDA_ERROR_PROFILER_ALREADY_STOPPED, 8, "profiler already stopped") \
    X(CUDA_ERROR_STUB_LIBRARY, 34, "stub library") \
    X(CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER, 36, "call requires newer driver") \
    X(CUDA_ERROR_DEVICE_UNAVAILABLE, 46, "device unavailable") \
    X(CUDA_ERROR_NO_DEVICE, 100, "no CUDA-capable device is detected") \
    X(CUDA_ERROR_INVALID_DEVICE, 101, "invalid device ordinal") \
    X(CUDA_ERROR_DEVICE_NOT_LICENSED, 102, "device not licensed") \
    X(CUDA_ERROR_INVALID_IMAGE, 200, "invalid image") \
    X(CUDA_ERROR_INVALID_CONTEXT, 201, "invalid device context") \
    X(CUDA_ERROR_CONTEXT_ALREADY_CURRENT, 202, "context already current") \
    X(CUDA_ERROR_MAP_FAILED, 205, "map failed") \
    X(CUDA_ERROR_UNMAP_FAILED, 206, "unmap failed") \
    X(CUDA_ERROR_ARRAY_IS_MAPPED, 207, "array is mapped") \
    X(CUDA_ERROR_ALREADY_MAPPED, 208, "already mapped") \
    X(CUDA_ERROR_NO_BINARY_FOR_GPU, 209, "no binary for gpu") \
    X(CUDA_ERROR_ALREADY_ACQUIRED, 210, "already acquired") \
    X(CUDA_ERROR_NOT_MAPPED, 211, "not mapped") \
    X(CUDA_ERROR_NOT_MAPPED_AS_ARRAY, 212, "not mapped as array") \
    X(CUDA_ERROR_NOT_MAPPED_AS_POINTER, 213, "not mapped as pointer") \
    X(CUDA_ERROR_ECC_UNCORRECTABLE, 214, "ecc uncorrectable") \
    X(CUDA_ERROR_UNSUPPORTED_LIMIT, 215, "unsupported limit") \
    X(CUDA_ERROR_CONTEXT_ALREADY_IN_USE, 216, "context already in use") \
    X(CUDA_ERROR_PEER_ACCESS_UNSUPPORTED, 217, "peer access unsupported") \
    X(CUDA_ERROR_INVALID_PTX, 218, "invalid ptx") \
    X(CUDA_ERROR_INVALID_GRAPHICS_CONTEXT, 219, "invalid graphics context") \
    X(CUDA_ERROR_NVLINK_UNCORRECTABLE, 220, "nvlink uncorrectable") \
    X(CUDA_ERROR_JIT_COMPILER_NOT_FOUND, 221, "jit compiler not found") \
    X(CUDA_ERROR_UNSUPPORTED_PTX_VERSION, 222, "unsupported ptx version") \
    X(CUDA_ERROR_JIT_COMPILATION_DISABLED, 223, "jit compilation disabled") \
    X(CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY, 224, "unsupported exec affinity") \
    X(CUDA_ERROR_UNSUPPORTED_DEVSIDE_SYNC, 225, "unsupported devside sync") \
    X(CUDA_ERROR_CONTAINED, 226, "contained") \
    X(CUDA_ERROR_INVALID_SOURCE, 300, "invalid source") \
    X(CUDA_ERROR_FILE_NOT_FOUND, 301, "file not found") \
    X(CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND, 302, "shared object symbol not found") \
    X(CUDA_ERROR_SHARED_OBJECT_INIT_FAILED, 303, "shared object init failed") \
    X(CUDA_ERROR_OPERATING_SYSTEM, 304, "operating system") \
    X(CUDA_ERROR_INVALID_HANDLE, 400, "invalid resource handle") \
    X(CUDA_ERROR_ILLEGAL_STATE, 401, "illegal state") \
    X(CUDA_ERROR_LOSSY_QUERY, 402, "lossy query") \
    X(CUDA_ERROR_NOT_FOUND, 500, "named symbol not found") \
    X(CUDA_ERROR_NOT_READY, 600, "device not ready") \
    X(CUDA_ERROR_ILLEGAL_ADDRESS, 700, "an illegal memory access was encountered") \
    X(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, 701, "launch out of resources") \
    X(CUDA_ERROR_LAUNCH_TIMEOUT, 702, "launch timeout") \
    X(CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING, 703, "launch incompatible texturing") \
    X(CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, 704, "peer access already enabled") \
    X(CUDA_ERROR_PEER_ACCESS_NOT_ENABLED, 705, "peer access not enabled") \
    X(CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE, 708, "primary context active") \
    X(CUDA_ERROR_CONTEXT_IS_DESTROYED, 709, "context is destroyed") \
    X(CUDA_ERROR_ASSERT, 710, "assert") \
    X(CUDA_ERROR_TOO_MANY_PEERS, 711, "too many peers") \
    X(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, 712, "host memory already registered") \
    X(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, 713, "host memory not registered") \
    X(CUDA_ERROR_HARDWARE_STACK_ERROR, 714, "hardware stack error") \
    X(CUDA_ERROR_ILLEGAL_INSTRUCTION, 715, "illegal instruction") \
    X(CUDA_ERROR_MISALIGNED_ADDRESS, 716, "misaligned address") \
    X(CUDA_ERROR_INVALID_ADDRESS_SPACE, 717, "invalid address space") \
    X(CUDA_ERROR_INVALID_PC, 718, "invalid pc") \
    X(CUDA_ERROR_LAUNCH_FAILED, 719, "launch failed") \
    X(CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE, 720, "cooperative launch too large") \
    X(CUDA_ERROR_TENSOR_MEMORY_LEAK, 721, "tensor memory leak") \
    X(CUDA_ERROR_NOT_PERMITTED, 800, "operation not permitted") \
    X(CUDA_ERROR_NOT_SUPPORTED, 801, "operation not supported") \
    X(CUDA_ERROR_SYSTEM_NOT_READY, 802, "system not ready") \
    X(CUDA_ERROR_SYSTEM_DRIVER_MISMATCH, 803, "system driver mismatch") \
    X(CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE, 804, "compat not supported on device") \
    X(CUDA_ERROR_MPS_CONNECTION_FAILED, 805, "mps connection failed") \
    X(CUDA_ERROR_MPS_RPC_FAILURE, 806, "mps rpc failure") \
    X(CUDA_ERROR_MPS_SERVER_NOT_READY, 807, "mps server not ready") \
    X(CUDA_ERROR_MPS_MAX_CLIENTS_REACHED, 808, "mps max clients reached") \
    X(CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED, 809, "mps max connections reached") \
    X(CUDA_ERROR_MPS_CLIENT_TERMINATED, 810, "mps client terminated") \
    X(CUDA_ERROR_CDP_NOT_SUPPORTED, 811, "cdp not supported") \
    X(CUDA_ERROR_CDP_VERSION_MISMATCH, 812, "cdp version mismatch") \
    X(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, 900, "stream capture unsupported") \
    X(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, 901, "stream capture invalidated") \
    X(CUDA_ERROR_STREAM_CAPTURE_MERGE, 902, "stream capture merge") \
    X(CUDA_ERROR_STREAM_CAPTURE_UNMATCHED, 903, "stream capture unmatched") \
    X(CUDA_ERROR_STREAM_CAPTURE_UNJOINED, 904, "stream capture unjoined") \
    X(CUDA_ERROR_STREAM_CAPTURE_ISOLATION, 905, "stream capture isolation") \
    X(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, 906, "stream capture implicit") \
    X(CUDA_ERROR_CAPTURED_EVENT, 907, "captured event") \
    X(CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, 908, "stream capture wrong thread") \
    X(CUDA_ERROR_TIMEOUT, 909, "timeout") \
    X(CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, 910, "graph exec update failure") \
    X(CUDA_ERROR_EXTERNAL_DEVICE, 911, "external device") \
    X(CUDA_ERROR_INVALID_CLUSTER_SIZE, 912, "invalid cluster size") \
    X(CUDA_ERROR_FUNCTION_NOT_LOADED, 913, "function not loaded") \
    X(CUDA_ERROR_INVALID_RESOURCE_TYPE, 914, "invalid resource type") \
    X(CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION, 915, "invalid resource configuration") \
    X(CUDA_ERROR_KEY_ROTATION, 916, "key rotation") \
    X(CUDA_ERROR_UNKNOWN, 999, "unknown error")

static const struct emu_error {
    const char *name;
    rzcu_result value;
    const char *description;
} emu_errors[] = {
#define EMU_ERROR_ENTRY(n, v, d) {#n, v, d},
    EMU_ERRORS(EMU_ERROR_ENTRY)
#undef EMU_ERROR_ENTRY
};

static const struct emu_error *find_error(rzcu_result r)
{
    for (size_t i = 0; i < sizeof emu_errors / sizeof emu_errors[0]; i++)
        if (emu_errors[i].value == r)
            return &emu_errors[i];
    return NULL;
}

const char *emu_error_name(rzcu_result r)
{
    const struct emu_error *e = find_error(r);
    return e ? e->name : NULL;
}

const char *emu_error_string(rzcu_result r)
{
    const struct emu_error *e = find_error(r);
    return e ? e->description : NULL;
}

bool emu_error_by_name(const char *name, rzcu_result *out)
{
    for (size_t i = 0; i < sizeof emu_errors / sizeof emu_errors[0]; i++)
        if (strcmp(emu_errors[i].name, name) == 0) {
            *out = emu_errors[i].value;
            return true;
        }
    return false;
}

bool emu_error_is_sticky(rzcu_result r)
{
    switch (r) {
#define EMU_STICKY_CASE(name) case RZ##name:
        RZCU_STICKY_RESULTS(EMU_STICKY_CASE)
#undef EMU_STICKY_CASE
        return true;
    default:
        return false;
    }
}
