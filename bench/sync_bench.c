/*
 * Costs at the interposed entry points, for bench/run: an unmodified driver-API program that bench/run runs
 * with libredzone preloaded and without (ours vs bare, one run each); it prints one number, microseconds.
 *   sync_bench launch ZONES same|other  a kernel launch and cuStreamSynchronize of its stream (median of 5
 *                                       rounds of 200), with ZONES live 64-byte buffers in the launching
 *                                       context or in another one
 *   sync_bench free2 PAIRS              two threads at once, each allocating a 64-byte buffer, writing it
 *                                       (cuMemsetD8) and freeing it PAIRS times: wall time per pair
 * Issue 29's patterns (run with CUDA_EMU_KERNEL_NS, so a host wait costs what the kernels take), each printing
 * two numbers: host microseconds per step and host waits per step (cuEmuHostWaits):
 *   sync_bench used N                   alloc, launch, launch, cuMemFree, no synchronisation (N times)
 *   sync_bench named N                  the same with the launches on a non-blocking stream
 *   sync_bench churn N                  N buffers launched over, one cuCtxSynchronize, then all freed oldest
 *                                       first: per free
 *   sync_bench async N                  cuMemAllocAsync, launch, cuMemFreeAsync on one stream, N times, the
 *                                       final cuStreamSynchronize not counted
 *   sync_bench exit N                   N allocations, then exit, no device work: microseconds from the end
 *                                       of main to the last exit handler
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda_emu.h"

#define CHECK(call)                                                                                          \
    do {                                                                                                     \
        if ((call) != 0) {                                                                                   \
            fprintf(stderr, "sync_bench:%d: %s failed\n", __LINE__, #call);                                  \
            exit(1);                                                                                         \
        }                                                                                                    \
    } while (0)

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Writes the first byte of its buffer. */
CUDA_EMU_KERNEL(sync_bench_touch, sizeof(rzcu_deviceptr)) {
    *(volatile unsigned char *)(uintptr_t)CUDA_EMU_PARAM(rzcu_deviceptr, 0) = 1;
}

static double launch(long zones, int same) {
    rzcu_context primary, other;
    CHECK(cuDevicePrimaryCtxRetain(&primary, 0));
    CHECK(cuCtxSetCurrent(primary));
    rzcu_deviceptr p;
    for (long i = 0; i < zones; i++)
        CHECK(cuMemAlloc_v2(&p, 64));
    if (!same)
        CHECK(cuCtxCreate_v4(&other, NULL, 0, 0)); /* current now, with no buffers */
    rzcu_module mod;
    rzcu_function f;
    rzcu_stream s;
    CHECK(cuModuleLoadData(&mod, "emulated module"));
    CHECK(cuModuleGetFunction(&f, mod, "sync_bench_touch"));
    CHECK(cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING));
    CHECK(cuMemAlloc_v2(&p, 64));
    void *params[] = {&p};
    enum { REPS = 200 };
    double t[5];
    for (int r = 0; r < 5; r++) {
        double t0 = now();
        for (int i = 0; i < REPS; i++) {
            CHECK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, params, NULL));
            CHECK(cuStreamSynchronize(s));
        }
        t[r] = (now() - t0) * 1e6 / REPS;
    }
    qsort(t, 5, sizeof t[0], cmp);
    return t[2];
}

struct churn {
    rzcu_context ctx;
    long pairs;
};

static void *used_buffers(void *arg) {
    const struct churn *c = arg;
    CHECK(cuCtxSetCurrent(c->ctx));
    for (long i = 0; i < c->pairs; i++) {
        rzcu_deviceptr p;
        CHECK(cuMemAlloc_v2(&p, 64));
        CHECK(cuMemsetD8_v2(p, 0, 64));
        CHECK(cuMemFree_v2(p));
    }
    return NULL;
}

static double free2(long pairs) {
    struct churn c = {NULL, pairs};
    CHECK(cuDevicePrimaryCtxRetain(&c.ctx, 0));
    double t[3];
    for (int r = 0; r < 3; r++) {
        pthread_t th[2];
        double t0 = now();
        for (int i = 0; i < 2; i++)
            CHECK(pthread_create(&th[i], NULL, used_buffers, &c));
        for (int i = 0; i < 2; i++)
            pthread_join(th[i], NULL);
        t[r] = (now() - t0) * 1e6 / pairs;
    }
    qsort(t, 3, sizeof t[0], cmp);
    return t[1];
}

static rzcu_function touch_kernel(void) {
    rzcu_context ctx;
    rzcu_module mod;
    rzcu_function f;
    CHECK(cuDevicePrimaryCtxRetain(&ctx, 0));
    CHECK(cuCtxSetCurrent(ctx));
    CHECK(cuModuleLoadData(&mod, "emulated module"));
    CHECK(cuModuleGetFunction(&f, mod, "sync_bench_touch"));
    return f;
}

static void pattern(const char *mode, long n) {
    rzcu_function f = touch_kernel();
    rzcu_deviceptr p, *b = calloc((size_t)n, sizeof *b);
    rzcu_stream s;
    void *params[] = {&p};
    CHECK(b == NULL);
    CHECK(cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING));
    if (strcmp(mode, "churn") == 0) {
        for (long i = 0; i < n; i++) {
            CHECK(cuMemAlloc_v2(&b[i], 64));
            void *pi[] = {&b[i]};
            CHECK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, pi, NULL));
        }
        CHECK(cuCtxSynchronize());
    }
    unsigned long long w0 = cuEmuHostWaits(NULL);
    double t0 = now();
    for (long i = 0; i < n; i++) {
        if (strcmp(mode, "used") == 0 || strcmp(mode, "named") == 0) {
            rzcu_stream on = mode[0] == 'n' ? s : NULL;
            CHECK(cuMemAlloc_v2(&p, 64));
            CHECK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, on, params, NULL));
            CHECK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, on, params, NULL));
            CHECK(cuMemFree_v2(p));
        } else if (strcmp(mode, "churn") == 0) {
            CHECK(cuMemFree_v2(b[i]));
        } else {
            CHECK(cuMemAllocAsync(&p, 64, s));
            CHECK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, params, NULL));
            CHECK(cuMemFreeAsync(p, s));
        }
    }
    double t = (now() - t0) * 1e6 / (double)n;
    unsigned long long w = cuEmuHostWaits(NULL) - w0;
    CHECK(cuStreamSynchronize(s));
    printf("%.2f %.3f\n", t, (double)w / (double)n);
    free(b);
}

static double g_main_end;

static void exit_time(void) { printf("%.2f\n", (now() - g_main_end) * 1e6); } /* the last exit handler */

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "exit") == 0)
        atexit(exit_time); /* before any CUDA call: runs after the handlers registered later */
    CHECK(cuInit(0));
    if (argc == 4 && strcmp(argv[1], "launch") == 0)
        printf("%.2f\n", launch(atol(argv[2]), strcmp(argv[3], "same") == 0));
    else if (argc == 3 && strcmp(argv[1], "free2") == 0)
        printf("%.2f\n", free2(atol(argv[2])));
    else if (argc == 3 && (strcmp(argv[1], "used") == 0 || strcmp(argv[1], "named") == 0 ||
                           strcmp(argv[1], "churn") == 0 || strcmp(argv[1], "async") == 0))
        pattern(argv[1], atol(argv[2]));
    else if (argc == 3 && strcmp(argv[1], "exit") == 0) {
        rzcu_context ctx;
        rzcu_deviceptr p;
        CHECK(cuDevicePrimaryCtxRetain(&ctx, 0));
        CHECK(cuCtxSetCurrent(ctx));
        for (long i = 0; i < atol(argv[2]); i++)
            CHECK(cuMemAlloc_v2(&p, 64));
        g_main_end = now();
    }
    else {
        fprintf(stderr, "usage: sync_bench launch ZONES same|other | free2 PAIRS | used|named|churn|async|exit N\n");
        return 2;
    }
    return 0;
}
