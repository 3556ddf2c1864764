/* Tests of the emulated CUDA driver (native/emu): initialisation, devices, contexts, cuGetProcAddress, error names, call counts and fault injection. Part of test_emu (tests/emu.cmake); shared
 * helpers in emu_test_util.h. Criterion runs every test in its own process. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "emu_test_util.h"

/* ---- initialisation and devices ---- */

Test(emu, init_and_version)
{
    int v = 0;
    OK(cuDriverGetVersion(&v));
    cr_assert_eq(v, 13000);
    int n = -1;
    FAILS(cuDeviceGetCount(&n), RZCUDA_ERROR_NOT_INITIALIZED);
    FAILS(cuInit(1), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuDeviceGetCount(&n), RZCUDA_ERROR_NOT_INITIALIZED);
    OK(cuInit(0));
    OK(cuDeviceGetCount(&n));
    cr_assert_eq(n, 1);
    cr_assert_eq(cuEmuIsEmulated(), 1);
    FAILS(cuDriverGetVersion(NULL), RZCUDA_ERROR_INVALID_VALUE);
}

Test(emu, not_initialized_errors)
{
    rzcu_deviceptr p;
    rzcu_context ctx;
    rzcu_device dev;
    FAILS(cuMemAlloc_v2(&p, 16), RZCUDA_ERROR_NOT_INITIALIZED);
    FAILS(cuDeviceGet(&dev, 0), RZCUDA_ERROR_NOT_INITIALIZED);
    FAILS(cuCtxGetCurrent(&ctx), RZCUDA_ERROR_NOT_INITIALIZED);
    FAILS(cuDevicePrimaryCtxRetain(&ctx, 0), RZCUDA_ERROR_NOT_INITIALIZED);
    FAILS(cuStreamSynchronize(NULL), RZCUDA_ERROR_NOT_INITIALIZED);
    const char *s = NULL;
    OK(cuGetErrorName(RZCUDA_ERROR_NOT_INITIALIZED, &s));
    cr_assert_str_eq(s, "CUDA_ERROR_NOT_INITIALIZED");
    void *fn = NULL;
    OK(cuGetProcAddress_v2("cuInit", &fn, 13000, 0, NULL));
    cr_assert_eq(fn, (void *)&cuInit);
}

Test(emu, devices_and_attributes)
{
    setenv("CUDA_EMU_DEVICES", "3", 1);
    setenv("CUDA_EMU_MEM", "1G", 1);
    OK(cuInit(0));
    int n;
    OK(cuDeviceGetCount(&n));
    cr_assert_eq(n, 3);
    rzcu_device dev = -1;
    OK(cuDeviceGet(&dev, 2));
    cr_assert_eq(dev, 2);
    FAILS(cuDeviceGet(&dev, 3), RZCUDA_ERROR_INVALID_DEVICE);
    FAILS(cuDeviceGet(&dev, -1), RZCUDA_ERROR_INVALID_DEVICE);
    char name[64];
    OK(cuDeviceGetName(name, sizeof name, 1));
    cr_assert_str_eq(name, "redzone emulated device 1");
    char small[9];
    OK(cuDeviceGetName(small, sizeof small, 1));
    cr_assert_str_eq(small, "redzone ");
    FAILS(cuDeviceGetName(name, sizeof name, 7), RZCUDA_ERROR_INVALID_DEVICE);
    int v;
    OK(cuDeviceGetAttribute(&v, RZCU_DEVICE_ATTRIBUTE_WARP_SIZE, 0));
    cr_assert_eq(v, 32);
    OK(cuDeviceGetAttribute(&v, RZCU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, 1));
    cr_assert_eq(v, 1);
    OK(cuDeviceGetAttribute(&v, RZCU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 2));
    cr_assert_eq(v, 9);
    OK(cuDeviceGetAttribute(&v, RZCU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 2));
    cr_assert_eq(v, 0);
    OK(cuDeviceGetAttribute(&v, RZCU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 0));
    cr_assert_eq(v, 1024);
    OK(cuDeviceGetAttribute(&v, RZCU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0));
    cr_assert_gt(v, 0);
    FAILS(cuDeviceGetAttribute(&v, 100000, 0), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuDeviceGetAttribute(&v, RZCU_DEVICE_ATTRIBUTE_WARP_SIZE, 3), RZCUDA_ERROR_INVALID_DEVICE);
    size_t total = 0;
    OK(cuDeviceTotalMem_v2(&total, 2));
    cr_assert_eq(total, (size_t)1 << 30);
}

Test(emu, default_total_memory)
{
    OK(cuInit(0));
    size_t total = 0;
    OK(cuDeviceTotalMem_v2(&total, 0));
    cr_assert_eq(total, (size_t)16 << 30);
}

Test(emu, malformed_devices_env_warns, .init = cr_redirect_stderr)
{
    setenv("CUDA_EMU_DEVICES", "9", 1);
    OK(cuInit(0));
    int n;
    OK(cuDeviceGetCount(&n));
    cr_assert_eq(n, 1);
    fflush(stderr);
    cr_assert_stderr_eq_str("cuda-emu: warning: malformed CUDA_EMU_DEVICES=\"9\" (want 0..8); using 1\n");
}

/* A machine without a GPU: every cuInit fails with CUDA_ERROR_NO_DEVICE (as the NVIDIA driver 535 answers
 * there, tests/real_driver_no_gpu.py), the version query still answers, and nothing else is initialised. */
Test(emu, zero_devices_no_device)
{
    setenv("CUDA_EMU_DEVICES", "0", 1);
    cr_assert_eq(cuInit(0), RZCUDA_ERROR_NO_DEVICE);
    cr_assert_eq(cuInit(0), RZCUDA_ERROR_NO_DEVICE);
    int v = 0, n = -1;
    OK(cuDriverGetVersion(&v));
    cr_assert_gt(v, 0);
    cr_assert_eq(cuDeviceGetCount(&n), RZCUDA_ERROR_NOT_INITIALIZED);
}

Test(emu, malformed_mem_env_warns, .init = cr_redirect_stderr)
{
    setenv("CUDA_EMU_MEM", "12x", 1);
    OK(cuInit(0));
    size_t total;
    OK(cuDeviceTotalMem_v2(&total, 0));
    cr_assert_eq(total, (size_t)16 << 30);
    fflush(stderr);
    cr_assert_stderr_eq_str(
        "cuda-emu: warning: malformed CUDA_EMU_MEM=\"12x\" (want bytes, optional K/M/G/T suffix); using 16 GiB\n");
}

/* ---- contexts ---- */

Test(emu, context_stack)
{
    OK(cuInit(0));
    rzcu_context cur = (rzcu_context)0x1;
    OK(cuCtxGetCurrent(&cur));
    cr_assert_null(cur);
    rzcu_deviceptr p;
    FAILS(cuMemAlloc_v2(&p, 64), RZCUDA_ERROR_INVALID_CONTEXT);
    rzcu_stream s;
    FAILS(cuStreamCreate(&s, 0), RZCUDA_ERROR_INVALID_CONTEXT);
    FAILS(cuCtxSynchronize(), RZCUDA_ERROR_INVALID_CONTEXT);
    FAILS(cuMemsetD8_v2(0x1000, 0, 1), RZCUDA_ERROR_INVALID_CONTEXT);
    rzcu_context popped;
    FAILS(cuCtxPopCurrent_v2(&popped), RZCUDA_ERROR_INVALID_CONTEXT);
    OK(cuCtxSetCurrent(NULL)); /* no-op on an empty stack */

    rzcu_context a, b, prim;
    OK(cuCtxCreate_v4(&a, NULL, 0, 0));
    OK(cuCtxGetCurrent(&cur));
    cr_assert_eq(cur, a);
    OK(cuCtxCreate_v4(&b, NULL, 0, 0));
    cr_assert_neq(a, b);
    OK(cuCtxGetCurrent(&cur));
    cr_assert_eq(cur, b);
    OK(cuCtxPopCurrent_v2(&popped));
    cr_assert_eq(popped, b);
    OK(cuCtxGetCurrent(&cur));
    cr_assert_eq(cur, a);
    OK(cuCtxPushCurrent_v2(b));
    OK(cuDevicePrimaryCtxRetain(&prim, 0));
    OK(cuCtxSetCurrent(prim)); /* replaces b on top */
    OK(cuCtxGetCurrent(&cur));
    cr_assert_eq(cur, prim);
    OK(cuCtxPopCurrent_v2(&popped));
    cr_assert_eq(popped, prim);
    OK(cuCtxGetCurrent(&cur));
    cr_assert_eq(cur, a);
    rzcu_device dev = -1;
    OK(cuCtxGetDevice(&dev));
    cr_assert_eq(dev, 0);
    OK(cuCtxSetCurrent(NULL)); /* pops a */
    OK(cuCtxGetCurrent(&cur));
    cr_assert_null(cur);
    FAILS(cuCtxPushCurrent_v2(NULL), RZCUDA_ERROR_INVALID_CONTEXT);
    FAILS(cuCtxPushCurrent_v2((rzcu_context)&dev), RZCUDA_ERROR_INVALID_CONTEXT);
    FAILS(cuCtxCreate_v4(&a, NULL, 0, 5), RZCUDA_ERROR_INVALID_DEVICE);
    FAILS(cuCtxCreate_v4(NULL, NULL, 0, 0), RZCUDA_ERROR_INVALID_VALUE);
}

struct thread_ctx_arg {
    rzcu_context seen;
    rzcu_result r;
};

static void *other_thread_ctx(void *p)
{
    struct thread_ctx_arg *a = p;
    a->r = cuCtxGetCurrent(&a->seen);
    return NULL;
}

Test(emu, context_stack_is_per_thread)
{
    rzcu_context prim = primary_current();
    cr_assert_not_null(prim);
    struct thread_ctx_arg a = {(rzcu_context)0x1, 99};
    pthread_t th;
    pthread_create(&th, NULL, other_thread_ctx, &a);
    pthread_join(th, NULL);
    cr_assert_eq(a.r, RZCUDA_SUCCESS);
    cr_assert_null(a.seen);
}

Test(emu, primary_context_retain_release)
{
    OK(cuInit(0));
    FAILS(cuDevicePrimaryCtxRelease_v2(0), RZCUDA_ERROR_INVALID_CONTEXT);
    rzcu_context p1, p2;
    OK(cuDevicePrimaryCtxRetain(&p1, 0));
    OK(cuDevicePrimaryCtxRetain(&p2, 0));
    cr_assert_eq(p1, p2);
    OK(cuCtxSetCurrent(p1));
    size_t before = free_bytes();
    rzcu_deviceptr d;
    OK(cuMemAlloc_v2(&d, 4096));
    cr_assert_eq(free_bytes(), before - 4096);
    OK(cuDevicePrimaryCtxRelease_v2(0));
    OK(cuMemsetD8_v2(d, 1, 16)); /* still active: one reference left */
    OK(cuDevicePrimaryCtxRelease_v2(0));
    /* reset: still current (release never pops), but destroyed until retained again */
    FAILS(cuMemAlloc_v2(&d, 16), RZCUDA_ERROR_CONTEXT_IS_DESTROYED);
    FAILS(cuDevicePrimaryCtxRelease_v2(0), RZCUDA_ERROR_INVALID_CONTEXT);
    FAILS(cuDevicePrimaryCtxRelease_v2(4), RZCUDA_ERROR_INVALID_DEVICE);
    OK(cuDevicePrimaryCtxRetain(&p2, 0));
    cr_assert_eq(p1, p2, "the primary context handle is stable");
    cr_assert_eq(free_bytes(), before, "the reset freed the allocation");
    FAILS(cuMemGetAddressRange_v2(NULL, NULL, d), RZCUDA_ERROR_NOT_FOUND);
    FAILS(cuCtxDestroy_v2(p1), RZCUDA_ERROR_INVALID_CONTEXT); /* primary contexts are not destroyed this way */
}

Test(emu, create_and_destroy_context)
{
    OK(cuInit(0));
    rzcu_context a, cur;
    OK(cuCtxCreate_v4(&a, NULL, 0, 0));
    OK(cuCtxPushCurrent_v2(a)); /* stack: a, a */
    rzcu_deviceptr d;
    OK(cuMemAlloc_v2(&d, 1000));
    rzcu_stream s;
    OK(cuStreamCreate(&s, 0));
    OK(cuCtxDestroy_v2(a)); /* pops one */
    OK(cuCtxGetCurrent(&cur));
    cr_assert_eq(cur, a);
    FAILS(cuMemAlloc_v2(&d, 16), RZCUDA_ERROR_CONTEXT_IS_DESTROYED);
    FAILS(cuCtxSynchronize(), RZCUDA_ERROR_CONTEXT_IS_DESTROYED);
    FAILS(cuCtxDestroy_v2(a), RZCUDA_ERROR_INVALID_CONTEXT);
    FAILS(cuCtxPushCurrent_v2(a), RZCUDA_ERROR_INVALID_CONTEXT);
    FAILS(cuCtxSetCurrent(a), RZCUDA_ERROR_INVALID_CONTEXT);
    FAILS(cuStreamSynchronize(s), RZCUDA_ERROR_INVALID_HANDLE);
    FAILS(cuCtxDestroy_v2(NULL), RZCUDA_ERROR_INVALID_VALUE);
    OK(cuCtxPopCurrent_v2(NULL));
    primary_current();
    FAILS(cuMemGetAddressRange_v2(NULL, NULL, d), RZCUDA_ERROR_NOT_FOUND); /* freed with its context */
    FAILS(cuMemFree_v2(d), RZCUDA_ERROR_INVALID_VALUE);
}

/* ---- cuGetProcAddress ---- */

Test(emu, get_proc_address)
{
    void *fn = NULL;
    rzcu_proc_query_result st = 99;
    OK(cuGetProcAddress_v2("cuMemAlloc", &fn, 13000, RZCU_GET_PROC_ADDRESS_DEFAULT, &st));
    cr_assert_eq(fn, (void *)&cuMemAlloc_v2);
    cr_assert_eq(st, RZCU_GET_PROC_ADDRESS_SUCCESS);
    OK(cuGetProcAddress_v2("cuMemcpyHtoD", &fn, 12000, RZCU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
    cr_assert_eq(fn, (void *)&cuMemcpyHtoD_v2_ptds);
    OK(cuGetProcAddress_v2("cuMemcpyHtoD", &fn, 12000, RZCU_GET_PROC_ADDRESS_LEGACY_STREAM, &st));
    cr_assert_eq(fn, (void *)&cuMemcpyHtoD_v2);
    OK(cuGetProcAddress_v2("cuMemcpyHtoD", &fn, 12000, RZCU_GET_PROC_ADDRESS_DEFAULT, &st));
    cr_assert_eq(fn, (void *)&cuMemcpyHtoD_v2);
    OK(cuGetProcAddress_v2("cuMemsetD8Async", &fn, 13000, RZCU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
    cr_assert_eq(fn, (void *)&cuMemsetD8Async_ptsz);
    OK(cuGetProcAddress_v2("cuCtxCreate", &fn, 12050, 0, &st));
    cr_assert_eq(fn, (void *)&cuCtxCreate_v4);
    OK(cuGetProcAddress_v2("cuInit", &fn, 12000, RZCU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
    cr_assert_eq(fn, (void *)&cuInit, "no per-thread variant: the legacy one");
    OK(cuGetProcAddress_v2("cuCtxSynchronize", &fn, 12090, 0, &st));
    cr_assert_eq(fn, (void *)&cuCtxSynchronize);
    OK(cuGetProcAddress_v2("cuCtxSynchronize", &fn, 13000, 0, &st));
    cr_assert_eq(fn, (void *)&cuCtxSynchronize_v2);
    /* batch: the 12.8 signature below 13.0 */
    OK(cuGetProcAddress_v2("cuMemcpyBatchAsync", &fn, 12080, 0, &st));
    cr_assert_eq(fn, (void *)&cuMemcpyBatchAsync);
    OK(cuGetProcAddress_v2("cuMemcpyBatchAsync", &fn, 12090, RZCU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
    cr_assert_eq(fn, (void *)&cuMemcpyBatchAsync_ptsz);
    OK(cuGetProcAddress_v2("cuMemcpyBatchAsync", &fn, 13000, 0, &st));
    cr_assert_eq(fn, (void *)&cuMemcpyBatchAsync_v2);
    OK(cuGetProcAddress_v2("cuMemcpyBatchAsync", &fn, 13000, RZCU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
    cr_assert_eq(fn, (void *)&cuMemcpyBatchAsync_v2_ptsz);
    /* version too low */
    fn = (void *)1;
    FAILS(cuGetProcAddress_v2("cuMemcpyBatchAsync", &fn, 12060, 0, &st), RZCUDA_ERROR_NOT_FOUND);
    cr_assert_null(fn);
    cr_assert_eq(st, RZCU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    FAILS(cuGetProcAddress_v2("cuCtxCreate", &fn, 12000, 0, &st), RZCUDA_ERROR_NOT_FOUND);
    cr_assert_eq(st, RZCU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    /* unknown symbol; a versioned name is not a base name */
    fn = (void *)1;
    FAILS(cuGetProcAddress_v2("cuNoSuchThing", &fn, 13000, 0, &st), RZCUDA_ERROR_NOT_FOUND);
    cr_assert_null(fn);
    cr_assert_eq(st, RZCU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    FAILS(cuGetProcAddress_v2("cuMemAlloc_v2", &fn, 13000, 0, &st), RZCUDA_ERROR_NOT_FOUND);
    cr_assert_eq(st, RZCU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    /* cuGetProcAddress itself */
    OK(cuGetProcAddress_v2("cuGetProcAddress", &fn, 12000, 0, &st));
    cr_assert_eq(fn, (void *)&cuGetProcAddress_v2);
    OK(cuGetProcAddress_v2("cuGetProcAddress", &fn, 11030, 0, &st));
    cr_assert_eq(fn, (void *)&cuGetProcAddress);
    /* invalid arguments; a version above the driver's is invalid, as documented */
    FAILS(cuGetProcAddress_v2(NULL, &fn, 13000, 0, &st), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuGetProcAddress_v2("cuInit", NULL, 13000, 0, &st), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuGetProcAddress_v2("cuInit", &fn, 13010, 0, &st), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuGetProcAddress_v2("cuInit", &fn, 13000, 8, &st), RZCUDA_ERROR_INVALID_VALUE);
    OK(cuGetProcAddress_v2("cuInit", &fn, 13000, 0, NULL));
    /* the CUDA 11.3 entry point */
    OK(cuGetProcAddress("cuMemcpyDtoHAsync", &fn, 11030, RZCU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM));
    cr_assert_eq(fn, (void *)&cuMemcpyDtoHAsync_v2_ptsz);
    OK(cuGetProcAddress("cuGetProcAddress", &fn, 12000, 0));
    cr_assert_eq(fn, (void *)&cuGetProcAddress_v2);
    FAILS(cuGetProcAddress("cuBogus", &fn, 12000, 0), RZCUDA_ERROR_NOT_FOUND);
    FAILS(cuGetProcAddress("cuMemAlloc", &fn, 3000, 0), RZCUDA_ERROR_NOT_FOUND);
    cr_assert_null(fn);
    /* stream-ordered allocation, events, modules and launches */
    struct {
        const char *name;
        int version;
        rzcu_uint64 flags;
        void *want;
    } cases[] = {
        {"cuMemAllocAsync", 11020, 0, (void *)&cuMemAllocAsync},
        {"cuMemAllocAsync", 11020, RZCU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, (void *)&cuMemAllocAsync_ptsz},
        {"cuMemAllocFromPoolAsync", 13000, RZCU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
         (void *)&cuMemAllocFromPoolAsync_ptsz},
        {"cuMemAllocFromPoolAsync", 13000, RZCU_GET_PROC_ADDRESS_LEGACY_STREAM, (void *)&cuMemAllocFromPoolAsync},
        {"cuMemFreeAsync", 12000, 0, (void *)&cuMemFreeAsync},
        {"cuMemFreeAsync", 12000, RZCU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, (void *)&cuMemFreeAsync_ptsz},
        {"cuDeviceGetDefaultMemPool", 11020, RZCU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
         (void *)&cuDeviceGetDefaultMemPool},
        {"cuEventCreate", 2000, 0, (void *)&cuEventCreate},
        {"cuEventRecord", 2000, RZCU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, (void *)&cuEventRecord},
        {"cuEventRecord", 7000, RZCU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, (void *)&cuEventRecord_ptsz},
        {"cuEventSynchronize", 13000, 0, (void *)&cuEventSynchronize},
        {"cuEventDestroy", 4000, 0, (void *)&cuEventDestroy_v2},
        {"cuModuleLoadData", 2000, 0, (void *)&cuModuleLoadData},
        {"cuModuleUnload", 13000, 0, (void *)&cuModuleUnload},
        {"cuModuleGetFunction", 13000, 0, (void *)&cuModuleGetFunction},
        {"cuFuncGetName", 12030, 0, (void *)&cuFuncGetName},
        {"cuLaunchKernel", 4000, RZCU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, (void *)&cuLaunchKernel},
        {"cuLaunchKernel", 7000, RZCU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, (void *)&cuLaunchKernel_ptsz},
        {"cuLaunchKernel", 13000, 0, (void *)&cuLaunchKernel},
        {"cuLaunchKernelEx", 11060, 0, (void *)&cuLaunchKernelEx},
        {"cuLaunchKernelEx", 12000, RZCU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, (void *)&cuLaunchKernelEx_ptsz},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        st = 99;
        OK(cuGetProcAddress_v2(cases[i].name, &fn, cases[i].version, cases[i].flags, &st));
        cr_assert_eq(fn, cases[i].want, "%s %d", cases[i].name, cases[i].version);
        cr_assert_eq(st, RZCU_GET_PROC_ADDRESS_SUCCESS);
    }
    OK(cuGetProcAddress("cuLaunchKernel", &fn, 11030, RZCU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM));
    cr_assert_eq(fn, (void *)&cuLaunchKernel_ptsz);
    struct {
        const char *name;
        int version;
    } too_old[] = {{"cuMemAllocAsync", 11010}, {"cuMemFreeAsync", 11010}, {"cuDeviceGetDefaultMemPool", 11010},
                   {"cuLaunchKernelEx", 11050}, {"cuFuncGetName", 12020}, {"cuLaunchKernel", 3020},
                   {"cuEventDestroy", 3020}};
    for (size_t i = 0; i < sizeof too_old / sizeof too_old[0]; i++) {
        FAILS(cuGetProcAddress_v2(too_old[i].name, &fn, too_old[i].version, 0, &st), RZCUDA_ERROR_NOT_FOUND);
        cr_assert_eq(st, RZCU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT, "%s", too_old[i].name);
        cr_assert_null(fn);
    }
    FAILS(cuGetProcAddress_v2("cuEventDestroy_v2", &fn, 13000, 0, &st), RZCUDA_ERROR_NOT_FOUND);
    cr_assert_eq(st, RZCU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    /* the returned pointer works */
    rzcu_fn_cuDriverGetVersion *get_version;
    OK(cuGetProcAddress_v2("cuDriverGetVersion", &fn, 13000, 0, &st));
    get_version = (rzcu_fn_cuDriverGetVersion *)(uintptr_t)fn;
    int v = 0;
    OK(get_version(&v));
    cr_assert_eq(v, 13000);
}

/* ---- errors ---- */

Test(emu, error_names_and_strings)
{
    const char *s = NULL;
#define CHECK_NAME(name, value)                                                                              \
    OK(cuGetErrorName(value, &s));                                                                           \
    cr_assert_str_eq(s, #name);                                                                              \
    OK(cuGetErrorString(value, &s));                                                                         \
    cr_assert(s && *s, #name " has a description");
    RZCU_RESULTS(CHECK_NAME)
#undef CHECK_NAME
    OK(cuGetErrorString(RZCUDA_ERROR_INVALID_VALUE, &s));
    cr_assert_str_eq(s, "invalid argument");
    OK(cuGetErrorString(RZCUDA_ERROR_OUT_OF_MEMORY, &s));
    cr_assert_str_eq(s, "out of memory");
    OK(cuGetErrorName(719, &s));
    cr_assert_str_eq(s, "CUDA_ERROR_LAUNCH_FAILED");
    s = "x";
    FAILS(cuGetErrorName(12345, &s), RZCUDA_ERROR_INVALID_VALUE);
    cr_assert_null(s);
    s = "x";
    FAILS(cuGetErrorString(12345, &s), RZCUDA_ERROR_INVALID_VALUE);
    cr_assert_null(s);
    FAILS(cuGetErrorName(0, NULL), RZCUDA_ERROR_INVALID_VALUE);
}

/* ---- call counts and fault injection ---- */

Test(emu, call_counts)
{
    primary_current();
    cr_assert_eq(cuEmuCallCount("cuInit"), 1);
    cuEmuResetCallCounts();
    cr_assert_eq(cuEmuCallCount("cuInit"), 0);
    rzcu_deviceptr p;
    OK(cuMemAlloc_v2(&p, 64));
    FAILS(cuMemAlloc_v2(&p, 0), RZCUDA_ERROR_INVALID_VALUE); /* failed calls count too */
    OK(cuMemAlloc_v2(&p, 64));
    OK(cuMemsetD8_v2_ptds(p, 0, 1));
    cr_assert_eq(cuEmuCallCount("cuMemAlloc_v2"), 3);
    cr_assert_eq(cuEmuCallCount("cuMemsetD8_v2_ptds"), 1);
    cr_assert_eq(cuEmuCallCount("cuMemsetD8_v2"), 0);
    cr_assert_eq(cuEmuCallCount("cuMemFree_v2"), 0);
    cr_assert_eq(cuEmuCallCount("cuNope"), 0);
    cr_assert_eq(cuEmuCallCount(NULL), 0);
}

Test(emu, stats_printed_at_exit)
{
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        dup2(fds[1], 2);
        close(fds[0]);
        setenv("CUDA_EMU_STATS", "1", 1);
        int v;
        cuDriverGetVersion(&v);
        cuDriverGetVersion(&v);
        cuInit(0);
        exit(0);
    }
    close(fds[1]);
    char buf[4096];
    size_t n = 0;
    ssize_t r;
    while ((r = read(fds[0], buf + n, sizeof buf - 1 - n)) > 0)
        n += (size_t)r;
    buf[n] = '\0';
    int status;
    waitpid(pid, &status, 0);
    /* (a sanitizer may append its own report) */
    const char *want = "cuda-emu: cuInit 1\ncuda-emu: cuDriverGetVersion 2\n";
    cr_assert_eq(strncmp(buf, want, strlen(want)), 0, "stderr was: %s", buf);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

Test(emu, fault_injection_by_api)
{
    primary_current();
    cr_assert_eq(cuEmuInjectFailure("cuNope", 1, RZCUDA_ERROR_UNKNOWN), -1);
    cr_assert_eq(cuEmuInjectFailure("cuMemAlloc_v2", 0, RZCUDA_ERROR_UNKNOWN), -1);
    cr_assert_eq(cuEmuInjectFailure("cuMemAlloc_v2", 1, RZCUDA_SUCCESS), -1);
    size_t free0 = free_bytes();
    cr_assert_eq(cuEmuInjectFailure("cuMemAlloc_v2", 2, RZCUDA_ERROR_OUT_OF_MEMORY), 0);
    rzcu_deviceptr a, b = 0, c;
    OK(cuMemAlloc_v2(&a, 64));
    FAILS(cuMemAlloc_v2(&b, 64), RZCUDA_ERROR_OUT_OF_MEMORY);
    cr_assert_eq(b, 0);
    cr_assert_eq(free_bytes(), free0 - 256, "the failed call allocated nothing");
    OK(cuMemAlloc_v2(&c, 64));
    /* an injected failure does nothing: the memset is skipped */
    OK(cuMemsetD8_v2(a, 1, 64));
    cr_assert_eq(cuEmuInjectFailure("cuMemsetD8_v2", 1, RZCUDA_ERROR_INVALID_VALUE), 0);
    FAILS(cuMemsetD8_v2(a, 2, 64), RZCUDA_ERROR_INVALID_VALUE);
    unsigned char byte;
    OK(cuMemcpyDtoH_v2(&byte, a, 1));
    cr_assert_eq(byte, 1);
    cr_assert_eq(cuEmuInjectFailure("cuMemFree_v2", 1, RZCUDA_ERROR_UNKNOWN), 0);
    cuEmuClearFailures();
    OK(cuMemFree_v2(a));
}

Test(emu, fault_injection_by_env)
{
    setenv("CUDA_EMU_FAIL", "cuMemAlloc_v2:2,cuStreamCreate:1:CUDA_ERROR_NOT_PERMITTED,cuMemsetD8_v2:1,cuCtxSynchronize:1:700",
           1);
    primary_current();
    rzcu_deviceptr a;
    OK(cuMemAlloc_v2(&a, 64));
    FAILS(cuMemAlloc_v2(&a, 64), RZCUDA_ERROR_OUT_OF_MEMORY); /* default for allocations */
    OK(cuMemAlloc_v2(&a, 64));
    rzcu_stream s;
    FAILS(cuStreamCreate(&s, 0), RZCUDA_ERROR_NOT_PERMITTED);
    OK(cuStreamCreate(&s, 0));
    FAILS(cuMemsetD8_v2(a, 0, 1), RZCUDA_ERROR_UNKNOWN); /* default otherwise */
    OK(cuMemsetD8_v2(a, 0, 1));
    FAILS(cuCtxSynchronize(), RZCUDA_ERROR_ILLEGAL_ADDRESS);
    /* 700 is a sticky error: every later call returns it too (test_emu_sticky.c) */
    FAILS(cuCtxSynchronize(), RZCUDA_ERROR_ILLEGAL_ADDRESS);
    FAILS(cuMemsetD8_v2(a, 0, 1), RZCUDA_ERROR_ILLEGAL_ADDRESS);
}

Test(emu, fault_injection_counts_from_reset)
{
    setenv("CUDA_EMU_FAIL", "cuDriverGetVersion:3", 1);
    int v;
    OK(cuDriverGetVersion(&v));
    OK(cuDriverGetVersion(&v));
    cr_assert_eq(cuEmuInjectFailure("cuDeviceGetCount", 1, RZCUDA_ERROR_NOT_SUPPORTED), 0);
    cuEmuResetCallCounts();
    int n;
    FAILS(cuDeviceGetCount(&n), RZCUDA_ERROR_NOT_SUPPORTED); /* still the next call */
    OK(cuDriverGetVersion(&v));
    OK(cuDriverGetVersion(&v));
    FAILS(cuDriverGetVersion(&v), RZCUDA_ERROR_UNKNOWN);
    OK(cuDriverGetVersion(&v));
}

Test(emu, malformed_fail_env_warns, .init = cr_redirect_stderr)
{
    setenv("CUDA_EMU_FAIL", "cuMemAlloc_v2:0", 1);
    primary_current();
    rzcu_deviceptr a;
    OK(cuMemAlloc_v2(&a, 64));
    fflush(stderr);
    cr_assert_stderr_eq_str("cuda-emu: warning: malformed CUDA_EMU_FAIL=\"cuMemAlloc_v2:0\" (want <entry "
                            "point>:<nth>[:<error>][,...]); no failures injected\n");
}
