/*
 * The free check (METRALE_REDZONE_SCAN=free): a zone's band is checked just before the zone is freed (in
 * stream order for a stream-ordered free), so an overrun is caught while the allocation's index is known.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "free_check.h"
#include "alloc.h"
#include "band.h"
#include "band_io.h"
#include "capture.h"
#include "capture_mode.h"
#include "device_ctx.h"
#include "format.h"
#include "graph_slots.h"
#include "judge.h"
#include "launch_attribution.h"
#include "launch_check.h"
#include "launch_ring.h"
#include "registry.h"
#include "report.h"
#include "rz_annotate.h"
#include "state.h"
#include "sticky.h"
#include "sticky_said.h"
#include "stream_ops.h"
#include "work_epoch.h"

struct async_check {
    struct async_check *next; /* in the deferred list */
    rz_zone_node_t zone;
    uint32_t nframes; /* its allocation stack (METRALE_REDZONE_STACKS), copied when it left the registry */
    uint64_t frames[RZ_STACK_MAX];
    uint8_t band[];
};

static void check_free(struct async_check *c) {
    if (!rz__dev_pinned_free(c))
        free(c);
}

/* Registry lock held (scans report under it too, and share the ring's report_since). */
static void judge_freed_locked(const rz_zone_node_t *zone, const uint8_t *band, const uint64_t *frames,
                               uint32_t nframes) {
    rz__launch_ring_since_scan();
    rz__launch_judge_locked(); /* launch checks that completed before: they may name the writer */
    if (rz__attrib_freed_reported(zone, band))
        return; /* reported by a launch check already, with its launch */
    /* band: the band after the end, then the front band (if any) right behind it */
    int bad = rz__band_judge_freed(zone, band, frames, nframes);
    if (bad & RZ_JUDGE_REPORTED)
        rz__log("redzone: alloc#%llu was violated when it was freed", (unsigned long long)zone->index);
}

/*
 * Why stream-ordered checks can be deferred: their host function runs on the driver's callback thread and
 * must never wait for the registry lock, because the holder may be waiting for that very stream (the
 * driver drains every stream in cuMemHostUnregister, which a scan calls when it grows its staging, and
 * other calls may synchronise on a real driver): a deadlock. When the lock is busy, the check (its band
 * copied in stream order already) is queued here and judged by the next scan, band check before a free,
 * successful synchronisation through the hooks, or at exit.
 */
static pthread_mutex_t g_deferred_lock = PTHREAD_MUTEX_INITIALIZER;
static struct async_check *g_deferred;
static struct async_check **g_deferred_tail = &g_deferred;
static _Atomic int g_have_deferred;



void rz__free_check_arm(void) {
    rz__alloc_on_free(rz__free_check);
    rz__bands_on_scan_begin(RZ_SCAN_BEGIN_FREE_CHECKS, rz__free_checks_deferred_locked);
}

/* Registry lock held: judge the queued checks, oldest first. */
void rz__free_checks_deferred_locked(void) {
    if (RZ_LIKELY(!atomic_load_explicit(&g_have_deferred, memory_order_acquire)))
        return;
    pthread_mutex_lock(&g_deferred_lock);
    struct async_check *c = g_deferred;
    g_deferred = NULL;
    g_deferred_tail = &g_deferred;
    atomic_store_explicit(&g_have_deferred, 0, memory_order_relaxed);
    pthread_mutex_unlock(&g_deferred_lock);
    while (c) {
        struct async_check *next = c->next;
        judge_freed_locked(&c->zone, c->band, c->frames, c->nframes);
        check_free(c);
        c = next;
    }
}

void rz__free_checks_deferred(void) {
    rz__launch_checks(); /* launch checks that completed while the registry was busy */
    if (RZ_LIKELY(!atomic_load_explicit(&g_have_deferred, memory_order_acquire)))
        return;
    rz__registry_lock();
    rz__free_checks_deferred_locked();
    rz__registry_unlock();
}

/* Whether the band read into c differs from what the zone's band holds: the judge is pure, so a clean band
 * (nearly every free) needs no lock; a violated one is reported under it. */
static int freed_band_violated(const struct async_check *c) {
    rz_violation_t v;
    return rz__band_violation(&c->zone, c->band, c->zone.pad_bytes, 0, &v) ||
           (c->zone.front_units &&
            rz__band_violation(&c->zone, c->band + c->zone.pad_bytes, rz__zone_front(&c->zone), 1, &v));
}

static void judge_freed(const struct async_check *c) {
    if (!freed_band_violated(c) && RZ_LIKELY(!atomic_load_explicit(&g_have_deferred, memory_order_acquire)))
        return;
    rz__registry_lock();
    rz__free_checks_deferred_locked();
    judge_freed_locked(&c->zone, c->band, c->frames, c->nframes);
    rz__registry_unlock();
}

static void defer_check(struct async_check *c) {
    pthread_mutex_lock(&g_deferred_lock);
    c->next = NULL;
    *g_deferred_tail = c;
    g_deferred_tail = &c->next;
    atomic_store_explicit(&g_have_deferred, 1, memory_order_release);
    pthread_mutex_unlock(&g_deferred_lock);
}

/* Host function in the program's stream: the band copy before it has completed; no CUDA calls here, and
 * no waiting for the registry lock (see above): a timeout of 0 only tries it. */
static void async_check_cb(void *arg) {
    struct async_check *c = arg;
    if (!freed_band_violated(c) && RZ_LIKELY(!atomic_load_explicit(&g_have_deferred, memory_order_acquire))) {
        check_free(c);
        return;
    }
    if (rz__registry_lock_timed(0) == RZ_OK) {
        rz__free_checks_deferred_locked();
        judge_freed_locked(&c->zone, c->band, c->frames, c->nframes);
        rz__registry_unlock();
        check_free(c);
        return;
    }
    defer_check(c);
}

/*
 * A cuMemFreeAsync captured into a graph, of memory the graph allocates (RZ_ZONE_GRAPH): the band copy and
 * this host function are captured before the free node and run at every launch, as long as the graph lives,
 * which the library cannot see end. So their buffer is a page-locked slot held for good (stream_fills.c), and
 * this function only reads it: never frees it, never queues it (a copy goes to the deferred list when the
 * lock is busy). Launches of one executable run one after another, so no launch's copy overwrites the slot
 * while the previous launch's check reads it.
 */
static void graph_check_cb(void *arg) {
    const struct async_check *c = arg;
    if (rz__registry_lock_timed(0) == RZ_OK) {
        rz__free_checks_deferred_locked();
        judge_freed_locked(&c->zone, c->band, c->frames, c->nframes);
        rz__registry_unlock();
        return;
    }
    size_t size = sizeof *c + c->zone.pad_bytes + rz__zone_front(&c->zone);
    struct async_check *copy = malloc(size);
    if (copy == NULL) {
        rz__warn("alloc#%llu: no host memory to judge its band at this graph launch",
                 (unsigned long long)c->zone.index);
        return;
    }
    memcpy(copy, c, size);
    defer_check(copy);
}

/* Capture the check of graph zone `zone` (its stack in c) into the graph s is capturing. */
static void capture_graph_check(const struct async_check *c, rzcu_stream s) {
    const rz_zone_node_t *zone = &c->zone;
    size_t size = sizeof *c + zone->pad_bytes + rz__zone_front(zone);
    struct async_check *g = rz__graph_slot_take(size);
    if (g == NULL) {
        static atomic_int warned;
        if (!atomic_exchange(&warned, 1))
            rz__warn("alloc#%llu: a free captured into a graph is not checked: no page-locked slot left for it (or "
                     "none can be had); later ones neither", (unsigned long long)zone->index);
        return;
    }
    memcpy(g, c, sizeof *g);
    rzcu_result r = rz__dev_copy_to_host_async(g->band, zone->ptr + zone->user_bytes, zone->pad_bytes, s);
    if (r == RZCUDA_SUCCESS && zone->front_units)
        r = rz__dev_copy_to_host_async(g->band + zone->pad_bytes, zone->ptr - rz__zone_front(zone),
                                       rz__zone_front(zone), s);
    if (r == RZCUDA_SUCCESS)
        r = rz__dev_host_func(s, graph_check_cb, g);
    if (r != RZCUDA_SUCCESS) /* the slot stays taken: a copy captured already may write it at each launch */
        rz__warn("alloc#%llu: capturing its band check into the graph failed with %s; not checked",
                 (unsigned long long)zone->index, rz__cu_name(r));
}

/*
 * A free's check without host waits the program did not ask for (work_epoch.h). A zone whose every write
 * the hooks see (RZ_ZONE_SEEN) needs no read when no device work was noted since every such band was last
 * judged clean. Otherwise its band is read once the work that could write it is done: when all the work
 * since the last point everything was complete went to the default streams, one synchronous copy on the
 * legacy stream is ordered after it (one host wait, where the driver's own cuMemFree waits anyway); else the
 * context is synchronised first, as before. A run of frees with no device work between them (a program
 * freeing its buffers after a synchronisation) turns into one batched scan of every zone after enough of
 * them (live zones / CHURN_PER_ZONES, with at least CHURN_MIN_ZONES live), after which the rest read nothing;
 * a violation that scan finds is reported by it (a scan line), not as a violation at the free.
 */
#define CHURN_PER_ZONES 64
#define FREE_READ_STREAMS 16 /* stream handles a read orders itself after by events; more: the context's sync */
#define CHURN_MIN_ZONES 256 /* below: single reads cost less than a scan (and report at the free) */
static _Atomic uint64_t g_last_read = UINT64_MAX; /* the work count at the last free that read its band */
static _Atomic uint64_t g_same_reads;              /* frees in a row that read their band at that count */

void rz__free_check_annotate(void) {
    RZ_ANNOTATE_ATOMIC(&g_have_deferred, sizeof g_have_deferred); /* helgrind: read without the lock */
    RZ_ANNOTATE_ATOMIC(&g_last_read, sizeof g_last_read);
    RZ_ANNOTATE_ATOMIC(&g_same_reads, sizeof g_same_reads);
}

/* 1: judged without reading (nothing could have written the band). */
static int judged_unread(const rz_zone_node_t *zone) {
    return rz__zone_seen(zone) && rz__work_none_since_clean();
}

/* The read before a free that waits (cuMemFree of ordinary memory): how, see above. */
static rzcu_result read_for_free(const rz_zone_node_t *zone, rz_band_io_t *io, size_t n) {
    uint64_t now = rz__work_now();
    int seen = rz__zone_seen(zone), capture = rz__capture_in_progress();
    if (seen && !capture) {
        uint64_t same = atomic_exchange(&g_last_read, now) == now ? atomic_fetch_add(&g_same_reads, 1) + 1 : 0;
        if (same == 0)
            atomic_store(&g_same_reads, 0);
        uint64_t live = rz__registry_count();
        if (live >= CHURN_MIN_ZONES && same + 1 >= live / CHURN_PER_ZONES) {
            atomic_store(&g_same_reads, 0);
            rz__bands_settle();   /* every context with zones: all work noted up to now is done */
            rz__scan_for_free(); /* and every band judged: the next frees read nothing */
        }
        uint64_t done = rz__work_done();
        if (done >= now)
            return rz__dev_read(io, n); /* nothing left running that could write it */
        rzcu_result r = RZCUDA_ERROR_NOT_SUPPORTED;
        if (rz__work_default_streams_since(done)) {
            r = rz__dev_read_after_default(io, n);
        } else {
            /* Stream handles too (maybe non-blocking): the read waits for each by an event, no host wait. A
             * handle of another context fails the event record (the driver's rule): then as below. */
            rzcu_stream busy[FREE_READ_STREAMS];
            size_t ns = rz__work_named_streams(done, busy, FREE_READ_STREAMS);
            if (ns != SIZE_MAX)
                r = rz__dev_read_after_streams(io, n, busy, ns);
        }
        if (r == RZCUDA_SUCCESS || rz__sticky() != RZCUDA_SUCCESS)
            return r; /* else (a stream of another context, a capture begun meanwhile): as below */
    }
    if (!capture) {
        rz__dev_settle(zone->ctx);
    } else {
        static atomic_int warned;
        if (!atomic_exchange(&warned, 1))
            rz__warn("a free during a graph capture is checked without waiting for the device (that would "
                     "invalidate the capture): a kernel still running then may write past the end unseen");
    }
    return rz__dev_read(io, n);
}

void rz__free_check(const rz_zone_node_t *zone, const rz_free_req_t *req) {
    if (rz__sticky_say(1))
        return; /* no band can be read any more (sticky.c); the zone is out of the registry meanwhile */
    int waits = !req->async && !(zone->flags & RZ_ZONE_STREAM_ORDERED);
    if (waits && judged_unread(zone))
        return; /* no driver call: nothing could have written its band since it was judged clean */
    rz_devptr_t band = zone->ptr + zone->user_bytes, front = zone->ptr - rz__zone_front(zone);
    /* Into page-locked memory when there is some: a copy into pageable memory returns only once the
     * stream's earlier work is done (a hidden host wait in cuMemFreeAsync, another one in a free's read). */
    size_t size = sizeof(struct async_check) + zone->pad_bytes + rz__zone_front(zone);
    rzcu_stream s = rz__stream_of(req->stream, req->per_thread);
    /* Captured: no pinned slot from the pool (its first use registers memory, which a capture in the global
     * mode refuses); the graph's check has slots of its own. */
    int captured = req->async && rz__stream_capturing(s);
    struct async_check *c = !captured ? rz__dev_pinned_alloc(size) : NULL;
    if (c == NULL && req->async && !captured && rz__dev_pinned_usable()) {
        /* Every page-locked byte the budget allows is in checks still queued: waiting for the stream here is
         * what this must never do, so this free goes unchecked (said once). */
        static atomic_int warned;
        if (!atomic_exchange(&warned, 1))
            rz__warn("alloc#%llu: %zu MiB of page-locked memory are in stream-ordered free checks still queued; "
                     "this free and later ones while that lasts are not checked (a check would wait for the "
                     "stream)", (unsigned long long)zone->index, RZ_PINNED_BUDGET >> 20);
        return;
    }
    if (c == NULL)
        c = malloc(size);
    if (c == NULL) {
        rz__warn("alloc#%llu: no host memory to check its band before free", (unsigned long long)zone->index);
        return;
    }
    c->zone = *zone;
    c->nframes = rz__registry_removed_stack(zone->index, c->frames, RZ_STACK_MAX);
    if (req->async) {
        if (captured) {
            /* A free captured into a graph: nothing may synchronise the stream, and what is captured runs at
             * every launch. Graph memory is checked in the graph; any other free the driver refuses during
             * capture (a free node takes graph memory only), so nothing is captured for it. */
            if (zone->flags & RZ_ZONE_GRAPH)
                capture_graph_check(c, s);
            check_free(c);
            return;
        }
        rzcu_result r = rz__dev_copy_to_host_async(c->band, band, zone->pad_bytes, s);
        if (r == RZCUDA_SUCCESS && zone->front_units)
            r = rz__dev_copy_to_host_async(c->band + zone->pad_bytes, front, rz__zone_front(zone), s);
        if (r == RZCUDA_SUCCESS)
            r = rz__dev_host_func(s, async_check_cb, c);
        if (r == RZCUDA_SUCCESS)
            return; /* the callback owns c */
        if (rz__sticky_failed(r, 1)) {
            check_free(c); /* what was queued before the failure is dropped: the host function never runs */
            return;
        }
        /* Could not enqueue: wait for the stream and check now, which is still before the free runs. */
        rzcu_capture_mode saved = rz__dev_quiet_begin(); /* a stream not capturing (checked above) */
        rzcu_result sr = rz__dev_stream_sync(s);
        rz__dev_quiet_end(saved);
        if (sr != RZCUDA_SUCCESS) {
            rz__warn("alloc#%llu: cannot check its band before free (%s)", (unsigned long long)zone->index,
                     rz__cu_name(r));
            check_free(c);
            return;
        }
    }
    rz_band_io_t io[2] = {{.ctx = zone->ctx, .dev = band, .bytes = zone->pad_bytes, .host = c->band},
                          {.ctx = zone->ctx, .dev = front, .bytes = rz__zone_front(zone), .host = c->band + zone->pad_bytes,
                           .front = 1}};
    size_t n = zone->front_units ? 2 : 1;
    /* Without the registry lock: a read of one or two bands uses no scratch shared with scans (band_io.c),
     * and on a GPU it is a device round trip that allocations and frees on other threads must not wait for.
     * The driver's cuMemFree waits for the device before it frees: the read waits for the work that could
     * write the band (read_for_free). Stream-ordered memory's cuMemFree waits for nothing (the program must
     * have waited for its users): read as it is, no hidden host wait. */
    rzcu_result r = waits ? read_for_free(zone, io, n) : rz__dev_read(io, n);
    if (r == RZCUDA_SUCCESS)
        judge_freed(c);
    else if (!rz__sticky_failed(r, 1))
        rz__warn("alloc#%llu: reading its band before free failed with %s", (unsigned long long)zone->index,
                 rz__cu_name(r));
    check_free(c);
}
