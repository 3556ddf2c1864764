/*
 * Tests of the emulated driver's imitations of real-driver behaviour added for issue 15 (tests/test_emu_*.c
 * holds the rest): kernels held until a thread waits (CUDA_EMU_KERNEL_HOLD), the primary context's reset
 * and state, and context handles handed out again after a destroy.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "cuda_emu.h"

#define OK(call) cr_assert_eq((call), RZCUDA_SUCCESS, "%s", #call)
#define FAILS(call, err) cr_assert_eq((call), (rzcu_result)(err), "%s", #call)

static rzcu_context primary_current(void) {
    OK(cuInit(0));
    rzcu_context ctx = NULL;
    OK(cuDevicePrimaryCtxRetain(&ctx, 0));
    OK(cuCtxSetCurrent(ctx));
    return ctx;
}

CUDA_EMU_KERNEL(set_flag, sizeof(rzcu_deviceptr)) {
    *(volatile int *)(uintptr_t)CUDA_EMU_PARAM(rzcu_deviceptr, 0) = 1;
}

static void launch_set_flag(rzcu_deviceptr flag, rzcu_stream s) {
    rzcu_module mod;
    rzcu_function f;
    OK(cuModuleLoadData(&mod, "emulated module"));
    OK(cuModuleGetFunction(&f, mod, "set_flag"));
    void *params[] = {&flag};
    OK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, params, NULL));
}

/* Held: a copy on another stream that waits for nothing sees the kernel's work not done, every time. */
Test(emu_real, held_kernel_runs_only_once_a_thread_waits) {
    setenv("CUDA_EMU_KERNEL_HOLD", "1", 1);
    primary_current();
    rzcu_deviceptr flag;
    OK(cuMemAlloc_v2(&flag, sizeof(int)));
    OK(cuMemsetD8_v2(flag, 0, sizeof(int)));
    launch_set_flag(flag, NULL);
    rzcu_stream other;
    OK(cuStreamCreate(&other, RZCU_STREAM_NON_BLOCKING));
    int seen = -1;
    OK(cuMemcpyDtoHAsync_v2(&seen, flag, sizeof seen, other));
    OK(cuStreamSynchronize(other)); /* complete already: waits for nothing, releases nothing */
    cr_assert_eq(seen, 0, "the kernel ran before anyone waited");
    OK(cuCtxSynchronize());
    OK(cuMemcpyDtoH_v2(&seen, flag, sizeof seen));
    cr_assert_eq(seen, 1, "the synchronisation let it run");
}

/* cuDevicePrimaryCtxReset destroys the context's memory and streams without releasing it; the next retain
 * (or use) activates it again under the same handle. */
Test(emu_real, primary_reset_destroys_and_keeps_the_handle) {
    rzcu_context ctx = primary_current();
    unsigned flags = 7;
    int active = -1;
    OK(cuDevicePrimaryCtxGetState(0, &flags, &active));
    cr_assert(flags == 0 && active == 1);
    rzcu_deviceptr p;
    OK(cuMemAlloc_v2(&p, 1000));
    rzcu_stream s;
    OK(cuStreamCreate(&s, 0));
    OK(cuDevicePrimaryCtxReset_v2(0));
    OK(cuDevicePrimaryCtxGetState(0, &flags, &active));
    cr_assert_eq(active, 0);
    FAILS(cuMemAlloc_v2(&p, 16), RZCUDA_ERROR_CONTEXT_IS_DESTROYED);
    FAILS(cuStreamSynchronize(s), RZCUDA_ERROR_INVALID_HANDLE);
    OK(cuDevicePrimaryCtxReset_v2(0)); /* inactive: nothing to do */
    rzcu_context again;
    OK(cuDevicePrimaryCtxRetain(&again, 0));
    cr_assert_eq(again, ctx, "the same handle");
    OK(cuDevicePrimaryCtxGetState(0, &flags, &active));
    cr_assert_eq(active, 1);
    FAILS(cuMemGetAddressRange_v2(NULL, NULL, p), RZCUDA_ERROR_NOT_FOUND); /* freed by the reset */
    OK(cuDevicePrimaryCtxRelease_v2(0));
    OK(cuDevicePrimaryCtxRelease_v2(0)); /* the reset did not release the first reference */
    OK(cuDevicePrimaryCtxGetState(0, &flags, &active));
    cr_assert_eq(active, 0);
    FAILS(cuDevicePrimaryCtxRelease_v2(0), RZCUDA_ERROR_INVALID_CONTEXT);
    FAILS(cuDevicePrimaryCtxGetState(0, NULL, &active), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuDevicePrimaryCtxGetState(9, &flags, &active), RZCUDA_ERROR_INVALID_DEVICE);
    FAILS(cuDevicePrimaryCtxReset_v2(9), RZCUDA_ERROR_INVALID_DEVICE);
}

/* A real driver's next context may live where the destroyed one did: the same CUcontext value. */
Test(emu_real, created_context_reuses_a_destroyed_handle) {
    OK(cuInit(0));
    rzcu_context a, b, c;
    OK(cuCtxCreate_v4(&a, NULL, 0, 0));
    rzcu_deviceptr p;
    OK(cuMemAlloc_v2(&p, 100));
    OK(cuCtxDestroy_v2(a));
    OK(cuCtxCreate_v4(&b, NULL, 0, 0));
    cr_assert_eq(b, a, "the destroyed context's handle comes back");
    FAILS(cuPointerGetAttribute(&c, RZCU_POINTER_ATTRIBUTE_CONTEXT, p), RZCUDA_ERROR_INVALID_VALUE);
    OK(cuMemAlloc_v2(&p, 100));
    OK(cuPointerGetAttribute(&c, RZCU_POINTER_ATTRIBUTE_CONTEXT, p));
    cr_assert_eq(c, b);
    OK(cuCtxCreate_v4(&c, NULL, 0, 0));
    cr_assert_neq(c, b, "a live context's handle is never handed out twice");
    OK(cuCtxDestroy_v2(c));
    OK(cuCtxDestroy_v2(b));
}

/* cuMemFree waits for the device, except for stream-ordered (pool) memory, whose users the program must have
 * waited for: a held kernel stays held across the pool free, and runs at the plain one. */
Test(emu_real, cuMemFree_of_pool_memory_does_not_wait) {
    setenv("CUDA_EMU_KERNEL_HOLD", "1", 1);
    primary_current();
    rzcu_deviceptr flag, pool, plain;
    OK(cuMemAlloc_v2(&flag, sizeof(int)));
    OK(cuMemsetD8_v2(flag, 0, sizeof(int)));
    OK(cuMemAllocAsync(&pool, 1000, NULL));
    OK(cuMemAlloc_v2(&plain, 1000));
    rzcu_stream other;
    OK(cuStreamCreate(&other, RZCU_STREAM_NON_BLOCKING));
    OK(cuStreamSynchronize(NULL));
    launch_set_flag(flag, other);
    OK(cuMemFree_v2(pool));
    int seen = -1;
    OK(cuMemcpyDtoHAsync_v2(&seen, flag, sizeof seen, NULL)); /* legacy stream: does not wait for `other` */
    cr_assert_eq(seen, 0, "the pool free waited for the device");
    OK(cuMemFree_v2(plain));
    OK(cuMemcpyDtoHAsync_v2(&seen, flag, sizeof seen, NULL));
    cr_assert_eq(seen, 1, "the plain free waits for it");
    FAILS(cuMemFree_v2(pool), RZCUDA_ERROR_INVALID_VALUE);
}

CUDA_EMU_KERNEL(fault, sizeof(rzcu_deviceptr)) {
    *(volatile int *)(uintptr_t)CUDA_EMU_PARAM(rzcu_deviceptr, 0) = 1;
}

/* CUDA_EMU_STICKY_FAULTS: a kernel fault is a sticky CUDA_ERROR_ILLEGAL_ADDRESS in its context, as on a GPU:
 * every later call in it returns the error, work queued behind the kernel is dropped, other contexts go on,
 * and a reset primary context starts clean. */
Test(emu_real, sticky_kernel_fault_fails_every_later_call_in_its_context) {
    setenv("CUDA_EMU_STICKY_FAULTS", "1", 1);
    setenv("CUDA_EMU_DEVICES", "2", 1);
    primary_current();
    rzcu_deviceptr flag, bad = 16;
    OK(cuMemAlloc_v2(&flag, sizeof(int)));
    OK(cuMemsetD8_v2(flag, 0, sizeof(int)));
    rzcu_module mod;
    rzcu_function f;
    OK(cuModuleLoadData(&mod, "emulated module"));
    OK(cuModuleGetFunction(&f, mod, "fault"));
    void *params[] = {&bad};
    OK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL));
    launch_set_flag(flag, NULL); /* queued behind the fault: dropped */
    FAILS(cuCtxSynchronize(), RZCUDA_ERROR_ILLEGAL_ADDRESS);
    FAILS(cuStreamSynchronize(NULL), RZCUDA_ERROR_ILLEGAL_ADDRESS);
    int seen = -1;
    FAILS(cuMemcpyDtoH_v2(&seen, flag, sizeof seen), RZCUDA_ERROR_ILLEGAL_ADDRESS);
    rzcu_deviceptr p;
    FAILS(cuMemAlloc_v2(&p, 16), RZCUDA_ERROR_ILLEGAL_ADDRESS);
    FAILS(cuMemFree_v2(flag), RZCUDA_ERROR_ILLEGAL_ADDRESS);
    cr_assert_eq(*(volatile int *)(uintptr_t)flag, 0, "the kernel queued after the fault did not run");
    rzcu_context other;
    OK(cuDevicePrimaryCtxRetain(&other, 1));
    OK(cuCtxPushCurrent_v2(other));
    OK(cuMemAlloc_v2(&p, 16)); /* another context is unaffected */
    OK(cuCtxPopCurrent_v2(NULL));
    OK(cuDevicePrimaryCtxReset_v2(0));
    primary_current();
    OK(cuMemAlloc_v2(&p, 16)); /* a new activation starts clean */
}

/* Libraries: context-independent loading; a kernel handle launches in any context when passed as the
 * function (as cudart 12 does), cuKernelGetFunction makes a function of the current context, cuFuncGetName
 * refuses a kernel handle and cuKernelGetName names it; unloading invalidates both. */
Test(emu_real, library_kernels_launch_and_are_named) {
    OK(cuInit(0));
    rzcu_library lib;
    FAILS(cuLibraryLoadData(&lib, NULL, NULL, NULL, 0, NULL, NULL, 0), RZCUDA_ERROR_INVALID_VALUE);
    OK(cuLibraryLoadData(&lib, "image", NULL, NULL, 0, NULL, NULL, 0)); /* no context needed */
    rzcu_kernel k, again;
    FAILS(cuLibraryGetKernel(&k, lib, "no_such_kernel"), RZCUDA_ERROR_NOT_FOUND);
    OK(cuLibraryGetKernel(&k, lib, "set_flag"));
    OK(cuLibraryGetKernel(&again, lib, "set_flag"));
    cr_assert_eq(k, again, "one handle per name");
    const char *name = NULL;
    OK(cuKernelGetName(&name, k));
    cr_assert_str_eq(name, "set_flag");
    FAILS(cuFuncGetName(&name, (rzcu_function)(void *)k), RZCUDA_ERROR_INVALID_VALUE);
    primary_current();
    rzcu_deviceptr flag;
    OK(cuMemAlloc_v2(&flag, sizeof(int)));
    OK(cuMemsetD8_v2(flag, 0, sizeof(int)));
    void *params[] = {&flag};
    OK(cuLaunchKernel((rzcu_function)(void *)k, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL));
    OK(cuCtxSynchronize());
    int seen = 0;
    OK(cuMemcpyDtoH_v2(&seen, flag, sizeof seen));
    cr_assert_eq(seen, 1);
    rzcu_function f;
    OK(cuKernelGetFunction(&f, k));
    OK(cuFuncGetName(&name, f));
    cr_assert_str_eq(name, "set_flag");
    OK(cuLibraryUnload(lib));
    FAILS(cuKernelGetName(&name, k), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuLaunchKernel((rzcu_function)(void *)k, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL), RZCUDA_ERROR_INVALID_HANDLE);
    FAILS(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL), RZCUDA_ERROR_INVALID_HANDLE);
    FAILS(cuLibraryUnload(lib), RZCUDA_ERROR_INVALID_HANDLE);
}

/* An asynchronous device-to-host copy into pageable memory returns once it has completed (so after the
 * stream's earlier work); into registered memory it is queued. */
Test(emu_real, pageable_async_copy_waits_pinned_one_is_queued) {
    setenv("CUDA_EMU_KERNEL_HOLD", "1", 1);
    primary_current();
    rzcu_deviceptr flag;
    OK(cuMemAlloc_v2(&flag, sizeof(int)));
    OK(cuMemsetD8_v2(flag, 0, sizeof(int)));
    rzcu_stream s;
    OK(cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING));
    static int pinned[1024];
    OK(cuMemHostRegister_v2(pinned, sizeof pinned, 0));
    pinned[0] = -1;
    launch_set_flag(flag, s);
    OK(cuMemcpyDtoHAsync_v2(pinned, flag, sizeof(int), s));
    cr_assert_eq(pinned[0], -1, "queued behind the held kernel");
    int pageable = -1;
    OK(cuMemcpyDtoHAsync_v2(&pageable, flag, sizeof pageable, s));
    cr_assert_eq(pageable, 1, "returned only once done: the kernel ran first");
    OK(cuStreamSynchronize(s));
    cr_assert_eq(pinned[0], 1);
    OK(cuMemHostUnregister(pinned));
}

CUDA_EMU_KERNEL(add_one, sizeof(rzcu_deviceptr)) {
    ++*(volatile int *)(uintptr_t)CUDA_EMU_PARAM(rzcu_deviceptr, 0);
}

/* Stream capture records work instead of running it; the instantiated graph replays it at every launch;
 * what the driver forbids during capture (synchronising the captured stream) fails and invalidates it. */
Test(emu_real, stream_capture_records_and_graphs_replay) {
    primary_current();
    rzcu_deviceptr counter;
    OK(cuMemAlloc_v2(&counter, sizeof(int)));
    OK(cuMemsetD8_v2(counter, 0, sizeof(int)));
    rzcu_stream s;
    OK(cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING));
    FAILS(cuStreamBeginCapture_v2(NULL, 0), RZCUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    rzcu_module mod;
    rzcu_function f;
    OK(cuModuleLoadData(&mod, "emulated module"));
    OK(cuModuleGetFunction(&f, mod, "add_one"));
    void *params[] = {&counter};
    rzcu_capture_status st = 9;
    OK(cuStreamBeginCapture_v2(s, 0));
    FAILS(cuStreamBeginCapture_v2(s, 0), RZCUDA_ERROR_ILLEGAL_STATE);
    OK(cuStreamIsCapturing(s, &st));
    cr_assert_eq(st, 1);
    OK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, params, NULL));
    OK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, params, NULL));
    int seen = -1;
    OK(cuMemcpyDtoH_v2(&seen, counter, sizeof seen));
    cr_assert_eq(seen, 0, "captured, not run");
    struct CUgraph_st *graph;
    OK(cuStreamEndCapture(s, &graph));
    OK(cuStreamIsCapturing(s, &st));
    cr_assert_eq(st, 0);
    struct CUgraphExec_st *exec;
    OK(cuGraphInstantiateWithFlags(&exec, graph, 0));
    OK(cuGraphDestroy(graph)); /* the executable does not need it */
    OK(cuGraphLaunch(exec, s));
    OK(cuGraphLaunch(exec, s));
    OK(cuStreamSynchronize(s));
    OK(cuMemcpyDtoH_v2(&seen, counter, sizeof seen));
    cr_assert_eq(seen, 4, "two launches of two nodes");
    OK(cuGraphExecDestroy(exec));
    FAILS(cuGraphLaunch(exec, s), RZCUDA_ERROR_INVALID_VALUE);
    /* Illegal during capture: a synchronisation of the captured stream, or of its context. */
    OK(cuStreamBeginCapture_v2(s, 0));
    OK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, params, NULL));
    FAILS(cuStreamSynchronize(s), RZCUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    OK(cuStreamIsCapturing(s, &st));
    cr_assert_eq(st, 2, "invalidated");
    FAILS(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, params, NULL), RZCUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    FAILS(cuStreamEndCapture(s, &graph), RZCUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    cr_assert_null(graph);
    OK(cuStreamBeginCapture_v2(s, 0));
    FAILS(cuCtxSynchronize(), RZCUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    FAILS(cuStreamEndCapture(s, &graph), RZCUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    FAILS(cuStreamEndCapture(s, &graph), RZCUDA_ERROR_ILLEGAL_STATE);
    OK(cuMemcpyDtoH_v2(&seen, counter, sizeof seen));
    cr_assert_eq(seen, 4, "nothing of the invalidated captures ran");
}

/* ---- graph memory nodes, capture info, per-thread capture forms, event queries (issue 15 item 6) -------- */
static rzcu_function function(const char *name) {
    rzcu_module mod;
    rzcu_function f;
    OK(cuModuleLoadData(&mod, "emulated module"));
    OK(cuModuleGetFunction(&f, mod, name));
    return f;
}

static size_t free_bytes(void) {
    size_t free_now = 0, total = 0;
    OK(cuMemGetInfo_v2(&free_now, &total));
    return free_now;
}

/* An allocation and a free captured into a graph are memory nodes: the address is the graph's, usable only
 * between them (during capture, and at each launch); every launch allocates and frees it again, and the
 * memory goes when the graph and its executable do. */
Test(emu_real, captured_allocation_and_free_are_memory_nodes) {
    primary_current();
    rzcu_deviceptr counter, p;
    OK(cuMemAlloc_v2(&counter, sizeof(int)));
    OK(cuMemsetD8_v2(counter, 0, sizeof(int)));
    rzcu_stream s;
    OK(cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING));
    size_t before = free_bytes();
    OK(cuStreamBeginCapture_v2(s, 0));
    OK(cuMemAllocAsync(&p, 1000, s));
    OK(cuMemsetD8Async(p, 0x11, 1000, s)); /* usable by the work captured after the allocation */
    void *params[] = {&counter};
    OK(cuLaunchKernel(function("add_one"), 1, 1, 1, 1, 1, 1, 0, s, params, NULL));
    OK(cuMemFreeAsync(p, s));
    FAILS(cuMemsetD8Async(p, 0, 1000, s), RZCUDA_ERROR_INVALID_VALUE); /* not after its free node */
    struct CUgraph_st *graph;
    OK(cuStreamEndCapture(s, &graph));
    FAILS(cuMemsetD8_v2(p, 0, 1000), RZCUDA_ERROR_INVALID_VALUE); /* the graph's, not allocated now */
    FAILS(cuMemFree_v2(p), RZCUDA_ERROR_INVALID_VALUE);
    struct CUgraphExec_st *exec, *second;
    OK(cuGraphInstantiateWithFlags(&exec, graph, 0));
    FAILS(cuGraphInstantiateWithFlags(&second, graph, 0), RZCUDA_ERROR_INVALID_VALUE); /* one executable */
    OK(cuGraphLaunch(exec, s));
    OK(cuGraphLaunch(exec, s)); /* freed by the first launch: allocated again */
    OK(cuStreamSynchronize(s));
    int seen = 0;
    OK(cuMemcpyDtoH_v2(&seen, counter, sizeof seen));
    cr_assert_eq(seen, 2);
    FAILS(cuMemsetD8_v2(p, 0, 1000), RZCUDA_ERROR_INVALID_VALUE);
    OK(cuGraphExecDestroy(exec));
    OK(cuGraphInstantiateWithFlags(&second, graph, 0)); /* the first is gone */
    OK(cuGraphExecDestroy(second));
    cr_assert_lt(free_bytes(), before, "the graph still holds its allocation");
    OK(cuGraphDestroy(graph));
    cr_assert_eq(free_bytes(), before, "released with the graph");
}

/* An allocation the graph does not free stays allocated after a launch, for the program to use and free; a
 * launch while it is still allocated fails, unless the executable frees it on launch. */
Test(emu_real, graph_allocation_left_allocated_by_a_launch) {
    primary_current();
    rzcu_stream s;
    OK(cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING));
    rzcu_deviceptr p;
    OK(cuStreamBeginCapture_v2(s, 0));
    OK(cuMemAllocAsync(&p, 1000, s));
    struct CUgraph_st *graph;
    OK(cuStreamEndCapture(s, &graph));
    FAILS(cuMemsetD8_v2(p, 0, 1000), RZCUDA_ERROR_INVALID_VALUE);
    struct CUgraphExec_st *exec;
    OK(cuGraphInstantiateWithFlags(&exec, graph, 0));
    OK(cuGraphLaunch(exec, s));
    OK(cuStreamSynchronize(s));
    OK(cuMemsetD8_v2(p, 0x22, 1000)); /* allocated by the launch */
    FAILS(cuGraphLaunch(exec, s), RZCUDA_ERROR_INVALID_VALUE);
    OK(cuMemFreeAsync(p, s));
    FAILS(cuMemsetD8_v2(p, 0, 1000), RZCUDA_ERROR_INVALID_VALUE);
    OK(cuGraphLaunch(exec, s)); /* the same address again */
    OK(cuMemFree_v2(p));
    OK(cuGraphExecDestroy(exec));
    OK(cuGraphInstantiateWithFlags(&exec, graph, 1)); /* CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH */
    OK(cuGraphLaunch(exec, s));
    OK(cuGraphLaunch(exec, s));
    OK(cuStreamSynchronize(s));
    OK(cuMemsetD8_v2(p, 0x33, 1000));
    OK(cuGraphExecDestroy(exec));
    OK(cuGraphDestroy(graph));
    OK(cuMemsetD8_v2(p, 0x44, 1000)); /* still allocated: the program's to free */
    OK(cuMemFree_v2(p));
    FAILS(cuMemFree_v2(p), RZCUDA_ERROR_INVALID_VALUE);
}

/* A free node needs a graph allocation: freeing other memory during capture fails and invalidates it. */
Test(emu_real, captured_free_of_other_memory_is_refused) {
    primary_current();
    rzcu_stream s;
    OK(cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING));
    rzcu_deviceptr q;
    OK(cuMemAllocAsync(&q, 1000, s));
    OK(cuStreamSynchronize(s));
    OK(cuStreamBeginCapture_v2(s, 0));
    FAILS(cuMemFreeAsync(q, s), RZCUDA_ERROR_INVALID_VALUE);
    rzcu_capture_status st = 9;
    OK(cuStreamIsCapturing(s, &st));
    cr_assert_eq(st, 2, "invalidated");
    struct CUgraph_st *graph;
    FAILS(cuStreamEndCapture(s, &graph), RZCUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    OK(cuMemsetD8_v2(q, 0, 1000)); /* untouched */
    OK(cuMemFreeAsync(q, s));
    OK(cuStreamSynchronize(s));
}

/* cuStreamGetCaptureInfo (v2, v3) and the per-thread forms of the capture calls and of cuGraphLaunch. */
Test(emu_real, capture_info_and_per_thread_capture) {
    primary_current();
    rzcu_stream s, blocking;
    OK(cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING));
    OK(cuStreamCreate(&blocking, 0));
    rzcu_capture_status st = 9;
    rzcu_uint64 id1 = 0, id2 = 0;
    struct CUgraph_st *during = NULL, *graph = NULL;
    OK(cuStreamGetCaptureInfo_v3(s, &st, &id1, NULL, NULL, NULL, NULL));
    cr_assert_eq(st, 0);
    FAILS(cuStreamGetCaptureInfo_v3(s, NULL, NULL, NULL, NULL, NULL, NULL), RZCUDA_ERROR_INVALID_VALUE);
    const struct CUgraphEdgeData_st *edges;
    FAILS(cuStreamGetCaptureInfo_v3(s, &st, NULL, NULL, NULL, &edges, NULL), RZCUDA_ERROR_INVALID_VALUE);
    OK(cuStreamBeginCapture_v2(s, 0));
    struct CUgraphNode_st *const *deps = (void *)1;
    size_t ndeps = 9;
    OK(cuStreamGetCaptureInfo_v2(s, &st, &id1, &during, &deps, &ndeps));
    cr_assert_eq(st, 1);
    cr_assert_neq(id1, 0);
    cr_assert_eq(ndeps, 0, "no node handles in the emulator");
    OK(cuStreamEndCapture(s, &graph));
    cr_assert_eq(during, graph, "the graph being captured into");
    OK(cuStreamBeginCapture_v2(blocking, 0));
    OK(cuStreamGetCaptureInfo_v3(blocking, &st, &id2, NULL, NULL, NULL, NULL));
    cr_assert_neq(id2, id1, "each capture sequence has its own id");
    FAILS(cuStreamIsCapturing(NULL, &st), RZCUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
    FAILS(cuStreamGetCaptureInfo_v2(NULL, &st, NULL, NULL, NULL, NULL), RZCUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
    struct CUgraph_st *other;
    OK(cuStreamEndCapture(blocking, &other));
    OK(cuGraphDestroy(other));
    OK(cuGraphDestroy(graph));
    /* The per-thread stream (NULL to the _ptsz forms) can be captured; the legacy stream cannot. */
    rzcu_deviceptr counter;
    OK(cuMemAlloc_v2(&counter, sizeof(int)));
    OK(cuMemsetD8_v2(counter, 0, sizeof(int)));
    FAILS(cuStreamBeginCapture_v2(NULL, 0), RZCUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    OK(cuStreamBeginCapture_v2_ptsz(NULL, 0));
    OK(cuStreamIsCapturing_ptsz(NULL, &st));
    cr_assert_eq(st, 1);
    OK(cuStreamGetCaptureInfo_v3_ptsz(NULL, &st, NULL, NULL, NULL, NULL, NULL));
    cr_assert_eq(st, 1);
    void *params[] = {&counter};
    OK(cuLaunchKernel_ptsz(function("add_one"), 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL));
    OK(cuStreamEndCapture_ptsz(NULL, &graph));
    OK(cuStreamGetCaptureInfo_v2_ptsz(NULL, &st, NULL, NULL, NULL, NULL));
    cr_assert_eq(st, 0);
    struct CUgraphExec_st *exec;
    OK(cuGraphInstantiateWithFlags(&exec, graph, 0));
    OK(cuGraphLaunch_ptsz(exec, NULL));
    OK(cuStreamSynchronize_ptsz(NULL));
    int seen = 0;
    OK(cuMemcpyDtoH_v2(&seen, counter, sizeof seen));
    cr_assert_eq(seen, 1);
    void *fn = NULL;
    OK(cuGetProcAddress_v2("cuStreamGetCaptureInfo", &fn, 13000, RZCU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, NULL));
    cr_assert_eq(fn, (void *)cuStreamGetCaptureInfo_v3_ptsz);
    OK(cuGetProcAddress_v2("cuStreamGetCaptureInfo", &fn, 12000, 0, NULL));
    cr_assert_eq(fn, (void *)cuStreamGetCaptureInfo_v2);
}

CUDA_EMU_KERNEL(wait_flag, sizeof(rzcu_deviceptr)) {
    while (!__atomic_load_n((volatile int *)(uintptr_t)CUDA_EMU_PARAM(rzcu_deviceptr, 0), __ATOMIC_ACQUIRE)) {
    }
}

/* cuEventQuery answers at once: CUDA_ERROR_NOT_READY while the recorded work runs, then CUDA_SUCCESS. And a
 * launch of an executable runs after the previous launch of the same executable, whatever the streams. */
Test(emu_real, event_query_and_launches_ordered_after_the_previous_one) {
    primary_current();
    rzcu_stream s1, s2;
    OK(cuStreamCreate(&s1, RZCU_STREAM_NON_BLOCKING));
    OK(cuStreamCreate(&s2, RZCU_STREAM_NON_BLOCKING));
    rzcu_event never, e1, e2;
    OK(cuEventCreate(&never, 0x2));
    OK(cuEventQuery(never));
    OK(cuEventCreate(&e1, 0x2));
    OK(cuEventCreate(&e2, 0x2));
    int *flag;
    OK(cuMemAllocHost_v2((void **)&flag, sizeof *flag));
    *flag = 0;
    rzcu_deviceptr host_flag = (rzcu_deviceptr)(uintptr_t)flag, p;
    void *params[] = {&host_flag};
    OK(cuLaunchKernel(function("wait_flag"), 1, 1, 1, 1, 1, 1, 0, s1, params, NULL));
    OK(cuEventRecord(e1, s1));
    FAILS(cuEventQuery(e1), RZCUDA_ERROR_NOT_READY);
    /* A graph of one memset: on an idle stream it would run within cuGraphLaunch. */
    OK(cuMemAlloc_v2(&p, 64));
    OK(cuMemsetD8_v2(p, 0, 64));
    OK(cuStreamBeginCapture_v2(s2, 0));
    OK(cuMemsetD8Async(p, 0x5a, 64, s2));
    struct CUgraph_st *graph;
    OK(cuStreamEndCapture(s2, &graph));
    struct CUgraphExec_st *exec;
    OK(cuGraphInstantiateWithFlags(&exec, graph, 0));
    OK(cuGraphLaunch(exec, s1)); /* behind the waiting kernel */
    OK(cuGraphLaunch(exec, s2)); /* behind the launch on s1 */
    OK(cuEventRecord(e2, s2));
    FAILS(cuEventQuery(e2), RZCUDA_ERROR_NOT_READY);
    __atomic_store_n(flag, 1, __ATOMIC_RELEASE);
    OK(cuEventSynchronize(e2));
    OK(cuEventQuery(e1));
    OK(cuEventQuery(e2));
    OK(cuEventDestroy_v2(e2));
    FAILS(cuEventQuery(e2), RZCUDA_ERROR_INVALID_HANDLE);
    OK(cuCtxSynchronize());
    OK(cuMemFreeHost(flag));
}

/* ---- capture modes: the calls cuThreadExchangeStreamCaptureMode's documentation calls potentially unsafe ---- */
#define MODE_GLOBAL RZCU_STREAM_CAPTURE_MODE_GLOBAL
#define MODE_THREAD_LOCAL RZCU_STREAM_CAPTURE_MODE_THREAD_LOCAL
#define MODE_RELAXED RZCU_STREAM_CAPTURE_MODE_RELAXED

/* The thread's mode: set, handed back, validated (an unknown mode changes nothing). */
Test(emu_real, capture_mode_is_exchanged_and_validated) {
    primary_current();
    rzcu_capture_mode m = MODE_RELAXED;
    OK(cuThreadExchangeStreamCaptureMode(&m));
    cr_assert_eq(m, MODE_GLOBAL, "a thread starts in the global mode");
    m = 3;
    FAILS(cuThreadExchangeStreamCaptureMode(&m), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuThreadExchangeStreamCaptureMode(NULL), RZCUDA_ERROR_INVALID_VALUE);
    m = MODE_THREAD_LOCAL;
    OK(cuThreadExchangeStreamCaptureMode(&m));
    cr_assert_eq(m, MODE_RELAXED, "the refused exchanges kept the mode");
    m = MODE_GLOBAL;
    OK(cuThreadExchangeStreamCaptureMode(&m));
    cr_assert_eq(m, MODE_THREAD_LOCAL);
}

/* Each call of the unsafe set, made by the capturing thread (global mode) against live objects: refused,
 * and the capture invalidated. Returns what the call returned. */
static rzcu_result unsafe_call(int which, rzcu_deviceptr dev, void *host, void *plain) {
    rzcu_deviceptr d;
    size_t pitch;
    void *h;
    switch (which) {
    case 0: return cuMemAlloc_v2(&d, 64);
    case 1: return cuMemAllocPitch_v2(&d, &pitch, 64, 2, 4);
    case 2: return cuMemAllocManaged(&d, 64, RZCU_MEM_ATTACH_GLOBAL);
    case 3: return cuMemAllocHost_v2(&h, 64);
    case 4: return cuMemHostAlloc(&h, 64, 0);
    case 5: return cuMemHostRegister_v2(plain, 4096, 0);
    case 6: return cuMemFree_v2(dev);
    case 7: return cuMemFreeHost(host);
    default: return cuMemHostUnregister(plain);
    }
}

Test(emu_real, unsafe_calls_are_refused_in_a_thread_capturing_in_the_global_mode) {
    primary_current();
    rzcu_stream s;
    OK(cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING));
    rzcu_deviceptr dev;
    void *host;
    static char plain[2][4096] __attribute__((aligned(4096)));
    OK(cuMemAlloc_v2(&dev, 64));
    OK(cuMemAllocHost_v2(&host, 64));
    OK(cuMemHostRegister_v2(plain[1], 4096, 0)); /* for the unregister */
    struct CUgraph_st *graph;
    rzcu_capture_status st = 9;
    for (int which = 0; which < 9; which++) {
        OK(cuStreamBeginCapture_v2(s, MODE_GLOBAL));
        cr_assert_eq(unsafe_call(which, dev, host, which == 8 ? plain[1] : plain[0]),
                     RZCUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "unsafe call %d", which);
        OK(cuStreamIsCapturing(s, &st));
        cr_assert_eq(st, 2, "unsafe call %d invalidated the capture", which);
        FAILS(cuStreamEndCapture(s, &graph), RZCUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    }
    /* Nothing was done by them: the memory is still there, the range still registered. */
    OK(cuMemsetD8_v2(dev, 1, 64));
    OK(cuMemFree_v2(dev));
    OK(cuMemFreeHost(host));
    OK(cuMemHostUnregister(plain[1]));
    FAILS(cuMemHostUnregister(plain[0]), RZCUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
}

/* In its own thread: a capture begun global or thread-local prohibits; one begun relaxed does not; a thread
 * in the relaxed mode is never prohibited; the stream-ordered allocation is captured, not refused. */
Test(emu_real, own_capture_prohibits_unless_relaxed) {
    primary_current();
    rzcu_stream s;
    OK(cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING));
    rzcu_deviceptr d;
    struct CUgraph_st *graph;
    OK(cuStreamBeginCapture_v2(s, MODE_THREAD_LOCAL));
    FAILS(cuMemAlloc_v2(&d, 64), RZCUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    FAILS(cuStreamEndCapture(s, &graph), RZCUDA_ERROR_STREAM_CAPTURE_INVALIDATED);

    rzcu_capture_mode m = MODE_THREAD_LOCAL; /* the thread's mode does not lift its own capture's rule */
    OK(cuThreadExchangeStreamCaptureMode(&m));
    OK(cuStreamBeginCapture_v2(s, MODE_GLOBAL));
    FAILS(cuMemAlloc_v2(&d, 64), RZCUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    FAILS(cuStreamEndCapture(s, &graph), RZCUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    OK(cuThreadExchangeStreamCaptureMode(&m)); /* back to global */

    OK(cuStreamBeginCapture_v2(s, MODE_RELAXED));
    OK(cuMemAlloc_v2(&d, 64));
    OK(cuMemFree_v2(d));
    OK(cuStreamEndCapture(s, &graph));
    OK(cuGraphDestroy(graph));

    OK(cuStreamBeginCapture_v2(s, MODE_GLOBAL));
    m = MODE_RELAXED;
    OK(cuThreadExchangeStreamCaptureMode(&m));
    OK(cuMemAlloc_v2(&d, 64));
    OK(cuMemFree_v2(d));
    OK(cuThreadExchangeStreamCaptureMode(&m)); /* the global mode back: prohibited again */
    cr_assert_eq(m, MODE_RELAXED);
    FAILS(cuMemAlloc_v2(&d, 64), RZCUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    FAILS(cuStreamEndCapture(s, &graph), RZCUDA_ERROR_STREAM_CAPTURE_INVALIDATED);

    OK(cuStreamBeginCapture_v2(s, MODE_GLOBAL));
    OK(cuMemAllocAsync(&d, 64, s)); /* stream-ordered: a memory node */
    OK(cuMemFreeAsync(d, s));
    OK(cuStreamEndCapture(s, &graph));
    OK(cuGraphDestroy(graph));
    OK(cuMemAlloc_v2(&d, 64)); /* no capture left */
    OK(cuMemFree_v2(d));
}

/* Another thread's capture, begun in the mode given, ended by that thread after the main thread's calls. */
struct capturer {
    rzcu_context ctx;
    rzcu_stream s;
    rzcu_capture_mode mode;
    pthread_barrier_t began, done;
    rzcu_result end;
};

static void *capture_thread(void *arg) {
    struct capturer *c = arg;
    cuCtxSetCurrent(c->ctx);
    rzcu_result r = cuStreamBeginCapture_v2(c->s, c->mode);
    pthread_barrier_wait(&c->began);
    pthread_barrier_wait(&c->done);
    struct CUgraph_st *graph = NULL;
    c->end = r != RZCUDA_SUCCESS ? r : cuStreamEndCapture(c->s, &graph);
    if (graph)
        cuGraphDestroy(graph);
    return NULL;
}

/* While the other thread captures in capture_mode, this thread (in my_mode) calls cuMemAlloc: the result of
 * that call, and *end what the other thread's cuStreamEndCapture returned. */
static rzcu_result alloc_beside(rzcu_capture_mode capture_mode, rzcu_capture_mode my_mode, rzcu_result *end) {
    struct capturer c = {.ctx = primary_current(), .mode = capture_mode};
    OK(cuStreamCreate(&c.s, RZCU_STREAM_NON_BLOCKING));
    pthread_barrier_init(&c.began, NULL, 2);
    pthread_barrier_init(&c.done, NULL, 2);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, capture_thread, &c), 0);
    pthread_barrier_wait(&c.began);
    rzcu_capture_mode m = my_mode;
    OK(cuThreadExchangeStreamCaptureMode(&m));
    rzcu_deviceptr d = 0;
    rzcu_result r = cuMemAlloc_v2(&d, 64);
    OK(cuThreadExchangeStreamCaptureMode(&m));
    pthread_barrier_wait(&c.done);
    pthread_join(t, NULL);
    if (r == RZCUDA_SUCCESS)
        OK(cuMemFree_v2(d)); /* no capture any more */
    pthread_barrier_destroy(&c.began);
    pthread_barrier_destroy(&c.done);
    *end = c.end;
    return r;
}

Test(emu_real, another_threads_global_capture_prohibits_a_global_thread_only) {
    rzcu_result end;
    FAILS(alloc_beside(MODE_GLOBAL, MODE_GLOBAL, &end), RZCUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    cr_assert_eq(end, RZCUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "the other thread's capture was invalidated");
    OK(alloc_beside(MODE_GLOBAL, MODE_THREAD_LOCAL, &end));
    OK(end);
    OK(alloc_beside(MODE_GLOBAL, MODE_RELAXED, &end));
    OK(end);
    OK(alloc_beside(MODE_THREAD_LOCAL, MODE_GLOBAL, &end));
    OK(end);
    OK(alloc_beside(MODE_RELAXED, MODE_GLOBAL, &end));
    OK(end);
}

/* cuStreamEndCapture on a thread that did not begin the capture: the driver's rule for every mode but RELAXED. */
struct ender {
    rzcu_context ctx;
    rzcu_stream s;
    rzcu_result r;
    struct CUgraph_st *graph;
};

static void *end_elsewhere(void *arg) {
    struct ender *e = arg;
    cuCtxSetCurrent(e->ctx);
    e->r = cuStreamEndCapture(e->s, &e->graph);
    return NULL;
}

static rzcu_result end_on_another_thread(rzcu_stream s, struct CUgraph_st **graph) {
    struct ender e = {.ctx = primary_current(), .s = s};
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, end_elsewhere, &e), 0);
    pthread_join(t, NULL);
    *graph = e.graph;
    return e.r;
}

Test(emu_real, only_the_beginning_thread_ends_a_capture_unless_relaxed) {
    primary_current();
    rzcu_stream s;
    OK(cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING));
    struct CUgraph_st *graph = NULL;
    for (rzcu_capture_mode mode = MODE_GLOBAL; mode <= MODE_THREAD_LOCAL; mode++) {
        OK(cuStreamBeginCapture_v2(s, mode));
        FAILS(end_on_another_thread(s, &graph), RZCUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD);
        cr_assert_null(graph);
        rzcu_capture_status st = 0;
        OK(cuStreamIsCapturing(s, &st));
        cr_assert_eq(st, 1, "the capture goes on");
        OK(cuStreamEndCapture(s, &graph));
        cr_assert_not_null(graph);
        OK(cuGraphDestroy(graph));
        graph = NULL;
    }
    OK(cuStreamBeginCapture_v2(s, MODE_RELAXED));
    OK(end_on_another_thread(s, &graph));
    cr_assert_not_null(graph);
    OK(cuGraphDestroy(graph));
    OK(cuStreamDestroy_v2(s));
}

/* ---- capture modes: queries and synchronisations (issue 27) ----
 * A real driver refuses another thread's cuEventQuery during a global capture with
 * CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and ends the capture CUDA_ERROR_STREAM_CAPTURE_INVALIDATED (seen on an
 * H100): the queries and synchronisations of events, streams and contexts are potentially unsafe calls, and so
 * (the documentation being silent: the stricter reading) are the pointer attribute queries. */
struct sync_objects {
    rzcu_stream other; /* a stream nobody captures */
    rzcu_event done;   /* recorded on it, complete */
    rzcu_deviceptr dev;
};

#define NSYNC_CALLS 8
static const char *const sync_call_name[NSYNC_CALLS] = {
    "cuEventQuery",  "cuEventSynchronize",    "cuStreamQuery",         "cuStreamSynchronize",
    "cuCtxSynchronize", "cuStreamQuery_ptsz", "cuPointerGetAttribute", "cuPointerGetAttributes"};

static rzcu_result sync_call(int which, const struct sync_objects *o) {
    rzcu_context owner;
    rzcu_pointer_attribute attr = RZCU_POINTER_ATTRIBUTE_CONTEXT;
    void *data[] = {&owner};
    switch (which) {
    case 0: return cuEventQuery(o->done);
    case 1: return cuEventSynchronize(o->done);
    case 2: return cuStreamQuery(o->other);
    case 3: return cuStreamSynchronize(o->other);
    case 4: return cuCtxSynchronize();
    case 5: return cuStreamQuery_ptsz(o->other);
    case 6: return cuPointerGetAttribute(&owner, RZCU_POINTER_ATTRIBUTE_CONTEXT, o->dev);
    default: return cuPointerGetAttributes(1, &attr, data, o->dev);
    }
}

static struct sync_objects sync_objects_make(void) {
    struct sync_objects o;
    OK(cuStreamCreate(&o.other, RZCU_STREAM_NON_BLOCKING));
    OK(cuEventCreate(&o.done, 0));
    OK(cuEventRecord(o.done, o.other));
    OK(cuMemAlloc_v2(&o.dev, 64));
    return o;
}

static void sync_objects_free(struct sync_objects *o) {
    OK(cuMemFree_v2(o->dev));
    OK(cuEventDestroy_v2(o->done));
    OK(cuStreamDestroy_v2(o->other));
}

/* While another thread captures in capture_mode (on a stream of another context when own_ctx, so that a
 * context synchronisation here does not synchronise the captured stream), this thread in my_mode makes sync
 * call which: what it returned, and in *end what the other thread's cuStreamEndCapture returned. */
static rzcu_result sync_beside(rzcu_capture_mode capture_mode, rzcu_capture_mode my_mode, int which, int own_ctx,
                               rzcu_result *end) {
    struct capturer c = {.ctx = primary_current(), .mode = capture_mode};
    rzcu_context mine = c.ctx;
    if (own_ctx)
        OK(cuCtxCreate_v4(&c.ctx, NULL, 0, 0));
    OK(cuCtxSetCurrent(c.ctx));
    OK(cuStreamCreate(&c.s, RZCU_STREAM_NON_BLOCKING));
    OK(cuCtxSetCurrent(mine));
    struct sync_objects o = sync_objects_make();
    pthread_barrier_init(&c.began, NULL, 2);
    pthread_barrier_init(&c.done, NULL, 2);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, capture_thread, &c), 0);
    pthread_barrier_wait(&c.began);
    rzcu_capture_mode m = my_mode;
    OK(cuThreadExchangeStreamCaptureMode(&m));
    rzcu_result r = sync_call(which, &o);
    OK(cuThreadExchangeStreamCaptureMode(&m));
    pthread_barrier_wait(&c.done);
    pthread_join(t, NULL);
    pthread_barrier_destroy(&c.began);
    pthread_barrier_destroy(&c.done);
    sync_objects_free(&o);
    if (own_ctx)
        OK(cuCtxDestroy_v2(c.ctx));
    OK(cuCtxSetCurrent(mine));
    *end = c.end;
    return r;
}

/* From a thread in the global mode: refused, and the other thread's global capture invalidated. The
 * capture is in another context, so even the context synchronisation touches nothing captured. */
Test(emu_real, queries_and_syncs_beside_a_global_capture_are_refused_and_invalidate_it) {
    for (int which = 0; which < NSYNC_CALLS; which++) {
        rzcu_result end;
        rzcu_result r = sync_beside(MODE_GLOBAL, MODE_GLOBAL, which, 1, &end);
        cr_assert_eq(r, RZCUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "%s beside a global capture: %d",
                     sync_call_name[which], r);
        cr_assert_eq(end, RZCUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "%s invalidated the capture",
                     sync_call_name[which]);
    }
}

/* From a thread in the relaxed or thread-local mode, or beside a capture not begun global: allowed, and the
 * capture ends well. */
Test(emu_real, queries_and_syncs_beside_a_capture_are_allowed_when_the_modes_allow) {
    static const rzcu_capture_mode pairs[][2] = {
        {MODE_GLOBAL, MODE_RELAXED}, {MODE_GLOBAL, MODE_THREAD_LOCAL}, {MODE_THREAD_LOCAL, MODE_GLOBAL},
        {MODE_RELAXED, MODE_GLOBAL}};
    for (size_t p = 0; p < sizeof pairs / sizeof pairs[0]; p++)
        for (int which = 0; which < NSYNC_CALLS; which++) {
            rzcu_result end;
            rzcu_result r = sync_beside(pairs[p][0], pairs[p][1], which, 1, &end);
            cr_assert_eq(r, RZCUDA_SUCCESS, "%s in mode %d beside a capture begun in mode %d: %d",
                         sync_call_name[which], pairs[p][1], pairs[p][0], r);
            cr_assert_eq(end, RZCUDA_SUCCESS, "%s left the capture going", sync_call_name[which]);
        }
}

/* A context synchronisation synchronises the captured stream when the capture is in the same context: that
 * conflicts with it necessarily, so even a relaxed thread is refused and the capture invalidated. */
Test(emu_real, a_context_sync_of_a_capturing_context_is_refused_even_relaxed) {
    rzcu_result end;
    FAILS(sync_beside(MODE_GLOBAL, MODE_RELAXED, 4, 0, &end), RZCUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    cr_assert_eq(end, RZCUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    FAILS(sync_beside(MODE_RELAXED, MODE_RELAXED, 4, 0, &end), RZCUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    cr_assert_eq(end, RZCUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    OK(sync_beside(MODE_GLOBAL, MODE_RELAXED, 3, 0, &end)); /* another stream of that context: allowed */
    OK(end);
}

/* The capturing thread's own queries and synchronisations of what it does not capture: refused in a capture
 * begun global or thread-local (the thread's mode does not lift its own capture's rule), allowed in one begun
 * relaxed, or from the thread once in the relaxed mode. Its captured stream's never (nor its context's). */
Test(emu_real, the_capturing_threads_own_queries_and_syncs) {
    rzcu_context ctx = primary_current();
    rzcu_context other_ctx;
    OK(cuCtxCreate_v4(&other_ctx, NULL, 0, 0));
    rzcu_stream s; /* captured, in another context than the objects (for cuCtxSynchronize) */
    OK(cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING));
    OK(cuCtxSetCurrent(ctx));
    struct sync_objects o = sync_objects_make();
    struct CUgraph_st *graph;
    for (int which = 0; which < NSYNC_CALLS; which++) {
        for (rzcu_capture_mode mode = MODE_GLOBAL; mode <= MODE_THREAD_LOCAL; mode++) {
            OK(cuCtxSetCurrent(other_ctx));
            OK(cuStreamBeginCapture_v2(s, mode));
            OK(cuCtxSetCurrent(ctx));
            cr_assert_eq(sync_call(which, &o), RZCUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "%s in its own capture",
                         sync_call_name[which]);
            FAILS(cuStreamEndCapture(s, &graph), RZCUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
        }
        OK(cuStreamBeginCapture_v2(s, MODE_RELAXED));
        cr_assert_eq(sync_call(which, &o), RZCUDA_SUCCESS, "%s in its own relaxed capture", sync_call_name[which]);
        OK(cuStreamEndCapture(s, &graph));
        OK(cuGraphDestroy(graph));

        OK(cuStreamBeginCapture_v2(s, MODE_GLOBAL));
        rzcu_capture_mode m = MODE_RELAXED;
        OK(cuThreadExchangeStreamCaptureMode(&m));
        cr_assert_eq(sync_call(which, &o), RZCUDA_SUCCESS, "%s relaxed in its own capture", sync_call_name[which]);
        OK(cuThreadExchangeStreamCaptureMode(&m));
        OK(cuStreamEndCapture(s, &graph));
        OK(cuGraphDestroy(graph));
    }
    /* Relaxed, still: the captured stream itself, and its context, conflict with the capture. */
    rzcu_capture_mode m = MODE_RELAXED;
    OK(cuThreadExchangeStreamCaptureMode(&m));
    OK(cuStreamBeginCapture_v2(s, MODE_GLOBAL));
    FAILS(cuStreamSynchronize(s), RZCUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    FAILS(cuStreamEndCapture(s, &graph), RZCUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    OK(cuStreamBeginCapture_v2(s, MODE_GLOBAL));
    FAILS(cuStreamQuery(s), RZCUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    FAILS(cuStreamEndCapture(s, &graph), RZCUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    OK(cuStreamBeginCapture_v2(s, MODE_GLOBAL));
    OK(cuCtxSetCurrent(other_ctx));
    FAILS(cuCtxSynchronize(), RZCUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    OK(cuCtxSetCurrent(ctx));
    FAILS(cuStreamEndCapture(s, &graph), RZCUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    OK(cuThreadExchangeStreamCaptureMode(&m));
    sync_objects_free(&o);
    OK(cuStreamDestroy_v2(s));
    OK(cuCtxDestroy_v2(other_ctx));
    OK(cuCtxSetCurrent(ctx));
}

/* An event last recorded into a capture in progress: querying or waiting for it conflicts with the capture in
 * every mode (the documentation's example for the relaxed mode); once the capture has ended it is allowed. */
Test(emu_real, an_event_recorded_in_a_capture_cannot_be_asked_during_it) {
    primary_current();
    rzcu_stream s;
    OK(cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING));
    rzcu_event e;
    OK(cuEventCreate(&e, 0));
    rzcu_capture_mode m = MODE_RELAXED;
    OK(cuThreadExchangeStreamCaptureMode(&m));
    struct CUgraph_st *graph;
    OK(cuStreamBeginCapture_v2(s, MODE_RELAXED));
    OK(cuEventRecord(e, s));
    FAILS(cuEventQuery(e), RZCUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    FAILS(cuStreamEndCapture(s, &graph), RZCUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    OK(cuStreamBeginCapture_v2(s, MODE_RELAXED));
    OK(cuEventRecord(e, s));
    FAILS(cuEventSynchronize(e), RZCUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    FAILS(cuStreamEndCapture(s, &graph), RZCUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    OK(cuStreamBeginCapture_v2(s, MODE_RELAXED));
    OK(cuEventRecord(e, s));
    OK(cuStreamEndCapture(s, &graph));
    OK(cuEventQuery(e));
    OK(cuEventSynchronize(e));
    OK(cuThreadExchangeStreamCaptureMode(&m));
    OK(cuGraphDestroy(graph));
    OK(cuEventDestroy_v2(e));
    OK(cuStreamDestroy_v2(s));
}
