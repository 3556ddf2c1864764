/*
 * The emulated driver's sticky errors (issue 27), against cuda.h's text for CUDA_ERROR_ILLEGAL_ADDRESS,
 * LAUNCH_FAILED and the other kernel faults: "This leaves the process in an inconsistent state and any further
 * CUDA work will return the same error. To continue using CUDA, the process must be terminated and
 * relaunched." After one, every call in every context and thread returns it, whatever the program does
 * (a reset, a destroy, a new context); only cuGetErrorName, cuGetErrorString and cuDriverGetVersion still
 * answer (docs/emulated-driver.md). Criterion runs each test in a process of its own, so the error of one
 * never reaches another.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_emu.h"

#define OK(call) cr_assert_eq((call), RZCUDA_SUCCESS, "%s", #call)
#define FAILS(call, err) cr_assert_eq((call), (rzcu_result)(err), "%s", #call)

static rzcu_context primary_current(int dev) {
    OK(cuInit(0));
    rzcu_context ctx = NULL;
    OK(cuDevicePrimaryCtxRetain(&ctx, dev));
    OK(cuCtxSetCurrent(ctx));
    return ctx;
}

CUDA_EMU_KERNEL(sticky_store, sizeof(rzcu_deviceptr)) {
    *(volatile int *)(uintptr_t)CUDA_EMU_PARAM(rzcu_deviceptr, 0) = 1;
}

static rzcu_function store_fn(void) {
    rzcu_module mod;
    rzcu_function f;
    OK(cuModuleLoadData(&mod, "emulated module"));
    OK(cuModuleGetFunction(&f, mod, "sticky_store"));
    return f;
}

static void launch_store(rzcu_function f, rzcu_deviceptr where, rzcu_stream s) {
    void *params[] = {&where};
    OK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, params, NULL));
}

/* What a thread that never touched the faulted context gets: the error too (a new thread's first calls). */
struct other_thread {
    rzcu_context ctx;
    rzcu_result set_current, alloc, get_current, version;
};

static void *other_thread_main(void *arg) {
    struct other_thread *t = arg;
    rzcu_deviceptr p;
    rzcu_context c;
    int v;
    t->set_current = cuCtxSetCurrent(t->ctx);
    t->alloc = cuMemAlloc_v2(&p, 16);
    t->get_current = cuCtxGetCurrent(&c);
    t->version = cuDriverGetVersion(&v);
    return NULL;
}

/* The error every later call returns, in the context of the fault and in another one made before it. */
static void expect_every_call_fails(rzcu_result err, rzcu_context other, rzcu_deviceptr mem) {
    FAILS(cuCtxSynchronize(), err);
    FAILS(cuStreamSynchronize(NULL), err);
    int seen = -1;
    FAILS(cuMemcpyDtoH_v2(&seen, mem, sizeof seen), err);
    FAILS(cuMemsetD8_v2(mem, 0, 4), err);
    rzcu_deviceptr p = 0;
    FAILS(cuMemAlloc_v2(&p, 16), err);
    cr_assert_eq(p, 0, "nothing allocated");
    FAILS(cuMemFree_v2(mem), err);
    rzcu_stream s;
    FAILS(cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING), err);
    rzcu_event e;
    FAILS(cuEventCreate(&e, 0), err);
    rzcu_context c;
    FAILS(cuCtxGetCurrent(&c), err);
    FAILS(cuCtxPushCurrent_v2(other), err);
    FAILS(cuCtxSetCurrent(other), err);
    rzcu_device dev;
    FAILS(cuCtxGetDevice(&dev), err);
    void *ctx_attr = NULL;
    FAILS(cuPointerGetAttribute(&ctx_attr, RZCU_POINTER_ATTRIBUTE_CONTEXT, mem), err);
    rzcu_deviceptr base;
    size_t size;
    FAILS(cuMemGetAddressRange_v2(&base, &size, mem), err);
    size_t free_b, total_b;
    FAILS(cuMemGetInfo_v2(&free_b, &total_b), err);
    void *fn = NULL;
    FAILS(cuGetProcAddress("cuMemAlloc", &fn, 12000, 0), err);
    FAILS(cuInit(0), err);
    /* Another thread, current in a context made before the fault: the same. */
    struct other_thread t = {.ctx = other};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, other_thread_main, &t), 0);
    pthread_join(th, NULL);
    cr_assert_eq(t.set_current, err);
    cr_assert_eq(t.alloc, err);
    cr_assert_eq(t.get_current, err);
    cr_assert_eq(t.version, RZCUDA_SUCCESS, "cuDriverGetVersion still answers");
    /* What still answers: naming the error, the driver's version. */
    const char *name = NULL, *text = NULL;
    OK(cuGetErrorName(err, &name));
    OK(cuGetErrorString(err, &text));
    cr_assert(name && strncmp(name, "CUDA_ERROR_", 11) == 0);
    cr_assert(text && *text);
    int v = 0;
    OK(cuDriverGetVersion(&v));
    cr_assert_gt(v, 0);
}

/* Nothing clears it: destroying a context, resetting or releasing the primary context, making a new one. */
static void expect_nothing_clears_it(rzcu_result err, rzcu_context created) {
    FAILS(cuCtxDestroy_v2(created), err);
    FAILS(cuDevicePrimaryCtxReset_v2(0), err);
    FAILS(cuDevicePrimaryCtxRelease_v2(0), err);
    rzcu_context c;
    FAILS(cuDevicePrimaryCtxRetain(&c, 0), err);
    FAILS(cuCtxCreate_v4(&c, NULL, 0, 0), err);
    unsigned flags;
    int active;
    FAILS(cuDevicePrimaryCtxGetState(0, &flags, &active), err);
    rzcu_deviceptr p;
    FAILS(cuMemAlloc_v2(&p, 16), err);
    FAILS(cuCtxSynchronize(), err);
}

/* A kernel fault (CUDA_EMU_STICKY_FAULTS): the process's error, not its context's. Work queued anywhere
 * behind it is dropped, in its context and in another one that waits for it. */
Test(emu_sticky, kernel_fault_fails_every_later_call_in_every_context_and_thread) {
    setenv("CUDA_EMU_STICKY_FAULTS", "1", 1);
    setenv("CUDA_EMU_DEVICES", "2", 1);
    rzcu_context other = primary_current(1);
    rzcu_deviceptr other_flag;
    OK(cuMemAlloc_v2(&other_flag, sizeof(int)));
    OK(cuMemsetD8_v2(other_flag, 0, sizeof(int)));
    rzcu_function other_f = store_fn();
    rzcu_stream other_s;
    OK(cuStreamCreate(&other_s, RZCU_STREAM_NON_BLOCKING));
    primary_current(0);
    rzcu_context created;
    OK(cuCtxCreate_v4(&created, NULL, 0, 0)); /* current now; the primary context under it */
    OK(cuCtxPopCurrent_v2(NULL));
    rzcu_deviceptr flag;
    OK(cuMemAlloc_v2(&flag, sizeof(int)));
    OK(cuMemsetD8_v2(flag, 0, sizeof(int)));
    rzcu_function f = store_fn();
    rzcu_event after_fault;
    OK(cuEventCreate(&after_fault, 0));
    launch_store(f, 16, NULL); /* address 16: no allocation, the kernel faults */
    OK(cuEventRecord(after_fault, NULL));
    launch_store(f, flag, NULL); /* queued behind the fault */
    /* Context 1's stream waits for the fault, then stores: dropped too (a launch returns before it runs). */
    rzcu_result waited = cuStreamWaitEvent(other_s, after_fault, 0);
    cr_assert(waited == RZCUDA_SUCCESS || waited == RZCUDA_ERROR_ILLEGAL_ADDRESS, "%u", waited);
    void *params[] = {&other_flag};
    rzcu_result launched = cuLaunchKernel(other_f, 1, 1, 1, 1, 1, 1, 0, other_s, params, NULL);
    cr_assert(launched == RZCUDA_SUCCESS || launched == RZCUDA_ERROR_ILLEGAL_ADDRESS, "%u", launched);
    FAILS(cuCtxSynchronize(), RZCUDA_ERROR_ILLEGAL_ADDRESS);
    cr_assert_eq(*(volatile int *)(uintptr_t)flag, 0, "the kernel queued after the fault did not run");
    cr_assert_eq(*(volatile int *)(uintptr_t)other_flag, 0, "nor the one of the other context behind it");
    expect_every_call_fails(RZCUDA_ERROR_ILLEGAL_ADDRESS, other, flag);
    expect_nothing_clears_it(RZCUDA_ERROR_ILLEGAL_ADDRESS, created);
}

/* A launch failure the driver reports at a synchronisation (injected: what a faulting kernel gives on a
 * GPU): sticky the same way; the injected call itself does nothing. */
Test(emu_sticky, launch_failure_fails_every_later_call) {
    setenv("CUDA_EMU_FAIL", "cuCtxSynchronize:1:CUDA_ERROR_LAUNCH_FAILED", 1);
    setenv("CUDA_EMU_DEVICES", "2", 1);
    rzcu_context other = primary_current(1);
    primary_current(0);
    rzcu_context created;
    OK(cuCtxCreate_v4(&created, NULL, 0, 0));
    OK(cuCtxPopCurrent_v2(NULL));
    rzcu_deviceptr mem;
    OK(cuMemAlloc_v2(&mem, 64));
    FAILS(cuCtxSynchronize(), RZCUDA_ERROR_LAUNCH_FAILED);
    expect_every_call_fails(RZCUDA_ERROR_LAUNCH_FAILED, other, mem);
    expect_nothing_clears_it(RZCUDA_ERROR_LAUNCH_FAILED, created);
}

/* Every result cuda.h documents as ending the process's CUDA work is sticky when the driver returns it; the
 * others (a launch refused for its resources, an assert that ends only its context, an unknown error) fail
 * that one call only. */
struct code_case {
    unsigned code;
    int sticky;
};

ParameterizedTestParameters(emu_sticky, injected_results) {
    static struct code_case cases[] = {
        {226, 1}, {700, 1}, {702, 1}, {714, 1}, {715, 1}, {716, 1}, {717, 1}, {718, 1}, {719, 1}, {721, 1},
        {911, 1}, {1, 0},   {2, 0},   {701, 0}, {710, 0}, {999, 0},
    };
    return cr_make_param_array(struct code_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(struct code_case *c, emu_sticky, injected_results) {
    primary_current(0);
    rzcu_deviceptr mem;
    OK(cuMemAlloc_v2(&mem, 64));
    cr_assert_eq(cuEmuInjectFailure("cuMemsetD8_v2", 1, c->code), 0);
    FAILS(cuMemsetD8_v2(mem, 1, 64), c->code);
    if (c->sticky) {
        FAILS(cuMemsetD8_v2(mem, 1, 64), c->code);
        FAILS(cuMemFree_v2(mem), c->code);
        FAILS(cuDevicePrimaryCtxReset_v2(0), c->code);
    } else {
        OK(cuMemsetD8_v2(mem, 1, 64));
        OK(cuMemFree_v2(mem));
    }
}

/* A synchronisation that lets a held kernel run and fault returns the error, and its wait ends: the work
 * queued behind the kernel is dropped, and counted complete. */
Test(emu_sticky, a_wait_that_sees_the_fault_ends_with_the_error) {
    setenv("CUDA_EMU_STICKY_FAULTS", "1", 1);
    setenv("CUDA_EMU_KERNEL_HOLD", "1", 1);
    primary_current(0);
    rzcu_function f = store_fn();
    rzcu_deviceptr flag;
    OK(cuMemAlloc_v2(&flag, sizeof(int)));
    OK(cuMemsetD8_v2(flag, 0, sizeof(int)));
    launch_store(f, 16, NULL);   /* held until someone waits, then faults */
    launch_store(f, flag, NULL); /* dropped */
    FAILS(cuStreamSynchronize(NULL), RZCUDA_ERROR_ILLEGAL_ADDRESS);
    cr_assert_eq(*(volatile int *)(uintptr_t)flag, 0);
    FAILS(cuStreamQuery(NULL), RZCUDA_ERROR_ILLEGAL_ADDRESS);
}
