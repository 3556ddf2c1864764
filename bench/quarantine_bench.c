/*
 * The quarantine's scan cost (issue 32): N plain allocations of SIZE bytes are freed, so the quarantine holds
 * them (METRALE_REDZONE_QUARANTINE bounds it), and full scans run: prints held bytes and the median wall time
 * of a scan in milliseconds over 9 scans, against the same scan with nothing held. Linked in-process (the
 * library's internals, as scan_bench is) on the emulated driver.
 *   quarantine_bench N SIZE
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "cuda_emu.h"
#include "common.h"
#include "alloc.h"
#include "api.h"
#include "quarantine.h"

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median_scan(void) {
    double t[9];
    for (int i = 0; i < 9; i++) {
        double t0 = now_ms();
        rz_scan();
        t[i] = now_ms() - t0;
    }
    qsort(t, 9, sizeof t[0], cmp);
    return t[4];
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 64, size = argc > 2 ? atol(argv[2]) : 1 << 20;
    setenv("METRALE_REDZONE", "64", 0);
    setenv("METRALE_REDZONE_LOG", "/dev/null", 0);
    rzcu_context ctx;
    if (cuInit(0) || cuDevicePrimaryCtxRetain(&ctx, 0) || cuCtxSetCurrent(ctx))
        return 1;
    rz_alloc_req_t req = {.kind = RZ_ALLOC_PLAIN, .interposed = 1};
    rz_free_req_t fr = {.async = 0};
    rz_devptr_t keep;
    if (rz__alloc(&keep, 64, &req) || cuMemsetD8_v2(keep, 0, 64))
        return 1;
    double empty = median_scan();
    for (long i = 0; i < n; i++) {
        rz_devptr_t p;
        if (rz__alloc(&p, (size_t)size, &req) || cuMemsetD8_v2(p, 0, (size_t)size) || rz__free(p, &fr))
            return 1;
    }
    cuCtxSynchronize();
    rz_stats_t s;
    rz_stats_get(&s);
    double full = median_scan();
    printf("quarantine_bench: %llu bytes held in %llu blocks; scan %.3f ms, %.3f ms with nothing held\n",
           (unsigned long long)s.quarantine_bytes, (unsigned long long)__redzone_quarantine.count, full, empty);
    return 0;
}
