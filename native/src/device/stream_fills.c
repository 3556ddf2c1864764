/*
 * Stream-ordered band fills (part of the device seam): the events that follow the band fills of
 * stream-ordered allocations, which the library leaves in a program's stream without waiting for them.
 *
 * Band fills. A stream-ordered allocation's band is written by a memset in the allocating stream's order, and
 * the program's earlier work on that stream may run for long (or wait for the host: a kernel polling a flag
 * the host sets after the allocation returns). Waiting for the memset would make cuMemAllocAsync wait for all
 * of it, a host wait (and a deadlock) the program never asked for. So an event is recorded after the memset
 * and the zone is marked RZ_ZONE_FILLING with the event's slot; whoever would read the band (scans, poisons,
 * the free-time check of a plain cuMemFree, the debugger) leaves the zone alone until cuEventQuery says the
 * fill is done, and the first to see it done clears the mark. A stream-ordered free needs no look: its band
 * copy runs in stream order after the memset.
 *
 * The events form a bounded pool (FILL_SLOTS), each slot holding one event of one context, made on first use
 * and reused: a slot whose event is done goes back to the free list, and a zone keeps its slot's number and
 * generation (fill = slot | gen << FILL_GEN_SHIFT), so a zone whose slot was reused since (which happens only
 * once its event was done) is seen done at once. When every slot is waiting, a few are queried for
 * completion; failing that, the allocation shares a waiting slot of its stream (the event recorded again
 * covers both fills: the later completes after the earlier; never the per-thread stream, whose handle names
 * another stream on each thread); failing that, the zone is not watched. Nothing here waits. A context's events go with it (the
 * context-end hooks, ctx_forget.c): its slots are emptied, never destroyed by hand.

 */
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>

#include "common.h"
#include "stream_fills.h"
#include "capture_mode.h"
#include "driver.h"
#include "rz_annotate.h"
#include "state.h"

#define FILL_SLOTS 1024u
#define FILL_GEN_SHIFT 10
#define FILL_GENS 64u /* 16 - FILL_GEN_SHIFT bits */
#define FILL_QUERY 8  /* waiting slots queried for completion when none is free */
#define RZCU_EVENT_DISABLE_TIMING 0x2

_Static_assert(FILL_SLOTS == 1u << FILL_GEN_SHIFT, "slot numbers fill the low bits of rz_zone_node_t.fill");

static pthread_mutex_t g_fill_lock = PTHREAD_MUTEX_INITIALIZER;
static struct fill_slot {
    void *ctx;         /* the event's context (NULL: no event) */
    rzcu_stream stream; /* where it was last recorded */
    rzcu_event event;
    uint8_t gen;
    uint8_t waiting; /* recorded, not yet seen done */
} g_fill[FILL_SLOTS];
static uint16_t g_fill_free[FILL_SLOTS]; /* slots not waiting (their event done, or none yet) */
static unsigned g_nfill_free, g_fill_used, g_fill_cursor;

/* Slot i's event is done (or cannot be asked: a dead context, a sticky error) or no longer waiting: 1. */
static int fill_done_locked(unsigned i) {
    struct fill_slot *f = &g_fill[i];
    if (!f->waiting)
        return 1;
    if (f->event) {
        /* a quiet section: another thread's global capture would be lost to a plain query (band_io.c) */
        rzcu_capture_mode saved = rz__dev_quiet_begin();
        rzcu_result r = rz__drv.cuEventQuery(f->event);
        rz__dev_quiet_end(saved);
        if (r == RZCUDA_ERROR_NOT_READY)
            return 0;
    }
    f->waiting = 0;
    g_fill_free[g_nfill_free++] = (uint16_t)i;
    return 1;
}

/* A slot for a new fill in context ctx, its event made or reused, not yet recorded; FILL_SLOTS when none. */
static unsigned fill_take_locked(void *ctx) {
    if (g_nfill_free == 0 && g_fill_used == FILL_SLOTS)
        for (unsigned k = 0; k < FILL_QUERY && g_nfill_free == 0; k++)
            fill_done_locked(g_fill_cursor++ % FILL_SLOTS);
    unsigned i;
    if (g_nfill_free)
        i = g_fill_free[--g_nfill_free];
    else if (g_fill_used < FILL_SLOTS)
        i = g_fill_used++;
    else
        return FILL_SLOTS;
    struct fill_slot *f = &g_fill[i];
    if (f->event && f->ctx != ctx) {
        rz__drv.cuEventDestroy_v2(f->event); /* another context's, which is still alive */
        f->event = NULL;
    }
    if (f->event == NULL && rz__drv.cuEventCreate(&f->event, RZCU_EVENT_DISABLE_TIMING) != RZCUDA_SUCCESS) {
        f->event = NULL;
        g_fill_free[g_nfill_free++] = (uint16_t)i;
        return FILL_SLOTS;
    }
    f->ctx = ctx;
    f->gen = (uint8_t)((f->gen + 1) % FILL_GENS); /* zones naming the old generation: their fill was done */
    return i;
}

rzcu_result rz__fill_event(void *ctx, rzcu_stream s, uint16_t *fill) {
    if (rz__drv.cuEventCreate == NULL || rz__drv.cuEventRecord == NULL || rz__drv.cuEventQuery == NULL ||
        rz__drv.cuEventDestroy_v2 == NULL)
        return RZCUDA_ERROR_NOT_SUPPORTED;
    rzcu_result r = RZCUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&g_fill_lock);
    unsigned i = fill_take_locked(ctx);
    if (i < FILL_SLOTS) {
        r = rz__drv.cuEventRecord(g_fill[i].event, s);
        if (r == RZCUDA_SUCCESS) {
            g_fill[i].stream = s;
            g_fill[i].waiting = 1;
        } else {
            g_fill_free[g_nfill_free++] = (uint16_t)i;
        }
    } else {
        /* Every slot waits: share this stream's newest one, recorded again after this fill. */
        for (unsigned k = g_fill_used; k-- > 0;) {
            struct fill_slot *f = &g_fill[k];
            /* not the per-thread stream: its handle names another stream on each thread */
            if (f->waiting && f->ctx == ctx && f->stream == s && s != RZCU_STREAM_PER_THREAD) {
                r = rz__drv.cuEventRecord(f->event, s);
                i = r == RZCUDA_SUCCESS ? k : FILL_SLOTS;
                break;
            }
        }
    }
    if (i < FILL_SLOTS && r == RZCUDA_SUCCESS)
        *fill = (uint16_t)(i | (unsigned)g_fill[i].gen << FILL_GEN_SHIFT);
    pthread_mutex_unlock(&g_fill_lock);
    return r;
}

static int zone_filled_locked(rz_zone_node_t *z) {
    unsigned i = z->fill % FILL_SLOTS, gen = z->fill >> FILL_GEN_SHIFT;
    int done = g_fill[i].gen != gen || fill_done_locked(i);
    if (done)
        z->flags &= (uint8_t)~RZ_ZONE_FILLING;
    return done;
}

int rz__zone_filled(rz_zone_node_t *z) {
    if (!(z->flags & RZ_ZONE_FILLING))
        return 1;
    pthread_mutex_lock(&g_fill_lock);
    int done = zone_filled_locked(z);
    pthread_mutex_unlock(&g_fill_lock);
    return done;
}

int rz__zone_fill_stream(const rz_zone_node_t *z, rzcu_stream *s) {
    if (!(z->flags & RZ_ZONE_FILLING))
        return 0;
    unsigned i = z->fill % FILL_SLOTS, gen = z->fill >> FILL_GEN_SHIFT;
    pthread_mutex_lock(&g_fill_lock);
    int waiting = g_fill[i].gen == gen && g_fill[i].waiting;
    if (waiting)
        *s = g_fill[i].stream;
    pthread_mutex_unlock(&g_fill_lock);
    return waiting;
}

void rz__fill_forget_ctx(void *ctx) {
    pthread_mutex_lock(&g_fill_lock);
    for (unsigned i = 0; i < g_fill_used; i++) {
        struct fill_slot *f = &g_fill[i];
        if (f->ctx != ctx || ctx == NULL)
            continue;
        f->event = NULL; /* destroyed with its context */
        f->ctx = NULL;
        f->gen = (uint8_t)((f->gen + 1) % FILL_GENS);
        if (f->waiting) {
            f->waiting = 0;
            g_fill_free[g_nfill_free++] = (uint16_t)i;
        }
    }
    pthread_mutex_unlock(&g_fill_lock);
}

unsigned rz__fill_events(void) {
    pthread_mutex_lock(&g_fill_lock);
    unsigned n = 0;
    for (unsigned i = 0; i < g_fill_used; i++)
        n += g_fill[i].event != NULL;
    pthread_mutex_unlock(&g_fill_lock);
    return n;
}

