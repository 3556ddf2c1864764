/*
 * A CUDA driver-API program for the real driver's semantics that redzone must honour (issue 15), one
 * scenario per mode, run by tests/test_semantics.c with libredzone.so preloaded. It knows nothing of redzone.
 *   rzreal inflight legacy|blocking|nonblocking|perthread|exit
 *                      a kernel writes 8 bytes past the end of a 1000-byte buffer and the buffer is freed
 *                      with no synchronisation in between (on each kind of stream), or the program exits
 *                      with the kernel still queued (run with CUDA_EMU_KERNEL_HOLD=1: the kernel starts only
 *                      when some thread waits for the device, as on a busy GPU)
 *   rzreal ctxend destroy|release|reset
 *                      a context ends (cuCtxDestroy, the last cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxReset)
 *                      with an overrun zone still live, after a buffer was banded and freed in it; then a new
 *                      context (the same handle, as the driver hands out) gets a buffer overrun by 8 bytes
 *   rzreal missing     an entry point the driver lacks (the emulated driver has no cuMemcpy3DPeer, the peer
 *                      copies needing two devices' contexts): looked up with dlsym (global and in the driver), cuGetProcAddress, and
 *                      called through a weak reference; and one it has, for comparison
 *   rzreal guardrange  cuMemGetAddressRange inside a 1000-byte buffer, in its slack, and in its mapping before it
 *                      (run with METRALE_REDZONE_GUARD=idx:0 for a guard-page allocation, or without)
 *   rzreal poolfree    stream-ordered memory freed with cuMemFree while a kernel (touching other memory) is
 *                      queued on a non-blocking stream: whether the free waited for it (run with
 *                      CUDA_EMU_KERNEL_HOLD=1; the driver's cuMemFree does not wait for pool memory)
 *   rzreal library     a kernel from a library (cuLibraryLoadData, cuLibraryGetKernel) launched as cudart 12 does,
 *                      its CUkernel passed as the CUfunction, writes past the end; and one launched through
 *                      cuKernelGetFunction
 *   rzreal freeasync   a stream-ordered buffer overrun by a kernel queued on its stream, then cuMemFreeAsync on
 *                      that stream: whether the free waited for the stream (run with CUDA_EMU_KERNEL_HOLD=1; a
 *                      copy into pageable memory would wait, as the emulated driver's do)
 *   rzreal capture inside|past
 *                      a stream-ordered allocation, a kernel writing all its 1000 bytes (and with `past` 8 more)
 *                      and its stream-ordered free, captured into a graph (memory nodes); the graph
 *                      instantiated and launched twice, then destroyed
 *   rzreal asyncalloc  a stream-ordered allocation made while a kernel earlier on its stream waits for a flag the
 *                      host sets only after the allocation returns (a deadlock if the allocation waits for the
 *                      stream); how many host waits it made; a synchronisation of another stream then (before
 *                      the band's memset has run); then the flag, and a kernel writing 8 bytes past the end
 *   rzreal managed free|sync
 *                      a host store one byte past the end of managed memory (host-accessible), before any
 *                      device work, then the free (after a cuCtxSynchronize with `sync`)
 *   rzreal syncother nonblocking|legacy|perthread|thread|event|destroyed
 *                      a kernel writes 8 bytes past the end of a 1000-byte buffer in two halves and, between
 *                      them, waits for the program; meanwhile the program synchronises another stream (or an
 *                      event recorded on it), then lets the kernel finish and synchronises the kernel's stream:
 *                      a non-blocking one, the legacy stream, the per-thread stream, another thread's
 *                      per-thread stream (that thread synchronises it), with `event` a non-blocking one again,
 *                      with `destroyed` a non-blocking one destroyed while the kernel runs (then the context
 *                      is synchronised) (run with METRALE_REDZONE_SCAN=sync)
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_emu.h"
#include "device_store.h"

#define PROG "rzreal"
#include "prog.h"

/* Writes n bytes of 0x5a from p + at. */
CUDA_EMU_KERNEL(past, sizeof(rzcu_deviceptr), sizeof(size_t), sizeof(size_t)) {
    unsigned char *p = (unsigned char *)(uintptr_t)CUDA_EMU_PARAM(rzcu_deviceptr, 0);
    memset(p + CUDA_EMU_PARAM(size_t, 1), 0x5a, CUDA_EMU_PARAM(size_t, 2));
}

static rzcu_function kernel_fn(const char *name) {
    rzcu_module mod;
    rzcu_function f;
    CHECK(cuModuleLoadData(&mod, "emulated module"));
    CHECK(cuModuleGetFunction(&f, mod, name));
    return f;
}

static rzcu_function past_fn(void) { return kernel_fn("past"); }

/* syncother: the kernel says when half of its overrun is written (g_half) and waits for the program (g_go);
 * g_thread_sync lets the other thread synchronise its per-thread stream. */
static sem_t g_half, g_go, g_thread_sync;

static void wait_sem(sem_t *s) {
    while (sem_wait(s) != 0)
        ;
}

/* Writes n bytes of 0x5a from p + at, in two halves, waiting for the program between them. */
CUDA_EMU_KERNEL(halfpast, sizeof(rzcu_deviceptr), sizeof(size_t), sizeof(size_t)) {
    unsigned char *p = (unsigned char *)(uintptr_t)CUDA_EMU_PARAM(rzcu_deviceptr, 0);
    size_t at = CUDA_EMU_PARAM(size_t, 1), n = CUDA_EMU_PARAM(size_t, 2);
    memset(p + at, 0x5a, n / 2);
    sem_post(&g_half);
    wait_sem(&g_go);
    memset(p + at + n / 2, 0x5a, n - n / 2);
}

struct halfpast_launch {
    rzcu_context ctx;
    rzcu_function f;
    void **params;
};

/* The other thread: launches on its per-thread stream, synchronises it when told. */
static void *halfpast_thread(void *arg) {
    struct halfpast_launch *l = arg;
    CHECK(cuCtxSetCurrent(l->ctx));
    CHECK(cuLaunchKernel_ptsz(l->f, 1, 1, 1, 1, 1, 1, 0, NULL, l->params, NULL));
    wait_sem(&g_thread_sync);
    CHECK(cuStreamSynchronize_ptsz(NULL));
    printf("rzreal: the other thread synchronised its stream\n");
    return NULL;
}

static int mode_syncother(const char *how) {
    rzcu_context ctx = setup();
    sem_init(&g_half, 0, 0);
    sem_init(&g_go, 0, 0);
    sem_init(&g_thread_sync, 0, 0);
    rzcu_function f = kernel_fn("halfpast");
    rzcu_deviceptr p;
    CHECK(cuMemAlloc_v2(&p, 1000));
    size_t at = 1000, n = 8;
    void *params[] = {&p, &at, &n};
    rzcu_stream a = NULL, b;
    CHECK(cuStreamCreate(&b, RZCU_STREAM_NON_BLOCKING));
    pthread_t thread;
    memset(&thread, 0, sizeof thread);
    struct halfpast_launch l = {ctx, f, params};
    int destroyed = strcmp(how, "destroyed") == 0;
    if (strcmp(how, "nonblocking") == 0 || strcmp(how, "event") == 0 || destroyed) {
        CHECK(cuStreamCreate(&a, RZCU_STREAM_NON_BLOCKING));
        CHECK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, a, params, NULL));
    } else if (strcmp(how, "legacy") == 0) {
        CHECK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL));
    } else if (strcmp(how, "perthread") == 0) {
        CHECK(cuLaunchKernel_ptsz(f, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL));
    } else if (strcmp(how, "thread") == 0) {
        if (pthread_create(&thread, NULL, halfpast_thread, &l) != 0)
            return 100;
    } else {
        fprintf(stderr, "rzreal: syncother %s?\n", how);
        return 2;
    }
    wait_sem(&g_half);
    printf("rzreal: half of the overrun written, the kernel still running\n");
    if (destroyed)
        CHECK(cuStreamDestroy_v2(a)); /* its work still completes */
    if (strcmp(how, "event") == 0) {
        rzcu_event e;
        CHECK(cuEventCreate(&e, 0));
        CHECK(cuEventRecord(e, b));
        CHECK(cuEventSynchronize(e));
        CHECK(cuEventDestroy_v2(e));
    } else {
        CHECK(cuStreamSynchronize(b));
    }
    printf("rzreal: another stream synchronised\n");
    sem_post(&g_go);
    if (strcmp(how, "thread") == 0) {
        sem_post(&g_thread_sync);
        pthread_join(thread, NULL);
    } else if (strcmp(how, "perthread") == 0) {
        CHECK(cuStreamSynchronize_ptsz(NULL));
    } else if (destroyed) {
        CHECK(cuCtxSynchronize());
    } else {
        CHECK(cuStreamSynchronize(a)); /* NULL: the legacy stream */
    }
    printf("rzreal: the kernel's stream synchronised\n");
    CHECK(cuMemFree_v2(p));
    return 0;
}

static int mode_inflight(const char *how) {
    setup();
    rzcu_function f = past_fn();
    rzcu_deviceptr p;
    CHECK(cuMemAlloc_v2(&p, 1000));
    size_t at = 1000, n = 8;
    void *params[] = {&p, &at, &n};
    rzcu_stream s = NULL;
    if (strcmp(how, "blocking") == 0)
        CHECK(cuStreamCreate(&s, 0));
    else if (strcmp(how, "nonblocking") == 0)
        CHECK(cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING));
    if (strcmp(how, "perthread") == 0)
        CHECK(cuLaunchKernel_ptsz(f, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL));
    else
        CHECK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, params, NULL));
    if (strcmp(how, "exit") == 0) {
        printf("rzreal: exiting with the kernel queued\n");
        return 0; /* the exit scan must wait for it */
    }
    CHECK(cuMemFree_v2(p)); /* no synchronisation before: the driver's free waits for the device */
    printf("rzreal: freed with the kernel in flight\n");
    return 0;
}

static int mode_managed(const char *how) {
    setup();
    rzcu_deviceptr p;
    CHECK(cuMemAllocManaged(&p, 1000, RZCU_MEM_ATTACH_GLOBAL));
    ((volatile unsigned char *)(uintptr_t)p)[1000] = 0x5a; /* the host writes past the end */
    if (strcmp(how, "sync") == 0)
        CHECK(cuCtxSynchronize());
    CHECK(cuMemFree_v2(p));
    printf("rzreal: managed memory freed\n");
    return 0;
}

static rzcu_context begin_context(const char *how) {
    rzcu_context ctx;
    if (strcmp(how, "destroy") == 0)
        CHECK(cuCtxCreate_v4(&ctx, NULL, 0, 0));
    else {
        CHECK(cuDevicePrimaryCtxRetain(&ctx, 0));
        CHECK(cuCtxSetCurrent(ctx));
    }
    return ctx;
}

static int mode_ctxend(const char *how) {
    CHECK(cuInit(0));
    rzcu_context first = begin_context(how);
    rzcu_deviceptr live, a, b;
    CHECK(cuMemAlloc_v2(&live, 500));
    CHECK(device_fill(live + 500, 0x11, 1)); /* past the end, never freed: goes with the context */
    CHECK(cuMemAlloc_v2(&a, 1000));
    CHECK(cuMemsetD8_v2(a, 0, 1000)); /* the library now has a stream for this context */
    CHECK(cuMemFree_v2(a));
    if (strcmp(how, "destroy") == 0)
        CHECK(cuCtxDestroy_v2(first));
    else if (strcmp(how, "release") == 0)
        CHECK(cuDevicePrimaryCtxRelease_v2(0));
    else
        CHECK(cuDevicePrimaryCtxReset_v2(0));
    rzcu_context second = begin_context(how);
    printf("rzreal: same context handle again: %d\n", second == first);
    CHECK(cuMemAlloc_v2(&b, 1000));
    CHECK(device_fill(b + 1000, 0x5a, 8)); /* past the end */
    CHECK(cuMemFree_v2(b));
    return 0;
}

/* Not in the emulated driver: bound to libredzone's definition when it is preloaded, else NULL. */
extern rzcu_result cuMemcpy3DPeer(const void *desc) __attribute__((weak));

static int mode_missing(void) {
    setup();
    printf("rzreal: global dlsym of a missing entry point: %s\n",
           dlsym(RTLD_DEFAULT, "cuMemcpy3DPeer") ? "found" : "none");
    printf("rzreal: global dlsym of a present one: %s\n", dlsym(RTLD_DEFAULT, "cuMemsetD8_v2") ? "found" : "none");
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    printf("rzreal: driver dlsym of a missing entry point: %s\n",
           h && dlsym(h, "cuMemcpy3DPeer") ? "found" : "none");
    void *pfn = (void *)1;
    rzcu_proc_query_result status = 99;
    rzcu_result r = cuGetProcAddress_v2("cuMemcpy3DPeer", &pfn, 13000, 0, &status);
    printf("rzreal: cuGetProcAddress of a missing entry point: %u, pfn %s, status %u\n", r, pfn ? "set" : "NULL",
           status);
    if (cuMemcpy3DPeer)
        printf("rzreal: calling it anyway: %u\n", cuMemcpy3DPeer(NULL));
    return 0;
}

static int mode_guardrange(void) {
    setup();
    rzcu_deviceptr p, base = 0;
    size_t size = 0;
    CHECK(cuMemAlloc_v2(&p, 1000));
    rzcu_result r = cuMemGetAddressRange_v2(&base, &size, p + 10);
    printf("rzreal: range inside: %u base %s size %zu\n", r, base == p ? "p" : "other", size);
    r = cuMemGetAddressRange_v2(&base, &size, p + 1000);
    printf("rzreal: range past the end: %u\n", r);
    r = cuMemGetAddressRange_v2(&base, &size, p - 256);
    printf("rzreal: range before the start: %u\n", r);
    CHECK(cuMemFree_v2(p));
    return 0;
}

static int mode_poolfree(void) {
    setup();
    rzcu_function f = past_fn();
    rzcu_deviceptr pool, other;
    CHECK(cuMemAllocAsync(&pool, 1000, NULL));
    CHECK(cuMemAlloc_v2(&other, 1000));
    CHECK(cuMemsetD8_v2(pool, 0, 1000)); /* device work: the bands are written */
    CHECK(cuMemsetD8_v2(other, 0, 1000));
    CHECK(cuStreamSynchronize(NULL));
    rzcu_stream s;
    CHECK(cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING));
    size_t at = 0, n = 1;
    void *params[] = {&other, &at, &n};
    CHECK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, params, NULL));
    CHECK(cuMemFree_v2(pool));
    unsigned char first = 0;
    CHECK(cuMemcpyDtoHAsync_v2(&first, other, 1, NULL)); /* the legacy stream does not wait for s */
    printf("rzreal: the pool free waited for the kernel: %d\n", first == 0x5a);
    CHECK(cuCtxSynchronize());
    CHECK(cuMemFree_v2(other));
    return 0;
}

CUDA_EMU_KERNEL(lib_past, sizeof(rzcu_deviceptr), sizeof(size_t), sizeof(size_t)) {
    unsigned char *p = (unsigned char *)(uintptr_t)CUDA_EMU_PARAM(rzcu_deviceptr, 0);
    memset(p + CUDA_EMU_PARAM(size_t, 1), 0x5a, CUDA_EMU_PARAM(size_t, 2));
}

static int mode_library(void) {
    setup();
    rzcu_library lib;
    rzcu_kernel k;
    CHECK(cuLibraryLoadData(&lib, "emulated library", NULL, NULL, 0, NULL, NULL, 0));
    CHECK(cuLibraryGetKernel(&k, lib, "lib_past"));
    const char *name = NULL;
    printf("rzreal: cuFuncGetName of a CUkernel: %u\n", cuFuncGetName(&name, (rzcu_function)(void *)k));
    rzcu_deviceptr p, q;
    CHECK(cuMemAlloc_v2(&p, 1000));
    CHECK(cuMemAlloc_v2(&q, 1000));
    size_t at = 1000, n = 8;
    void *params[] = {&p, &at, &n};
    CHECK(cuLaunchKernel((rzcu_function)(void *)k, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL));
    CHECK(cuCtxSynchronize());
    CHECK(cuMemFree_v2(p));
    rzcu_function f;
    CHECK(cuKernelGetFunction(&f, k));
    void *params_q[] = {&q, &at, &n};
    CHECK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, params_q, NULL));
    CHECK(cuCtxSynchronize());
    CHECK(cuMemFree_v2(q));
    CHECK(cuLibraryUnload(lib));
    return 0;
}

static int mode_freeasync(void) {
    setup();
    rzcu_function f = past_fn();
    rzcu_stream s, other;
    CHECK(cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING));
    CHECK(cuStreamCreate(&other, RZCU_STREAM_NON_BLOCKING));
    rzcu_deviceptr p, flag;
    CHECK(cuMemAlloc_v2(&flag, 1));
    CHECK(cuMemsetD8_v2(flag, 0, 1));
    CHECK(cuMemAllocAsync(&p, 1000, s));
    size_t zero = 0, one = 1, at = 1000, n = 8;
    void *mark[] = {&flag, &zero, &one}, *past[] = {&p, &at, &n};
    CHECK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, mark, NULL));
    CHECK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, past, NULL));
    CHECK(cuMemFreeAsync(p, s));
    unsigned char seen = 0;
    CHECK(cuMemcpyDtoHAsync_v2(&seen, flag, 1, other)); /* another idle stream: runs at once */
    printf("rzreal: cuMemFreeAsync waited for its stream: %d\n", seen == 0x5a);
    CHECK(cuStreamSynchronize(s));
    printf("rzreal: stream synchronised\n");
    CHECK(cuMemFree_v2(flag));
    return 0;
}

static int mode_capture(const char *how) {
    setup();
    rzcu_function f = past_fn();
    rzcu_stream s;
    CHECK(cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING));
    rzcu_deviceptr p;
    CHECK(cuStreamBeginCapture_v2(s, 0));
    CHECK(cuMemAllocAsync(&p, 1000, s));
    size_t at = 0, n = strcmp(how, "past") == 0 ? 1008 : 1000;
    void *params[] = {&p, &at, &n};
    CHECK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, params, NULL));
    CHECK(cuMemFreeAsync(p, s));
    struct CUgraph_st *graph = NULL;
    printf("rzreal: end of capture: %u\n", cuStreamEndCapture(s, &graph));
    if (graph == NULL)
        return 0;
    struct CUgraphExec_st *exec;
    CHECK(cuGraphInstantiateWithFlags(&exec, graph, 0));
    CHECK(cuGraphLaunch(exec, s));
    CHECK(cuStreamSynchronize(s));
    printf("rzreal: graph launched once\n");
    CHECK(cuGraphLaunch(exec, s));
    CHECK(cuStreamSynchronize(s));
    printf("rzreal: graph launched twice\n");
    CHECK(cuGraphExecDestroy(exec));
    CHECK(cuGraphDestroy(graph));
    return 0;
}

/* Runs until the host sets *flag (a consumer waiting for its producer, as cuStreamWaitValue32 makes one). */
CUDA_EMU_KERNEL(wait_host, sizeof(rzcu_deviceptr)) {
    while (!__atomic_load_n((volatile int *)(uintptr_t)CUDA_EMU_PARAM(rzcu_deviceptr, 0), __ATOMIC_ACQUIRE)) {
    }
}

static int mode_asyncalloc(void) {
    setup();
    rzcu_function f = past_fn(), wait;
    rzcu_module mod;
    CHECK(cuModuleLoadData(&mod, "emulated module"));
    CHECK(cuModuleGetFunction(&wait, mod, "wait_host"));
    rzcu_stream s, other;
    CHECK(cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING));
    CHECK(cuStreamCreate(&other, RZCU_STREAM_NON_BLOCKING));
    int *flag;
    CHECK(cuMemAllocHost_v2((void **)&flag, sizeof *flag));
    *flag = 0;
    rzcu_deviceptr host_flag = (rzcu_deviceptr)(uintptr_t)flag, p;
    void *wait_params[] = {&host_flag};
    CHECK(cuLaunchKernel(wait, 1, 1, 1, 1, 1, 1, 0, s, wait_params, NULL));
    cuEmuResetCallCounts();
    CHECK(cuMemAllocAsync(&p, 1000, s));
    static const char *const waits[] = {"cuStreamSynchronize", "cuStreamSynchronize_ptsz", "cuCtxSynchronize",
                                        "cuCtxSynchronize_v2", "cuEventSynchronize"};
    unsigned long long n_waits = 0;
    for (size_t i = 0; i < sizeof waits / sizeof waits[0]; i++)
        n_waits += cuEmuCallCount(waits[i]);
    printf("rzreal: allocated behind a kernel waiting for the host; host waits: %llu\n", n_waits);
    CHECK(cuStreamSynchronize(other));
    printf("rzreal: another stream synchronised before the band's memset ran\n");
    __atomic_store_n(flag, 1, __ATOMIC_RELEASE);
    size_t at = 1000, n = 8;
    void *params[] = {&p, &at, &n};
    CHECK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, params, NULL));
    CHECK(cuStreamSynchronize(s));
    printf("rzreal: written past the end after the band landed\n");
    CHECK(cuMemFreeAsync(p, s));
    CHECK(cuStreamSynchronize(s));
    CHECK(cuMemFreeHost(flag));
    return 0;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IONBF, 0);
    const char *mode = argc > 1 ? argv[1] : "";
    if (strcmp(mode, "inflight") == 0 && argc > 2)
        return mode_inflight(argv[2]);
    if (strcmp(mode, "capture") == 0 && argc > 2)
        return mode_capture(argv[2]);
    if (strcmp(mode, "asyncalloc") == 0)
        return mode_asyncalloc();
    if (strcmp(mode, "freeasync") == 0)
        return mode_freeasync();
    if (strcmp(mode, "library") == 0)
        return mode_library();
    if (strcmp(mode, "poolfree") == 0)
        return mode_poolfree();
    if (strcmp(mode, "guardrange") == 0)
        return mode_guardrange();
    if (strcmp(mode, "missing") == 0)
        return mode_missing();
    if (strcmp(mode, "ctxend") == 0 && argc > 2)
        return mode_ctxend(argv[2]);
    if (strcmp(mode, "managed") == 0 && argc > 2)
        return mode_managed(argv[2]);
    if (strcmp(mode, "syncother") == 0 && argc > 2)
        return mode_syncother(argv[2]);
    fprintf(stderr, "usage: rzreal MODE ...\n");
    return 2;
}
