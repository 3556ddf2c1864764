/*
 * The GPU run's scan benchmark (tests/gpu/run, step scan-100k): one full scan of N clean zones (default
 * 100,000 bands of 64 bytes) by each of the library's three ways of reading bands, in one process, so the
 * ratios come from the same zones on the same device: per-zone copies (one copy per band, the fallback for
 * drivers without batch copies), batched copies (cuMemcpyBatchAsync into pinned staging) and the check
 * kernel (bands compared on the device; only violated ones come back). This decides whether the check
 * kernel may stay on by default (METRALE_REDZONE_CHECK_KERNEL).
 *
 * Unlike bench/scan_bench it does not link the emulated driver: it opens whichever libcuda.so.1 the loader
 * finds, so it runs on a GPU as it does on the emulated driver (LD_LIBRARY_PATH=<build>/emu). Prints one
 * line per method: `scan_methods: <method> <zones> zones: median <ms> ms (min <ms>, <reps> scans)`.
 *
 *   scan_methods [ZONES]
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "common.h"
#include "band_io.h"
#include "check_kernel.h"

typedef int (*init_fn)(unsigned);
typedef int (*retain_fn)(void **, int);
typedef int (*set_fn)(void *);

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int time_scans(const char *method, long zones) {
    enum { REPS = 5 };
    double t[REPS];
    if (rz_scan() < 0) /* warm-up: staging buffers, the kernel's module */
        return 1;
    for (int r = 0; r < REPS; r++) {
        double t0 = now_ms();
        int rc = rz_scan();
        t[r] = now_ms() - t0;
        if (rc != 0) {
            fprintf(stderr, "scan_methods: %s scan returned %s (expected 0 violated)\n", method, rz_status_name(rc));
            return 1;
        }
    }
    qsort(t, REPS, sizeof t[0], cmp);
    printf("scan_methods: %s %ld zones: median %.3f ms (min %.3f, %d scans)\n", method, zones, t[REPS / 2], t[0],
           REPS);
    fflush(stdout);
    return 0;
}

int main(int argc, char **argv) {
    long zones = argc > 1 ? atol(argv[1]) : 100000;
    if (zones <= 0) {
        fprintf(stderr, "usage: scan_methods [ZONES > 0]\n");
        return 2;
    }
    setenv("METRALE_REDZONE", "64", 1);
    setenv("METRALE_REDZONE_AGENT", "0", 1);
    setenv("METRALE_REDZONE_SCAN", "none", 1);
    void *drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (drv == NULL) {
        fprintf(stderr, "scan_methods: %s\n", dlerror());
        return 1;
    }
    init_fn cu_init = (init_fn)dlsym(drv, "cuInit");
    retain_fn retain = (retain_fn)dlsym(drv, "cuDevicePrimaryCtxRetain");
    set_fn set_current = (set_fn)dlsym(drv, "cuCtxSetCurrent");
    void *ctx = NULL;
    if (!cu_init || !retain || !set_current || cu_init(0) || retain(&ctx, 0) || set_current(ctx)) {
        fprintf(stderr, "scan_methods: no CUDA device\n");
        return 1;
    }
    double t0 = now_ms();
    for (long i = 0; i < zones; i++) {
        rz_devptr_t p;
        if (rz_mem_alloc(&p, 64) != 0) {
            fprintf(stderr, "scan_methods: allocation %ld failed\n", i);
            return 1;
        }
    }
    printf("scan_methods: %ld allocations in %.1f ms; check kernel built in: %s\n", zones, now_ms() - t0,
           rz__check_kernel_built() ? "yes" : "no (no nvcc at build time)");
    int failed = 0;
    rz__check_kernel_enable(0);
    rz__dev_set_per_band(1);
    failed |= time_scans("per-zone-copies", zones);
    rz__dev_set_per_band(0);
    failed |= time_scans("batched-copies", zones);
    rz__check_kernel_enable(1);
    failed |= time_scans("check-kernel", zones);
    return failed;
}
