/*
 * A CUDA driver-API program with one scenario per mode, run by test_preload.c with libredzone.so preloaded
 * (or not). It knows nothing of redzone: it is what the interposer must handle unmodified.
 *   rzprog paths direct|dlsym|procaddr  every wrapped allocation kind through one lookup path, each overrun by
 *                                       one byte, then freed (plain and stream-ordered frees)
 *   rzprog nofree                       overrun, never free
 *   rzprog sync                         overrun, then cuCtxSynchronize between two markers on stderr
 *   rzprog kernels                      kernels launched before and after the overrun, then synchronise
 *   rzprog fork                         overrun, fork a child that exits, then free
 *   rzprog multictx                     one overrun zone in each of two devices' contexts, never freed
 *   rzprog data                         deterministic work; prints checksums and result codes
 *   rzprog exit CODE OVERRUN            optionally overrun (1/0), free, exit with CODE
 *   rzprog three                        three allocations, each overrun
 *   rzprog guard free|slack|write|read  a guard-page allocation (run with METRALE_REDZONE_GUARD): freed and
 *                                       fully released, its slack band overrun, or a kernel writing or
 *                                       reading the first byte past its mapped end (faults)
 *   rzprog front                        writes before the start (run with METRALE_REDZONE_FRONT)
 *   rzprog crash segv|abort             overrun, then die of SIGSEGV (a null store) or abort()
 *   rzprog ctxgone                      allocate in a created context, destroy it before any device work
 *   rzprog lazy                         when bands are written: reads a band straight from emulated memory
 *                                       after allocating, after a memset, and counts the driver calls
 *   rzprog idlesync                     (METRALE_REDZONE_SCAN=sync) band driver calls of synchronisations
 *                                       with no device work since the last, around one overrun
 *   rzprog ctxsync                      (METRALE_REDZONE_SCAN=sync) 100 zones in each of two contexts, device
 *                                       work in both, a sync; then an idle sync, and work in one context
 *                                       followed by a sync: every driver call of each counted
 *   rzprog asyncbusy                    a stream-ordered allocation behind a kernel that waits for the host,
 *                                       then rzprog_stop(1) (a debugger stops there); the kernel released, the
 *                                       stream synchronised, one byte past the end written, rzprog_stop(2)
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cuda_emu.h"
#include "device_store.h"

#define CHECK(call)                                                                                          \
    do {                                                                                                     \
        rzcu_result rc_ = (call);                                                                            \
        if (rc_ != 0) {                                                                                      \
            fprintf(stderr, "rzprog:%d: %s failed: %u\n", __LINE__, #call, rc_);                             \
            exit(100);                                                                                       \
        }                                                                                                    \
    } while (0)

static rzcu_context setup(int dev) {
    rzcu_context ctx;
    CHECK(cuInit(0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cuCtxSetCurrent(ctx));
    return ctx;
}

/* One byte past the end, as a kernel's store (device_store.h). Without a band the driver refuses it (the byte
 * is outside the allocation): that is printed, not fatal. */
static void overrun(rzcu_deviceptr p, size_t user) {
    rzcu_result r = device_fill(p + user, 0x11, 1);
    if (r != 0)
        fprintf(stderr, "rzprog: overrun refused by the driver: %u\n", r);
}

/* ---- paths ---------------------------------------------------------------------------------------------- */
struct api {
    rzcu_fn_cuMemAlloc_v2 *alloc;
    rzcu_fn_cuMemAllocManaged *managed;
    rzcu_fn_cuMemAllocPitch_v2 *pitch;
    rzcu_fn_cuMemAllocAsync *async, *async_ptsz;
    rzcu_fn_cuMemAllocFromPoolAsync *pool, *pool_ptsz;
    rzcu_fn_cuMemFree_v2 *free;
    rzcu_fn_cuMemFreeAsync *free_async, *free_async_ptsz;
    rzcu_fn_cuMemGetAddressRange_v2 *range;
};

static void *must(void *p, const char *what) {
    if (p == NULL) {
        fprintf(stderr, "rzprog: no %s\n", what);
        exit(101);
    }
    return p;
}

/* The global definition of the exported name, and it lives in libredzone (the wrapper), not the driver. */
static const char *verdict(void *p, const char *exported) {
    Dl_info info;
    if (p != dlsym(RTLD_DEFAULT, exported))
        return "DIFFERENT from the global definition";
    if (!dladdr(p, &info) || info.dli_fname == NULL || strstr(info.dli_fname, "libredzone") == NULL)
        return "same as the global definition, outside libredzone";
    return "same as the global definition, in libredzone";
}

static void *by_proc(rzcu_fn_cuGetProcAddress_v2 *gpa, const char *base, int version, rzcu_uint64 flags,
                     const char *exported) {
    void *p = NULL;
    rzcu_proc_query_result st = 99;
    CHECK(gpa(base, &p, version, flags, &st));
    must(p, base);
    printf("procaddr %s v%d flags %llu: %s\n", base, version, (unsigned long long)flags, verdict(p, exported));
    return p;
}

static int mode_paths(const char *how) {
    struct api a;
    if (strcmp(how, "direct") == 0) {
        a = (struct api){cuMemAlloc_v2,         cuMemAllocManaged,       cuMemAllocPitch_v2,
                         cuMemAllocAsync,       cuMemAllocAsync_ptsz,    cuMemAllocFromPoolAsync,
                         cuMemAllocFromPoolAsync_ptsz, cuMemFree_v2,     cuMemFreeAsync,
                         cuMemFreeAsync_ptsz,   cuMemGetAddressRange_v2};
    } else {
        void *h = must(dlopen("libcuda.so.1", RTLD_NOW), "libcuda.so.1");
        if (strcmp(how, "dlsym") == 0) {
#define SYM(n) must(dlsym(h, #n), #n)
            const char *others[] = {"cuCtxSynchronize", "cuCtxSynchronize_v2", "cuStreamSynchronize",
                                    "cuStreamSynchronize_ptsz", "cuEventSynchronize", "cuLaunchKernel",
                                    "cuLaunchKernel_ptsz", "cuLaunchKernelEx", "cuLaunchKernelEx_ptsz",
                                    "cuGetProcAddress", "cuGetProcAddress_v2", "cuMemcpyHtoD_v2",
                                    "cuMemcpyHtoDAsync_v2_ptsz", "cuMemsetD8_v2", "cuMemsetD8Async"};
            for (size_t i = 0; i < sizeof others / sizeof others[0]; i++)
                printf("dlsym %s: %s\n", others[i], verdict(dlsym(h, others[i]), others[i]));
            a = (struct api){SYM(cuMemAlloc_v2),    SYM(cuMemAllocManaged),       SYM(cuMemAllocPitch_v2),
                             SYM(cuMemAllocAsync),  SYM(cuMemAllocAsync_ptsz),    SYM(cuMemAllocFromPoolAsync),
                             SYM(cuMemAllocFromPoolAsync_ptsz), SYM(cuMemFree_v2), SYM(cuMemFreeAsync),
                             SYM(cuMemFreeAsync_ptsz), SYM(cuMemGetAddressRange_v2)};
        } else {
            /* What libcudart does: cuGetProcAddress_v2 by handle, then everything through it (and the
             * CUDA 11.3-era v1 entry point, for older runtimes). */
            rzcu_fn_cuGetProcAddress_v2 *gpa = SYM(cuGetProcAddress_v2);
            void *self = by_proc(gpa, "cuGetProcAddress", 13000, 0, "cuGetProcAddress_v2");
            rzcu_fn_cuGetProcAddress *gpa1 = SYM(cuGetProcAddress);
            void *p = NULL;
            CHECK(gpa1("cuMemAlloc", &p, 12000, RZCU_GET_PROC_ADDRESS_DEFAULT));
            printf("procaddr v1 cuMemAlloc: %s\n", verdict(p, "cuMemAlloc_v2"));
            const rzcu_uint64 LEG = RZCU_GET_PROC_ADDRESS_LEGACY_STREAM, PT = RZCU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
            /* The synchronisation and launch entry points too (versions and flags as cudart asks). */
            by_proc(self, "cuCtxSynchronize", 12000, 0, "cuCtxSynchronize");
            by_proc(self, "cuCtxSynchronize", 13000, 0, "cuCtxSynchronize_v2");
            by_proc(self, "cuStreamSynchronize", 13000, LEG, "cuStreamSynchronize");
            by_proc(self, "cuStreamSynchronize", 13000, PT, "cuStreamSynchronize_ptsz");
            by_proc(self, "cuEventSynchronize", 13000, 0, "cuEventSynchronize");
            by_proc(self, "cuLaunchKernel", 13000, 0, "cuLaunchKernel");
            by_proc(self, "cuLaunchKernel", 13000, PT, "cuLaunchKernel_ptsz");
            by_proc(self, "cuLaunchKernelEx", 12000, 0, "cuLaunchKernelEx");
            by_proc(self, "cuLaunchKernelEx", 12000, PT, "cuLaunchKernelEx_ptsz");
            /* Copies and memsets: wrapped so waiting bands are written before them. */
            by_proc(self, "cuMemcpyHtoD", 13000, 0, "cuMemcpyHtoD_v2");
            by_proc(self, "cuMemcpyHtoD", 13000, PT, "cuMemcpyHtoD_v2_ptds");
            by_proc(self, "cuMemsetD8Async", 12000, PT, "cuMemsetD8Async_ptsz");
            by_proc(self, "cuMemcpyBatchAsync", 13000, 0, "cuMemcpyBatchAsync_v2");
            a = (struct api){
                by_proc(self, "cuMemAlloc", 13000, 0, "cuMemAlloc_v2"),
                by_proc(self, "cuMemAllocManaged", 12000, LEG, "cuMemAllocManaged"),
                by_proc(self, "cuMemAllocPitch", 11040, 0, "cuMemAllocPitch_v2"),
                by_proc(self, "cuMemAllocAsync", 12000, LEG, "cuMemAllocAsync"),
                by_proc(self, "cuMemAllocAsync", 13000, PT, "cuMemAllocAsync_ptsz"),
                by_proc(self, "cuMemAllocFromPoolAsync", 11020, 0, "cuMemAllocFromPoolAsync"),
                by_proc(self, "cuMemAllocFromPoolAsync", 12000, PT, "cuMemAllocFromPoolAsync_ptsz"),
                by_proc(self, "cuMemFree", 13000, 0, "cuMemFree_v2"),
                by_proc(self, "cuMemFreeAsync", 11020, LEG, "cuMemFreeAsync"),
                by_proc(self, "cuMemFreeAsync", 13000, PT, "cuMemFreeAsync_ptsz"),
                by_proc(self, "cuMemGetAddressRange", 13000, 0, "cuMemGetAddressRange_v2"),
            };
        }
    }
    rzcu_stream s;
    CHECK(cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING));
    rzcu_mem_pool pool;
    CHECK(cuDeviceGetDefaultMemPool(&pool, 0));
    rzcu_deviceptr p[7];
    size_t user[7], pitch = 0;
    CHECK(a.alloc(&p[0], 100));
    CHECK(a.managed(&p[1], 100, RZCU_MEM_ATTACH_GLOBAL));
    CHECK(a.pitch(&p[2], &pitch, 100, 2, 4));
    CHECK(a.async(&p[3], 100, s));
    CHECK(a.async_ptsz(&p[4], 100, NULL));
    CHECK(a.pool(&p[5], 100, pool, s));
    CHECK(a.pool_ptsz(&p[6], 100, pool, NULL));
    for (int i = 0; i < 7; i++)
        user[i] = i == 2 ? pitch * 2 : 100;
    for (int i = 0; i < 7; i++) {
        rzcu_deviceptr base = 0;
        size_t size = 0;
        CHECK(a.range(&base, &size, p[i] + 1));
        printf("zone %d: range base ok %d size %zu (user %zu)\n", i, base == p[i], size, user[i]);
        overrun(p[i], user[i]);
    }
    CHECK(a.free(p[0]));
    CHECK(a.free(p[1]));
    CHECK(a.free(p[2]));
    CHECK(a.free_async(p[3], s));
    CHECK(a.free_async_ptsz(p[4], NULL));
    CHECK(a.free_async(p[5], s));
    CHECK(a.free_async_ptsz(p[6], NULL));
    CHECK(cuStreamSynchronize(s));
    CHECK(cuStreamSynchronize_ptsz(NULL));
    printf("paths %s: done\n", how);
    return 0;
}

/* ---- kernels --------------------------------------------------------------------------------------- */
CUDA_EMU_KERNEL(touch, sizeof(rzcu_deviceptr), sizeof(size_t)) {
    unsigned char *p = (unsigned char *)(uintptr_t)CUDA_EMU_PARAM(rzcu_deviceptr, 0);
    p[CUDA_EMU_PARAM(size_t, 1)] = 0x77;
}

static void launch_touch(rzcu_function f, rzcu_deviceptr p, size_t at) {
    void *params[] = {&p, &at};
    CHECK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL));
}

static int mode_kernels(void) {
    rzcu_module mod;
    rzcu_function touch_fn;
    CHECK(cuModuleLoadData(&mod, "emulated module"));
    CHECK(cuModuleGetFunction(&touch_fn, mod, "touch"));
    rzcu_deviceptr early, zone;
    CHECK(cuMemAlloc_v2(&early, 64));
    launch_touch(touch_fn, early, 0); /* before the zone exists: not a suspect */
    CHECK(cuMemAlloc_v2(&zone, 64));
    launch_touch(touch_fn, zone, 0);
    launch_touch(touch_fn, zone, 64); /* the overrun */
    CHECK(cuCtxSynchronize());
    fprintf(stderr, "rzprog: synchronized\n");
    return 0;
}

/* ---- lazy install ------------------------------------------------------------------------------- */
static unsigned long long band_traffic(void) {
    const char *eps[] = {"cuMemcpyBatchAsync_v2", "cuMemsetD8Async", "cuStreamSynchronize", "cuMemcpyDtoHAsync_v2",
                         "cuMemcpyHtoDAsync_v2", "cuPointerGetAttribute", "cuCtxGetCurrent"};
    unsigned long long n = 0;
    for (size_t i = 0; i < sizeof eps / sizeof eps[0]; i++)
        n += cuEmuCallCount(eps[i]);
    return n;
}

static int mode_lazy(void) {
    setup(0);
    rzcu_deviceptr p, q, many[1100];
    CHECK(cuMemAlloc_v2(&p, 100));
    /* Emulated device memory is host memory: the band can be read without a driver call. */
    const volatile unsigned char *band = (const volatile unsigned char *)(uintptr_t)(p + 100);
    printf("lazy: after alloc band[0]=0x%02x\n", band[0]);
    unsigned long long before = band_traffic();
    for (int i = 0; i < 100; i++) {
        CHECK(cuMemAlloc_v2(&q, 64));
        CHECK(cuMemFree_v2(q));
    }
    printf("lazy: band driver calls for 100 alloc+free pairs: %llu\n", band_traffic() - before);
    CHECK(cuMemsetD8_v2(p, 0x5a, 100)); /* in bounds: the program's own bytes */
    printf("lazy: after memset band[0]=0x%02x band[63]=0x%02x user[99]=0x%02x\n", band[0], band[63],
           ((const volatile unsigned char *)(uintptr_t)p)[99]);
    before = cuEmuCallCount("cuMemcpyBatchAsync_v2");
    for (int i = 0; i < 1100; i++)
        CHECK(cuMemAlloc_v2(&many[i], 32));
    printf("lazy: batched band writes during 1100 allocations: %llu\n", cuEmuCallCount("cuMemcpyBatchAsync_v2") - before);
    for (int i = 0; i < 1100; i++)
        CHECK(cuMemFree_v2(many[i]));
    /* Churn with 1100 live zones (more than the 1024 that used to force an install) and no device work,
     * oldest freed first (FIFO), then in random order. */
    enum { LIVE = 1100, STEPS = 600 };
    static rzcu_deviceptr ring[LIVE];
    for (int i = 0; i < LIVE; i++)
        CHECK(cuMemAlloc_v2(&ring[i], 64));
    before = band_traffic();
    for (int step = 0; step < STEPS; step++) {
        CHECK(cuMemFree_v2(ring[step % LIVE]));
        CHECK(cuMemAlloc_v2(&ring[step % LIVE], 64));
    }
    printf("lazy: band driver calls for %d FIFO churn steps, %d live: %llu\n", STEPS, LIVE, band_traffic() - before);
    before = band_traffic();
    unsigned seed = 12345;
    for (int step = 0; step < STEPS; step++) {
        seed = seed * 1103515245u + 12345u;
        unsigned k = (seed >> 8) % LIVE;
        CHECK(cuMemFree_v2(ring[k]));
        CHECK(cuMemAlloc_v2(&ring[k], 64));
    }
    printf("lazy: band driver calls for %d random churn steps, %d live: %llu\n", STEPS, LIVE, band_traffic() - before);
    for (int i = 0; i < LIVE; i++)
        CHECK(cuMemFree_v2(ring[i]));
    CHECK(cuMemFree_v2(p));
    return 0;
}

static int mode_idlesync(void) {
    setup(0);
    rzcu_deviceptr p[100];
    for (int i = 0; i < 100; i++)
        CHECK(cuMemAlloc_v2(&p[i], 64));
    CHECK(cuMemsetD8_v2(p[0], 0, 64));
    CHECK(cuCtxSynchronize()); /* device work happened: scans */
    unsigned long long before = band_traffic();
    for (int i = 0; i < 10; i++)
        CHECK(cuCtxSynchronize());
    printf("idlesync: band driver calls for 10 idle syncs: %llu\n", band_traffic() - before);
    overrun(p[5], 64);
    before = band_traffic();
    CHECK(cuCtxSynchronize());
    printf("idlesync: a sync after device work reads bands: %d\n", band_traffic() > before);
    before = band_traffic();
    for (int i = 0; i < 10; i++)
        CHECK(cuCtxSynchronize());
    printf("idlesync: band driver calls for 10 more idle syncs: %llu\n", band_traffic() - before);
    for (int i = 0; i < 100; i++)
        CHECK(cuMemFree_v2(p[i]));
    return 0;
}

static int mode_ctxsync(void) {
    enum { N = 100 };
    rzcu_deviceptr a[N], b[N];
    rzcu_context other, popped;
    setup(0);
    CHECK(cuCtxCreate_v4(&other, NULL, 0, 0)); /* current now */
    for (int i = 0; i < N; i++)
        CHECK(cuMemAlloc_v2(&b[i], 64));
    CHECK(cuMemsetD8_v2(b[0], 0, 64));
    CHECK(cuCtxPopCurrent_v2(&popped));
    for (int i = 0; i < N; i++)
        CHECK(cuMemAlloc_v2(&a[i], 64));
    CHECK(cuMemsetD8_v2(a[0], 0, 64));
    CHECK(cuCtxSynchronize());
    printf("ctxsync: work in both contexts synchronised\n");
    cuEmuResetCallCounts();
    CHECK(cuCtxSynchronize());
    printf("ctxsync: driver calls of an idle sync: %llu\n", cuEmuCallCountAll());
    cuEmuResetCallCounts();
    CHECK(cuMemsetD8_v2(a[1], 0, 64)); /* work in this context only */
    unsigned long long memset_calls = cuEmuCallCountAll();
    CHECK(cuCtxSynchronize());
    printf("ctxsync: driver calls of a memset: %llu; of the sync after it: %llu, %llu batch copies, %llu context "
           "pushes, %llu stream queries\n",
           memset_calls, cuEmuCallCountAll() - memset_calls, cuEmuCallCount("cuMemcpyBatchAsync_v2"),
           cuEmuCallCount("cuCtxPushCurrent_v2"), cuEmuCallCount("cuStreamQuery"));
    for (int i = 0; i < N; i++)
        CHECK(cuMemFree_v2(a[i]));
    CHECK(cuCtxDestroy_v2(other));
    return 0;
}

/* Zones whose bands were never written outlive their context (destroyed, freeing their memory): one whose
 * address the driver hands out again, and one whose address it does not. */
static int mode_ctxgone(void) {
    CHECK(cuInit(0));
    rzcu_context c, primary;
    CHECK(cuCtxCreate_v4(&c, NULL, 0, 0));
    rzcu_deviceptr small, big, again, other;
    CHECK(cuMemAlloc_v2(&small, 100));
    CHECK(cuMemAlloc_v2(&big, 200000));
    CHECK(cuCtxDestroy_v2(c));
    CHECK(cuDevicePrimaryCtxRetain(&primary, 0));
    CHECK(cuCtxSetCurrent(primary));
    CHECK(cuMemAlloc_v2(&again, 100));
    CHECK(cuMemAlloc_v2(&other, 64));
    printf("ctxgone: address handed out again: %d\n", again == small);
    CHECK(cuMemsetD8_v2(again, 1, 100)); /* device work: the waiting bands are written now */
    CHECK(cuMemFree_v2(again));
    CHECK(cuMemFree_v2(other));
    return 0;
}

CUDA_EMU_KERNEL(peek, sizeof(rzcu_deviceptr), sizeof(size_t), sizeof(rzcu_deviceptr)) {
    const unsigned char *p = (const unsigned char *)(uintptr_t)CUDA_EMU_PARAM(rzcu_deviceptr, 0);
    unsigned char *out = (unsigned char *)(uintptr_t)CUDA_EMU_PARAM(rzcu_deviceptr, 2);
    *out = p[CUDA_EMU_PARAM(size_t, 1)];
}

static void vmm_usage(const char *when) {
    cuda_emu_vmm_usage_t u;
    cuEmuVmmUsage(&u);
    printf("guard: %s: physical %zu reserved %zu mapped %zu allocations %zu\n", when, u.physical_bytes,
           u.reserved_bytes, u.mapped_bytes, u.allocations);
}

static int mode_guard(const char *how) {
    setup(0);
    rzcu_deviceptr p, out;
    CHECK(cuMemAlloc_v2(&p, 1000));
    CHECK(cuMemAlloc_v2(&out, 8));
    printf("guard: aligned %d\n", p % 256 == 0);
    unsigned char host[1000];
    memset(host, 0x42, sizeof host);
    CHECK(cuMemcpyHtoD_v2(p, host, sizeof host));
    unsigned char back[1000];
    CHECK(cuMemcpyDtoH_v2(back, p, sizeof back));
    printf("guard: round trip %d\n", memcmp(host, back, sizeof host) == 0);
    printf("guard: copy into the guard granule refused %d\n", cuMemsetD8_v2(p + 1024, 1, 1) != 0);
    vmm_usage("live");
    if (strcmp(how, "slack") == 0)
        CHECK(device_fill(p + 1000, 0x55, 1)); /* inside the 24 slack bytes: the band there */
    if (strcmp(how, "write") == 0 || strcmp(how, "read") == 0) {
        rzcu_module mod;
        rzcu_function f;
        CHECK(cuModuleLoadData(&mod, "emulated module"));
        CHECK(cuModuleGetFunction(&f, mod, how[0] == 'w' ? "touch" : "peek"));
        size_t at = 1024; /* the first byte past the mapped end */
        void *params[] = {&p, &at, &out};
        fprintf(stderr, "rzprog: launching a kernel that %ss past the end\n", how);
        CHECK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL));
        CHECK(cuCtxSynchronize());
        fprintf(stderr, "rzprog: not reached\n");
    }
    CHECK(cuMemFree_v2(p));
    CHECK(cuMemFree_v2(out));
    vmm_usage("after free");
    return 0;
}

static int mode_front(void) {
    setup(0);
    rzcu_deviceptr p, q, pitched;
    size_t pitch;
    CHECK(cuMemAlloc_v2(&p, 100));
    CHECK(cuMemAlloc_v2(&q, 300));
    CHECK(cuMemAllocPitch_v2(&pitched, &pitch, 100, 2, 4));
    printf("front: aligned %d %d\n", p % 256 == 0, q % 256 == 0);
    rzcu_deviceptr base = 0;
    size_t size = 0;
    rzcu_result r = cuMemGetAddressRange_v2(&base, &size, p + 5);
    printf("front: range inside %u base ok %d size %zu\n", r, base == p, size);
    printf("front: range in the front band %u\n", cuMemGetAddressRange_v2(&base, &size, p - 1));
    CHECK(device_fill(p - 1, 0x11, 1));  /* one byte before the start */
    CHECK(device_fill(q - 40, 0x22, 8)); /* bytes 40..33 before the start, never freed: the exit scan */
    CHECK(cuMemFree_v2(p));
    CHECK(cuMemFree_v2(pitched));
    return 0;
}

volatile int g_rzprog_where;
void rzprog_stop(int where);
__attribute__((noinline)) void rzprog_stop(int where) { g_rzprog_where = where; }

CUDA_EMU_KERNEL(wait_host, sizeof(rzcu_deviceptr)) {
    while (!__atomic_load_n((volatile int *)(uintptr_t)CUDA_EMU_PARAM(rzcu_deviceptr, 0), __ATOMIC_ACQUIRE)) {
    }
}

static int mode_asyncbusy(void) {
    setup(0);
    rzcu_module mod;
    rzcu_function wait;
    CHECK(cuModuleLoadData(&mod, "emulated module"));
    CHECK(cuModuleGetFunction(&wait, mod, "wait_host"));
    rzcu_stream s;
    CHECK(cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING));
    int *flag;
    CHECK(cuMemAllocHost_v2((void **)&flag, sizeof *flag));
    *flag = 0;
    rzcu_deviceptr host_flag = (rzcu_deviceptr)(uintptr_t)flag, p;
    void *params[] = {&host_flag};
    CHECK(cuLaunchKernel(wait, 1, 1, 1, 1, 1, 1, 0, s, params, NULL));
    CHECK(cuMemAllocAsync(&p, 1000, s));
    rzprog_stop(1);
    __atomic_store_n(flag, 1, __ATOMIC_RELEASE);
    CHECK(cuStreamSynchronize(s));
    overrun(p, 1000);
    rzprog_stop(2);
    CHECK(cuMemFreeAsync(p, s));
    CHECK(cuStreamSynchronize(s));
    CHECK(cuMemFreeHost(flag));
    printf("rzprog: asyncbusy done\n");
    return 0;
}

static int mode_crash(const char *how) {
    setup(0);
    rzcu_deviceptr p;
    CHECK(cuMemAlloc_v2(&p, 128));
    overrun(p, 128);
    fprintf(stderr, "rzprog: about to die\n");
    if (strcmp(how, "abort") == 0)
        abort();
    *(volatile int *)(uintptr_t)0 = 1;
    return 0;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IONBF, 0);
    const char *mode = argc > 1 ? argv[1] : "";
    if (strcmp(mode, "multictx") == 0) {
        rzcu_context c0 = setup(0), c1;
        CHECK(cuDevicePrimaryCtxRetain(&c1, 1));
        rzcu_deviceptr a, b;
        CHECK(cuMemAlloc_v2(&a, 300));
        CHECK(cuCtxPushCurrent_v2(c1));
        CHECK(cuMemAlloc_v2(&b, 200));
        overrun(b, 200);
        CHECK(cuCtxPopCurrent_v2(&c1));
        overrun(a, 300);
        (void)c0;
        return 0;
    }
    setup(0);
    if (strcmp(mode, "paths") == 0 && argc > 2)
        return mode_paths(argv[2]);
    if (strcmp(mode, "kernels") == 0)
        return mode_kernels();
    rzcu_deviceptr p;
    if (strcmp(mode, "nofree") == 0) {
        CHECK(cuMemAlloc_v2(&p, 128));
        overrun(p, 128);
        return 0;
    }
    if (strcmp(mode, "sync") == 0) {
        CHECK(cuMemAlloc_v2(&p, 128));
        overrun(p, 128);
        fprintf(stderr, "rzprog: before sync\n");
        CHECK(cuCtxSynchronize());
        fprintf(stderr, "rzprog: after sync\n");
        CHECK(cuMemFree_v2(p));
        return 0;
    }
    if (strcmp(mode, "fork") == 0) {
        CHECK(cuMemAlloc_v2(&p, 128));
        overrun(p, 128);
        pid_t child = fork();
        if (child == 0) {
            fprintf(stderr, "rzprog: child exits\n");
            exit(0);
        }
        int status;
        waitpid(child, &status, 0);
        fprintf(stderr, "rzprog: child status %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        CHECK(cuMemFree_v2(p));
        return 0;
    }
    if (strcmp(mode, "lazy") == 0)
        return mode_lazy();
    if (strcmp(mode, "ctxgone") == 0)
        return mode_ctxgone();
    if (strcmp(mode, "front") == 0)
        return mode_front();
    if (strcmp(mode, "guard") == 0 && argc > 2)
        return mode_guard(argv[2]);
    if (strcmp(mode, "crash") == 0 && argc > 2)
        return mode_crash(argv[2]);
    if (strcmp(mode, "three") == 0) {
        for (int i = 0; i < 3; i++) {
            CHECK(cuMemAlloc_v2(&p, 32));
            overrun(p, 32);
        }
        return 0;
    }
    if (strcmp(mode, "exit") == 0 && argc > 3) {
        CHECK(cuMemAlloc_v2(&p, 32));
        if (atoi(argv[3]))
            overrun(p, 32);
        CHECK(cuMemFree_v2(p));
        return atoi(argv[2]);
    }
    if (strcmp(mode, "asyncbusy") == 0)
        return mode_asyncbusy();
    if (strcmp(mode, "idlesync") == 0)
        return mode_idlesync();
    if (strcmp(mode, "ctxsync") == 0)
        return mode_ctxsync();
    if (strcmp(mode, "data") == 0) {
        /* Checksums of the program's own bytes and the driver's answers to bad calls. */
        rzcu_deviceptr bufs[5];
        uint64_t sum = 1469598103934665603ull;
        for (int i = 0; i < 5; i++) {
            size_t n = 100 + 77 * (size_t)i;
            CHECK(cuMemAlloc_v2(&bufs[i], n));
            unsigned char host[500];
            for (size_t j = 0; j < n; j++)
                host[j] = (unsigned char)(i * 13 + j);
            CHECK(cuMemcpyHtoD_v2(bufs[i], host, n));
            CHECK(cuMemsetD8_v2(bufs[i] + n / 2, (unsigned char)i, n / 4));
        }
        for (int i = 0; i < 5; i++) {
            size_t n = 100 + 77 * (size_t)i;
            unsigned char host[500];
            CHECK(cuMemcpyDtoH_v2(host, bufs[i], n));
            for (size_t j = 0; j < n; j++)
                sum = (sum ^ host[j]) * 1099511628211ull;
        }
        printf("checksum %016llx\n", (unsigned long long)sum);
        rzcu_deviceptr q = 0;
        size_t size = 0;
        printf("alloc 0 bytes -> %u\n", cuMemAlloc_v2(&q, 0));
        printf("alloc NULL out -> %u\n", cuMemAlloc_v2(NULL, 16));
        printf("free interior -> %u\n", cuMemFree_v2(bufs[0] + 16));
        printf("free unknown -> %u\n", cuMemFree_v2(0x10));
        printf("range unknown -> %u\n", cuMemGetAddressRange_v2(NULL, &size, 0x10));
        printf("pitch bad element -> %u\n", cuMemAllocPitch_v2(&q, &size, 64, 4, 3));
        printf("copy past 2 KiB -> %u\n", cuMemcpyDtoH_v2(NULL, bufs[0], 2048));
        for (int i = 0; i < 5; i++)
            printf("free %d -> %u\n", i, cuMemFree_v2(bufs[i]));
        printf("double free -> %u\n", cuMemFree_v2(bufs[1]));
        return 0;
    }
    fprintf(stderr, "rzprog: unknown mode '%s'\n", mode);
    return 2;
}
