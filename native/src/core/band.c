/*
 * The band engine: scan (read every band back, compare with the byte each zone is expected to hold,
 * report and re-fill violated zones) and poison windows (re-fill bands with 0xEE inside a creation-index
 * window and 0x00 outside). Only band bytes are ever written: never the program's own bytes.
 *
 * Fix over the seed: the seed compared every band with the global fill byte, so a scan after a poison
 * flagged every zone outside the window (their bands hold 0x00). Here every zone remembers the byte its
 * band holds now (`expected`), and scans compare against that.
 *
 * Scans and poisons run under the registry lock, so a zone cannot be freed (and its address reused by a
 * new allocation) between reading its band and judging it. A violation's report is judge.c's; a scan's
 * reports are printed after the lock is released.
 */
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "band.h"
#include "band_fill.h"
#include "band_io.h"
#include "check_kernel.h"
#include "ctx_forget.h"
#include "device_ctx.h"
#include "driver.h"
#include "format.h"
#include "judge.h"
#include "launch_ring.h"
#include "memory.h"
#include "options.h"
#include "registry.h"
#include "report.h"
#include "state.h"
#include "stats.h"
#include "sticky.h"
#include "sticky_said.h"
#include "stream_fills.h"
#include "thread_state.h"
#include "work_epoch.h"

/*
 * Bounded batches (issue 20.8). One batch (per context one batch copy, then one synchronisation) covers at most
 * RZ_BATCH_ENTRIES bands and RZ_BATCH_STAGING bytes of them; its scratch (the entries here, the copy lists in
 * band_io.c, the staging) is sized for what the registry needs up to that, reused by every scan, poison and
 * install, and never grows past it: about 16 MiB with 64-byte bands (114,688 of them a batch), however many
 * zones. (Scratch sized for the whole registry held some 150 bytes a zone after the first scan at 1M zones,
 * for good, and the first scan spent its time faulting those pages in.) A registry larger than one batch
 * takes one more batch, 3 driver calls, per batch's worth of bands: 100k zones are still one.
 */
#define t_busy (rz__thread.busy) /* a scan or poison is running on this thread (hook re-entry; thread_state.h) */

/* The last full scan's bands that could not be read (zones) and the driver's error for them. */
static uint64_t g_last_unread;
static rzcu_result g_last_read_error;

static rz_staging_t g_staging;
static rz_band_io_t *g_io;
static rz_zone_node_t **g_nodes;
static uint8_t *g_suspect; /* the device check's answer, per batch entry */
static size_t g_io_cap;
_Static_assert(sizeof(rz_band_io_t) == 32, "a batch entry: 32 bytes");

/* Room for one batch: `staging` bytes of bands and as many entries as the registry can fill, up to a batch
 * (grown geometrically: a registry that grows by a little between scans does not reallocate at each). */
static int ensure_scratch(size_t staging) {
    size_t want = rz__registry_count();
    if (rz__options()->front_bytes)
        want *= 2; /* two bands a zone */
    want = want < 16 ? 16 : (want > RZ_BATCH_ENTRIES ? RZ_BATCH_ENTRIES : want);
    if (want > g_io_cap) {
        size_t cap = 2 * g_io_cap > want ? 2 * g_io_cap : want;
        cap = cap > RZ_BATCH_ENTRIES ? RZ_BATCH_ENTRIES : cap;
        rz_band_io_t *io = realloc(g_io, cap * sizeof *io);
        if (io)
            g_io = io;
        rz_zone_node_t **nodes = realloc(g_nodes, cap * sizeof *nodes);
        if (nodes)
            g_nodes = nodes;
        uint8_t *suspect = realloc(g_suspect, cap);
        if (suspect)
            g_suspect = suspect;
        if (!io || !nodes || !suspect)
            return RZ_ENOMEM;
        g_io_cap = cap;
    }
    return rz__dev_staging_reserve(&g_staging, staging);
}

uint64_t rz__band_scratch_bytes(void) {
    return (uint64_t)g_io_cap * (sizeof *g_io + sizeof *g_nodes + sizeof *g_suspect) + g_staging.size +
           rz__dev_scratch_bytes();
}

/* Whether zone z's band can be read and written now: not graph memory (allocated only while a launch of its
 * graph has it), and not a stream-ordered fill still queued (asks the fill's event; never waits). */
static int band_in_place(rz_zone_node_t *z) { return !(z->flags & RZ_ZONE_GRAPH) && rz__zone_filled(z); }

/* The io entries of zone z's bands at io[0] (and io[1] for a front band): how many. */
static size_t zone_bands(const rz_zone_node_t *z, rz_band_io_t *io, uint8_t value) {
    io[0] = (rz_band_io_t){.ctx = z->ctx, .dev = z->ptr + z->user_bytes, .bytes = z->pad_bytes, .value = value};
    if (!z->front_units)
        return 1;
    io[1] = (rz_band_io_t){.ctx = z->ctx, .dev = z->ptr - rz__zone_front(z), .bytes = rz__zone_front(z),
                           .value = value, .front = 1};
    return 2;
}

/*
 * Whether the driver still shows zone z's allocation at its address. A zone dies with its context, which
 * redzone sees end through the wrapped calls; a context that ends some other way leaves zones whose memory
 * the driver may since have handed out again, to a larger buffer that has the old range in its middle. So
 * before a band is written for a zone whose context it learns from the driver (lazy install), and before a
 * band that differs or could not be read is judged, the zone must be the block the driver shows there: an
 * allocation that starts at the zone's base. (A later one with the same base, made through redzone, already
 * replaced the zone in the registry; one made past redzone with the same base is not told apart.) ZONE_GONE
 * when the driver says otherwise; ZONE_UNKNOWN when it cannot say: the zone keeps its standing. Pointer
 * attributes need no current context (the agent thread has none). Not asked on the way of a clean scan or a
 * poison, which stay a constant number of driver calls.
 */
enum { ZONE_ALIVE, ZONE_GONE, ZONE_UNKNOWN };

/* 1 when the driver's allocation holding zone z's first byte starts elsewhere: a larger one has its range. */
static int other_block_at(const rz_zone_node_t *z) {
    rz_devptr_t raw = z->ptr - rz__zone_front(z), start = 0;
    return rz__dev_pointer_attribute(&start, RZCU_POINTER_ATTRIBUTE_RANGE_START_ADDR, raw) == RZCUDA_SUCCESS &&
           start != raw;
}

static int zone_state(const rz_zone_node_t *z) {
    if (z->flags & RZ_ZONE_GUARD)
        return ZONE_ALIVE; /* virtual memory redzone maps itself: freed only by redzone */
    if (!rz__dev_has_pointer_attribute())
        return ZONE_UNKNOWN;
    rzcu_context owner = NULL;
    rzcu_result r = rz__dev_pointer_attribute(&owner, RZCU_POINTER_ATTRIBUTE_CONTEXT, z->ptr - rz__zone_front(z));
    if (r == RZCUDA_ERROR_INVALID_VALUE)
        return ZONE_GONE; /* no allocation there (or virtual memory, which no zone of this kind is) */
    if (r != RZCUDA_SUCCESS)
        return ZONE_UNKNOWN;
    return other_block_at(z) ? ZONE_GONE : ZONE_ALIVE;
}

/* The agent waits at most this long for the registry (a thread stopped by the debugger may hold it). */
#define AGENT_LOCK_TIMEOUT_MS 1500

static int begin(void) {
    if (t_busy) {
        rz__reports_spill(); /* a signal handler (calling exit) interrupted this thread's scan */
        return RZ_EBUSY;
    }
    rz__options();
    if (rz__dev_load() != RZ_OK)
        return RZ_ENODRIVER;
    t_busy = 1;
    return RZ_OK;
}

static int lock_registry(void) {
    if (!rz__thread.is_agent) {
        rz__registry_lock();
        return RZ_OK;
    }
    if (rz__registry_lock_timed(AGENT_LOCK_TIMEOUT_MS) != RZ_OK) {
        rz__log("redzone: the zone registry is held by a stopped thread; try again after it runs");
        return RZ_EBUSY;
    }
    return RZ_OK;
}

static void end(void) {
    t_busy = 0;
    rz__dev_release_retired(); /* after the registry lock: see band_io.c */
    if (RZ_UNLIKELY(rz__check_kernel_wanted()))
        rz__check_kernel_load(rz__registry_lock, rz__registry_unlock); /* check kernel modules, never loaded under the registry lock */
}

/*
 * A batch of n bands whose write failed in some context (rz__dev_write marks that context's entries): the
 * other contexts' bands are in place. A zone whose context the hooks named at its allocation (device_ctx.h)
 * was not asked about before the write; when its write fails, the driver is asked now whether its block is
 * still there (zone_state): a context that ended where the hooks could not see it leaves its zones to be
 * forgotten as stale, as an install that asks first does. Anything else leaves the zone unwatched.
 */
static void install_failed(size_t n, rzcu_result r) {
    size_t unwatched = 0, gone = 0;
    int sticky = rz__sticky_failed(r, 0);
    for (size_t i = 0; i < n; i++) {
        rz_zone_node_t *z = g_nodes[i];
        if (i > 0 && g_nodes[i - 1] == z)
            continue; /* its front band: same context, same fate */
        if (!g_io[i].failed) {
            rz__record_guard_install(g_io[i].bytes + (i + 1 < n && g_nodes[i + 1] == z ? g_io[i + 1].bytes : 0));
            continue;
        }
        if (!sticky && zone_state(z) == ZONE_GONE) {
            rz__registry_drop_stale(z->ptr); /* the node is not reused under the lock: later entries stay readable */
            gone++;
            continue;
        }
        z->flags |= RZ_ZONE_UNWATCHED;
        rz__count(RZ_C_live_zones, -1);
        rz__count(RZ_C_unpadded_allocs, 1);
        unwatched += i + 1 < n && g_nodes[i + 1] == z ? 2 : 1; /* bands */
    }
    if (gone)
        rz__warn("%zu allocations' memory is no longer known to the driver (context destroyed?); forgotten", gone);
    if (unwatched && !sticky)
        rz__warn("installing %zu bands failed with %s; those zones are unwatched", unwatched, rz__cu_name(r));
}

/*
 * Lazy install (METRALE_REDZONE_INSTALL=lazy): a new zone's band is written with the next batch, not at its
 * allocation. The hooks call rz__bands_install() before anything that lets the program touch device memory
 * (kernel launches, copies, memsets) and at synchronisations; scans and poisons install first under their
 * own lock hold. Each zone gets the byte the window rule gives it when it is written, so an install never
 * races with a poison. Registry lock held.
 */
static int install_pending_locked(void) {
    if (RZ_LIKELY(rz__registry_pending() == 0))
        return RZ_OK;
    if (rz__sticky() != RZCUDA_SUCCESS)
        return RZ_EDRIVER; /* no band can be written any more: the zones stay waiting (sticky.c) */
    if (ensure_scratch(0) != RZ_OK)
        return RZ_ENOMEM;
    int rc = RZ_OK;
    size_t n;
    /* The zones taken go at the end of g_nodes, their entries from its start: entry k of zone i is at most at
     * 2i + 1 < per_round + i (one or two entries a zone), so no zone is overwritten before it is read. */
    size_t per_round = rz__options()->front_bytes ? g_io_cap / 2 : g_io_cap;
    rz_zone_node_t **taken = g_nodes + (g_io_cap - per_round);
    while ((n = rz__registry_take_pending(taken, per_round)) > 0) {
        size_t k = 0, gone = 0, unknown = 0;
        rzcu_result last_error = RZCUDA_SUCCESS;
        for (size_t i = 0; i < n; i++) {
            rz_zone_node_t *z = taken[i];
            /* One driver call per zone: the block's context and start together. */
            rz_devptr_t raw = z->ptr - rz__zone_front(z), start = raw;
            rzcu_result q = z->ctx ? RZCUDA_SUCCESS : rz__dev_block_of(raw, &z->ctx, &start);
            if (q == RZCUDA_ERROR_INVALID_VALUE || (q == RZCUDA_SUCCESS && start != raw)) {
                /* The driver no longer knows the memory, or shows another allocation there (its context ended
                 * unseen): forget the zone, whose context the answer was not. */
                rz__registry_drop_stale(z->ptr);
                gone++;
                continue;
            }
            if (q != RZCUDA_SUCCESS) {
                /* The driver cannot say now (shut down, no context): the zone stays, unwatched. */
                z->flags |= RZ_ZONE_UNWATCHED;
                rz__count(RZ_C_live_zones, -1);
                rz__count(RZ_C_unpadded_allocs, 1);
                unknown++;
                last_error = q;
                continue;
            }
            z->expected = rz__band_byte_for(z->index);
            size_t b = zone_bands(z, g_io + k, z->expected);
            for (size_t j = 0; j < b; j++)
                g_nodes[k++] = z;
        }
        if (gone)
            rz__warn("%zu allocations' memory is no longer known to the driver (context destroyed?); forgotten", gone);
        if (unknown)
            rz__warn("the driver cannot name the context of %zu allocations (%s); they are not watched", unknown,
                     rz__cu_name(last_error));
        n = k;
        if (n == 0)
            continue;
        rzcu_result r = rz__dev_write(g_io, n);
        if (r != RZCUDA_SUCCESS) {
            install_failed(n, r);
            rc = RZ_EDRIVER;
            continue;
        }
        for (size_t i = 0; i < n; i++)
            rz__record_guard_install(g_io[i].bytes);
    }
    return rc;
}

void rz__bands_install(void) {
    if (RZ_LIKELY(rz__registry_pending() == 0) || t_busy)
        return;
    t_busy = 1;
    rz__registry_lock();
    install_pending_locked();
    rz__registry_unlock();
    t_busy = 0;
}

static int scan_locked(void *const *only, size_t nonly, uint64_t *checked_out, uint64_t *violated_out);

/* The policies' scan-begin steps (band.h), set once at start-up and read at every scan. */
static _Atomic(rz_scan_begin_fn *) g_scan_begin[RZ_SCAN_BEGIN_SLOTS];

void rz__bands_on_scan_begin(rz_scan_begin_slot_t slot, rz_scan_begin_fn *fn) {
    if ((unsigned)slot < RZ_SCAN_BEGIN_SLOTS)
        atomic_store_explicit(&g_scan_begin[slot], fn, memory_order_release);
}

void rz__bands_context_ending(void *ctx) {
    if (ctx == NULL || begin() != RZ_OK)
        return;
    rz__registry_lock();
    install_pending_locked(); /* their memory is still there: each waiting zone learns its context */
    rz__registry_unlock();
    rz__dev_settle(ctx); /* the driver waits for the context's work before ending it: so do we */
    rz__registry_lock();
    uint64_t checked = 0, violated = 0;
    rz_reports_t reports;
    rz__reports_begin(&reports);
    int rc = scan_locked(&ctx, 1, &checked, &violated);
    rz__registry_unlock();
    rz__reports_end(&reports);
    if (violated || rc != RZ_OK)
        rz__log("redzone: context ending: %llu zones checked, %llu violated%s%s", (unsigned long long)checked,
                (unsigned long long)violated, rc != RZ_OK ? "; failed: " : "", rc != RZ_OK ? rz_strerror(rc) : "");
    end();
}

/* Zones that do not know their context yet (a lazy zone learns it when its band is written; an unpadded one
 * never asks): one whose memory the driver no longer knows went with the context that ended, so it is that
 * context's. One driver query per such zone, only when a context ends. Registry lock held. */
static void claim_unknown_locked(void *ctx) {
    for (rz_zone_node_t *z = rz__registry_first(); z; z = rz__registry_next(z)) {
        void *owner = NULL;
        if (z->ctx == NULL && !(z->flags & RZ_ZONE_GUARD) &&
            rz__dev_pointer_attribute(&owner, RZCU_POINTER_ATTRIBUTE_CONTEXT, z->ptr) == RZCUDA_ERROR_INVALID_VALUE)
            z->ctx = ctx;
    }
}

void rz__bands_context_ended(void *ctx) {
    if (ctx == NULL || begin() != RZ_OK)
        return;
    rz__registry_lock();
    claim_unknown_locked(ctx);
    rz__registry_drop_ctx(ctx);
    rz__dev_forget_ctx(ctx); /* under the lock: scans use the per-context kernel state under it */
    rz__registry_unlock();
    end();
}

uint64_t rz__scan_unread(rzcu_result *error) {
    *error = g_last_read_error;
    return g_last_unread;
}

void rz__bands_settle(void) {
    enum { MAX_CTX = 64 };
    void *ctxs[MAX_CTX];
    size_t n = 0;
    if (begin() != RZ_OK)
        return;
    if (lock_registry() != RZ_OK) {
        end();
        return;
    }
    uint64_t epoch = rz__work_now();
    /* A zone still waiting for its band (lazy install) saw no device work since its allocation: nothing of
     * it to wait for (its band is written by the scan that follows, if that one reads it at all). */
    for (rz_zone_node_t *z = rz__registry_first(); z && n < MAX_CTX; z = rz__registry_next(z)) {
        if (!rz__zone_watched(z) || (z->flags & RZ_ZONE_PENDING))
            continue;
        size_t i = 0;
        while (i < n && ctxs[i] != z->ctx)
            i++;
        if (i == n)
            ctxs[n++] = z->ctx;
    }
    rz__registry_unlock();
    /* Outside the lock: the program's host functions may need it while the device drains. */
    int all = n < MAX_CTX;
    for (size_t i = 0; i < n; i++)
        if (rz__dev_settle(ctxs[i]) != RZCUDA_SUCCESS) /* a failure shows in the scan's reads */
            all = 0;
    if (all)
        rz__work_completed(epoch); /* the work noted before the settles is done (work_epoch.h) */
    end();
}

/* Judge a batch of n zones whose bands have places laid out in g_staging: on a GPU the check kernel says
 * which bands differ and only those are read; otherwise every band is read. */
static int scan_batch(size_t n, uint64_t *violated, uint64_t *unread) {
    /* A zone's bands (one or two entries) are always in the same batch: clear its mark once, up front. */
    for (size_t i = 0; i < n; i++) {
        g_io[i].value = g_nodes[i]->expected;
        g_nodes[i]->flags &= (uint8_t)~RZ_ZONE_VIOLATED;
    }
    if (rz__check_kernel_run(g_io, n, g_suspect) == RZ_OK) {
        size_t m = 0;
        for (size_t i = 0; i < n; i++) {
            if (!g_suspect[i])
                continue;
            g_nodes[m] = g_nodes[i]; /* m <= i: compacting in place */
            g_io[m++] = g_io[i];
        }
        n = m;
        if (n == 0)
            return RZ_OK;
    }
    for (size_t i = 0; i < n; i++)
        g_io[i].failed = 0;
    rzcu_result r = rz__dev_read(g_io, n);
    int rc = RZ_OK;
    if (r != RZCUDA_SUCCESS) {
        /* Zones whose memory the driver no longer knows (their context was destroyed) are forgotten; any
         * other failure is reported, and the bands of the contexts that could be read are still judged. */
        size_t failed = 0, gone = 0;
        for (size_t i = 0; i < n; i++) {
            if (!g_io[i].failed || g_io[i].front)
                continue;
            /* A guard-page zone's memory belongs to no context (the driver names none for it) and is freed only
             * by redzone: it is never stale (zone_state). */
            if (zone_state(g_nodes[i]) == ZONE_GONE) {
                g_io[i].failed = 2; /* stale: forgotten below, not counted as unread */
                gone++;
            } else {
                failed++;
            }
        }
        for (size_t i = 0; i < n; i++)
            if (g_io[i].failed && g_io[i].front && i > 0 && g_nodes[i - 1] == g_nodes[i])
                g_io[i].failed = g_io[i - 1].failed; /* a front band follows its zone's other band */
        for (size_t i = 0; i < n; i++)
            if (g_io[i].failed == 2 && !g_io[i].front)
                rz__registry_drop_stale(g_nodes[i]->ptr);
        if (gone)
            rz__warn("%zu allocations' memory is no longer known to the driver (context destroyed?); forgotten", gone);
        g_last_read_error = r;
        if (rz__cu_sticky(rz__sticky_note(r)))
            ; /* said once, by whoever called the scan (scan_all, the exit line) */
        else if (failed)
            rz__warn("scan: reading %zu bands failed with %s", failed, rz__cu_name(r));
        else if (gone == 0)
            rz__warn("scan: reading %zu bands failed with %s", n, rz__cu_name(r));
        if (failed == 0 && gone == 0)
            return RZ_EDRIVER; /* no way to tell which: judge nothing */
        if (failed)
            rc = RZ_EDRIVER; /* the other contexts' bands were read: judge those */
    }
    /* A band that differs is judged (and re-filled) only while the driver still shows its zone there: the
     * bytes of another allocation where a dead zone's band was are that allocation's own. */
    size_t gone_now = 0;
    for (size_t i = 0; i < n; i++) {
        if (g_io[i].failed)
            continue;
        rz_zone_node_t *z = g_nodes[i];
        rz_violation_t v;
        uint64_t bytes = g_io[i].front ? rz__zone_front(z) : z->pad_bytes;
        if (!rz__band_violation(z, g_io[i].host, bytes, g_io[i].front, &v) || zone_state(z) != ZONE_GONE)
            continue;
        size_t first = i > 0 && g_nodes[i - 1] == z ? i - 1 : i; /* a zone's entries are adjacent */
        for (size_t j = first; j < n && g_nodes[j] == z; j++)
            g_io[j].failed = 2; /* stale, as above */
        rz__registry_drop_stale(z->ptr); /* the node is not reused under the lock: its entries stay readable */
        gone_now++;
    }
    if (gone_now)
        rz__warn("%zu allocations' memory is no longer known to the driver (context destroyed?); forgotten", gone_now);
    size_t nrefill = 0;
    for (size_t i = 0; i < n; i++) {
        rz_zone_node_t *z = g_nodes[i];
        if (g_io[i].failed) {
            *unread += !g_io[i].front; /* zones, not bands (forgotten ones were not checked either) */
            continue;
        }
        int front = g_io[i].front;
        int judged = front ? rz__band_judge_front(z, g_io[i].host) : rz__band_judge(z, g_io[i].host);
        if (judged) {
            if (!(z->flags & RZ_ZONE_VIOLATED) && (judged & RZ_JUDGE_COUNTED))
                (*violated)++; /* zones, not bands; a suppressed finding is not counted (finding.h) */
            z->flags |= RZ_ZONE_VIOLATED;
            /* i >= nrefill: slot i was already consumed, so the queue can reuse the array. */
            g_io[nrefill] = g_io[i];
            g_io[nrefill++].value = z->expected;
        }
    }
    if (nrefill > 0) {
        r = rz__dev_write(g_io, nrefill);
        if (r != RZCUDA_SUCCESS) {
            if (!rz__cu_sticky(r))
                rz__warn("scan: re-filling %zu violated bands failed with %s", nrefill, rz__cu_name(r));
            return RZ_EDRIVER;
        }
        for (size_t i = 0; i < nrefill; i++)
            rz__record_page_reset(g_io[i].bytes);
    }
    return rc;
}

/* Whether ctx is one of the n contexts in `only` (sorted by handle). */
static int among(void *ctx, void *const *only, size_t n) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if ((uintptr_t)only[mid] == (uintptr_t)ctx)
            return 1;
        if ((uintptr_t)only[mid] < (uintptr_t)ctx)
            lo = mid + 1;
        else
            hi = mid;
    }
    return 0;
}

/* Set by scan_all for one scan: zones whose writes the hooks see are clean without a read (no device work
 * since every such band was judged clean: work_epoch.h). Registry lock held. */
static int g_seen_clean;

/* Read and judge the bands of every watched zone (of the nonly contexts in `only`, sorted by handle, when
 * nonly > 0). Registry lock held, waiting bands installed. */

static int scan_locked(void *const *only, size_t nonly, uint64_t *checked_out, uint64_t *violated_out) {
    uint64_t checked = 0, violated = 0, unread = 0;
    int rc = RZ_OK, rc_driver = RZ_OK;
    /* Staging holds one batch: sized for the registry up to RZ_BATCH_STAGING, and grown, between batches, for
     * a zone whose bands are wider than that (its address must not move within a batch). */
    uint64_t want = rz__registry_count() * (RZ_STATE.pad_bytes ? RZ_STATE.pad_bytes + rz__options()->front_bytes : 16);
    if (ensure_scratch(want < RZ_BATCH_STAGING ? (size_t)want : RZ_BATCH_STAGING) != RZ_OK)
        rc = RZ_ENOMEM;
    size_t n = 0, used = 0;
    for (rz_zone_node_t *z = rz__registry_first(); z && rc == RZ_OK; z = rz__registry_next(z)) {
        if (!rz__zone_watched(z) || (nonly == 1 && z->ctx != only[0]) || (nonly > 1 && !among(z->ctx, only, nonly)) ||
            !band_in_place(z))
            continue;
        if (g_seen_clean && rz__zone_seen(z) && !(z->flags & RZ_ZONE_VIOLATED)) {
            checked++; /* nothing could have written its band since it was judged clean */
            continue;
        }
        size_t zone_bytes = z->pad_bytes + rz__zone_front(z), bands = z->front_units ? 2 : 1;
        if (n > 0 && (n + bands > g_io_cap || used + zone_bytes > g_staging.size)) {
            int brc = scan_batch(n, &violated, &unread);
            n = used = 0;
            if (brc != RZ_OK)
                rc_driver = brc; /* keep scanning the other batches */
        }
        if (zone_bytes > g_staging.size && (rc = ensure_scratch(zone_bytes)) != RZ_OK)
            break; /* n == 0 here: nothing collected points into the old staging */
        size_t b = zone_bands(z, g_io + n, z->expected);
        for (size_t j = 0; j < b; j++) {
            g_nodes[n + j] = z;
            g_io[n + j].host = g_staging.p + used;
            used += g_io[n + j].bytes;
        }
        n += b;
        checked++;
    }
    if (rc == RZ_OK && n > 0) {
        int brc = scan_batch(n, &violated, &unread);
        if (brc != RZ_OK)
            rc_driver = brc;
    }
    if (rc == RZ_OK)
        rc = rc_driver;
    checked -= unread < checked ? unread : checked; /* bands that could not be read were not checked */
    g_last_unread += unread;
    *checked_out = checked;
    *violated_out = violated;
    return rc;
}

#define SCAN_QUIET_EMPTY 2 /* no summary line when nothing was checked or found (the exit scan) */
#define SCAN_AT_EXIT 4     /* zones still waiting for their band count as checked, unwritten (no device work) */
#define SCAN_FOR_FREE 8    /* for a free (free_check.c): no summary line unless violated, not counted as a scan */
static int scan_all(int how, rz_scan_some_t *some);

RZ_EXPORT int rz_scan(void) { return scan_all(0, NULL); }

int rz__scan_at_exit(void) { return scan_all(SCAN_QUIET_EMPTY | SCAN_AT_EXIT, NULL); }

int rz__scan_for_free(void) { return scan_all(SCAN_FOR_FREE, NULL); }

int rz__scan_some(rz_scan_some_t *req) { return scan_all(0, req); }

/* A full scan, or (some) a scan of some contexts: see rz__scan_some. */
static int scan_all(int how, rz_scan_some_t *some) {
    if (rz__sticky() != RZCUDA_SUCCESS) {
        /* No band can be read any more: nothing is scanned; said once (the exit line says it itself). */
        if (!(how & SCAN_QUIET_EMPTY))
            rz__sticky_say(0);
        return RZ_EDRIVER;
    }
    int rc = begin();
    if (rc != RZ_OK)
        return rc;
    if ((rc = lock_registry()) != RZ_OK) {
        end();
        return rc;
    }
    size_t nonly = 0;
    if (some) {
        nonly = some->pick(some->arg, some->ctxs, some->n);
        if (nonly == 0) {
            rz__registry_unlock(); /* a scan that began after this sync's work had completed judged it */
            end();
            return 0;
        }
        if (nonly == 1 && some->ctxs[0] == NULL)
            nonly = 0; /* every context */
    }
    rz_reports_t reports;
    rz__reports_begin(&reports);
    /* At exit a zone still waiting for its band saw no device work since its allocation: nothing to read. */
    uint64_t unwritten = (how & SCAN_AT_EXIT) ? rz__registry_pending() : 0;
    if (!(how & SCAN_AT_EXIT))
        install_pending_locked();
    /* The work noted before the scan, and whether all of it had completed: then a clean full scan judged every
     * band with nothing left that could still write one. */
    uint64_t epoch = rz__work_now();
    int complete = rz__work_done() >= epoch;
    g_seen_clean = nonly == 0 && (how & (SCAN_AT_EXIT | SCAN_FOR_FREE)) && rz__work_none_since_clean();
    for (int i = 0; i < RZ_SCAN_BEGIN_SLOTS; i++) {
        rz_scan_begin_fn *fn = atomic_load_explicit(&g_scan_begin[i], memory_order_acquire);
        if (fn)
            fn(); /* the policies' checks queued while the lock was busy */
    }
    rz__launch_scan_begin(some ? some->whole : 1);
    RZ_STATE.last_violation_count = 0;
    g_last_unread = 0;
    g_last_read_error = RZCUDA_SUCCESS;
    uint64_t checked = 0, violated = 0;
    rc = scan_locked(some ? some->ctxs : NULL, nonly, &checked, &violated);
    g_seen_clean = 0;
    checked += unwritten;
    if (rc == RZ_OK && nonly == 0 && complete && violated == 0 && g_last_unread == 0)
        rz__work_judged_all(epoch);
    if (some)
        some->done(some->arg, rc); /* a failed one is tried again */
    RZ_STATE.last_scan_checked = checked;
    RZ_STATE.last_scan_violated = violated;
    rz__registry_unlock();
    rz__reports_end(&reports); /* the reports, symbolized, after the lock */
    if (!(how & SCAN_FOR_FREE))
        rz__count(RZ_C_scans, 1);
    if (rc == RZ_OK && (how & SCAN_FOR_FREE) && violated == 0) {
        /* part of a free's check: said only when it found something */
    } else if (rc == RZ_OK && (how & SCAN_QUIET_EMPTY) && checked == 0 && violated == 0) {
        /* The exit scan of a program whose zones were all freed (and judged then): a "0 zones checked, 0
         * violated" line right after a free-time report reads as a contradiction; the exit line follows. */
    } else if (rc == RZ_OK) {
        char line[128];
        rz__format_scan_summary(checked, violated, line, sizeof line);
        rz__log("%s", line);
    } else if (rz__sticky() != RZCUDA_SUCCESS) {
        if (!(how & SCAN_QUIET_EMPTY)) /* the exit line says it */
            rz__sticky_say(0);
    } else
        rz__log("redzone scan: failed (%s) after %llu zones checked, %llu violated", rz_strerror(rc),
                (unsigned long long)checked, (unsigned long long)violated);
    end();
    return rc == RZ_OK ? (int)(violated > INT32_MAX ? INT32_MAX : violated) : rc;
}

/* Write the n queued fills in g_io and record each zone's new byte: also when some contexts failed, the
 * zones of the others hold their new byte now (only a failed context's zones keep the old one). */
static int flush_fills(size_t n) {
    for (size_t i = 0; i < n; i++)
        g_io[i].failed = 0;
    rzcu_result r = rz__dev_write(g_io, n);
    size_t failed = 0;
    for (size_t i = 0; i < n; i++) {
        if (g_io[i].failed) {
            failed++;
            continue;
        }
        g_nodes[i]->expected = g_io[i].value;
        rz__record_page_reset(g_io[i].bytes);
    }
    if (r != RZCUDA_SUCCESS) {
        if (!rz__sticky_failed(r, 0))
            rz__warn("poison: filling %zu bands failed with %s", failed ? failed : n, rz__cu_name(r));
        return RZ_EDRIVER; /* those zones keep their old expected byte */
    }
    return RZ_OK;
}

/* Re-fill every padded band whose byte changes under the current window rule. Holds the registry lock. */
static int refill_all(void) {
    if (ensure_scratch(0) != RZ_OK)
        return RZ_ENOMEM;
    int rc = RZ_OK;
    size_t n = 0;
    for (rz_zone_node_t *z = rz__registry_first(); z; z = rz__registry_next(z)) {
        uint8_t want = rz__band_byte_for(z->index);
        if (!rz__zone_watched(z) || want == z->expected || !band_in_place(z))
            continue; /* a fill still queued keeps the byte it was given (docs/design.md) */
        if (n + (z->front_units ? 2 : 1) > g_io_cap) {
            if (flush_fills(n) != RZ_OK)
                rc = RZ_EDRIVER; /* the other batches still get the window: rolled back by the caller */
            n = 0;
        }
        size_t b = zone_bands(z, g_io + n, want);
        for (size_t j = 0; j < b; j++)
            g_nodes[n + j] = z;
        n += b;
    }
    if (n > 0 && flush_fills(n) != RZ_OK)
        rc = RZ_EDRIVER;
    return rc;
}

/*
 * Set the window rule (active, [lo, hi)) and re-fill the bands it changes. Registry lock held. When some
 * bands cannot be written, the previous rule is put back and the bands already changed are re-filled with
 * its bytes: a failed call leaves no window behind, and every zone's expected byte is what its band holds
 * (a zone whose write failed both times keeps its old byte, which is still what its band holds).
 */
static int set_window_locked(int active, uint64_t lo, uint64_t hi) {
    uint64_t old_lo = RZ_STATE.poison_lo, old_hi = RZ_STATE.poison_hi;
    int old_active = RZ_STATE.poison_active;
    RZ_STATE.poison_lo = lo;
    RZ_STATE.poison_hi = hi;
    RZ_STATE.poison_active = active;
    install_pending_locked();
    int rc = refill_all();
    if (rc == RZ_EDRIVER) {
        RZ_STATE.poison_lo = old_lo;
        RZ_STATE.poison_hi = old_hi;
        RZ_STATE.poison_active = old_active;
        if (refill_all() != RZ_OK)
            rz__warn("poison: putting the previous bands back failed too; those zones keep the byte they hold");
    }
    return rc;
}

RZ_EXPORT int rz_poison(uint64_t lo, uint64_t hi) {
    if (lo > hi)
        return RZ_EINVAL;
    int rc = begin();
    if (rc != RZ_OK)
        return rc;
    if ((rc = lock_registry()) != RZ_OK) {
        end();
        return rc;
    }
    rc = set_window_locked(1, lo, hi);
    rz__registry_unlock();
    end();
    return rc;
}

RZ_EXPORT int rz_unpoison(void) {
    int rc = begin();
    if (rc != RZ_OK)
        return rc;
    if ((rc = lock_registry()) != RZ_OK) {
        end();
        return rc;
    }
    rc = set_window_locked(0, RZ_STATE.poison_lo, RZ_STATE.poison_hi);
    rz__registry_unlock();
    end();
    return rc;
}
