/*
 * The driver's virtual memory management as guard pages (core/guard_pages.c) use it. Thin wrappers: the
 * entry point, its arguments and its answer exactly as the caller gave and gets them.
 */
#include "common.h"
#include "vmm.h"
#include "driver.h"

int rz__dev_has_vmm(void) {
    return rz__drv.cuCtxGetDevice && rz__drv.cuMemGetAllocationGranularity && rz__drv.cuMemAddressReserve &&
           rz__drv.cuMemAddressFree && rz__drv.cuMemCreate && rz__drv.cuMemRelease && rz__drv.cuMemMap &&
           rz__drv.cuMemUnmap && rz__drv.cuMemSetAccess;
}

rzcu_result rz__dev_ctx_device(rzcu_device *dev) { return rz__drv.cuCtxGetDevice(dev); }

rzcu_result rz__dev_vmm_granularity(size_t *gran, const RZCU_MEM_ALLOCATION_PROP *prop,
                                    rzcu_mem_granularity_flags option) {
    return rz__drv.cuMemGetAllocationGranularity(gran, prop, option);
}

rzcu_result rz__dev_vmm_reserve(rz_devptr_t *base, size_t size, size_t alignment, rz_devptr_t addr,
                                unsigned long long flags) {
    return rz__drv.cuMemAddressReserve(base, size, alignment, addr, flags);
}

rzcu_result rz__dev_vmm_address_free(rz_devptr_t base, size_t size) { return rz__drv.cuMemAddressFree(base, size); }

rzcu_result rz__dev_vmm_create(rzcu_mem_generic_alloc_handle *h, size_t size, const RZCU_MEM_ALLOCATION_PROP *prop,
                               unsigned long long flags) {
    return rz__drv.cuMemCreate(h, size, prop, flags);
}

rzcu_result rz__dev_vmm_release(rzcu_mem_generic_alloc_handle h) { return rz__drv.cuMemRelease(h); }

rzcu_result rz__dev_vmm_map(rz_devptr_t ptr, size_t size, size_t offset, rzcu_mem_generic_alloc_handle h,
                            unsigned long long flags) {
    return rz__drv.cuMemMap(ptr, size, offset, h, flags);
}

rzcu_result rz__dev_vmm_unmap(rz_devptr_t ptr, size_t size) { return rz__drv.cuMemUnmap(ptr, size); }

rzcu_result rz__dev_vmm_set_access(rz_devptr_t ptr, size_t size, const RZCU_MEM_ACCESS_DESC *desc, size_t count) {
    return rz__drv.cuMemSetAccess(ptr, size, desc, count);
}
