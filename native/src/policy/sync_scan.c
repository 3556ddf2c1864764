/*
 * METRALE_REDZONE_SCAN=sync: which contexts a synchronisation judges, and when. The hooks note every copy,
 * memset and launch the driver accepted, with the stream it went to and that stream's context. A
 * synchronisation then scans only the contexts that received work since their last scan, and judges a
 * context only once none of that work may still be running: a band read while a kernel still writes it shows
 * part of an overrun, and the rest would be reported again by a later sync (issue 18 item 8). Whether work is
 * complete is known without waiting: work queued before a synchronisation began on the stream (or the
 * context) it waited for is complete when it returns, and any other stream is asked with cuStreamQuery. A
 * context with a stream still busy is left for a later sync (the next one that finds it idle, a
 * cuCtxSynchronize of it), and the free-time and exit checks judge its zones as always. An idle sync (no work
 * noted since every context was last judged) costs two atomic loads and no driver call.
 *
 * What cannot be asked is treated as busy: another thread's per-thread default stream (only that thread can
 * name it; its own sync of it, or a cuCtxSynchronize, marks it complete), a stream the program destroyed
 * with work still running (the handle is gone), and a stream being captured into a graph (querying it would
 * invalidate the capture; its captured work does not run anyway).
 *
 * Concurrency: one mutex (never held across a driver call) guards the tables; the sequence number of the last
 * note and the "all judged up to" mark are atomics read without it by the idle test. A sync scan takes the
 * registry lock and, under it, drops the contexts a scan begun after their work completed has judged
 * meanwhile, so concurrent syncs after the same work scan once: the others wait for the registry lock and
 * then skip. Lock order: registry lock, then this one.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "sync_scan.h"
#include "band.h"
#include "capture_mode.h"
#include "device_ctx.h"
#include "fork.h"
#include "options.h"
#include "report.h"
#include "rz_annotate.h"
#include "stream_ops.h"
#include "work_epoch.h"

/* How a stream was named: a stream handle, the legacy default stream, a thread's per-thread default stream;
 * GONE: a destroyed stream whose work was still running (it can only be waited for with its context). */
enum { ON_STREAM, ON_LEGACY, ON_PER_THREAD, ON_GONE };

struct work_stream {
    void *ctx;
    rzcu_stream handle; /* ON_STREAM */
    uint64_t thread;    /* ON_PER_THREAD: the thread whose stream it is (t_thread) */
    uint64_t last;      /* sequence number of the latest work noted on it */
    uint64_t done;      /* its work up to this number is known to be complete */
    int kind;
};

struct work_ctx {
    void *ctx;       /* NULL: work whose context the driver did not name (judged with every context) */
    uint64_t last;   /* the latest work noted in it */
    uint64_t judged; /* its work up to this number was complete when a scan of it began */
};

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic uint64_t g_seq;   /* work noted so far (changed under g_lock) */
static _Atomic uint64_t g_clean; /* every note up to this number is judged (changed under g_lock) */
static struct work_stream *g_ws;
static size_t g_nws, g_ws_cap;
static struct work_ctx *g_wc;
static size_t g_nwc, g_wc_cap;
static _Atomic int g_untracked; /* out of memory once: every sync judges every context, as before this file */

static _Atomic uint64_t g_threads;
static RZ_TLS uint64_t t_thread; /* 0 until this thread names its per-thread stream */
static RZ_TLS size_t t_hint;     /* where this thread's last note found its stream */

static uint64_t this_thread(void) {
    if (t_thread == 0)
        t_thread = atomic_fetch_add_explicit(&g_threads, 1, memory_order_relaxed) + 1;
    return t_thread;
}

static void after_fork_child(void) {
    pthread_mutex_init(&g_lock, NULL); /* another thread of the parent may have held it at the fork */
    g_nws = g_nwc = 0;
    atomic_store(&g_clean, atomic_load(&g_seq)); /* the parent's streams are not the child's */
}

static void arm_fork(void) { rz__fork_register(NULL, NULL, after_fork_child); }

void rz__sync_annotate(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, arm_fork);
    RZ_ANNOTATE_ATOMIC(&g_seq, sizeof g_seq); /* helgrind: read without the lock by the idle test */
    RZ_ANNOTATE_ATOMIC(&g_clean, sizeof g_clean);
    RZ_ANNOTATE_ATOMIC(&g_untracked, sizeof g_untracked);
    rz__work_annotate();
}

static int kind_of(rzcu_stream s, int per_thread) {
    if (s == NULL)
        return per_thread ? ON_PER_THREAD : ON_LEGACY;
    if (s == RZCU_STREAM_LEGACY)
        return ON_LEGACY;
    return s == RZCU_STREAM_PER_THREAD ? ON_PER_THREAD : ON_STREAM;
}

/* ---- the tables (g_lock held) ------------------------------------------------------------------------ */
static int same_stream(const struct work_stream *w, int kind, rzcu_stream s, void *ctx, uint64_t thread) {
    if (w->kind != kind)
        return 0;
    if (kind == ON_STREAM)
        return w->handle == s; /* a live handle names one stream of one context */
    return w->ctx == ctx && (kind != ON_PER_THREAD || w->thread == thread);
}

static struct work_stream *find_stream(int kind, rzcu_stream s, void *ctx, uint64_t thread) {
    if (t_hint < g_nws && same_stream(&g_ws[t_hint], kind, s, ctx, thread))
        return &g_ws[t_hint];
    for (size_t i = 0; i < g_nws; i++) {
        if (same_stream(&g_ws[i], kind, s, ctx, thread)) {
            t_hint = i;
            return &g_ws[i];
        }
    }
    return NULL;
}

static struct work_stream *add_stream(int kind, rzcu_stream s, void *ctx, uint64_t thread) {
    if (g_nws == g_ws_cap) {
        size_t cap = g_ws_cap ? g_ws_cap * 2 : 16;
        struct work_stream *ws = realloc(g_ws, cap * sizeof *ws);
        if (ws == NULL)
            return NULL;
        g_ws = ws;
        g_ws_cap = cap;
    }
    t_hint = g_nws;
    g_ws[g_nws] = (struct work_stream){.ctx = ctx, .handle = kind == ON_STREAM ? s : NULL, .thread = thread, .kind = kind};
    return &g_ws[g_nws++];
}

static struct work_ctx *find_ctx(void *ctx, int add) {
    for (size_t i = 0; i < g_nwc; i++)
        if (g_wc[i].ctx == ctx)
            return &g_wc[i];
    if (!add)
        return NULL;
    if (g_nwc == g_wc_cap) {
        size_t cap = g_wc_cap ? g_wc_cap * 2 : 8;
        struct work_ctx *wc = realloc(g_wc, cap * sizeof *wc);
        if (wc == NULL)
            return NULL;
        g_wc = wc;
        g_wc_cap = cap;
    }
    g_wc[g_nwc] = (struct work_ctx){.ctx = ctx};
    return &g_wc[g_nwc++];
}

static void drop_stream(size_t i) { g_ws[i] = g_ws[--g_nws]; }

/* A record that only says "complete" can go, except a named stream's or the legacy stream's (the next note
 * on it would have to ask the driver for its context again). */
static void drop_finished(void) {
    for (size_t i = g_nws; i-- > 0;)
        if (g_ws[i].last <= g_ws[i].done && (g_ws[i].kind == ON_PER_THREAD || g_ws[i].kind == ON_GONE))
            drop_stream(i);
}

/* Every context judged up to its last work: the idle test passes until the next note. */
static void update_clean(void) {
    for (size_t i = 0; i < g_nwc; i++)
        if (g_wc[i].last > g_wc[i].judged)
            return;
    atomic_store_explicit(&g_clean, atomic_load_explicit(&g_seq, memory_order_relaxed), memory_order_release);
}

static void untracked(void) {
    if (!g_untracked)
        rz__warn("no host memory to track device work by stream; METRALE_REDZONE_SCAN=sync now judges every "
                 "context at every synchronisation after device work");
    g_untracked = 1;
}

/* ---- notes ------------------------------------------------------------------------------------------- */
void rz__note_device_work(rzcu_stream s, int per_thread) {
    rz__work_note(s, per_thread); /* what frees and the exit scan skip reads by */
    if (!(rz__options()->scan & RZ_SCAN_SYNC))
        return; /* only sync scans use the notes */
    int kind = kind_of(s, per_thread);
    uint64_t thread = kind == ON_PER_THREAD ? this_thread() : 0;
    /* The default streams are the current context's: ask for it (a thread-local read in the driver). A named
     * stream's context is asked once, when the stream is first seen. */
    void *ctx = kind == ON_STREAM ? NULL : rz__dev_current_ctx();
    pthread_mutex_lock(&g_lock);
    struct work_stream *w = find_stream(kind, s, ctx, thread);
    if (w == NULL && kind == ON_STREAM) {
        pthread_mutex_unlock(&g_lock); /* never a driver call under it */
        ctx = rz__dev_current_ctx();
        pthread_mutex_lock(&g_lock);
        w = find_stream(kind, s, ctx, thread);
    }
    if (w == NULL)
        w = add_stream(kind, s, ctx, thread);
    uint64_t seq = atomic_load_explicit(&g_seq, memory_order_relaxed) + 1;
    atomic_store_explicit(&g_seq, seq, memory_order_release);
    struct work_ctx *c = w ? find_ctx(w->ctx, 1) : NULL;
    if (w && c) {
        w->last = seq;
        c->last = seq;
    } else {
        untracked();
    }
    pthread_mutex_unlock(&g_lock);
}

uint64_t rz__sync_ticket(void) { return atomic_load_explicit(&g_seq, memory_order_acquire); }

/* cuStreamDestroy: the handle may name another stream afterwards. Work still running on it can no longer be
 * asked about: it stays, as GONE, until its context is synchronised. */
void rz__sync_stream_destroying(rzcu_stream s) {
    if (kind_of(s, 0) != ON_STREAM)
        return;
    pthread_mutex_lock(&g_lock);
    struct work_stream *w = find_stream(ON_STREAM, s, NULL, 0);
    uint64_t last = w ? w->last : 0;
    int busy = w && w->last > w->done;
    pthread_mutex_unlock(&g_lock);
    if (w == NULL)
        return;
    rzcu_capture_status capturing = 1;
    rzcu_capture_mode saved = rz__dev_quiet_begin(); /* no capture begins between the two questions */
    int idle = !busy || (rz__dev_has_stream_query() && rz__dev_has_stream_is_capturing() &&
                         rz__dev_stream_is_capturing(s, &capturing) == RZCUDA_SUCCESS && capturing == 0 &&
                         rz__dev_stream_query(s) == RZCUDA_SUCCESS);
    rz__dev_quiet_end(saved);
    pthread_mutex_lock(&g_lock);
    w = find_stream(ON_STREAM, s, NULL, 0);
    if (w) {
        if (idle && w->done < last)
            w->done = last;
        if (w->last <= w->done) {
            drop_stream((size_t)(w - g_ws));
        } else {
            w->kind = ON_GONE; /* the handle is the program's again */
            w->handle = NULL;
        }
    }
    pthread_mutex_unlock(&g_lock);
}

void rz__sync_context_ended(void *ctx) {
    pthread_mutex_lock(&g_lock);
    for (size_t i = g_nws; i-- > 0;)
        if (g_ws[i].ctx == ctx)
            drop_stream(i);
    struct work_ctx *c = find_ctx(ctx, 0);
    if (c)
        *c = g_wc[--g_nwc];
    update_clean();
    pthread_mutex_unlock(&g_lock);
}

/* ---- synchronisations -------------------------------------------------------------------------------- */
/* Whether stream w's work is complete, asked without waiting: 0 when it may still run or cannot be asked. */
static int stream_idle(const struct work_stream *w) {
    if (w->kind == ON_GONE || (w->kind == ON_PER_THREAD && w->thread != this_thread()) || !rz__dev_has_stream_query())
        return 0;
    rzcu_stream h = w->kind == ON_STREAM ? w->handle : w->kind == ON_LEGACY ? RZCU_STREAM_LEGACY : RZCU_STREAM_PER_THREAD;
    int pushed = 0;
    if (w->kind != ON_STREAM && rz__dev_enter(w->ctx, &pushed) != RZCUDA_SUCCESS)
        return 0; /* the default streams are named through the current context */
    /* Querying a stream being captured would invalidate the capture; an error (e.g. the legacy stream while
     * another stream is captured) is an answer of "do not touch". */
    rzcu_capture_status capturing = 0;
    rzcu_capture_mode saved = rz__dev_quiet_begin(); /* no capture begins between the two questions */
    int idle = (!rz__dev_has_stream_is_capturing() ||
                (rz__dev_stream_is_capturing(h, &capturing) == RZCUDA_SUCCESS && capturing == 0)) &&
               rz__dev_stream_query(h) == RZCUDA_SUCCESS;
    rz__dev_quiet_end(saved);
    rz__dev_leave(pushed);
    return idle;
}

/* Queries made by one sync: few (streams with work still unjudged); beyond this, the rest count as busy. */
#define MAX_QUERIES 64
/* Contexts one sync scan judges at most; the others wait for the next sync. */
#define MAX_SCAN_CTX 256

struct pick {
    void *ctx[MAX_SCAN_CTX];
    uint64_t target[MAX_SCAN_CTX]; /* judged up to this when the scan succeeds */
    size_t n;
};

/* Registry lock held, before any band is read: drop the contexts a scan that began after their work had
 * completed judged meanwhile (a concurrent sync's), so the same work is scanned once. */
static size_t pick_still_unjudged(void *arg, void **ctxs, size_t n) {
    struct pick *p = arg;
    size_t k = 0;
    pthread_mutex_lock(&g_lock);
    for (size_t i = 0; i < n; i++) {
        struct work_ctx *c = find_ctx(p->ctx[i], 0);
        if (c == NULL || c->judged >= p->target[i])
            continue; /* judged meanwhile, or the context ended */
        p->ctx[k] = p->ctx[i];
        p->target[k] = p->target[i];
        ctxs[k++] = p->ctx[i];
    }
    pthread_mutex_unlock(&g_lock);
    p->n = k;
    return k;
}

/* Registry lock held, after the scan: a successful one judged its contexts up to their targets. */
static void mark_judged(void *arg, int rc) {
    struct pick *p = arg;
    pthread_mutex_lock(&g_lock);
    for (size_t i = 0; i < p->n && rc == RZ_OK; i++) {
        for (size_t j = 0; j < g_nwc; j++) {
            /* NULL: every context was scanned, and each was ready up to the target (the sequence number then) */
            struct work_ctx *c = &g_wc[j];
            if ((p->ctx[i] == NULL || c->ctx == p->ctx[i]) && c->judged < p->target[i])
                c->judged = p->target[i];
        }
    }
    drop_finished();
    update_clean();
    pthread_mutex_unlock(&g_lock);
}

static int cmp_ptr(const void *a, const void *b) {
    uintptr_t x = (uintptr_t) * (void *const *)a, y = (uintptr_t) * (void *const *)b;
    return (x > y) - (x < y);
}

int rz__scan_after_sync(const rz_sync_t *what, uint64_t ticket) {
    int eager = rz__options()->install_eager;
    if (!eager && !g_untracked &&
        atomic_load_explicit(&g_seq, memory_order_acquire) == atomic_load_explicit(&g_clean, memory_order_acquire))
        return 0; /* nothing ran since every context was judged: nothing to read */
    if (g_untracked)
        return rz_scan();
    /* The work this sync waited for is complete: queued before it began, on its stream or in its context. */
    int kind = what->kind == RZ_SYNC_STREAM ? kind_of(what->stream, what->per_thread) : ON_STREAM;
    void *ctx = NULL;
    if (what->kind == RZ_SYNC_CTX)
        ctx = what->ctx ? what->ctx : rz__dev_current_ctx();
    else if (what->kind == RZ_SYNC_STREAM && kind != ON_STREAM)
        ctx = rz__dev_current_ctx();
    uint64_t thread = kind == ON_PER_THREAD ? this_thread() : 0;
    struct work_stream ask[MAX_QUERIES];
    size_t nask = 0;
    pthread_mutex_lock(&g_lock);
    if (eager) {
        /* Programs may reach the device by paths redzone does not see: every sync judges every context (once
         * none of the work redzone saw may still run). */
        struct work_ctx *all = find_ctx(NULL, 1);
        uint64_t seq = atomic_load_explicit(&g_seq, memory_order_relaxed) + 1;
        atomic_store_explicit(&g_seq, seq, memory_order_release);
        if (all)
            all->last = seq;
    }
    for (size_t i = 0; i < g_nws; i++) {
        struct work_stream *w = &g_ws[i];
        if (what->kind == RZ_SYNC_CTX ? w->ctx == ctx : (what->kind == RZ_SYNC_STREAM &&
                                                          same_stream(w, kind, what->stream, ctx, thread)))
            if (w->done < ticket)
                w->done = ticket < w->last ? ticket : w->last;
    }
    /* The streams still to be asked: those with unfinished work in a context not yet judged. */
    struct work_ctx *any = find_ctx(NULL, 0);
    int any_dirty = any && any->last > any->judged;
    for (size_t i = 0; i < g_nws && nask < MAX_QUERIES; i++) {
        struct work_stream *w = &g_ws[i];
        struct work_ctx *c = find_ctx(w->ctx, 0);
        if (w->last > w->done && (any_dirty || (c && c->last > c->judged)))
            ask[nask++] = *w;
    }
    pthread_mutex_unlock(&g_lock);
    for (size_t i = 0; i < nask; i++)
        ask[i].done = stream_idle(&ask[i]) ? ask[i].last : 0; /* outside the lock: driver calls */
    struct pick p;
    p.n = 0;
    int deferred = 0;
    pthread_mutex_lock(&g_lock);
    for (size_t i = 0; i < nask; i++) {
        struct work_stream *w = ask[i].done ? find_stream(ask[i].kind, ask[i].handle, ask[i].ctx, ask[i].thread) : NULL;
        if (w && w->done < ask[i].done)
            w->done = ask[i].done; /* everything it had when asked is complete */
    }
    /* A context is ready when none of its streams has work that may still run; work of unknown context
     * waits for every stream. */
    int all_ready = 1;
    for (size_t i = 0; i < g_nws; i++)
        if (g_ws[i].last > g_ws[i].done)
            all_ready = 0;
    for (size_t i = 0; i < g_nwc; i++) {
        struct work_ctx *c = &g_wc[i];
        if (c->last <= c->judged)
            continue;
        int ready = c->ctx == NULL ? all_ready : 1;
        for (size_t j = 0; j < g_nws && ready && c->ctx; j++)
            if (g_ws[j].ctx == c->ctx && g_ws[j].last > g_ws[j].done)
                ready = 0;
        if (!ready || p.n == MAX_SCAN_CTX) {
            deferred = 1;
            continue;
        }
        p.ctx[p.n] = c->ctx;
        p.target[p.n++] = c->ctx ? c->last : atomic_load_explicit(&g_seq, memory_order_relaxed);
    }
    drop_finished();
    pthread_mutex_unlock(&g_lock);
    if (p.n == 0)
        return 0;
    for (size_t i = 0; i < p.n; i++) {
        if (p.ctx[i] == NULL) { /* every context: one scan of them all */
            p.ctx[0] = NULL;
            p.target[0] = p.target[i];
            p.n = 1;
            break;
        }
    }
    /* One scan for all ready contexts, in handle order (the band engine looks them up by bisection); targets
     * stay paired with their contexts. */
    struct {
        void *ctx;
        uint64_t target;
    } pairs[MAX_SCAN_CTX];
    for (size_t i = 0; i < p.n; i++)
        pairs[i].ctx = p.ctx[i], pairs[i].target = p.target[i];
    qsort(pairs, p.n, sizeof pairs[0], cmp_ptr);
    for (size_t i = 0; i < p.n; i++)
        p.ctx[i] = pairs[i].ctx, p.target[i] = pairs[i].target;
    void *ctxs[MAX_SCAN_CTX];
    memcpy(ctxs, p.ctx, p.n * sizeof ctxs[0]);
    rz_scan_some_t req = {.ctxs = ctxs,
                          .n = p.n,
                          .pick = pick_still_unjudged,
                          .done = mark_judged,
                          .arg = &p,
                          .whole = !deferred};
    return rz__scan_some(&req);
}
