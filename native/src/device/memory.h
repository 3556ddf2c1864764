/*
 * The driver's allocation entry points as the library calls them on the program's behalf (memory.c): plain,
 * managed, pitched, stream-ordered, from a pool, their frees, and the questions about an address (which
 * allocation holds it, whether its attributes can be asked). Plain allocation and free are the hot path
 * (core/alloc.c): static inline here, one load and a call as a direct call through the table is.
 */
#ifndef REDZONE_MEMORY_H
#define REDZONE_MEMORY_H

#include "common.h"
#include "driver.h"

/* cuMemAlloc_v2 and cuMemFree_v2 (both present once the driver is loaded: rz__dev_load checks them). */
static inline rzcu_result rz__dev_mem_alloc(rz_devptr_t *p, size_t bytes) { return rz__drv.cuMemAlloc_v2(p, bytes); }

static inline rzcu_result rz__dev_mem_free(rz_devptr_t p) { return rz__drv.cuMemFree_v2(p); }

/* Whether the driver has each entry point (per_thread: its _ptsz variant); the calls below need theirs. */
static inline int rz__dev_has_mem_alloc(void) { return rz__drv.cuMemAlloc_v2 != NULL; }

static inline int rz__dev_has_mem_alloc_managed(void) { return rz__drv.cuMemAllocManaged != NULL; }

static inline int rz__dev_has_mem_alloc_pitch(void) { return rz__drv.cuMemAllocPitch_v2 != NULL; }

static inline int rz__dev_has_mem_alloc_async(int per_thread) {
    return (per_thread ? (void *)rz__drv.cuMemAllocAsync_ptsz : (void *)rz__drv.cuMemAllocAsync) != NULL;
}

static inline int rz__dev_has_mem_alloc_from_pool(int per_thread) {
    return (per_thread ? (void *)rz__drv.cuMemAllocFromPoolAsync_ptsz : (void *)rz__drv.cuMemAllocFromPoolAsync) !=
           NULL;
}

static inline int rz__dev_has_mem_free_async(int per_thread) {
    return (per_thread ? (void *)rz__drv.cuMemFreeAsync_ptsz : (void *)rz__drv.cuMemFreeAsync) != NULL;
}

static inline int rz__dev_has_address_range(void) { return rz__drv.cuMemGetAddressRange_v2 != NULL; }

/* cuPointerGetAttribute (asked through band_io.h's rz__dev_pointer_attribute). */
static inline int rz__dev_has_pointer_attribute(void) { return rz__drv.cuPointerGetAttribute != NULL; }

/* cuMemAllocManaged, cuMemAllocPitch_v2. */
rzcu_result rz__dev_mem_alloc_managed(rz_devptr_t *p, size_t bytes, unsigned int flags);

rzcu_result rz__dev_mem_alloc_pitch(rz_devptr_t *p, size_t *pitch, size_t width, size_t height,
                                    unsigned int element_bytes);

/* cuMemAllocAsync, cuMemAllocFromPoolAsync, cuMemFreeAsync, or their _ptsz variants (per_thread: the
 * program called those, and its stream handle means what they mean by it). */
rzcu_result rz__dev_mem_alloc_async(rz_devptr_t *p, size_t bytes, rzcu_stream s, int per_thread);

rzcu_result rz__dev_mem_alloc_from_pool(rz_devptr_t *p, size_t bytes, rzcu_mem_pool pool, rzcu_stream s,
                                        int per_thread);

rzcu_result rz__dev_mem_free_async(rz_devptr_t p, rzcu_stream s, int per_thread);

/* cuMemGetAddressRange_v2: the driver's allocation holding p (*base, *size). */
rzcu_result rz__dev_address_range(rz_devptr_t *base, size_t *size, rz_devptr_t p);

#endif /* REDZONE_MEMORY_H */
