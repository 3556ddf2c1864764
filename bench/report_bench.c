/*
 * Reporting many violations (issue 20.6): an unmodified driver-API program, run with libredzone preloaded,
 * allocates ZONES buffers through a chain of four functions (so METRALE_REDZONE_STACKS=4 keeps four frames
 * of the program's own), writes one byte past the end of each (a host store: the emulated device's memory is
 * host memory), then asks for one scan (rz_scan, found with
 * dlsym). It prints the scan's time (every zone reported, its stack symbolized) and the longest time a
 * second thread, allocating and freeing all along, waited for one allocation+free pair: how long the scan
 * kept the registry lock from the rest of the program.
 *   report_bench ZONES     (prints "REPORT_MS HOLD_MS CPU_MS": CPU_MS is the scanning thread's CPU time)
 * bench/run runs it with METRALE_REDZONE_STACKS=4 and =0 (the same reports without stacks: the ideal).
 */
#define _GNU_SOURCE /* RTLD_DEFAULT, clock_gettime under -std=c11 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "cuda_emu.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static rzcu_context g_ctx;
static atomic_int g_stop;
static double g_scan_start, g_scan_end; /* written by main before g_stop, read after join */
enum { MAX_PAIRS = 1 << 20 };
static double g_pair[MAX_PAIRS][2]; /* each pair's start and end */
static size_t g_npairs;

static void *probe(void *arg) {
    (void)arg;
    cuCtxSetCurrent(g_ctx);
    while (!atomic_load(&g_stop) && g_npairs < MAX_PAIRS) {
        double t0 = now();
        rzcu_deviceptr p;
        if (cuMemAlloc_v2(&p, 64) || cuMemFree_v2(p))
            exit(1);
        g_pair[g_npairs][0] = t0;
        g_pair[g_npairs++][1] = now();
    }
    return NULL;
}

/* The longest pair that overlapped the scan (scheduling noise included: the machine may be loaded). */
static double worst_wait(void) {
    double worst = 0;
    for (size_t i = 0; i < g_npairs; i++)
        if (g_pair[i][1] > g_scan_start && g_pair[i][0] < g_scan_end && g_pair[i][1] - g_pair[i][0] > worst)
            worst = g_pair[i][1] - g_pair[i][0];
    return worst;
}

/* Four frames of the program's own above the allocation (noinline: each keeps its frame). */
__attribute__((noinline)) static rzcu_deviceptr alloc_d(void) {
    rzcu_deviceptr p = 0;
    if (cuMemAlloc_v2(&p, 64))
        exit(1);
    __asm__ volatile("" ::: "memory");
    return p;
}
__attribute__((noinline)) static rzcu_deviceptr alloc_c(void) {
    rzcu_deviceptr p = alloc_d();
    __asm__ volatile("" ::: "memory");
    return p;
}
__attribute__((noinline)) static rzcu_deviceptr alloc_b(void) {
    rzcu_deviceptr p = alloc_c();
    __asm__ volatile("" ::: "memory");
    return p;
}
__attribute__((noinline)) static rzcu_deviceptr alloc_a(void) {
    rzcu_deviceptr p = alloc_b();
    __asm__ volatile("" ::: "memory");
    return p;
}

int main(int argc, char **argv) {
    long zones = argc > 1 ? atol(argv[1]) : 2000;
    int (*scan)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "rz_scan");
    if (scan == NULL || cuInit(0) || cuDevicePrimaryCtxRetain(&g_ctx, 0) || cuCtxSetCurrent(g_ctx)) {
        fprintf(stderr, "report_bench: run with libredzone preloaded, on the emulated device\n");
        return 1;
    }
    for (long i = 0; i < zones; i++) {
        rzcu_deviceptr p = alloc_a();
        /* Device work (the band is written before it), then one byte past the end: the emulated device's
         * memory is host memory, so a store stands in for a kernel's. */
        if (cuMemsetD8_v2(p, 0, 64))
            return 1;
        *(volatile unsigned char *)(uintptr_t)(p + 64) = 0x5a;
    }
    pthread_t t;
    pthread_create(&t, NULL, probe, NULL);
    struct timespec ms = {.tv_nsec = 2000000};
    nanosleep(&ms, NULL); /* let the probe run */
    struct timespec c0, c1;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
    g_scan_start = now();
    int violated = scan();
    g_scan_end = now();
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
    nanosleep(&ms, NULL); /* a pair held up by the scan ends after it */
    atomic_store(&g_stop, 1);
    pthread_join(t, NULL);
    double took = g_scan_end - g_scan_start;
    if (violated != zones) {
        fprintf(stderr, "report_bench: the scan found %d violated zones, not %ld\n", violated, zones);
        return 1;
    }
    double cpu = (double)(c1.tv_sec - c0.tv_sec) + (double)(c1.tv_nsec - c0.tv_nsec) / 1e9;
    printf("%.3f %.3f %.3f\n", took * 1e3, worst_wait() * 1e3, cpu * 1e3);
    return 0;
}
