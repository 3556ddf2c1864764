/*
 * Pool sub-allocations through NVTX (issue 32 item 4): the heaps a pool registers and their regions, kept
 * sorted by address per heap. Every entry covers the bytes from its start to the next entry (or the heap's
 * end): a registered region's own bytes are the program's and never touched; its slack after them, at most
 * a band's width, holds the band fill. Before a slack's bytes change hands (a region registered in it, a
 * resize, an unregister, the heap unregistered or reset) and at every scan, the bytes it filled are read back
 * and compared: a changed byte is a REDZONE VIOLATION naming the region (its NVTX name when given).
 *
 * An unregistered region is held in the quarantine (core/quarantine.c, as a freed block is: filled with the
 * free byte, FIFO, bounded by METRALE_REDZONE_QUARANTINE with the freed blocks, checked by every scan and as
 * it leaves, a change reported as region-write-after-free) while its pool leaves it unused: its bytes and its
 * slack, up to the next region. It leaves when the pool registers a region over it again (checked first, its
 * fill waited for when still queued), when the heap is unregistered, when the pool's allocation is freed, or
 * when the quarantine's bound pushes it out. Not held (the quarantine off, larger than its bound, a capture in
 * progress): not checked.
 *
 * Locks: the registry lock (a heap is watched while the allocation it starts at is live: checked under that
 * lock, so the memory cannot go between the check and the read), then g_mu. Device reads and writes go
 * through the band seam (band_io), as band.c's do.
 */
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "nvtx_regions.h"
#include "band.h"
#include "band_io.h"
#include "device_ctx.h"
#include "finding.h"
#include "depot.h"
#include "options.h"
#include "quarantine.h"
#include "registry.h"
#include "symbolize.h"
#include "report.h"
#include "state.h"
#include "stats.h"

/* The layouts `redzone list` reads from memory (a live process or a core file): pinned below, decoded by
 * gdb/redzone_gdb/nvtx.py. */
typedef struct entry {
    uint64_t start, size; /* size: the region's (a freed entry keeps the size it had) */
    uint64_t filled;      /* bytes of its cover filled by redzone and checked */
    uint8_t live;         /* registered (else unregistered: freed) */
    uint8_t expected;     /* the byte the filled bytes hold */
    uint8_t held;         /* unregistered and handed to the quarantine (it may have let it go since) */
    uint8_t reserved[5];
    char name[48];
} entry_t;

typedef struct heap {
    uint64_t used, base, size, zone_index;
    void *ctx;
    entry_t *e;
    uint64_t n, cap;
} heap_t;

typedef struct rz_nvtx_state {
    char magic[8];        /* "RZNVTX01" */
    uint32_t version;     /* 1 */
    uint32_t heaps;       /* RZ_NVTX_HEAPS */
    uint32_t heap_bytes;  /* sizeof(heap_t) */
    uint32_t entry_bytes; /* sizeof(entry_t) */
    heap_t heap[RZ_NVTX_HEAPS];
} rz_nvtx_state_t;
_Static_assert(sizeof(entry_t) == 80 && offsetof(entry_t, live) == 24 && offsetof(entry_t, held) == 26 &&
               offsetof(entry_t, name) == 32, "entry");
_Static_assert(sizeof(heap_t) == 64 && offsetof(heap_t, e) == 40 && offsetof(heap_t, n) == 48, "heap");
_Static_assert(offsetof(rz_nvtx_state_t, heap) == 24, "nvtx state");

RZ_EXPORT rz_nvtx_state_t __redzone_nvtx;
rz_nvtx_state_t __redzone_nvtx = {"RZNVTX01", 1, RZ_NVTX_HEAPS, sizeof(heap_t), sizeof(entry_t), {{0}}};
#define g_heaps (__redzone_nvtx.heap)

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_armed, g_warned_overlap;

static uint64_t slack_cap(void) { return RZ_STATE.pad_bytes ? RZ_STATE.pad_bytes : 64; }

/* The first covered byte of entry i and how many bytes its cover may fill now. */
static uint64_t cover_start(const heap_t *h, size_t i) { return h->e[i].live ? h->e[i].start + h->e[i].size : h->e[i].start; }

static uint64_t cover_end(const heap_t *h, size_t i) { return i + 1 < h->n ? h->e[i + 1].start : h->base + h->size; }

static uint64_t cover_len(const heap_t *h, size_t i) {
    uint64_t c0 = cover_start(h, i), c1 = cover_end(h, i);
    uint64_t len = c1 > c0 ? c1 - c0 : 0, cap = slack_cap();
    return len < cap ? len : cap;
}

/* A region the quarantine holds: what its report names (the entry may move or go meanwhile), freed when it
 * leaves the quarantine. */
typedef struct held {
    uint64_t heap_base, heap_size, start, size;
    char name[48];
} held_t;

static void held_describe(const void *arg, char *out, size_t cap) {
    const held_t *r = arg;
    if (r->name[0])
        snprintf(out, cap, "nvtx region \"%s\" 0x%llx+%llu, unregistered (heap 0x%llx+%llu)", r->name,
                 (unsigned long long)r->start, (unsigned long long)r->size, (unsigned long long)r->heap_base,
                 (unsigned long long)r->heap_size);
    else
        snprintf(out, cap, "nvtx region 0x%llx+%llu, unregistered (heap 0x%llx+%llu)", (unsigned long long)r->start,
                 (unsigned long long)r->size, (unsigned long long)r->heap_base, (unsigned long long)r->heap_size);
}

/* The quarantine let the region go (reused, its heap or pool gone, pushed out): nothing to give back. Takes
 * no lock (the quarantine may call it while g_mu is held). */
static void held_left(uint64_t base, uint64_t bytes, void *arg) {
    (void)base, (void)bytes;
    free(arg);
}

/* Entry i was just unregistered: its bytes and slack, up to the next entry, go to the quarantine. */
static void hold(heap_t *h, size_t i) {
    entry_t *e = &h->e[i];
    uint64_t end = cover_end(h, i), bytes = end > e->start ? end - e->start : 0, most = e->size + slack_cap();
    bytes = bytes < most ? bytes : most;
    e->filled = 0;
    e->held = 0;
    held_t *r = bytes ? malloc(sizeof *r) : NULL;
    if (!r)
        return;
    *r = (held_t){.heap_base = h->base, .heap_size = h->size, .start = e->start, .size = e->size};
    memcpy(r->name, e->name, sizeof r->name);
    const rz_options_t *o = rz__options();
    rz_qhold_t q = {.base = e->start, .bytes = bytes, .ptr = e->start, .user_bytes = e->size,
                    .index = h->zone_index, .ctx = h->ctx, .release = held_left, .arg = r, .region = 1};
    if (o->stacks) {
        void *frames[RZ_STACK_MAX];
        uint64_t kept[RZ_STACK_MAX];
        int n = rz__capture_stack(frames, (int)o->stacks);
        for (int k = 0; k < n; k++)
            kept[k] = (uint64_t)(uintptr_t)frames[k];
        q.free_stack = n > 0 ? rz__depot_put(kept, (uint32_t)n) : 0;
    }
    if (rz__quarantine_hold(&q, 0, NULL))
        e->held = 1;
    else
        free(r); /* not held: not checked */
}

/* The pool uses [ptr, ptr + bytes) again: the held regions there leave the quarantine, checked. */
static void reuse(uint64_t ptr, uint64_t bytes) { rz__quarantine_withdraw(ptr, bytes ? bytes : 1, held_left); }

/* The heap's allocation is still the one it was registered on (registry lock held). */
static int heap_alive(heap_t *h) {
    const rz_zone_node_t *z = rz__registry_find(h->base);
    if (z && z->index == h->zone_index)
        return 1;
    free(h->e); /* its memory went with the allocation: nothing to check any more */
    memset(h, 0, sizeof *h);
    return 0;
}

static void describe(const heap_t *h, const entry_t *e, char *out, size_t cap) {
    if (e->name[0])
        snprintf(out, cap, "nvtx region \"%s\" 0x%llx+%llu", e->name, (unsigned long long)e->start,
                 (unsigned long long)e->size);
    else
        snprintf(out, cap, "nvtx region 0x%llx+%llu", (unsigned long long)e->start, (unsigned long long)e->size);
    size_t len = strlen(out);
    snprintf(out + len, cap - len, "%s (heap 0x%llx+%llu)", e->live ? "" : ", unregistered",
             (unsigned long long)h->base, (unsigned long long)h->size);
}

/* Judge the bytes read back for entry i; report a change. Returns 1 when violated. */
static int judge(const heap_t *h, size_t i, const uint8_t *got) {
    const entry_t *e = &h->e[i];
    uint64_t first = 0, last = 0, changed = 0;
    uint8_t bad = 0;
    for (uint64_t k = 0; k < e->filled; k++) {
        if (got[k] == e->expected)
            continue;
        if (!changed++) {
            first = k;
            bad = got[k];
        }
        last = k;
    }
    if (!changed)
        return 0;
    char what[160], line[512];
    describe(h, e, what, sizeof what);
    if (e->live)
        snprintf(line, sizeof line, "REDZONE VIOLATION %s : bytes [%llu..=%llu] past the end were written (%llu of "
                 "%llu slack bytes changed), first bad value 0x%02x",
                 what, (unsigned long long)first, (unsigned long long)last, (unsigned long long)changed,
                 (unsigned long long)e->filled, bad);
    else
        snprintf(line, sizeof line, "REDZONE VIOLATION %s : bytes [%llu..=%llu] were written after it was "
                 "unregistered (%llu of %llu bytes checked changed), first bad value 0x%02x",
                 what, (unsigned long long)first, (unsigned long long)last, (unsigned long long)changed,
                 (unsigned long long)e->filled, bad);
    rz_finding_t f = {.kind = e->live ? RZ_FINDING_REGION_OVERRUN : RZ_FINDING_REGION_AFTER_FREE,
                      .alloc = h->zone_index, .ptr = e->start, .user_bytes = e->size, .pad = (int64_t)e->filled,
                      .first = (int64_t)first, .last = (int64_t)last, .changed = (int64_t)changed,
                      .first_bad = bad, .text = line};
    int fate = rz__finding_admit(&f);
    if (fate == RZ_FINDING_SUPPRESSED)
        return 1; /* re-filled all the same, neither reported nor counted */
    if (fate == RZ_FINDING_REPORT)
        rz__log("%s", line);
    rz__count(RZ_C_violations, 1); /* before the hook, so a debugger stopped there sees it counted */
    /* The debugger's hook (`redzone break on`), as for a zone: the region stands for the allocation (ptr its
     * start, user_bytes its size, pad_bytes its slack judged), index the pool's allocation. */
    rz_violation_t v = {.index = h->zone_index, .ptr = e->start, .user_bytes = e->size, .pad_bytes = e->filled,
                        .first = first, .last = last, .changed = changed, .first_bad = bad, .expected = e->expected};
    __redzone_violation(&v);
    rz__finding_done(fate);
    return 1;
}

/* Read back and judge entries [from, to) of h (their filled bytes); refill the violated ones. */
static void check_range(heap_t *h, size_t from, size_t to) {
    size_t n = 0;
    uint64_t total = 0;
    for (size_t i = from; i < to; i++)
        if (h->e[i].filled) {
            n++;
            total += h->e[i].filled;
        }
    if (n == 0)
        return;
    rz_band_io_t *io = calloc(n, sizeof *io);
    uint8_t *buf = malloc(total);
    size_t *which = calloc(n, sizeof *which);
    if (!io || !buf || !which) {
        free(io), free(buf), free(which);
        rz__warn("nvtx regions: out of memory: %zu regions not checked", n);
        return;
    }
    size_t k = 0;
    uint64_t at = 0;
    for (size_t i = from; i < to; i++) {
        if (!h->e[i].filled)
            continue;
        io[k] = (rz_band_io_t){.ctx = h->ctx, .dev = cover_start(h, i), .host = buf + at,
                               .bytes = (uint32_t)h->e[i].filled, .value = h->e[i].expected};
        which[k++] = i;
        at += h->e[i].filled;
    }
    rzcu_result r = rz__dev_read(io, n);
    size_t nbad = 0;
    for (k = 0; k < n; k++) {
        if (io[k].failed)
            continue;
        if (judge(h, which[k], io[k].host))
            io[nbad++] = (rz_band_io_t){.ctx = h->ctx, .dev = io[k].dev, .bytes = io[k].bytes, .value = io[k].value};
    }
    if (r != RZCUDA_SUCCESS)
        rz__warn("nvtx regions: reading the slack of %zu regions failed with %s", n, rz__cu_name(r));
    if (nbad && (r = rz__dev_write(io, nbad)) != RZCUDA_SUCCESS)
        rz__warn("nvtx regions: re-filling %zu regions failed with %s", nbad, rz__cu_name(r));
    free(io), free(buf), free(which);
}

/* Fill the covers of the listed entries anew (their byte: band fill when registered, else the freed fill). */
static void fill(heap_t *h, const size_t *idx, size_t n) {
    rz_band_io_t io[4];
    size_t k = 0;
    for (size_t j = 0; j < n && k < 4; j++) {
        entry_t *e = &h->e[idx[j]];
        if (!e->live)
            continue; /* unregistered: the quarantine's (hold), not filled here */
        e->expected = rz__options()->fill;
        e->filled = cover_len(h, idx[j]);
        if (e->filled)
            io[k++] = (rz_band_io_t){.ctx = h->ctx, .dev = cover_start(h, idx[j]), .bytes = (uint32_t)e->filled,
                                     .value = e->expected};
    }
    rzcu_result r = k ? rz__dev_write(io, k) : RZCUDA_SUCCESS;
    if (r != RZCUDA_SUCCESS) {
        rz__warn("nvtx regions: filling the slack of %zu regions failed with %s", k, rz__cu_name(r));
        for (size_t j = 0; j < n; j++)
            if (h->e[idx[j]].live)
                h->e[idx[j]].filled = 0; /* nothing known to check */
    }
}

/* Both locks taken; h still alive (else NULL). */
static heap_t *lock_heap(void *handle) {
    rz__registry_lock();
    pthread_mutex_lock(&g_mu);
    heap_t *h = handle;
    if (h && h >= g_heaps && h < g_heaps + RZ_NVTX_HEAPS && h->used && heap_alive(h))
        return h;
    return NULL;
}

static void unlock_all(void) {
    pthread_mutex_unlock(&g_mu);
    rz__registry_unlock();
}

/* The entry starting at ptr, in whichever heap holds it (g_mu held). */
static heap_t *find_entry(uint64_t ptr, size_t *at) {
    for (size_t j = 0; j < RZ_NVTX_HEAPS; j++) {
        heap_t *h = &g_heaps[j];
        if (!h->used || ptr < h->base || ptr - h->base >= h->size)
            continue;
        size_t lo = 0, hi = h->n;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (h->e[mid].start < ptr)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo < h->n && h->e[lo].start == ptr) {
            *at = lo;
            return h;
        }
    }
    return NULL;
}

void *rz__nvtx_heap_register(uint64_t base, uint64_t size) {
    if (size == 0)
        return NULL;
    rz__registry_lock();
    const rz_zone_node_t *z = rz__registry_find(base);
    uint64_t index = z ? z->index : 0, bytes = z ? z->user_bytes : 0;
    void *ctx = z ? z->ctx : NULL;
    rz__registry_unlock();
    if (!z)
        return NULL; /* not an allocation redzone made: not watched */
    /* A zone learns its context when its band is installed (lazy install): the driver says it now, so that
     * checks from a thread without a current context (the debugger's agent) name it. */
    if (!ctx && rz__dev_pointer_attribute(&ctx, RZCU_POINTER_ATTRIBUTE_CONTEXT, base) != RZCUDA_SUCCESS)
        ctx = rz__dev_current_ctx();
    pthread_mutex_lock(&g_mu);
    heap_t *h = NULL;
    for (size_t j = 0; j < RZ_NVTX_HEAPS && !h; j++)
        if (!g_heaps[j].used)
            h = &g_heaps[j];
    if (h)
        *h = (heap_t){.used = 1, .base = base, .size = size < bytes ? size : bytes, .zone_index = index, .ctx = ctx};
    int arm = h && !g_armed;
    g_armed |= arm;
    pthread_mutex_unlock(&g_mu);
    if (arm) {
        rz__bands_on_scan_begin(RZ_SCAN_BEGIN_NVTX_REGIONS, rz__nvtx_regions_check_locked);
        rz__quarantine_on_region(held_describe);
    }
    return h;
}

static void unregister_all(heap_t *h, int forget) {
    check_range(h, 0, h->n);
    if (forget) {
        reuse(h->base, h->size); /* the heap is gone: its held regions are no pool's */
        free(h->e);
        memset(h, 0, sizeof *h);
        return;
    }
    for (size_t i = 0; i < h->n; i++) {
        if (h->e[i].live) {
            h->e[i].live = 0;
            hold(h, i);
        }
    }
}

void rz__nvtx_heap_unregister(void *handle) {
    heap_t *h = lock_heap(handle);
    if (h)
        unregister_all(h, 1);
    unlock_all();
}

void rz__nvtx_heap_reset(void *handle) {
    heap_t *h = lock_heap(handle);
    if (h)
        unregister_all(h, 0);
    unlock_all();
}

static void overlap_warning(uint64_t ptr, uint64_t size) {
    if (g_warned_overlap++)
        return;
    rz__warn("nvtx regions: region 0x%llx+%llu lies outside its heap or over a registered region; ignored "
             "(said once)", (unsigned long long)ptr, (unsigned long long)size);
}

void rz__nvtx_region_register(void *handle, uint64_t ptr, uint64_t size) {
    heap_t *h = lock_heap(handle);
    if (!h) {
        unlock_all();
        return;
    }
    uint64_t end = ptr + size;
    if (ptr < h->base || end < ptr || end > h->base + h->size) {
        overlap_warning(ptr, size);
        unlock_all();
        return;
    }
    size_t k = 0;
    while (k < h->n && h->e[k].start < ptr)
        k++;
    size_t covered = k; /* entries [k, covered) start inside the new region: freed ones are taken over */
    while (covered < h->n && h->e[covered].start < (size ? end : ptr + 1))
        covered++;
    int bad = k > 0 && h->e[k - 1].live && h->e[k - 1].start + h->e[k - 1].size > ptr;
    for (size_t j = k; j < covered && !bad; j++)
        bad = h->e[j].live;
    if (bad) {
        overlap_warning(ptr, size);
        unlock_all();
        return;
    }
    if (h->n + 1 > h->cap) {
        uint64_t cap = h->cap ? 2 * h->cap : 16;
        entry_t *grown = realloc(h->e, cap * sizeof *grown);
        if (!grown) {
            rz__warn("nvtx regions: out of memory; region 0x%llx+%llu not checked", (unsigned long long)ptr,
                     (unsigned long long)size);
            unlock_all();
            return;
        }
        h->e = grown;
        h->cap = cap;
    }
    check_range(h, k > 0 ? k - 1 : 0, covered); /* the bytes changing hands, before they do */
    reuse(ptr, size); /* held regions under it leave the quarantine, checked */
    memmove(&h->e[k + 1], &h->e[covered], (h->n - covered) * sizeof *h->e);
    h->n = h->n + 1 - (covered - k);
    h->e[k] = (entry_t){.start = ptr, .size = size, .live = 1};
    size_t refill[2] = {k - 1, k};
    if (k > 0)
        fill(h, refill, 2);
    else
        fill(h, &refill[1], 1);
    unlock_all();
}

void rz__nvtx_region_resize(uint64_t ptr, uint64_t size) {
    rz__registry_lock();
    pthread_mutex_lock(&g_mu);
    size_t i;
    heap_t *h = find_entry(ptr, &i);
    if (h && heap_alive(h) && h->e[i].live) {
        uint64_t limit = i + 1 < h->n ? h->e[i + 1].start : h->base + h->size;
        if (size > limit - ptr) {
            overlap_warning(ptr, size);
        } else {
            check_range(h, i, i + 1);
            h->e[i].size = size;
            fill(h, &i, 1);
        }
    }
    unlock_all();
}

void rz__nvtx_region_unregister(uint64_t ptr) {
    rz__registry_lock();
    pthread_mutex_lock(&g_mu);
    size_t i;
    heap_t *h = find_entry(ptr, &i);
    if (h && heap_alive(h) && h->e[i].live) {
        check_range(h, i, i + 1);
        h->e[i].live = 0;
        hold(h, i);
    }
    unlock_all();
}

void rz__nvtx_region_name(uint64_t ptr, const char *name) {
    pthread_mutex_lock(&g_mu);
    size_t i;
    heap_t *h = find_entry(ptr, &i);
    if (h)
        snprintf(h->e[i].name, sizeof h->e[i].name, "%s", name ? name : "");
    pthread_mutex_unlock(&g_mu);
}

void rz__nvtx_regions_check_locked(void) {
    pthread_mutex_lock(&g_mu);
    for (size_t j = 0; j < RZ_NVTX_HEAPS; j++)
        if (g_heaps[j].used && heap_alive(&g_heaps[j]))
            check_range(&g_heaps[j], 0, g_heaps[j].n);
    pthread_mutex_unlock(&g_mu);
}
