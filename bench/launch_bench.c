/*
 * An unmodified driver-API program for bench/run's launch rows: ZONES live 64-byte allocations, then
 * LAUNCHES launches of a kernel that does nothing, on one stream, then one synchronisation. Run bare, and
 * with libredzone.so preloaded under a scan policy: it prints the host time of a launch call (median of 5
 * rounds), the time per launch including the final synchronisation (the checks' copies and judging run
 * behind the launches), and the driver calls per launch besides the launch itself, counted by the emulated
 * driver (what the library adds), with the synchronisations among them. With `churn`, each launch is
 * between an allocation of one more 64-byte buffer and its free (the program that allocates and frees
 * between launches: issue 29 item 5).
 *   launch_bench ZONES LAUNCHES [churn]
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda_emu.h"

CUDA_EMU_KERNEL_NO_PARAMS(nothing) {}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    long zones = argc > 1 ? atol(argv[1]) : 1000, launches = argc > 2 ? atol(argv[2]) : 1000;
    int churn = argc > 3 && strcmp(argv[3], "churn") == 0;
    rzcu_context ctx;
    rzcu_module mod;
    rzcu_function f;
    rzcu_stream s;
    if (cuInit(0) || cuDevicePrimaryCtxRetain(&ctx, 0) || cuCtxSetCurrent(ctx) ||
        cuModuleLoadData(&mod, "emulated module") || cuModuleGetFunction(&f, mod, "nothing") ||
        cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING))
        return 1;
    rzcu_deviceptr p;
    for (long i = 0; i < zones; i++)
        if (cuMemAlloc_v2(&p, 64))
            return 1;
    for (int i = 0; i < 100; i++) /* warm-up: bands installed, staging made */
        if (cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL))
            return 1;
    if (cuStreamSynchronize(s))
        return 1;
    double call_us[5], total_us[5];
    unsigned long long calls = 0, syncs = 0;
    for (int round = 0; round < 5; round++) {
        cuEmuResetCallCounts();
        double t0 = now(), in_calls = 0;
        for (long i = 0; i < launches; i++) {
            rzcu_deviceptr b = 0;
            if (churn && cuMemAlloc_v2(&b, 64))
                return 1;
            double t = now();
            if (cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL))
                return 1;
            in_calls += now() - t;
            if (churn && cuMemFree_v2(b))
                return 1;
        }
        unsigned long long before_sync = cuEmuCallCountAll();
        if (cuStreamSynchronize(s))
            return 1;
        total_us[round] = (now() - t0) * 1e6 / (double)launches;
        call_us[round] = in_calls * 1e6 / (double)launches;
        calls = before_sync - (unsigned long long)launches;
        syncs = cuEmuCallCount("cuStreamSynchronize") + cuEmuCallCount("cuCtxSynchronize") +
                cuEmuCallCount("cuEventSynchronize") - 1;
    }
    qsort(call_us, 5, sizeof call_us[0], cmp);
    qsort(total_us, 5, sizeof total_us[0], cmp);
    printf("launch_bench zones=%ld launches=%ld%s call_us=%.3f total_us=%.3f calls_per_launch=%.2f syncs=%llu\n", zones,
           launches, churn ? " churn" : "", call_us[2], total_us[2], (double)calls / (double)launches, syncs);
    return 0;
}
