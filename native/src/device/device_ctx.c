/*
 * The device seam's per-context state (band_io.c has the rest): the current context, the library's own stream
 * in each context, making a context current for a band operation and waiting for its work, the handle of a
 * device's primary context, and forgetting all of it when a context ends, so a context that later gets the
 * same handle starts afresh.
 */
#include <pthread.h>
#include <stdlib.h>

#include "common.h"
#include "device_ctx.h"
#include "capture.h"
#include "capture_mode.h"
#include "driver.h"
#include "sticky.h"
#include "thread_state.h"

void *rz__dev_current_ctx(void) {
    rzcu_context ctx = NULL;
    if (rz__drv.cuCtxGetCurrent(&ctx) != RZCUDA_SUCCESS)
        return NULL;
    return ctx;
}

/*
 * The current context without asking (issue 29 item 2). A thread's current context changes only through
 * the calls that set, push, pop or create one, which the hooks wrap (hooks_ctx.c) under every name a program
 * or runtime reaches them by (symbols, dlsym, cuGetProcAddress): each forgets this thread's answer, and the
 * next allocation asks once. The ends of contexts (destroy, a primary context's release or reset) forget
 * every thread's answer (a generation), conservatively: a thread whose context ended keeps its handle as its
 * current context (the driver's rule), but the next asking costs one call. Without the hooks (the object
 * library the unit tests link, whose tests change contexts by calling the driver directly) nothing is
 * cached: NULL, and the lazy install asks the driver as before. Why not cuCtxGetCurrent at every
 * allocation: an allocation freed before any device work then costs a driver call of its own.
 */
static _Atomic int g_ctx_calls_seen;
static _Atomic uint64_t g_ctx_gen = 1;

#define t_ctx (rz__thread.ctx)
#define t_ctx_gen (rz__thread.ctx_gen)

void rz__dev_ctx_calls_seen(void) { atomic_store_explicit(&g_ctx_calls_seen, 1, memory_order_release); }

void rz__dev_ctx_changed_here(void) { t_ctx_gen = 0; }

void rz__dev_ctx_changed_anywhere(void) {
    atomic_fetch_add_explicit(&g_ctx_gen, 1, memory_order_acq_rel);
    t_ctx_gen = 0;
}

void *rz__dev_alloc_ctx(void) {
    if (!atomic_load_explicit(&g_ctx_calls_seen, memory_order_acquire))
        return NULL;
    /* The generation is read before asking: an end counted meanwhile makes the answer stale at once. */
    uint64_t gen = atomic_load_explicit(&g_ctx_gen, memory_order_acquire);
    if (RZ_LIKELY(t_ctx_gen == gen))
        return t_ctx;
    rzcu_context ctx = NULL;
    if (rz__drv.cuCtxGetCurrent(&ctx) != RZCUDA_SUCCESS || ctx == NULL)
        return NULL;
    t_ctx = ctx;
    t_ctx_gen = gen;
    return ctx;
}

/* ---- library streams, one per context ---------------------------------------------------------------- */
/* One stream per context ever used, created on first use and kept until the context ends (the driver
 * destroys a context's streams with it; rz__dev_streams_forget_ctx drops the entry): the table grows with the
 * contexts alive, never evicts (an evicted context's next operation created another stream, and the old one
 * was never destroyed: with more than 64 contexts, one stream per scan leaked). */
static pthread_mutex_t g_stream_lock = PTHREAD_MUTEX_INITIALIZER;
static struct stream_slot {
    void *ctx;
    rzcu_stream stream;
} *g_streams;
static size_t g_nstreams, g_streams_cap;

/* The library's stream for the current context `ctx` (created on first use). */
static rzcu_result stream_for(void *ctx, rzcu_stream *out) {
    rzcu_result r = RZCUDA_SUCCESS;
    pthread_mutex_lock(&g_stream_lock);
    for (size_t i = 0; i < g_nstreams; i++) {
        if (g_streams[i].ctx == ctx) {
            *out = g_streams[i].stream;
            goto done;
        }
    }
    if (g_nstreams == g_streams_cap) {
        size_t cap = g_streams_cap ? 2 * g_streams_cap : 16;
        struct stream_slot *t = realloc(g_streams, cap * sizeof *t);
        if (t == NULL) {
            r = RZCUDA_ERROR_OUT_OF_MEMORY;
            goto done;
        }
        g_streams = t;
        g_streams_cap = cap;
    }
    rzcu_stream s = NULL;
    r = rz__drv.cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING);
    if (r != RZCUDA_SUCCESS)
        goto done;
    g_streams[g_nstreams].ctx = ctx;
    g_streams[g_nstreams].stream = s;
    g_nstreams++;
    *out = s;
done:
    pthread_mutex_unlock(&g_stream_lock);
    return r;
}

size_t rz__dev_stream_count(void) {
    pthread_mutex_lock(&g_stream_lock);
    size_t n = g_nstreams;
    pthread_mutex_unlock(&g_stream_lock);
    return n;
}

void rz__dev_streams_forget_ctx(void *ctx) {
    pthread_mutex_lock(&g_stream_lock);
    for (size_t i = 0; i < g_nstreams; i++) {
        if (g_streams[i].ctx != ctx)
            continue;
        g_streams[i] = g_streams[--g_nstreams]; /* the stream went with the context */
        break;
    }
    pthread_mutex_unlock(&g_stream_lock);
}

int rz__dev_primary_active(int dev) {
    unsigned flags;
    int active = 0;
    if (rz__drv.cuDevicePrimaryCtxGetState == NULL ||
        rz__drv.cuDevicePrimaryCtxGetState(dev, &flags, &active) != RZCUDA_SUCCESS)
        return -1;
    return active != 0;
}

void *rz__dev_primary_ctx(int dev) {
    rzcu_context ctx = NULL;
    if (rz__dev_primary_active(dev) != 1 || rz__drv.cuDevicePrimaryCtxRetain == NULL ||
        rz__drv.cuDevicePrimaryCtxRelease_v2 == NULL)
        return NULL;
    /* Active: this retain only counts a reference (it creates nothing), and the release gives it back. */
    if (rz__drv.cuDevicePrimaryCtxRetain(&ctx, dev) != RZCUDA_SUCCESS)
        return NULL;
    rz__drv.cuDevicePrimaryCtxRelease_v2(dev);
    return ctx;
}

rzcu_result rz__dev_stream(void *ctx, rzcu_stream *out) { return stream_for(ctx ? ctx : rz__dev_current_ctx(), out); }

/* Make ctx current for the duration of a band operation (pushed only when it is not already current). */
static rzcu_result enter_ctx(void *ctx, int *pushed) {
    *pushed = 0;
    if (ctx == NULL || ctx == rz__dev_current_ctx())
        return RZCUDA_SUCCESS;
    rzcu_result r = rz__drv.cuCtxPushCurrent_v2((rzcu_context)ctx);
    if (r == RZCUDA_SUCCESS)
        *pushed = 1;
    return r;
}

static void leave_ctx(int pushed) {
    if (pushed) {
        rzcu_context ignored;
        rz__drv.cuCtxPopCurrent_v2(&ignored);
    }
}

rzcu_result rz__dev_enter(void *ctx, int *pushed) { return enter_ctx(ctx, pushed); }

void rz__dev_leave(int pushed) { leave_ctx(pushed); }

rzcu_stream rz__stream_of(rzcu_stream s, int per_thread) { return per_thread && s == NULL ? RZCU_STREAM_PER_THREAD : s; }

rzcu_result rz__dev_settle(void *ctx) {
    if (rz__drv.cuCtxSynchronize == NULL)
        return RZCUDA_ERROR_NOT_SUPPORTED;
    if (rz__sticky() != RZCUDA_SUCCESS)
        return rz__sticky(); /* nothing left to wait for: every call fails now (sticky.c) */
    /* Counted like a quiet section, never relaxed: the relaxed mode does not make a context synchronisation
     * legal beside a capture in that context. So during a capture the wait is left out. */
    if (!rz__capture_quiet_enter()) {
        rz__capture_quiet_leave();
        return RZCUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    int pushed;
    rzcu_result r = rz__sticky_note(enter_ctx(ctx, &pushed));
    if (r == RZCUDA_SUCCESS) {
        r = rz__sticky_note(rz__drv.cuCtxSynchronize());
        leave_ctx(pushed);
    }
    rz__capture_quiet_leave();
    return r;
}

/* A new zone's band: one memset on the library's stream of the current context, then one sync. Called
 * without the registry lock, so it must not touch the batch scratch. */
rzcu_result rz__dev_fill(rz_devptr_t p, uint8_t value, size_t bytes) {
    rzcu_stream s;
    if (rz__sticky() != RZCUDA_SUCCESS)
        return rz__sticky();
    rzcu_result r = stream_for(rz__dev_current_ctx(), &s);
    if (r == RZCUDA_SUCCESS)
        r = rz__drv.cuMemsetD8Async(p, value, bytes, s);
    if (r == RZCUDA_SUCCESS) {
        rzcu_capture_mode saved = rz__dev_quiet_begin(); /* the library's own stream */
        r = rz__drv.cuStreamSynchronize(s);
        rz__dev_quiet_end(saved);
    }
    return rz__sticky_note(r);
}
