/*
 * The quarantine (METRALE_REDZONE_QUARANTINE): a freed block is not given back to the driver at once. Its
 * whole range is filled with the free byte, in stream order (the program's stream for cuMemFreeAsync, else the
 * legacy stream, which follows every blocking stream's earlier work), an event recorded after the fill, and the
 * block queued first in, first out, bounded by bytes. Scans check the held blocks whose fill is done (the
 * scan-begin slot: no read of its own, no wait); a changed byte is reported as written after free. The oldest
 * block leaves, checked then released, when the bound is passed; an allocation that runs out of memory drains
 * it (alloc.c). A context that ends takes its held blocks with it: they are checked while it ends and forgotten
 * once it ended, without a driver call. The held blocks are exported (__redzone_quarantine, state.h) for the
 * debugger, live or from a core file.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "common.h"
#include "quarantine.h"
#include "quarantine_report.h"
#include "rz_annotate.h"
#include "band.h"
#include "band_io.h"
#include "alloc.h"
#include "capture.h"
#include "depot.h"
#include "device_ctx.h"
#include "driver_info.h"
#include "events.h"
#include "finding.h"
#include "format.h"
#include "fork.h"
#include "launch_ring.h"
#include "memory.h"
#include "options.h"
#include "registry.h"
#include "report.h"
#include "stats.h"
#include "sticky.h"
#include "stream_fills.h"
#include "stream_ops.h"
#include "symbolize.h"
#include "judge.h"
#include "thread_state.h"

RZ_EXPORT rz_quarantine_t __redzone_quarantine = {
    .magic = RZ_QUARANTINE_MAGIC,
    .version = RZ_QUARANTINE_VERSION,
    .size = sizeof(rz_quarantine_t),
    .entry_size = sizeof(rz_qentry_t),
};

#define Q (__redzone_quarantine)

/* The ring's lock; taken after the registry lock where both are held (scans). */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
/* One check at a time: they share the read buffer. Taken before g_lock, never while waiting for it. */
static pthread_mutex_t g_check_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic uint64_t g_held; /* Q.bytes, read without the lock */
static _Atomic uint64_t g_regions; /* held entries with RZ_QENTRY_REGION, changed under g_lock */

#define CHUNK ((size_t)1 << 20) /* bytes read per transfer */
static uint8_t *g_buf;          /* CHUNK bytes, under g_check_lock */

static void changing(void) { atomic_fetch_add_explicit(&Q.seq, 1, memory_order_release); }

uint64_t rz__quarantine_bytes(void) { return atomic_load_explicit(&g_held, memory_order_relaxed); }

void rz__quarantine_annotate(void) {
    RZ_ANNOTATE_ATOMIC(&g_held, sizeof g_held); /* helgrind: read without the lock */
    RZ_ANNOTATE_ATOMIC(&Q.seq, sizeof Q.seq);
    RZ_ANNOTATE_ATOMIC(&g_regions, sizeof g_regions); /* read without the lock by the free path */
}

uint8_t rz__quarantine_byte(void) { return rz__options()->free_fill; }

static void count_bytes(int64_t delta) {
    Q.bytes += (uint64_t)delta;
    if (Q.bytes > Q.peak_bytes)
        Q.peak_bytes = Q.bytes;
    atomic_store_explicit(&g_held, Q.bytes, memory_order_relaxed);
    rz__count(RZ_C_quarantine_bytes, delta);
    uint64_t peak = RZ_STATE.counters[RZ_C_peak_quarantine_bytes];
    if (Q.bytes > peak)
        rz__count(RZ_C_peak_quarantine_bytes, (int64_t)(Q.bytes - peak));
}

static rz_qentry_t *at(uint64_t i) { return &Q.ring[(Q.head + i) % Q.cap]; }

/* g_lock held: entry e leaves the ring (its bytes and, for a region, the region count). */
static void leaving(const rz_qentry_t *e) {
    count_bytes(-(int64_t)e->bytes);
    if (e->flags & RZ_QENTRY_REGION)
        atomic_fetch_sub_explicit(&g_regions, 1, memory_order_relaxed);
}

/* g_lock held: room for one more entry (the ring doubles, copied in order; the old one is unmapped). */
static int grow_locked(void) {
    if (Q.count < Q.cap)
        return 1;
    uint64_t cap = Q.cap ? Q.cap * 2 : 1024;
    rz_qentry_t *ring = mmap(NULL, cap * sizeof *ring, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (ring == MAP_FAILED)
        return 0;
    for (uint64_t i = 0; i < Q.count; i++)
        ring[i] = *at(i);
    rz_qentry_t *old = Q.ring;
    uint64_t old_cap = Q.cap;
    Q.ring = ring;
    Q.cap = cap;
    Q.head = 0;
    if (old)
        munmap(old, old_cap * sizeof *old);
    return 1;
}

/* Whether entry e's fill is done (asks its event once it is seen done no more). g_lock held. */
static int filled(rz_qentry_t *e) {
    if (!(e->flags & RZ_QENTRY_FILLING))
        return 1;
    rz_zone_node_t z = {.flags = RZ_ZONE_FILLING, .fill = e->fill};
    if (!rz__zone_filled(&z))
        return 0;
    e->flags &= (uint8_t)~RZ_QENTRY_FILLING;
    return 1;
}

/* SCAN=launch (quarantine_launch.c): the launch after which a held block was first seen changed, by creation
 * index, until the block's report takes it. A small ring under g_lock: a held block written by a launch is
 * reported at the next check, so few are noted at once; an old note the ring overwrote loses only the name. */
#define WRITERS 64
static rz_qwriter_t g_writers[WRITERS];
static unsigned g_nwriters;

static rz_qwriter_t *writer_find_locked(uint64_t index) {
    for (unsigned i = 0; i < WRITERS && i < g_nwriters; i++)
        if (g_writers[i].launch && g_writers[i].index == index)
            return &g_writers[i];
    return NULL;
}

void rz__quarantine_note_writer(uint64_t index, uint64_t launch, uint64_t stream, const char *name) {
    pthread_mutex_lock(&g_lock);
    if (writer_find_locked(index) == NULL) {
        rz_qwriter_t *w = &g_writers[g_nwriters++ % WRITERS];
        *w = (rz_qwriter_t){.index = index, .launch = launch, .stream = stream};
        snprintf(w->name, sizeof w->name, "%s", name);
    }
    pthread_mutex_unlock(&g_lock);
}

/* Takes the note of index into *out (its report names that launch); 0 when there is none. */
static int writer_take(uint64_t index, rz_qwriter_t *out) {
    pthread_mutex_lock(&g_lock);
    rz_qwriter_t *w = writer_find_locked(index);
    if (w) {
        *out = *w;
        w->launch = 0;
    }
    pthread_mutex_unlock(&g_lock);
    return w != NULL;
}

size_t rz__quarantine_held_of(void *ctx, int legacy, rz_qentry_t *out, size_t cap, uint64_t budget, int *all) {
    size_t n = 0;
    uint64_t bytes = 0;
    *all = 1;
    pthread_mutex_lock(&g_lock);
    for (uint64_t i = Q.count; i-- > 0;) { /* the newest first */
        rz_qentry_t *e = at(i);
        if (e->ctx != ctx || writer_find_locked(e->index))
            continue; /* another context's, or its writer is known already */
        /* A block whose fill is still queued is judged after a launch only where that launch follows the fill
         * in stream order: the legacy stream, for a block a plain free filled there. */
        int ordered = filled(e) || (legacy && !(e->flags & RZ_QENTRY_ORDERED));
        if (!ordered || n == cap || e->bytes > budget - bytes) {
            *all = 0;
            continue;
        }
        out[n++] = *e;
        bytes += e->bytes;
    }
    pthread_mutex_unlock(&g_lock);
    return n;
}

/* Check entry e (a copy) whose fill is done: read its range chunk by chunk, report a change once, fill it
 * again so it is not reported twice. g_check_lock held. Returns 1 when it was written. */
static int check_entry(rz_qentry_t *e) {
    if (g_buf == NULL) { /* mapped, not malloc'd: the fatal-signal scan may be the first check */
        void *p = mmap(NULL, CHUNK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            return 0;
        g_buf = p;
    }
    uint64_t first = UINT64_MAX, last = 0, changed = 0;
    uint8_t bad = 0;
    for (uint64_t off = 0; off < e->bytes; off += CHUNK) {
        size_t n = e->bytes - off < CHUNK ? (size_t)(e->bytes - off) : CHUNK;
        rz_band_io_t io = {.ctx = e->ctx, .dev = e->base + off, .host = g_buf, .bytes = (uint32_t)n,
                           .value = e->byte};
        if (rz__dev_read(&io, 1) != RZCUDA_SUCCESS)
            return 0; /* its context is failing or gone: nothing said here (the scan or the exit line says it) */
        if (g_buf[0] == e->byte && memcmp(g_buf, g_buf + 1, n - 1) == 0)
            continue;
        for (size_t i = 0; i < n; i++) {
            if (g_buf[i] == e->byte)
                continue;
            if (first == UINT64_MAX) {
                first = off + i;
                bad = g_buf[i];
            }
            last = off + i;
            changed++;
        }
    }
    if (changed == 0)
        return 0;
    rz_qwriter_t w;
    int named = writer_take(e->index, &w); /* SCAN=launch saw which launch wrote it */
    rz__quarantine_report(e, first, last, changed, bad, named ? &w : NULL);
    for (uint64_t off = first - first % CHUNK; off <= last; off += CHUNK) {
        size_t n = e->bytes - off < CHUNK ? (size_t)(e->bytes - off) : CHUNK;
        rz_band_io_t io = {.ctx = e->ctx, .dev = e->base + off, .bytes = (uint32_t)n, .value = e->byte};
        if (rz__dev_write(&io, 1) != RZCUDA_SUCCESS)
            break;
        rz__record_page_reset(n);
    }
    return 1;
}

/* Check, then give back, n entries that left the ring. No lock held. */
static void release(rz_qentry_t *out, size_t n) {
    pthread_mutex_lock(&g_check_lock);
    for (size_t i = 0; i < n; i++)
        check_entry(&out[i]);
    pthread_mutex_unlock(&g_check_lock);
    for (size_t i = 0; i < n; i++) {
        if (out[i].release) {
            out[i].release(out[i].base, out[i].bytes, out[i].arg);
            continue;
        }
        rzcu_result r = rz__dev_mem_free(out[i].base);
        if (r != RZCUDA_SUCCESS && !rz__sticky_note(r))
            rz__warn("alloc#%llu: freeing it as it left the quarantine failed with %s",
                     (unsigned long long)out[i].index, rz__cu_name(r));
    }
}

/* g_lock held: take up to cap entries off the front whose fill is done, while more than `keep` bytes are held
 * (keep 0 with all: every done one, wherever it is). Returns how many went to out. */
static size_t take_locked(rz_qentry_t *out, size_t cap, uint64_t keep, int all) {
    size_t n = 0;
    changing();
    if (!all) {
        while (n < cap && Q.count && Q.bytes > keep && filled(at(0))) {
            out[n++] = *at(0);
            leaving(at(0));
            Q.head = (Q.head + 1) % Q.cap;
            Q.count--;
        }
    } else {
        uint64_t kept = 0;
        for (uint64_t i = 0; i < Q.count; i++) {
            rz_qentry_t *e = at(i);
            if (n < cap && filled(e)) {
                out[n++] = *e;
                leaving(e);
            } else {
                *at(kept++) = *e;
            }
        }
        Q.count = kept;
    }
    changing();
    return n;
}

static void scan_slot(void) { rz__quarantine_scan_locked(); }

static void ctx_ending(void *ctx);
static void ctx_ended(void *ctx);
static void fork_child(void);

static pthread_once_t g_arm_once = PTHREAD_ONCE_INIT;

static void arm(void) {
    rz__bands_on_scan_begin(RZ_SCAN_BEGIN_QUARANTINE, scan_slot);
    rz__event_subscribe(RZ_EVENT_CONTEXT_ENDING, ctx_ending);
    rz__event_subscribe(RZ_EVENT_CONTEXT_ENDED, ctx_ended);
    rz__fork_register(NULL, NULL, fork_child);
    Q.byte = rz__quarantine_byte();
    Q.bound = rz__options()->quarantine;
}

int rz__quarantine_hold(const rz_qhold_t *h, int ordered, rzcu_stream s) {
    const rz_options_t *o = rz__options();
    if (o->quarantine == 0 || h->bytes == 0 || h->bytes > o->quarantine || rz__sticky() != RZCUDA_SUCCESS)
        return 0;
    /* Nothing is queued where it would be captured or break a capture: the free goes to the driver then. */
    if (ordered ? rz__stream_capturing(s) : rz__capture_in_progress())
        return 0;
    void *cur = rz__dev_current_ctx(), *ctx = h->ctx;
    if (ctx == NULL && rz__dev_pointer_attribute(&ctx, RZCU_POINTER_ATTRIBUTE_CONTEXT, h->base) != RZCUDA_SUCCESS)
        return 0;
    if (cur == NULL || ctx != cur)
        return 0; /* the fill and its event go to the current context's stream */
    pthread_once(&g_arm_once, arm);
    uint8_t byte = rz__quarantine_byte();
    rzcu_stream fs = ordered ? s : NULL;
    uint16_t fill = 0;
    if (rz__dev_fill_async(h->base, byte, h->bytes, fs) != RZCUDA_SUCCESS)
        return 0;
    if (rz__fill_event(ctx, fs, &fill) != RZCUDA_SUCCESS)
        return 0; /* the fill is queued before the free the caller makes now, in the same order */
    rz_qentry_t e = {.base = h->base, .bytes = h->bytes, .ptr = h->ptr, .user_bytes = h->user_bytes,
                     .index = h->index, .ctx = ctx, .launch_seq = rz__launch_seq(),
                     .alloc_stack = h->alloc_stack, .free_stack = h->free_stack, .fill = fill, .byte = byte,
                     .flags = (uint8_t)(RZ_QENTRY_FILLING | (h->region ? RZ_QENTRY_REGION : 0) |
                                        (ordered ? RZ_QENTRY_ORDERED : 0)),
                     .release = h->release, .arg = h->arg};
    enum { OUT = 16 };
    rz_qentry_t out[OUT];
    size_t n = 0;
    pthread_mutex_lock(&g_lock);
    int room = grow_locked();
    if (room) {
        n = take_locked(out, OUT, o->quarantine - e.bytes, 0); /* room first: the bound is never passed */
        changing();
        *at(Q.count++) = e;
        count_bytes((int64_t)e.bytes);
        if (h->region)
            atomic_fetch_add_explicit(&g_regions, 1, memory_order_relaxed);
        changing();
    }
    pthread_mutex_unlock(&g_lock);
    if (!room)
        return 0;
    if (n)
        release(out, n);
    return 1;
}

int rz__quarantine_find(rz_devptr_t p, rz_qentry_t *out) {
    if (RZ_LIKELY(rz__quarantine_bytes() == 0))
        return 0;
    int found = 0;
    pthread_mutex_lock(&g_lock);
    for (uint64_t i = Q.count; i-- > 0 && !found;) { /* the newest first: the latest free of an address */
        const rz_qentry_t *e = at(i);
        if (!(e->flags & RZ_QENTRY_REGION) && p >= e->base && p - e->base < e->bytes) {
            *out = *e;
            found = 1;
        }
    }
    pthread_mutex_unlock(&g_lock);
    return found;
}

/* Take every done entry (of ctx only, when ctx is not NULL, or all of them) and release them, in batches. */
static int drain(void) {
    int any = 0;
    for (;;) {
        enum { OUT = 64 };
        rz_qentry_t out[OUT];
        pthread_mutex_lock(&g_lock);
        size_t n = Q.count ? take_locked(out, OUT, 0, 1) : 0;
        pthread_mutex_unlock(&g_lock);
        if (n == 0)
            return any;
        release(out, n);
        any = 1;
    }
}

/* Wait for the contexts whose held blocks' fills are still queued (at exit, or out of memory). */
static void settle_filling(void) {
    enum { MAX_CTX = 64 };
    void *ctxs[MAX_CTX];
    size_t n = 0;
    pthread_mutex_lock(&g_lock);
    for (uint64_t i = 0; i < Q.count && n < MAX_CTX; i++) {
        rz_qentry_t *e = at(i);
        if (filled(e))
            continue;
        size_t k = 0;
        while (k < n && ctxs[k] != e->ctx)
            k++;
        if (k == n)
            ctxs[n++] = e->ctx;
    }
    pthread_mutex_unlock(&g_lock);
    for (size_t k = 0; k < n; k++)
        rz__dev_settle(ctxs[k]); /* the fills (and the program's work before them) complete */
}

uint64_t rz__quarantine_held_for(rz_qrelease_fn *fn, void *arg) {
    if (rz__quarantine_bytes() == 0)
        return 0;
    uint64_t bytes = 0;
    pthread_mutex_lock(&g_lock);
    for (uint64_t i = 0; i < Q.count; i++)
        if (at(i)->release == fn && at(i)->arg == arg)
            bytes += (at(i)->bytes + 255) / 256 * 256; /* as a pool counts it: whole 256-byte units */
    pthread_mutex_unlock(&g_lock);
    return bytes;
}

/* g_lock held: take up to cap entries whose release is (fn, arg) and whose fill is done. */
static size_t take_for_locked(rz_qentry_t *out, size_t cap, rz_qrelease_fn *fn, void *arg, int *waiting) {
    size_t n = 0;
    uint64_t kept = 0;
    changing();
    for (uint64_t i = 0; i < Q.count; i++) {
        rz_qentry_t *e = at(i);
        int mine = e->release == fn && e->arg == arg;
        if (mine && n < cap && filled(e)) {
            out[n++] = *e;
            count_bytes(-(int64_t)e->bytes);
        } else {
            *waiting |= mine;
            *at(kept++) = *e;
        }
    }
    Q.count = kept;
    changing();
    return n;
}

void rz__quarantine_drain_for(rz_qrelease_fn *fn, void *arg) {
    for (int settled = 0; rz__quarantine_bytes();) {
        enum { OUT = 64 };
        rz_qentry_t out[OUT];
        int waiting = 0;
        pthread_mutex_lock(&g_lock);
        size_t n = take_for_locked(out, OUT, fn, arg, &waiting);
        pthread_mutex_unlock(&g_lock);
        if (n) {
            release(out, n);
            continue;
        }
        if (!waiting || settled || rz__capture_in_progress())
            return;
        settle_filling(); /* their fills complete: a wait the driver's trim or destroy of the pool makes too */
        settled = 1;
    }
}

int rz__quarantine_drain(void) {
    if (rz__quarantine_bytes() == 0)
        return 0;
    int any = drain();
    if (rz__quarantine_bytes() == 0 || rz__capture_in_progress())
        return any;
    settle_filling(); /* out of memory: a wait the driver's own free of these blocks would have made */
    return drain() || any;
}

/* Check the done entries (of ctx, or every one) in place. The caller holds the registry lock or none. With
 * `try`, a lock another thread holds for more than 2 s skips the check (a scan from the fatal-signal handler
 * must not wait for good for a thread that may be the one that crashed holding it). */
static void check_held_with(void *ctx, int try) {
    if (try) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 2;
        if (pthread_mutex_timedlock(&g_check_lock, &until) != 0)
            return;
        if (pthread_mutex_timedlock(&g_lock, &until) != 0) {
            pthread_mutex_unlock(&g_check_lock);
            return;
        }
    } else {
        pthread_mutex_lock(&g_check_lock);
        pthread_mutex_lock(&g_lock);
    }
    for (uint64_t i = 0; i < Q.count; i++) {
        rz_qentry_t *e = at(i);
        if ((ctx && e->ctx != ctx) || !filled(e))
            continue;
        rz_qentry_t copy = *e;
        /* The ring may move while the lock is let go for the read (a hold on another thread grows it). */
        pthread_mutex_unlock(&g_lock);
        int bad = check_entry(&copy);
        pthread_mutex_lock(&g_lock);
        if (bad && i < Q.count && at(i)->base == copy.base)
            at(i)->flags |= RZ_QENTRY_VIOLATED;
    }
    pthread_mutex_unlock(&g_lock);
    pthread_mutex_unlock(&g_check_lock);
}

static void check_held(void *ctx) { check_held_with(ctx, 0); }

static _Atomic int g_checked_at_exit; /* the exit handler checked them: its scan need not read them again */

void rz__quarantine_scan_locked(void) {
    if (rz__quarantine_bytes() == 0 || atomic_load_explicit(&g_checked_at_exit, memory_order_relaxed))
        return;
    /* Another thread's hold or check is short (a check reads at most the bound): waited for, boundedly. */
    check_held_with(NULL, 1);
}

void rz__quarantine_at_exit(int check) {
    if (rz__quarantine_bytes() == 0 || rz__dev_deinitialized() || rz__sticky() != RZCUDA_SUCCESS)
        return;
    settle_filling();
    if (check) {
        check_held(NULL);
        atomic_store_explicit(&g_checked_at_exit, 1, memory_order_relaxed);
    }
}

/* Its memory is still there: what it holds is checked (the band engine waited for its work before). */
static void ctx_ending(void *ctx) {
    if (ctx && rz__quarantine_bytes() && rz__options()->scan != 0) /* SCAN=none: nothing is checked */
        check_held(ctx);
}

/* It ended: its held blocks went with it. Forgotten without a driver call. */
static void ctx_ended(void *ctx) {
    if (ctx == NULL || rz__quarantine_bytes() == 0)
        return;
    pthread_mutex_lock(&g_lock);
    changing();
    uint64_t kept = 0;
    for (uint64_t i = 0; i < Q.count; i++) {
        rz_qentry_t *e = at(i);
        if (e->ctx == ctx) {
            leaving(e);
            if ((e->flags & RZ_QENTRY_REGION) && e->release)
                e->release(e->base, 0, e->arg); /* a region's release takes no lock and calls no driver */
        } else
            *at(kept++) = *e;
    }
    Q.count = kept;
    changing();
    pthread_mutex_unlock(&g_lock);
}

/* g_lock held: take out the entries with release `owner` (any region, when NULL) that overlap [base, base +
 * bytes), up to cap. */
static size_t take_overlapping_locked(uint64_t base, uint64_t bytes, rz_qrelease_fn *owner, rz_qentry_t *out,
                                      size_t cap) {
    size_t n = 0;
    uint64_t kept = 0;
    changing();
    for (uint64_t i = 0; i < Q.count; i++) {
        rz_qentry_t *e = at(i);
        int mine = owner ? e->release == owner : (e->flags & RZ_QENTRY_REGION) != 0;
        if (n < cap && mine && e->base < base + bytes && base < e->base + e->bytes) {
            out[n++] = *e;
            leaving(e);
        } else {
            *at(kept++) = *e;
        }
    }
    Q.count = kept;
    changing();
    return n;
}

static size_t withdraw(uint64_t base, uint64_t bytes, rz_qrelease_fn *owner) {
    size_t total = 0;
    for (;;) {
        enum { OUT = 16 };
        rz_qentry_t out[OUT];
        pthread_mutex_lock(&g_lock);
        size_t n = Q.count ? take_overlapping_locked(base, bytes, owner, out, OUT) : 0;
        for (size_t i = 0; i < n; i++)
            (void)filled(&out[i]); /* its event asked once more */
        pthread_mutex_unlock(&g_lock);
        if (n == 0)
            return total;
        for (size_t i = 0; i < n; i++) {
            /* Its fill is still queued: it must land before the range is used again (a host wait, only when
             * the range is reused that soon), and then it is checked as a block leaving is. */
            if ((out[i].flags & RZ_QENTRY_FILLING) && rz__dev_settle(out[i].ctx) != RZCUDA_SUCCESS)
                out[i].bytes = 0; /* its context is failing: nothing read */
        }
        release(out, n);
        total += n;
    }
}

size_t rz__quarantine_withdraw(uint64_t base, uint64_t bytes, rz_qrelease_fn *owner) {
    if (owner == NULL || rz__quarantine_bytes() == 0 || bytes == 0)
        return 0;
    return withdraw(base, bytes, owner);
}

/* The newest frees, held or not, for a later double free's report (bad_free.c): a ring written without a
 * lock (every free passes here), each slot behind its own sequence word (odd while written). */
#define FREED_MAX 4096
static struct freed {
    _Atomic uint64_t seq;
    _Atomic uint64_t ptr, user_bytes, index;
    _Atomic uint32_t alloc_stack, free_stack;
} g_freed[FREED_MAX];
static _Atomic uint64_t g_nfreed;
static pthread_mutex_t g_freed_lock = PTHREAD_MUTEX_INITIALIZER; /* the exports list below */

#define RLX memory_order_relaxed

static void note_freed(const rz_qhold_t *h) {
    uint64_t n = atomic_fetch_add_explicit(&g_nfreed, 1, RLX);
    struct freed *f = &g_freed[n % FREED_MAX];
    atomic_store_explicit(&f->seq, 2 * n + 1, RLX);
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(&f->ptr, h->ptr, RLX);
    atomic_store_explicit(&f->user_bytes, h->user_bytes, RLX);
    atomic_store_explicit(&f->index, h->index, RLX);
    atomic_store_explicit(&f->alloc_stack, h->alloc_stack, RLX);
    atomic_store_explicit(&f->free_stack, h->free_stack, RLX);
    atomic_store_explicit(&f->seq, 2 * n + 2, memory_order_release);
}

int rz__quarantine_freed(rz_devptr_t p, rz_qentry_t *out) {
    uint64_t total = atomic_load_explicit(&g_nfreed, memory_order_acquire);
    uint64_t n = total < FREED_MAX ? total : FREED_MAX;
    for (uint64_t k = 0; k < n; k++) {
        struct freed *f = &g_freed[(total - 1 - k) % FREED_MAX];
        uint64_t seq = atomic_load_explicit(&f->seq, memory_order_acquire);
        if (seq & 1 || atomic_load_explicit(&f->ptr, RLX) != p)
            continue;
        rz_qentry_t e = {.ptr = p, .user_bytes = atomic_load_explicit(&f->user_bytes, RLX),
                         .index = atomic_load_explicit(&f->index, RLX),
                         .alloc_stack = atomic_load_explicit(&f->alloc_stack, RLX),
                         .free_stack = atomic_load_explicit(&f->free_stack, RLX)};
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&f->seq, RLX) != seq)
            continue; /* rewritten meanwhile: another, newer free */
        *out = e;
        return 1;
    }
    return 0;
}

/* Pointers handed to cuIpcGetMemHandle (under g_freed_lock): freed at once, so a handle stops opening. */
static uint64_t *g_exports;
static size_t g_nexports, g_cap_exports;

void rz__quarantine_exported(uint64_t ptr) {
    pthread_mutex_lock(&g_freed_lock);
    int known = 0;
    for (size_t i = 0; i < g_nexports && !known; i++)
        known = g_exports[i] == ptr;
    if (!known && g_nexports == g_cap_exports) {
        size_t cap = g_cap_exports ? g_cap_exports * 2 : 16;
        uint64_t *p = realloc(g_exports, cap * sizeof *p);
        if (p) {
            g_exports = p;
            g_cap_exports = cap;
        }
    }
    if (!known && g_nexports < g_cap_exports)
        g_exports[g_nexports++] = ptr;
    pthread_mutex_unlock(&g_freed_lock);
}

/* Whether ptr was exported; forgotten (it is being freed). */
static int exported_forget(uint64_t ptr) {
    int found = 0;
    pthread_mutex_lock(&g_freed_lock);
    for (size_t i = 0; i < g_nexports && !found; i++) {
        if (g_exports[i] == ptr) {
            g_exports[i] = g_exports[--g_nexports];
            found = 1;
        }
    }
    pthread_mutex_unlock(&g_freed_lock);
    return found;
}

int rz__quarantine_take(const rz_zone_node_t *zone, const rz_free_req_t *req) {
    const rz_options_t *o = rz__options();
    uint64_t kept[RZ_STACK_MAX];
    uint32_t nkept = o->stacks ? rz__registry_removed_stack(zone->index, kept, RZ_STACK_MAX) : 0;
    rz_qhold_t h = {.base = zone->ptr - rz__zone_front(zone), .bytes = rz__zone_mapped_bytes(zone), .ptr = zone->ptr,
                    .user_bytes = zone->user_bytes, .index = zone->index, .ctx = zone->ctx,
                    .alloc_stack = nkept ? rz__depot_put(kept, nkept) : 0};
    if (o->stacks) {
        void *frames[RZ_STACK_MAX];
        int n = rz__capture_stack(frames, (int)o->stacks);
        for (int i = 0; i < n; i++)
            kept[i] = (uint64_t)(uintptr_t)frames[i];
        h.free_stack = n > 0 ? rz__depot_put(kept, (uint32_t)n) : 0;
    }
    note_freed(&h);
    if (RZ_UNLIKELY(atomic_load_explicit(&g_regions, memory_order_relaxed)) && rz__quarantine_bytes())
        withdraw(h.base, h.bytes, NULL); /* a pool freed: its regions are no pool's any more */
    void *pool = NULL; /* the note of a pool allocation goes at its free, held or not */
    int pooled = (zone->reserved0 & RZ_ZONE_OWN_POOL) && rz__quarantine_pool_take(zone->ptr, &pool);
    if (o->quarantine == 0 || (zone->flags & (RZ_ZONE_GUARD | RZ_ZONE_GRAPH)) || exported_forget(zone->ptr))
        return 0; /* an exported block: its handle must stop opening at the free, as without redzone */
    if (zone->reserved0 & RZ_ZONE_OWN_POOL) {
        /* The program's own pool: held with its pool as the release argument, so that the pool calls answer
         * as without redzone (quarantine_pool.c); not held when its pool is not known. */
        if (!pooled)
            return 0;
        h.release = rz__quarantine_pool_release;
        h.arg = pool;
    }
    return rz__quarantine_hold(&h, req->async, rz__stream_of(req->stream, req->per_thread));
}

/* A forked child has no context of its parent's: it holds nothing (the locks are reset, fork.c's rule). */
static void fork_child(void) {
    pthread_mutex_init(&g_lock, NULL);
    pthread_mutex_init(&g_freed_lock, NULL);
    pthread_mutex_init(&g_check_lock, NULL);
    if (Q.bytes)
        count_bytes(-(int64_t)Q.bytes);
    atomic_store_explicit(&g_regions, 0, memory_order_relaxed);
    Q.count = 0;
    Q.head = 0;
}
