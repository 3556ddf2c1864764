/*
 * A CUDA driver-API program for the failure modes of issue 7, run by test_reliability.c and
 * test_nothing_lost.c with libredzone.so preloaded (or not) on the emulated driver. It knows nothing of
 * redzone except that, when the library is loaded, it may read its counters (rz_stats_get) and call
 * rz_scan/rz_poison through dlsym; the faults themselves come from the emulated driver (CUDA_EMU_FAIL in the
 * environment, or cuEmuInjectFailure at a chosen moment).
 *   rzfault allocs plain|pitch|managed|async   three allocations of one kind, results printed; each success
 *                                              overrun by one byte, then freed
 *   rzfault fill                               three allocations, their bytes written and read back, each
 *                                              overrun; then a fourth, also overrun; all freed
 *   rzfault scanfail                           two zones, a failing band read in the first synchronising
 *                                              scan, an overrun, a second synchronisation
 *   rzfault freefail [keep]                    a free the driver refuses, the counters before and after, a
 *                                              second free (none with keep)
 *   rzfault ctxgone [live]                     a zone in a created context that is destroyed before exit
 *                                              (live: and an overrun zone in the primary context, never
 *                                              freed)
 *   rzfault deinit pending|installed CODE      an allocation call before cuInit, then an overrun zone,
 *                                              exit(CODE) (run with CUDA_EMU_SHUTDOWN_AT_EXIT=1)
 *   rzfault every                              every interposed entry point with good and bad arguments,
 *                                              each result printed: the same with and without redzone
 *   rzfault poison                             program data, then rz_poison / rz_scan / rz_unpoison when
 *                                              the library is there; checksums of every allocation's bytes
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda_emu.h"
#include "device_store.h"
#include "redzone.h"

#define PROG "rzfault"
#include "prog.h"

/* Print a call's result as `<what> -> <code>`. */
#define SHOW(what, call) printf("%s -> %u\n", what, (unsigned)(call))

/* One byte past the end, as a kernel's store (device_store.h). */
static void overrun(rzcu_deviceptr p, size_t user) {
    rzcu_result r = device_fill(p + user, 0x11, 1);
    if (r != 0)
        printf("rzfault: overrun refused by the driver: %u\n", r);
}

/* The library's counters, when it is loaded (it exports rz_stats_get). */
static int stats(rz_stats_t *s) {
    int (*get)(rz_stats_t *) = (int (*)(rz_stats_t *))dlsym(RTLD_DEFAULT, "rz_stats_get");
    return get && get(s) == 0;
}

static void show_stats(const char *when) {
    rz_stats_t s;
    if (stats(&s))
        printf("stats %s: map_calls=%llu unmap_calls=%llu current_mapped_bytes=%llu live_zones=%llu\n", when,
               (unsigned long long)s.map_calls, (unsigned long long)s.unmap_calls,
               (unsigned long long)s.current_mapped_bytes, (unsigned long long)s.live_zones);
}

static uint64_t fnv(const void *p, size_t n) {
    const unsigned char *b = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* ---- allocation failures ------------------------------------------------------------------------------ */
static rzcu_result alloc_kind(const char *kind, rzcu_deviceptr *p, size_t *user, rzcu_stream s) {
    size_t pitch = 0;
    rzcu_result r;
    *user = 100;
    if (strcmp(kind, "pitch") == 0) {
        r = cuMemAllocPitch_v2(p, &pitch, 100, 2, 4);
        *user = pitch * 2;
    } else if (strcmp(kind, "managed") == 0) {
        r = cuMemAllocManaged(p, 100, RZCU_MEM_ATTACH_GLOBAL);
    } else if (strcmp(kind, "async") == 0) {
        r = cuMemAllocAsync(p, 100, s);
    } else {
        r = cuMemAlloc_v2(p, 100);
    }
    return r;
}

static int mode_allocs(const char *kind) {
    setup();
    rzcu_stream s;
    CHECK(cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING));
    rzcu_deviceptr p[3] = {0};
    size_t user[3];
    rzcu_result r[3];
    for (int i = 0; i < 3; i++) {
        r[i] = alloc_kind(kind, &p[i], &user[i], s);
        printf("alloc %s %d -> %u\n", kind, i, r[i]);
    }
    for (int i = 0; i < 3; i++)
        if (r[i] == 0)
            overrun(p[i], user[i]);
    for (int i = 0; i < 3; i++)
        if (r[i] == 0)
            CHECK(strcmp(kind, "async") == 0 ? cuMemFreeAsync(p[i], s) : cuMemFree_v2(p[i]));
    CHECK(cuStreamSynchronize(s));
    return 0;
}

/* ---- a band fill that fails ----------------------------------------------------------------------------- */
static int mode_fill(void) {
    setup();
    rzcu_deviceptr p[4];
    unsigned char in[100], out[100];
    for (int i = 0; i < 3; i++)
        CHECK(cuMemAlloc_v2(&p[i], 100));
    for (int i = 0; i < 3; i++) {
        memset(in, 0x30 + i, sizeof in);
        CHECK(cuMemcpyHtoD_v2(p[i], in, sizeof in));
        CHECK(cuMemcpyDtoH_v2(out, p[i], sizeof out));
        printf("fill: zone %d data %s\n", i, memcmp(in, out, sizeof in) == 0 ? "ok" : "WRONG");
    }
    for (int i = 0; i < 3; i++)
        overrun(p[i], 100);
    CHECK(cuMemAlloc_v2(&p[3], 100)); /* after the failure: bands work again */
    overrun(p[3], 100);
    for (int i = 0; i < 4; i++)
        CHECK(cuMemFree_v2(p[i]));
    return 0;
}

/* ---- a band read that fails in a scan ------------------------------------------------------------------ */
static int mode_scanfail(void) {
    setup();
    rzcu_deviceptr a, b;
    CHECK(cuMemAlloc_v2(&a, 100));
    CHECK(cuMemAlloc_v2(&b, 200));
    CHECK(cuMemsetD8_v2(a, 1, 100)); /* device work: both bands are written now */
    overrun(a, 100);
    /* The next batched copy is the scan's read of both bands, and the next async copy its copy-per-band
     * fallback: both fail (an error that is not sticky, so the next scan can read the bands again). */
    if (cuEmuInjectFailure("cuMemcpyBatchAsync_v2", 1, RZCUDA_ERROR_UNKNOWN) != 0 ||
        cuEmuInjectFailure("cuMemcpyDtoHAsync_v2", 1, RZCUDA_ERROR_UNKNOWN) != 0)
        return 101;
    fprintf(stderr, "rzfault: first sync\n");
    SHOW("first sync", cuCtxSynchronize());
    fprintf(stderr, "rzfault: second sync\n");
    SHOW("second sync", cuCtxSynchronize());
    CHECK(cuMemFree_v2(a));
    CHECK(cuMemFree_v2(b));
    return 0;
}

/* ---- a free the driver refuses ------------------------------------------------------------------------- */
static int mode_freefail(int keep) {
    setup();
    rzcu_deviceptr p;
    CHECK(cuMemAlloc_v2(&p, 100));
    show_stats("after alloc");
    if (cuEmuInjectFailure("cuMemFree_v2", 1, RZCUDA_ERROR_UNKNOWN) != 0)
        return 101;
    SHOW("free (refused)", cuMemFree_v2(p));
    show_stats("after refused free");
    CHECK(cuMemsetD8_v2(p, 7, 100)); /* still the program's memory */
    if (!keep) {
        SHOW("free again", cuMemFree_v2(p));
        show_stats("after second free");
    }
    return 0;
}

/* ---- the context goes before the exit scan --------------------------------------------------------------- */
static int mode_ctxgone(int with_live) {
    rzcu_context primary = setup(), created;
    rzcu_deviceptr live = 0, doomed;
    if (with_live)
        CHECK(cuMemAlloc_v2(&live, 100));
    CHECK(cuCtxCreate_v4(&created, NULL, 0, 0));
    CHECK(cuMemAlloc_v2(&doomed, 100));
    CHECK(cuMemsetD8_v2(doomed, 1, 100)); /* the bands are written */
    CHECK(cuCtxDestroy_v2(created));
    CHECK(cuCtxSetCurrent(primary));
    if (with_live)
        overrun(live, 100);
    printf("ctxgone: exiting with a zone of a destroyed context\n");
    return 0;
}

/* ---- the driver is gone before the exit scan ---------------------------------------------------------- */
static int mode_deinit(const char *bands, int code) {
    rzcu_deviceptr p;
    /* Before cuInit: refused, but the allocation call happened (a framework probing the device). */
    printf("deinit: alloc before cuInit -> %u\n", cuMemAlloc_v2(&p, 64));
    setup();
    CHECK(cuMemAlloc_v2(&p, 100));
    if (strcmp(bands, "installed") == 0)
        overrun(p, 100); /* device work: the band is written before it */
    printf("deinit: exiting with %d\n", code);
    exit(code);
}

/* ---- every interposed entry point, good and bad arguments ------------------------------------------------ */
CUDA_EMU_KERNEL(fill_kernel, sizeof(rzcu_deviceptr), sizeof(size_t)) {
    unsigned char *p = (unsigned char *)(uintptr_t)CUDA_EMU_PARAM(rzcu_deviceptr, 0);
    memset(p, 0x3c, CUDA_EMU_PARAM(size_t, 1));
}

static void host_fn(void *arg) { (*(int *)arg)++; }

static int mode_every(void) {
    setup();
    rzcu_stream s;
    CHECK(cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING));
    rzcu_mem_pool pool;
    CHECK(cuDeviceGetDefaultMemPool(&pool, 0));
    rzcu_deviceptr a, b, m, pa, q = 0, base = 0;
    size_t pitch = 0, size = 0;
    /* Allocations, good and bad. */
    SHOW("alloc 1000", cuMemAlloc_v2(&a, 1000));
    SHOW("alloc 4096", cuMemAlloc_v2(&b, 4096));
    SHOW("alloc managed 300", cuMemAllocManaged(&m, 300, RZCU_MEM_ATTACH_GLOBAL));
    SHOW("alloc pitch 100x3", cuMemAllocPitch_v2(&pa, &pitch, 100, 3, 4));
    printf("pitch %zu\n", pitch);
    SHOW("alloc 0 bytes", cuMemAlloc_v2(&q, 0));
    SHOW("alloc NULL out", cuMemAlloc_v2(NULL, 16));
    SHOW("alloc SIZE_MAX", cuMemAlloc_v2(&q, SIZE_MAX));
    SHOW("alloc SIZE_MAX-63 (size + pad overflows)", cuMemAlloc_v2(&q, SIZE_MAX - 63));
    SHOW("alloc SIZE_MAX-1000", cuMemAlloc_v2(&q, SIZE_MAX - 1000));
    SHOW("managed SIZE_MAX-8", cuMemAllocManaged(&q, SIZE_MAX - 8, RZCU_MEM_ATTACH_GLOBAL));
    SHOW("managed bad flags", cuMemAllocManaged(&q, 64, 77));
    SHOW("async SIZE_MAX-8", cuMemAllocAsync(&q, SIZE_MAX - 8, s));
    SHOW("pool SIZE_MAX-8", cuMemAllocFromPoolAsync(&q, SIZE_MAX - 8, pool, s));
    SHOW("pitch width*height overflows", cuMemAllocPitch_v2(&q, &pitch, SIZE_MAX / 2, 4, 4));
    SHOW("pitch pitch*height overflows", cuMemAllocPitch_v2(&q, &pitch, 1024, SIZE_MAX / 1024, 4));
    SHOW("pitch huge width", cuMemAllocPitch_v2(&q, &pitch, (size_t)1 << 40, 1, 4));
    SHOW("pitch bad element", cuMemAllocPitch_v2(&q, &pitch, 64, 4, 3));
    SHOW("pitch NULL pitch", cuMemAllocPitch_v2(&q, NULL, 64, 4, 4));
    /* Copies, memsets, launches: the program's own bytes. */
    unsigned char host[1000], back[4096] = {0};
    for (size_t i = 0; i < sizeof host; i++)
        host[i] = (unsigned char)(i * 7 + 1);
    SHOW("htod", cuMemcpyHtoD_v2(a, host, sizeof host));
    SHOW("htod async", cuMemcpyHtoDAsync_v2(b + 100, host, 500, s));
    SHOW("memset", cuMemsetD8_v2(b + 1000, 0x5a, 1000));
    SHOW("memset async", cuMemsetD8Async(m, 0x6b, 300, s));
    SHOW("dtod", cuMemcpyDtoD_v2(b + 2048, a, 1000));
    SHOW("dtod async", cuMemcpyDtoDAsync_v2(pa, a, 100, s));
    rzcu_module mod;
    rzcu_function fn;
    CHECK(cuModuleLoadData(&mod, "emulated module"));
    CHECK(cuModuleGetFunction(&fn, mod, "fill_kernel"));
    rzcu_deviceptr kp = b + 3500;
    size_t kn = 500;
    void *params[] = {&kp, &kn};
    SHOW("launch", cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, s, params, NULL));
    SHOW("launch bad grid", cuLaunchKernel(fn, 0, 1, 1, 1, 1, 1, 0, s, params, NULL));
    int ran = 0;
    SHOW("host fn", cuLaunchHostFunc(s, host_fn, &ran));
    SHOW("stream sync", cuStreamSynchronize(s));
    printf("host fn ran %d\n", ran);
    SHOW("ctx sync", cuCtxSynchronize());
    rzcu_event ev;
    CHECK(cuEventCreate(&ev, 0));
    SHOW("event record", cuEventRecord(ev, s));
    SHOW("event sync", cuEventSynchronize(ev));
    CHECK(cuEventDestroy_v2(ev));
    /* Bad copies and memsets: the driver's own answers. */
    /* Past the end (and past any band): refused with and without redzone, which reports them. */
    SHOW("htod far past the end", cuMemcpyHtoD_v2(a + 500, back, 4000));
    SHOW("memset far past the end", cuMemsetD8_v2(a + 999, 0, 200));
    SHOW("dtoh unknown", cuMemcpyDtoH_v2(back, 0x10, 8));
    SHOW("dtod NULL", cuMemcpyDtoD_v2(0, a, 8));
    SHOW("memset async legacy past the end", cuMemsetD8Async(a, 0, 5000, NULL));
    /* Address ranges: the program's view. */
    SHOW("range interior", cuMemGetAddressRange_v2(&base, &size, a + 10));
    printf("range base ok %d size %zu\n", base == a, size);
    SHOW("range one past the end", cuMemGetAddressRange_v2(&base, &size, a + 1000));
    SHOW("range unknown", cuMemGetAddressRange_v2(&base, &size, 0x10));
    SHOW("range NULL outs", cuMemGetAddressRange_v2(NULL, NULL, b));
    /* Data read back. */
    CHECK(cuMemcpyDtoH_v2(back, b, sizeof back));
    printf("checksum b %016llx\n", (unsigned long long)fnv(back, sizeof back));
    CHECK(cuMemcpyDtoH_v2(back, a, 1000));
    printf("checksum a %016llx\n", (unsigned long long)fnv(back, 1000));
    CHECK(cuMemcpyDtoH_v2(back, m, 300));
    printf("checksum m %016llx\n", (unsigned long long)fnv(back, 300));
    CHECK(cuMemcpyDtoH_v2(back, pa, 100));
    printf("checksum pa %016llx\n", (unsigned long long)fnv(back, 100));
    /* Frees of pointers the library does not know, then the real ones. */
    SHOW("free 0", cuMemFree_v2(0));
    SHOW("free small constant", cuMemFree_v2(0x10));
    SHOW("free interior", cuMemFree_v2(a + 16));
    SHOW("free host pointer", cuMemFree_v2((rzcu_deviceptr)(uintptr_t)host));
    SHOW("free async unknown", cuMemFreeAsync(0x20, s));
    SHOW("free a", cuMemFree_v2(a));
    SHOW("free a again", cuMemFree_v2(a));
    SHOW("range of freed", cuMemGetAddressRange_v2(&base, &size, a));
    SHOW("free async b", cuMemFreeAsync(b, s));
    SHOW("free m", cuMemFree_v2(m));
    SHOW("free pa", cuMemFree_v2(pa));
    SHOW("stream sync", cuStreamSynchronize(s));
    SHOW("free async b again", cuMemFreeAsync(b, s));
    return 0;
}

/* ---- poison and scan from the program, bytes checked around them ----------------------------------------- */
static int mode_poison(void) {
    setup();
    enum { N = 6 };
    rzcu_deviceptr p[N];
    size_t n[N];
    for (int i = 0; i < N; i++) {
        n[i] = 64 + 97 * (size_t)i;
        CHECK(cuMemAlloc_v2(&p[i], n[i]));
        unsigned char buf[1024];
        for (size_t j = 0; j < n[i]; j++)
            buf[j] = (unsigned char)(i * 31 + j);
        CHECK(cuMemcpyHtoD_v2(p[i], buf, n[i]));
    }
    /* Emulated device memory is host memory: the bytes can be summed without a driver call. */
    uint64_t before = 0;
    for (int i = 0; i < N; i++)
        before ^= fnv((const void *)(uintptr_t)p[i], n[i]) + (uint64_t)i;
    int (*poison)(uint64_t, uint64_t) = (int (*)(uint64_t, uint64_t))dlsym(RTLD_DEFAULT, "rz_poison");
    int (*unpoison)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "rz_unpoison");
    int (*scan)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "rz_scan");
    /* Printed only when something fails, so the output is the same with and without the library. */
    if (poison && unpoison && scan && (poison(2, 4) != 0 || scan() != 0 || unpoison() != 0 || scan() != 0))
        printf("poison: a library call failed\n");
    uint64_t after = 0;
    for (int i = 0; i < N; i++)
        after ^= fnv((const void *)(uintptr_t)p[i], n[i]) + (uint64_t)i;
    printf("poison: program bytes %s\n", before == after ? "unchanged" : "CHANGED");
    for (int i = 0; i < N; i += 2)
        CHECK(cuMemFree_v2(p[i]));
    return 0; /* the odd ones are left to the exit scan */
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IONBF, 0);
    const char *mode = argc > 1 ? argv[1] : "";
    if (strcmp(mode, "allocs") == 0 && argc > 2)
        return mode_allocs(argv[2]);
    if (strcmp(mode, "fill") == 0)
        return mode_fill();
    if (strcmp(mode, "scanfail") == 0)
        return mode_scanfail();
    if (strcmp(mode, "freefail") == 0)
        return mode_freefail(argc > 2 && strcmp(argv[2], "keep") == 0);
    if (strcmp(mode, "ctxgone") == 0)
        return mode_ctxgone(argc > 2 && strcmp(argv[2], "live") == 0);
    if (strcmp(mode, "deinit") == 0 && argc > 3)
        return mode_deinit(argv[2], atoi(argv[3]));
    if (strcmp(mode, "every") == 0)
        return mode_every();
    if (strcmp(mode, "poison") == 0)
        return mode_poison();
    fprintf(stderr, "rzfault: unknown mode '%s'\n", mode);
    return 2;
}
