/*
 * Allocation and free: the choice to pad (by the creation index the entry point took, creation_index.h), band
 * installation and registration, and the counters, for every kind of allocation the driver offers (plain, pitched, managed, stream-ordered, from a
 * pool). The public rz_mem_alloc/rz_mem_free (interpose/api.c) and the interposed driver entry points (hooks.c)
 * all come through here, the creation index taken and the library started (interpose/start.c) before; the
 * driver's result codes come back untouched.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#include "common.h"
#include "alloc.h"
#include "alloc_trace.h"
#include "bad_free.h"
#include "band.h"
#include "band_fill.h"
#include "band_io.h"
#include "capture.h"
#include "creation_index.h"
#include "device_ctx.h"
#include "driver.h"
#include "fill_marks.h"
#include "finding.h"
#include "format.h"
#include "guard_pages.h"
#include "ipc_records.h"
#include "memory.h"
#include "options.h"
#include "quarantine.h"
#include "registry.h"
#include "report.h"
#include "state.h"
#include "stats.h"
#include "sticky.h"
#include "sticky_said.h"
#include "stream_fills.h"
#include "stream_ops.h"
#include "symbolize.h"

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
        return rz__dev_mem_alloc(p, bytes);
    case RZ_ALLOC_MANAGED:
        return rz__dev_mem_alloc_managed(p, bytes, req->flags);
    case RZ_ALLOC_PITCH:
        return rz__dev_mem_alloc_pitch(p, req->pitch, req->width, req->height + extra_rows, req->element_bytes);
    case RZ_ALLOC_ASYNC:
        return rz__dev_mem_alloc_async(p, bytes, req->stream, req->per_thread);
    case RZ_ALLOC_POOL:
        return rz__dev_mem_alloc_from_pool(p, bytes, req->pool, req->stream, req->per_thread);
    }
    return RZCUDA_ERROR_INVALID_VALUE;
}

static int raw_available(const rz_alloc_req_t *req) {
    switch (req->kind) {
    case RZ_ALLOC_PLAIN:
        return rz__dev_has_mem_alloc();
    case RZ_ALLOC_MANAGED:
        return rz__dev_has_mem_alloc_managed();
    case RZ_ALLOC_PITCH:
        return rz__dev_has_mem_alloc_pitch();
    case RZ_ALLOC_ASYNC:
        return rz__dev_has_mem_alloc_async(req->per_thread);
    case RZ_ALLOC_POOL:
        return rz__dev_has_mem_alloc_from_pool(req->per_thread);
    }
    return 0;
}


/* Whether plain allocations through the hooks can take alloc_plain_fast: set at start-up. */
static _Atomic int g_fast_ok;
/* What the fast path needs from the options, copied at start-up (written before the library is started, and
 * under the start-up lock: once, never while another thread, having seen it started, reads it). */
static struct {
    uint64_t pad, min_idx, trace_idx;
    size_t max_bytes_1; /* largest bytes - 1 that can take the pad without overflow */
} g_fast;

void rz__alloc_prepare(void) {
    const rz_options_t *o = rz__options();
    int fast = rz__dev_has_mem_alloc() && o->stacks == 0 && o->front_bytes == 0 && !o->guard.every && !o->guard.n &&
               (o->pad_bytes == 0 || (!o->install_eager && rz__dev_has_pointer_attribute()));
    g_fast.pad = o->pad_bytes;
    g_fast.min_idx = o->min_idx;
    g_fast.trace_idx = o->trace_idx;
    g_fast.max_bytes_1 = SIZE_MAX - o->pad_bytes - 1;
    atomic_store_explicit(&g_fast_ok, fast, memory_order_relaxed);
}

/* A zone whose free the driver refused goes back into the registry as it was, allocation stack included (the
 * copy taken when it was removed: its old node, and slot, may be another zone's by now). */
static void readd_refused(const rz_zone_node_t *zone) {
    uint64_t kept[RZ_STACK_MAX];
    void *frames[RZ_STACK_MAX];
    uint32_t n = rz__registry_removed_stack(zone->index, kept, RZ_STACK_MAX);
    for (uint32_t i = 0; i < n; i++)
        frames[i] = (void *)(uintptr_t)kept[i];
    RZ_CHECK(rz__registry_add_stack(zone, frames, n) == RZ_OK || !"re-registering a zone whose free failed");
}

/* The free of a guard-page zone (already out of the registry): unmap, release, count. */
__attribute__((cold, noinline)) static int free_guarded(const rz_zone_node_t *zone) {
    rzcu_result r = rz__guard_free(zone);
    if (r != RZCUDA_SUCCESS) {
        rz__record_unmap_failure();
        readd_refused(zone);
        return (int)r;
    }
    rz_devptr_t base;
    size_t mapped, reserved;
    rz__guard_layout(zone, &base, &mapped, &reserved);
    rz__record_unmap(mapped);
    rz__guard_note(zone->ptr, 0);
    if (rz__zone_watched(zone))
        rz__count(RZ_C_live_zones, -1);
    return RZCUDA_SUCCESS;
}

/* padded_oom: the padded attempt was made and ran out of memory; go straight to the unpadded retry. */
static int alloc_general(rz_devptr_t *dptr, size_t bytes, const rz_alloc_req_t *req, uint64_t index, int padded_oom);

/* The common case kept short (bench/run counts its instructions): a plain allocation through the hooks,
 * unpadded or with a lazily installed band. No driver call besides the allocation itself. */
static int alloc_plain_fast(rz_devptr_t *dptr, size_t bytes, const rz_alloc_req_t *req, uint64_t index,
                            uint64_t pad) {
    rz_devptr_t p = 0;
    rzcu_result r = rz__dev_mem_alloc(&p, bytes + pad);
    if (RZ_UNLIKELY(r != RZCUDA_SUCCESS))
        return r == RZCUDA_ERROR_OUT_OF_MEMORY && (pad || rz__quarantine_bytes()) ? alloc_general(dptr, bytes, req, index, 1)
                                                                                 : (int)r;
    /* The context is the one current on this thread, known without a driver call (device_ctx.h), or NULL:
     * then the lazy install asks the driver for it. */
    rz_zone_node_t zone = {.ptr = p, .user_bytes = bytes, .pad_bytes = (uint32_t)pad, .index = index,
                           .flags = pad ? RZ_ZONE_PENDING : 0, .reserved0 = pad ? RZ_ZONE_SEEN : 0,
                           .ctx = pad ? rz__dev_alloc_ctx() : NULL};
    if (RZ_UNLIKELY(rz__registry_add(&zone) != RZ_OK)) {
        rz__warn("allocation #%llu: out of registry memory; not watched", (unsigned long long)index);
        if (pad)
            rz__count(RZ_C_unpadded_allocs, 1);
    } else {
        rz__record_map(bytes + pad);
        if (pad) {
            rz__count(RZ_C_live_zones, 1);
        }
    }
    *dptr = p;
    return RZCUDA_SUCCESS;
}

int rz__alloc_indexed(rz_devptr_t *dptr, size_t bytes, const rz_alloc_req_t *req, uint64_t index) {
    return alloc_general(dptr, bytes, req, index, 0);
}

static const rz_alloc_req_t g_plain_interposed = {.kind = RZ_ALLOC_PLAIN, .interposed = 1};

int rz__alloc_interposed_indexed(rz_devptr_t *dptr, size_t bytes, uint64_t index) {
    /* bytes - 1 wraps for 0, so one compare checks both 0 < bytes and bytes + pad not overflowing. */
    if (RZ_LIKELY(atomic_load_explicit(&g_fast_ok, memory_order_relaxed) && dptr && bytes - 1 <= g_fast.max_bytes_1 &&
                  index != g_fast.trace_idx))
        return alloc_plain_fast(dptr, bytes, &g_plain_interposed, index, index >= g_fast.min_idx ? g_fast.pad : 0);
    return alloc_general(dptr, bytes, &g_plain_interposed, index, 0);
}

static int alloc_general(rz_devptr_t *dptr, size_t bytes, const rz_alloc_req_t *req, uint64_t index, int padded_oom) {
    if (RZ_UNLIKELY(!raw_available(req)))
        return RZCUDA_ERROR_NOT_SUPPORTED; /* the driver (loaded: start() succeeded) lacks this entry point */
    const rz_options_t *o = rz__options();
    if (dptr == NULL || (req->kind == RZ_ALLOC_PITCH && req->pitch == NULL))
        return (int)raw_alloc(req, dptr, bytes, 0); /* the driver's own answer to a NULL out pointer */
    int wanted;
    uint64_t pad = pad_for(o, index, bytes, &wanted);
    size_t extra_rows = 0;
    if (req->kind == RZ_ALLOC_PITCH && pad > 0) {
        /* The band is whole extra rows after the pitched block. The pitch is not known until the driver
         * answers, but it is at least the width, so ceil(pad / width) rows always hold the pad. */
        extra_rows = req->width ? (size_t)((pad + req->width - 1) / req->width) : 0;
        /* No band where the padded block could overflow (pitch < width + 4096) when the program's own
         * request does not: the driver must answer the program's request, not one redzone made up. */
        size_t padded_bytes;
        if (extra_rows == 0 || req->height > SIZE_MAX - extra_rows || req->width > SIZE_MAX - 4096 ||
            __builtin_mul_overflow(req->height + extra_rows, req->width + 4096, &padded_bytes) ||
            (uint64_t)extra_rows * ((uint64_t)req->width + 4096) > UINT32_MAX) {
            extra_rows = 0;
            pad = 0;
        }
    }
    if (pad > 0 && req->kind == RZ_ALLOC_PLAIN && !padded_oom && rz__guard_selected(o, index) && rz__guard_available()) {
        rz_zone_node_t zone = {.index = index, .ctx = rz__dev_current_ctx()};
        rzcu_result g = rz__guard_alloc(bytes, &zone);
        if (g != RZCUDA_SUCCESS && g != RZCUDA_ERROR_OUT_OF_MEMORY) {
            static atomic_int warned;
            if (!atomic_exchange(&warned, 1))
                rz__warn("guard pages: allocation #%llu: the virtual memory calls failed with %s; ordinary bands "
                         "instead", (unsigned long long)index, rz__cu_name(g));
        }
        if (g == RZCUDA_SUCCESS) {
            /* The slack band, if any, is written now (its context is known: no lazy install needed). */
            uint64_t installed = (uint64_t)1 << zone.reserved0; /* the guard granule */
            if (zone.pad_bytes) {
                zone.expected = rz__band_byte_for(index);
                if (rz__band_fill_range(req, zone.ptr + bytes, zone.expected, zone.pad_bytes) != RZCUDA_SUCCESS)
                    zone.flags |= RZ_ZONE_UNWATCHED;
                else
                    installed += zone.pad_bytes;
            }
            rz__record_guard_install(installed); /* one install per allocation, as for a banded one */
            void *gframes[32];
            int ngframes = o->stacks ? rz__capture_stack(gframes, (int)o->stacks) : 0;
            if (rz__registry_add_stack(&zone, gframes, (uint32_t)ngframes) == RZ_OK) {
                rz_devptr_t base;
                size_t mapped, reserved;
                rz__guard_layout(&zone, &base, &mapped, &reserved);
                rz__record_map(mapped);
                rz__guard_note(zone.ptr, 1);
                if (rz__zone_watched(&zone))
                    rz__count(RZ_C_live_zones, 1);
            } else {
                rz__warn("allocation #%llu: out of registry memory; not watched", (unsigned long long)index);
            }
            if (index == o->trace_idx)
                rz__backtrace(index);
            *dptr = zone.ptr;
            return RZCUDA_SUCCESS;
        }
        /* Not possible here (the driver's VMM calls failed, the cap, out of memory): an ordinary band. */
    }
    /* Allocated while its stream is captured into a graph: the memory is the graph's (a memory node). */
    int captured = pad > 0 && is_async(req) && rz__stream_capturing(rz__stream_of(req->stream, req->per_thread));
    /* The front band: whole 256-byte units before the program's pointer (not for pitched blocks, nor for
     * graph memory, whose free inside the graph the library cannot move back to the driver's base). */
    uint64_t front = pad > 0 && req->kind != RZ_ALLOC_PITCH && !captured ? o->front_bytes : 0;
    if (front > SIZE_MAX - bytes - pad) {
        rz__warn("allocation #%llu of %zu bytes: size + %llu front bytes overflows; no front band",
                 (unsigned long long)index, bytes, (unsigned long long)front);
        front = 0;
    }
    rz_devptr_t p = 0;
    rzcu_result r =
        padded_oom ? RZCUDA_ERROR_OUT_OF_MEMORY : raw_alloc(req, &p, bytes + pad + front, extra_rows);
    if (r == RZCUDA_ERROR_OUT_OF_MEMORY && rz__quarantine_drain()) /* freed blocks held back: give them up */
        r = raw_alloc(req, &p, bytes + pad + front, extra_rows);
    if (r == RZCUDA_ERROR_OUT_OF_MEMORY && pad > 0) {
        rz__warn("allocation #%llu of %zu bytes: out of memory with %llu pad bytes; retrying without a band",
                 (unsigned long long)index, bytes, (unsigned long long)(pad + front));
        pad = 0;
        front = 0;
        extra_rows = 0;
        r = raw_alloc(req, &p, bytes, 0);
    }
    if (r != RZCUDA_SUCCESS)
        return (int)r;
    rz_devptr_t raw = p;
    p += front; /* the program's pointer */
    if (req->kind == RZ_ALLOC_PITCH) {
        bytes = *req->pitch * req->height;
        pad = *req->pitch * extra_rows; /* bounded by the check above: pitch < width + 4096 */
    }
    /* Lazy only where the hooks see every write into the buffer: not for rz_mem_alloc callers (their copies
     * are not seen), and not for managed memory, which the host reads and writes directly (a store past the
     * end before the first device work would be overwritten by a band written later). */
    int lazy = pad > 0 && req->interposed && !o->install_eager && !is_async(req) && req->kind != RZ_ALLOC_MANAGED;
    rz_zone_node_t zone = {.ptr = p, .user_bytes = bytes, .pad_bytes = (uint32_t)pad, .index = index,
                           .front_units = (uint16_t)(front / RZ_FRONT_UNIT),
                           .flags = is_async(req) ? RZ_ZONE_STREAM_ORDERED : 0};
    if (pad > 0 && req->interposed && !is_async(req) && req->kind != RZ_ALLOC_MANAGED)
        zone.reserved0 = RZ_ZONE_SEEN;
    if (req->kind == RZ_ALLOC_POOL)
        zone.reserved0 |= RZ_ZONE_OWN_POOL;
    /* A lazy zone's context is the thread's current one as the hooks know it, without a driver call
     * (device_ctx.h); where they cannot know it, the zone asks the driver when its band is written, so one
     * freed before then never asks at all. An unpadded zone has no band to move. */
    if (pad > 0 && lazy)
        zone.ctx = rz__dev_alloc_ctx();
    if (pad > 0 && !zone.ctx && (!lazy || !rz__dev_has_pointer_attribute()))
        zone.ctx = rz__dev_current_ctx();
    if (pad > 0)
        rz__band_fill_new(&zone, raw, req, lazy, captured);
    void *frames[32];
    int nframes = o->stacks ? rz__capture_stack(frames, (int)o->stacks) : 0;
    if (rz__registry_add_stack(&zone, frames, (uint32_t)nframes) != RZ_OK) {
        /* No host memory for the registry: the program still gets its memory, unwatched and uncounted. The
         * band may still be waiting to be written, which is harmless: it is never read. */
        rz__warn("allocation #%llu: out of registry memory; not watched", (unsigned long long)index);
        zone.flags |= RZ_ZONE_UNWATCHED;
    } else {
        rz__record_map(bytes + pad + front);
        if (rz__zone_watched(&zone)) {
            if (!lazy)
                rz__record_guard_install(pad + front); /* lazy: counted when the band is written */
            rz__count(RZ_C_live_zones, 1);
        }
        if (zone.flags & RZ_ZONE_FILLING)
            rz__fill_note(zone.ptr, zone.fill);
    }
    if (req->kind == RZ_ALLOC_POOL && !(zone.flags & RZ_ZONE_UNWATCHED))
        rz__quarantine_pool_note(p, req->pool); /* its free may be held: the quarantine keeps its pool */
    if (wanted && !rz__zone_watched(&zone))
        rz__count(RZ_C_unpadded_allocs, 1);
    if (rz__zone_watched(&zone) && index == o->trace_idx)
        rz__backtrace(index);
    *dptr = p;
    return RZCUDA_SUCCESS;
}

/*
 * A free of a pointer inside a zone's front band: to the driver it is the base of the padded block, so it
 * would free the program's buffer, where without redzone the pointer is no allocation's base and the driver
 * answers CUDA_ERROR_INVALID_VALUE. Reported as a bad free (the line, the count, then the __redzone_refused
 * hook with no lock held), answered as the driver would, nothing freed. Returns 0 when dptr is no such
 * pointer.
 */
static int bad_free_in_front(rz_devptr_t dptr, const char *entry) {
    uint64_t front = rz__options()->front_bytes;
    rz_devptr_t base = 0;
    size_t size = 0;
    if (front == 0 || !rz__dev_has_address_range() || rz__dev_address_range(&base, &size, dptr) != RZCUDA_SUCCESS)
        return 0;
    rz_refusal_t r = {.addr = dptr, .result = RZCUDA_ERROR_INVALID_VALUE, .how = RZ_REFUSED_FREE};
    int bad = 0;
    rz__registry_lock();
    const rz_zone_node_t *z = rz__registry_find(base + front);
    if (z && rz__zone_front(z) == front && !(z->flags & RZ_ZONE_GUARD) && dptr < z->ptr) {
        bad = 1;
        r.index = z->index;
        r.ptr = z->ptr;
        r.user_bytes = z->user_bytes;
        r.first = r.last = -(int64_t)(z->ptr - dptr);
    }
    rz__registry_unlock();
    if (!bad)
        return 0;
    snprintf(r.entry, sizeof r.entry, "%s", entry);
    char line[512];
    rz__format_refusal(&r, rz__cu_name(RZCUDA_ERROR_INVALID_VALUE), line, sizeof line);
    rz_finding_t f = {.kind = RZ_FINDING_BAD_FREE, .alloc = r.index, .ptr = r.ptr, .user_bytes = r.user_bytes,
                      .pad = RZ_FINDING_NONE, .first = r.first, .last = r.last, .changed = RZ_FINDING_NONE,
                      .first_bad = RZ_FINDING_NONE, .addr = dptr, .bytes = 0, .entry = entry, .text = line};
    int fate = rz__finding_admit(&f);
    if (fate == RZ_FINDING_SUPPRESSED)
        return 1; /* still answered as the driver would, nothing freed */
    if (fate == RZ_FINDING_REPORT)
        rz__log("%s", line);
    rz__count(RZ_C_violations, 1); /* before the hook, so a debugger stopped there sees it counted */
    __redzone_refused(&r);
    rz__finding_done(fate);
    return 1;
}

/* The driver refused a free it was given after the zone's band was checked (and reported): the zone stays
 * live, and its band is written back as a scan does after a report, so the same overrun is not reported
 * again by the retried free or a later scan. One overrun, one report. */
static void refused_free_rearm(const rz_zone_node_t *zone) {
    rzcu_result r = rz__band_rewrite(zone);
    if (r != RZCUDA_SUCCESS && !rz__sticky_failed(r, 1))
        rz__warn("alloc#%llu: re-arming its band after a refused free failed with %s", (unsigned long long)zone->index,
                 rz__cu_name(r));
}

static _Atomic(rz_before_free_fn *) g_before_free;

void rz__alloc_on_free(rz_before_free_fn *fn) { atomic_store_explicit(&g_before_free, fn, memory_order_release); }

int rz__free(rz_devptr_t dptr, const rz_free_req_t *req) {
    const rz_options_t *o = rz__options();
    if (rz__dev_load() != RZ_OK)
        return RZCUDA_ERROR_NOT_INITIALIZED;
    if (req->async && !rz__dev_has_mem_free_async(req->per_thread))
        return RZCUDA_ERROR_NOT_SUPPORTED; /* an older driver: nothing to free in stream order */
    uint64_t imported;
    if (RZ_UNLIKELY(rz__ipc_driver_ptr(dptr, &imported))) {
        /* A pool pointer this process imported with a front band added (hooks_ipc.c): the importer's free of
         * its import, given to the driver as the driver's pointer; the exporter's zone is left alone. */
        rzcu_result r = req->async ? rz__dev_mem_free_async(imported, req->stream, req->per_thread)
                                   : rz__dev_mem_free(imported);
        if (r == RZCUDA_SUCCESS)
            rz__ipc_closed(dptr);
        return (int)r;
    }
    rz_zone_node_t zone;
    int known = rz__registry_remove(dptr, &zone) == RZ_OK;
    if (!known && RZ_UNLIKELY(o->front_bytes) && bad_free_in_front(dptr, req->async ? "cuMemFreeAsync" : "cuMemFree"))
        return RZCUDA_ERROR_INVALID_VALUE;
    int held_answer; /* a double free, or a free inside a freed block the quarantine holds (bad_free.c) */
    if (!known && rz__bad_free_held(dptr, req, &held_answer))
        return held_answer;
    rz_free_req_t ordered;
    rzcu_stream fill_stream;
    if (known && !req->async && (zone.flags & RZ_ZONE_FILLING) && !rz__zone_filled(&zone) &&
        rz__zone_fill_stream(&zone, &fill_stream) && fill_stream != RZCU_STREAM_PER_THREAD &&
        rz__dev_has_mem_free_async(0)) {
        /* A plain free of stream-ordered memory whose band memset is still queued in the allocating stream
         * (which has not reached the allocation yet): freed now, the memory could go to another allocation
         * before the memset writes into it. Freed in that stream's order instead, after the memset, and
         * checked there; the program gets the driver's answer to that free (pool memory returns to its pool
         * either way). */
        ordered = (rz_free_req_t){.async = 1, .stream = fill_stream};
        req = &ordered;
    }
    int checked = 0;
    /* A zone still waiting for its band has nothing to check: no launch, copy or memset ran since. One whose
     * stream-ordered fill may not have landed is checked only in stream order (its band copy then follows the
     * memset); a plain cuMemFree of it reads the band now, so only once the fill is seen done. */
    rz_before_free_fn *check;
    if (known && rz__zone_watched(&zone) && !(zone.flags & RZ_ZONE_PENDING) && (o->scan & RZ_SCAN_FREE) &&
        (req->async || rz__zone_filled(&zone)) &&
        (check = atomic_load_explicit(&g_before_free, memory_order_acquire)) != NULL) {
        check(&zone, req); /* reports; never changes the outcome of the free */
        checked = 1;
    }
    rzcu_result r;
    rz_devptr_t raw = known ? dptr - rz__zone_front(&zone) : dptr; /* what the driver handed out */
    if (RZ_UNLIKELY(known && (zone.flags & RZ_ZONE_GUARD)))
        return free_guarded(&zone);
    if (known && rz__quarantine_take(&zone, req))
        r = RZCUDA_SUCCESS; /* held (quarantine.c): given back to the driver when it leaves the quarantine */
    else if (req->async)
        r = rz__dev_mem_free_async(raw, req->stream, req->per_thread);
    else
        r = rz__dev_mem_free(raw);
    if (!known)
        return rz__bad_free_refused(dptr, (int)r, req); /* reported when the driver refused it */
    if (r != RZCUDA_SUCCESS) {
        rz__record_unmap_failure();
        /* In stream order the check is queued behind the program's work: a band written back now could
         * overtake it, so a refused cuMemFreeAsync leaves the band as it is. */
        if (checked && !req->async)
            refused_free_rearm(&zone);
        readd_refused(&zone);
        return (int)r;
    }
    rz__record_unmap(zone.user_bytes + zone.pad_bytes + rz__zone_front(&zone));
    rz__ipc_zone_gone(dptr); /* its IPC records, if it was exported (one load otherwise) */
    if (rz__zone_watched(&zone))
        rz__count(RZ_C_live_zones, -1);
    return RZCUDA_SUCCESS;
}
