/*
 * Scans without a debugger (METRALE_REDZONE_SCAN): the check of a zone's band just before it is freed,
 * the exit scan and its summary line, and kernel attribution (which kernels ran since a violated zone was
 * last known clean). The sync policy (which contexts a synchronisation judges) is syncscan.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rz_annotate.h"
#include "rz_internal.h"

/* ---- exit scan --------------------------------------------------------------------------------------- */
static pthread_once_t g_exit_once = PTHREAD_ONCE_INIT;
static pid_t g_exit_pid;

/* METRALE_REDZONE_SUMMARY: one machine-readable line for `redzone run --error-exitcode`. */
static void write_summary(const rz_options_t *o, const rz_stats_t *s) {
    if (o->summary_path[0] == '\0')
        return;
    int refused = 0;
    int fd = rz__open_append(o->summary_path, &refused); /* 0600, no symlink another user planted */
    if (fd < 0) {
        char quoted[RZ_QUOTE_MAX];
        rz__quote(quoted, o->summary_path);
        rz__warn("cannot open METRALE_REDZONE_SUMMARY=%s (%s); no summary line written", quoted,
                 refused ? rz__refusal(refused)
                         : strerror(errno));
        return;
    }
    char line[256];
    int n = snprintf(line, sizeof line, "pid=%ld violations=%llu scans=%llu allocations=%llu next_index=%llu\n",
                     (long)getpid(), (unsigned long long)s->violations, (unsigned long long)s->scans,
                     (unsigned long long)s->map_calls, (unsigned long long)rz_next_index());
    if (n > 0)
        rz__write_all(fd, line, (size_t)n);
    close(fd);
}

static void exit_scan(void) {
    if (getpid() != g_exit_pid)
        return; /* a forked child: the zones and the driver state are its parent's */
    rz__judge_deferred();
    const rz_options_t *o = rz__options();
    rz_stats_t s;
    rzcu_context current = NULL;
    if ((o->scan & RZ_SCAN_LAUNCH) && rz__drv.cuCtxGetCurrent(&current) != RZCUDA_ERROR_DEINITIALIZED) {
        rz__bands_settle(); /* launch checks still in flight complete, and are judged */
        rz__launch_checks();
    }
    if (!(o->scan & RZ_SCAN_EXIT)) {
        /* After a sticky error the checks due at frees, synchronisations or launches could not all be made:
         * said once (sticky.c), if nothing said it yet. Not under the fatal policy alone (nothing was due). */
        if (o->scan & (RZ_SCAN_FREE | RZ_SCAN_SYNC | RZ_SCAN_LAUNCH))
            rz__sticky_say(0);
        rz_stats_get(&s);
        write_summary(o, &s);
        return;
    }
    /* The driver's own exit handler may have run first (it is registered when cuInit runs, which can come
     * after the first allocation call): then every band read fails, so say that instead of scanning. */
    int gone = rz__drv.cuCtxGetCurrent(&current) == RZCUDA_ERROR_DEINITIALIZED;
    if (!gone)
        rz__bands_settle(); /* kernels still queued or running at exit: the driver's teardown waits too */
    int violated = gone ? RZ_EDRIVER : rz__scan_at_exit(); /* RZ_EDRIVER at once after a sticky error */
    rz_stats_get(&s);
    write_summary(o, &s);
    char now[192];
    rzcu_result read_error = RZCUDA_SUCCESS;
    if (gone)
        snprintf(now, sizeof now, "not checked, the CUDA driver had already shut down (CUDA_ERROR_DEINITIALIZED)");
    else if (rz__sticky() != RZCUDA_SUCCESS && !rz__sticky_said())
        /* A sticky error nothing said yet: this line says it (sticky.c), instead of a warning and a scan line. */
        snprintf(now, sizeof now, "%s ends all CUDA work in this process: %llu zones could not be checked",
                 rz__cu_name(rz__sticky()), (unsigned long long)rz__registry_count());
    else if (rz__sticky() != RZCUDA_SUCCESS)
        snprintf(now, sizeof now, "not checked (%s, above)", rz__cu_name(rz__sticky()));
    else if (violated == RZ_EBUSY) /* this thread was inside a scan or band write: exit from a signal handler */
        snprintf(now, sizeof now, "not checked, exit was called while this thread was scanning (from a signal handler?)");
    else if (violated >= 0)
        snprintf(now, sizeof now, "%d violated at exit", violated);
    else if (violated == RZ_EDRIVER && rz__scan_unread(&read_error) > 0)
        /* e.g. a kernel faulted: on a GPU its context's error is sticky and no band of it can be read */
        snprintf(now, sizeof now, "%llu violated at exit, %llu zones not checked (reading their bands failed with %s)",
                 (unsigned long long)RZ_STATE.last_scan_violated, (unsigned long long)rz__scan_unread(&read_error),
                 rz__cu_name(read_error));
    else
        snprintf(now, sizeof now, "exit scan failed (%s)", rz_status_name(violated));
    /* Live: allocations still registered (a free the driver refused counts as an unmap call, not a release). */
    rz__log("redzone: exit: %s; %llu violations in %llu scans; %llu allocations, %llu live, %llu unpadded",
            now, (unsigned long long)s.violations, (unsigned long long)s.scans, (unsigned long long)s.map_calls,
            (unsigned long long)rz__registry_count(), (unsigned long long)s.unpadded_allocs);
}

static _Atomic int g_have_deferred; /* stream-ordered checks wait (defined with them, below) */

static void arm(void) {
    RZ_ANNOTATE_ATOMIC(&g_have_deferred, sizeof g_have_deferred); /* helgrind: read without the lock */
    g_exit_pid = getpid();
    atexit(exit_scan);
}

/* Called on every allocation: the first one happens after cuInit, so this handler is registered after the
 * driver's and runs before it (atexit handlers run in reverse order), while contexts are still alive. */
void rz__exit_scan_arm(void) {
    static _Atomic int armed;
    if (RZ_LIKELY(atomic_load_explicit(&armed, memory_order_acquire)))
        return;
    pthread_once(&g_exit_once, arm);
    atomic_store_explicit(&armed, 1, memory_order_release);
}

/* ---- kernel attribution ------------------------------------------------------------------------------ */
#define NAMES_SHOWN 8

/* The ring, exported so a debugger judging bands itself names the same kernels (rz_internal.h). */
RZ_EXPORT rz_launches_t __redzone_launches = {
    .magic = RZ_LAUNCHES_MAGIC,
    .version = RZ_LAUNCHES_VERSION,
    .size = sizeof(rz_launches_t),
};
#define L __redzone_launches
static pthread_mutex_t g_ring_lock = PTHREAD_MUTEX_INITIALIZER;

static inline __attribute__((always_inline)) const char *kernel_name(rzcu_function f) {
    const char *name = NULL;
    /* cudart 12+ launches library kernels by passing their CUkernel as the CUfunction, for which
     * cuFuncGetName is not documented: cuKernelGetName names those. */
    if (rz__drv.cuFuncGetName == NULL || rz__drv.cuFuncGetName(&name, f) != RZCUDA_SUCCESS || name == NULL) {
        name = NULL;
        if (rz__drv.cuKernelGetName == NULL ||
            rz__drv.cuKernelGetName(&name, (rzcu_kernel)(void *)f) != RZCUDA_SUCCESS || name == NULL)
            name = "(unnamed kernel)";
    }
    return name;
}

const char *rz__launch_kernel_name(rzcu_function f) { return kernel_name(f); }

static inline __attribute__((always_inline)) uint64_t record_name(const char *name) {
    uint64_t next = atomic_load_explicit(&RZ_STATE.next_index, memory_order_relaxed);
    pthread_mutex_lock(&g_ring_lock);
    struct rz_launch *l = &L.ring[L.seq % RZ_LAUNCH_RING];
    l->seq = L.seq + 1;
    l->next_index = next;
    snprintf(l->name, sizeof l->name, "%s", name);
    uint64_t seq = ++L.seq;
    pthread_mutex_unlock(&g_ring_lock);
    return seq;
}

uint64_t rz__launch_record_name(const char *name) { return record_name(name); }

void rz__launch_record(rzcu_function f) { record_name(kernel_name(f)); }

static void judge_deferred_locked(void);

/* Under the registry lock, at the start of a scan. A sync scan that leaves out a context with work still
 * running (syncscan.c) keeps the mark: that context's zones were not seen clean now. */
void rz__launch_scan_begin(int whole) {
    judge_deferred_locked(); /* stream-ordered checks queued while the lock was busy (below) */
    rz__launch_checks_locked(); /* launch checks too, and the bands they reported written back */
    pthread_mutex_lock(&g_ring_lock);
    L.report_since = L.scan_start;
    if (whole)
        L.scan_start = L.seq;
    pthread_mutex_unlock(&g_ring_lock);
}

void rz__launch_report(const rz_zone_node_t *z, const uint8_t *band, uint64_t bytes, int front) {
    if (rz__attrib_report(z, band, bytes, front))
        return; /* a launch check's report: the launch is named instead */
    char line[1024];
    pthread_mutex_lock(&g_ring_lock);
    size_t n = rz__format_launch_candidates(&L, L.report_since, z->index, line, sizeof line);
    pthread_mutex_unlock(&g_ring_lock);
    if (n)
        rz__log("%s", line);
}
#undef L

/* ---- check before free ------------------------------------------------------------------------------- */
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
    pthread_mutex_lock(&g_ring_lock);
    __redzone_launches.report_since = __redzone_launches.scan_start;
    pthread_mutex_unlock(&g_ring_lock);
    rz__launch_judge_locked(); /* launch checks that completed before: they may name the writer */
    if (rz__attrib_freed_reported(zone, band))
        return; /* reported by a launch check already, with its launch */
    /* band: the band after the end, then the front band (if any) right behind it */
    int bad = rz__band_judge_freed(zone, band, frames, nframes);
    if (bad)
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

/* Registry lock held: judge the queued checks, oldest first. */
static void judge_deferred_locked(void) {
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

void rz__judge_deferred(void) {
    rz__launch_checks(); /* launch checks that completed while the registry was busy */
    if (RZ_LIKELY(!atomic_load_explicit(&g_have_deferred, memory_order_acquire)))
        return;
    rz__registry_lock();
    judge_deferred_locked();
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
    judge_deferred_locked();
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
        judge_deferred_locked();
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
 * which the library cannot see end. So their buffer is a page-locked slot held for good (streamorder.c), and
 * this function only reads it: never frees it, never queues it (a copy goes to the deferred list when the
 * lock is busy). Launches of one executable run one after another, so no launch's copy overwrites the slot
 * while the previous launch's check reads it.
 */
static void graph_check_cb(void *arg) {
    const struct async_check *c = arg;
    if (rz__registry_lock_timed(0) == RZ_OK) {
        judge_deferred_locked();
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
    rzcu_result r = rz__drv.cuMemcpyDtoHAsync_v2(g->band, zone->ptr + zone->user_bytes, zone->pad_bytes, s);
    if (r == RZCUDA_SUCCESS && zone->front_units)
        r = rz__drv.cuMemcpyDtoHAsync_v2(g->band + zone->pad_bytes, zone->ptr - rz__zone_front(zone),
                                         rz__zone_front(zone), s);
    if (r == RZCUDA_SUCCESS)
        r = rz__drv.cuLaunchHostFunc(s, graph_check_cb, g);
    if (r != RZCUDA_SUCCESS) /* the slot stays taken: a copy captured already may write it at each launch */
        rz__warn("alloc#%llu: capturing its band check into the graph failed with %s; not checked",
                 (unsigned long long)zone->index, rz__cu_name(r));
}

void rz__scan_before_free(const rz_zone_node_t *zone, const rz_free_req_t *req) {
    if (rz__sticky_say(1))
        return; /* no band can be read any more (sticky.c); the zone is out of the registry meanwhile */
    rz_devptr_t band = zone->ptr + zone->user_bytes, front = zone->ptr - rz__zone_front(zone);
    /* In stream order the band is copied into page-locked memory when it fits: a copy into pageable memory
     * would return only once the stream's earlier work is done (a hidden host wait in cuMemFreeAsync). */
    size_t size = sizeof(struct async_check) + zone->pad_bytes + rz__zone_front(zone);
    rzcu_stream s = rz__stream_of(req->stream, req->per_thread);
    /* Captured: no pinned slot from the pool (its first use registers memory, which a capture in the global
     * mode refuses); the graph's check has slots of its own. */
    int captured = req->async && rz__stream_capturing(s);
    struct async_check *c = req->async && !captured ? rz__dev_pinned_alloc(size) : NULL;
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
        rzcu_result r = rz__drv.cuMemcpyDtoHAsync_v2(c->band, band, zone->pad_bytes, s);
        if (r == RZCUDA_SUCCESS && zone->front_units)
            r = rz__drv.cuMemcpyDtoHAsync_v2(c->band + zone->pad_bytes, front, rz__zone_front(zone), s);
        if (r == RZCUDA_SUCCESS)
            r = rz__drv.cuLaunchHostFunc(s, async_check_cb, c);
        if (r == RZCUDA_SUCCESS)
            return; /* the callback owns c */
        if (rz__sticky_failed(r, 1)) {
            check_free(c); /* what was queued before the failure is dropped: the host function never runs */
            return;
        }
        /* Could not enqueue: wait for the stream and check now, which is still before the free runs. */
        rzcu_capture_mode saved = rz__dev_quiet_begin(); /* a stream not capturing (checked above) */
        rzcu_result sr = rz__drv.cuStreamSynchronize(s);
        rz__dev_quiet_end(saved);
        if (sr != RZCUDA_SUCCESS) {
            rz__warn("alloc#%llu: cannot check its band before free (%s)", (unsigned long long)zone->index,
                     rz__cu_name(r));
            check_free(c);
            return;
        }
    }
    /* The driver's cuMemFree waits for the device before it frees: wait first too, so what the program's
     * in-flight kernels write past the end is in the band when it is read. Not for stream-ordered memory,
     * whose cuMemFree waits for nothing (the program must have waited for its users): no hidden host wait.
     * Not while a graph capture is in progress either (a free the driver allows then, from a thread in the
     * relaxed mode): synchronising a context with a capturing stream invalidates the capture. */
    if (!req->async && !(zone->flags & RZ_ZONE_STREAM_ORDERED)) {
        if (!rz__capture_in_progress()) {
            rz__dev_settle(zone->ctx);
        } else {
            static atomic_int warned;
            if (!atomic_exchange(&warned, 1))
                rz__warn("a free during a graph capture is checked without waiting for the device (that would "
                         "invalidate the capture): a kernel still running then may write past the end unseen");
        }
    }
    rz_band_io_t io[2] = {{.ctx = zone->ctx, .dev = band, .bytes = zone->pad_bytes, .host = c->band},
                          {.ctx = zone->ctx, .dev = front, .bytes = rz__zone_front(zone), .host = c->band + zone->pad_bytes,
                           .front = 1}};
    /* Without the registry lock: a read of one or two bands uses no scratch shared with scans (device.c),
     * and on a GPU it is a device round trip that allocations and frees on other threads must not wait for. */
    rzcu_result r = rz__dev_read(io, zone->front_units ? 2 : 1);
    if (r == RZCUDA_SUCCESS)
        judge_freed(c);
    else if (!rz__sticky_failed(r, 1))
        rz__warn("alloc#%llu: reading its band before free failed with %s", (unsigned long long)zone->index,
                 rz__cu_name(r));
    check_free(c);
}
