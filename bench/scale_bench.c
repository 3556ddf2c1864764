/*
 * Performance at scale (issue 20) on the emulated device: each row compares the library with the ideal in
 * the same run (the same zones in one context, or the driver calls a bare program makes, or the driver alone:
 * the library's own calls through rz__drv, which no hook sees).
 *   scale_bench [--quick]
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda_emu.h"
#include "rz_internal.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median ms of `reps` full scans. */
static double scan_ms(int reps) {
    double t[9];
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        if (rz_scan() < 0) {
            fprintf(stderr, "scale_bench: scan failed\n");
            exit(1);
        }
        t[r] = (now() - t0) * 1e3;
    }
    qsort(t, (size_t)reps, sizeof t[0], cmp);
    return t[reps / 2];
}

/* `zones` zones spread over `nctx` new contexts in blocks (context by context); returns the contexts. */
static rzcu_context *populate(int nctx, long zones) {
    rzcu_context *c = calloc((size_t)nctx, sizeof *c);
    for (int i = 0; i < nctx; i++) {
        if (cuCtxCreate_v4(&c[i], NULL, 0, 0)) {
            fprintf(stderr, "scale_bench: context %d\n", i);
            exit(1);
        }
        for (long k = 0; k < zones / nctx; k++) {
            rz_devptr_t p;
            if (rz_mem_alloc(&p, 64)) {
                fprintf(stderr, "scale_bench: allocation failed\n");
                exit(1);
            }
        }
        rzcu_context popped;
        cuCtxPopCurrent_v2(&popped);
    }
    return c;
}

static void teardown(rzcu_context *c, int nctx) {
    for (int i = 0; i < nctx; i++) {
        rz__bands_context_ending(c[i]);
        cuCtxDestroy_v2(c[i]);
        rz__bands_context_ended(c[i]);
    }
    free(c);
}

/* Scan time with `zones` zones in `nctx` contexts against the same zones in one. */
static void spread_row(int nctx, long zones, int reps) {
    rzcu_context *one = populate(1, zones);
    rz_scan(); /* installs, sizes the staging */
    double ideal = scan_ms(reps);
    teardown(one, 1);
    rzcu_context *many = populate(nctx, zones);
    rz_scan();
    double ours = scan_ms(reps);
    teardown(many, nctx);
    char label[64];
    snprintf(label, sizeof label, "host ms, scan, %d ctx x %ldk", nctx, zones / nctx / 1000);
    printf("%-34s %9ld %12.2f %12.2f %8.2fx  <= 1.5x\n", label, zones, ours, ideal, ours / ideal);
}

/* Streams the library creates over `scans` scans of `nctx` live contexts (ideal: one per context), and the
 * ones it still holds after they end (ideal: 0). */
static void stream_row(int nctx, int scans) {
    size_t base = rz__dev_stream_count();
    cuEmuResetCallCounts();
    rzcu_context *c = populate(nctx, nctx);
    for (int s = 0; s < scans; s++)
        rz_scan();
    unsigned long long created = cuEmuCallCount("cuStreamCreate");
    teardown(c, nctx);
    char label[64];
    snprintf(label, sizeof label, "streams created, %d ctx, %d scans", nctx, scans);
    printf("%-34s %9d %12llu %12d %9s  <= contexts\n", label, nctx, created, nctx, "");
    printf("%-34s %9d %12zu %12d %9s  0\n", "streams held after contexts end", nctx, rz__dev_stream_count() - base, 0,
           "");
}

static unsigned long long all_calls(void) {
    static const char *const names[] = {
#define NAME(name, ret, params) #name,
        RZCU_ENTRY_POINTS(NAME)
#undef NAME
    };
    unsigned long long n = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        n += cuEmuCallCount(names[i]);
    return n;
}

/* Driver calls per churn step (free one zone, allocate another; no device work) beyond the step's own
 * cuMemFree and cuMemAlloc, with `live` zones, oldest first (FIFO), newest first (LIFO) or at random. */
static void churn_row(const char *order, int live, int steps) {
    rz_devptr_t *ring = calloc((size_t)live, sizeof *ring);
    rz_free_req_t fr = {0};
    for (int i = 0; i < live; i++)
        rz__alloc_interposed(&ring[i], 64);
    cuEmuResetCallCounts();
    unsigned seed = 12345;
    for (int step = 0; step < steps; step++) {
        int k = live - 1;
        if (order[0] == 'F')
            k = step % live;
        else if (order[0] == 'r') {
            seed = seed * 1103515245u + 12345u;
            k = (int)((seed >> 8) % (unsigned)live);
        }
        rz__free(ring[k], &fr);
        rz__alloc_interposed(&ring[k], 64);
    }
    double added = (double)(all_calls() - 2ull * (unsigned long long)steps) / steps;
    for (int i = 0; i < live; i++)
        rz__free(ring[i], &fr);
    free(ring);
    char label[64];
    snprintf(label, sizeof label, "driver calls/step, %s churn", order);
    printf("%-34s %9d %12.2f %12d %9s  0\n", label, live, added, 0, "");
}

/* METRALE_REDZONE_SCAN=sync with `zones` zones: what a synchronisation adds when no device work was queued
 * since the last scan (ideal: nothing). */
static void idle_sync_rows(long zones) {
    rzcu_context *c = populate(1, zones);
    cuCtxPushCurrent_v2(c[0]);
    rz_scan();
    enum { IDLE = 1000 };
    cuEmuResetCallCounts();
    double t0 = now();
    for (int i = 0; i < IDLE; i++)
        cuCtxSynchronize(); /* through the hook */
    double idle_us = (now() - t0) * 1e6 / IDLE;
    double idle_calls = (double)(all_calls() - IDLE) / IDLE; /* beyond the sync itself */
    t0 = now();
    for (int i = 0; i < IDLE; i++)
        rz__drv.cuCtxSynchronize();
    double bare_us = (now() - t0) * 1e6 / IDLE;
    rzcu_context popped;
    cuCtxPopCurrent_v2(&popped);
    teardown(c, 1);
    printf("%-34s %9ld %12.2f %12d %9s  0\n", "sync scan: driver calls, idle sync", zones, idle_calls, 0, "");
    printf("%-34s %9ld %12.3f %12.3f %8.1fx\n", "sync scan: host us, idle sync", zones, idle_us, bare_us,
           idle_us / bare_us);
}

/* A kernel that writes the first byte of its buffer. */
CUDA_EMU_KERNEL(bench_touch, sizeof(rzcu_deviceptr)) {
    *(volatile unsigned char *)(uintptr_t)CUDA_EMU_PARAM(rzcu_deviceptr, 0) = 1;
}

/* Median us of one kernel launch and cuStreamSynchronize of its stream, through the hooks (ours) or straight
 * to the driver (bare). */
static double launch_sync_us(rzcu_function f, rzcu_stream s, rz_devptr_t p, int ours) {
    void *params[] = {&p};
    enum { REPS = 200 };
    double t[5];
    for (int r = 0; r < 5; r++) {
        double t0 = now();
        for (int i = 0; i < REPS; i++) {
            if (ours) {
                cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, params, NULL);
                cuStreamSynchronize(s);
            } else {
                rz__drv.cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, params, NULL);
                rz__drv.cuStreamSynchronize(s);
            }
        }
        t[r] = (now() - t0) * 1e6 / REPS;
    }
    qsort(t, 5, sizeof t[0], cmp);
    return t[2];
}

/* Launch+sync with `zones` zones in the launching context (every sync scans them: the kernel may have
 * written any of them) or in another one (not scanned). */
static void launch_sync_rows(long zones) {
    rzcu_module mod;
    rzcu_function f;
    rzcu_stream s;
    rz_devptr_t p;
    for (int where = 0; where < 2; where++) {
        rzcu_context *c = populate(1, zones), other = NULL;
        if (where)
            cuCtxCreate_v4(&other, NULL, 0, 0); /* current now, with no zones */
        else
            cuCtxPushCurrent_v2(c[0]);
        if (cuModuleLoadData(&mod, "emulated module") || cuModuleGetFunction(&f, mod, "bench_touch") ||
            cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING) || rz__drv.cuMemAlloc_v2(&p, 64)) {
            fprintf(stderr, "scale_bench: no kernel\n");
            exit(1);
        }
        double ours = launch_sync_us(f, s, p, 1), bare = launch_sync_us(f, s, p, 0);
        rz__drv.cuMemFree_v2(p);
        cuStreamDestroy_v2(s);
        cuModuleUnload(mod);
        rzcu_context popped;
        cuCtxPopCurrent_v2(&popped);
        if (other)
            cuCtxDestroy_v2(other);
        teardown(c, 1);
        printf("%-34s %9ld %12.1f %12.1f %8.1fx\n",
               where ? "us, launch+sync, zones elsewhere" : "us, launch+sync, zones in its ctx", zones, ours, bare,
               ours / bare);
    }
}

/* Two threads each allocating a 64-byte buffer, writing it (cuMemsetD8) and freeing it: us per pair through
 * the hooks (a band written, checked at the free) against the driver alone. */
struct churn_arg {
    rzcu_context ctx;
    int ours, pairs;
};

static void *used_churn(void *arg) {
    struct churn_arg *a = arg;
    cuCtxSetCurrent(a->ctx);
    for (int i = 0; i < a->pairs; i++) {
        rz_devptr_t p;
        if (a->ours) {
            cuMemAlloc_v2(&p, 64);
            cuMemsetD8_v2(p, 0, 64);
            cuMemFree_v2(p);
        } else {
            rz__drv.cuMemAlloc_v2(&p, 64);
            rz__drv.cuMemsetD8_v2(p, 0, 64);
            rz__drv.cuMemFree_v2(p);
        }
    }
    return NULL;
}

static double two_thread_us(rzcu_context ctx, int ours, int pairs) {
    double t[3];
    for (int r = 0; r < 3; r++) {
        pthread_t th[2];
        struct churn_arg a = {ctx, ours, pairs};
        double t0 = now();
        for (int i = 0; i < 2; i++)
            pthread_create(&th[i], NULL, used_churn, &a);
        for (int i = 0; i < 2; i++)
            pthread_join(th[i], NULL);
        t[r] = (now() - t0) * 1e6 / pairs; /* per pair of each thread: wall time of the two together */
    }
    qsort(t, 3, sizeof t[0], cmp);
    return t[1];
}

static void free_rows(int pairs) {
    rzcu_context ctx;
    cuCtxGetCurrent(&ctx);
    double ours = two_thread_us(ctx, 1, pairs), bare = two_thread_us(ctx, 0, pairs);
    printf("%-34s %9d %12.2f %12.2f %8.1fx\n", "us/pair, 2 threads freeing used", 2, ours, bare, ours / bare);
}

int main(int argc, char **argv) {
    int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    setenv("METRALE_REDZONE", "64", 1);
    setenv("METRALE_REDZONE_LOG", "/dev/null", 1);
    setenv("METRALE_REDZONE_AGENT", "0", 1);
    setenv("METRALE_REDZONE_SCAN", "sync,free,exit", 1);
    rzcu_context ctx;
    if (cuInit(0) || cuDevicePrimaryCtxRetain(&ctx, 0) || cuCtxSetCurrent(ctx)) {
        fprintf(stderr, "scale_bench: no emulated device\n");
        return 1;
    }
    printf("%-34s %9s %12s %12s %9s  %s\n", "metric (scale)", "zones", "ours", "ideal", "ratio", "target");
    spread_row(2, 40000, 5);
    spread_row(50, 100000, quick ? 3 : 5);
    stream_row(200, quick ? 20 : 100);
    churn_row("LIFO", 2000, 4000);
    churn_row("FIFO", 2000, 4000);
    churn_row("random", 2000, 4000);
    idle_sync_rows(100000);
    launch_sync_rows(10000);
    free_rows(quick ? 2000 : 10000);
    return 0;
}
