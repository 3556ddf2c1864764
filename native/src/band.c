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
 * new allocation) between reading its band and judging it.
 */
#include <stdlib.h>
#include <string.h>

#include "rz_internal.h"

/* One batch (one driver call per context) covers up to BATCH_ZONES bands and RZ_STAGING_MAX bytes: 1M bands of
 * 64 bytes in one call. Scratch grows to what the registry needs, never beyond these. */
#define BATCH_ZONES ((size_t)1 << 20)

static RZ_TLS int t_busy; /* a scan or poison is running on this thread (hook re-entry) */

static rz_staging_t g_staging;
static rz_band_io_t *g_io;
static rz_zone_node_t **g_nodes;
static size_t g_io_cap;

uint8_t rz__band_byte_for(uint64_t index) {
    if (RZ_STATE.poison_active)
        return (index >= RZ_STATE.poison_lo && index < RZ_STATE.poison_hi) ? RZ_POISON_IN : RZ_POISON_OUT;
    return RZ_STATE.fill;
}

RZ_EXPORT RZ_NOINLINE void __redzone_violation(const rz_violation_t *violation) {
    /* Empty on purpose: a debugger breaks here. The asm keeps the call from being optimised away. */
    __asm__ volatile("" : : "r"(violation) : "memory");
}

/* Room for one batch: `staging` bytes of bands and as many entries as the registry can fill. */
static int ensure_scratch(size_t staging) {
    size_t zones = rz__registry_count();
    zones = zones < 16 ? 16 : (zones > BATCH_ZONES ? BATCH_ZONES : zones);
    if (zones > g_io_cap) {
        rz_band_io_t *io = realloc(g_io, zones * sizeof *io);
        if (io)
            g_io = io;
        rz_zone_node_t **nodes = realloc(g_nodes, zones * sizeof *nodes);
        if (nodes)
            g_nodes = nodes;
        if (!io || !nodes)
            return RZ_ENOMEM;
        g_io_cap = zones;
    }
    return rz__dev_staging_reserve(&g_staging, staging);
}

/* Whether every byte is `expected`: the first byte, then the range against itself shifted by one (libc's
 * vectorised memcmp does the wide compare). */
static int band_clean(const uint8_t *band, size_t bytes, uint8_t expected) {
    return bytes == 0 || (band[0] == expected && memcmp(band, band + 1, bytes - 1) == 0);
}

static void record_violation(const rz_violation_t *v) {
    uint32_t k = RZ_STATE.last_violation_count;
    if (k < RZ_LAST_VIOLATIONS) {
        RZ_STATE.last_violations[k] = *v;
        RZ_STATE.last_violation_count = k + 1;
    }
}

int rz__band_judge(const rz_zone_node_t *z, const uint8_t *band) {
    if (band_clean(band, z->pad_bytes, z->expected))
        return 0;
    rz_violation_t v = {.index = z->index, .ptr = z->ptr, .user_bytes = z->user_bytes, .pad_bytes = z->pad_bytes,
                        .expected = z->expected};
    uint64_t first = UINT64_MAX, last = 0, changed = 0;
    for (uint64_t i = 0; i < z->pad_bytes; i++) {
        if (band[i] != z->expected) {
            if (first == UINT64_MAX)
                first = i;
            last = i;
            changed++;
        }
    }
    v.first = first;
    v.last = last;
    v.changed = changed;
    v.first_bad = band[first];
    char line[512];
    rz__format_violation(&v, line, sizeof line);
    rz__log("%s", line);
    rz__launch_report(z);
    rz__count(RZ_C_violations, 1); /* before the hook, so a debugger stopped there sees it counted */
    record_violation(&v);
    __redzone_violation(&v);
    return 1;
}

/* The agent waits at most this long for the registry (a thread stopped by the debugger may hold it). */
#define AGENT_LOCK_TIMEOUT_MS 1500

static int begin(void) {
    if (t_busy)
        return RZ_EBUSY;
    rz__options();
    if (rz__dev_load() != RZ_OK)
        return RZ_ENODRIVER;
    t_busy = 1;
    return RZ_OK;
}

static int lock_registry(void) {
    if (!rz__is_agent_thread()) {
        rz__registry_lock();
        return RZ_OK;
    }
    if (rz__registry_lock_timed(AGENT_LOCK_TIMEOUT_MS) != RZ_OK) {
        rz__log("redzone: the zone registry is held by a stopped thread; try again after it runs");
        return RZ_EBUSY;
    }
    return RZ_OK;
}

static void end(void) { t_busy = 0; }

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
    if (ensure_scratch(0) != RZ_OK)
        return RZ_ENOMEM;
    int rc = RZ_OK;
    size_t n;
    while ((n = rz__registry_take_pending(g_nodes, g_io_cap)) > 0) {
        size_t k = 0, gone = 0;
        for (size_t i = 0; i < n; i++) {
            rz_zone_node_t *z = g_nodes[i];
            if (z->ctx == NULL &&
                rz__drv.cuPointerGetAttribute(&z->ctx, RZCU_POINTER_ATTRIBUTE_CONTEXT, z->ptr) != RZCUDA_SUCCESS) {
                /* The driver no longer knows the memory (its context was destroyed): forget the zone. */
                rz__registry_drop_stale(z->ptr);
                gone++;
                continue;
            }
            z->expected = rz__band_byte_for(z->index);
            g_nodes[k] = z;
            g_io[k++] = (rz_band_io_t){.ctx = z->ctx, .dev = z->ptr + z->user_bytes, .bytes = z->pad_bytes,
                                       .value = z->expected};
        }
        if (gone)
            rz__warn("%zu allocations' memory is no longer known to the driver (context destroyed?); forgotten", gone);
        n = k;
        if (n == 0)
            continue;
        rzcu_result r = rz__dev_write(g_io, n);
        if (r != RZCUDA_SUCCESS) {
            rz__warn("installing %zu bands failed with %s; those zones are unwatched", n, rz__cu_name(r));
            for (size_t i = 0; i < n; i++) {
                g_nodes[i]->flags |= RZ_ZONE_UNWATCHED;
                rz__count(RZ_C_live_zones, -1);
                rz__count(RZ_C_unpadded_allocs, 1);
            }
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

/* Read and judge a batch of n zones whose bands were laid out in g_staging. */
static int scan_batch(size_t n, uint64_t *violated) {
    rzcu_result r = rz__dev_read(g_io, n);
    if (r != RZCUDA_SUCCESS) {
        rz__warn("scan: reading %zu bands failed with %s", n, rz__cu_name(r));
        return RZ_EDRIVER;
    }
    size_t nrefill = 0;
    for (size_t i = 0; i < n; i++) {
        rz_zone_node_t *z = g_nodes[i];
        z->flags &= (uint8_t)~RZ_ZONE_VIOLATED;
        if (rz__band_judge(z, g_io[i].host)) {
            z->flags |= RZ_ZONE_VIOLATED;
            /* i >= nrefill: slot i was already consumed, so the queue can reuse the array. */
            g_io[nrefill++] = (rz_band_io_t){.ctx = z->ctx, .dev = z->ptr + z->user_bytes, .bytes = z->pad_bytes,
                                             .value = z->expected};
            (*violated)++;
        }
    }
    if (nrefill > 0) {
        r = rz__dev_write(g_io, nrefill);
        if (r != RZCUDA_SUCCESS) {
            rz__warn("scan: re-filling %zu violated bands failed with %s", nrefill, rz__cu_name(r));
            return RZ_EDRIVER;
        }
        for (size_t i = 0; i < nrefill; i++)
            rz__record_page_reset(g_io[i].bytes);
    }
    return RZ_OK;
}

RZ_EXPORT int rz_scan(void) {
    int rc = begin();
    if (rc != RZ_OK)
        return rc;
    uint64_t checked = 0, violated = 0;
    if ((rc = lock_registry()) != RZ_OK) {
        end();
        return rc;
    }
    install_pending_locked();
    rz__launch_scan_begin();
    RZ_STATE.last_violation_count = 0;
    /* Staging holds one batch: sized for the registry up to RZ_STAGING_MAX (pages are touched only as used),
     * and grown, between batches, for a band wider than it (its address must not move within a batch). */
    uint64_t want = rz__registry_count() * (uint64_t)(RZ_STATE.pad_bytes ? RZ_STATE.pad_bytes : 16);
    if (ensure_scratch(want < RZ_STAGING_MAX ? (size_t)want : RZ_STAGING_MAX) != RZ_OK)
        rc = RZ_ENOMEM;
    size_t n = 0, used = 0;
    for (rz_zone_node_t *z = rz__registry_first(); z && rc == RZ_OK; z = rz__registry_next(z)) {
        if (!rz__zone_watched(z))
            continue;
        if (n > 0 && (n == g_io_cap || used + z->pad_bytes > g_staging.size)) {
            rc = scan_batch(n, &violated);
            n = used = 0;
            if (rc != RZ_OK)
                break;
        }
        if (z->pad_bytes > g_staging.size && (rc = ensure_scratch(z->pad_bytes)) != RZ_OK)
            break; /* n == 0 here: nothing collected points into the old staging */
        g_nodes[n] = z;
        g_io[n] = (rz_band_io_t){.ctx = z->ctx, .dev = z->ptr + z->user_bytes, .bytes = z->pad_bytes,
                                 .host = g_staging.p + used};
        used += z->pad_bytes;
        n++;
        checked++;
    }
    if (rc == RZ_OK && n > 0)
        rc = scan_batch(n, &violated);
    RZ_STATE.last_scan_checked = checked;
    RZ_STATE.last_scan_violated = violated;
    rz__registry_unlock();
    rz__count(RZ_C_scans, 1);
    if (rc == RZ_OK) {
        char line[128];
        rz__format_scan_summary(checked, violated, line, sizeof line);
        rz__log("%s", line);
    } else
        rz__log("redzone scan: failed (%s) after %llu zones checked, %llu violated", rz_strerror(rc),
                (unsigned long long)checked, (unsigned long long)violated);
    end();
    return rc == RZ_OK ? (int)(violated > INT32_MAX ? INT32_MAX : violated) : rc;
}

/* Write the n queued fills in g_io and record each zone's new byte. */
static int flush_fills(size_t n) {
    rzcu_result r = rz__dev_write(g_io, n);
    if (r != RZCUDA_SUCCESS) {
        rz__warn("poison: filling %zu bands failed with %s", n, rz__cu_name(r));
        return RZ_EDRIVER; /* those zones keep their old expected byte */
    }
    for (size_t i = 0; i < n; i++) {
        g_nodes[i]->expected = g_io[i].value;
        rz__record_page_reset(g_io[i].bytes);
    }
    return RZ_OK;
}

/* Re-fill every padded band whose byte changes under the current window rule. Holds the registry lock. */
static int refill_all(void) {
    if (ensure_scratch(0) != RZ_OK)
        return RZ_ENOMEM;
    int rc = RZ_OK;
    size_t n = 0;
    for (rz_zone_node_t *z = rz__registry_first(); z && rc == RZ_OK; z = rz__registry_next(z)) {
        uint8_t want = rz__band_byte_for(z->index);
        if (!rz__zone_watched(z) || want == z->expected)
            continue;
        g_nodes[n] = z;
        g_io[n] = (rz_band_io_t){.ctx = z->ctx, .dev = z->ptr + z->user_bytes, .bytes = z->pad_bytes, .value = want};
        if (++n == g_io_cap) {
            rc = flush_fills(n);
            n = 0;
        }
    }
    if (rc == RZ_OK && n > 0)
        rc = flush_fills(n);
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
    RZ_STATE.poison_lo = lo;
    RZ_STATE.poison_hi = hi;
    RZ_STATE.poison_active = 1;
    install_pending_locked();
    rc = refill_all();
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
    RZ_STATE.poison_active = 0;
    install_pending_locked();
    rc = refill_all();
    rz__registry_unlock();
    end();
    return rc;
}
