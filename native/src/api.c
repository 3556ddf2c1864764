/*
 * Allocation and free: the creation index, the choice to pad, band installation and registration, and the
 * counters, for every kind of allocation the driver offers (plain, pitched, managed, stream-ordered, from a
 * pool). The public rz_mem_alloc/rz_mem_free and the interposed driver entry points (hooks.c) all come
 * through here; the driver's result codes come back untouched.
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

/* Stream-ordered kinds get their band filled on the program's stream, in order. */
static int is_async(const rz_alloc_req_t *req) { return req->kind == RZ_ALLOC_ASYNC || req->kind == RZ_ALLOC_POOL; }

/* One raw driver allocation of `bytes` (for PITCH: `bytes` extra rows' worth, see rz__alloc). */
static rzcu_result raw_alloc(const rz_alloc_req_t *req, rz_devptr_t *p, size_t bytes, size_t extra_rows) {
    switch (req->kind) {
    case RZ_ALLOC_PLAIN:
        return rz__drv.cuMemAlloc_v2(p, bytes);
    case RZ_ALLOC_MANAGED:
        return rz__drv.cuMemAllocManaged(p, bytes, req->flags);
    case RZ_ALLOC_PITCH:
        return rz__drv.cuMemAllocPitch_v2(p, req->pitch, req->width, req->height + extra_rows, req->element_bytes);
    case RZ_ALLOC_ASYNC:
        return req->per_thread ? rz__drv.cuMemAllocAsync_ptsz(p, bytes, req->stream)
                               : rz__drv.cuMemAllocAsync(p, bytes, req->stream);
    case RZ_ALLOC_POOL:
        return req->per_thread ? rz__drv.cuMemAllocFromPoolAsync_ptsz(p, bytes, req->pool, req->stream)
                               : rz__drv.cuMemAllocFromPoolAsync(p, bytes, req->pool, req->stream);
    }
    return RZCUDA_ERROR_INVALID_VALUE;
}

static int raw_available(const rz_alloc_req_t *req) {
    switch (req->kind) {
    case RZ_ALLOC_PLAIN:
        return rz__drv.cuMemAlloc_v2 != NULL;
    case RZ_ALLOC_MANAGED:
        return rz__drv.cuMemAllocManaged != NULL;
    case RZ_ALLOC_PITCH:
        return rz__drv.cuMemAllocPitch_v2 != NULL;
    case RZ_ALLOC_ASYNC:
        return (req->per_thread ? (void *)rz__drv.cuMemAllocAsync_ptsz : (void *)rz__drv.cuMemAllocAsync) != NULL;
    case RZ_ALLOC_POOL:
        return (req->per_thread ? (void *)rz__drv.cuMemAllocFromPoolAsync_ptsz
                                : (void *)rz__drv.cuMemAllocFromPoolAsync) != NULL;
    }
    return 0;
}

/* Install the band: on the library's stream for ordinary memory; in the program's stream order for
 * stream-ordered allocations, then waiting for it, so the band is in place before any scan reads it. */
static rzcu_result fill_band(const rz_alloc_req_t *req, rz_devptr_t band, uint8_t value, size_t bytes) {
    if (!is_async(req))
        return rz__dev_fill(band, value, bytes);
    rzcu_stream s = req->stream;
    if (req->per_thread && s == NULL)
        s = RZCU_STREAM_PER_THREAD;
    rzcu_result r = rz__drv.cuMemsetD8Async(band, value, bytes, s);
    if (r == RZCUDA_SUCCESS)
        r = rz__drv.cuStreamSynchronize(s);
    return r;
}

int rz__alloc(rz_devptr_t *dptr, size_t bytes, const rz_alloc_req_t *req) {
    const rz_options_t *o = rz__options();
    uint64_t index = atomic_fetch_add_explicit(&RZ_STATE.next_index, 1, memory_order_relaxed);
    if (rz__dev_load() != RZ_OK || !raw_available(req))
        return RZCUDA_ERROR_NOT_INITIALIZED;
    rz__exit_scan_arm();
    rz__agent_start();
    if (dptr == NULL || (req->kind == RZ_ALLOC_PITCH && req->pitch == NULL))
        return (int)raw_alloc(req, dptr, bytes, 0); /* the driver's own answer to a NULL out pointer */
    int wanted;
    uint64_t pad = pad_for(o, index, bytes, &wanted);
    size_t extra_rows = 0;
    if (req->kind == RZ_ALLOC_PITCH && pad > 0) {
        /* The band is whole extra rows after the pitched block. The pitch is not known until the driver
         * answers, but it is at least the width, so ceil(pad / width) rows always hold the pad. */
        extra_rows = req->width ? (size_t)((pad + req->width - 1) / req->width) : 0;
        if (extra_rows == 0 || req->height > SIZE_MAX - extra_rows ||
            (uint64_t)extra_rows * ((uint64_t)req->width + 4096) > UINT32_MAX) {
            extra_rows = 0;
            pad = 0;
        }
    }
    rz_devptr_t p = 0;
    rzcu_result r = raw_alloc(req, &p, bytes + pad, extra_rows);
    if (r == RZCUDA_ERROR_OUT_OF_MEMORY && pad > 0) {
        rz__warn("allocation #%llu of %zu bytes: out of memory with %llu pad bytes; retrying without a band",
                 (unsigned long long)index, bytes, (unsigned long long)pad);
        pad = 0;
        extra_rows = 0;
        r = raw_alloc(req, &p, bytes, 0);
    }
    if (r != RZCUDA_SUCCESS)
        return (int)r;
    if (req->kind == RZ_ALLOC_PITCH) {
        bytes = *req->pitch * req->height;
        pad = *req->pitch * extra_rows; /* bounded by the check above: pitch < width + 4096 */
    }
    rz_zone_node_t zone = {.ptr = p, .user_bytes = bytes, .pad_bytes = (uint32_t)pad, .index = index,
                           .ctx = rz__dev_current_ctx()};
    if (pad > 0) {
        zone.expected = rz__band_byte_for(index);
        rzcu_result f = fill_band(req, p + bytes, zone.expected, pad);
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

RZ_EXPORT int rz_mem_alloc(rz_devptr_t *dptr, size_t bytes) {
    rz_alloc_req_t req = {.kind = RZ_ALLOC_PLAIN};
    return rz__alloc(dptr, bytes, &req);
}

int rz__free(rz_devptr_t dptr, const rz_free_req_t *req) {
    const rz_options_t *o = rz__options();
    if (rz__dev_load() != RZ_OK)
        return RZCUDA_ERROR_NOT_INITIALIZED;
    rz_zone_node_t zone;
    int known = rz__registry_remove(dptr, &zone) == RZ_OK;
    if (known && rz__zone_watched(&zone) && (o->scan & RZ_SCAN_FREE))
        rz__scan_before_free(&zone, req); /* reports; never changes the outcome of the free */
    rzcu_result r;
    if (req->async)
        r = req->per_thread ? rz__drv.cuMemFreeAsync_ptsz(dptr, req->stream) : rz__drv.cuMemFreeAsync(dptr, req->stream);
    else
        r = rz__drv.cuMemFree_v2(dptr);
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

RZ_EXPORT int rz_mem_free(rz_devptr_t dptr) {
    rz_free_req_t req = {.async = 0};
    return rz__free(dptr, &req);
}
