/* Tests of the emulated CUDA driver (native/emu): memory pools made by cuMemPoolCreate, their attributes,
 * cuMemPoolTrimTo and pool export (issue 32 item 5). Part of test_emu (tests/emu.cmake). */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "emu_test_util.h"

static rzcu_mem_pool make_pool(int device, unsigned handle_types, size_t max_size)
{
    cuda_emu_mem_pool_props_t props;
    memset(&props, 0, sizeof props);
    props.allocType = RZCU_MEM_ALLOCATION_TYPE_PINNED;
    props.handleTypes = handle_types;
    props.location.type = RZCU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = device;
    props.maxSize = max_size;
    rzcu_mem_pool p = NULL;
    OK(cuMemPoolCreate(&p, &props));
    cr_assert_not_null(p);
    return p;
}

static uint64_t attr64(rzcu_mem_pool p, int attr)
{
    uint64_t v = ~0ull;
    OK(cuMemPoolGetAttribute(p, attr, &v));
    return v;
}

Test(emu, mem_pool_create_checks_its_properties)
{
    primary_current();
    cuda_emu_mem_pool_props_t props;
    memset(&props, 0, sizeof props);
    rzcu_mem_pool p;
    props.location.type = RZCU_MEM_LOCATION_TYPE_DEVICE;
    FAILS(cuMemPoolCreate(&p, &props), RZCUDA_ERROR_INVALID_VALUE); /* allocType 0 */
    props.allocType = RZCU_MEM_ALLOCATION_TYPE_PINNED;
    FAILS(cuMemPoolCreate(NULL, &props), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemPoolCreate(&p, NULL), RZCUDA_ERROR_INVALID_VALUE);
    props.location.id = 1; /* one device */
    FAILS(cuMemPoolCreate(&p, &props), RZCUDA_ERROR_INVALID_VALUE);
    props.location.id = 0;
    props.reserved[3] = 1;
    FAILS(cuMemPoolCreate(&p, &props), RZCUDA_ERROR_INVALID_VALUE);
    props.reserved[3] = 0;
    props.handleTypes = 0x8; /* fabric */
    FAILS(cuMemPoolCreate(&p, &props), RZCUDA_ERROR_NOT_SUPPORTED);
    props.handleTypes = 0;
    OK(cuMemPoolCreate(&p, &props));
    rzcu_mem_pool dflt;
    OK(cuDeviceGetDefaultMemPool(&dflt, 0));
    cr_assert_neq(p, dflt);
    FAILS(cuMemPoolDestroy(dflt), RZCUDA_ERROR_INVALID_VALUE); /* a default pool cannot be destroyed */
    OK(cuMemPoolDestroy(p));
    FAILS(cuMemPoolDestroy(p), RZCUDA_ERROR_INVALID_VALUE);
    rzcu_deviceptr d;
    FAILS(cuMemAllocFromPoolAsync(&d, 64, p, NULL), RZCUDA_ERROR_INVALID_VALUE); /* destroyed */
}

/* RMM's cuda_async_memory_resource: a pool with a release threshold, allocations from it, frees, trim. */
Test(emu, mem_pool_accounting_release_threshold_and_trim)
{
    primary_current();
    size_t f0 = free_bytes();
    rzcu_mem_pool p = make_pool(0, 0, 0);
    cr_assert_eq(attr64(p, CUDA_EMU_MEMPOOL_ATTR_RELEASE_THRESHOLD), 0);
    int flag = -1;
    OK(cuMemPoolGetAttribute(p, CUDA_EMU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, &flag));
    cr_assert_eq(flag, 1);
    uint64_t threshold = 1 << 20;
    OK(cuMemPoolSetAttribute(p, CUDA_EMU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold));
    cr_assert_eq(attr64(p, CUDA_EMU_MEMPOOL_ATTR_RELEASE_THRESHOLD), threshold);
    rzcu_stream s;
    OK(cuStreamCreate(&s, 0));
    rzcu_deviceptr a, b;
    OK(cuMemAllocFromPoolAsync(&a, 1000, p, s));
    OK(cuMemAllocFromPoolAsync(&b, 3000, p, s));
    cr_assert_eq(free_bytes(), f0 - 1024 - 3072);
    cr_assert_eq(attr64(p, CUDA_EMU_MEMPOOL_ATTR_USED_MEM_CURRENT), 4096);
    cr_assert_eq(attr64(p, CUDA_EMU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 4096);
    OK(cuMemsetD8Async(b, 0x11, 3000, s));
    OK(cuMemFreeAsync(b, s));
    cr_assert_eq(attr64(p, CUDA_EMU_MEMPOOL_ATTR_USED_MEM_CURRENT), 1024);
    OK(cuStreamSynchronize(s));
    /* under the threshold: the pool keeps what was freed into it */
    cr_assert_eq(attr64(p, CUDA_EMU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 4096);
    cr_assert_eq(attr64(p, CUDA_EMU_MEMPOOL_ATTR_USED_MEM_HIGH), 4096);
    /* reuse: a new allocation takes what the pool holds first */
    OK(cuMemAllocFromPoolAsync(&b, 2000, p, s));
    cr_assert_eq(attr64(p, CUDA_EMU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 4096);
    OK(cuMemFreeAsync(b, s));
    OK(cuMemPoolTrimTo(p, 2048));
    cr_assert_eq(attr64(p, CUDA_EMU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 2048);
    OK(cuMemPoolTrimTo(p, 0));
    cr_assert_eq(attr64(p, CUDA_EMU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 1024, "never below what is in use");
    /* the threshold lowered to 0: the next synchronisation releases everything unused */
    OK(cuMemAllocFromPoolAsync(&b, 5000, p, s));
    OK(cuMemFreeAsync(b, s));
    threshold = 0;
    OK(cuMemPoolSetAttribute(p, CUDA_EMU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold));
    cr_assert_gt(attr64(p, CUDA_EMU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 1024);
    OK(cuCtxSynchronize());
    cr_assert_eq(attr64(p, CUDA_EMU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 1024);
    /* watermarks: reset to the current value with 0 only; the current values are read-only */
    uint64_t zero = 0, one = 1;
    FAILS(cuMemPoolSetAttribute(p, CUDA_EMU_MEMPOOL_ATTR_USED_MEM_HIGH, &one), RZCUDA_ERROR_INVALID_VALUE);
    OK(cuMemPoolSetAttribute(p, CUDA_EMU_MEMPOOL_ATTR_USED_MEM_HIGH, &zero));
    cr_assert_eq(attr64(p, CUDA_EMU_MEMPOOL_ATTR_USED_MEM_HIGH), 1024);
    OK(cuMemPoolSetAttribute(p, CUDA_EMU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, &zero));
    cr_assert_eq(attr64(p, CUDA_EMU_MEMPOOL_ATTR_RESERVED_MEM_HIGH), 1024);
    FAILS(cuMemPoolSetAttribute(p, CUDA_EMU_MEMPOOL_ATTR_USED_MEM_CURRENT, &zero), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemPoolSetAttribute(p, CUDA_EMU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &zero), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemPoolSetAttribute(p, 99, &zero), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemPoolGetAttribute(p, CUDA_EMU_MEMPOOL_ATTR_USED_MEM_CURRENT, NULL), RZCUDA_ERROR_INVALID_VALUE);
    /* destroyed with an allocation outstanding: the allocation stays usable until freed */
    OK(cuMemPoolDestroy(p));
    OK(cuMemsetD8Async(a, 0x22, 1000, s));
    FAILS(cuMemPoolGetAttribute(p, CUDA_EMU_MEMPOOL_ATTR_USED_MEM_CURRENT, &zero), RZCUDA_ERROR_INVALID_VALUE);
    OK(cuMemFreeAsync(a, s));
    OK(cuStreamSynchronize(s));
    cr_assert_eq(free_bytes(), f0);
    OK(cuStreamDestroy_v2(s));
}

Test(emu, mem_pool_max_size_and_current_pool)
{
    primary_current();
    rzcu_mem_pool p = make_pool(0, 0, 8192), dflt, cur;
    rzcu_deviceptr a, b;
    OK(cuMemAllocFromPoolAsync(&a, 6000, p, NULL));
    FAILS(cuMemAllocFromPoolAsync(&b, 4096, p, NULL), RZCUDA_ERROR_OUT_OF_MEMORY);
    OK(cuMemAllocFromPoolAsync(&b, 2048, p, NULL));
    /* cuMemAllocAsync takes the device's current pool */
    OK(cuDeviceGetDefaultMemPool(&dflt, 0));
    OK(cuDeviceGetMemPool(&cur, 0));
    cr_assert_eq(cur, dflt);
    OK(cuMemFreeAsync(b, NULL));
    OK(cuDeviceSetMemPool(0, p));
    OK(cuDeviceGetMemPool(&cur, 0));
    cr_assert_eq(cur, p);
    OK(cuMemAllocAsync(&b, 1024, NULL));
    cr_assert_eq(attr64(p, CUDA_EMU_MEMPOOL_ATTR_USED_MEM_CURRENT), 7168);
    FAILS(cuMemAllocAsync(&b, 4096, NULL), RZCUDA_ERROR_OUT_OF_MEMORY);
    FAILS(cuDeviceSetMemPool(1, p), RZCUDA_ERROR_INVALID_DEVICE);
    OK(cuMemPoolDestroy(p)); /* the device's current pool: the default one again */
    OK(cuDeviceGetMemPool(&cur, 0));
    cr_assert_eq(cur, dflt);
    OK(cuMemFree_v2(a)); /* pool memory may be freed by cuMemFree too */
    OK(cuMemFreeAsync(b, NULL));
    OK(cuCtxSynchronize());
}

Test(emu, mem_pool_export_and_import_in_one_process)
{
    primary_current();
    rzcu_mem_pool plain = make_pool(0, 0, 0), p = make_pool(0, RZCU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
    int fd = -1;
    FAILS(cuMemPoolExportToShareableHandle(&fd, plain, RZCU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
          RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemPoolExportToShareableHandle(&fd, p, RZCU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 1),
          RZCUDA_ERROR_INVALID_VALUE);
    OK(cuMemPoolExportToShareableHandle(&fd, p, RZCU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    cr_assert_geq(fd, 0);
    cr_assert(fcntl(fd, F_GETFD) & FD_CLOEXEC);
    rzcu_mem_pool imported;
    OK(cuMemPoolImportFromShareableHandle(&imported, (void *)(intptr_t)fd, RZCU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    cr_assert_neq(imported, p);
    FAILS(cuMemPoolImportFromShareableHandle(&imported, (void *)(intptr_t)0, RZCU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                                             0),
          RZCUDA_ERROR_INVALID_VALUE); /* stdin: no pool's handle */
    rzcu_deviceptr a, in, x;
    FAILS(cuMemAllocFromPoolAsync(&x, 64, imported, NULL), RZCUDA_ERROR_INVALID_VALUE); /* documented */
    OK(cuMemAllocFromPoolAsync(&a, 4096, p, NULL));
    OK(cuMemAllocFromPoolAsync(&x, 64, plain, NULL));
    cuda_emu_mem_pool_ptr_export_data_t data, bad;
    FAILS(cuMemPoolExportPointer(&bad, x), RZCUDA_ERROR_INVALID_VALUE); /* a pool without handle types */
    FAILS(cuMemPoolExportPointer(&bad, a + 256), RZCUDA_ERROR_INVALID_VALUE); /* not the allocation's start */
    OK(cuMemPoolExportPointer(&data, a));
    FAILS(cuMemPoolImportPointer(&in, p, &data), RZCUDA_ERROR_INVALID_VALUE); /* not an imported pool */
    OK(cuMemPoolImportPointer(&in, imported, &data));
    cr_assert_eq(in, a);
    /* the importer frees first, as documented: the allocation stays the exporter's */
    OK(cuMemFree_v2(in));
    OK(cuMemsetD8_v2(a, 0x33, 4096));
    OK(cuMemFreeAsync(a, NULL));
    OK(cuCtxSynchronize());
    FAILS(cuMemPoolImportPointer(&in, imported, &data), RZCUDA_ERROR_INVALID_VALUE); /* freed since */
    OK(cuMemPoolDestroy(imported));
    OK(cuMemPoolDestroy(p));
    FAILS(cuMemPoolImportFromShareableHandle(&imported, (void *)(intptr_t)fd, RZCU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                                             0),
          RZCUDA_ERROR_INVALID_VALUE); /* its pool destroyed */
    close(fd);
    OK(cuMemFreeAsync(x, NULL));
    OK(cuCtxSynchronize());
}
