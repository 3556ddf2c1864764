/*
 * METRALE_REDZONE_SCAN=launch: after every kernel launch (cuLaunchKernel, cuLaunchKernelEx, cooperative
 * launches, graph launches: one launch of the graph), the bands of the launch's context are copied in the
 * launch's stream order, right after the kernel and before the next work on that stream, into page-locked
 * staging, and a host function queued behind the copy hands the check to launch_attribution.c, which reports a band
 * changed since the previous check with this launch named. The launching thread queues the copy and the host
 * function and returns: no host wait. Under a debugger (any ptrace tracer) the launching thread waits for the
 * copy instead and judges it itself, so a violation breakpoint stops in that thread, inside the launch call.
 *
 * Driver calls per launch: cuCtxGetCurrent (which context's bands), one cuMemcpyBatchAsync and one
 * cuLaunchHostFunc; plus cuStreamIsCapturing while a capture is in progress in the process (capture.c: a
 * batched copy or a host function must never enter a program's graph capture; never for the legacy stream,
 * which cannot be captured), and, only when a launch on another stream of the context is still being
 * checked, a start marker (a host function queued before the kernel, below).
 * What a check copies (its layout) is rebuilt only when the registry changed, so a launch costs no walk over
 * the zones while no allocation, free or poison happened.
 *
 * Concurrent streams, and why the start marker: a check's copy sees every write made before it, by this
 * launch or by a kernel of another stream that ran meanwhile. A band is attributed to the first check, in
 * the order checks complete, that saw it changed; the launches on other streams that may have run between
 * this launch and its copy are named with it as possible writers instead of guessing. Those are the launches
 * still in flight (begun, check not completed) when the check completes, except the ones known not to have
 * started yet: a launch made while another stream had a check in flight gets a host function queued right
 * before its kernel, whose run says the kernel may have started; until it runs (say the kernel waits for an
 * event recorded after this launch), that launch cannot have written anything this check saw.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <unwind.h>

#include "common.h"
#include "launch_check.h"
#include "band.h"
#include "band_io.h"
#include "capture.h"
#include "capture_mode.h"
#include "check_changed.h"
#include "device_ctx.h"
#include "driver.h"
#include "judge.h"
#include "launch_attribution.h"
#include "launch_names.h"
#include "launch_ring.h"
#include "launch_rows.h"
#include "options.h"
#include "quarantine.h"
#include "registry.h"
#include "report.h"
#include "rz_annotate.h"
#include "state.h"
#include "sticky.h"
#include "sticky_said.h"
#include "stream_fills.h"
#include "stream_ops.h"
#include "symbolize.h"

/* Staging held by checks in flight, at most; past it a launch waits for its context's work. */
#define STAGING_CAP ((size_t)256 << 20)

/* ---- in flight and completed ------------------------------------------------------------------------- */
static pthread_mutex_t g_flight_lock = PTHREAD_MUTEX_INITIALIZER;
static rz_check_t *g_flight;                /* doubly linked: launches begun whose check has not completed */
static rz_check_t *g_done, **g_done_tail = &g_done; /* completed, not judged, in completion order */
static uint64_t g_clock;                    /* start markers and completions, in the order they ran */
static _Atomic uint64_t g_begun;            /* launches begun */
static _Atomic int g_have_done;             /* g_done is not empty (a hint read without the lock) */
static _Atomic int g_sync_mode = -1;        /* rz__launch_set_sync */

uint64_t rz__launch_begun(void) { return atomic_load_explicit(&g_begun, memory_order_acquire); }

/* The smallest begin counter of the launches in flight and, with `completed`, of those completed but not
 * judged yet; the next launch's when there is none. */
static uint64_t oldest_begin(int completed) {
    pthread_mutex_lock(&g_flight_lock);
    uint64_t oldest = atomic_load_explicit(&g_begun, memory_order_acquire) + 1;
    for (const rz_check_t *c = g_flight; c; c = c->next)
        oldest = c->begin < oldest ? c->begin : oldest;
    for (const rz_check_t *c = completed ? g_done : NULL; c; c = c->qnext)
        oldest = c->begin < oldest ? c->begin : oldest;
    pthread_mutex_unlock(&g_flight_lock);
    return oldest;
}

uint64_t rz__launch_oldest_in_flight(void) { return oldest_begin(0); }

uint64_t rz__launch_oldest_unjudged(void) { return oldest_begin(1); }

void rz__launch_set_sync(int mode) { atomic_store(&g_sync_mode, mode); }

/* Whether a ptrace tracer (gdb, cuda-gdb) is attached: /proc/self/status, read at most once a second. */
static int traced(void) {
    static _Atomic long checked_sec = -1;
    static _Atomic int answer;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
    if (atomic_load_explicit(&checked_sec, memory_order_acquire) == (long)now.tv_sec)
        return atomic_load_explicit(&answer, memory_order_relaxed);
    char buf[4096];
    int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC), pid = 0;
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
    if (fd >= 0)
        close(fd);
    if (n > 0) {
        buf[n] = '\0';
        const char *t = strstr(buf, "TracerPid:");
        pid = t ? atoi(t + 10) : 0;
    }
    atomic_store_explicit(&answer, pid != 0, memory_order_relaxed);
    atomic_store_explicit(&checked_sec, (long)now.tv_sec, memory_order_release);
    return pid != 0;
}

static int sync_mode(void) {
    int m = atomic_load_explicit(&g_sync_mode, memory_order_relaxed);
    return m >= 0 ? m : traced();
}

static void flight_insert_locked(rz_check_t *c) {
    c->prev = NULL;
    c->next = g_flight;
    if (g_flight)
        g_flight->prev = c;
    g_flight = c;
}

static void flight_remove_locked(rz_check_t *c) {
    if (c->prev)
        c->prev->next = c->next;
    else if (g_flight == c)
        g_flight = c->next;
    if (c->next)
        c->next->prev = c->prev;
    c->prev = c->next = NULL;
}

/* ---- layouts: which bands a check of a context copies ------------------------------------------------ */
#define LAYOUT_SLOTS 8
static pthread_mutex_t g_layout_lock = PTHREAD_MUTEX_INITIALIZER;
static rz_layout_t *g_layouts[LAYOUT_SLOTS]; /* the newest layout per context (each holds a reference) */
static uint64_t g_layout_ids;

static void layout_unref(rz_layout_t *l) {
    if (l && atomic_fetch_sub_explicit(&l->refs, 1, memory_order_acq_rel) == 1) {
        free(l->srcs);
        free(l->sizes);
        free(l->offs);
        free(l->meta);
        free(l);
    }
}

static int layout_current(const rz_layout_t *l, void *ctx, uint64_t seq) {
    return l && !l->partial && l->ctx == ctx && l->seq == seq && l->poison_active == RZ_STATE.poison_active &&
           l->poison_lo == RZ_STATE.poison_lo && l->poison_hi == RZ_STATE.poison_hi;
}

/* A zone whose band a launch check can copy: watched, installed, not graph memory (it exists only while a
 * launch of its graph has it), its stream-ordered fill not still queued. */
static int band_ready(const rz_zone_node_t *z, void *ctx) {
    return z->ctx == ctx && rz__zone_watched(z) && !(z->flags & (RZ_ZONE_PENDING | RZ_ZONE_GRAPH | RZ_ZONE_FILLING));
}

/* Registry lock held: every installed band of context ctx. NULL when out of memory. */
static rz_layout_t *layout_build_locked(void *ctx) {
    size_t n = 0;
    int partial = 0;
    for (rz_zone_node_t *z = rz__registry_first(); z; z = rz__registry_next(z)) {
        if ((z->flags & RZ_ZONE_FILLING) && z->ctx == ctx && !rz__zone_filled(z))
            partial = 1; /* asks the fill's event (clearing the mark when done); left out until it is */
        /* Allocated by another thread since this launch installed the waiting bands: its band is written by
         * the next install, which changes no sequence number, so this layout must not be kept past it. */
        if ((z->flags & RZ_ZONE_PENDING) && (z->ctx == ctx || z->ctx == NULL))
            partial = 1;
        if (band_ready(z, ctx))
            n += z->front_units ? 2 : 1;
    }
    rz_layout_t *l = calloc(1, sizeof *l);
    if (l == NULL)
        return NULL;
    size_t cap = n ? n : 1;
    l->srcs = malloc(cap * sizeof *l->srcs);
    l->sizes = malloc(cap * sizeof *l->sizes);
    l->offs = malloc(cap * sizeof *l->offs);
    l->meta = malloc(cap * sizeof *l->meta);
    if (!l->srcs || !l->sizes || !l->offs || !l->meta) {
        atomic_store(&l->refs, 1);
        layout_unref(l);
        return NULL;
    }
    size_t k = 0, bytes = 0;
    for (rz_zone_node_t *z = rz__registry_first(); z && k < n; z = rz__registry_next(z)) {
        if (!band_ready(z, ctx))
            continue;
        for (int front = 0; front <= (z->front_units ? 1 : 0); front++) {
            uint64_t size = front ? rz__zone_front(z) : z->pad_bytes;
            l->srcs[k] = front ? z->ptr - size : z->ptr + z->user_bytes;
            l->sizes[k] = size;
            l->offs[k] = bytes;
            l->meta[k] = (rz_band_meta_t){.ptr = z->ptr, .user_bytes = z->user_bytes, .index = z->index,
                                          .bytes = (uint32_t)size, .pad_bytes = z->pad_bytes,
                                          .front_units = z->front_units, .expected = z->expected,
                                          .front = (uint8_t)front, .flags = z->flags};
            bytes += (size + 15) & ~(size_t)15;
            k++;
        }
    }
    l->n = k;
    l->bytes = bytes;
    l->partial = partial; /* made again at the next launch, when those bands may be ready */
    l->ctx = ctx;
    l->seq = atomic_load_explicit(&RZ_STATE.seq, memory_order_acquire);
    l->poison_active = RZ_STATE.poison_active;
    l->poison_lo = RZ_STATE.poison_lo;
    l->poison_hi = RZ_STATE.poison_hi;
    atomic_store(&l->refs, 1);
    return l;
}

/* The layout of ctx, with a reference for the caller; rebuilt when the registry changed since. The registry
 * lock is taken to compare (the window fields change under it): a short hold, no walk, when nothing changed. */
static rz_layout_t *layout_get(void *ctx) {
    rz__registry_lock();
    uint64_t seq = atomic_load_explicit(&RZ_STATE.seq, memory_order_acquire);
    pthread_mutex_lock(&g_layout_lock);
    int slot = -1, free_slot = -1;
    for (int i = 0; i < LAYOUT_SLOTS; i++) {
        if (g_layouts[i] && g_layouts[i]->ctx == ctx)
            slot = i;
        else if (g_layouts[i] == NULL && free_slot < 0)
            free_slot = i;
    }
    rz_layout_t *l = slot >= 0 && layout_current(g_layouts[slot], ctx, seq) ? g_layouts[slot] : NULL, *old = NULL;
    if (l == NULL && (l = layout_build_locked(ctx)) != NULL) {
        l->id = ++g_layout_ids;
        if (slot < 0)
            slot = free_slot >= 0 ? free_slot : (int)(l->id % LAYOUT_SLOTS);
        old = g_layouts[slot];
        g_layouts[slot] = l; /* the cache's reference */
    }
    if (l)
        atomic_fetch_add_explicit(&l->refs, 1, memory_order_relaxed); /* the caller's */
    pthread_mutex_unlock(&g_layout_lock);
    rz__registry_unlock();
    layout_unref(old);
    return l;
}

/* ---- staging: page-locked buffers, one per check in flight -------------------------------------------- */
static pthread_mutex_t g_stage_lock = PTHREAD_MUTEX_INITIALIZER;
static rz_staging_buf_t *g_stage_free;
static size_t g_stage_bytes; /* held by every buffer made */

static rz_staging_buf_t *staging_take(size_t bytes, uint64_t layout_id) {
    pthread_mutex_lock(&g_stage_lock);
    rz_staging_buf_t **best = NULL;
    for (rz_staging_buf_t **p = &g_stage_free; *p; p = &(*p)->next) {
        if ((*p)->size < bytes)
            continue;
        if (best == NULL || (*p)->dfor == layout_id)
            best = p;
        if ((*p)->dfor == layout_id)
            break;
    }
    if (best) {
        rz_staging_buf_t *b = *best;
        *best = b->next;
        pthread_mutex_unlock(&g_stage_lock);
        return b;
    }
    size_t size = (bytes + 4095) & ~(size_t)4095;
    if (g_stage_bytes + size > STAGING_CAP) {
        pthread_mutex_unlock(&g_stage_lock);
        return NULL;
    }
    g_stage_bytes += size;
    pthread_mutex_unlock(&g_stage_lock);
    rz_staging_buf_t *b = calloc(1, sizeof *b);
    void *p = b ? mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) : MAP_FAILED;
    if (p == MAP_FAILED) {
        free(b);
        pthread_mutex_lock(&g_stage_lock);
        g_stage_bytes -= size;
        pthread_mutex_unlock(&g_stage_lock);
        return NULL;
    }
    b->p = p;
    b->size = size;
    /* Page-locked, or the driver returns from a copy into it only once the copy is done: a host wait. */
    b->pinned = rz__dev_host_register(p, size) == RZCUDA_SUCCESS; /* relaxed: a capture elsewhere stays valid */
    if (!b->pinned) {
        static atomic_int warned;
        if (!atomic_exchange(&warned, 1))
            rz__warn("launch checks: staging could not be page-locked; each launch then waits for its check");
    }
    return b;
}

static void staging_give(rz_staging_buf_t *b) {
    if (b == NULL)
        return;
    pthread_mutex_lock(&g_stage_lock);
    b->next = g_stage_free;
    g_stage_free = b;
    pthread_mutex_unlock(&g_stage_lock);
}

/* The copy destinations of layout l in b. */
static int staging_lay_out(rz_staging_buf_t *b, const rz_layout_t *l) {
    if (b->dfor == l->id)
        return 1;
    if (b->dcap < l->n) {
        rzcu_deviceptr *d = realloc(b->dsts, l->n * sizeof *d);
        if (d == NULL)
            return 0;
        b->dsts = d;
        b->dcap = l->n;
    }
    for (size_t i = 0; i < l->n; i++)
        b->dsts[i] = (rzcu_deviceptr)(uintptr_t)(b->p + l->offs[i]);
    b->dfor = l->id;
    return 1;
}

/* ---- the legacy stream: checks go on a blocking stream of the library's ------------------------------- */
/* cuMemcpyBatchAsync refuses the legacy stream. A blocking stream (created without NON_BLOCKING) is ordered
 * with it both ways: its work waits for the legacy stream's earlier work, and the legacy stream's later work
 * waits for it. So a check queued there runs after the kernel and before the next legacy-stream work. */
#define FOLLOW_SLOTS 64
static struct {
    void *ctx;
    rzcu_stream s;
} g_follow[FOLLOW_SLOTS];
static int g_nfollow;

static rzcu_result follower(void *ctx, rzcu_stream *out) {
    pthread_mutex_lock(&g_stage_lock);
    for (int i = 0; i < g_nfollow; i++) {
        if (g_follow[i].ctx == ctx) {
            *out = g_follow[i].s;
            pthread_mutex_unlock(&g_stage_lock);
            return RZCUDA_SUCCESS;
        }
    }
    rzcu_result r = RZCUDA_ERROR_OUT_OF_MEMORY;
    if (g_nfollow < FOLLOW_SLOTS && (r = rz__dev_stream_create(out, 0)) == RZCUDA_SUCCESS) {
        g_follow[g_nfollow].ctx = ctx;
        g_follow[g_nfollow++].s = *out;
    }
    pthread_mutex_unlock(&g_stage_lock);
    return r;
}

void rz__launch_forget_ctx(void *ctx) {
    rz__launch_names_forget(); /* its modules went with it */
    pthread_mutex_lock(&g_stage_lock);
    for (int i = 0; i < g_nfollow; i++)
        if (g_follow[i].ctx == ctx)
            g_follow[i--] = g_follow[--g_nfollow]; /* the stream went with the context */
    pthread_mutex_unlock(&g_stage_lock);
    pthread_mutex_lock(&g_layout_lock);
    rz_layout_t *old[LAYOUT_SLOTS] = {0};
    for (int i = 0; i < LAYOUT_SLOTS; i++)
        if (g_layouts[i] && g_layouts[i]->ctx == ctx) {
            old[i] = g_layouts[i];
            g_layouts[i] = NULL;
        }
    pthread_mutex_unlock(&g_layout_lock);
    for (int i = 0; i < LAYOUT_SLOTS; i++)
        layout_unref(old[i]);
    rz__registry_lock();
    rz__attrib_forget_ctx(ctx);
    rz__rows_forget_locked(ctx);
    rz__registry_unlock();
}

/* ---- the host stack of the launch call ------------------------------------------------------------------ */
/*
 * Unwinding (DWARF call frame information) costs thousands of instructions a frame, at every launch. A
 * program launches from few places, so each thread keeps the last stacks it unwound, keyed by where the
 * launch call returns to and where that return address is stored; a stack is reused when every one of its
 * return addresses is still in the stack slot it was found in. (x86-64: with the same return address at the
 * same place, the next frame's position follows from the same code, so the chain checked slot by slot, from
 * the launch call outwards, is the chain the unwinder would find. A key slot found wrongly never matches the
 * unwinder's, so nothing is cached for it.) Elsewhere every launch unwinds.
 */
#define STACK_CACHE 2
struct stack_walk {
    void **frames;
    uintptr_t *slots;
    int n, max;
};

static _Unwind_Reason_Code walk_step(struct _Unwind_Context *uc, void *arg) {
    struct stack_walk *w = arg;
    uintptr_t ip = _Unwind_GetIP(uc);
    if (ip == 0)
        return _URC_END_OF_STACK;
    if (w->n == 0 && rz__in_redzone(ip))
        return _URC_NO_REASON; /* redzone's own frames of the launch call */
    w->frames[w->n] = (void *)ip;
    w->slots[w->n] = _Unwind_GetCFA(uc) - sizeof(void *); /* where ip is stored (libgcc's CFA is its callee's) */
    return ++w->n == w->max ? _URC_END_OF_STACK : _URC_NO_REASON;
}

static RZ_TLS struct stack_cache {
    void *ret;
    void *const *ret_slot;
    int n;
    void *frames[RZ_LAUNCH_FRAMES];
    uintptr_t slots[RZ_LAUNCH_FRAMES];
} t_stacks[STACK_CACHE];
static RZ_TLS unsigned t_stack_next;

/*
 * Where the interposed entry point's return address is stored: the first word above this function's frame
 * that holds it (the frames between, redzone's own, keep no copy of it but the launch call's description,
 * which is skipped). The slot is always found below the top of the stack, since that return is still to
 * come. NULL when not found within 64 KiB (then nothing is cached).
 */
/* Reads the words of the frames above it as a stack scanner does: not the objects ASan guards in them. */
__attribute__((noinline, no_sanitize("address"))) static void *const *find_ret_slot(const rz_launch_call_t *call) {
    void *const *p = (void *const *)__builtin_frame_address(0);
    for (size_t i = 0; i < ((size_t)64 << 10) / sizeof *p; i++, p++)
        if (*p == call->ret && p != (void *const *)&call->ret)
            return p;
    return NULL;
}

/* Whether the return-address slot of a caller's frame still holds ip (a stack word, read as find_ret_slot). */
__attribute__((no_sanitize("address"))) static int slot_holds(uintptr_t slot, const void *ip) {
    return *(void *const *)slot == ip;
}

static uint32_t launch_stack(const rz_launch_call_t *call, void **frames) {
    void *const *ret_slot = NULL;
#if defined(__x86_64__)
    ret_slot = find_ret_slot(call);
    for (int k = 0; k < STACK_CACHE && ret_slot; k++) {
        const struct stack_cache *e = &t_stacks[k];
        if (e->n == 0 || e->ret != call->ret || e->ret_slot != ret_slot || e->frames[0] != call->ret)
            continue;
        int same = 1;
        for (int i = 1; i < e->n && same; i++)
            same = slot_holds(e->slots[i], e->frames[i]);
        if (same) {
            memcpy(frames, e->frames, (size_t)e->n * sizeof *frames);
            return (uint32_t)e->n;
        }
    }
#endif
    uintptr_t slots[RZ_LAUNCH_FRAMES];
    struct stack_walk w = {.frames = frames, .slots = slots, .max = RZ_LAUNCH_FRAMES};
    _Unwind_Backtrace(walk_step, &w);
    if (w.n > 0 && ret_slot && frames[0] == call->ret && slots[0] == (uintptr_t)ret_slot) {
        struct stack_cache *e = &t_stacks[t_stack_next++ % STACK_CACHE];
        e->ret = call->ret;
        e->ret_slot = ret_slot;
        e->n = w.n;
        memcpy(e->frames, frames, (size_t)w.n * sizeof *frames);
        memcpy(e->slots, slots, (size_t)w.n * sizeof *slots);
    }
    return (uint32_t)w.n;
}

/* ---- checks -------------------------------------------------------------------------------------------- */
void rz__check_release(rz_check_t *c) {
    if (atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) != 1)
        return;
    layout_unref(c->layout);
    staging_give(c->st);
    rz__changed_table_release(c->tab, c->completed != 0);
    rz__changed_area_release(c->area, c->completed != 0);
    free(c);
}

/* A launch that gets no check after all (its launch failed, nothing to copy, a driver call failed). */
static void drop(rz_check_t *c) {
    pthread_mutex_lock(&g_flight_lock);
    flight_remove_locked(c);
    pthread_mutex_unlock(&g_flight_lock);
    rz__check_release(c);
}

/* Host function queued before a kernel: from now on the kernel may run. */
static void marker_cb(void *arg) {
    rz_check_t *c = arg;
    pthread_mutex_lock(&g_flight_lock);
    c->started = ++g_clock;
    pthread_mutex_unlock(&g_flight_lock);
    rz__check_release(c);
}

/* The copy has completed: note the launches that may have overlapped, queue the check to be judged. */
static void complete(rz_check_t *c) {
    pthread_mutex_lock(&g_flight_lock);
    c->completed = ++g_clock;
    flight_remove_locked(c);
    for (rz_check_t *o = g_flight; o; o = o->next) {
        if (o->ctx != c->ctx || o->skey == c->skey || (o->marker && !o->started))
            continue; /* same stream (runs after this check), or known not to have started */
        if (c->overlap_begin == 0 || o->begin < c->overlap_begin)
            c->overlap_begin = o->begin;
        if (o->begin > c->overlap_last)
            c->overlap_last = o->begin;
        if (c->noverlap == RZ_OVERLAP_SHOWN) {
            c->overlap_more++;
            continue;
        }
        rz_overlap_t *v = &c->overlap[c->noverlap++];
        v->launch = o->launch;
        v->stream = o->stream;
        v->kind = o->kind;
        memcpy(v->name, o->name, sizeof v->name);
    }
    c->qnext = NULL;
    *g_done_tail = c;
    g_done_tail = &c->qnext;
    atomic_store_explicit(&g_have_done, 1, memory_order_release);
    pthread_mutex_unlock(&g_flight_lock);
}

/* Registry lock held: judge every completed check, oldest completion first. No driver call: callable from a
 * stream's host function. */
static void judge_done_locked(void) {
    if (RZ_LIKELY(!atomic_load_explicit(&g_have_done, memory_order_acquire)))
        return;
    for (;;) {
        pthread_mutex_lock(&g_flight_lock);
        rz_check_t *c = g_done;
        if (c) {
            g_done = c->qnext;
            if (g_done == NULL)
                g_done_tail = &g_done;
        } else {
            atomic_store_explicit(&g_have_done, 0, memory_order_relaxed);
        }
        pthread_mutex_unlock(&g_flight_lock);
        if (c == NULL)
            return;
        rz__attrib_judge_locked(c);
        rz__check_release(c);
    }
}

/* Host function queued behind the copy. Never waits for the registry lock (its holder may be waiting for
 * this stream): when it is busy, the next holder outside a host function judges the check. */
static void done_cb(void *arg) {
    complete(arg);
    if (rz__registry_lock_timed(0) == RZ_OK) {
        judge_done_locked();
        rz__registry_unlock();
    }
}

void rz__launch_judge_locked(void) { judge_done_locked(); }

static const rz_launch_counts_t g_counts = {
    .begun = rz__launch_begun,
    .oldest_in_flight = rz__launch_oldest_in_flight,
    .oldest_unjudged = rz__launch_oldest_unjudged,
};

void rz__launch_check_arm(void) {
    rz__attrib_arm(&g_counts);
    rz__rows_arm(&g_counts);
    rz__bands_on_scan_begin(RZ_SCAN_BEGIN_LAUNCH_CHECKS, rz__launch_checks_locked);
    rz__judge_on_who_wrote(rz__attrib_report);
    rz__judge_on_writer(rz__attrib_writer);
}

void rz__launch_checks_locked(void) {
    judge_done_locked();
    rz__attrib_refill_locked();
}

void rz__launch_checks(void) {
    if (RZ_LIKELY(!atomic_load_explicit(&g_have_done, memory_order_acquire)) && !rz__attrib_refill_wanted())
        return;
    rz__registry_lock();
    rz__launch_checks_locked();
    rz__registry_unlock();
}

/* The identity of a stream for "another stream": per-thread default streams are one per thread. */
static RZ_TLS char t_per_thread_key;

rz_check_t *rz__launch_pre(const rz_launch_call_t *call) {
    if (RZ_LIKELY(!(rz__options()->scan & RZ_SCAN_LAUNCH)) || rz__dev_load() != RZ_OK)
        return NULL;
    if (RZ_UNLIKELY(rz__sticky() != RZCUDA_SUCCESS))
        return NULL; /* the launch fails too: nothing to check (sticky.c) */
    rz__launch_checks(); /* earlier checks the callback thread could not judge; bands they reported */
    void *ctx = rz__dev_current_ctx();
    if (ctx == NULL)
        return NULL; /* the launch fails without a context */
    rzcu_stream s = rz__stream_of(call->stream, call->per_thread);
    int legacy = s == NULL || s == RZCU_STREAM_LEGACY;
    if (!legacy && rz__stream_capturing(s)) {
        static atomic_int warned;
        if (!atomic_exchange(&warned, 1))
            rz__warn("launch checks: launches into a stream being captured are not checked (the graph's launches "
                     "are, as one launch each)");
        return NULL;
    }
    rz_check_t *c = calloc(1, sizeof *c);
    if (c == NULL)
        return NULL;
    atomic_init(&c->refs, 1);
    c->ctx = ctx;
    c->stream = legacy ? NULL : s;
    c->skey = s == RZCU_STREAM_PER_THREAD ? (uintptr_t)&t_per_thread_key : (uintptr_t)(legacy ? NULL : s);
    c->kind = call->kind;
    c->sync = sync_mode();
    pthread_mutex_lock(&g_flight_lock);
    c->begin = atomic_fetch_add_explicit(&g_begun, 1, memory_order_acq_rel) + 1;
    for (rz_check_t *o = g_flight; o && !c->marker; o = o->next)
        c->marker = o->ctx == ctx && o->skey != c->skey;
    flight_insert_locked(c);
    pthread_mutex_unlock(&g_flight_lock);
    if (c->marker) {
        atomic_fetch_add_explicit(&c->refs, 1, memory_order_relaxed);
        if (!rz__dev_has_host_func() || rz__dev_host_func(legacy ? NULL : s, marker_cb, c) != RZCUDA_SUCCESS) {
            rz__check_release(c);
            pthread_mutex_lock(&g_flight_lock);
            c->marker = 0; /* may have started at any time */
            pthread_mutex_unlock(&g_flight_lock);
        }
    }
    return c;
}

/* Queue the copy of layout l into c's staging on stream s: one batched copy (one copy per band on a driver
 * without batches, or that refuses one). */
static rzcu_result copy_bands(rz_check_t *c, rzcu_stream s) {
    const rz_layout_t *l = c->layout;
    rz_staging_buf_t *b = c->st;
    if (l->n == 1 || !rz__dev_has_copy_batch())
        goto one_by_one;
    rzcu_memcpy_attributes attr = {.srcAccessOrder = RZCU_MEMCPY_SRC_ACCESS_ORDER_STREAM};
    size_t attr_idx = 0;
    rzcu_result r = rz__dev_copy_batch_async(b->dsts, l->srcs, l->sizes, l->n, &attr, &attr_idx, 1, s);
    if (r == RZCUDA_SUCCESS || rz__cu_sticky(r) || r == RZCUDA_ERROR_CONTEXT_IS_DESTROYED ||
        r == RZCUDA_ERROR_DEINITIALIZED)
        return r;
one_by_one:
    for (size_t i = 0; i < l->n; i++) {
        rzcu_result r1 = rz__dev_copy_to_host_async(b->p + l->offs[i], l->srcs[i], l->sizes[i], s);
        if (r1 != RZCUDA_SUCCESS)
            return r1;
    }
    return RZCUDA_SUCCESS;
}

static void fill_descs(rz_check_desc_t *d, size_t n, const void *arg) {
    const rz_layout_t *l = arg;
    for (size_t i = 0; i < n; i++)
        d[i] = (rz_check_desc_t){.band = l->srcs[i], .bytes = (uint32_t)l->sizes[i], .expected = l->meta[i].expected};
}

/* Compare c's bands on the device (check_changed.c) when the check kernel runs in its context: 1 with *q the
 * result of queueing it; 0 when the bands are to be copied instead. */
static rz_changed_area_t *area_for(void *ctx) {
    rz_changed_area_t *a = rz__changed_area(ctx);
    if (a == NULL) {
        /* Checks in flight hold every result area: wait for this context's work, judge them, try again. */
        rz__dev_settle(ctx);
        rz__launch_checks();
        a = rz__changed_area(ctx);
    }
    return a;
}

static int on_device(rz_check_t *c, rzcu_stream s, rzcu_result *q) {
    if (!rz__changed_available(c->ctx))
        return 0;
    c->tab = rz__changed_table(c->ctx, c->layout->id, c->layout->n, fill_descs, c->layout, s, c->skey);
    c->area = c->tab ? area_for(c->ctx) : NULL;
    if (c->area == NULL) {
        rz__changed_table_release(c->tab, 0);
        c->tab = NULL;
        return 0;
    }
    *q = rz__changed_queue(c->tab, c->area, c->layout->n, s);
    return 1;
}

static void enqueue_failed(const char *what, rzcu_result r) {
    static atomic_int warned;
    if (rz__sticky_failed(r, 0))
        return; /* said once for the process (sticky.c) */
    if (!atomic_exchange(&warned, 1))
        rz__warn("launch checks: %s failed with %s; that launch is not checked (the exit scan still is)", what,
                 rz__cu_name(r));
}

void rz__launch_post(rz_check_t *c, const rz_launch_call_t *call, rzcu_result r) {
    if (r != RZCUDA_SUCCESS) {
        if (c)
            drop(c);
        return;
    }
    if (call->kind != RZ_LAUNCH_KERNEL && !(rz__options()->scan & RZ_SCAN_LAUNCH))
        return; /* the other policies' candidate lists name cuLaunchKernel/Ex launches only, as they always did */
    char name[RZ_KERNEL_NAME] = "(graph)";
    if (call->kind != RZ_LAUNCH_GRAPH) {
        if (c == NULL) { /* not checked: as under the other policies */
            rz__launch_record_name(rz__launch_kernel_name(call->f));
            return;
        }
        rz__launch_kernel_name_cached(call->f, name);
    }
    uint64_t launch = rz__launch_record_name(name);
    if (c == NULL)
        return;
    rz__quarantine_after_launch(c->ctx, c->stream, launch, name); /* writes after free, named (quarantine_launch.c) */
    c->nframes = launch_stack(call, c->frames);
    c->graph = call->graph;
    memcpy(c->grid, call->grid, sizeof c->grid);
    memcpy(c->block, call->block, sizeof c->block);
    pthread_mutex_lock(&g_flight_lock); /* other checks copy these when they complete */
    c->launch = launch;
    memcpy(c->name, name, sizeof c->name);
    pthread_mutex_unlock(&g_flight_lock);
    if (rz__sticky() != RZCUDA_SUCCESS) {
        drop(c);
        return;
    }
    rzcu_stream s = c->stream;
    rzcu_result q = s == NULL ? follower(c->ctx, &s) : RZCUDA_SUCCESS;
    /* Compared on the device against a table kept in step with the rows (launch_rows.c); else a layout. */
    int rows = q == RZCUDA_SUCCESS && rz__changed_available(c->ctx) ? rz__rows_queue(c, s, area_for, &q) : 0;
    if (rows == 0 && q == RZCUDA_SUCCESS) {
        c->layout = layout_get(c->ctx);
        rows = c->layout == NULL || c->layout->n == 0 ? -1 : 0;
    }
    if (rows < 0) {
        drop(c); /* no band in this context: nothing it could have written past */
        return;
    }
    if (q == RZCUDA_SUCCESS && rows == 0 && !on_device(c, s, &q)) {
        c->st = staging_take(c->layout->bytes, c->layout->id);
        if (c->st == NULL) {
            /* Checks in flight hold all the staging: wait for this context's work, judge them, try again. */
            rz__dev_settle(c->ctx);
            rz__launch_checks();
            c->st = staging_take(c->layout->bytes, c->layout->id);
        }
        if (c->st == NULL || !staging_lay_out(c->st, c->layout)) {
            enqueue_failed("making room for a band copy", RZCUDA_ERROR_OUT_OF_MEMORY);
            drop(c);
            return;
        }
        q = copy_bands(c, s);
    }
    if (q != RZCUDA_SUCCESS) {
        enqueue_failed("queueing the band copy", q);
        drop(c);
        return;
    }
    if (c->sync) {
        /* Under a debugger: judged here, so a violation stops this thread inside its launch call. */
        rzcu_capture_mode saved = rz__dev_quiet_begin(); /* a stream not capturing (launch checks are not captured) */
        q = rz__dev_stream_sync(s);
        rz__dev_quiet_end(saved);
        if (q != RZCUDA_SUCCESS) {
            enqueue_failed("waiting for the band copy", q);
            drop(c);
            return;
        }
        complete(c);
        rz__registry_lock();
        rz__launch_checks_locked();
        rz__registry_unlock();
        return;
    }
    q = rz__dev_host_func(s, done_cb, c);
    if (q != RZCUDA_SUCCESS) {
        enqueue_failed("queueing the check's host function", q);
        drop(c);
    }
}
