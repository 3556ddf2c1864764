/* Tests of the emulated CUDA driver (native/emu): modules, kernels and their launches. Part of test_emu (tests/emu.cmake); shared
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

/* CUlaunchAttribute as laid out in cuda.h (cu.h only declares the tag). */
struct CUlaunchAttribute_st {
    unsigned int id;
    char pad[4];
    union {
        char pad[64];
        int i;
        void *p;
    } value;
};

/* ---- modules and kernels ---- */

/* Fills bytes [0, n) of p with v, one thread a byte, over the whole grid. */
CUDA_EMU_KERNEL(emu_test_fill, sizeof(rzcu_deviceptr), sizeof(size_t), sizeof(unsigned char))
{
    unsigned char *p = (unsigned char *)(uintptr_t)CUDA_EMU_PARAM(rzcu_deviceptr, 0);
    size_t n = CUDA_EMU_PARAM(size_t, 1);
    unsigned char v = CUDA_EMU_PARAM(unsigned char, 2);
    size_t threads = (size_t)launch->grid.x * launch->grid.y * launch->grid.z * launch->block.x * launch->block.y *
                     launch->block.z;
    for (size_t t = 0; t < threads && t < n; t++)
        p[t] = v;
}

/* Stores its int parameter at p. */
CUDA_EMU_KERNEL(emu_test_store, sizeof(rzcu_deviceptr), sizeof(int))
{
    int *p = (int *)(uintptr_t)CUDA_EMU_PARAM(rzcu_deviceptr, 0);
    *p = CUDA_EMU_PARAM(int, 1);
}

/* Stores its launch configuration at p. */
CUDA_EMU_KERNEL(emu_test_dims, sizeof(rzcu_deviceptr))
{
    memcpy((void *)(uintptr_t)CUDA_EMU_PARAM(rzcu_deviceptr, 0), launch, sizeof *launch);
}

static int no_params_runs;
CUDA_EMU_KERNEL_NO_PARAMS(emu_test_no_params) { __atomic_add_fetch(&no_params_runs, 1, __ATOMIC_SEQ_CST); }

/* Where a kernel or host function ran: on the launching thread, or on a worker (its name, then a gate). */
struct where_probe {
    pthread_t caller;
    int on_caller, done;
    char name[16];
    struct gate g;
};

static void where_probe_run(struct where_probe *p)
{
    if (pthread_equal(pthread_self(), p->caller)) {
        __atomic_store_n(&p->on_caller, 1, __ATOMIC_SEQ_CST); /* never block the launching thread */
        return;
    }
    pthread_getname_np(pthread_self(), p->name, sizeof p->name);
    gate_wait_fn(&p->g);
    __atomic_store_n(&p->done, 1, __ATOMIC_SEQ_CST);
}

static void where_probe_fn(void *arg) { where_probe_run(arg); }

CUDA_EMU_KERNEL(emu_test_where, sizeof(rzcu_deviceptr))
{
    where_probe_run((struct where_probe *)(uintptr_t)CUDA_EMU_PARAM(rzcu_deviceptr, 0));
}

Test(emu, kernels_and_host_functions_run_on_named_workers)
{
    primary_current();
    rzcu_function where = get_kernel("emu_test_where");
    for (int kernel = 0; kernel < 2; kernel++) {
        rzcu_stream s;
        OK(cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING));
        struct where_probe p = {.caller = pthread_self(), .g = GATE_INIT};
        if (kernel) {
            rzcu_deviceptr arg = (uintptr_t)&p;
            void *args[] = {&arg};
            OK(cuLaunchKernel(where, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
        } else {
            OK(cuLaunchHostFunc(s, where_probe_fn, &p));
        }
        cr_assert_eq(__atomic_load_n(&p.on_caller, __ATOMIC_SEQ_CST), 0, "%s ran inline on an idle stream",
                     kernel ? "a kernel" : "a host function");
        gate_await_entered(&p.g);
        cr_assert_eq(get_flag(&p.done), 0, "the launch waited for the work to complete");
        cr_assert_eq(strncmp(p.name, WORKER_PREFIX, strlen(WORKER_PREFIX)), 0, "worker named '%s'", p.name);
        cr_assert_geq(count_worker_threads(), 1);
        gate_open(&p.g);
        OK(cuStreamSynchronize(s));
        cr_assert_eq(get_flag(&p.done), 1);
        OK(cuStreamDestroy_v2(s));
    }
}

Test(emu, modules_and_function_lookup)
{
    rzcu_module m;
    OK(cuInit(0));
    FAILS(cuModuleLoadData(&m, "x"), RZCUDA_ERROR_INVALID_CONTEXT);
    primary_current();
    FAILS(cuModuleLoadData(&m, NULL), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuModuleLoadData(NULL, "x"), RZCUDA_ERROR_INVALID_VALUE);
    static const unsigned char cubin[] = {0x7f, 'E', 'L', 'F', 2, 1, 1};
    OK(cuModuleLoadData(&m, cubin));
    rzcu_function f = NULL, f2 = NULL;
    FAILS(cuModuleGetFunction(&f, m, "no_such_kernel"), RZCUDA_ERROR_NOT_FOUND);
    cr_assert_null(f);
    FAILS(cuModuleGetFunction(&f, m, ""), RZCUDA_ERROR_NOT_FOUND);
    FAILS(cuModuleGetFunction(&f, m, NULL), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuModuleGetFunction(NULL, m, "emu_test_fill"), RZCUDA_ERROR_INVALID_VALUE);
    OK(cuModuleGetFunction(&f, m, "emu_test_fill"));
    OK(cuModuleGetFunction(&f2, m, "emu_test_fill"));
    cr_assert_eq(f, f2, "one handle per name");
    const char *name = NULL;
    OK(cuFuncGetName(&name, f));
    cr_assert_str_eq(name, "emu_test_fill");
    FAILS(cuFuncGetName(NULL, f), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuFuncGetName(&name, NULL), RZCUDA_ERROR_INVALID_VALUE);
    /* another module: another handle */
    rzcu_module m2;
    OK(cuModuleLoadData(&m2, "ptx"));
    OK(cuModuleGetFunction(&f2, m2, "emu_test_fill"));
    cr_assert_neq(f, f2);
    /* unloading invalidates the module's functions */
    OK(cuModuleUnload(m));
    FAILS(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL), RZCUDA_ERROR_INVALID_HANDLE);
    FAILS(cuFuncGetName(&name, f), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuModuleGetFunction(&f, m, "emu_test_fill"), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuModuleUnload(m), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuModuleUnload(NULL), RZCUDA_ERROR_INVALID_VALUE);
    OK(cuFuncGetName(&name, f2));
    /* releasing the primary context unloads its modules */
    OK(cuDevicePrimaryCtxRelease_v2(0));
    primary_current();
    FAILS(cuFuncGetName(&name, f2), RZCUDA_ERROR_INVALID_VALUE);
}

Test(emu, kernel_runs_in_stream_order_with_copied_parameters)
{
    primary_current();
    rzcu_function fill = get_kernel("emu_test_fill"), store = get_kernel("emu_test_store");
    rzcu_stream s;
    OK(cuStreamCreate(&s, 0));
    rzcu_deviceptr d, ints;
    OK(cuMemAllocAsync(&d, 256, s));
    OK(cuMemAllocAsync(&ints, 2 * sizeof(int), s));
    OK(cuMemsetD8Async(d, 0, 256, s));
    struct gate g = GATE_INIT;
    OK(cuLaunchHostFunc(s, gate_wait_fn, &g));
    size_t n = 100;
    unsigned char v = 0xc3;
    void *fill_args[] = {&d, &n, &v};
    OK(cuLaunchKernel(fill, 2, 1, 1, 64, 1, 1, 0, s, fill_args, NULL));
    /* the argument storage is reused at once: each launch saw the values of its call */
    int value = 7;
    rzcu_deviceptr where = ints;
    void *store_args[] = {&where, &value};
    OK(cuLaunchKernel(store, 1, 1, 1, 1, 1, 1, 0, s, store_args, NULL));
    value = 8;
    where = ints + sizeof(int);
    OK(cuLaunchKernel(store, 1, 1, 1, 1, 1, 1, 0, s, store_args, NULL));
    value = 9;
    n = 0;
    unsigned char *host; /* pinned: a copy into pageable memory would return only once done */
    int *stored;
    OK(cuMemAllocHost_v2((void **)&host, 256 + 2 * sizeof(int)));
    stored = (int *)(void *)(host + 256);
    stored[0] = stored[1] = 0;
    OK(cuMemcpyDtoHAsync_v2(host, d, 256, s));
    OK(cuMemcpyDtoHAsync_v2(stored, ints, 2 * sizeof(int), s));
    OK(cuMemFreeAsync(d, s));
    OK(cuMemFreeAsync(ints, s));
    gate_await_entered(&g);
    cr_assert_eq(stored[0], 0, "the kernel ran before the work ahead of it");
    gate_open(&g);
    OK(cuStreamSynchronize(s));
    for (size_t i = 0; i < 256; i++)
        cr_assert_eq(host[i], i < 100 ? 0xc3 : 0, "byte %zu", i);
    cr_assert_eq(stored[0], 7);
    cr_assert_eq(stored[1], 8);
    OK(cuMemFreeHost(host));
}

Test(emu, kernel_sees_its_launch_configuration)
{
    primary_current();
    rzcu_function dims = get_kernel("emu_test_dims");
    rzcu_deviceptr d;
    OK(cuMemAlloc_v2(&d, sizeof(cuda_emu_launch_t)));
    void *args[] = {&d};
    OK(cuLaunchKernel(dims, 3, 4, 5, 8, 4, 2, 1024, NULL, args, NULL));
    cuda_emu_launch_t got;
    OK(cuMemcpyDtoH_v2(&got, d, sizeof got)); /* legacy stream: after the kernel */
    cr_assert(got.grid.x == 3 && got.grid.y == 4 && got.grid.z == 5);
    cr_assert(got.block.x == 8 && got.block.y == 4 && got.block.z == 2);
    cr_assert_eq(got.shared_bytes, 1024);
    /* cuLaunchKernelEx, with benign attributes, on the per-thread stream */
    struct CUlaunchAttribute_st attrs[3];
    memset(attrs, 0, sizeof attrs);
    attrs[0].id = 2; /* COOPERATIVE */
    attrs[0].value.i = 1;
    attrs[1].id = 8; /* PRIORITY */
    attrs[2].id = 0; /* IGNORE */
    rzcu_launch_config cfg = {7, 1, 1, 32, 2, 1, 0, NULL, attrs, 3};
    OK(cuLaunchKernelEx_ptsz(&cfg, dims, args, NULL));
    OK(cuStreamSynchronize_ptsz(NULL));
    OK(cuMemcpyDtoH_v2(&got, d, sizeof got));
    cr_assert(got.grid.x == 7 && got.block.x == 32 && got.block.y == 2 && got.shared_bytes == 0);
    cfg.numAttrs = 0;
    cfg.attrs = NULL;
    cfg.gridDimX = 9;
    OK(cuLaunchKernelEx(&cfg, dims, args, NULL));
    OK(cuMemcpyDtoH_v2(&got, d, sizeof got));
    cr_assert_eq(got.grid.x, 9);
    /* no parameters: NULL params, or an empty extra list */
    rzcu_function none = get_kernel("emu_test_no_params");
    void *empty_extra[] = {NULL};
    OK(cuLaunchKernel(none, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
    OK(cuLaunchKernel_ptsz(none, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, empty_extra));
    OK(cuCtxSynchronize());
    cr_assert_eq(__atomic_load_n(&no_params_runs, __ATOMIC_SEQ_CST), 2);
}

Test(emu, launch_validation)
{
    primary_current();
    rzcu_function f = get_kernel("emu_test_dims");
    rzcu_deviceptr d;
    OK(cuMemAlloc_v2(&d, sizeof(cuda_emu_launch_t)));
    void *args[] = {&d};
    FAILS(cuLaunchKernel(f, 0, 1, 1, 1, 1, 1, 0, NULL, args, NULL), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuLaunchKernel(f, 1, 1, 0, 1, 1, 1, 0, NULL, args, NULL), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuLaunchKernel(f, 1, 1, 1, 1, 0, 1, 0, NULL, args, NULL), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuLaunchKernel(f, 1, 1, 1, 32, 32, 2, 0, NULL, args, NULL), RZCUDA_ERROR_INVALID_VALUE); /* 2048 */
    FAILS(cuLaunchKernel(f, 1, 1, 1, 1025, 1, 1, 0, NULL, args, NULL), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuLaunchKernel(f, 1, 1, 1, 1, 1, 65, 0, NULL, args, NULL), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuLaunchKernel(f, 1, 65536, 1, 1, 1, 1, 0, NULL, args, NULL), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 49153, NULL, args, NULL), RZCUDA_ERROR_INVALID_VALUE);
    OK(cuLaunchKernel(f, 2147483647u, 65535, 65535, 32, 32, 1, 49152, NULL, args, NULL)); /* the limits */
    FAILS(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL), RZCUDA_ERROR_INVALID_VALUE);
    void *empty_extra[] = {NULL};
    FAILS(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, args, empty_extra), RZCUDA_ERROR_INVALID_VALUE);
    size_t size = sizeof d;
    void *extra[] = {(void *)1, &d, (void *)2, &size, NULL}; /* CU_LAUNCH_PARAM_BUFFER_POINTER/SIZE */
    FAILS(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, extra), RZCUDA_ERROR_NOT_SUPPORTED);
    FAILS(cuLaunchKernel(NULL, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL), RZCUDA_ERROR_INVALID_HANDLE);
    int x;
    FAILS(cuLaunchKernel((rzcu_function)&x, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL), RZCUDA_ERROR_INVALID_HANDLE);
    FAILS(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, (rzcu_stream)&x, args, NULL), RZCUDA_ERROR_INVALID_HANDLE);
    /* cuLaunchKernelEx: the configuration and its attributes */
    FAILS(cuLaunchKernelEx(NULL, f, args, NULL), RZCUDA_ERROR_INVALID_VALUE);
    rzcu_launch_config cfg = {1, 1, 1, 1, 1, 1, 0, NULL, NULL, 1};
    FAILS(cuLaunchKernelEx(&cfg, f, args, NULL), RZCUDA_ERROR_INVALID_VALUE);
    struct CUlaunchAttribute_st attr;
    memset(&attr, 0, sizeof attr);
    cfg.attrs = &attr;
    attr.id = 4; /* CLUSTER_DIMENSION */
    FAILS(cuLaunchKernelEx(&cfg, f, args, NULL), RZCUDA_ERROR_NOT_SUPPORTED);
    attr.id = 12; /* LAUNCH_COMPLETION_EVENT */
    FAILS(cuLaunchKernelEx(&cfg, f, args, NULL), RZCUDA_ERROR_NOT_SUPPORTED);
    attr.id = 99;
    FAILS(cuLaunchKernelEx(&cfg, f, args, NULL), RZCUDA_ERROR_INVALID_VALUE);
    attr.id = 1; /* ACCESS_POLICY_WINDOW */
    cfg.blockDimX = 2000;
    FAILS(cuLaunchKernelEx(&cfg, f, args, NULL), RZCUDA_ERROR_INVALID_VALUE);
    cfg.blockDimX = 1;
    OK(cuLaunchKernelEx(&cfg, f, args, NULL));
    /* a function of another context */
    rzcu_context other;
    OK(cuCtxCreate_v4(&other, NULL, 0, 0));
    FAILS(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL), RZCUDA_ERROR_INVALID_HANDLE);
    OK(cuCtxDestroy_v2(other));
    OK(cuCtxSynchronize());
}

Test(emu, kernel_launch_fault_injection_and_counts)
{
    primary_current();
    rzcu_function f = get_kernel("emu_test_store");
    rzcu_deviceptr d;
    OK(cuMemAlloc_v2(&d, sizeof(int)));
    OK(cuMemsetD8_v2(d, 0, sizeof(int)));
    int value = 5;
    void *args[] = {&d, &value};
    cuEmuResetCallCounts();
    cr_assert_eq(cuEmuInjectFailure("cuLaunchKernel", 1, RZCUDA_ERROR_INVALID_VALUE), 0);
    FAILS(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL), RZCUDA_ERROR_INVALID_VALUE);
    int got = -1;
    OK(cuMemcpyDtoH_v2(&got, d, sizeof got));
    cr_assert_eq(got, 0, "an injected failure launches nothing");
    OK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
    OK(cuMemcpyDtoH_v2(&got, d, sizeof got));
    cr_assert_eq(got, 5);
    cr_assert_eq(cuEmuCallCount("cuLaunchKernel"), 2);
    cr_assert_eq(cuEmuCallCount("cuLaunchKernel_ptsz"), 0);
    cr_assert_eq(cuEmuInjectFailure("cuEventRecord_ptsz", 1, RZCUDA_ERROR_UNKNOWN), 0);
    rzcu_event e;
    OK(cuEventCreate(&e, 0));
    FAILS(cuEventRecord_ptsz(e, NULL), RZCUDA_ERROR_UNKNOWN);
}

Test(emu, async_alloc_fault_injection_by_env)
{
    setenv("CUDA_EMU_FAIL", "cuMemAllocAsync:2,cuModuleGetFunction:1:CUDA_ERROR_NOT_FOUND", 1);
    primary_current();
    rzcu_deviceptr a, b = 0;
    size_t f0 = free_bytes();
    OK(cuMemAllocAsync(&a, 64, NULL));
    FAILS(cuMemAllocAsync(&b, 64, NULL), RZCUDA_ERROR_OUT_OF_MEMORY); /* the default for allocations */
    cr_assert_eq(b, 0);
    cr_assert_eq(free_bytes(), f0 - 256);
    rzcu_module m;
    OK(cuModuleLoadData(&m, "x"));
    rzcu_function f;
    FAILS(cuModuleGetFunction(&f, m, "emu_test_store"), RZCUDA_ERROR_NOT_FOUND);
    OK(cuModuleGetFunction(&f, m, "emu_test_store"));
}

/* Host waits (cuEmuHostWaits, issue 29): every call that by its contract returns only once device work has
 * completed counts once, also when the work is done already; queued calls count none. A kernel given a
 * duration (cuEmuSetKernelDuration) is still running when the launch returns: cuStreamQuery says so. */
Test(emu_kernel, host_waits_counted_by_contract_and_kernel_durations)
{
    primary_current();
    rzcu_function fill = get_kernel("emu_test_fill");
    rzcu_stream s;
    OK(cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING));
    rzcu_deviceptr d;
    OK(cuMemAlloc_v2(&d, 4096));
    void *pinned;
    OK(cuMemAllocHost_v2(&pinned, 4096));
    static unsigned char pageable[4096];
    size_t n = 4096;
    unsigned char v = 7;
    void *params[] = {&d, &n, &v};
    cuEmuResetCallCounts();
    OK(cuLaunchKernel(fill, 1, 1, 1, 1, 1, 1, 0, s, params, NULL));
    OK(cuMemcpyDtoHAsync_v2(pinned, d, 64, s));
    OK(cuMemsetD8Async(d, 1, 64, s));
    rzcu_deviceptr a;
    OK(cuMemAllocAsync(&a, 256, s));
    OK(cuMemFreeAsync(a, s));
    cr_assert_eq(cuEmuHostWaits(NULL), 0, "queued work is no host wait");
    OK(cuStreamSynchronize(s));
    OK(cuStreamSynchronize(s)); /* nothing left: still a wait by contract */
    OK(cuMemcpyDtoHAsync_v2(pageable, d, 64, s));
    OK(cuMemcpyDtoH_v2(pinned, d, 64));
    OK(cuCtxSynchronize());
    OK(cuMemFree_v2(d));
    cr_assert_eq(cuEmuHostWaits("cuStreamSynchronize"), 2);
    cr_assert_eq(cuEmuHostWaits("cuMemcpyDtoHAsync_v2"), 1, "the pageable one only");
    cr_assert_eq(cuEmuHostWaits("cuMemcpyDtoH_v2"), 1);
    cr_assert_eq(cuEmuHostWaits("cuCtxSynchronize"), 1);
    cr_assert_eq(cuEmuHostWaits("cuMemFree_v2"), 1);
    cr_assert_eq(cuEmuHostWaits("cuLaunchKernel") + cuEmuHostWaits("cuMemsetD8Async") +
                     cuEmuHostWaits("cuMemAllocAsync") + cuEmuHostWaits("cuMemFreeAsync"), 0);
    cr_assert_eq(cuEmuHostWaits(NULL), 6);
    unsigned char one = 1;
    cr_assert_eq(cuEmuDeviceStore(a, &one, 1), RZCUDA_ERROR_INVALID_VALUE, "freed");
    cr_assert_eq(cuEmuHostWaits(NULL), 6, "an extension function's wait counts for no entry point");
    cuEmuResetCallCounts();
    cr_assert_eq(cuEmuHostWaits(NULL), 0, "reset with the call counts");
    OK(cuMemAlloc_v2(&d, 4096));
    cuEmuSetKernelDuration(2000000000ull); /* 2 s: far longer than the next two calls take */
    OK(cuLaunchKernel(fill, 1, 1, 1, 1, 1, 1, 0, s, params, NULL));
    FAILS(cuStreamQuery(s), RZCUDA_ERROR_NOT_READY);
    cuEmuSetKernelDuration(0);
    OK(cuStreamSynchronize(s));
    cr_assert_eq(cuEmuHostWaits(NULL), 1);
    OK(cuMemFreeHost(pinned));
    cr_assert_eq(cuEmuHostWaits("cuMemFreeHost"), 1);
}
