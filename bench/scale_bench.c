/*
 * Performance at scale (issue 20) on the emulated device: each row compares the library with the ideal in
 * the same run (the same zones in one context, or the driver calls a bare program makes).
 *   scale_bench [--quick]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda_emu.h"
#include "common.h"
#include "alloc.h"
#include "api.h"
#include "band.h"
#include "device_ctx.h"
#include "driver.h"
#include "sync_scan.h"

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
    double added = (double)(cuEmuCallCountAll() - 2ull * (unsigned long long)steps) / steps;
    for (int i = 0; i < live; i++)
        rz__free(ring[i], &fr);
    free(ring);
    char label[64];
    snprintf(label, sizeof label, "driver calls/step, %s churn", order);
    printf("%-34s %9d %12.2f %12d %9s  0\n", label, live, added, 0, "");
}

/* METRALE_REDZONE_SCAN=sync with `zones` zones: what the library adds to a synchronisation when no device work
 * was queued since the last scan (ideal: nothing), as the hooks call it after the driver's sync; and a sync
 * after work in the context (one scan of it). bench/sync_bench measures the hooks themselves. */
static void sync_rows(long zones) {
    rzcu_context *c = populate(1, zones);
    cuCtxPushCurrent_v2(c[0]);
    rz_scan();
    const rz_sync_t what = {.kind = RZ_SYNC_CTX};
    enum { IDLE = 1000 };
    cuEmuResetCallCounts();
    double t0 = now();
    for (int i = 0; i < IDLE; i++)
        rz__scan_after_sync(&what, rz__sync_ticket());
    double idle_us = (now() - t0) * 1e6 / IDLE;
    double idle_calls = (double)cuEmuCallCountAll() / IDLE;
    double t[5];
    for (int r = 0; r < 5; r++) {
        uint64_t ticket = rz__sync_ticket();
        rz__note_device_work(NULL, 0); /* what the hooks note for a memset on the legacy stream */
        double t1 = now();
        rz__scan_after_sync(&what, ticket + 1);
        t[r] = (now() - t1) * 1e3;
    }
    qsort(t, 5, sizeof t[0], cmp);
    rzcu_context popped;
    cuCtxPopCurrent_v2(&popped);
    teardown(c, 1);
    printf("%-34s %9ld %12.2f %12d %9s  0\n", "sync scan: driver calls, idle sync", zones, idle_calls, 0, "");
    printf("%-34s %9ld %12.3f %12s %9s\n", "sync scan: host us, idle sync", zones, idle_us, "-", "");
    printf("%-34s %9ld %12.2f %12s %9s\n", "sync scan: ms, sync after work", zones, t[2], "-", "");
}

/* Busy for 2 ms on its stream's worker: a long kernel the program queued before an allocation. */
CUDA_EMU_KERNEL_NO_PARAMS(busy_2ms) {
    double until = now() + 2e-3;
    while (now() < until) {
    }
}

static unsigned long long host_waits(void) {
    return cuEmuCallCount("cuStreamSynchronize") + cuEmuCallCount("cuStreamSynchronize_ptsz") +
           cuEmuCallCount("cuCtxSynchronize") + cuEmuCallCount("cuCtxSynchronize_v2") +
           cuEmuCallCount("cuEventSynchronize");
}

/* cuMemAllocAsync right after a 2 ms kernel on the same stream: host us of the call through the library (a band
 * fill queued in stream order, an event after it) against the driver's own call, and the host waits it made
 * (it used to synchronise the stream: the whole kernel). Median of `reps`. */
static void async_alloc_rows(int reps) {
    rzcu_module mod;
    rzcu_function busy;
    rzcu_stream s;
    if (cuModuleLoadData(&mod, "emulated module") || cuModuleGetFunction(&busy, mod, "busy_2ms") ||
        cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING)) {
        fprintf(stderr, "scale_bench: no busy kernel\n");
        exit(1);
    }
    double ours[15], bare[15];
    unsigned long long waits = 0;
    rz_alloc_req_t req = {.kind = RZ_ALLOC_ASYNC, .stream = s, .interposed = 1};
    rz_free_req_t fr = {.async = 1, .stream = s};
    for (int r = 0; r < reps; r++) {
        rz_devptr_t p;
        cuLaunchKernel(busy, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL);
        cuEmuResetCallCounts();
        double t0 = now();
        rz__alloc(&p, 1000, &req);
        ours[r] = (now() - t0) * 1e6;
        waits += host_waits();
        cuStreamSynchronize(s);
        rz__free(p, &fr);
        cuLaunchKernel(busy, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL);
        t0 = now();
        rz__drv.cuMemAllocAsync(&p, 1000, s);
        bare[r] = (now() - t0) * 1e6;
        cuStreamSynchronize(s);
        rz__drv.cuMemFreeAsync(p, s);
    }
    cuStreamSynchronize(s);
    qsort(ours, (size_t)reps, sizeof ours[0], cmp);
    qsort(bare, (size_t)reps, sizeof bare[0], cmp);
    printf("%-34s %9d %12.1f %12.1f %8.2fx  no host wait\n", "host us, cuMemAllocAsync (busy s)", 1,
           ours[reps / 2], bare[reps / 2], ours[reps / 2] / bare[reps / 2]);
    printf("%-34s %9d %12llu %12d %9s  0\n", "host waits in those calls", 1, waits, 0, "");
}

int main(int argc, char **argv) {
    int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    setenv("METRALE_REDZONE", "64", 1);
    setenv("METRALE_REDZONE_LOG", "/dev/null", 1);
    setenv("METRALE_REDZONE_AGENT", "0", 1);
    setenv("METRALE_REDZONE_SCAN", "sync,free,exit", 1); /* the sync rows (rz_scan ignores the list) */
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
    sync_rows(100000);
    async_alloc_rows(quick ? 5 : 15);
    return 0;
}
