/* Tests of the emulated CUDA driver (native/emu). Criterion runs every test in its own process. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <dirent.h>
#include <pthread.h>
#include <stdbool.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cuda_emu.h"

/* CUlaunchAttribute as laid out in cuda.h (cu.h only declares the tag). */
struct CUlaunchAttribute_st {
    unsigned int id;
    char pad[4];
    union {
        char pad[64];
        int i;
        void *p;
    } value;
};

#define OK(call) cr_assert_eq((call), RZCUDA_SUCCESS, "%s", #call)
#define FAILS(call, err) cr_assert_eq((call), (rzcu_result)(err), "%s", #call)

static rzcu_context primary_current(void)
{
    OK(cuInit(0));
    rzcu_context ctx = NULL;
    OK(cuDevicePrimaryCtxRetain(&ctx, 0));
    OK(cuCtxSetCurrent(ctx));
    return ctx;
}

static size_t free_bytes(void)
{
    size_t f = 0, t = 0;
    OK(cuMemGetInfo_v2(&f, &t));
    return f;
}

/* A gate a host function blocks on until the test opens it. */
struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cond;
    int open, entered;
};
#define GATE_INIT {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0}

static void gate_wait_fn(void *arg)
{
    struct gate *g = arg;
    pthread_mutex_lock(&g->mu);
    g->entered = 1;
    pthread_cond_broadcast(&g->cond);
    while (!g->open)
        pthread_cond_wait(&g->cond, &g->mu);
    pthread_mutex_unlock(&g->mu);
}

static void gate_open(struct gate *g)
{
    pthread_mutex_lock(&g->mu);
    g->open = 1;
    pthread_cond_broadcast(&g->cond);
    pthread_mutex_unlock(&g->mu);
}

static void gate_await_entered(struct gate *g)
{
    pthread_mutex_lock(&g->mu);
    while (!g->entered)
        pthread_cond_wait(&g->cond, &g->mu);
    pthread_mutex_unlock(&g->mu);
}

static void set_flag_fn(void *arg) { __atomic_store_n((int *)arg, 1, __ATOMIC_SEQ_CST); }
static int get_flag(int *f) { return __atomic_load_n(f, __ATOMIC_SEQ_CST); }

/* ---- initialisation and devices ---- */

Test(emu, init_and_version)
{
    int v = 0;
    OK(cuDriverGetVersion(&v));
    cr_assert_eq(v, 13000);
    int n = -1;
    FAILS(cuDeviceGetCount(&n), RZCUDA_ERROR_NOT_INITIALIZED);
    FAILS(cuInit(1), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuDeviceGetCount(&n), RZCUDA_ERROR_NOT_INITIALIZED);
    OK(cuInit(0));
    OK(cuDeviceGetCount(&n));
    cr_assert_eq(n, 1);
    cr_assert_eq(cuEmuIsEmulated(), 1);
    FAILS(cuDriverGetVersion(NULL), RZCUDA_ERROR_INVALID_VALUE);
}

Test(emu, not_initialized_errors)
{
    rzcu_deviceptr p;
    rzcu_context ctx;
    rzcu_device dev;
    FAILS(cuMemAlloc_v2(&p, 16), RZCUDA_ERROR_NOT_INITIALIZED);
    FAILS(cuDeviceGet(&dev, 0), RZCUDA_ERROR_NOT_INITIALIZED);
    FAILS(cuCtxGetCurrent(&ctx), RZCUDA_ERROR_NOT_INITIALIZED);
    FAILS(cuDevicePrimaryCtxRetain(&ctx, 0), RZCUDA_ERROR_NOT_INITIALIZED);
    FAILS(cuStreamSynchronize(NULL), RZCUDA_ERROR_NOT_INITIALIZED);
    const char *s = NULL;
    OK(cuGetErrorName(RZCUDA_ERROR_NOT_INITIALIZED, &s));
    cr_assert_str_eq(s, "CUDA_ERROR_NOT_INITIALIZED");
    void *fn = NULL;
    OK(cuGetProcAddress_v2("cuInit", &fn, 13000, 0, NULL));
    cr_assert_eq(fn, (void *)&cuInit);
}

Test(emu, devices_and_attributes)
{
    setenv("CUDA_EMU_DEVICES", "3", 1);
    setenv("CUDA_EMU_MEM", "1G", 1);
    OK(cuInit(0));
    int n;
    OK(cuDeviceGetCount(&n));
    cr_assert_eq(n, 3);
    rzcu_device dev = -1;
    OK(cuDeviceGet(&dev, 2));
    cr_assert_eq(dev, 2);
    FAILS(cuDeviceGet(&dev, 3), RZCUDA_ERROR_INVALID_DEVICE);
    FAILS(cuDeviceGet(&dev, -1), RZCUDA_ERROR_INVALID_DEVICE);
    char name[64];
    OK(cuDeviceGetName(name, sizeof name, 1));
    cr_assert_str_eq(name, "redzone emulated device 1");
    char small[9];
    OK(cuDeviceGetName(small, sizeof small, 1));
    cr_assert_str_eq(small, "redzone ");
    FAILS(cuDeviceGetName(name, sizeof name, 7), RZCUDA_ERROR_INVALID_DEVICE);
    int v;
    OK(cuDeviceGetAttribute(&v, RZCU_DEVICE_ATTRIBUTE_WARP_SIZE, 0));
    cr_assert_eq(v, 32);
    OK(cuDeviceGetAttribute(&v, RZCU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, 1));
    cr_assert_eq(v, 1);
    OK(cuDeviceGetAttribute(&v, RZCU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 2));
    cr_assert_eq(v, 9);
    OK(cuDeviceGetAttribute(&v, RZCU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 2));
    cr_assert_eq(v, 0);
    OK(cuDeviceGetAttribute(&v, RZCU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 0));
    cr_assert_eq(v, 1024);
    OK(cuDeviceGetAttribute(&v, RZCU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0));
    cr_assert_gt(v, 0);
    FAILS(cuDeviceGetAttribute(&v, 100000, 0), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuDeviceGetAttribute(&v, RZCU_DEVICE_ATTRIBUTE_WARP_SIZE, 3), RZCUDA_ERROR_INVALID_DEVICE);
    size_t total = 0;
    OK(cuDeviceTotalMem_v2(&total, 2));
    cr_assert_eq(total, (size_t)1 << 30);
}

Test(emu, default_total_memory)
{
    OK(cuInit(0));
    size_t total = 0;
    OK(cuDeviceTotalMem_v2(&total, 0));
    cr_assert_eq(total, (size_t)16 << 30);
}

Test(emu, malformed_devices_env_warns, .init = cr_redirect_stderr)
{
    setenv("CUDA_EMU_DEVICES", "9", 1);
    OK(cuInit(0));
    int n;
    OK(cuDeviceGetCount(&n));
    cr_assert_eq(n, 1);
    fflush(stderr);
    cr_assert_stderr_eq_str("cuda-emu: warning: malformed CUDA_EMU_DEVICES=\"9\" (want 1..8); using 1\n");
}

Test(emu, malformed_mem_env_warns, .init = cr_redirect_stderr)
{
    setenv("CUDA_EMU_MEM", "12x", 1);
    OK(cuInit(0));
    size_t total;
    OK(cuDeviceTotalMem_v2(&total, 0));
    cr_assert_eq(total, (size_t)16 << 30);
    fflush(stderr);
    cr_assert_stderr_eq_str(
        "cuda-emu: warning: malformed CUDA_EMU_MEM=\"12x\" (want bytes, optional K/M/G/T suffix); using 16 GiB\n");
}

/* ---- contexts ---- */

Test(emu, context_stack)
{
    OK(cuInit(0));
    rzcu_context cur = (rzcu_context)0x1;
    OK(cuCtxGetCurrent(&cur));
    cr_assert_null(cur);
    rzcu_deviceptr p;
    FAILS(cuMemAlloc_v2(&p, 64), RZCUDA_ERROR_INVALID_CONTEXT);
    rzcu_stream s;
    FAILS(cuStreamCreate(&s, 0), RZCUDA_ERROR_INVALID_CONTEXT);
    FAILS(cuCtxSynchronize(), RZCUDA_ERROR_INVALID_CONTEXT);
    FAILS(cuMemsetD8_v2(0x1000, 0, 1), RZCUDA_ERROR_INVALID_CONTEXT);
    rzcu_context popped;
    FAILS(cuCtxPopCurrent_v2(&popped), RZCUDA_ERROR_INVALID_CONTEXT);
    OK(cuCtxSetCurrent(NULL)); /* no-op on an empty stack */

    rzcu_context a, b, prim;
    OK(cuCtxCreate_v4(&a, NULL, 0, 0));
    OK(cuCtxGetCurrent(&cur));
    cr_assert_eq(cur, a);
    OK(cuCtxCreate_v4(&b, NULL, 0, 0));
    cr_assert_neq(a, b);
    OK(cuCtxGetCurrent(&cur));
    cr_assert_eq(cur, b);
    OK(cuCtxPopCurrent_v2(&popped));
    cr_assert_eq(popped, b);
    OK(cuCtxGetCurrent(&cur));
    cr_assert_eq(cur, a);
    OK(cuCtxPushCurrent_v2(b));
    OK(cuDevicePrimaryCtxRetain(&prim, 0));
    OK(cuCtxSetCurrent(prim)); /* replaces b on top */
    OK(cuCtxGetCurrent(&cur));
    cr_assert_eq(cur, prim);
    OK(cuCtxPopCurrent_v2(&popped));
    cr_assert_eq(popped, prim);
    OK(cuCtxGetCurrent(&cur));
    cr_assert_eq(cur, a);
    rzcu_device dev = -1;
    OK(cuCtxGetDevice(&dev));
    cr_assert_eq(dev, 0);
    OK(cuCtxSetCurrent(NULL)); /* pops a */
    OK(cuCtxGetCurrent(&cur));
    cr_assert_null(cur);
    FAILS(cuCtxPushCurrent_v2(NULL), RZCUDA_ERROR_INVALID_CONTEXT);
    FAILS(cuCtxPushCurrent_v2((rzcu_context)&dev), RZCUDA_ERROR_INVALID_CONTEXT);
    FAILS(cuCtxCreate_v4(&a, NULL, 0, 5), RZCUDA_ERROR_INVALID_DEVICE);
    FAILS(cuCtxCreate_v4(NULL, NULL, 0, 0), RZCUDA_ERROR_INVALID_VALUE);
}

struct thread_ctx_arg {
    rzcu_context seen;
    rzcu_result r;
};

static void *other_thread_ctx(void *p)
{
    struct thread_ctx_arg *a = p;
    a->r = cuCtxGetCurrent(&a->seen);
    return NULL;
}

Test(emu, context_stack_is_per_thread)
{
    rzcu_context prim = primary_current();
    cr_assert_not_null(prim);
    struct thread_ctx_arg a = {(rzcu_context)0x1, 99};
    pthread_t th;
    pthread_create(&th, NULL, other_thread_ctx, &a);
    pthread_join(th, NULL);
    cr_assert_eq(a.r, RZCUDA_SUCCESS);
    cr_assert_null(a.seen);
}

Test(emu, primary_context_retain_release)
{
    OK(cuInit(0));
    FAILS(cuDevicePrimaryCtxRelease_v2(0), RZCUDA_ERROR_INVALID_CONTEXT);
    rzcu_context p1, p2;
    OK(cuDevicePrimaryCtxRetain(&p1, 0));
    OK(cuDevicePrimaryCtxRetain(&p2, 0));
    cr_assert_eq(p1, p2);
    OK(cuCtxSetCurrent(p1));
    size_t before = free_bytes();
    rzcu_deviceptr d;
    OK(cuMemAlloc_v2(&d, 4096));
    cr_assert_eq(free_bytes(), before - 4096);
    OK(cuDevicePrimaryCtxRelease_v2(0));
    OK(cuMemsetD8_v2(d, 1, 16)); /* still active: one reference left */
    OK(cuDevicePrimaryCtxRelease_v2(0));
    /* reset: still current (release never pops), but destroyed until retained again */
    FAILS(cuMemAlloc_v2(&d, 16), RZCUDA_ERROR_CONTEXT_IS_DESTROYED);
    FAILS(cuDevicePrimaryCtxRelease_v2(0), RZCUDA_ERROR_INVALID_CONTEXT);
    FAILS(cuDevicePrimaryCtxRelease_v2(4), RZCUDA_ERROR_INVALID_DEVICE);
    OK(cuDevicePrimaryCtxRetain(&p2, 0));
    cr_assert_eq(p1, p2, "the primary context handle is stable");
    cr_assert_eq(free_bytes(), before, "the reset freed the allocation");
    FAILS(cuMemGetAddressRange_v2(NULL, NULL, d), RZCUDA_ERROR_NOT_FOUND);
    FAILS(cuCtxDestroy_v2(p1), RZCUDA_ERROR_INVALID_CONTEXT); /* primary contexts are not destroyed this way */
}

Test(emu, create_and_destroy_context)
{
    OK(cuInit(0));
    rzcu_context a, cur;
    OK(cuCtxCreate_v4(&a, NULL, 0, 0));
    OK(cuCtxPushCurrent_v2(a)); /* stack: a, a */
    rzcu_deviceptr d;
    OK(cuMemAlloc_v2(&d, 1000));
    rzcu_stream s;
    OK(cuStreamCreate(&s, 0));
    OK(cuCtxDestroy_v2(a)); /* pops one */
    OK(cuCtxGetCurrent(&cur));
    cr_assert_eq(cur, a);
    FAILS(cuMemAlloc_v2(&d, 16), RZCUDA_ERROR_CONTEXT_IS_DESTROYED);
    FAILS(cuCtxSynchronize(), RZCUDA_ERROR_CONTEXT_IS_DESTROYED);
    FAILS(cuCtxDestroy_v2(a), RZCUDA_ERROR_INVALID_CONTEXT);
    FAILS(cuCtxPushCurrent_v2(a), RZCUDA_ERROR_INVALID_CONTEXT);
    FAILS(cuCtxSetCurrent(a), RZCUDA_ERROR_INVALID_CONTEXT);
    FAILS(cuStreamSynchronize(s), RZCUDA_ERROR_INVALID_HANDLE);
    FAILS(cuCtxDestroy_v2(NULL), RZCUDA_ERROR_INVALID_VALUE);
    OK(cuCtxPopCurrent_v2(NULL));
    primary_current();
    FAILS(cuMemGetAddressRange_v2(NULL, NULL, d), RZCUDA_ERROR_NOT_FOUND); /* freed with its context */
    FAILS(cuMemFree_v2(d), RZCUDA_ERROR_INVALID_VALUE);
}

/* ---- memory ---- */

Test(emu, alloc_free_range_and_info)
{
    primary_current();
    size_t total0, free0;
    OK(cuMemGetInfo_v2(&free0, &total0));
    cr_assert_eq(free0, total0);
    rzcu_deviceptr p, q;
    OK(cuMemAlloc_v2(&p, 1000));
    cr_assert_eq(p % CUDA_EMU_ALLOC_ALIGN, 0);
    cr_assert_eq(free_bytes(), free0 - 1024);
    OK(cuMemAlloc_v2(&q, (size_t)10 << 20));
    cr_assert_eq(q % CUDA_EMU_ALLOC_ALIGN, 0);
    cr_assert_eq(free_bytes(), free0 - 1024 - ((size_t)10 << 20));
    cr_assert(p + 1000 <= q || q + ((size_t)10 << 20) <= p);
    rzcu_deviceptr base = 0;
    size_t size = 0;
    OK(cuMemGetAddressRange_v2(&base, &size, p + 500));
    cr_assert_eq(base, p);
    cr_assert_eq(size, 1000);
    OK(cuMemGetAddressRange_v2(&base, NULL, p));
    OK(cuMemGetAddressRange_v2(NULL, &size, q + (10 << 20) - 1));
    cr_assert_eq(size, (size_t)10 << 20);
    FAILS(cuMemGetAddressRange_v2(&base, &size, p + 1000), RZCUDA_ERROR_NOT_FOUND);
    FAILS(cuMemGetAddressRange_v2(&base, &size, q + (10 << 20)), RZCUDA_ERROR_NOT_FOUND);
    int host_var;
    FAILS(cuMemGetAddressRange_v2(&base, &size, (rzcu_deviceptr)(uintptr_t)&host_var), RZCUDA_ERROR_NOT_FOUND);
    FAILS(cuMemGetAddressRange_v2(&base, &size, 0), RZCUDA_ERROR_NOT_FOUND);
    /* the whole large allocation is usable */
    OK(cuMemsetD8_v2(q, 0xab, (size_t)10 << 20));
    unsigned char last = 0;
    OK(cuMemcpyDtoH_v2(&last, q + (10 << 20) - 1, 1));
    cr_assert_eq(last, 0xab);
    OK(cuMemFree_v2(p));
    OK(cuMemFree_v2(q));
    cr_assert_eq(free_bytes(), free0);
    FAILS(cuMemGetAddressRange_v2(&base, &size, p), RZCUDA_ERROR_NOT_FOUND);
    FAILS(cuMemGetInfo_v2(NULL, &size), RZCUDA_ERROR_INVALID_VALUE);
}

Test(emu, freed_large_allocation_faults, .signal = SIGSEGV)
{
    primary_current();
    rzcu_deviceptr q;
    OK(cuMemAlloc_v2(&q, (size_t)4 << 20));
    OK(cuMemFree_v2(q));
    *(volatile char *)(uintptr_t)q = 1; /* use after free of decommitted memory */
}

/* The VmFlags line of the mapping of /proc/self/smaps containing addr (empty when not found). */
static void vm_flags_of(uintptr_t addr, char *out, size_t len)
{
    out[0] = '\0';
    FILE *f = fopen("/proc/self/smaps", "r");
    cr_assert_not_null(f);
    char line[512];
    bool inside = false;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' '))
            inside = addr >= lo && addr < hi;
        else if (inside && strncmp(line, "VmFlags:", 8) == 0) {
            snprintf(out, len, "%s", line);
            break;
        }
    }
    fclose(f);
}

Test(emu, reserved_range_is_left_out_of_core_files)
{
    primary_current();
    rzcu_deviceptr p;
    OK(cuMemAlloc_v2(&p, 64));
    char flags[512];
    vm_flags_of((uintptr_t)p, flags, sizeof flags);
    cr_assert(strstr(flags, " rd") && !strstr(flags, " dd"), "committed memory is dumped: %s", flags);
    vm_flags_of((uintptr_t)p + ((uintptr_t)256 << 20), flags, sizeof flags);
    cr_assert(strstr(flags, " dd"), "the reservation is not dumped: %s", flags);
}

Test(emu, zero_size_and_null_alloc)
{
    primary_current();
    rzcu_deviceptr p = 0;
    FAILS(cuMemAlloc_v2(&p, 0), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemAlloc_v2(NULL, 64), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemAllocManaged(&p, 0, RZCU_MEM_ATTACH_GLOBAL), RZCUDA_ERROR_INVALID_VALUE);
    void *h;
    FAILS(cuMemAllocHost_v2(&h, 0), RZCUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(p, 0);
}

Test(emu, invalid_frees)
{
    primary_current();
    size_t free0 = free_bytes();
    rzcu_deviceptr p, big;
    OK(cuMemAlloc_v2(&p, 512));
    OK(cuMemAlloc_v2(&big, (size_t)3 << 20));
    FAILS(cuMemFree_v2(p + 256), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemFree_v2(p + 1), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemFree_v2(big + 4096), RZCUDA_ERROR_INVALID_VALUE);
    OK(cuMemFree_v2(0)); /* like free(NULL), as real drivers do */
    int host_var;
    FAILS(cuMemFree_v2((rzcu_deviceptr)(uintptr_t)&host_var), RZCUDA_ERROR_INVALID_VALUE);
    OK(cuMemFree_v2(p));
    FAILS(cuMemFree_v2(p), RZCUDA_ERROR_INVALID_VALUE);
    OK(cuMemFree_v2(big));
    FAILS(cuMemFree_v2(big), RZCUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(free_bytes(), free0);
}

Test(emu, copies_and_memsets_move_the_right_bytes)
{
    primary_current();
    rzcu_deviceptr a, b;
    OK(cuMemAlloc_v2(&a, 300));
    OK(cuMemAlloc_v2(&b, 300));
    unsigned char src[300], dst[300];
    for (int i = 0; i < 300; i++)
        src[i] = (unsigned char)i;
    OK(cuMemcpyHtoD_v2(a, src, 300));
    OK(cuMemsetD8_v2(b, 0x5a, 300));
    OK(cuMemcpyDtoD_v2(b + 10, a + 20, 100));
    OK(cuMemcpyDtoH_v2(dst, b, 300));
    for (int i = 0; i < 300; i++)
        cr_assert_eq(dst[i], i >= 10 && i < 110 ? (unsigned char)(i + 10) : 0x5a, "byte %d", i);
    /* per-thread default stream variants */
    OK(cuMemsetD8_v2_ptds(a + 299, 7, 1));
    OK(cuMemcpyDtoD_v2_ptds(b, a + 299, 1));
    OK(cuMemcpyHtoD_v2_ptds(b + 1, src + 5, 2));
    OK(cuMemcpyDtoH_v2_ptds(dst, b, 3));
    cr_assert_eq(dst[0], 7);
    cr_assert_eq(dst[1], 5);
    cr_assert_eq(dst[2], 6);
    /* async variants on the legacy, per-thread and a created stream */
    rzcu_stream s;
    OK(cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING));
    OK(cuMemsetD8Async(a, 1, 4, NULL));
    OK(cuMemsetD8Async_ptsz(a + 4, 2, 4, NULL));
    OK(cuStreamSynchronize(NULL));
    OK(cuStreamSynchronize_ptsz(NULL));
    OK(cuMemcpyDtoDAsync_v2(b, a, 8, s));
    OK(cuMemcpyDtoHAsync_v2(dst, b, 8, s));
    OK(cuStreamSynchronize(s));
    cr_assert_eq(memcmp(dst, "\1\1\1\1\2\2\2\2", 8), 0);
    OK(cuMemcpyHtoDAsync_v2_ptsz(a, "xyz", 3, RZCU_STREAM_PER_THREAD));
    OK(cuMemcpyDtoDAsync_v2_ptsz(b, a, 3, NULL));
    OK(cuMemcpyDtoHAsync_v2_ptsz(dst, b, 3, NULL));
    OK(cuStreamSynchronize(RZCU_STREAM_PER_THREAD));
    cr_assert_eq(memcmp(dst, "xyz", 3), 0);
    OK(cuMemcpyHtoDAsync_v2(a, "Q", 1, RZCU_STREAM_LEGACY));
    OK(cuCtxSynchronize());
    OK(cuMemcpyDtoH_v2(dst, a, 1));
    cr_assert_eq(dst[0], 'Q');
    /* zero-length operations succeed and do nothing, whatever the pointers */
    OK(cuMemcpyHtoD_v2(0, NULL, 0));
    OK(cuMemsetD8_v2(12345, 1, 0));
    OK(cuMemcpyDtoDAsync_v2(0, 0, 0, s));
    OK(cuStreamDestroy_v2(s));
}

Test(emu, out_of_range_by_one_byte_fails_and_changes_nothing)
{
    primary_current();
    rzcu_deviceptr a, b;
    OK(cuMemAlloc_v2(&a, 100));
    OK(cuMemAlloc_v2(&b, 100));
    unsigned char ones[101], got[100];
    memset(ones, 1, sizeof ones);
    OK(cuMemsetD8_v2(a, 0, 100));
    OK(cuMemsetD8_v2(b, 0, 100));
    FAILS(cuMemcpyHtoD_v2(a, ones, 101), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemcpyHtoD_v2(a + 50, ones, 51), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemcpyHtoD_v2_ptds(a + 50, ones, 51), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemcpyHtoDAsync_v2(a + 1, ones, 100, NULL), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemsetD8_v2(a, 1, 101), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemsetD8_v2_ptds(a + 99, 1, 2), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemsetD8Async(a + 99, 1, 2, NULL), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemcpyDtoD_v2(b, a, 101), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemcpyDtoD_v2(b + 1, a, 100), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemcpyDtoDAsync_v2(b, a + 1, 100, NULL), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemcpyDtoH_v2(ones, a + 1, 100), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemcpyDtoHAsync_v2(ones, a, 101, NULL), RZCUDA_ERROR_INVALID_VALUE);
    /* a range starting outside any allocation, or crossing into the next one */
    FAILS(cuMemsetD8_v2(a + 100, 1, 1), RZCUDA_ERROR_INVALID_VALUE);
    rzcu_deviceptr lo = a < b ? a : b;
    FAILS(cuMemsetD8_v2(lo + 90, 1, 300), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemcpyHtoD_v2(a, NULL, 1), RZCUDA_ERROR_INVALID_VALUE);
    OK(cuCtxSynchronize());
    OK(cuMemcpyDtoH_v2(got, a, 100));
    for (int i = 0; i < 100; i++)
        cr_assert_eq(got[i], 0, "a[%d] changed", i);
    OK(cuMemcpyDtoH_v2(got, b, 100));
    for (int i = 0; i < 100; i++)
        cr_assert_eq(got[i], 0, "b[%d] changed", i);
    /* exactly up to the end is fine */
    OK(cuMemsetD8_v2(a + 99, 9, 1));
    OK(cuMemcpyHtoD_v2(a, ones, 100));
}

Test(emu, pitch_allocation)
{
    primary_current();
    size_t free0 = free_bytes();
    rzcu_deviceptr p;
    size_t pitch = 0;
    OK(cuMemAllocPitch_v2(&p, &pitch, 100, 10, 4));
    cr_assert_eq(pitch, 512);
    size_t size;
    OK(cuMemGetAddressRange_v2(NULL, &size, p));
    cr_assert_eq(size, 5120);
    cr_assert_eq(free_bytes(), free0 - 5120);
    OK(cuMemsetD8_v2(p + 5119, 1, 1));
    OK(cuMemAllocPitch_v2(&p, &pitch, 513, 2, 16));
    cr_assert_eq(pitch, 1024);
    FAILS(cuMemAllocPitch_v2(&p, &pitch, 100, 10, 3), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemAllocPitch_v2(&p, &pitch, 100, 10, 2), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemAllocPitch_v2(&p, &pitch, 0, 10, 4), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemAllocPitch_v2(&p, &pitch, 100, 0, 4), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemAllocPitch_v2(&p, NULL, 100, 1, 4), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemAllocPitch_v2(&p, &pitch, 1024, SIZE_MAX / 512, 4), RZCUDA_ERROR_INVALID_VALUE);
}

Test(emu, managed_allocation)
{
    primary_current();
    rzcu_deviceptr p;
    FAILS(cuMemAllocManaged(&p, 64, 0), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemAllocManaged(&p, 64, 3), RZCUDA_ERROR_INVALID_VALUE);
    OK(cuMemAllocManaged(&p, 64, RZCU_MEM_ATTACH_HOST));
    OK(cuMemFree_v2(p));
    size_t free0 = free_bytes();
    OK(cuMemAllocManaged(&p, 64, RZCU_MEM_ATTACH_GLOBAL));
    cr_assert_eq(free_bytes(), free0 - 256);
    OK(cuMemcpyHtoD_v2(p, "managed", 8));
    char got[8];
    OK(cuMemcpyDtoH_v2(got, p, 8));
    cr_assert_str_eq(got, "managed");
    FAILS(cuMemsetD8_v2(p, 0, 65), RZCUDA_ERROR_INVALID_VALUE);
    OK(cuMemFree_v2(p));
}

Test(emu, host_allocation)
{
    primary_current();
    void *h = NULL;
    OK(cuMemAllocHost_v2(&h, 10000));
    cr_assert_not_null(h);
    cr_assert_eq((uintptr_t)h % 4096, 0);
    memset(h, 3, 10000);
    rzcu_deviceptr d;
    OK(cuMemAlloc_v2(&d, 10000));
    OK(cuMemcpyHtoD_v2(d, h, 10000));
    unsigned char byte;
    OK(cuMemcpyDtoH_v2(&byte, d + 9999, 1));
    cr_assert_eq(byte, 3);
    FAILS(cuMemAllocHost_v2(NULL, 10), RZCUDA_ERROR_INVALID_VALUE);
    OK(cuMemFreeHost(h));
    FAILS(cuMemFreeHost(h), RZCUDA_ERROR_INVALID_VALUE);
    void *m = malloc(16);
    FAILS(cuMemFreeHost(m), RZCUDA_ERROR_INVALID_VALUE);
    free(m);
    OK(cuMemFreeHost(NULL));
}

Test(emu, out_of_memory)
{
    setenv("CUDA_EMU_MEM", "1048576", 1);
    primary_current();
    size_t f, t;
    OK(cuMemGetInfo_v2(&f, &t));
    cr_assert_eq(t, 1048576);
    cr_assert_eq(f, 1048576);
    rzcu_deviceptr a, b = 0;
    OK(cuMemAlloc_v2(&a, 1048576 - 512));
    FAILS(cuMemAlloc_v2(&b, 513), RZCUDA_ERROR_OUT_OF_MEMORY);
    cr_assert_eq(b, 0);
    OK(cuMemGetInfo_v2(&f, &t));
    cr_assert_eq(f, 512, "a failed allocation takes nothing");
    OK(cuMemAlloc_v2(&b, 512));
    FAILS(cuMemAlloc_v2(&b, 1), RZCUDA_ERROR_OUT_OF_MEMORY);
    OK(cuMemFree_v2(a));
    OK(cuMemAlloc_v2(&a, 2000));
    FAILS(cuMemAlloc_v2(&b, (size_t)1 << 40), RZCUDA_ERROR_OUT_OF_MEMORY);
}

Test(emu, unified_addressing_across_devices)
{
    setenv("CUDA_EMU_DEVICES", "2", 1);
    OK(cuInit(0));
    rzcu_context c0, c1;
    OK(cuCtxCreate_v4(&c0, NULL, 0, 0));
    rzcu_deviceptr d0;
    OK(cuMemAlloc_v2(&d0, 64));
    OK(cuMemcpyHtoD_v2(d0, "dev0", 5));
    size_t f0 = free_bytes();
    OK(cuCtxCreate_v4(&c1, NULL, 0, 1));
    rzcu_device dev;
    OK(cuCtxGetDevice(&dev));
    cr_assert_eq(dev, 1);
    cr_assert_eq(free_bytes(), (size_t)16 << 30, "accounting is per device");
    rzcu_deviceptr d1;
    OK(cuMemAlloc_v2(&d1, 64));
    OK(cuMemcpyDtoD_v2(d1, d0, 5));
    char got[5];
    OK(cuMemcpyDtoH_v2(got, d1, 5));
    cr_assert_str_eq(got, "dev0");
    OK(cuCtxGetDevice_v2(&dev, c0));
    cr_assert_eq(dev, 0);
    OK(cuCtxSynchronize_v2(NULL));
    OK(cuCtxPopCurrent_v2(NULL));
    cr_assert_eq(free_bytes(), f0);
}

/* ---- streams ---- */

Test(emu, stream_runs_asynchronously_in_order)
{
    primary_current();
    rzcu_stream s;
    OK(cuStreamCreate(&s, 0));
    rzcu_deviceptr d;
    OK(cuMemAlloc_v2(&d, 16));
    OK(cuMemcpyHtoD_v2(d, "after-the-gate!", 16));
    char host[16] = "untouched";
    struct gate g = GATE_INIT;
    OK(cuLaunchHostFunc(s, gate_wait_fn, &g));
    OK(cuMemcpyDtoHAsync_v2(host, d, 16, s));
    int done = 0;
    OK(cuLaunchHostFunc(s, set_flag_fn, &done));
    gate_await_entered(&g); /* the host function runs on another thread */
    cr_assert_str_eq(host, "untouched", "the copy ran before the work ahead of it");
    cr_assert_eq(get_flag(&done), 0);
    gate_open(&g);
    OK(cuStreamSynchronize(s));
    cr_assert_str_eq(host, "after-the-gate!");
    cr_assert_eq(get_flag(&done), 1);
    OK(cuStreamDestroy_v2(s));
}

/* cuStreamQuery answers without waiting: NOT_READY while work is queued or running, SUCCESS once it is all
 * complete; the per-thread and legacy streams by their handles; on a stream being captured it is illegal (as
 * synchronising it is) and invalidates the capture. */
Test(emu, stream_query_answers_without_waiting)
{
    primary_current();
    rzcu_stream s;
    OK(cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING));
    OK(cuStreamQuery(s));
    struct gate g = GATE_INIT;
    OK(cuLaunchHostFunc(s, gate_wait_fn, &g));
    FAILS(cuStreamQuery(s), RZCUDA_ERROR_NOT_READY);
    gate_await_entered(&g);
    FAILS(cuStreamQuery(s), RZCUDA_ERROR_NOT_READY);
    OK(cuStreamQuery(NULL)); /* the legacy stream is idle: a non-blocking stream's work is not its own */
    OK(cuStreamQuery(RZCU_STREAM_PER_THREAD));
    gate_open(&g);
    OK(cuStreamSynchronize(s));
    OK(cuStreamQuery(s));
    struct gate p = GATE_INIT;
    OK(cuLaunchHostFunc_ptsz(NULL, gate_wait_fn, &p));
    FAILS(cuStreamQuery_ptsz(NULL), RZCUDA_ERROR_NOT_READY);
    FAILS(cuStreamQuery(RZCU_STREAM_PER_THREAD), RZCUDA_ERROR_NOT_READY);
    gate_open(&p);
    OK(cuStreamSynchronize_ptsz(NULL));
    OK(cuStreamQuery_ptsz(NULL));
    OK(cuStreamBeginCapture_v2(s, 0));
    FAILS(cuStreamQuery(s), RZCUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    struct CUgraph_st *graph;
    FAILS(cuStreamEndCapture(s, &graph), RZCUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    OK(cuStreamDestroy_v2(s));
    FAILS(cuStreamQuery(s), RZCUDA_ERROR_INVALID_HANDLE);
}

Test(emu, legacy_stream_waits_for_blocking_streams)
{
    primary_current();
    rzcu_stream blocking, nonblocking;
    OK(cuStreamCreate(&blocking, RZCU_STREAM_DEFAULT));
    OK(cuStreamCreate(&nonblocking, RZCU_STREAM_NON_BLOCKING));
    struct gate g = GATE_INIT;
    OK(cuLaunchHostFunc(blocking, gate_wait_fn, &g));
    int legacy_done = 0, nb_done = 0;
    OK(cuLaunchHostFunc(NULL, set_flag_fn, &legacy_done));
    OK(cuLaunchHostFunc(nonblocking, set_flag_fn, &nb_done));
    OK(cuStreamSynchronize(nonblocking)); /* a non-blocking stream does not wait */
    cr_assert_eq(get_flag(&nb_done), 1);
    gate_await_entered(&g);
    cr_assert_eq(get_flag(&legacy_done), 0, "legacy stream work ran before the blocking stream's");
    gate_open(&g);
    OK(cuStreamSynchronize(NULL));
    cr_assert_eq(get_flag(&legacy_done), 1);
}

Test(emu, blocking_stream_waits_for_legacy_stream)
{
    primary_current();
    rzcu_stream blocking, nonblocking;
    OK(cuStreamCreate(&blocking, 0));
    OK(cuStreamCreate(&nonblocking, RZCU_STREAM_NON_BLOCKING));
    struct gate g = GATE_INIT;
    OK(cuLaunchHostFunc(RZCU_STREAM_LEGACY, gate_wait_fn, &g));
    int s_done = 0, nb_done = 0, pt_done = 0;
    OK(cuLaunchHostFunc(blocking, set_flag_fn, &s_done));
    OK(cuLaunchHostFunc_ptsz(NULL, set_flag_fn, &pt_done)); /* per-thread stream: blocking too */
    OK(cuLaunchHostFunc(nonblocking, set_flag_fn, &nb_done));
    OK(cuStreamSynchronize(nonblocking));
    cr_assert_eq(get_flag(&nb_done), 1);
    gate_await_entered(&g);
    cr_assert_eq(get_flag(&s_done), 0);
    cr_assert_eq(get_flag(&pt_done), 0);
    gate_open(&g);
    OK(cuStreamSynchronize(blocking));
    cr_assert_eq(get_flag(&s_done), 1);
    OK(cuStreamSynchronize_ptsz(NULL));
    cr_assert_eq(get_flag(&pt_done), 1);
}

Test(emu, stream_errors_and_destroy_with_pending_work)
{
    primary_current();
    rzcu_stream s;
    FAILS(cuStreamCreate(&s, 2), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuStreamCreate(NULL, 0), RZCUDA_ERROR_INVALID_VALUE);
    OK(cuStreamCreate(&s, 0));
    struct gate g = GATE_INIT;
    int done = 0;
    OK(cuLaunchHostFunc(s, gate_wait_fn, &g));
    OK(cuLaunchHostFunc(s, set_flag_fn, &done));
    OK(cuStreamDestroy_v2(s)); /* returns at once */
    FAILS(cuStreamSynchronize(s), RZCUDA_ERROR_INVALID_HANDLE);
    FAILS(cuStreamDestroy_v2(s), RZCUDA_ERROR_INVALID_HANDLE);
    FAILS(cuLaunchHostFunc(s, set_flag_fn, &done), RZCUDA_ERROR_INVALID_HANDLE);
    cr_assert_eq(get_flag(&done), 0);
    gate_open(&g);
    OK(cuCtxSynchronize()); /* the destroyed stream's work still completes */
    cr_assert_eq(get_flag(&done), 1);
    int x;
    FAILS(cuStreamSynchronize((rzcu_stream)&x), RZCUDA_ERROR_INVALID_HANDLE);
    FAILS(cuMemsetD8Async(0, 0, 0, (rzcu_stream)&x), RZCUDA_ERROR_INVALID_HANDLE);
    FAILS(cuStreamDestroy_v2(NULL), RZCUDA_ERROR_INVALID_HANDLE);
    FAILS(cuLaunchHostFunc(NULL, NULL, NULL), RZCUDA_ERROR_INVALID_VALUE);
}

Test(emu, ctx_synchronize_waits_for_all_streams)
{
    primary_current();
    rzcu_stream s[3];
    int done[3] = {0, 0, 0};
    struct gate g = GATE_INIT;
    for (int i = 0; i < 3; i++) {
        OK(cuStreamCreate(&s[i], i == 2 ? RZCU_STREAM_NON_BLOCKING : 0));
        if (i == 2)
            OK(cuLaunchHostFunc(s[i], gate_wait_fn, &g));
        OK(cuLaunchHostFunc(s[i], set_flag_fn, &done[i]));
    }
    gate_await_entered(&g);
    gate_open(&g);
    OK(cuCtxSynchronize());
    for (int i = 0; i < 3; i++)
        cr_assert_eq(get_flag(&done[i]), 1);
}

/* ---- batched copies ---- */

static rzcu_memcpy_attributes attr_order(unsigned order)
{
    rzcu_memcpy_attributes a;
    memset(&a, 0, sizeof a);
    a.srcAccessOrder = order;
    return a;
}

/*
 * Inline execution (the emulator's rule): a copy, memset, batched copy or event record submitted to an idle
 * stream whose dependencies are complete runs in the calling thread before the call returns, as a GPU's
 * copy engines need no host thread; kernels and host functions always run on the stream's worker thread.
 */

#define WORKER_PREFIX "cuda-emu-s"

/* Threads of this process whose name starts with the worker prefix. */
static int count_worker_threads(void)
{
    DIR *d = opendir("/proc/self/task");
    cr_assert_not_null(d);
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        char path[300], comm[32] = {0};
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", de->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue; /* the thread exited meanwhile */
        if (fgets(comm, sizeof comm, f) && strncmp(comm, WORKER_PREFIX, strlen(WORKER_PREFIX)) == 0)
            n++;
        fclose(f);
    }
    closedir(d);
    return n;
}

Test(emu, idle_stream_copies_complete_before_the_call_returns)
{
    primary_current();
    rzcu_deviceptr band;
    OK(cuMemAlloc_v2(&band, 64));
    OK(cuMemcpyHtoD_v2(band, "guard-band-bytes", 16));
    cr_assert_eq(count_worker_threads(), 0);
    /* what redzone's agent does, possibly as the only thread a debugger lets run */
    rzcu_context ctx;
    OK(cuCtxGetCurrent(&ctx));
    OK(cuCtxPushCurrent_v2(ctx));
    rzcu_stream s;
    OK(cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING));
    char host[17] = "untouched";
    OK(cuMemcpyDtoHAsync_v2(host, band, 16, s));
    cr_assert_str_eq(host, "guard-band-bytes", "the async copy had not run when the call returned");
    OK(cuMemsetD8Async(band + 32, 0xab, 8, s));
    unsigned char set[8] = {0};
    OK(cuMemcpyDtoHAsync_v2(set, band + 32, 8, s));
    for (int i = 0; i < 8; i++)
        cr_assert_eq(set[i], 0xab, "byte %d", i);
    OK(cuMemcpyHtoDAsync_v2(band + 48, "HtoD", 4, s));
    OK(cuMemcpyDtoDAsync_v2(band + 52, band + 48, 4, s));
    char out[2][9] = {{0}, {0}};
    rzcu_deviceptr dsts[2] = {(uintptr_t)out[0], (uintptr_t)out[1]}, srcs[2] = {band, band + 48};
    size_t sizes[2] = {8, 8};
    rzcu_memcpy_attributes attrs[1] = {attr_order(RZCU_MEMCPY_SRC_ACCESS_ORDER_STREAM)};
    size_t idxs[1] = {0};
    OK(cuMemcpyBatchAsync_v2(dsts, srcs, sizes, 2, attrs, idxs, 1, s));
    cr_assert_str_eq(out[0], "guard-ba", "the batched copy had not run when the call returned");
    cr_assert_str_eq(out[1], "HtoDHtoD");
    memset(out, 0, sizeof out);
    size_t fail = 0;
    OK(cuMemcpyBatchAsync(dsts, srcs, sizes, 2, attrs, idxs, 1, &fail, s));
    cr_assert_str_eq(out[0], "guard-ba");
    /* synchronising on complete work needs no other thread either */
    rzcu_event e;
    OK(cuEventCreate(&e, 0x2));
    OK(cuEventRecord(e, s));
    OK(cuEventSynchronize(e));
    OK(cuStreamSynchronize(s));
    OK(cuCtxSynchronize());
    OK(cuCtxPopCurrent_v2(NULL));
    /* blocking, legacy and per-thread streams too, when no legacy/blocking work is pending */
    rzcu_stream blocking;
    OK(cuStreamCreate(&blocking, 0));
    memset(host, 0, sizeof host);
    OK(cuMemcpyDtoHAsync_v2(host, band, 4, blocking));
    cr_assert_str_eq(host, "guar");
    OK(cuMemcpyDtoHAsync_v2(host, band + 4, 4, NULL));
    cr_assert_str_eq(host, "d-ba");
    OK(cuMemcpyDtoHAsync_v2_ptsz(host, band + 8, 4, NULL));
    cr_assert_str_eq(host, "nd-b");
    OK(cuEventRecord(e, NULL));
    OK(cuEventSynchronize(e));
    OK(cuStreamSynchronize(NULL));
    cr_assert_eq(count_worker_threads(), 0, "a worker thread ran work of an idle stream");
    OK(cuEventDestroy_v2(e));
    OK(cuStreamDestroy_v2(blocking));
    OK(cuStreamDestroy_v2(s));
}

Test(emu, copies_behind_pending_work_stay_asynchronous)
{
    primary_current();
    rzcu_deviceptr d;
    OK(cuMemAlloc_v2(&d, 16));
    OK(cuMemcpyHtoD_v2(d, "device-content!", 16));
    rzcu_stream s;
    OK(cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING));
    /* queued behind a host function that blocks: nothing runs until it returns */
    struct gate g = GATE_INIT;
    OK(cuLaunchHostFunc(s, gate_wait_fn, &g));
    gate_await_entered(&g); /* running, the queue empty: the stream is still busy */
    char host[16] = "untouched", batch_out[16] = "untouched";
    OK(cuMemcpyDtoHAsync_v2(host, d, 16, s));
    OK(cuMemsetD8Async(d, 'x', 1, s));
    rzcu_deviceptr dsts[1] = {(uintptr_t)batch_out}, srcs[1] = {d};
    size_t sizes[1] = {16}, idxs[1] = {0};
    rzcu_memcpy_attributes attrs[1] = {attr_order(RZCU_MEMCPY_SRC_ACCESS_ORDER_STREAM)};
    OK(cuMemcpyBatchAsync_v2(dsts, srcs, sizes, 1, attrs, idxs, 1, s));
    cr_assert_str_eq(host, "untouched", "a copy ran ahead of the work before it");
    cr_assert_str_eq(batch_out, "untouched");
    gate_open(&g);
    OK(cuStreamSynchronize(s));
    cr_assert_str_eq(host, "device-content!");
    cr_assert_str_eq(batch_out, "xevice-content!");
    /* a blocking stream's copy waits for pending legacy stream work; a non-blocking stream's does not */
    struct gate lg = GATE_INIT;
    rzcu_stream blocking;
    OK(cuStreamCreate(&blocking, 0));
    OK(cuLaunchHostFunc(NULL, gate_wait_fn, &lg));
    char b_host[16] = "untouched", pt_host[16] = "untouched", nb_host[16] = "untouched";
    OK(cuMemcpyDtoHAsync_v2(b_host, d, 16, blocking));
    OK(cuMemcpyDtoHAsync_v2_ptsz(pt_host, d, 16, NULL));
    OK(cuMemcpyDtoHAsync_v2(nb_host, d, 16, s));
    cr_assert_str_eq(nb_host, "xevice-content!", "an idle non-blocking stream waited for the legacy stream");
    gate_await_entered(&lg);
    cr_assert_str_eq(b_host, "untouched", "a blocking stream's copy ran before the legacy stream's work");
    cr_assert_str_eq(pt_host, "untouched");
    gate_open(&lg);
    OK(cuCtxSynchronize());
    cr_assert_str_eq(b_host, "xevice-content!");
    cr_assert_str_eq(pt_host, "xevice-content!");
}

Test(emu, batch_copies_mixed_directions)
{
    primary_current();
    rzcu_stream s;
    OK(cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING));
    rzcu_deviceptr d1, d2;
    OK(cuMemAlloc_v2(&d1, 64));
    OK(cuMemAlloc_v2(&d2, 64));
    OK(cuMemcpyHtoD_v2(d2, "from-device", 12));
    char in[12] = "from-host!!", out[12] = {0};
    rzcu_deviceptr dsts[2] = {d1, (rzcu_deviceptr)(uintptr_t)out};
    rzcu_deviceptr srcs[2] = {(rzcu_deviceptr)(uintptr_t)in, d2};
    size_t sizes[2] = {12, 12};
    rzcu_memcpy_attributes attrs[2] = {attr_order(RZCU_MEMCPY_SRC_ACCESS_ORDER_STREAM),
                                       attr_order(RZCU_MEMCPY_SRC_ACCESS_ORDER_ANY)};
    size_t idxs[2] = {0, 1};
    OK(cuMemcpyBatchAsync_v2(dsts, srcs, sizes, 2, attrs, idxs, 2, s));
    OK(cuStreamSynchronize(s));
    cr_assert_str_eq(out, "from-device");
    char back[12];
    OK(cuMemcpyDtoH_v2(back, d1, 12));
    cr_assert_str_eq(back, "from-host!!");
    /* one attribute for both; the per-thread variant accepts the NULL (per-thread) stream */
    memset(out, 0, sizeof out);
    OK(cuMemcpyBatchAsync_v2_ptsz(dsts, srcs, sizes, 2, attrs, idxs, 1, NULL));
    OK(cuStreamSynchronize_ptsz(NULL));
    cr_assert_str_eq(out, "from-device");
    size_t fail = 7;
    memset(out, 0, sizeof out);
    OK(cuMemcpyBatchAsync(dsts, srcs, sizes, 2, attrs, idxs, 2, &fail, s));
    OK(cuStreamSynchronize(s));
    cr_assert_str_eq(out, "from-device");
    memset(out, 0, sizeof out);
    OK(cuMemcpyBatchAsync_ptsz(dsts, srcs, sizes, 2, attrs, idxs, 2, &fail, RZCU_STREAM_PER_THREAD));
    OK(cuStreamSynchronize(RZCU_STREAM_PER_THREAD));
    cr_assert_str_eq(out, "from-device");
}

Test(emu, batch_source_read_during_api_call)
{
    primary_current();
    rzcu_stream s;
    OK(cuStreamCreate(&s, 0));
    rzcu_deviceptr d;
    OK(cuMemAlloc_v2(&d, 8));
    struct gate g = GATE_INIT;
    OK(cuLaunchHostFunc(s, gate_wait_fn, &g));
    char src[8] = "before", src2[8] = "stream";
    rzcu_deviceptr dsts[2] = {d, d + 4}, srcs[2] = {(uintptr_t)src, (uintptr_t)src2};
    size_t sizes[2] = {4, 4};
    rzcu_memcpy_attributes attrs[2] = {attr_order(RZCU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL),
                                       attr_order(RZCU_MEMCPY_SRC_ACCESS_ORDER_STREAM)};
    size_t idxs[2] = {0, 1};
    OK(cuMemcpyBatchAsync_v2(dsts, srcs, sizes, 2, attrs, idxs, 2, s));
    memcpy(src, "AFTR", 4);  /* DURING_API_CALL: already read */
    memcpy(src2, "LATE", 4); /* STREAM: read in stream order */
    gate_open(&g);
    OK(cuStreamSynchronize(s));
    char got[9] = {0};
    OK(cuMemcpyDtoH_v2(got, d, 8));
    cr_assert_str_eq(got, "befoLATE");
}

Test(emu, batch_validation)
{
    primary_current();
    rzcu_stream s;
    OK(cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING));
    rzcu_deviceptr d;
    OK(cuMemAlloc_v2(&d, 100));
    OK(cuMemsetD8_v2(d, 0, 100));
    char host[200];
    memset(host, 'h', sizeof host);
    rzcu_deviceptr dsts[3] = {d, d + 50, d}, srcs[3] = {(uintptr_t)host, (uintptr_t)host, (uintptr_t)host};
    size_t sizes[3] = {10, 50, 10};
    rzcu_memcpy_attributes attrs[3] = {attr_order(1), attr_order(1), attr_order(1)};
    size_t idxs[3] = {0, 1, 2};
    /* the legacy NULL stream is not supported */
    FAILS(cuMemcpyBatchAsync_v2(dsts, srcs, sizes, 3, attrs, idxs, 1, NULL), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemcpyBatchAsync_v2(dsts, srcs, sizes, 3, attrs, idxs, 1, RZCU_STREAM_LEGACY),
          RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemcpyBatchAsync_v2_ptsz(dsts, srcs, sizes, 3, attrs, idxs, 1, RZCU_STREAM_LEGACY),
          RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemcpyBatchAsync_v2(dsts, srcs, sizes, 0, attrs, idxs, 1, s), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemcpyBatchAsync_v2(dsts, srcs, sizes, 3, attrs, idxs, 0, s), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemcpyBatchAsync_v2(dsts, srcs, sizes, 2, attrs, idxs, 3, s), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemcpyBatchAsync_v2(dsts, srcs, sizes, 3, attrs, NULL, 1, s), RZCUDA_ERROR_INVALID_VALUE);
    size_t bad_first[2] = {1, 2}, not_increasing[2] = {0, 0}, too_big[2] = {0, 3};
    FAILS(cuMemcpyBatchAsync_v2(dsts, srcs, sizes, 3, attrs, bad_first, 2, s), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemcpyBatchAsync_v2(dsts, srcs, sizes, 3, attrs, not_increasing, 2, s), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemcpyBatchAsync_v2(dsts, srcs, sizes, 3, attrs, too_big, 2, s), RZCUDA_ERROR_INVALID_VALUE);
    rzcu_memcpy_attributes bad_order[1] = {attr_order(0)}, bad_order2[1] = {attr_order(4)};
    FAILS(cuMemcpyBatchAsync_v2(dsts, srcs, sizes, 3, bad_order, idxs, 1, s), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemcpyBatchAsync_v2(dsts, srcs, sizes, 3, bad_order2, idxs, 1, s), RZCUDA_ERROR_INVALID_VALUE);
    int x;
    FAILS(cuMemcpyBatchAsync_v2(dsts, srcs, sizes, 3, attrs, idxs, 1, (rzcu_stream)&x), RZCUDA_ERROR_INVALID_HANDLE);
    /* copy 1 crosses the allocation's end by one byte: nothing at all is copied */
    sizes[1] = 51;
    FAILS(cuMemcpyBatchAsync_v2(dsts, srcs, sizes, 3, attrs, idxs, 3, s), RZCUDA_ERROR_INVALID_VALUE);
    size_t fail = 0;
    FAILS(cuMemcpyBatchAsync(dsts, srcs, sizes, 3, attrs, idxs, 3, &fail, s), RZCUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(fail, 1);
    /* device to host crossing the end, at index 2 */
    sizes[1] = 50;
    rzcu_deviceptr dsts2[3] = {d, d + 50, (uintptr_t)host}, srcs2[3] = {(uintptr_t)host, (uintptr_t)host, d + 1};
    size_t sizes2[3] = {10, 50, 100};
    FAILS(cuMemcpyBatchAsync(dsts2, srcs2, sizes2, 3, attrs, idxs, 1, &fail, s), RZCUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(fail, 2);
    FAILS(cuMemcpyBatchAsync(dsts, srcs, sizes, 0, attrs, idxs, 1, &fail, s), RZCUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(fail, SIZE_MAX);
    FAILS(cuMemcpyBatchAsync(dsts, srcs, sizes, 3, attrs, idxs, 1, &fail, NULL), RZCUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(fail, SIZE_MAX);
    OK(cuStreamSynchronize(s));
    unsigned char got[100];
    OK(cuMemcpyDtoH_v2(got, d, 100));
    for (int i = 0; i < 100; i++)
        cr_assert_eq(got[i], 0, "byte %d was copied by a rejected batch", i);
    cr_assert_eq(host[0], 'h');
}

/* ---- stream-ordered allocation ---- */

Test(emu, async_alloc_and_free_in_stream_order)
{
    primary_current();
    size_t f0 = free_bytes();
    rzcu_stream s;
    OK(cuStreamCreate(&s, 0));
    struct gate g = GATE_INIT;
    OK(cuLaunchHostFunc(s, gate_wait_fn, &g));
    rzcu_deviceptr d = 0;
    OK(cuMemAllocAsync(&d, 1000, s)); /* returned at once, while the stream is blocked */
    cr_assert_neq(d, 0);
    cr_assert_eq(d % CUDA_EMU_ALLOC_ALIGN, 0);
    cr_assert_eq(free_bytes(), f0 - 1024);
    rzcu_deviceptr base;
    size_t size;
    OK(cuMemGetAddressRange_v2(&base, &size, d + 10));
    cr_assert_eq(base, d);
    cr_assert_eq(size, 1000);
    char host[1000];
    memset(host, 0, sizeof host);
    OK(cuMemsetD8Async(d, 0x5a, 1000, s));
    OK(cuMemcpyDtoHAsync_v2(host, d, 1000, s));
    OK(cuMemFreeAsync(d, s));
    /* from the free on, later work must not use it: the emulator refuses it */
    FAILS(cuMemsetD8Async(d, 0, 1, s), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemFree_v2(d), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemFreeAsync(d, s), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemGetAddressRange_v2(&base, &size, d), RZCUDA_ERROR_NOT_FOUND);
    gate_await_entered(&g);
    cr_assert_eq(free_bytes(), f0 - 1024, "released before the stream reached the free");
    cr_assert_eq(host[0], 0);
    gate_open(&g);
    OK(cuStreamSynchronize(s));
    cr_assert_eq(free_bytes(), f0);
    for (size_t i = 0; i < sizeof host; i++)
        cr_assert_eq((unsigned char)host[i], 0x5a);
    OK(cuStreamDestroy_v2(s));
}

Test(emu, async_free_of_plain_allocation_and_default_streams)
{
    primary_current();
    size_t f0 = free_bytes();
    rzcu_deviceptr a, b, c;
    OK(cuMemAlloc_v2(&a, 64));
    OK(cuMemFreeAsync(a, NULL)); /* memory from cuMemAlloc may be freed in stream order too */
    OK(cuMemAllocAsync(&b, 64, NULL));                      /* legacy stream */
    OK(cuMemAllocAsync_ptsz(&c, (size_t)4 << 20, NULL));     /* per-thread stream */
    OK(cuMemsetD8_v2(b, 1, 64));
    OK(cuMemsetD8Async_ptsz(c, 2, (size_t)4 << 20, NULL));
    OK(cuMemFreeAsync_ptsz(c, NULL));
    OK(cuMemFree_v2(b)); /* and memory from cuMemAllocAsync with cuMemFree */
    OK(cuMemFreeAsync(0, NULL));
    OK(cuCtxSynchronize());
    cr_assert_eq(free_bytes(), f0);
    FAILS(cuMemFreeAsync(a, NULL), RZCUDA_ERROR_INVALID_VALUE);
    int host_var;
    FAILS(cuMemFreeAsync((rzcu_deviceptr)(uintptr_t)&host_var, NULL), RZCUDA_ERROR_INVALID_VALUE);
    OK(cuMemAllocAsync(&a, 256, NULL));
    FAILS(cuMemFreeAsync(a + 1, NULL), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemAllocAsync(NULL, 64, NULL), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemAllocAsync(&a, 0, NULL), RZCUDA_ERROR_INVALID_VALUE);
    int x;
    FAILS(cuMemAllocAsync(&a, 64, (rzcu_stream)&x), RZCUDA_ERROR_INVALID_HANDLE);
    FAILS(cuMemFreeAsync(a, (rzcu_stream)&x), RZCUDA_ERROR_INVALID_HANDLE);
    OK(cuCtxSetCurrent(NULL));
    FAILS(cuMemAllocAsync(&a, 64, NULL), RZCUDA_ERROR_INVALID_CONTEXT);
    FAILS(cuMemFreeAsync(a, NULL), RZCUDA_ERROR_INVALID_CONTEXT);
}

Test(emu, freed_async_allocation_faults_in_a_kernel, .signal = SIGSEGV)
{
    primary_current();
    rzcu_deviceptr q;
    OK(cuMemAllocAsync(&q, (size_t)4 << 20, NULL));
    OK(cuMemFreeAsync(q, NULL));
    OK(cuStreamSynchronize(NULL));
    *(volatile char *)(uintptr_t)q = 1;
}

Test(emu, default_mem_pools)
{
    setenv("CUDA_EMU_DEVICES", "2", 1);
    setenv("CUDA_EMU_MEM", "1M", 1);
    primary_current();
    rzcu_mem_pool p0 = NULL, p1 = NULL, again = NULL;
    OK(cuDeviceGetDefaultMemPool(&p0, 0));
    OK(cuDeviceGetDefaultMemPool(&p1, 1));
    OK(cuDeviceGetDefaultMemPool(&again, 0));
    cr_assert_not_null(p0);
    cr_assert_neq(p0, p1);
    cr_assert_eq(p0, again);
    FAILS(cuDeviceGetDefaultMemPool(&again, 2), RZCUDA_ERROR_INVALID_DEVICE);
    FAILS(cuDeviceGetDefaultMemPool(NULL, 0), RZCUDA_ERROR_INVALID_VALUE);
    size_t f0 = free_bytes();
    rzcu_deviceptr a, b;
    OK(cuMemAllocFromPoolAsync(&a, 512, p0, NULL));
    cr_assert_eq(free_bytes(), f0 - 512);
    /* a pool of another device: that device's memory */
    OK(cuMemAllocFromPoolAsync_ptsz(&b, 4096, p1, NULL));
    cr_assert_eq(free_bytes(), f0 - 512);
    rzcu_context c1;
    OK(cuDevicePrimaryCtxRetain(&c1, 1));
    OK(cuCtxPushCurrent_v2(c1));
    cr_assert_eq(free_bytes(), ((size_t)1 << 20) - 4096);
    OK(cuCtxPopCurrent_v2(NULL));
    OK(cuMemFreeAsync(b, NULL));
    OK(cuMemFreeAsync(a, NULL));
    OK(cuCtxSynchronize());
    cr_assert_eq(free_bytes(), f0);
    int x;
    FAILS(cuMemAllocFromPoolAsync(&a, 64, (rzcu_mem_pool)&x, NULL), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemAllocFromPoolAsync(&a, 64, NULL, NULL), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemAllocAsync(&a, (size_t)2 << 20, NULL), RZCUDA_ERROR_OUT_OF_MEMORY);
}

/* ---- events ---- */

Test(emu, events_capture_the_work_recorded)
{
    primary_current();
    rzcu_event e;
    FAILS(cuEventCreate(NULL, 0), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuEventCreate(&e, 8), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuEventCreate(&e, 0x4), RZCUDA_ERROR_INVALID_VALUE); /* interprocess needs disable-timing */
    OK(cuEventCreate(&e, 0x4 | 0x2 | 0x1));
    OK(cuEventDestroy_v2(e));
    OK(cuEventCreate(&e, 0));
    OK(cuEventSynchronize(e)); /* never recorded: no work */
    rzcu_stream s;
    OK(cuStreamCreate(&s, 0));
    struct gate g1 = GATE_INIT, g2 = GATE_INIT;
    int a = 0, b = 0;
    OK(cuLaunchHostFunc(s, gate_wait_fn, &g1));
    OK(cuLaunchHostFunc(s, set_flag_fn, &a));
    OK(cuEventRecord(e, s));
    OK(cuLaunchHostFunc(s, gate_wait_fn, &g2));
    OK(cuLaunchHostFunc(s, set_flag_fn, &b));
    gate_open(&g1);
    OK(cuEventSynchronize(e));
    cr_assert_eq(get_flag(&a), 1, "the event completed before the work it captured");
    gate_await_entered(&g2);
    cr_assert_eq(get_flag(&b), 0);
    /* a new record replaces the captured work */
    OK(cuEventRecord(e, s));
    gate_open(&g2);
    OK(cuEventSynchronize(e));
    cr_assert_eq(get_flag(&b), 1);
    OK(cuEventDestroy_v2(e));
    FAILS(cuEventSynchronize(e), RZCUDA_ERROR_INVALID_HANDLE);
    FAILS(cuEventRecord(e, s), RZCUDA_ERROR_INVALID_HANDLE);
    FAILS(cuEventDestroy_v2(e), RZCUDA_ERROR_INVALID_HANDLE);
    FAILS(cuEventDestroy_v2(NULL), RZCUDA_ERROR_INVALID_HANDLE);
    int x;
    FAILS(cuEventSynchronize((rzcu_event)&x), RZCUDA_ERROR_INVALID_HANDLE);
}

Test(emu, event_on_legacy_stream_covers_blocking_streams)
{
    primary_current();
    rzcu_stream s;
    OK(cuStreamCreate(&s, 0));
    struct gate g = GATE_INIT;
    int done = 0;
    OK(cuLaunchHostFunc(s, gate_wait_fn, &g));
    OK(cuLaunchHostFunc(s, set_flag_fn, &done));
    rzcu_event e, pt;
    OK(cuEventCreate(&e, 0x2));
    OK(cuEventCreate(&pt, 0));
    OK(cuEventRecord(e, NULL));
    gate_await_entered(&g);
    gate_open(&g);
    OK(cuEventSynchronize(e));
    cr_assert_eq(get_flag(&done), 1);
    OK(cuEventRecord_ptsz(pt, NULL));
    OK(cuEventSynchronize(pt));
    /* a destroyed event's pending work still completes */
    OK(cuLaunchHostFunc(s, set_flag_fn, &done));
    OK(cuEventRecord(e, s));
    OK(cuEventDestroy_v2(e));
    OK(cuCtxSynchronize());
}

Test(emu, event_and_stream_of_different_contexts)
{
    rzcu_context p = primary_current();
    rzcu_event e;
    OK(cuEventCreate(&e, 0));
    rzcu_context other;
    OK(cuCtxCreate_v4(&other, NULL, 0, 0));
    rzcu_stream s;
    OK(cuStreamCreate(&s, 0));
    FAILS(cuEventRecord(e, s), RZCUDA_ERROR_INVALID_HANDLE);
    FAILS(cuEventRecord(e, NULL), RZCUDA_ERROR_INVALID_HANDLE);
    OK(cuCtxSetCurrent(p));
    OK(cuEventRecord(e, NULL));
    OK(cuEventSynchronize(e));
    while (cuCtxPopCurrent_v2(NULL) == RZCUDA_SUCCESS)
        ;
    FAILS(cuEventCreate(&e, 0), RZCUDA_ERROR_INVALID_CONTEXT);
    FAILS(cuEventRecord(e, NULL), RZCUDA_ERROR_INVALID_CONTEXT);
}

/* ---- modules and kernels ---- */

/* Fills bytes [0, n) of p with v, one thread a byte, over the whole grid. */
CUDA_EMU_KERNEL(emu_test_fill, sizeof(rzcu_deviceptr), sizeof(size_t), sizeof(unsigned char))
{
    unsigned char *p = (unsigned char *)(uintptr_t)CUDA_EMU_PARAM(rzcu_deviceptr, 0);
    size_t n = CUDA_EMU_PARAM(size_t, 1);
    unsigned char v = CUDA_EMU_PARAM(unsigned char, 2);
    size_t threads = (size_t)launch->grid.x * launch->grid.y * launch->grid.z * launch->block.x * launch->block.y *
                     launch->block.z;
    for (size_t t = 0; t < threads && t < n; t++)
        p[t] = v;
}

/* Stores its int parameter at p. */
CUDA_EMU_KERNEL(emu_test_store, sizeof(rzcu_deviceptr), sizeof(int))
{
    int *p = (int *)(uintptr_t)CUDA_EMU_PARAM(rzcu_deviceptr, 0);
    *p = CUDA_EMU_PARAM(int, 1);
}

/* Stores its launch configuration at p. */
CUDA_EMU_KERNEL(emu_test_dims, sizeof(rzcu_deviceptr))
{
    memcpy((void *)(uintptr_t)CUDA_EMU_PARAM(rzcu_deviceptr, 0), launch, sizeof *launch);
}

static int no_params_runs;
CUDA_EMU_KERNEL_NO_PARAMS(emu_test_no_params) { __atomic_add_fetch(&no_params_runs, 1, __ATOMIC_SEQ_CST); }

static rzcu_function get_kernel(const char *name)
{
    rzcu_module m;
    OK(cuModuleLoadData(&m, "// PTX is not interpreted by the emulator\n"));
    rzcu_function f = NULL;
    OK(cuModuleGetFunction(&f, m, name));
    cr_assert_not_null(f);
    return f;
}

/* Where a kernel or host function ran: on the launching thread, or on a worker (its name, then a gate). */
struct where_probe {
    pthread_t caller;
    int on_caller, done;
    char name[16];
    struct gate g;
};

static void where_probe_run(struct where_probe *p)
{
    if (pthread_equal(pthread_self(), p->caller)) {
        __atomic_store_n(&p->on_caller, 1, __ATOMIC_SEQ_CST); /* never block the launching thread */
        return;
    }
    pthread_getname_np(pthread_self(), p->name, sizeof p->name);
    gate_wait_fn(&p->g);
    __atomic_store_n(&p->done, 1, __ATOMIC_SEQ_CST);
}

static void where_probe_fn(void *arg) { where_probe_run(arg); }

CUDA_EMU_KERNEL(emu_test_where, sizeof(rzcu_deviceptr))
{
    where_probe_run((struct where_probe *)(uintptr_t)CUDA_EMU_PARAM(rzcu_deviceptr, 0));
}

Test(emu, kernels_and_host_functions_run_on_named_workers)
{
    primary_current();
    rzcu_function where = get_kernel("emu_test_where");
    for (int kernel = 0; kernel < 2; kernel++) {
        rzcu_stream s;
        OK(cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING));
        struct where_probe p = {.caller = pthread_self(), .g = GATE_INIT};
        if (kernel) {
            rzcu_deviceptr arg = (uintptr_t)&p;
            void *args[] = {&arg};
            OK(cuLaunchKernel(where, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
        } else {
            OK(cuLaunchHostFunc(s, where_probe_fn, &p));
        }
        cr_assert_eq(__atomic_load_n(&p.on_caller, __ATOMIC_SEQ_CST), 0, "%s ran inline on an idle stream",
                     kernel ? "a kernel" : "a host function");
        gate_await_entered(&p.g);
        cr_assert_eq(get_flag(&p.done), 0, "the launch waited for the work to complete");
        cr_assert_eq(strncmp(p.name, WORKER_PREFIX, strlen(WORKER_PREFIX)), 0, "worker named '%s'", p.name);
        cr_assert_geq(count_worker_threads(), 1);
        gate_open(&p.g);
        OK(cuStreamSynchronize(s));
        cr_assert_eq(get_flag(&p.done), 1);
        OK(cuStreamDestroy_v2(s));
    }
}

Test(emu, modules_and_function_lookup)
{
    rzcu_module m;
    OK(cuInit(0));
    FAILS(cuModuleLoadData(&m, "x"), RZCUDA_ERROR_INVALID_CONTEXT);
    primary_current();
    FAILS(cuModuleLoadData(&m, NULL), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuModuleLoadData(NULL, "x"), RZCUDA_ERROR_INVALID_VALUE);
    static const unsigned char cubin[] = {0x7f, 'E', 'L', 'F', 2, 1, 1};
    OK(cuModuleLoadData(&m, cubin));
    rzcu_function f = NULL, f2 = NULL;
    FAILS(cuModuleGetFunction(&f, m, "no_such_kernel"), RZCUDA_ERROR_NOT_FOUND);
    cr_assert_null(f);
    FAILS(cuModuleGetFunction(&f, m, ""), RZCUDA_ERROR_NOT_FOUND);
    FAILS(cuModuleGetFunction(&f, m, NULL), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuModuleGetFunction(NULL, m, "emu_test_fill"), RZCUDA_ERROR_INVALID_VALUE);
    OK(cuModuleGetFunction(&f, m, "emu_test_fill"));
    OK(cuModuleGetFunction(&f2, m, "emu_test_fill"));
    cr_assert_eq(f, f2, "one handle per name");
    const char *name = NULL;
    OK(cuFuncGetName(&name, f));
    cr_assert_str_eq(name, "emu_test_fill");
    FAILS(cuFuncGetName(NULL, f), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuFuncGetName(&name, NULL), RZCUDA_ERROR_INVALID_VALUE);
    /* another module: another handle */
    rzcu_module m2;
    OK(cuModuleLoadData(&m2, "ptx"));
    OK(cuModuleGetFunction(&f2, m2, "emu_test_fill"));
    cr_assert_neq(f, f2);
    /* unloading invalidates the module's functions */
    OK(cuModuleUnload(m));
    FAILS(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL), RZCUDA_ERROR_INVALID_HANDLE);
    FAILS(cuFuncGetName(&name, f), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuModuleGetFunction(&f, m, "emu_test_fill"), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuModuleUnload(m), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuModuleUnload(NULL), RZCUDA_ERROR_INVALID_VALUE);
    OK(cuFuncGetName(&name, f2));
    /* releasing the primary context unloads its modules */
    OK(cuDevicePrimaryCtxRelease_v2(0));
    primary_current();
    FAILS(cuFuncGetName(&name, f2), RZCUDA_ERROR_INVALID_VALUE);
}

Test(emu, kernel_runs_in_stream_order_with_copied_parameters)
{
    primary_current();
    rzcu_function fill = get_kernel("emu_test_fill"), store = get_kernel("emu_test_store");
    rzcu_stream s;
    OK(cuStreamCreate(&s, 0));
    rzcu_deviceptr d, ints;
    OK(cuMemAllocAsync(&d, 256, s));
    OK(cuMemAllocAsync(&ints, 2 * sizeof(int), s));
    OK(cuMemsetD8Async(d, 0, 256, s));
    struct gate g = GATE_INIT;
    OK(cuLaunchHostFunc(s, gate_wait_fn, &g));
    size_t n = 100;
    unsigned char v = 0xc3;
    void *fill_args[] = {&d, &n, &v};
    OK(cuLaunchKernel(fill, 2, 1, 1, 64, 1, 1, 0, s, fill_args, NULL));
    /* the argument storage is reused at once: each launch saw the values of its call */
    int value = 7;
    rzcu_deviceptr where = ints;
    void *store_args[] = {&where, &value};
    OK(cuLaunchKernel(store, 1, 1, 1, 1, 1, 1, 0, s, store_args, NULL));
    value = 8;
    where = ints + sizeof(int);
    OK(cuLaunchKernel(store, 1, 1, 1, 1, 1, 1, 0, s, store_args, NULL));
    value = 9;
    n = 0;
    unsigned char host[256];
    int stored[2] = {0, 0};
    OK(cuMemcpyDtoHAsync_v2(host, d, 256, s));
    OK(cuMemcpyDtoHAsync_v2(stored, ints, sizeof stored, s));
    OK(cuMemFreeAsync(d, s));
    OK(cuMemFreeAsync(ints, s));
    gate_await_entered(&g);
    cr_assert_eq(stored[0], 0, "the kernel ran before the work ahead of it");
    gate_open(&g);
    OK(cuStreamSynchronize(s));
    for (size_t i = 0; i < 256; i++)
        cr_assert_eq(host[i], i < 100 ? 0xc3 : 0, "byte %zu", i);
    cr_assert_eq(stored[0], 7);
    cr_assert_eq(stored[1], 8);
}

Test(emu, kernel_sees_its_launch_configuration)
{
    primary_current();
    rzcu_function dims = get_kernel("emu_test_dims");
    rzcu_deviceptr d;
    OK(cuMemAlloc_v2(&d, sizeof(cuda_emu_launch_t)));
    void *args[] = {&d};
    OK(cuLaunchKernel(dims, 3, 4, 5, 8, 4, 2, 1024, NULL, args, NULL));
    cuda_emu_launch_t got;
    OK(cuMemcpyDtoH_v2(&got, d, sizeof got)); /* legacy stream: after the kernel */
    cr_assert(got.grid.x == 3 && got.grid.y == 4 && got.grid.z == 5);
    cr_assert(got.block.x == 8 && got.block.y == 4 && got.block.z == 2);
    cr_assert_eq(got.shared_bytes, 1024);
    /* cuLaunchKernelEx, with benign attributes, on the per-thread stream */
    struct CUlaunchAttribute_st attrs[3];
    memset(attrs, 0, sizeof attrs);
    attrs[0].id = 2; /* COOPERATIVE */
    attrs[0].value.i = 1;
    attrs[1].id = 8; /* PRIORITY */
    attrs[2].id = 0; /* IGNORE */
    rzcu_launch_config cfg = {7, 1, 1, 32, 2, 1, 0, NULL, attrs, 3};
    OK(cuLaunchKernelEx_ptsz(&cfg, dims, args, NULL));
    OK(cuStreamSynchronize_ptsz(NULL));
    OK(cuMemcpyDtoH_v2(&got, d, sizeof got));
    cr_assert(got.grid.x == 7 && got.block.x == 32 && got.block.y == 2 && got.shared_bytes == 0);
    cfg.numAttrs = 0;
    cfg.attrs = NULL;
    cfg.gridDimX = 9;
    OK(cuLaunchKernelEx(&cfg, dims, args, NULL));
    OK(cuMemcpyDtoH_v2(&got, d, sizeof got));
    cr_assert_eq(got.grid.x, 9);
    /* no parameters: NULL params, or an empty extra list */
    rzcu_function none = get_kernel("emu_test_no_params");
    void *empty_extra[] = {NULL};
    OK(cuLaunchKernel(none, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
    OK(cuLaunchKernel_ptsz(none, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, empty_extra));
    OK(cuCtxSynchronize());
    cr_assert_eq(__atomic_load_n(&no_params_runs, __ATOMIC_SEQ_CST), 2);
}

Test(emu, launch_validation)
{
    primary_current();
    rzcu_function f = get_kernel("emu_test_dims");
    rzcu_deviceptr d;
    OK(cuMemAlloc_v2(&d, sizeof(cuda_emu_launch_t)));
    void *args[] = {&d};
    FAILS(cuLaunchKernel(f, 0, 1, 1, 1, 1, 1, 0, NULL, args, NULL), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuLaunchKernel(f, 1, 1, 0, 1, 1, 1, 0, NULL, args, NULL), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuLaunchKernel(f, 1, 1, 1, 1, 0, 1, 0, NULL, args, NULL), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuLaunchKernel(f, 1, 1, 1, 32, 32, 2, 0, NULL, args, NULL), RZCUDA_ERROR_INVALID_VALUE); /* 2048 */
    FAILS(cuLaunchKernel(f, 1, 1, 1, 1025, 1, 1, 0, NULL, args, NULL), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuLaunchKernel(f, 1, 1, 1, 1, 1, 65, 0, NULL, args, NULL), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuLaunchKernel(f, 1, 65536, 1, 1, 1, 1, 0, NULL, args, NULL), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 49153, NULL, args, NULL), RZCUDA_ERROR_INVALID_VALUE);
    OK(cuLaunchKernel(f, 2147483647u, 65535, 65535, 32, 32, 1, 49152, NULL, args, NULL)); /* the limits */
    FAILS(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL), RZCUDA_ERROR_INVALID_VALUE);
    void *empty_extra[] = {NULL};
    FAILS(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, args, empty_extra), RZCUDA_ERROR_INVALID_VALUE);
    size_t size = sizeof d;
    void *extra[] = {(void *)1, &d, (void *)2, &size, NULL}; /* CU_LAUNCH_PARAM_BUFFER_POINTER/SIZE */
    FAILS(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, extra), RZCUDA_ERROR_NOT_SUPPORTED);
    FAILS(cuLaunchKernel(NULL, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL), RZCUDA_ERROR_INVALID_HANDLE);
    int x;
    FAILS(cuLaunchKernel((rzcu_function)&x, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL), RZCUDA_ERROR_INVALID_HANDLE);
    FAILS(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, (rzcu_stream)&x, args, NULL), RZCUDA_ERROR_INVALID_HANDLE);
    /* cuLaunchKernelEx: the configuration and its attributes */
    FAILS(cuLaunchKernelEx(NULL, f, args, NULL), RZCUDA_ERROR_INVALID_VALUE);
    rzcu_launch_config cfg = {1, 1, 1, 1, 1, 1, 0, NULL, NULL, 1};
    FAILS(cuLaunchKernelEx(&cfg, f, args, NULL), RZCUDA_ERROR_INVALID_VALUE);
    struct CUlaunchAttribute_st attr;
    memset(&attr, 0, sizeof attr);
    cfg.attrs = &attr;
    attr.id = 4; /* CLUSTER_DIMENSION */
    FAILS(cuLaunchKernelEx(&cfg, f, args, NULL), RZCUDA_ERROR_NOT_SUPPORTED);
    attr.id = 12; /* LAUNCH_COMPLETION_EVENT */
    FAILS(cuLaunchKernelEx(&cfg, f, args, NULL), RZCUDA_ERROR_NOT_SUPPORTED);
    attr.id = 99;
    FAILS(cuLaunchKernelEx(&cfg, f, args, NULL), RZCUDA_ERROR_INVALID_VALUE);
    attr.id = 1; /* ACCESS_POLICY_WINDOW */
    cfg.blockDimX = 2000;
    FAILS(cuLaunchKernelEx(&cfg, f, args, NULL), RZCUDA_ERROR_INVALID_VALUE);
    cfg.blockDimX = 1;
    OK(cuLaunchKernelEx(&cfg, f, args, NULL));
    /* a function of another context */
    rzcu_context other;
    OK(cuCtxCreate_v4(&other, NULL, 0, 0));
    FAILS(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL), RZCUDA_ERROR_INVALID_HANDLE);
    OK(cuCtxDestroy_v2(other));
    OK(cuCtxSynchronize());
}

Test(emu, kernel_launch_fault_injection_and_counts)
{
    primary_current();
    rzcu_function f = get_kernel("emu_test_store");
    rzcu_deviceptr d;
    OK(cuMemAlloc_v2(&d, sizeof(int)));
    OK(cuMemsetD8_v2(d, 0, sizeof(int)));
    int value = 5;
    void *args[] = {&d, &value};
    cuEmuResetCallCounts();
    cr_assert_eq(cuEmuInjectFailure("cuLaunchKernel", 1, RZCUDA_ERROR_ILLEGAL_ADDRESS), 0);
    FAILS(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL), RZCUDA_ERROR_ILLEGAL_ADDRESS);
    int got = -1;
    OK(cuMemcpyDtoH_v2(&got, d, sizeof got));
    cr_assert_eq(got, 0, "an injected failure launches nothing");
    OK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
    OK(cuMemcpyDtoH_v2(&got, d, sizeof got));
    cr_assert_eq(got, 5);
    cr_assert_eq(cuEmuCallCount("cuLaunchKernel"), 2);
    cr_assert_eq(cuEmuCallCount("cuLaunchKernel_ptsz"), 0);
    cr_assert_eq(cuEmuInjectFailure("cuEventRecord_ptsz", 1, RZCUDA_ERROR_UNKNOWN), 0);
    rzcu_event e;
    OK(cuEventCreate(&e, 0));
    FAILS(cuEventRecord_ptsz(e, NULL), RZCUDA_ERROR_UNKNOWN);
}

Test(emu, async_alloc_fault_injection_by_env)
{
    setenv("CUDA_EMU_FAIL", "cuMemAllocAsync:2,cuModuleGetFunction:1:CUDA_ERROR_NOT_FOUND", 1);
    primary_current();
    rzcu_deviceptr a, b = 0;
    size_t f0 = free_bytes();
    OK(cuMemAllocAsync(&a, 64, NULL));
    FAILS(cuMemAllocAsync(&b, 64, NULL), RZCUDA_ERROR_OUT_OF_MEMORY); /* the default for allocations */
    cr_assert_eq(b, 0);
    cr_assert_eq(free_bytes(), f0 - 256);
    rzcu_module m;
    OK(cuModuleLoadData(&m, "x"));
    rzcu_function f;
    FAILS(cuModuleGetFunction(&f, m, "emu_test_store"), RZCUDA_ERROR_NOT_FOUND);
    OK(cuModuleGetFunction(&f, m, "emu_test_store"));
}

/* ---- cuGetProcAddress ---- */

Test(emu, get_proc_address)
{
    void *fn = NULL;
    rzcu_proc_query_result st = 99;
    OK(cuGetProcAddress_v2("cuMemAlloc", &fn, 13000, RZCU_GET_PROC_ADDRESS_DEFAULT, &st));
    cr_assert_eq(fn, (void *)&cuMemAlloc_v2);
    cr_assert_eq(st, RZCU_GET_PROC_ADDRESS_SUCCESS);
    OK(cuGetProcAddress_v2("cuMemcpyHtoD", &fn, 12000, RZCU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
    cr_assert_eq(fn, (void *)&cuMemcpyHtoD_v2_ptds);
    OK(cuGetProcAddress_v2("cuMemcpyHtoD", &fn, 12000, RZCU_GET_PROC_ADDRESS_LEGACY_STREAM, &st));
    cr_assert_eq(fn, (void *)&cuMemcpyHtoD_v2);
    OK(cuGetProcAddress_v2("cuMemcpyHtoD", &fn, 12000, RZCU_GET_PROC_ADDRESS_DEFAULT, &st));
    cr_assert_eq(fn, (void *)&cuMemcpyHtoD_v2);
    OK(cuGetProcAddress_v2("cuMemsetD8Async", &fn, 13000, RZCU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
    cr_assert_eq(fn, (void *)&cuMemsetD8Async_ptsz);
    OK(cuGetProcAddress_v2("cuCtxCreate", &fn, 12050, 0, &st));
    cr_assert_eq(fn, (void *)&cuCtxCreate_v4);
    OK(cuGetProcAddress_v2("cuInit", &fn, 12000, RZCU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
    cr_assert_eq(fn, (void *)&cuInit, "no per-thread variant: the legacy one");
    OK(cuGetProcAddress_v2("cuCtxSynchronize", &fn, 12090, 0, &st));
    cr_assert_eq(fn, (void *)&cuCtxSynchronize);
    OK(cuGetProcAddress_v2("cuCtxSynchronize", &fn, 13000, 0, &st));
    cr_assert_eq(fn, (void *)&cuCtxSynchronize_v2);
    /* batch: the 12.8 signature below 13.0 */
    OK(cuGetProcAddress_v2("cuMemcpyBatchAsync", &fn, 12080, 0, &st));
    cr_assert_eq(fn, (void *)&cuMemcpyBatchAsync);
    OK(cuGetProcAddress_v2("cuMemcpyBatchAsync", &fn, 12090, RZCU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
    cr_assert_eq(fn, (void *)&cuMemcpyBatchAsync_ptsz);
    OK(cuGetProcAddress_v2("cuMemcpyBatchAsync", &fn, 13000, 0, &st));
    cr_assert_eq(fn, (void *)&cuMemcpyBatchAsync_v2);
    OK(cuGetProcAddress_v2("cuMemcpyBatchAsync", &fn, 13000, RZCU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
    cr_assert_eq(fn, (void *)&cuMemcpyBatchAsync_v2_ptsz);
    /* version too low */
    fn = (void *)1;
    FAILS(cuGetProcAddress_v2("cuMemcpyBatchAsync", &fn, 12060, 0, &st), RZCUDA_ERROR_NOT_FOUND);
    cr_assert_null(fn);
    cr_assert_eq(st, RZCU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    FAILS(cuGetProcAddress_v2("cuCtxCreate", &fn, 12000, 0, &st), RZCUDA_ERROR_NOT_FOUND);
    cr_assert_eq(st, RZCU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    /* unknown symbol; a versioned name is not a base name */
    fn = (void *)1;
    FAILS(cuGetProcAddress_v2("cuNoSuchThing", &fn, 13000, 0, &st), RZCUDA_ERROR_NOT_FOUND);
    cr_assert_null(fn);
    cr_assert_eq(st, RZCU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    FAILS(cuGetProcAddress_v2("cuMemAlloc_v2", &fn, 13000, 0, &st), RZCUDA_ERROR_NOT_FOUND);
    cr_assert_eq(st, RZCU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    /* cuGetProcAddress itself */
    OK(cuGetProcAddress_v2("cuGetProcAddress", &fn, 12000, 0, &st));
    cr_assert_eq(fn, (void *)&cuGetProcAddress_v2);
    OK(cuGetProcAddress_v2("cuGetProcAddress", &fn, 11030, 0, &st));
    cr_assert_eq(fn, (void *)&cuGetProcAddress);
    /* invalid arguments; a version above the driver's is invalid, as documented */
    FAILS(cuGetProcAddress_v2(NULL, &fn, 13000, 0, &st), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuGetProcAddress_v2("cuInit", NULL, 13000, 0, &st), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuGetProcAddress_v2("cuInit", &fn, 13010, 0, &st), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuGetProcAddress_v2("cuInit", &fn, 13000, 8, &st), RZCUDA_ERROR_INVALID_VALUE);
    OK(cuGetProcAddress_v2("cuInit", &fn, 13000, 0, NULL));
    /* the CUDA 11.3 entry point */
    OK(cuGetProcAddress("cuMemcpyDtoHAsync", &fn, 11030, RZCU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM));
    cr_assert_eq(fn, (void *)&cuMemcpyDtoHAsync_v2_ptsz);
    OK(cuGetProcAddress("cuGetProcAddress", &fn, 12000, 0));
    cr_assert_eq(fn, (void *)&cuGetProcAddress_v2);
    FAILS(cuGetProcAddress("cuBogus", &fn, 12000, 0), RZCUDA_ERROR_NOT_FOUND);
    FAILS(cuGetProcAddress("cuMemAlloc", &fn, 3000, 0), RZCUDA_ERROR_NOT_FOUND);
    cr_assert_null(fn);
    /* stream-ordered allocation, events, modules and launches */
    struct {
        const char *name;
        int version;
        rzcu_uint64 flags;
        void *want;
    } cases[] = {
        {"cuMemAllocAsync", 11020, 0, (void *)&cuMemAllocAsync},
        {"cuMemAllocAsync", 11020, RZCU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, (void *)&cuMemAllocAsync_ptsz},
        {"cuMemAllocFromPoolAsync", 13000, RZCU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
         (void *)&cuMemAllocFromPoolAsync_ptsz},
        {"cuMemAllocFromPoolAsync", 13000, RZCU_GET_PROC_ADDRESS_LEGACY_STREAM, (void *)&cuMemAllocFromPoolAsync},
        {"cuMemFreeAsync", 12000, 0, (void *)&cuMemFreeAsync},
        {"cuMemFreeAsync", 12000, RZCU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, (void *)&cuMemFreeAsync_ptsz},
        {"cuDeviceGetDefaultMemPool", 11020, RZCU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
         (void *)&cuDeviceGetDefaultMemPool},
        {"cuEventCreate", 2000, 0, (void *)&cuEventCreate},
        {"cuEventRecord", 2000, RZCU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, (void *)&cuEventRecord},
        {"cuEventRecord", 7000, RZCU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, (void *)&cuEventRecord_ptsz},
        {"cuEventSynchronize", 13000, 0, (void *)&cuEventSynchronize},
        {"cuEventDestroy", 4000, 0, (void *)&cuEventDestroy_v2},
        {"cuModuleLoadData", 2000, 0, (void *)&cuModuleLoadData},
        {"cuModuleUnload", 13000, 0, (void *)&cuModuleUnload},
        {"cuModuleGetFunction", 13000, 0, (void *)&cuModuleGetFunction},
        {"cuFuncGetName", 12030, 0, (void *)&cuFuncGetName},
        {"cuLaunchKernel", 4000, RZCU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, (void *)&cuLaunchKernel},
        {"cuLaunchKernel", 7000, RZCU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, (void *)&cuLaunchKernel_ptsz},
        {"cuLaunchKernel", 13000, 0, (void *)&cuLaunchKernel},
        {"cuLaunchKernelEx", 11060, 0, (void *)&cuLaunchKernelEx},
        {"cuLaunchKernelEx", 12000, RZCU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, (void *)&cuLaunchKernelEx_ptsz},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        st = 99;
        OK(cuGetProcAddress_v2(cases[i].name, &fn, cases[i].version, cases[i].flags, &st));
        cr_assert_eq(fn, cases[i].want, "%s %d", cases[i].name, cases[i].version);
        cr_assert_eq(st, RZCU_GET_PROC_ADDRESS_SUCCESS);
    }
    OK(cuGetProcAddress("cuLaunchKernel", &fn, 11030, RZCU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM));
    cr_assert_eq(fn, (void *)&cuLaunchKernel_ptsz);
    struct {
        const char *name;
        int version;
    } too_old[] = {{"cuMemAllocAsync", 11010}, {"cuMemFreeAsync", 11010}, {"cuDeviceGetDefaultMemPool", 11010},
                   {"cuLaunchKernelEx", 11050}, {"cuFuncGetName", 12020}, {"cuLaunchKernel", 3020},
                   {"cuEventDestroy", 3020}};
    for (size_t i = 0; i < sizeof too_old / sizeof too_old[0]; i++) {
        FAILS(cuGetProcAddress_v2(too_old[i].name, &fn, too_old[i].version, 0, &st), RZCUDA_ERROR_NOT_FOUND);
        cr_assert_eq(st, RZCU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT, "%s", too_old[i].name);
        cr_assert_null(fn);
    }
    FAILS(cuGetProcAddress_v2("cuEventDestroy_v2", &fn, 13000, 0, &st), RZCUDA_ERROR_NOT_FOUND);
    cr_assert_eq(st, RZCU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    /* the returned pointer works */
    rzcu_fn_cuDriverGetVersion *get_version;
    OK(cuGetProcAddress_v2("cuDriverGetVersion", &fn, 13000, 0, &st));
    get_version = (rzcu_fn_cuDriverGetVersion *)(uintptr_t)fn;
    int v = 0;
    OK(get_version(&v));
    cr_assert_eq(v, 13000);
}

/* ---- errors ---- */

Test(emu, error_names_and_strings)
{
    const char *s = NULL;
#define CHECK_NAME(name, value)                                                                              \
    OK(cuGetErrorName(value, &s));                                                                           \
    cr_assert_str_eq(s, #name);                                                                              \
    OK(cuGetErrorString(value, &s));                                                                         \
    cr_assert(s && *s, #name " has a description");
    RZCU_RESULTS(CHECK_NAME)
#undef CHECK_NAME
    OK(cuGetErrorString(RZCUDA_ERROR_INVALID_VALUE, &s));
    cr_assert_str_eq(s, "invalid argument");
    OK(cuGetErrorString(RZCUDA_ERROR_OUT_OF_MEMORY, &s));
    cr_assert_str_eq(s, "out of memory");
    OK(cuGetErrorName(719, &s));
    cr_assert_str_eq(s, "CUDA_ERROR_LAUNCH_FAILED");
    s = "x";
    FAILS(cuGetErrorName(12345, &s), RZCUDA_ERROR_INVALID_VALUE);
    cr_assert_null(s);
    s = "x";
    FAILS(cuGetErrorString(12345, &s), RZCUDA_ERROR_INVALID_VALUE);
    cr_assert_null(s);
    FAILS(cuGetErrorName(0, NULL), RZCUDA_ERROR_INVALID_VALUE);
}

/* ---- call counts and fault injection ---- */

Test(emu, call_counts)
{
    primary_current();
    cr_assert_eq(cuEmuCallCount("cuInit"), 1);
    cuEmuResetCallCounts();
    cr_assert_eq(cuEmuCallCount("cuInit"), 0);
    rzcu_deviceptr p;
    OK(cuMemAlloc_v2(&p, 64));
    FAILS(cuMemAlloc_v2(&p, 0), RZCUDA_ERROR_INVALID_VALUE); /* failed calls count too */
    OK(cuMemAlloc_v2(&p, 64));
    OK(cuMemsetD8_v2_ptds(p, 0, 1));
    cr_assert_eq(cuEmuCallCount("cuMemAlloc_v2"), 3);
    cr_assert_eq(cuEmuCallCount("cuMemsetD8_v2_ptds"), 1);
    cr_assert_eq(cuEmuCallCount("cuMemsetD8_v2"), 0);
    cr_assert_eq(cuEmuCallCount("cuMemFree_v2"), 0);
    cr_assert_eq(cuEmuCallCount("cuNope"), 0);
    cr_assert_eq(cuEmuCallCount(NULL), 0);
}

Test(emu, stats_printed_at_exit)
{
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        dup2(fds[1], 2);
        close(fds[0]);
        setenv("CUDA_EMU_STATS", "1", 1);
        int v;
        cuDriverGetVersion(&v);
        cuDriverGetVersion(&v);
        cuInit(0);
        exit(0);
    }
    close(fds[1]);
    char buf[4096];
    size_t n = 0;
    ssize_t r;
    while ((r = read(fds[0], buf + n, sizeof buf - 1 - n)) > 0)
        n += (size_t)r;
    buf[n] = '\0';
    int status;
    waitpid(pid, &status, 0);
    /* (a sanitizer may append its own report) */
    const char *want = "cuda-emu: cuInit 1\ncuda-emu: cuDriverGetVersion 2\n";
    cr_assert_eq(strncmp(buf, want, strlen(want)), 0, "stderr was: %s", buf);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

Test(emu, fault_injection_by_api)
{
    primary_current();
    cr_assert_eq(cuEmuInjectFailure("cuNope", 1, RZCUDA_ERROR_UNKNOWN), -1);
    cr_assert_eq(cuEmuInjectFailure("cuMemAlloc_v2", 0, RZCUDA_ERROR_UNKNOWN), -1);
    cr_assert_eq(cuEmuInjectFailure("cuMemAlloc_v2", 1, RZCUDA_SUCCESS), -1);
    size_t free0 = free_bytes();
    cr_assert_eq(cuEmuInjectFailure("cuMemAlloc_v2", 2, RZCUDA_ERROR_OUT_OF_MEMORY), 0);
    rzcu_deviceptr a, b = 0, c;
    OK(cuMemAlloc_v2(&a, 64));
    FAILS(cuMemAlloc_v2(&b, 64), RZCUDA_ERROR_OUT_OF_MEMORY);
    cr_assert_eq(b, 0);
    cr_assert_eq(free_bytes(), free0 - 256, "the failed call allocated nothing");
    OK(cuMemAlloc_v2(&c, 64));
    /* an injected failure does nothing: the memset is skipped */
    OK(cuMemsetD8_v2(a, 1, 64));
    cr_assert_eq(cuEmuInjectFailure("cuMemsetD8_v2", 1, RZCUDA_ERROR_ILLEGAL_ADDRESS), 0);
    FAILS(cuMemsetD8_v2(a, 2, 64), RZCUDA_ERROR_ILLEGAL_ADDRESS);
    unsigned char byte;
    OK(cuMemcpyDtoH_v2(&byte, a, 1));
    cr_assert_eq(byte, 1);
    cr_assert_eq(cuEmuInjectFailure("cuMemFree_v2", 1, RZCUDA_ERROR_UNKNOWN), 0);
    cuEmuClearFailures();
    OK(cuMemFree_v2(a));
}

Test(emu, fault_injection_by_env)
{
    setenv("CUDA_EMU_FAIL", "cuMemAlloc_v2:2,cuStreamCreate:1:CUDA_ERROR_NOT_PERMITTED,cuMemsetD8_v2:1,cuCtxSynchronize:1:700",
           1);
    primary_current();
    rzcu_deviceptr a;
    OK(cuMemAlloc_v2(&a, 64));
    FAILS(cuMemAlloc_v2(&a, 64), RZCUDA_ERROR_OUT_OF_MEMORY); /* default for allocations */
    OK(cuMemAlloc_v2(&a, 64));
    rzcu_stream s;
    FAILS(cuStreamCreate(&s, 0), RZCUDA_ERROR_NOT_PERMITTED);
    OK(cuStreamCreate(&s, 0));
    FAILS(cuMemsetD8_v2(a, 0, 1), RZCUDA_ERROR_UNKNOWN); /* default otherwise */
    OK(cuMemsetD8_v2(a, 0, 1));
    FAILS(cuCtxSynchronize(), RZCUDA_ERROR_ILLEGAL_ADDRESS);
    OK(cuCtxSynchronize());
}

Test(emu, fault_injection_counts_from_reset)
{
    setenv("CUDA_EMU_FAIL", "cuDriverGetVersion:3", 1);
    int v;
    OK(cuDriverGetVersion(&v));
    OK(cuDriverGetVersion(&v));
    cr_assert_eq(cuEmuInjectFailure("cuDeviceGetCount", 1, RZCUDA_ERROR_NOT_SUPPORTED), 0);
    cuEmuResetCallCounts();
    int n;
    FAILS(cuDeviceGetCount(&n), RZCUDA_ERROR_NOT_SUPPORTED); /* still the next call */
    OK(cuDriverGetVersion(&v));
    OK(cuDriverGetVersion(&v));
    FAILS(cuDriverGetVersion(&v), RZCUDA_ERROR_UNKNOWN);
    OK(cuDriverGetVersion(&v));
}

Test(emu, malformed_fail_env_warns, .init = cr_redirect_stderr)
{
    setenv("CUDA_EMU_FAIL", "cuMemAlloc_v2:0", 1);
    primary_current();
    rzcu_deviceptr a;
    OK(cuMemAlloc_v2(&a, 64));
    fflush(stderr);
    cr_assert_stderr_eq_str("cuda-emu: warning: malformed CUDA_EMU_FAIL=\"cuMemAlloc_v2:0\" (want <entry "
                            "point>:<nth>[:<error>][,...]); no failures injected\n");
}

/* ---- scale and concurrency ---- */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

Test(emu, one_million_allocations, .timeout = 60)
{
    primary_current();
    enum { N = 1000000 };
    size_t free0 = free_bytes();
    rzcu_deviceptr *p = malloc(N * sizeof *p);
    cr_assert_not_null(p);
    double t0 = now_s();
    for (size_t i = 0; i < N; i++) {
        rzcu_result r = cuMemAlloc_v2(&p[i], 64);
        if (r != RZCUDA_SUCCESS)
            cr_assert_fail("allocation %zu failed with %u", i, r);
    }
    cr_assert_eq(free_bytes(), free0 - (size_t)N * 256);
    rzcu_deviceptr base;
    size_t size;
    OK(cuMemGetAddressRange_v2(&base, &size, p[N / 2] + 63));
    cr_assert_eq(base, p[N / 2]);
    cr_assert_eq(size, 64);
    for (size_t i = 0; i < N; i++) {
        rzcu_result r = cuMemFree_v2(p[i]);
        if (r != RZCUDA_SUCCESS)
            cr_assert_fail("free %zu failed with %u", i, r);
    }
    double elapsed = now_s() - t0;
    cr_assert_eq(free_bytes(), free0);
    cr_assert_lt(elapsed, 5.0, "1M allocations + frees took %.2f s", elapsed);
    free(p);
}

struct mt_arg {
    rzcu_context ctx;
    int id;
    pthread_barrier_t *barrier;
    rzcu_deviceptr *ptrs;
    size_t *sizes;
    int n;
    int errors;
};

static void *mt_worker(void *p)
{
    struct mt_arg *a = p;
    if (cuCtxSetCurrent(a->ctx) != RZCUDA_SUCCESS)
        a->errors++;
    unsigned seed = (unsigned)a->id * 7919u + 1;
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < a->n; i++) {
            seed = seed * 1103515245u + 12345u;
            a->sizes[i] = 1 + (seed >> 8) % (round == 2 ? 300000 : 5000);
            if (cuMemAlloc_v2(&a->ptrs[i], a->sizes[i]) != RZCUDA_SUCCESS)
                a->errors++;
            /* mark both ends (the whole allocation when small) with the thread's id */
            size_t n = a->sizes[i] <= 8192 ? a->sizes[i] : 1;
            if (cuMemsetD8_v2(a->ptrs[i], (unsigned char)a->id, n) != RZCUDA_SUCCESS ||
                cuMemsetD8_v2(a->ptrs[i] + a->sizes[i] - 1, (unsigned char)a->id, 1) != RZCUDA_SUCCESS)
                a->errors++;
        }
        pthread_barrier_wait(a->barrier); /* everybody's allocations are live here */
        pthread_barrier_wait(a->barrier); /* the main thread checked overlaps */
        for (int i = 0; i < a->n; i++) {
            unsigned char first, last;
            if (cuMemcpyDtoH_v2(&first, a->ptrs[i], 1) || cuMemcpyDtoH_v2(&last, a->ptrs[i] + a->sizes[i] - 1, 1))
                a->errors++;
            if (first != (unsigned char)a->id || last != (unsigned char)a->id)
                a->errors++;
            if (cuMemFree_v2(a->ptrs[i]) != RZCUDA_SUCCESS)
                a->errors++;
        }
    }
    return NULL;
}

struct range {
    rzcu_deviceptr base;
    size_t size;
};

static int cmp_range(const void *x, const void *y)
{
    const struct range *a = x, *b = y;
    return a->base < b->base ? -1 : a->base > b->base;
}

Test(emu, multithreaded_alloc_free_no_overlap, .timeout = 120)
{
    rzcu_context ctx = primary_current();
    enum { T = 8, N = 2000 };
    size_t free0 = free_bytes();
    pthread_barrier_t barrier;
    pthread_barrier_init(&barrier, NULL, T + 1);
    struct mt_arg args[T];
    pthread_t th[T];
    for (int t = 0; t < T; t++) {
        args[t] = (struct mt_arg){ctx, t + 1, &barrier, calloc(N, sizeof(rzcu_deviceptr)), calloc(N, sizeof(size_t)),
                                  N, 0};
        pthread_create(&th[t], NULL, mt_worker, &args[t]);
    }
    struct range *all = malloc(sizeof *all * T * N);
    for (int round = 0; round < 3; round++) {
        pthread_barrier_wait(&barrier);
        size_t k = 0;
        for (int t = 0; t < T; t++)
            for (int i = 0; i < N; i++)
                all[k++] = (struct range){args[t].ptrs[i], args[t].sizes[i]};
        qsort(all, k, sizeof *all, cmp_range);
        for (size_t i = 1; i < k; i++)
            cr_assert_leq(all[i - 1].base + all[i - 1].size, all[i].base, "allocations overlap");
        pthread_barrier_wait(&barrier);
    }
    for (int t = 0; t < T; t++) {
        pthread_join(th[t], NULL);
        cr_assert_eq(args[t].errors, 0, "thread %d saw %d errors", t, args[t].errors);
        free(args[t].ptrs);
        free(args[t].sizes);
    }
    free(all);
    cr_assert_eq(free_bytes(), free0);
}

Test(emu, pointer_context_and_device_attributes)
{
    OK(cuInit(0));
    rzcu_context a, b, owner = NULL;
    OK(cuCtxCreate_v4(&a, NULL, 0, 0));
    rzcu_deviceptr da, db;
    OK(cuMemAlloc_v2(&da, 1000));
    OK(cuCtxCreate_v4(&b, NULL, 0, 0)); /* now current: b */
    OK(cuMemAlloc_v2(&db, 16));
    OK(cuPointerGetAttribute(&owner, RZCU_POINTER_ATTRIBUTE_CONTEXT, da + 999)); /* inside, from b */
    cr_assert_eq(owner, a, "the allocating context, not the current one");
    OK(cuPointerGetAttribute(&owner, RZCU_POINTER_ATTRIBUTE_CONTEXT, db));
    cr_assert_eq(owner, b);
    int ordinal = -1;
    OK(cuPointerGetAttribute(&ordinal, RZCU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, db));
    cr_assert_eq(ordinal, 0);
    FAILS(cuPointerGetAttribute(&owner, RZCU_POINTER_ATTRIBUTE_CONTEXT, da + 1000), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuPointerGetAttribute(NULL, RZCU_POINTER_ATTRIBUTE_CONTEXT, da), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuPointerGetAttribute(&owner, 2 /* DEVICE_POINTER: not emulated */, da), RZCUDA_ERROR_NOT_SUPPORTED);
    OK(cuCtxDestroy_v2(a));
    /* freed with its context */
    FAILS(cuPointerGetAttribute(&owner, RZCU_POINTER_ATTRIBUTE_CONTEXT, da), RZCUDA_ERROR_INVALID_VALUE);
    OK(cuCtxDestroy_v2(b));
}

Test(emu, host_register_and_unregister)
{
    static char buf[3 * 4096], other[64];
    FAILS(cuMemHostRegister_v2(buf, sizeof buf, RZCU_MEMHOSTREGISTER_PORTABLE), RZCUDA_ERROR_NOT_INITIALIZED);
    primary_current();
    FAILS(cuMemHostRegister_v2(NULL, 16, 0), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemHostRegister_v2(buf, 0, 0), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemHostRegister_v2(buf, 16, 0x100), RZCUDA_ERROR_INVALID_VALUE);
    OK(cuMemHostRegister_v2(buf, sizeof buf, RZCU_MEMHOSTREGISTER_PORTABLE));
    FAILS(cuMemHostRegister_v2(buf + 4096, 16, 0), RZCUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
    OK(cuMemHostRegister_v2(other, sizeof other, 0));
    FAILS(cuMemHostUnregister(buf + 1), RZCUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
    OK(cuMemHostUnregister(buf));
    FAILS(cuMemHostUnregister(buf), RZCUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
    OK(cuMemHostUnregister(other));
    OK(cuCtxSetCurrent(NULL));
    FAILS(cuMemHostRegister_v2(buf, sizeof buf, 0), RZCUDA_ERROR_INVALID_CONTEXT);
}

/* ---- virtual memory management ---- */

#define VMM_G CUDA_EMU_VMM_GRANULARITY

static rzcu_mem_allocation_prop vmm_prop(int device)
{
    rzcu_mem_allocation_prop p;
    memset(&p, 0, sizeof p);
    p.type = RZCU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = RZCU_MEM_LOCATION_TYPE_DEVICE;
    p.location.id = device;
    return p;
}

static rzcu_mem_access_desc vmm_access(int device, unsigned flags)
{
    rzcu_mem_access_desc d;
    memset(&d, 0, sizeof d);
    d.location.type = RZCU_MEM_LOCATION_TYPE_DEVICE;
    d.location.id = device;
    d.flags = flags;
    return d;
}

/* A guard allocation: `size` bytes ending exactly where the one mapped granule of a two-granule reservation
 * ends; the second granule stays reserved and unmapped. */
struct guard {
    rzcu_deviceptr base, buf;
    rzcu_mem_generic_alloc_handle h;
    size_t size;
};

static struct guard guard_alloc(size_t size)
{
    struct guard g = {.size = size};
    rzcu_mem_allocation_prop prop = vmm_prop(0);
    rzcu_mem_access_desc rw = vmm_access(0, RZCU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    OK(cuMemAddressReserve(&g.base, 2 * VMM_G, 0, 0, 0));
    OK(cuMemCreate(&g.h, VMM_G, &prop, 0));
    OK(cuMemMap(g.base, VMM_G, 0, g.h, 0));
    OK(cuMemSetAccess(g.base, VMM_G, &rw, 1));
    g.buf = g.base + VMM_G - size;
    return g;
}

static void guard_free(struct guard *g)
{
    OK(cuMemUnmap(g->base, VMM_G));
    OK(cuMemRelease(g->h));
    OK(cuMemAddressFree(g->base, 2 * VMM_G));
}

static cuda_emu_vmm_usage_t vmm_usage(void)
{
    cuda_emu_vmm_usage_t u;
    memset(&u, 0xff, sizeof u);
    cuEmuVmmUsage(&u);
    return u;
}

/*
 * The test passes only when the first SIGSEGV is an access to exactly `addr`: the handler checks the
 * faulting address, then restores the default action so the access faults again and ends the test with
 * the signal (.signal = SIGSEGV); a fault anywhere else exits with status 3 instead.
 */
static volatile uintptr_t expected_fault;

static void exact_fault_handler(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    if ((uintptr_t)si->si_addr != expected_fault)
        _exit(3);
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigaction(sig, &dfl, NULL);
}

static void expect_fault_at(uintptr_t addr)
{
    expected_fault = addr;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = exact_fault_handler;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    cr_assert_eq(sigaction(SIGSEGV, &sa, NULL), 0);
}

/* Writes bytes [0, n) of p, one at a time, in order (byte i = i). */
CUDA_EMU_KERNEL(emu_test_vmm_write, sizeof(rzcu_deviceptr), sizeof(size_t))
{
    volatile unsigned char *p = (volatile unsigned char *)(uintptr_t)CUDA_EMU_PARAM(rzcu_deviceptr, 0);
    size_t n = CUDA_EMU_PARAM(size_t, 1);
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)i;
}

static void launch_vmm_write(rzcu_deviceptr p, size_t n)
{
    rzcu_function f = get_kernel("emu_test_vmm_write");
    void *params[] = {&p, &n};
    OK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL));
}

Test(emu, vmm_granularity)
{
    rzcu_mem_allocation_prop prop = vmm_prop(0);
    size_t g = 0;
    FAILS(cuMemGetAllocationGranularity(&g, &prop, RZCU_MEM_ALLOC_GRANULARITY_MINIMUM), RZCUDA_ERROR_NOT_INITIALIZED);
    OK(cuInit(0)); /* no context needed */
    OK(cuMemGetAllocationGranularity(&g, &prop, RZCU_MEM_ALLOC_GRANULARITY_MINIMUM));
    cr_assert_eq(g, (size_t)2 << 20);
    g = 0;
    OK(cuMemGetAllocationGranularity(&g, &prop, RZCU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
    cr_assert_eq(g, VMM_G);
    FAILS(cuMemGetAllocationGranularity(NULL, &prop, 0), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemGetAllocationGranularity(&g, NULL, 0), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemGetAllocationGranularity(&g, &prop, 2), RZCUDA_ERROR_INVALID_VALUE);
    prop.requestedHandleTypes = RZCU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    OK(cuMemGetAllocationGranularity(&g, &prop, 0));
    prop.requestedHandleTypes = 0x8; /* FABRIC */
    FAILS(cuMemGetAllocationGranularity(&g, &prop, 0), RZCUDA_ERROR_NOT_SUPPORTED);
    prop.requestedHandleTypes = 0x10;
    FAILS(cuMemGetAllocationGranularity(&g, &prop, 0), RZCUDA_ERROR_INVALID_VALUE);
    prop = vmm_prop(0);
    prop.type = 2; /* MANAGED */
    FAILS(cuMemGetAllocationGranularity(&g, &prop, 0), RZCUDA_ERROR_INVALID_VALUE);
    prop = vmm_prop(1);
    FAILS(cuMemGetAllocationGranularity(&g, &prop, 0), RZCUDA_ERROR_INVALID_DEVICE);
    prop = vmm_prop(0);
    prop.location.type = 2; /* HOST */
    FAILS(cuMemGetAllocationGranularity(&g, &prop, 0), RZCUDA_ERROR_NOT_SUPPORTED);
    prop.location.type = 0;
    FAILS(cuMemGetAllocationGranularity(&g, &prop, 0), RZCUDA_ERROR_INVALID_VALUE);
    prop = vmm_prop(0);
    prop.win32HandleMetaData = &g;
    FAILS(cuMemGetAllocationGranularity(&g, &prop, 0), RZCUDA_ERROR_INVALID_VALUE);
}

Test(emu, vmm_guard_allocation_copies_memsets_and_kernels)
{
    primary_current();
    size_t before = free_bytes();
    struct guard g = guard_alloc(1000);
    cr_assert_eq(before - free_bytes(), VMM_G, "physical memory counts against the device");
    cr_assert_eq(g.base % VMM_G, 0);
    cr_assert_eq(g.buf + g.size, g.base + VMM_G);

    unsigned char in[1000], out[1000];
    for (size_t i = 0; i < sizeof in; i++)
        in[i] = (unsigned char)(i * 7);
    OK(cuMemcpyHtoD_v2(g.buf, in, sizeof in));
    OK(cuMemcpyDtoH_v2(out, g.buf, sizeof out));
    cr_assert_arr_eq(out, in, sizeof in);
    cr_assert_eq(((unsigned char *)(uintptr_t)g.buf)[999], in[999], "the host sees the same bytes");
    OK(cuMemsetD8_v2(g.buf + 500, 0xab, 500));
    OK(cuMemcpyDtoD_v2(g.buf, g.buf + 500, 100));
    OK(cuMemcpyDtoH_v2(out, g.buf, sizeof out));
    cr_assert_eq(out[0], 0xab);
    cr_assert_eq(out[99], 0xab);
    cr_assert_eq(out[100], in[100]);
    cr_assert_eq(out[999], 0xab);
    /* with an ordinary allocation on the other side */
    rzcu_deviceptr d;
    OK(cuMemAlloc_v2(&d, 1000));
    OK(cuMemcpyDtoD_v2(d, g.buf, 1000));
    OK(cuMemcpyDtoD_v2(g.buf, d, 1000));

    /* a kernel writes the whole buffer, up to its last byte */
    launch_vmm_write(g.buf, g.size);
    OK(cuCtxSynchronize());
    OK(cuMemcpyDtoH_v2(out, g.buf, sizeof out));
    for (size_t i = 0; i < sizeof out; i++)
        cr_assert_eq(out[i], (unsigned char)i);

    /* what the other entry points say about it */
    rzcu_deviceptr base = 0;
    size_t size = 0;
    OK(cuMemGetAddressRange_v2(&base, &size, g.buf + 10));
    cr_assert_eq(base, g.base, "the mapping");
    cr_assert_eq(size, VMM_G);
    FAILS(cuMemGetAddressRange_v2(&base, &size, g.base + VMM_G), RZCUDA_ERROR_NOT_FOUND);
    int ordinal = -1;
    OK(cuPointerGetAttribute(&ordinal, RZCU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, g.buf));
    cr_assert_eq(ordinal, 0);
    rzcu_context owner;
    FAILS(cuPointerGetAttribute(&owner, RZCU_POINTER_ATTRIBUTE_CONTEXT, g.buf), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemFree_v2(g.base), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemFreeAsync(g.base, NULL), RZCUDA_ERROR_INVALID_VALUE);
    OK(cuMemFree_v2(d));
    guard_free(&g);
    cr_assert_eq(free_bytes(), before);
}

Test(emu, vmm_copies_outside_accessible_mappings_fail_and_change_nothing)
{
    primary_current();
    struct guard g = guard_alloc(256);
    unsigned char in[512], out[256];
    memset(in, 0x5a, sizeof in);
    OK(cuMemsetD8_v2(g.buf, 0x11, 256));
    /* one byte past the mapped end */
    FAILS(cuMemcpyHtoD_v2(g.buf, in, 257), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemcpyHtoD_v2(g.buf + 1, in, 256), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemsetD8_v2(g.buf, 0, 257), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemcpyDtoH_v2(in, g.buf, 257), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemcpyDtoD_v2(g.buf - 1, g.buf, 257), RZCUDA_ERROR_INVALID_VALUE);
    /* the reserved, unmapped granule */
    FAILS(cuMemcpyHtoD_v2(g.base + VMM_G, in, 1), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemsetD8Async(g.base + VMM_G + 4096, 0, 1, NULL), RZCUDA_ERROR_INVALID_VALUE);
    OK(cuMemcpyDtoH_v2(out, g.buf, sizeof out));
    for (size_t i = 0; i < sizeof out; i++)
        cr_assert_eq(out[i], 0x11, "byte %zu changed", i);

    /* mapped, but no access given yet */
    rzcu_mem_allocation_prop prop = vmm_prop(0);
    rzcu_mem_generic_alloc_handle h;
    OK(cuMemCreate(&h, VMM_G, &prop, 0));
    OK(cuMemMap(g.base + VMM_G, VMM_G, 0, h, 0));
    FAILS(cuMemcpyHtoD_v2(g.base + VMM_G, in, 1), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemcpyDtoH_v2(in, g.base + VMM_G, 1), RZCUDA_ERROR_INVALID_VALUE);
    /* with access on both, a copy still may not cross from one mapping into the next */
    rzcu_mem_access_desc rw = vmm_access(0, RZCU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    OK(cuMemSetAccess(g.base, 2 * VMM_G, &rw, 1)); /* one call over both mappings */
    OK(cuMemcpyHtoD_v2(g.base + VMM_G, in, 512));
    FAILS(cuMemcpyHtoD_v2(g.buf, in, 512), RZCUDA_ERROR_INVALID_VALUE);

    /* batched copies check every range */
    rzcu_stream s;
    OK(cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING));
    rzcu_deviceptr host_in = (rzcu_deviceptr)(uintptr_t)in;
    rzcu_deviceptr dsts[2] = {g.buf, g.buf + 128}, srcs[2] = {host_in, host_in};
    size_t sizes[2] = {128, 129}, idxs[1] = {0}, fail = 9;
    rzcu_memcpy_attributes attrs[1] = {attr_order(RZCU_MEMCPY_SRC_ACCESS_ORDER_STREAM)};
    FAILS(cuMemcpyBatchAsync(dsts, srcs, sizes, 2, attrs, idxs, 1, &fail, s), RZCUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(fail, 1);
    sizes[1] = 128;
    OK(cuMemcpyBatchAsync(dsts, srcs, sizes, 2, attrs, idxs, 1, &fail, s));
    OK(cuStreamSynchronize(s));
    OK(cuMemcpyDtoH_v2(out, g.buf, sizeof out));
    cr_assert_eq(out[255], 0x5a);
    OK(cuMemUnmap(g.base + VMM_G, VMM_G));
    OK(cuMemRelease(h));
    guard_free(&g);
}

Test(emu, vmm_one_handle_mapped_twice_shows_the_same_bytes)
{
    primary_current();
    rzcu_mem_allocation_prop prop = vmm_prop(0);
    rzcu_mem_access_desc rw = vmm_access(0, RZCU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    rzcu_mem_generic_alloc_handle h;
    rzcu_deviceptr a, b;
    OK(cuMemCreate(&h, 2 * VMM_G, &prop, 0));
    OK(cuMemAddressReserve(&a, 2 * VMM_G, 0, 0, 0));
    OK(cuMemAddressReserve(&b, VMM_G, 0, 0, 0));
    OK(cuMemMap(a, 2 * VMM_G, 0, h, 0));
    OK(cuMemMap(b, VMM_G, VMM_G, h, 0)); /* the handle's second granule, a second time */
    OK(cuMemSetAccess(a, 2 * VMM_G, &rw, 1));
    OK(cuMemSetAccess(b, VMM_G, &rw, 1));
    cr_assert_eq(vmm_usage().mapped_bytes, 3 * VMM_G);
    cr_assert_eq(vmm_usage().physical_bytes, 2 * VMM_G, "mapped twice, created once");
    OK(cuMemcpyHtoD_v2(a + VMM_G + 100, "shared", 7));
    char out[7] = {0};
    OK(cuMemcpyDtoH_v2(out, b + 100, 7));
    cr_assert_str_eq(out, "shared");
    OK(cuMemsetD8_v2(b + 100, 'S', 1));
    cr_assert_eq(((char *)(uintptr_t)a)[VMM_G + 100], 'S');
    /* released while mapped: the memory lives on through its mappings */
    OK(cuMemRelease(h));
    FAILS(cuMemRelease(h), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemMap(b, VMM_G, 0, h, 0), RZCUDA_ERROR_INVALID_VALUE); /* the handle is gone */
    OK(cuMemUnmap(a, 2 * VMM_G));
    memset(out, 0, sizeof out);
    OK(cuMemcpyDtoH_v2(out, b + 100, 7));
    cr_assert_str_eq(out, "Shared");
    cr_assert_eq(vmm_usage().physical_bytes, 2 * VMM_G);
    OK(cuMemUnmap(b, VMM_G));
    cr_assert_eq(vmm_usage().physical_bytes, 0, "freed with its last mapping");
    OK(cuMemAddressFree(a, 2 * VMM_G));
    OK(cuMemAddressFree(b, VMM_G));
}

Test(emu, vmm_argument_errors)
{
    primary_current();
    rzcu_mem_allocation_prop prop = vmm_prop(0);
    rzcu_mem_access_desc rw = vmm_access(0, RZCU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    rzcu_deviceptr r;
    rzcu_mem_generic_alloc_handle h, h2;
    /* reserve */
    FAILS(cuMemAddressReserve(NULL, VMM_G, 0, 0, 0), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemAddressReserve(&r, 0, 0, 0, 0), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemAddressReserve(&r, 1000, 0, 0, 0), RZCUDA_ERROR_INVALID_VALUE); /* not a page multiple */
    FAILS(cuMemAddressReserve(&r, VMM_G, 3, 0, 0), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemAddressReserve(&r, VMM_G, 0, 12345, 0), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemAddressReserve(&r, VMM_G, 0, 0, 1), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemAddressReserve(&r, (size_t)1 << 62, 0, 0, 0), RZCUDA_ERROR_OUT_OF_MEMORY);
    OK(cuMemAddressReserve(&r, 4 * VMM_G, 0, 0, 0));
    /* create */
    FAILS(cuMemCreate(NULL, VMM_G, &prop, 0), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemCreate(&h, VMM_G, NULL, 0), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemCreate(&h, VMM_G / 2, &prop, 0), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemCreate(&h, 0, &prop, 0), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemCreate(&h, VMM_G, &prop, 1), RZCUDA_ERROR_INVALID_VALUE);
    prop.location.id = 7;
    FAILS(cuMemCreate(&h, VMM_G, &prop, 0), RZCUDA_ERROR_INVALID_DEVICE);
    prop.location.id = 0;
    OK(cuMemCreate(&h, 2 * VMM_G, &prop, 0));
    OK(cuMemCreate(&h2, VMM_G, &prop, 0));
    cr_assert_neq(h, h2);
    /* map */
    FAILS(cuMemMap(r + 4096, VMM_G, 0, h, 0), RZCUDA_ERROR_INVALID_VALUE);       /* misaligned address */
    FAILS(cuMemMap(r, VMM_G + 4096, 0, h, 0), RZCUDA_ERROR_INVALID_VALUE);       /* misaligned size */
    FAILS(cuMemMap(r, VMM_G, 4096, h, 0), RZCUDA_ERROR_INVALID_VALUE);           /* misaligned offset */
    FAILS(cuMemMap(r, 2 * VMM_G, VMM_G, h, 0), RZCUDA_ERROR_INVALID_VALUE);      /* past the handle's end */
    FAILS(cuMemMap(r, 3 * VMM_G, 0, h, 0), RZCUDA_ERROR_INVALID_VALUE);          /* bigger than the handle */
    FAILS(cuMemMap(r + 3 * VMM_G, 2 * VMM_G, 0, h, 0), RZCUDA_ERROR_INVALID_VALUE); /* past the reservation */
    FAILS(cuMemMap(r, VMM_G, 0, 12345, 0), RZCUDA_ERROR_INVALID_VALUE);          /* not a handle */
    FAILS(cuMemMap(r, VMM_G, 0, h, 1), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemMap(r, 0, 0, h, 0), RZCUDA_ERROR_INVALID_VALUE);
    rzcu_deviceptr plain;
    OK(cuMemAlloc_v2(&plain, (size_t)4 << 20));
    /* not reserved */
    FAILS(cuMemMap(plain & ~(rzcu_deviceptr)(VMM_G - 1), VMM_G, 0, h, 0), RZCUDA_ERROR_INVALID_VALUE);
    OK(cuMemMap(r + VMM_G, 2 * VMM_G, 0, h, 0));
    FAILS(cuMemMap(r + VMM_G, VMM_G, 0, h2, 0), RZCUDA_ERROR_INVALID_VALUE); /* already mapped */
    FAILS(cuMemMap(r, 2 * VMM_G, 0, h, 0), RZCUDA_ERROR_INVALID_VALUE);      /* overlaps a mapping */
    OK(cuMemMap(r, VMM_G, 0, h2, 0));
    /* set access */
    FAILS(cuMemSetAccess(r, VMM_G, NULL, 1), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemSetAccess(r, VMM_G, &rw, 0), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemSetAccess(r + 4096, VMM_G, &rw, 1), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemSetAccess(r, 4 * VMM_G, &rw, 1), RZCUDA_ERROR_INVALID_VALUE); /* the last granule is not mapped */
    rzcu_mem_access_desc bad = vmm_access(0, 2);
    FAILS(cuMemSetAccess(r, VMM_G, &bad, 1), RZCUDA_ERROR_INVALID_VALUE);
    bad = vmm_access(3, RZCU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    FAILS(cuMemSetAccess(r, VMM_G, &bad, 1), RZCUDA_ERROR_INVALID_DEVICE);
    bad.location.type = 3; /* HOST_NUMA */
    bad.location.id = 0;
    FAILS(cuMemSetAccess(r, VMM_G, &bad, 1), RZCUDA_ERROR_INVALID_VALUE);
    OK(cuMemSetAccess(r + VMM_G, VMM_G, &rw, 1)); /* part of a mapping */
    OK(cuMemSetAccess(r, 3 * VMM_G, &rw, 1));     /* two mappings */
    /* unmap */
    FAILS(cuMemUnmap(r + VMM_G, VMM_G), RZCUDA_ERROR_INVALID_VALUE);     /* part of a mapping */
    FAILS(cuMemUnmap(r + 3 * VMM_G, VMM_G), RZCUDA_ERROR_INVALID_VALUE); /* not mapped */
    FAILS(cuMemUnmap(r, 4 * VMM_G), RZCUDA_ERROR_INVALID_VALUE);         /* ends in an unmapped granule */
    FAILS(cuMemUnmap(r, 0), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemUnmap(plain, VMM_G), RZCUDA_ERROR_INVALID_VALUE);
    OK(cuMemUnmap(r, 3 * VMM_G)); /* both mappings at once */
    FAILS(cuMemUnmap(r, VMM_G), RZCUDA_ERROR_INVALID_VALUE);
    OK(cuMemMap(r, VMM_G, 0, h2, 0)); /* a range is reserved again once unmapped */
    OK(cuMemUnmap(r, VMM_G));
    /* release and free */
    FAILS(cuMemRelease(12345), RZCUDA_ERROR_INVALID_VALUE);
    OK(cuMemRelease(h));
    OK(cuMemRelease(h2));
    FAILS(cuMemRelease(h2), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemAddressFree(r, VMM_G), RZCUDA_ERROR_INVALID_VALUE);     /* not the reserved size */
    FAILS(cuMemAddressFree(r + VMM_G, 3 * VMM_G), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemAddressFree(plain, 4 * VMM_G), RZCUDA_ERROR_INVALID_VALUE);
    OK(cuMemAddressFree(r, 4 * VMM_G));
    FAILS(cuMemAddressFree(r, 4 * VMM_G), RZCUDA_ERROR_INVALID_VALUE);
    OK(cuMemFree_v2(plain));
    cuda_emu_vmm_usage_t u = vmm_usage();
    cr_assert_eq(u.physical_bytes + u.allocations + u.reserved_bytes + u.mapped_bytes, 0);
}

Test(emu, vmm_read_only_access)
{
    primary_current();
    struct guard g = guard_alloc(64);
    OK(cuMemcpyHtoD_v2(g.buf, "read me", 8));
    rzcu_mem_access_desc ro = vmm_access(0, RZCU_MEM_ACCESS_FLAGS_PROT_READ);
    OK(cuMemSetAccess(g.base, VMM_G, &ro, 1));
    char out[8];
    OK(cuMemcpyDtoH_v2(out, g.buf, 8));
    cr_assert_str_eq(out, "read me");
    cr_assert_str_eq((const char *)(uintptr_t)g.buf, "read me", "the host may read it");
    FAILS(cuMemcpyHtoD_v2(g.buf, "no", 3), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemsetD8_v2(g.buf, 0, 1), RZCUDA_ERROR_INVALID_VALUE);
    rzcu_deviceptr d;
    OK(cuMemAlloc_v2(&d, 64));
    OK(cuMemcpyDtoD_v2(d, g.buf, 8));
    FAILS(cuMemcpyDtoD_v2(g.buf, d, 8), RZCUDA_ERROR_INVALID_VALUE);
    rzcu_mem_access_desc none = vmm_access(0, RZCU_MEM_ACCESS_FLAGS_PROT_NONE);
    OK(cuMemSetAccess(g.base, VMM_G, &none, 1));
    FAILS(cuMemcpyDtoH_v2(out, g.buf, 8), RZCUDA_ERROR_INVALID_VALUE);
    guard_free(&g);
}

Test(emu, vmm_access_is_per_device)
{
    setenv("CUDA_EMU_DEVICES", "2", 1);
    primary_current();
    rzcu_mem_allocation_prop prop = vmm_prop(1);
    rzcu_mem_generic_alloc_handle h;
    rzcu_deviceptr r;
    OK(cuMemAddressReserve(&r, VMM_G, 0, 0, 0));
    OK(cuMemCreate(&h, VMM_G, &prop, 0));
    OK(cuMemMap(r, VMM_G, 0, h, 0));
    int ordinal = -1;
    OK(cuPointerGetAttribute(&ordinal, RZCU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, r));
    cr_assert_eq(ordinal, 1, "the device the memory was created on");
    rzcu_mem_access_desc both[2] = {vmm_access(0, RZCU_MEM_ACCESS_FLAGS_PROT_READWRITE),
                                    vmm_access(1, RZCU_MEM_ACCESS_FLAGS_PROT_READ)};
    OK(cuMemSetAccess(r, VMM_G, both, 2));
    OK(cuMemsetD8_v2(r, 1, 16));
    both[0].flags = RZCU_MEM_ACCESS_FLAGS_PROT_NONE;
    OK(cuMemSetAccess(r, VMM_G, both, 1)); /* device 1 keeps its read access */
    FAILS(cuMemsetD8_v2(r, 1, 16), RZCUDA_ERROR_INVALID_VALUE);
    unsigned char out[16];
    OK(cuMemcpyDtoH_v2(out, r, 16));
    cr_assert_eq(out[15], 1);
    /* VMM memory is the device's, not the context's: it outlives the primary context */
    OK(cuDevicePrimaryCtxRelease_v2(0));
    rzcu_context ctx;
    OK(cuDevicePrimaryCtxRetain(&ctx, 0));
    OK(cuCtxSetCurrent(ctx));
    OK(cuMemcpyDtoH_v2(out, r, 16));
    cr_assert_eq(out[0], 1);
    OK(cuMemAddressFree(r, VMM_G)); /* still mapped: unmapped with the range */
    cr_assert_eq(vmm_usage().mapped_bytes, 0);
    cr_assert_eq(vmm_usage().physical_bytes, VMM_G, "not released yet");
    OK(cuMemRelease(h));
    cr_assert_eq(vmm_usage().physical_bytes, 0);
}

/* A write one byte past the end faults at that byte, from the host... */
Test(emu, vmm_host_write_past_mapped_end_faults_there, .signal = SIGSEGV)
{
    primary_current();
    struct guard g = guard_alloc(100);
    volatile unsigned char *p = (volatile unsigned char *)(uintptr_t)g.buf;
    for (size_t i = 0; i < g.size; i++)
        p[i] = 1;
    expect_fault_at(g.buf + g.size);
    p[g.size] = 1;
}

Test(emu, vmm_host_read_past_mapped_end_faults_there, .signal = SIGSEGV)
{
    primary_current();
    struct guard g = guard_alloc(100);
    volatile unsigned char *p = (volatile unsigned char *)(uintptr_t)g.buf;
    unsigned sum = 0;
    for (size_t i = 0; i < g.size; i++)
        sum += p[i];
    expect_fault_at(g.buf + g.size);
    sum += p[g.size];
    cr_log_info("%u", sum);
}

/* ... and from a kernel, which loops over the buffer and one byte more. */
Test(emu, vmm_kernel_write_past_mapped_end_faults_there, .signal = SIGSEGV)
{
    primary_current();
    struct guard g = guard_alloc(100);
    expect_fault_at(g.buf + g.size);
    launch_vmm_write(g.buf, g.size + 1);
    OK(cuCtxSynchronize());
}

Test(emu, vmm_mapped_without_access_faults, .signal = SIGSEGV)
{
    primary_current();
    rzcu_mem_allocation_prop prop = vmm_prop(0);
    rzcu_mem_generic_alloc_handle h;
    rzcu_deviceptr r;
    OK(cuMemAddressReserve(&r, VMM_G, 0, 0, 0));
    OK(cuMemCreate(&h, VMM_G, &prop, 0));
    OK(cuMemMap(r, VMM_G, 0, h, 0));
    expect_fault_at(r + 4096);
    (void)*(volatile char *)(uintptr_t)(r + 4096);
}

Test(emu, vmm_write_to_read_only_mapping_faults, .signal = SIGSEGV)
{
    primary_current();
    struct guard g = guard_alloc(100);
    rzcu_mem_access_desc ro = vmm_access(0, RZCU_MEM_ACCESS_FLAGS_PROT_READ);
    OK(cuMemSetAccess(g.base, VMM_G, &ro, 1));
    cr_assert_eq(*(volatile char *)(uintptr_t)g.buf, 0);
    expect_fault_at(g.buf);
    *(volatile char *)(uintptr_t)g.buf = 1;
}

Test(emu, vmm_unmapped_memory_faults_again, .signal = SIGSEGV)
{
    primary_current();
    struct guard g = guard_alloc(100);
    *(volatile char *)(uintptr_t)g.buf = 1;
    OK(cuMemUnmap(g.base, VMM_G));
    expect_fault_at(g.buf);
    *(volatile char *)(uintptr_t)g.buf = 1;
}

Test(emu, vmm_full_release_in_every_order)
{
    primary_current();
    size_t before = free_bytes();
    rzcu_mem_allocation_prop prop = vmm_prop(0);
    rzcu_mem_access_desc rw = vmm_access(0, RZCU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    for (int order = 0; order < 3; order++) {
        rzcu_mem_generic_alloc_handle h;
        rzcu_deviceptr r;
        OK(cuMemAddressReserve(&r, 2 * VMM_G, 0, 0, 0));
        OK(cuMemCreate(&h, VMM_G, &prop, 0));
        OK(cuMemMap(r, VMM_G, 0, h, 0));
        OK(cuMemSetAccess(r, VMM_G, &rw, 1));
        OK(cuMemsetD8_v2(r, 0xee, VMM_G));
        cuda_emu_vmm_usage_t u = vmm_usage();
        cr_assert_eq(u.physical_bytes, VMM_G);
        cr_assert_eq(u.allocations, 1);
        cr_assert_eq(u.reserved_bytes, 2 * VMM_G);
        cr_assert_eq(u.mapped_bytes, VMM_G);
        cr_assert_eq(before - free_bytes(), VMM_G);
        switch (order) {
        case 0: /* unmap, release, free */
            OK(cuMemUnmap(r, VMM_G));
            OK(cuMemRelease(h));
            OK(cuMemAddressFree(r, 2 * VMM_G));
            break;
        case 1: /* release first: the mapping keeps the memory */
            OK(cuMemRelease(h));
            cr_assert_eq(vmm_usage().physical_bytes, VMM_G);
            cr_assert_eq(before - free_bytes(), VMM_G);
            OK(cuMemUnmap(r, VMM_G));
            OK(cuMemAddressFree(r, 2 * VMM_G));
            break;
        default: /* release, then free the range with the mapping in it */
            OK(cuMemRelease(h));
            OK(cuMemAddressFree(r, 2 * VMM_G));
            break;
        }
        u = vmm_usage();
        cr_assert_eq(u.physical_bytes, 0, "order %d", order);
        cr_assert_eq(u.allocations, 0, "order %d", order);
        cr_assert_eq(u.reserved_bytes, 0, "order %d", order);
        cr_assert_eq(u.mapped_bytes, 0, "order %d", order);
        cr_assert_eq(free_bytes(), before, "order %d", order);
    }
    /* new memory starts zeroed: the old pages were given back, not reused as they were */
    struct guard g = guard_alloc(16);
    unsigned char out[16];
    OK(cuMemcpyDtoH_v2(out, g.buf, 16));
    for (int i = 0; i < 16; i++)
        cr_assert_eq(out[i], 0);
    guard_free(&g);
    cr_assert_eq(vmm_usage().physical_bytes, 0);
}

Test(emu, vmm_out_of_memory_and_fault_injection)
{
    setenv("CUDA_EMU_MEM", "5M", 1);
    setenv("CUDA_EMU_FAIL", "cuMemCreate:3,cuMemAddressReserve:2", 1);
    primary_current();
    rzcu_mem_allocation_prop prop = vmm_prop(0);
    rzcu_mem_generic_alloc_handle h1, h2, h3;
    OK(cuMemCreate(&h1, VMM_G, &prop, 0));
    OK(cuMemCreate(&h2, VMM_G, &prop, 0));
    FAILS(cuMemCreate(&h3, VMM_G, &prop, 0), RZCUDA_ERROR_OUT_OF_MEMORY); /* injected */
    FAILS(cuMemCreate(&h3, VMM_G, &prop, 0), RZCUDA_ERROR_OUT_OF_MEMORY); /* 1 MiB left */
    rzcu_deviceptr d;
    OK(cuMemAlloc_v2(&d, (size_t)1 << 20));
    FAILS(cuMemAlloc_v2(&d, 1), RZCUDA_ERROR_OUT_OF_MEMORY);
    OK(cuMemRelease(h1));
    OK(cuMemCreate(&h3, VMM_G, &prop, 0));
    rzcu_deviceptr r;
    OK(cuMemAddressReserve(&r, VMM_G, 0, 0, 0));
    FAILS(cuMemAddressReserve(&r, VMM_G, 0, 0, 0), RZCUDA_ERROR_OUT_OF_MEMORY); /* injected */
    OK(cuMemAddressFree(r, VMM_G));
    OK(cuMemRelease(h2));
    OK(cuMemRelease(h3));
}

Test(emu, vmm_reserve_alignment_hint_and_size)
{
    OK(cuInit(0));
    rzcu_deviceptr a, b, c;
    const size_t align = (size_t)64 << 20;
    OK(cuMemAddressReserve(&a, VMM_G, align, 0, 0));
    cr_assert_eq(a % align, 0);
    cr_assert_eq(vmm_usage().reserved_bytes, VMM_G);
    /* the hint is taken when that range is free... */
    OK(cuMemAddressReserve(&b, VMM_G, 0, a + 4 * VMM_G, 0));
    cr_assert_eq(b, a + 4 * VMM_G);
    /* ...and ignored when it is not */
    OK(cuMemAddressReserve(&c, 2 * VMM_G, 0, b, 0));
    cr_assert(c + 2 * VMM_G <= a || c >= b + VMM_G || (c >= a + VMM_G && c + 2 * VMM_G <= b), "c overlaps");
    /* a page multiple is whole granules inside, and must be repeated at the free */
    rzcu_deviceptr d;
    OK(cuMemAddressReserve(&d, 4096, 0, 0, 0));
    cr_assert_eq(d % VMM_G, 0);
    cr_assert_eq(vmm_usage().reserved_bytes, 5 * VMM_G);
    FAILS(cuMemAddressFree(d, VMM_G), RZCUDA_ERROR_INVALID_VALUE);
    OK(cuMemAddressFree(d, 4096));
    OK(cuMemAddressFree(a, VMM_G));
    OK(cuMemAddressFree(b, VMM_G));
    OK(cuMemAddressFree(c, 2 * VMM_G));
    cr_assert_eq(vmm_usage().reserved_bytes, 0);
    /* a freed range can be had again */
    OK(cuMemAddressReserve(&d, VMM_G, 0, a, 0));
    cr_assert_eq(d, a);
    OK(cuMemAddressFree(d, VMM_G));
}

/* Unmapping waits for queued work that may still use the memory (a copy behind a blocked host function). */
static void *open_later(void *arg)
{
    struct gate *g = arg;
    gate_await_entered(g);
    struct timespec ts = {0, 50 * 1000 * 1000};
    nanosleep(&ts, NULL);
    gate_open(g);
    return NULL;
}

Test(emu, vmm_unmap_waits_for_queued_work)
{
    primary_current();
    struct guard g = guard_alloc(8);
    OK(cuMemcpyHtoD_v2(g.buf, "queued!", 8));
    rzcu_stream s;
    OK(cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING));
    struct gate gt = GATE_INIT;
    char out[8] = {0};
    OK(cuLaunchHostFunc(s, gate_wait_fn, &gt));
    OK(cuMemcpyDtoHAsync_v2(out, g.buf, 8, s));
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, open_later, &gt), 0);
    OK(cuMemUnmap(g.base, VMM_G));
    cr_assert_str_eq(out, "queued!", "the copy ran before the memory went");
    pthread_join(th, NULL);
    OK(cuMemRelease(g.h));
    OK(cuMemAddressFree(g.base, 2 * VMM_G));
}

Test(emu, vmm_get_proc_address_and_call_counts)
{
    void *fn = NULL;
    rzcu_proc_query_result st = 99;
    OK(cuGetProcAddress_v2("cuMemMap", &fn, 12000, 0, &st));
    cr_assert_eq(fn, (void *)&cuMemMap);
    OK(cuGetProcAddress_v2("cuMemGetAllocationGranularity", &fn, 13000, 0, &st));
    cr_assert_eq(fn, (void *)&cuMemGetAllocationGranularity);
    FAILS(cuGetProcAddress_v2("cuMemSetAccess", &fn, 10010, 0, &st), RZCUDA_ERROR_NOT_FOUND);
    cr_assert_eq(st, RZCU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    primary_current();
    struct guard g = guard_alloc(8);
    guard_free(&g);
    cr_assert_eq(cuEmuCallCount("cuMemCreate"), 1);
    cr_assert_eq(cuEmuCallCount("cuMemAddressFree"), 1);
}
