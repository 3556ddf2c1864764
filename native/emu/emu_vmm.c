/*
 * The virtual memory management entry points of the emulated driver (cuMemGetAllocationGranularity,
 * cuMemAddressReserve/Free, cuMemCreate/Release, cuMemMap/Unmap, cuMemSetAccess) and cuEmuVmmUsage. They
 * check what needs no state (pointers, flags, granularity multiples, allocation properties, access
 * descriptors) and leave reservations, handles and mappings to emu_mem_vmm.c, which keeps them under the memory
 * lock that copies and memsets check their ranges under. None needs a current context: VMM memory belongs
 * to a device, and outlives the contexts (as with the driver, whose documented results for these calls
 * name no context error).
 *
 * Ordering: unmapping, freeing a reservation and changing access can take memory away from work still
 * queued, so they first complete all outstanding work (the driver documents them as synchronous); mapping
 * and creating cannot, and do not wait.
 */
#define _GNU_SOURCE
#include <unistd.h>

#include "emu_internal.h"

#define G CUDA_EMU_VMM_GRANULARITY
#define HANDLE_TYPES_KNOWN 0xfu      /* POSIX_FILE_DESCRIPTOR | WIN32 | WIN32_KMT | FABRIC */
#define USAGE_KNOWN 0x3u             /* CU_MEM_CREATE_USAGE_TILE_POOL | CU_MEM_CREATE_USAGE_HW_DECOMPRESS */
#define LOCATION_HOST 2u             /* CU_MEM_LOCATION_TYPE_HOST */
#define LOCATION_HOST_NUMA 3u        /* CU_MEM_LOCATION_TYPE_HOST_NUMA */

static bool valid_device(int dev) { return dev >= 0 && dev < emu_cfg.ndevices; }

/*
 * Allocation properties the emulator can create: pinned device memory of a valid device, exportable as a
 * POSIX file descriptor or not (export itself is not emulated). Host locations, Windows and fabric handles,
 * and tile-pool or decompression usage are CUDA_ERROR_NOT_SUPPORTED; a compression request is accepted and
 * gives uncompressed memory (the documentation has programs check what they got); anything else that is
 * not a documented value is CUDA_ERROR_INVALID_VALUE, a device ordinal out of range CUDA_ERROR_INVALID_DEVICE.
 */
static rzcu_result check_prop(const rzcu_mem_allocation_prop *prop)
{
    if (prop->type != RZCU_MEM_ALLOCATION_TYPE_PINNED || prop->win32HandleMetaData)
        return RZCUDA_ERROR_INVALID_VALUE;
    if ((prop->requestedHandleTypes & ~HANDLE_TYPES_KNOWN) || (prop->allocFlags.usage & ~USAGE_KNOWN))
        return RZCUDA_ERROR_INVALID_VALUE;
    if (prop->location.type == LOCATION_HOST || prop->location.type == LOCATION_HOST_NUMA)
        return RZCUDA_ERROR_NOT_SUPPORTED;
    if (prop->location.type != RZCU_MEM_LOCATION_TYPE_DEVICE)
        return RZCUDA_ERROR_INVALID_VALUE;
    if (!valid_device(prop->location.id))
        return RZCUDA_ERROR_INVALID_DEVICE;
    if ((prop->requestedHandleTypes & ~(unsigned)RZCU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) || prop->allocFlags.usage)
        return RZCUDA_ERROR_NOT_SUPPORTED;
    return RZCUDA_SUCCESS;
}

EMU_API rzcu_result cuMemGetAllocationGranularity(size_t *granularity, const rzcu_mem_allocation_prop *prop,
                                                  rzcu_mem_granularity_flags option)
{
    ENTER(cuMemGetAllocationGranularity);
    if (!granularity || !prop ||
        (option != RZCU_MEM_ALLOC_GRANULARITY_MINIMUM && option != RZCU_MEM_ALLOC_GRANULARITY_RECOMMENDED))
        return RZCUDA_ERROR_INVALID_VALUE;
    CHECK(check_prop(prop));
    *granularity = G;
    return RZCUDA_SUCCESS;
}

/*
 * size and addr must be multiples of the host page size, alignment a power of two or 0 (the documented
 * rules); the range itself is whole granules (size rounded up) aligned to the larger of alignment and the
 * granularity. addr is a hint: honoured when that range is free and aligned, else ignored.
 */
EMU_API rzcu_result cuMemAddressReserve(rzcu_deviceptr *ptr, size_t size, size_t alignment, rzcu_deviceptr addr,
                                        unsigned long long flags)
{
    ENTER(cuMemAddressReserve);
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    if (!ptr || size == 0 || flags != 0 || size % page != 0 || addr % page != 0 || (alignment & (alignment - 1)))
        return RZCUDA_ERROR_INVALID_VALUE;
    return emu_vmm_reserve(size, alignment, addr, ptr);
}

/* ptr and size exactly as reserved. Mappings still in the range are unmapped with it. */
EMU_API rzcu_result cuMemAddressFree(rzcu_deviceptr ptr, size_t size)
{
    ENTER(cuMemAddressFree);
    emu_sync_outstanding();
    return emu_vmm_address_free(ptr, size);
}

EMU_API rzcu_result cuMemCreate(rzcu_mem_generic_alloc_handle *handle, size_t size,
                                const rzcu_mem_allocation_prop *prop, unsigned long long flags)
{
    ENTER(cuMemCreate);
    if (!handle || !prop || flags != 0 || size == 0 || size % G != 0)
        return RZCUDA_ERROR_INVALID_VALUE;
    CHECK(check_prop(prop));
    return emu_vmm_create(prop->location.id, size, handle);
}

/* The memory is freed now, or when its last mapping goes; an unknown or released handle (undefined
 * behaviour for the driver) is CUDA_ERROR_INVALID_VALUE. */
EMU_API rzcu_result cuMemRelease(rzcu_mem_generic_alloc_handle handle)
{
    ENTER(cuMemRelease);
    return emu_vmm_release(handle);
}

/*
 * ptr, size and offset multiples of the granularity, [offset, offset + size) inside the handle's memory,
 * [ptr, ptr + size) inside one reservation and not mapped yet, flags 0; anything else is
 * CUDA_ERROR_INVALID_VALUE. The mapping has no access until cuMemSetAccess gives it some.
 */
EMU_API rzcu_result cuMemMap(rzcu_deviceptr ptr, size_t size, size_t offset, rzcu_mem_generic_alloc_handle handle,
                             unsigned long long flags)
{
    ENTER(cuMemMap);
    if (flags != 0 || size == 0 || ptr % G != 0 || size % G != 0 || offset % G != 0)
        return RZCUDA_ERROR_INVALID_VALUE;
    return emu_vmm_map(ptr, size, offset, handle);
}

/* The range must be exactly one or more whole mappings, back to back; it becomes reserved again. */
EMU_API rzcu_result cuMemUnmap(rzcu_deviceptr ptr, size_t size)
{
    ENTER(cuMemUnmap);
    if (size == 0)
        return RZCUDA_ERROR_INVALID_VALUE;
    emu_sync_outstanding();
    return emu_vmm_unmap(ptr, size);
}

/*
 * ptr and size multiples of the granularity, the range fully mapped (it may cover several mappings or part
 * of one). Each descriptor names a device (another location type is CUDA_ERROR_INVALID_VALUE, a device
 * ordinal out of range CUDA_ERROR_INVALID_DEVICE) and PROT_NONE, PROT_READ or PROT_READWRITE. Host pages
 * get the most any device was given: devices share one address space here.
 */
EMU_API rzcu_result cuMemSetAccess(rzcu_deviceptr ptr, size_t size, const rzcu_mem_access_desc *desc, size_t count)
{
    ENTER(cuMemSetAccess);
    if (!desc || count == 0 || size == 0 || ptr % G != 0 || size % G != 0)
        return RZCUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < count; i++) {
        unsigned f = desc[i].flags;
        if (desc[i].location.type != RZCU_MEM_LOCATION_TYPE_DEVICE ||
            (f != RZCU_MEM_ACCESS_FLAGS_PROT_NONE && f != RZCU_MEM_ACCESS_FLAGS_PROT_READ &&
             f != RZCU_MEM_ACCESS_FLAGS_PROT_READWRITE))
            return RZCUDA_ERROR_INVALID_VALUE;
        if (!valid_device(desc[i].location.id))
            return RZCUDA_ERROR_INVALID_DEVICE;
    }
    emu_sync_outstanding();
    return emu_vmm_set_access(ptr, size, desc, count);
}

void cuEmuVmmUsage(cuda_emu_vmm_usage_t *usage)
{
    if (usage)
        emu_vmm_usage(usage);
}
