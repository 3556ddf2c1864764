/*
 * The driver's virtual memory management as guard pages use it (vmm.c): the current context's device, the
 * allocation granularity, reserve, create, map, set access, unmap, release, free the range.
 */
#ifndef REDZONE_VMM_H
#define REDZONE_VMM_H

#include "common.h"

/* Whether the driver has every entry point below. */
int rz__dev_has_vmm(void);

/* cuCtxGetDevice. */
rzcu_result rz__dev_ctx_device(rzcu_device *dev);

/* cuMemGetAllocationGranularity. */
rzcu_result rz__dev_vmm_granularity(size_t *gran, const RZCU_MEM_ALLOCATION_PROP *prop,
                                    rzcu_mem_granularity_flags option);

/* cuMemAddressReserve, cuMemAddressFree. */
rzcu_result rz__dev_vmm_reserve(rz_devptr_t *base, size_t size, size_t alignment, rz_devptr_t addr,
                                unsigned long long flags);

rzcu_result rz__dev_vmm_address_free(rz_devptr_t base, size_t size);

/* cuMemCreate, cuMemRelease. */
rzcu_result rz__dev_vmm_create(rzcu_mem_generic_alloc_handle *h, size_t size, const RZCU_MEM_ALLOCATION_PROP *prop,
                               unsigned long long flags);

rzcu_result rz__dev_vmm_release(rzcu_mem_generic_alloc_handle h);

/* cuMemMap, cuMemUnmap, cuMemSetAccess. */
rzcu_result rz__dev_vmm_map(rz_devptr_t ptr, size_t size, size_t offset, rzcu_mem_generic_alloc_handle h,
                            unsigned long long flags);

rzcu_result rz__dev_vmm_unmap(rz_devptr_t ptr, size_t size);

rzcu_result rz__dev_vmm_set_access(rz_devptr_t ptr, size_t size, const RZCU_MEM_ACCESS_DESC *desc, size_t count);

#endif /* REDZONE_VMM_H */
