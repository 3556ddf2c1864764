/*
 * Band fill, in one place (band_fill.c).
 */
#ifndef REDZONE_BAND_FILL_H
#define REDZONE_BAND_FILL_H

#include "common.h"
#include "alloc.h"
#include "state.h"

/* The byte a zone with this index gets when its band is (re)filled now. Caller holds the registry lock or
 * accepts a racing poison (see docs/design.md). */
uint8_t rz__band_byte_for(uint64_t index);

/* Fill [band, band + bytes) with value for an allocation of kind req: on the library's stream for ordinary
 * memory (waited for); for a stream-ordered allocation a memset queued in the program's stream order, not
 * waited for (the caller records an event after it, stream_fills.c). */
rzcu_result rz__band_fill_range(const rz_alloc_req_t *req, rz_devptr_t band, uint8_t value, size_t bytes);

/* A new zone's band (zone: ptr, user_bytes, pad_bytes, front_units, index, ctx, flags set; raw: the driver's
 * allocation, where a front band starts): its expected byte, then left for the lazy install (lazy), captured
 * into the program's graph (captured), or written now, stream-ordered ones followed by an event; sets the
 * zone's flags (PENDING, GRAPH, FILLING, or UNWATCHED with a warning when it could not be written). */
void rz__band_fill_new(rz_zone_node_t *zone, rz_devptr_t raw, const rz_alloc_req_t *req, int lazy, int captured);

/* Write zone's bands (back and front) with its expected byte again: one batch on the library's stream. */
rzcu_result rz__band_rewrite(const rz_zone_node_t *zone);

#endif /* REDZONE_BAND_FILL_H */
