/*
 * Stream-ordered band fills (stream_fills.c).
 */
#ifndef REDZONE_STREAM_FILLS_H
#define REDZONE_STREAM_FILLS_H

#include "common.h"
#include "state.h"

/* Record an event after a stream-ordered band fill queued on s (of ctx, the current context): *fill, for the
 * zone's `fill`, names it. Never waits. RZCUDA_ERROR_OUT_OF_MEMORY when no event can be had (every slot waits on
 * other streams): the zone is then not watched. */
rzcu_result rz__fill_event(void *ctx, rzcu_stream s, uint16_t *fill);

/* Whether zone z's band is written (no RZ_ZONE_FILLING, or its event done: then the mark is cleared). Never
 * waits. Registry lock held, or z is a copy out of the registry. */
int rz__zone_filled(rz_zone_node_t *z);

/* The stream zone z's fill was queued on, while its event is not seen done: 1 and *s; else 0. */
int rz__zone_fill_stream(const rz_zone_node_t *z, rzcu_stream *s);



/* Context ctx has ended: its events went with it. */
void rz__fill_forget_ctx(void *ctx);

/* Events the fill slots hold now (tests: bounded, released with their contexts). */
unsigned rz__fill_events(void);


#endif /* REDZONE_STREAM_FILLS_H */
