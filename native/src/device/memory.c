/*
 * The driver's allocation entry points as the library calls them on the program's behalf: the ones off the
 * hot path (memory.h has plain allocation and free inline). Thin wrappers: the entry point, its arguments and
 * its answer exactly as the caller gave and gets them.
 */
#include "common.h"
#include "memory.h"
#include "driver.h"

rzcu_result rz__dev_mem_alloc_managed(rz_devptr_t *p, size_t bytes, unsigned int flags) {
    return rz__drv.cuMemAllocManaged(p, bytes, flags);
}

rzcu_result rz__dev_mem_alloc_pitch(rz_devptr_t *p, size_t *pitch, size_t width, size_t height,
                                    unsigned int element_bytes) {
    return rz__drv.cuMemAllocPitch_v2(p, pitch, width, height, element_bytes);
}

rzcu_result rz__dev_mem_alloc_async(rz_devptr_t *p, size_t bytes, rzcu_stream s, int per_thread) {
    return per_thread ? rz__drv.cuMemAllocAsync_ptsz(p, bytes, s) : rz__drv.cuMemAllocAsync(p, bytes, s);
}

rzcu_result rz__dev_mem_alloc_from_pool(rz_devptr_t *p, size_t bytes, rzcu_mem_pool pool, rzcu_stream s,
                                        int per_thread) {
    return per_thread ? rz__drv.cuMemAllocFromPoolAsync_ptsz(p, bytes, pool, s)
                      : rz__drv.cuMemAllocFromPoolAsync(p, bytes, pool, s);
}

rzcu_result rz__dev_mem_free_async(rz_devptr_t p, rzcu_stream s, int per_thread) {
    return per_thread ? rz__drv.cuMemFreeAsync_ptsz(p, s) : rz__drv.cuMemFreeAsync(p, s);
}

rzcu_result rz__dev_address_range(rz_devptr_t *base, size_t *size, rz_devptr_t p) {
    return rz__drv.cuMemGetAddressRange_v2(base, size, p);
}
