/* Tests of the emulated CUDA driver (native/emu): virtual memory management. Part of test_emu (tests/emu.cmake); shared
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
    char *out; /* pinned: a copy into pageable memory would return only once done */
    OK(cuMemAllocHost_v2((void **)&out, 8));
    memset(out, 0, 8);
    OK(cuLaunchHostFunc(s, gate_wait_fn, &gt));
    OK(cuMemcpyDtoHAsync_v2(out, g.buf, 8, s));
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, open_later, &gt), 0);
    OK(cuMemUnmap(g.base, VMM_G));
    cr_assert_str_eq(out, "queued!", "the copy ran before the memory went");
    pthread_join(th, NULL);
    OK(cuMemRelease(g.h));
    OK(cuMemAddressFree(g.base, 2 * VMM_G));
    OK(cuMemFreeHost(out));
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
