/*
 * Band fill, in one place: the byte a zone's band holds (the fill, or under a poison window 0xEE inside it and
 * 0x00 outside), the fill of a new zone's band at its allocation (eagerly on the library's stream, queued in
 * the program's stream for a stream-ordered allocation and followed by an event, captured into a graph, or
 * left for the lazy install, core/band.c, which writes waiting bands before the program's next device work),
 * and writing a zone's bands back with the byte they should hold. Scans and poisons re-fill bands in batches
 * (core/band.c) with the same byte.
 */
#include "common.h"
#include "band_fill.h"
#include "alloc.h"
#include "band_io.h"
#include "capture.h"
#include "device_ctx.h"
#include "format.h"
#include "registry.h"
#include "report.h"
#include "state.h"
#include "stream_fills.h"
#include "stream_ops.h"

uint8_t rz__band_byte_for(uint64_t index) {
    return rz__window_byte(RZ_STATE.poison_active, RZ_STATE.poison_lo, RZ_STATE.poison_hi, RZ_STATE.fill, index);
}

static int is_async(const rz_alloc_req_t *req) { return req->kind == RZ_ALLOC_ASYNC || req->kind == RZ_ALLOC_POOL; }

/* Install the band: on the library's stream for ordinary memory (waiting for it); for stream-ordered
 * allocations a memset queued in the program's stream order, not waited for (the stream may be busy for long,
 * or wait for the host): the caller records an event after it, and scans leave the zone alone until the
 * event is done (stream_fills.c). */
rzcu_result rz__band_fill_range(const rz_alloc_req_t *req, rz_devptr_t band, uint8_t value, size_t bytes) {
    if (!is_async(req))
        return rz__dev_fill(band, value, bytes);
    return rz__dev_fill_async(band, value, bytes, rz__stream_of(req->stream, req->per_thread));
}

void rz__band_fill_new(rz_zone_node_t *zone, rz_devptr_t raw, const rz_alloc_req_t *req, int lazy, int captured) {
    /* Under the registry lock, which rz_poison holds while it changes the window: no data race (the
     * window may still change before the zone is registered, see docs/design.md). Lazy: provisional,
     * fixed when the band is written. */
    rz__registry_lock();
    zone->expected = rz__band_byte_for(zone->index);
    rz__registry_unlock();
    if (lazy) {
        zone->flags |= RZ_ZONE_PENDING;
    } else if (captured) {
        /* The band's memset is captured after the allocation node (each launch writes it; nothing may
         * synchronise a captured stream), and the zone is checked when it is freed (free_check.c); scans leave
         * it alone: the memory is allocated only while a launch has it. */
        rz_devptr_t band = zone->ptr + zone->user_bytes;
        if (rz__band_fill_range(req, band, zone->expected, zone->pad_bytes) == RZCUDA_SUCCESS)
            zone->flags |= RZ_ZONE_GRAPH;
        else
            zone->flags |= RZ_ZONE_UNWATCHED;
    } else {
        rzcu_result f = rz__band_fill_range(req, zone->ptr + zone->user_bytes, zone->expected, zone->pad_bytes);
        if (f == RZCUDA_SUCCESS && zone->front_units)
            f = rz__band_fill_range(req, raw, zone->expected, rz__zone_front(zone));
        if (f != RZCUDA_SUCCESS) {
            rz__warn("allocation #%llu: filling its band failed with %s; the zone is unpadded",
                     (unsigned long long)zone->index, rz__cu_name(f));
            zone->flags |= RZ_ZONE_UNWATCHED;
        } else if (is_async(req)) {
            f = rz__fill_event(zone->ctx, rz__stream_of(req->stream, req->per_thread), &zone->fill);
            if (f == RZCUDA_SUCCESS) {
                zone->flags |= RZ_ZONE_FILLING;
            } else {
                rz__warn("allocation #%llu: no event to follow its band fill (%s); the zone is not watched",
                         (unsigned long long)zone->index, rz__cu_name(f));
                zone->flags |= RZ_ZONE_UNWATCHED;
            }
        }
    }
}

rzcu_result rz__band_rewrite(const rz_zone_node_t *zone) {
    rz_band_io_t io[2] = {{.ctx = zone->ctx, .dev = zone->ptr + zone->user_bytes, .bytes = zone->pad_bytes,
                           .value = zone->expected},
                          {.ctx = zone->ctx, .dev = zone->ptr - rz__zone_front(zone), .bytes = rz__zone_front(zone),
                           .value = zone->expected, .front = 1}};
    return rz__dev_write(io, zone->front_units ? 2 : 1);
}
