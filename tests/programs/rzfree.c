/*
 * Frees gone wrong, as a CUDA program makes them (issue 32 items 1-3), run by tests/free_checks.py bare and with
 * libredzone.so preloaded on the emulated driver. It knows nothing of redzone.
 *   rzfree stale        a 256-byte buffer freed, a kernel launched on another buffer, then a stale device store
 *                       into bytes [16, 32) of the freed one (as a kernel still holding the pointer would)
 *   rzfree stale_kernel the same, the stale store made by a kernel (`scribble`, launched with the freed pointer)
 *                       after `fill` ran on another buffer: under SCAN=launch the report names that launch
 *   rzfree stale_async  the same for a stream-ordered buffer: cuMemAllocAsync, cuMemFreeAsync on a stream, the
 *                       stream synchronised, then the stale store
 *   rzfree stale_host   the same, the stale write a cuMemcpyHtoD the driver refuses without redzone
 *   rzfree double       a buffer freed twice: each answer printed
 *   rzfree interior     a free of a pointer 16 bytes into a live buffer: the answer printed, then its real free
 *   rzfree leak         four buffers left live at exit: three from one call site, one from another
 *   rzfree churn N      N allocations of 1 MiB, each freed at once, then a 1 MiB store into the last one freed
 *                       still inside the quarantine's bound (none): the quarantine stays bounded
 *   rzfree evict        the stale store into a freed buffer, then two 4096-byte buffers allocated and freed
 *                       (run with a small quarantine: the first block leaves it, checked, before "evicted")
 *   rzfree ctxend       the stale store, then the primary context released (it ends), retained again, and a
 *                       buffer allocated and freed in the new one
 *   rzfree ended        a 256-byte buffer allocated in a context the program creates, the context destroyed (its
 *                       memory goes with it; the primary context is current again), then the buffer freed and a
 *                       pointer 16 bytes into it freed: each answer printed
 *   rzfree ended_none   the same, with no context current at the frees
 *   rzfree gdb          (tests/gdb/case_quarantine.py, METRALE_REDZONE_SCAN=sync) a buffer freed, a synchronisation,
 *                       the stale store, rzfree_stop(1); the stale store again, a synchronisation (its scan
 *                       reports), then the buffer freed again, rzfree_stop(2)
 *   rzfree oom          (run with CUDA_EMU_MEM=64M) 48 MiB freed, then 48 MiB allocated: succeeds
 *   rzfree oom KIND     the same, the second 48 MiB from another entry point: KIND is managed (cuMemAllocManaged),
 *                       pitch (cuMemAllocPitch), async (cuMemAllocAsync), pool (cuMemAllocFromPoolAsync on a pool
 *                       of its own) or vmm (cuMemCreate); its answer printed
 * Each prints what the driver answered, and "rzfree: done".
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_emu.h"
#include "device_store.h"

#define CHECK(call)                                                                                          \
    do {                                                                                                     \
        rzcu_result rc_ = (call);                                                                            \
        if (rc_ != 0) {                                                                                      \
            fprintf(stderr, "rzfree:%d: %s failed: %u\n", __LINE__, #call, rc_);                             \
            exit(100);                                                                                       \
        }                                                                                                    \
    } while (0)

CUDA_EMU_KERNEL(fill, sizeof(rzcu_deviceptr), sizeof(unsigned long long), sizeof(unsigned long long),
                sizeof(unsigned int)) {
    unsigned char *buf = (unsigned char *)(uintptr_t)CUDA_EMU_PARAM(rzcu_deviceptr, 0);
    long long from = CUDA_EMU_PARAM(long long, 1), to = CUDA_EMU_PARAM(long long, 2);
    for (long long i = from; i < to; i++)
        buf[i] = (unsigned char)CUDA_EMU_PARAM(unsigned int, 3);
}

/* The same body under another name: the kernel a stale pointer reaches (stale_kernel). */
CUDA_EMU_KERNEL(scribble, sizeof(rzcu_deviceptr), sizeof(unsigned long long), sizeof(unsigned long long),
                sizeof(unsigned int)) {
    unsigned char *buf = (unsigned char *)(uintptr_t)CUDA_EMU_PARAM(rzcu_deviceptr, 0);
    long long from = CUDA_EMU_PARAM(long long, 1), to = CUDA_EMU_PARAM(long long, 2);
    for (long long i = from; i < to; i++)
        buf[i] = (unsigned char)CUDA_EMU_PARAM(unsigned int, 3);
}

static void launch(const char *kernel, rzcu_stream s, rzcu_deviceptr buf, long long from, long long to,
                   unsigned value) {
    static rzcu_module mod;
    rzcu_function f;
    if (mod == NULL)
        CHECK(cuModuleLoadData(&mod, "emulated module"));
    CHECK(cuModuleGetFunction(&f, mod, kernel));
    void *params[] = {&buf, &from, &to, &value};
    CHECK(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, params, NULL));
}

static void fill(rzcu_stream s, rzcu_deviceptr buf, long long from, long long to, unsigned value) {
    static rzcu_module mod;
    rzcu_function f;
    if (mod == NULL)
        CHECK(cuModuleLoadData(&mod, "emulated module"));
    CHECK(cuModuleGetFunction(&f, mod, "fill"));
    void *params[] = {&buf, &from, &to, &value};
    CHECK(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, params, NULL));
}

static rzcu_deviceptr alloc(size_t n) {
    rzcu_deviceptr p;
    CHECK(cuMemAlloc_v2(&p, n));
    return p;
}

/* The stale write: 16 bytes of 0x2a at p + 16; its answer printed (refused without redzone: freed memory). */
static void stale_store(rzcu_deviceptr p) {
    unsigned char bytes[16];
    memset(bytes, 0x2a, sizeof bytes);
    printf("rzfree: stale store: %u\n", (unsigned)cuEmuDeviceStore(p + 16, bytes, sizeof bytes));
}

/* A debugger stops here (tests/gdb/case_quarantine.py). */
__attribute__((noinline)) void rzfree_stop(int where);
__attribute__((noinline)) void rzfree_stop(int where) { __asm__ volatile("" : : "r"(where) : "memory"); }

/* 48 MiB from the entry point `kind` names (oom mode): the driver's answer. */
static unsigned oom_alloc(const char *kind) {
    const size_t n = (size_t)48 << 20;
    rzcu_deviceptr p;
    if (strcmp(kind, "managed") == 0)
        return (unsigned)cuMemAllocManaged(&p, n, RZCU_MEM_ATTACH_GLOBAL);
    if (strcmp(kind, "pitch") == 0) {
        size_t pitch;
        return (unsigned)cuMemAllocPitch_v2(&p, &pitch, (size_t)1 << 20, 48, 4);
    }
    if (strcmp(kind, "async") == 0) {
        rzcu_result r = cuMemAllocAsync(&p, n, NULL);
        CHECK(cuCtxSynchronize());
        return (unsigned)r;
    }
    if (strcmp(kind, "pool") == 0) {
        cuda_emu_mem_pool_props_t props;
        memset(&props, 0, sizeof props);
        props.allocType = RZCU_MEM_ALLOCATION_TYPE_PINNED;
        props.location.type = RZCU_MEM_LOCATION_TYPE_DEVICE;
        rzcu_mem_pool pool;
        CHECK(cuMemPoolCreate(&pool, &props));
        rzcu_result r = cuMemAllocFromPoolAsync(&p, n, pool, NULL);
        CHECK(cuCtxSynchronize());
        return (unsigned)r;
    }
    if (strcmp(kind, "vmm") == 0) {
        rzcu_mem_allocation_prop prop = {.type = RZCU_MEM_ALLOCATION_TYPE_PINNED,
                                         .location = {.type = RZCU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
        rzcu_mem_generic_alloc_handle h;
        return (unsigned)cuMemCreate(&h, n, &prop, 0);
    }
    fprintf(stderr, "rzfree: unknown allocation kind %s\n", kind);
    exit(2);
}

static rzcu_deviceptr leak_here(void) { return alloc(1024); }

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "stale";
    rzcu_context ctx;
    CHECK(cuInit(0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, 0));
    CHECK(cuCtxSetCurrent(ctx));
    setvbuf(stdout, NULL, _IONBF, 0);
    if (strcmp(mode, "stale") == 0 || strcmp(mode, "stale_host") == 0) {
        rzcu_deviceptr a = alloc(256), other = alloc(256);
        CHECK(cuMemsetD8_v2(a, 1, 256));
        CHECK(cuMemFree_v2(a));
        fill(NULL, other, 0, 256, 7); /* the program goes on: a kernel on a live buffer */
        if (mode[5] == '\0') {
            stale_store(a);
        } else {
            unsigned char bytes[16];
            memset(bytes, 0x2a, sizeof bytes);
            printf("rzfree: stale copy: %u\n", (unsigned)cuMemcpyHtoD_v2(a + 16, bytes, sizeof bytes));
        }
        CHECK(cuCtxSynchronize());
        CHECK(cuMemFree_v2(other));
    } else if (strcmp(mode, "stale_kernel") == 0) {
        rzcu_deviceptr a = alloc(256), other = alloc(256);
        CHECK(cuMemsetD8_v2(a, 1, 256));
        CHECK(cuMemFree_v2(a));
        launch("fill", NULL, other, 0, 256, 7);
        launch("scribble", NULL, a, 16, 32, 0x2a); /* a kernel still holding the freed pointer */
        launch("fill", NULL, other, 0, 256, 8);
        printf("rzfree: stale kernel: %u\n", (unsigned)cuCtxSynchronize());
        CHECK(cuMemFree_v2(other));
    } else if (strcmp(mode, "stale_async") == 0) {
        rzcu_stream s;
        rzcu_deviceptr a;
        CHECK(cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING));
        CHECK(cuMemAllocAsync(&a, 256, s));
        CHECK(cuMemsetD8Async(a, 1, 256, s));
        CHECK(cuMemFreeAsync(a, s));
        CHECK(cuStreamSynchronize(s));
        stale_store(a);
        CHECK(cuCtxSynchronize());
        CHECK(cuStreamDestroy_v2(s));
    } else if (strcmp(mode, "double") == 0) {
        rzcu_deviceptr a = alloc(256);
        printf("rzfree: first free: %u\n", (unsigned)cuMemFree_v2(a));
        printf("rzfree: second free: %u\n", (unsigned)cuMemFree_v2(a));
    } else if (strcmp(mode, "interior") == 0) {
        rzcu_deviceptr a = alloc(256);
        printf("rzfree: interior free: %u\n", (unsigned)cuMemFree_v2(a + 16));
        printf("rzfree: real free: %u\n", (unsigned)cuMemFree_v2(a));
    } else if (strcmp(mode, "leak") == 0) {
        for (int i = 0; i < 3; i++)
            (void)leak_here();
        (void)alloc(100);
        rzcu_deviceptr freed = alloc(64);
        CHECK(cuMemFree_v2(freed));
    } else if (strcmp(mode, "churn") == 0) {
        int n = argc > 2 ? atoi(argv[2]) : 200;
        for (int i = 0; i < n; i++) {
            rzcu_deviceptr p = alloc((size_t)1 << 20);
            CHECK(cuMemsetD8_v2(p, 3, (size_t)1 << 20));
            CHECK(cuMemFree_v2(p));
        }
    } else if (strcmp(mode, "evict") == 0 || strcmp(mode, "ctxend") == 0) {
        rzcu_deviceptr a = alloc(256);
        CHECK(cuMemFree_v2(a));
        stale_store(a);
        CHECK(cuCtxSynchronize());
        if (mode[0] == 'e') {
            for (int i = 0; i < 2; i++)
                CHECK(cuMemFree_v2(alloc(4096)));
            printf("rzfree: evicted\n");
        } else {
            CHECK(cuDevicePrimaryCtxRelease(0));
            printf("rzfree: context ended\n");
            CHECK(cuDevicePrimaryCtxRetain(&ctx, 0));
            CHECK(cuCtxSetCurrent(ctx));
            CHECK(cuMemFree_v2(alloc(256)));
        }
    } else if (strcmp(mode, "ended") == 0 || strcmp(mode, "ended_none") == 0) {
        rzcu_context created;
        CHECK(cuCtxCreate_v4(&created, NULL, 0, 0)); /* pushed: current */
        rzcu_deviceptr a = alloc(256);
        CHECK(cuCtxDestroy_v2(created));
        if (mode[5] != '\0')
            CHECK(cuCtxSetCurrent(NULL));
        printf("rzfree: free after its context ended: %u\n", (unsigned)cuMemFree_v2(a));
        printf("rzfree: inside it: %u\n", (unsigned)cuMemFree_v2(a + 16));
    } else if (strcmp(mode, "gdb") == 0) {
        rzcu_deviceptr a = alloc(256), other = alloc(256);
        CHECK(cuMemFree_v2(a));
        CHECK(cuMemsetD8_v2(other, 0, 256));
        CHECK(cuCtxSynchronize());
        stale_store(a);
        rzfree_stop(1);
        stale_store(a);
        CHECK(cuMemsetD8_v2(other, 0, 256));
        CHECK(cuCtxSynchronize());
        printf("rzfree: second free: %u\n", (unsigned)cuMemFree_v2(a));
        CHECK(cuMemFree_v2(other));
        rzfree_stop(2);
    } else if (strcmp(mode, "oom") == 0) {
        rzcu_deviceptr a = alloc((size_t)48 << 20);
        CHECK(cuMemFree_v2(a));
        rzcu_deviceptr b;
        printf("rzfree: second allocation: %u\n",
               argc > 2 ? oom_alloc(argv[2]) : (unsigned)cuMemAlloc_v2(&b, (size_t)48 << 20));
    } else {
        fprintf(stderr, "rzfree: unknown mode %s\n", mode);
        return 2;
    }
    printf("rzfree: done\n");
    return 0;
}
