/*
 * Allocation and free: the creation index, the choice to pad, band installation and registration, and the
 * counters. Shaped like the driver API so the interposer and runtimes that integrate red zones directly
 * use the same calls; the driver's result codes come back untouched.
 */
#include <stdint.h>

#include "rz_internal.h"

RZ_EXPORT uint64_t rz_next_index(void) { return atomic_load_explicit(&RZ_STATE.next_index, memory_order_relaxed); }

/* Pad for this allocation: 0 when bands are off, below MIN_IDX, or the size would overflow. */
static uint64_t pad_for(const rz_options_t *o, uint64_t index, size_t bytes, int *wanted) {
    *wanted = 0;
    if (o->pad_bytes == 0 || index < o->min_idx || bytes == 0)
        return 0;
    *wanted = 1;
    if (bytes > SIZE_MAX - o->pad_bytes) {
        rz__warn("allocation #%llu of %zu bytes: size + %llu pad bytes overflows; passed to the driver unpadded",
                 (unsigned long long)index, bytes, (unsigned long long)o->pad_bytes);
        return 0;
    }
    return o->pad_bytes;
}

RZ_EXPORT int rz_mem_alloc(rz_devptr_t *dptr, size_t bytes) {
    const rz_options_t *o = rz__options();
    uint64_t index = atomic_fetch_add_explicit(&RZ_STATE.next_index, 1, memory_order_relaxed);
    if (rz__dev_load() != RZ_OK)
        return RZCUDA_ERROR_NOT_INITIALIZED;
    if (dptr == NULL)
        return (int)rz__drv.cuMemAlloc_v2(NULL, bytes); /* the driver's own answer to a NULL out pointer */
    int wanted;
    uint64_t pad = pad_for(o, index, bytes, &wanted);
    rz_devptr_t p = 0;
    rzcu_result r = rz__dev_alloc(&p, bytes + pad);
    if (r == RZCUDA_ERROR_OUT_OF_MEMORY && pad > 0) {
        rz__warn("allocation #%llu of %zu bytes: out of memory with %llu pad bytes; retrying without a band",
                 (unsigned long long)index, bytes, (unsigned long long)pad);
        pad = 0;
        r = rz__dev_alloc(&p, bytes);
    }
    if (r != RZCUDA_SUCCESS)
        return (int)r;
    rz_zone_node_t zone = {.ptr = p, .user_bytes = bytes, .pad_bytes = (uint32_t)pad, .index = index,
                           .ctx = rz__dev_current_ctx()};
    if (pad > 0) {
        zone.expected = rz__band_byte_for(index);
        rzcu_result f = rz__dev_fill(p + bytes, zone.expected, pad);
        if (f != RZCUDA_SUCCESS) {
            rz__warn("allocation #%llu: filling its band failed with %s; the zone is unpadded",
                     (unsigned long long)index, rz__cu_name(f));
            zone.flags |= RZ_ZONE_UNWATCHED;
        }
    }
    if (rz__registry_add(&zone) != RZ_OK) {
        /* No host memory for the registry: the program still gets its memory, unwatched and uncounted. */
        rz__warn("allocation #%llu: out of registry memory; not watched", (unsigned long long)index);
        zone.flags |= RZ_ZONE_UNWATCHED;
    } else {
        rz__record_map(bytes + pad);
        if (rz__zone_watched(&zone)) {
            rz__record_guard_install(pad);
            rz__count(RZ_C_live_zones, 1);
        }
    }
    if (wanted && !rz__zone_watched(&zone))
        rz__count(RZ_C_unpadded_allocs, 1);
    if (rz__zone_watched(&zone) && index == o->trace_idx)
        rz__backtrace(index);
    *dptr = p;
    return RZCUDA_SUCCESS;
}

RZ_EXPORT int rz_mem_free(rz_devptr_t dptr) {
    rz__options();
    if (rz__dev_load() != RZ_OK)
        return RZCUDA_ERROR_NOT_INITIALIZED;
    rz_zone_node_t zone;
    int known = rz__registry_remove(dptr, &zone) == RZ_OK;
    rzcu_result r = rz__dev_free(dptr);
    if (!known)
        return (int)r;
    if (r != RZCUDA_SUCCESS) {
        rz__record_unmap_failure();
        RZ_CHECK(rz__registry_add(&zone) == RZ_OK || !"re-registering a zone whose free failed");
        return (int)r;
    }
    rz__record_unmap(zone.user_bytes + zone.pad_bytes);
    if (rz__zone_watched(&zone))
        rz__count(RZ_C_live_zones, -1);
    return RZCUDA_SUCCESS;
}
