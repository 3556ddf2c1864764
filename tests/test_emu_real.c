/*
 * Tests of the emulated driver's imitations of real-driver behaviour added for issue 15 (tests/test_emu_*.c
 * holds the rest): kernels held until a thread waits (CUDA_EMU_KERNEL_HOLD), the primary context's reset
 * and state, and context handles handed out again after a destroy. The capture modes are in
 * test_emu_capture.c (the same executable).
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
