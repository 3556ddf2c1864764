/*
 * Pool sub-allocations described through the NVTX memory API (issue 32 item 4; nvtx_regions.c): heaps and
 * their regions, as interpose/nvtx_inject.c receives them. Each registered region's slack (from its end to
 * the next region or the heap's end, at most a band's width) holds the band fill and is checked like a
 * band; an unregistered region is held in the quarantine (core/quarantine.c: the free fill, FIFO within
 * METRALE_REDZONE_QUARANTINE) until a region is registered over it. A heap is watched only when it starts at a
 * live allocation's pointer (the pool's own cuMemAlloc); it is forgotten when that allocation is.
 */
#ifndef REDZONE_NVTX_REGIONS_H
#define REDZONE_NVTX_REGIONS_H

#include "common.h"

#define RZ_NVTX_HEAPS 64                      /* heaps watched at once */

/* A heap [base, base + size): its handle (never NULL), or NULL when it is not watched (no live allocation
 * starts at base, or RZ_NVTX_HEAPS are watched). */
void *rz__nvtx_heap_register(uint64_t base, uint64_t size);
/* Its regions checked, then forgotten with it (unregister) or each unregistered (reset). */
void rz__nvtx_heap_unregister(void *heap);
void rz__nvtx_heap_reset(void *heap);
/* A region [ptr, ptr + size) of heap: the slack of the region before it is checked, then its own filled. A
 * region outside its heap or over a registered one is ignored (one warning). */
void rz__nvtx_region_register(void *heap, uint64_t ptr, uint64_t size);
void rz__nvtx_region_resize(uint64_t ptr, uint64_t size);
void rz__nvtx_region_unregister(uint64_t ptr);
/* Its name (NULL: none), as reports give it (truncated to 47 bytes). */
void rz__nvtx_region_name(uint64_t ptr, const char *name);

/* Check every watched region of every heap: registered with the band engine at the first heap, run at the
 * start of every scan, under the registry lock. */
void rz__nvtx_regions_check_locked(void);

/* `redzone list` reads the heaps and regions from memory: __redzone_nvtx (nvtx_regions.c), decoded by
 * gdb/redzone_gdb/nvtx.py. */

#endif /* REDZONE_NVTX_REGIONS_H */
