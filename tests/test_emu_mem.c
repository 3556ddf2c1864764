/* Tests of the emulated CUDA driver (native/emu): device and host memory: allocation, free, ranges, pointer attributes, memsets and copies. Part of test_emu (tests/emu.cmake); shared
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

/* The test programs' stand-ins for a kernel's stores and loads: the driver's copy checks and the legacy
 * stream's order, no call counted as an entry point's. */
Test(emu, device_store_and_load)
{
    unsigned char ones[8] = {1, 1, 1, 1, 1, 1, 1, 1}, got[8] = {0};
    FAILS(cuEmuDeviceStore(0x1000, ones, 1), RZCUDA_ERROR_NOT_INITIALIZED);
    primary_current();
    rzcu_deviceptr a;
    OK(cuMemAlloc_v2(&a, 100));
    OK(cuMemsetD8Async(a, 7, 100, NULL)); /* queued: the store comes after it */
    OK(cuEmuDeviceStore(a + 92, ones, 8));
    OK(cuEmuDeviceLoad(got, a + 91, 2));
    cr_assert(got[0] == 7 && got[1] == 1, "%d %d", got[0], got[1]);
    FAILS(cuEmuDeviceStore(a + 93, ones, 8), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuEmuDeviceLoad(got, a + 99, 2), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuEmuDeviceStore(a, NULL, 1), RZCUDA_ERROR_INVALID_VALUE);
    OK(cuMemcpyDtoH_v2(got, a + 92, 8));
    cr_assert_eq(memcmp(got, ones, 8), 0, "the refused store changed nothing");
    cr_assert_eq(cuEmuCallCount("cuMemcpyHtoD_v2"), 0);
    cr_assert_eq(cuEmuCallCount("cuMemcpyDtoH_v2"), 1);
    OK(cuMemFree_v2(a));
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

/* cuMemHostAlloc: pinned like cuMemAllocHost (a device-to-host copy into it is queued), freed with
 * cuMemFreeHost; only DEVICEMAP memory (allocated or registered) has a device pointer, its host address. */
Test(emu, host_alloc_flags_and_device_pointer)
{
    primary_current();
    void *mapped, *plain, *wc;
    FAILS(cuMemHostAlloc(&mapped, 4096, 0x8), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemHostAlloc(NULL, 4096, 0), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemHostAlloc(&mapped, 0, 0), RZCUDA_ERROR_INVALID_VALUE);
    OK(cuMemHostAlloc(&mapped, 4096, CUDA_EMU_MEMHOSTALLOC_DEVICEMAP | CUDA_EMU_MEMHOSTALLOC_PORTABLE));
    OK(cuMemHostAlloc(&plain, 4096, 0));
    OK(cuMemHostAlloc(&wc, 100, CUDA_EMU_MEMHOSTALLOC_WRITECOMBINED | CUDA_EMU_MEMHOSTALLOC_DEVICEMAP));
    rzcu_deviceptr d = 0;
    OK(cuMemHostGetDevicePointer_v2(&d, mapped, 0));
    cr_assert_eq(d, (rzcu_deviceptr)(uintptr_t)mapped);
    OK(cuMemHostGetDevicePointer_v2(&d, (char *)wc + 99, 0));
    cr_assert_eq(d, (rzcu_deviceptr)(uintptr_t)wc + 99);
    FAILS(cuMemHostGetDevicePointer_v2(&d, (char *)wc + 100, 0), RZCUDA_ERROR_INVALID_VALUE); /* past its end */
    FAILS(cuMemHostGetDevicePointer_v2(&d, plain, 0), RZCUDA_ERROR_INVALID_VALUE); /* not DEVICEMAP */
    FAILS(cuMemHostGetDevicePointer_v2(&d, mapped, 1), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemHostGetDevicePointer_v2(NULL, mapped, 0), RZCUDA_ERROR_INVALID_VALUE);
    void *h;
    OK(cuMemAllocHost_v2(&h, 64));
    FAILS(cuMemHostGetDevicePointer_v2(&d, h, 0), RZCUDA_ERROR_INVALID_VALUE);
    static char reg[8192], reg2[8192];
    OK(cuMemHostRegister_v2(reg, sizeof reg, 0x2 /* DEVICEMAP */));
    OK(cuMemHostGetDevicePointer_v2(&d, reg + 10, 0));
    cr_assert_eq(d, (rzcu_deviceptr)(uintptr_t)(reg + 10));
    OK(cuMemHostRegister_v2(reg2, sizeof reg2, 0));
    FAILS(cuMemHostGetDevicePointer_v2(&d, reg2, 0), RZCUDA_ERROR_INVALID_VALUE);
    /* pinned: an asynchronous device-to-host copy into it is queued behind the stream's work */
    rzcu_stream s;
    OK(cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING));
    rzcu_deviceptr a;
    OK(cuMemAlloc_v2(&a, 64));
    OK(cuMemsetD8_v2(a, 0x77, 64));
    memset(plain, 0, 64);
    struct gate g = GATE_INIT;
    OK(cuLaunchHostFunc(s, gate_wait_fn, &g));
    OK(cuMemcpyDtoHAsync_v2(plain, a, 64, s));
    cr_assert_eq(((unsigned char *)plain)[0], 0, "queued, not run");
    gate_open(&g);
    OK(cuStreamSynchronize(s));
    cr_assert_eq(((unsigned char *)plain)[63], 0x77);
    OK(cuMemFreeHost(mapped));
    FAILS(cuMemFreeHost(mapped), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemFreeHost((char *)wc + 1), RZCUDA_ERROR_INVALID_VALUE);
    OK(cuMemFreeHost(wc));
    OK(cuMemFreeHost(plain));
    OK(cuMemFreeHost(h));
    OK(cuMemHostUnregister(reg));
    OK(cuMemHostUnregister(reg2));
    void *fn = NULL;
    OK(cuGetProcAddress_v2("cuMemHostAlloc", &fn, 13000, 0, NULL));
    cr_assert_eq(fn, (void *)&cuMemHostAlloc);
    OK(cuGetProcAddress_v2("cuMemHostGetDevicePointer", &fn, 13000, 0, NULL));
    cr_assert_eq(fn, (void *)&cuMemHostGetDevicePointer_v2);
    OK(cuCtxSetCurrent(NULL));
    FAILS(cuMemHostAlloc(&mapped, 4096, 0), RZCUDA_ERROR_INVALID_CONTEXT);
}
