/* Tests of the emulated CUDA driver (native/emu): stream-ordered allocation. Part of test_emu (tests/emu.cmake); shared
 * helpers in emu_test_util.h. Criterion runs every test in its own process. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "emu_test_util.h"

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
    char *host; /* pinned: a copy into pageable memory would return only once done */
    OK(cuMemAllocHost_v2((void **)&host, 1000));
    memset(host, 0, 1000);
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
    for (size_t i = 0; i < 1000; i++)
        cr_assert_eq((unsigned char)host[i], 0x5a);
    OK(cuMemFreeHost(host));
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
