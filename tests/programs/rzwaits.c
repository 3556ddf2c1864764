/*
 * The patterns real CUDA programs have, counted by the emulated driver (driver calls and host waits, see
 * cuEmuHostWaits in cuda_emu.h), for tests/waits_check.py, which runs each mode bare and with libredzone.so
 * preloaded and compares. It knows nothing of redzone.
 *   rzwaits idle N        N times: alloc, free (no device work at all)
 *   rzwaits used N        N times: alloc, launch, launch, free, no synchronisation (the default stream)
 *   rzwaits synced N      N times: alloc, launch, cuCtxSynchronize, free
 *   rzwaits named N       N times: alloc, launch, launch, free, no synchronisation, the launches on one
 *                         non-blocking stream (created before the loop)
 *   rzwaits churn N       N buffers allocated and launched over, one cuCtxSynchronize, then all freed oldest
 *                         first: counts of the frees only
 *   rzwaits exit N        N allocations and exit, no device work: counts from after the allocations to the
 *                         end of the exit handlers (printed by the last one to run)
 *   rzwaits overrun HOW   a kernel writes one byte past a 1000-byte buffer's end, launched on the legacy stream,
 *                         the per-thread stream (cuLaunchKernel_ptsz) or a non-blocking stream (HOW: legacy,
 *                         ptsz, stream; streams: then an in-bounds one on a second non-blocking stream;
 *                         twoctx: a memset queued on a second context's non-blocking stream before), then
 *                         cuMemFree at once: run with CUDA_EMU_KERNEL_HOLD=1 the kernel runs
 *                         only once something waits for it, so a free-time read not ordered after it misses it
 *   rzwaits async N BYTES N times on one stream: cuMemAllocAsync of BYTES, launch, cuMemFreeAsync, with the
 *                         kernels held (CUDA_EMU_KERNEL_HOLD=1: nothing runs until someone waits), so every
 *                         free is queued behind all the work before it; counts of the loop, then one
 *                         cuStreamSynchronize
 *   rzwaits contexts N [HOW]  (HOW: symbols, the default; proc: the context calls fetched by cuGetProcAddress_v2;
 *                         dlsym: by dlsym on the driver's handle)
 *                         N allocations, each launched over, in two contexts (the primary and a created one),
 *                         switched every 8 allocations by cuCtxSetCurrent, and in every fourth run of 8 one
 *                         push and pop per allocation; prints the pointer-attribute queries and the
 *                         cuCtxGetCurrent calls of that loop; then a kernel writes one byte past the last
 *                         buffer of the created context, which is destroyed with its buffers, and one past the
 *                         primary's last, whose buffers are freed (printed: the created context's buffer count
 *                         and the two allocation numbers)
 * Each mode prints `rzwaits: MODE: calls=C waits=W` (W: host waits); idle, used, synced and named first print
 * `rzwaits: MODE-free: ...`, the counts of the cuMemFree calls alone, and `rzwaits: MODE-attrs: calls=N`, the
 * pointer-attribute queries of the whole loop.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_emu.h"

#define CHECK(call)                                                                                          \
    do {                                                                                                     \
        rzcu_result rc_ = (call);                                                                            \
        if (rc_ != 0) {                                                                                      \
            fprintf(stderr, "rzwaits:%d: %s failed: %u\n", __LINE__, #call, rc_);                            \
            exit(100);                                                                                       \
        }                                                                                                    \
    } while (0)

CUDA_EMU_KERNEL(touch, sizeof(rzcu_deviceptr), sizeof(unsigned long long)) {
    unsigned char *buf = (unsigned char *)(uintptr_t)CUDA_EMU_PARAM(rzcu_deviceptr, 0);
    unsigned long long n = CUDA_EMU_PARAM(unsigned long long, 1);
    for (unsigned long long i = 0; i < n; i++)
        buf[i]++;
}

static rzcu_function g_touch;
static const char *g_mode;

static void launch(rzcu_deviceptr p, unsigned long long n, rzcu_stream s) {
    void *params[] = {&p, &n};
    CHECK(cuLaunchKernel(g_touch, 1, 1, 1, 1, 1, 1, 0, s, params, NULL));
}

static void print_counts(void);

static void launch_fn(rzcu_function f, rzcu_deviceptr p, unsigned long long n) {
    void *params[] = {&p, &n};
    CHECK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL));
}

/* rzwaits contexts N [HOW] (see the top). */
static void contexts(long n, rzcu_context primary, const char *how) {
    rzcu_fn_cuCtxSetCurrent *set_current = cuCtxSetCurrent;
    rzcu_fn_cuCtxPushCurrent_v2 *push = cuCtxPushCurrent_v2;
    rzcu_fn_cuCtxPopCurrent_v2 *pop = cuCtxPopCurrent_v2;
    if (strcmp(how, "proc") == 0) { /* as the CUDA runtime fetches entry points */
        rzcu_proc_query_result q;
        CHECK(cuGetProcAddress_v2("cuCtxSetCurrent", (void **)&set_current, 12000, 0, &q));
        CHECK(cuGetProcAddress_v2("cuCtxPushCurrent", (void **)&push, 12000, 0, &q));
        CHECK(cuGetProcAddress_v2("cuCtxPopCurrent", (void **)&pop, 12000, 0, &q));
    } else if (strcmp(how, "dlsym") == 0) { /* on the driver's own handle */
        void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
        if (h == NULL)
            exit(100);
        set_current = (rzcu_fn_cuCtxSetCurrent *)dlsym(h, "cuCtxSetCurrent");
        push = (rzcu_fn_cuCtxPushCurrent_v2 *)dlsym(h, "cuCtxPushCurrent_v2");
        pop = (rzcu_fn_cuCtxPopCurrent_v2 *)dlsym(h, "cuCtxPopCurrent_v2");
        if (!set_current || !push || !pop)
            exit(100);
    }
    rzcu_context ctx2, popped;
    rzcu_module mod2;
    rzcu_function touch2;
    CHECK(cuCtxCreate_v4(&ctx2, NULL, 0, 0)); /* current now */
    CHECK(cuModuleLoadData(&mod2, "emulated module"));
    CHECK(cuModuleGetFunction(&touch2, mod2, "touch"));
    CHECK(cuCtxSetCurrent(primary));
    rzcu_deviceptr *b = calloc((size_t)n, sizeof *b);
    char *in2 = calloc((size_t)n, 1);
    long last[2] = {-1, -1};
    if (b == NULL || in2 == NULL)
        exit(100);
    cuEmuResetCallCounts();
    for (long i = 0; i < n; i++) {
        long phase = i / 8 % 4;
        if (i % 8 == 0 && phase == 1)
            CHECK(set_current(ctx2));
        if (i % 8 == 0 && phase == 2)
            CHECK(set_current(primary));
        if (phase == 3)
            CHECK(push(ctx2));
        int two = phase == 1 || phase == 3;
        CHECK(cuMemAlloc_v2(&b[i], 1000));
        in2[i] = (char)two;
        last[two] = i;
        launch_fn(two ? touch2 : g_touch, b[i], 1000);
        if (phase == 3)
            CHECK(pop(&popped));
    }
    printf("rzwaits: contexts-attrs: calls=%llu waits=0\n",
           cuEmuCallCount("cuPointerGetAttribute") + cuEmuCallCount("cuPointerGetAttributes"));
    printf("rzwaits: contexts-current: calls=%llu waits=0\n", cuEmuCallCount("cuCtxGetCurrent"));
    print_counts();
    if (last[0] < 0 || last[1] < 0)
        exit(100);
    long count2 = 0;
    for (long i = 0; i < n; i++)
        count2 += in2[i];
    printf("rzwaits: contexts: %ld buffers in the created context; overruns past allocations %ld and %ld\n", count2,
           last[1], last[0]);
    fflush(stdout);
    CHECK(cuCtxSetCurrent(ctx2));
    launch_fn(touch2, b[last[1]] + 1000, 1);
    CHECK(cuCtxDestroy_v2(ctx2)); /* its buffers go with it */
    CHECK(cuCtxSetCurrent(primary));
    launch_fn(g_touch, b[last[0]] + 1000, 1);
    for (long i = 0; i < n; i++)
        if (!in2[i])
            CHECK(cuMemFree_v2(b[i]));
    free(b);
    free(in2);
}

static void print_counts(void) {
    printf("rzwaits: %s: calls=%llu waits=%llu\n", g_mode, cuEmuCallCountAll(), cuEmuHostWaits(NULL));
    fflush(stdout);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: rzwaits idle|used|synced|named|churn|exit|contexts|async N [BYTES]\n");
        return 2;
    }
    g_mode = argv[1];
    long n = atol(argv[2]);
    if (strcmp(g_mode, "exit") == 0)
        atexit(print_counts); /* before any CUDA call: runs after every handler registered later */
    rzcu_context ctx;
    rzcu_module mod;
    CHECK(cuInit(0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, 0));
    CHECK(cuCtxSetCurrent(ctx));
    CHECK(cuModuleLoadData(&mod, "emulated module"));
    CHECK(cuModuleGetFunction(&g_touch, mod, "touch"));
    rzcu_deviceptr p;
    if (strcmp(g_mode, "idle") == 0 || strcmp(g_mode, "used") == 0 || strcmp(g_mode, "synced") == 0 ||
        strcmp(g_mode, "named") == 0) {
        unsigned long long free_calls = 0, free_waits = 0;
        rzcu_stream s = NULL;
        if (g_mode[0] == 'n')
            CHECK(cuStreamCreate(&s, 1 /* non-blocking */));
        cuEmuResetCallCounts();
        for (long i = 0; i < n; i++) {
            CHECK(cuMemAlloc_v2(&p, 1000));
            if (g_mode[0] != 'i')
                launch(p, 1000, s);
            if (g_mode[0] == 'u' || g_mode[0] == 'n')
                launch(p, 1000, s);
            if (g_mode[0] == 's')
                CHECK(cuCtxSynchronize());
            unsigned long long c0 = cuEmuCallCountAll(), w0 = cuEmuHostWaits(NULL);
            CHECK(cuMemFree_v2(p));
            free_calls += cuEmuCallCountAll() - c0;
            free_waits += cuEmuHostWaits(NULL) - w0;
        }
        printf("rzwaits: %s-free: calls=%llu waits=%llu\n", g_mode, free_calls, free_waits);
        printf("rzwaits: %s-attrs: calls=%llu waits=0\n", g_mode,
               cuEmuCallCount("cuPointerGetAttribute") + cuEmuCallCount("cuPointerGetAttributes"));
        print_counts();
    } else if (strcmp(g_mode, "contexts") == 0) {
        contexts(n, ctx, argc > 3 ? argv[3] : "symbols");
    } else if (strcmp(g_mode, "churn") == 0) {
        rzcu_deviceptr *b = calloc((size_t)n, sizeof *b);
        for (long i = 0; i < n; i++) {
            CHECK(cuMemAlloc_v2(&b[i], 1000));
            launch(b[i], 1000, NULL);
        }
        CHECK(cuCtxSynchronize());
        cuEmuResetCallCounts();
        for (long i = 0; i < n; i++)
            CHECK(cuMemFree_v2(b[i]));
        print_counts();
        free(b);
    } else if (strcmp(g_mode, "exit") == 0) {
        for (long i = 0; i < n; i++)
            CHECK(cuMemAlloc_v2(&p, 1000));
        cuEmuResetCallCounts();
        return 0; /* print_counts runs last */
    } else if (strcmp(g_mode, "overrun") == 0) {
        const char *how = argv[2];
        rzcu_stream s = NULL;
        rzcu_stream other = NULL;
        if (strcmp(how, "twoctx") == 0) {
            /* Work queued on a non-blocking stream of a second context, still held at the free. */
            rzcu_context ctx2;
            rzcu_stream s2;
            rzcu_deviceptr q;
            CHECK(cuCtxCreate_v4(&ctx2, NULL, 0, 0)); /* current now */
            CHECK(cuStreamCreate(&s2, 1 /* non-blocking */));
            CHECK(cuMemAlloc_v2(&q, 1000));
            CHECK(cuMemsetD8Async(q, 0, 1000, s2));
            CHECK(cuCtxSetCurrent(ctx));
        }
        if (strcmp(how, "stream") == 0 || strcmp(how, "streams") == 0 || strcmp(how, "twoctx") == 0)
            CHECK(cuStreamCreate(&s, 1 /* non-blocking */));
        if (strcmp(how, "streams") == 0)
            CHECK(cuStreamCreate(&other, 1 /* non-blocking */));
        CHECK(cuMemAlloc_v2(&p, 1000));
        rzcu_deviceptr end = p + 1000;
        unsigned long long one = 1;
        void *params[] = {&end, &one};
        if (strcmp(how, "ptsz") == 0)
            CHECK(cuLaunchKernel_ptsz(g_touch, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL));
        else
            CHECK(cuLaunchKernel(g_touch, 1, 1, 1, 1, 1, 1, 0, s, params, NULL));
        if (other != NULL)
            launch(p, 1000, other); /* in bounds, on a second non-blocking stream */
        CHECK(cuMemFree_v2(p));
        print_counts();
    } else if (strcmp(g_mode, "async") == 0 && argc > 3) {
        size_t bytes = (size_t)atol(argv[3]);
        rzcu_stream s;
        CHECK(cuStreamCreate(&s, 1 /* non-blocking */));
        cuEmuResetCallCounts();
        for (long i = 0; i < n; i++) {
            CHECK(cuMemAllocAsync(&p, bytes, s));
            launch(p, bytes, s);
            CHECK(cuMemFreeAsync(p, s));
        }
        print_counts();
        CHECK(cuStreamSynchronize(s));
    } else {
        fprintf(stderr, "rzwaits: unknown mode %s\n", g_mode);
        return 2;
    }
    return 0;
}
