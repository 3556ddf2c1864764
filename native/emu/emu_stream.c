/*
 * The emulated driver's stream engine: each stream's FIFO of operations (the op queue), its worker thread,
 * inline execution on idle streams, the legacy default stream's ordering, dependencies (cuStreamWaitEvent),
 * synchronisation, and CUDA_EMU_KERNEL_HOLD. Operations are made by the entry points (emu_op.c), recorded
 * instead when their stream is captured (emu_capture.c); stream handles are the stream table's
 * (emu_stream_table.c). How the engine works:
 *
 * Contexts and streams are slots of reserved tables (never reused), so a handle is validated by range and
 * magic without touching foreign memory. Each stream owns a FIFO of operations run by a worker thread
 * created on demand (it exits after a short idle time). Ordering between streams follows the legacy default
 * stream rules: an operation on the legacy stream waits for all work previously submitted to the blocking
 * streams of its context (including per-thread default streams), and an operation on a blocking stream
 * waits for all work previously submitted to the legacy stream. Submissions to one context are serialised
 * so these dependencies are consistent.
 *
 * Inline execution: an operation submitted to an idle stream (nothing queued or running on it) whose
 * dependencies are complete runs in the calling thread, before the call returns, when it is synchronous
 * (indistinguishable from running it on the worker and waiting) or when it is work a GPU's copy engines do
 * without any host thread: copies, memsets, batched copies and event records (see runs_without_host). So a
 * thread that is the only one running (a debugger resuming one thread with scheduler-locking) can still copy
 * on its own idle stream and synchronise; that path takes only short-held locks and never waits for another
 * thread. Kernels and host functions always go through the worker, so a program that forgets to synchronise
 * after them still sees the work pending. Workers are named "cuda-emu-s<N>" (N: the stream's table index).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "emu_engine.h"
#include "rz_annotate.h"


atomic_ullong emu_pending_ops; /* submitted, not yet emu_completed (queued or running inline) */

uint64_t emu_completed(struct CUstream_st *s)
{
    uint64_t c = atomic_load(&s->completed);
    RZ_ANNOTATE_HAPPENS_AFTER(&s->completed); /* helgrind: the work up to c is visible (rz_annotate.h) */
    return c;
}

/*
 * CUDA_EMU_KERNEL_HOLD: a launched kernel starts only after some thread has waited for unfinished device
 * work since the launch (the epoch counts such waits). A GPU may run a kernel that late when it is busy; the
 * emulator then shows every read of device memory that forgot to wait for the kernels before it.
 */
static pthread_mutex_t hold_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hold_cond = PTHREAD_COND_INITIALIZER;
static uint64_t hold_epoch;

uint64_t emu_hold_now(void)
{
    pthread_mutex_lock(&hold_mu);
    uint64_t e = hold_epoch;
    pthread_mutex_unlock(&hold_mu);
    return e;
}

static void hold_release(void)
{
    if (!emu_cfg.kernel_hold)
        return;
    pthread_mutex_lock(&hold_mu);
    hold_epoch++;
    pthread_cond_broadcast(&hold_cond);
    pthread_mutex_unlock(&hold_mu);
}

static void hold_until_waited(const struct op *op)
{
    pthread_mutex_lock(&hold_mu);
    while (hold_epoch == op->hold_epoch)
        pthread_cond_wait(&hold_cond, &hold_mu);
    pthread_mutex_unlock(&hold_mu);
}

void emu_wait_seq(struct CUstream_st *s, uint64_t seq)
{
    emu_host_wait(); /* by contract, also when the work has completed already */
    if (emu_completed(s) >= seq)
        return;
    hold_release(); /* this thread now waits for device work: held kernels may start */
    pthread_mutex_lock(&s->mu);
    while (emu_completed(s) < seq)
        pthread_cond_wait(&s->cond, &s->mu);
    pthread_mutex_unlock(&s->mu);
}

/*
 * The emulated copy engine. On a GPU, operations on different streams that touch the same device bytes at
 * once are the program's affair (the bytes end up as either wrote them; redzone's own stress test does this
 * on purpose, overrunning into a band while another thread scans it), but here they are host memmoves in two
 * threads, which ThreadSanitizer would report as data races in the emulator. So in a TSan build the device
 * side of a copy or memset is hidden from it, and the host side is still checked, explicitly, so that a race
 * on a host buffer (a staging area reused while a copy from it is queued) is still found.
 */
#ifdef __SANITIZE_THREAD__
void __tsan_read_range(void *addr, unsigned long size);
void __tsan_write_range(void *addr, unsigned long size);
void AnnotateIgnoreReadsBegin(const char *file, int line);
void AnnotateIgnoreReadsEnd(const char *file, int line);
void AnnotateIgnoreWritesBegin(const char *file, int line);
void AnnotateIgnoreWritesEnd(const char *file, int line);
#endif

static void dma_copy(void *dst, const void *src, size_t n)
{
#ifdef __SANITIZE_THREAD__
    bool ddev = emu_mem_is_device_address((uintptr_t)dst), sdev = emu_mem_is_device_address((uintptr_t)src);
    if (ddev || sdev) {
        if (!ddev)
            __tsan_write_range(dst, n);
        if (!sdev)
            __tsan_read_range((void *)(uintptr_t)src, n);
        AnnotateIgnoreReadsBegin(__FILE__, __LINE__);
        AnnotateIgnoreWritesBegin(__FILE__, __LINE__);
        memmove(dst, src, n);
        AnnotateIgnoreWritesEnd(__FILE__, __LINE__);
        AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
        return;
    }
#endif
    memmove(dst, src, n);
}

static void dma_set(void *dst, unsigned char value, size_t n)
{
#ifdef __SANITIZE_THREAD__
    if (emu_mem_is_device_address((uintptr_t)dst)) {
        AnnotateIgnoreWritesBegin(__FILE__, __LINE__);
        memset(dst, value, n);
        AnnotateIgnoreWritesEnd(__FILE__, __LINE__);
        return;
    }
#endif
    memset(dst, value, n);
}

/*
 * CUDA_EMU_STICKY_FAULTS: on a GPU a kernel that touches memory it may not (a guard page, an unmapped
 * address) does not kill the process: the process gets the sticky CUDA_ERROR_ILLEGAL_ADDRESS that every later
 * call returns, in every context (cuda.h: "the process must be terminated and relaunched"), and all queued
 * work is dropped. Here the kernel is host code, so its SIGSEGV or SIGBUS
 * is caught on the worker running it and turned into that error. A fault anywhere else goes to the handler
 * that was there before (or the default action).
 */
static _Thread_local sigjmp_buf *t_kernel_jmp;
static struct sigaction g_old_segv, g_old_bus;
static pthread_once_t g_fault_once = PTHREAD_ONCE_INIT;

static void kernel_fault(int sig, siginfo_t *info, void *uctx)
{
    if (t_kernel_jmp)
        siglongjmp(*t_kernel_jmp, 1);
    /* Not an emulated kernel: give the signal back to whoever handled it before and let it fault again. */
    sigaction(sig, sig == SIGSEGV ? &g_old_segv : &g_old_bus, NULL);
    (void)info;
    (void)uctx;
}

static void install_fault_handler(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = kernel_fault;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &g_old_segv);
    sigaction(SIGBUS, &sa, &g_old_bus);
}

static void run_kernel(struct op *op)
{
    if (!emu_cfg.sticky_faults) {
        op->kernel(&op->launch, op->kparams);
        emu_kernel_duration();
        return;
    }
    pthread_once(&g_fault_once, install_fault_handler);
    sigjmp_buf jmp;
    if (sigsetjmp(jmp, 1) == 0) {
        t_kernel_jmp = &jmp;
        op->kernel(&op->launch, op->kparams);
    } else {
        emu_set_sticky_error(RZCUDA_ERROR_ILLEGAL_ADDRESS);
    }
    t_kernel_jmp = NULL;
    emu_kernel_duration();
}

/* cuMemsetD16/D32 and the pitched memsets: the element's bytes (little-endian), row by row. */
static void pattern_set(const struct op *op)
{
    unsigned elem = op->elem ? op->elem : 1;
    uint32_t pattern = elem == 1 ? op->value : op->pattern;
    size_t rows = op->rows ? op->rows : 1, row_bytes = op->rows ? op->row_bytes : op->n;
#ifdef __SANITIZE_THREAD__
    AnnotateIgnoreWritesBegin(__FILE__, __LINE__);
#endif
    for (size_t r = 0; r < rows; r++) {
        unsigned char *row = (unsigned char *)op->dst + r * op->pitch;
        for (size_t i = 0; i + elem <= row_bytes; i += elem)
            memcpy(row + i, &pattern, elem);
    }
#ifdef __SANITIZE_THREAD__
    AnnotateIgnoreWritesEnd(__FILE__, __LINE__);
#endif
}

/* cuMemcpy2D/3D: row by row (rows may overlap neither side's next one: each is a memmove of its own). */
static void box_copy(const struct op *op)
{
    const struct copy_box *b = &op->box;
    for (size_t z = 0; z < b->depth; z++)
        for (size_t y = 0; y < b->height; y++)
            dma_copy((char *)op->dst + z * b->dst_slice + y * b->dst_pitch,
                     (const char *)op->src + z * b->src_slice + y * b->src_pitch, b->width);
}

static void execute(struct op *op)
{
    switch (op->kind) {
    case OP_NOP:
        break;
    case OP_COPY:
        dma_copy(op->dst, op->src, op->n);
        break;
    case OP_COPY3D:
        box_copy(op);
        break;
    case OP_SET:
        if (op->elem <= 1 && op->rows == 0)
            dma_set(op->dst, op->value, op->n);
        else
            pattern_set(op);
        break;
    case OP_HOST:
        op->fn(op->user_data);
        break;
    case OP_BATCH:
        if (!op->items) {
            for (size_t i = 0; i < op->nitems; i++)
                if (op->bsizes[i])
                    dma_copy((void *)(uintptr_t)op->bdsts[i], (const void *)(uintptr_t)op->bsrcs[i], op->bsizes[i]);
            break;
        }
        for (size_t i = 0; i < op->nitems; i++) {
            struct batch_item *it = &op->items[i];
            if (it->n)
                dma_copy(it->dst, it->snapshot ? it->snapshot : it->src, it->n);
        }
        break;
    case OP_FREE:
        emu_mem_free_pending(op->ptr);
        break;
    case OP_KERNEL:
        op->kernel(&op->launch, op->kparams);
        break;
    case OP_GALLOC:
    case OP_GFREE:
        break; /* applied by cuGraphLaunch, never queued */
    }
}

static void mark_completed_locked(struct CUstream_st *s, uint64_t seq)
{
    RZ_ANNOTATE_HAPPENS_BEFORE(&s->completed);
    atomic_store(&s->completed, seq);
    pthread_cond_broadcast(&s->cond);
}

/* Runs the stream's queue; with idle_wait, waits for more work until idle for WORKER_IDLE_NS. */
static void run_queue(struct CUstream_st *s, bool idle_wait)
{
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->head) {
            if (!idle_wait)
                goto out;
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += WORKER_IDLE_NS;
            if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
            }
            if (pthread_cond_timedwait(&s->cond, &s->mu, &ts) == ETIMEDOUT && !s->head)
                goto out;
        }
        struct op *op = s->head;
        s->head = op->next;
        if (!s->head)
            s->tail = NULL;
        /* an operation run inline by the submitting thread may still be in progress */
        while (emu_completed(s) + 1 != op->seq)
            pthread_cond_wait(&s->cond, &s->mu);
        pthread_mutex_unlock(&s->mu);
        for (size_t i = 0; i < op->ndeps; i++)
            emu_wait_seq(op->deps[i].s, op->deps[i].seq);
        if (op->after.s)
            emu_wait_seq(op->after.s, op->after.seq);
        if (op->kind == OP_KERNEL && emu_cfg.kernel_hold)
            hold_until_waited(op);
        /* After a sticky error (a kernel fault) all queued work is dropped, in every context, as on a GPU. */
        if (emu_sticky_error() == RZCUDA_SUCCESS)
            op->kind == OP_KERNEL ? run_kernel(op) : execute(op);
        uint64_t seq = op->seq;
        emu_free_op(op);
        pthread_mutex_lock(&s->mu);
        mark_completed_locked(s, seq);
        atomic_fetch_sub(&emu_pending_ops, 1);
    }
out:
    s->worker_running = false;
    pthread_mutex_unlock(&s->mu);
}

static void *worker_main(void *arg)
{
    /* 15 characters at most: "cuda-emu-s" and up to 5 digits (longer indices are truncated) */
    char name[16];
    snprintf(name, sizeof name, "cuda-emu-s%zu", (size_t)((struct CUstream_st *)arg - emu_stream_pool));
    pthread_setname_np(pthread_self(), name);
    run_queue(arg, true);
    return NULL;
}

/* Keeps the context's stream list to live streams and destroyed ones with pending work. */
static void compact_streams_locked(struct CUctx_st *ctx)
{
    size_t j = 0;
    for (size_t i = 0; i < ctx->nstreams; i++) {
        struct CUstream_st *t = ctx->streams[i];
        if (atomic_load(&t->destroyed) && emu_completed(t) >= t->submitted)
            continue;
        ctx->streams[j++] = t;
    }
    ctx->nstreams = j;
}

/*
 * Operations that run inline on an idle stream even when asynchronous: what a GPU does without a host thread
 * (its copy engines; an event record is a marker). Kernels and host functions run on the worker.
 */
static bool runs_without_host(enum op_kind kind)
{
    return kind == OP_COPY || kind == OP_COPY3D || kind == OP_SET || kind == OP_BATCH || kind == OP_NOP;
}

/*
 * Submits op to s (taking ownership). With wait, or for an operation runs_without_host allows, it runs in the
 * calling thread when s is idle and its dependencies are complete. With wait, returns once it has emu_completed. Returns CUDA_ERROR_OUT_OF_MEMORY
 * only when the operation could not be queued (nothing done). seq_out (optional): the operation's sequence
 * number on s (it has emu_completed once s->completed reaches it).
 */
rzcu_result emu_submit_seq(struct CUstream_st *s, struct op *op, bool wait, uint64_t *seq_out)
{
    return emu_submit_seq_ex(s, op, wait, seq_out, false, NULL);
}

rzcu_result emu_submit_seq_ex(struct CUstream_st *s, struct op *op, bool wait, uint64_t *seq_out, bool inline_only,
                                 struct op **retry)
{
    if (atomic_load(&s->capture))
        return emu_capture_record(s, op, wait); /* recorded into the graph, not run */
    if (wait)
        emu_host_wait(); /* a synchronous operation: returns once it (and what it waits for) completed */
    struct CUctx_st *ctx = s->ctx;
    size_t capacity = op->ndeps, nd = 0;
    pthread_mutex_lock(&ctx->mu);
    if (s->kind == STREAM_LEGACY)
        compact_streams_locked(ctx);
    bool implicit = s->kind == STREAM_LEGACY || !(s->flags & RZCU_STREAM_NON_BLOCKING);
    size_t needed = (implicit ? (s->kind == STREAM_LEGACY ? ctx->nstreams : 1) : 0) + (op->wait_for.s != NULL);
    if (needed > capacity) {
        struct op *bigger = realloc(op, sizeof *op + needed * sizeof(struct dep));
        if (!bigger) {
            pthread_mutex_unlock(&ctx->mu);
            op->ndeps = 0;
            emu_free_op(op);
            return RZCUDA_ERROR_OUT_OF_MEMORY;
        }
        op = bigger;
    }
    if (implicit) {
        if (s->kind == STREAM_LEGACY) {
            for (size_t i = 0; i < ctx->nstreams; i++) {
                struct CUstream_st *t = ctx->streams[i];
                if (t != s && !(t->flags & RZCU_STREAM_NON_BLOCKING) && emu_completed(t) < t->submitted)
                    op->deps[nd++] = (struct dep){t, t->submitted};
            }
        } else if (ctx->legacy && emu_completed(ctx->legacy) < ctx->legacy->submitted) {
            op->deps[nd++] = (struct dep){ctx->legacy, ctx->legacy->submitted};
        }
    }
    if (op->wait_for.s && emu_completed(op->wait_for.s) < op->wait_for.seq)
        op->deps[nd++] = op->wait_for; /* cuStreamWaitEvent: the event's work, maybe of another stream or context */
    op->ndeps = nd;
    pthread_mutex_lock(&s->mu);
    if (inline_only) {
        bool can = (wait || runs_without_host(op->kind)) && !s->head && emu_completed(s) == s->submitted;
        for (size_t i = 0; i < nd && can; i++)
            can = emu_completed(op->deps[i].s) >= op->deps[i].seq;
        can = can && (!op->after.s || emu_completed(op->after.s) >= op->after.seq);
        if (!can) {
            pthread_mutex_unlock(&s->mu);
            pthread_mutex_unlock(&ctx->mu);
            *retry = op;
            return RZCUDA_ERROR_NOT_READY;
        }
    }
    uint64_t seq = op->seq = ++s->submitted;
    if (seq_out)
        *seq_out = seq;
    bool run_inline = false;
    if ((wait || runs_without_host(op->kind)) && !s->head && emu_completed(s) + 1 == seq) {
        run_inline = true;
        for (size_t i = 0; i < nd && run_inline; i++)
            run_inline = emu_completed(op->deps[i].s) >= op->deps[i].seq;
        run_inline = run_inline && (!op->after.s || emu_completed(op->after.s) >= op->after.seq);
    }
    bool drain = false;
    atomic_fetch_add(&emu_pending_ops, 1); /* inline too: cuMemFree from another thread waits for it */
    if (!run_inline) {
        op->next = NULL;
        if (s->tail)
            s->tail->next = op;
        else
            s->head = op;
        s->tail = op;
        if (!s->worker_running) {
            s->worker_running = true;
            pthread_t th;
            pthread_attr_t attr;
            pthread_attr_init(&attr);
            pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
            if (pthread_create(&th, &attr, worker_main, s) != 0)
                drain = true; /* no thread: this caller runs the queue */
            pthread_attr_destroy(&attr);
        } else {
            pthread_cond_broadcast(&s->cond);
        }
    }
    pthread_mutex_unlock(&s->mu);
    pthread_mutex_unlock(&ctx->mu);
    if (run_inline) {
        execute(op);
        emu_free_op(op);
        pthread_mutex_lock(&s->mu);
        mark_completed_locked(s, seq);
        atomic_fetch_sub(&emu_pending_ops, 1);
        pthread_mutex_unlock(&s->mu);
        return RZCUDA_SUCCESS;
    }
    if (drain)
        run_queue(s, false);
    if (wait)
        emu_wait_seq(s, seq);
    return RZCUDA_SUCCESS;
}

rzcu_result emu_submit(struct CUstream_st *s, struct op *op, bool wait)
{
    return emu_submit_seq(s, op, wait, NULL);
}

void emu_stream_sync(struct CUstream_st *s)
{
    if (s->kind == STREAM_LEGACY) {
        /* an operation on the legacy stream: also waits for the blocking streams' prior work */
        struct op *op = emu_op_new(s->ctx, OP_NOP);
        if (op && emu_submit(s, op, true) == RZCUDA_SUCCESS)
            return;
        /* out of memory: wait for everything in the context instead */
    }
    pthread_mutex_lock(&s->mu);
    uint64_t target = s->submitted;
    pthread_mutex_unlock(&s->mu);
    emu_wait_seq(s, target);
}

void emu_ctx_sync(struct CUctx_st *ctx)
{
    emu_host_wait();
    pthread_mutex_lock(&ctx->mu);
    size_t n = ctx->nstreams;
    struct dep *snap = malloc((n ? n : 1) * sizeof *snap);
    if (!snap) {
        pthread_mutex_unlock(&ctx->mu);
        /* fall back: poll each stream until idle */
        for (;;) {
            pthread_mutex_lock(&ctx->mu);
            struct CUstream_st *busy = NULL;
            uint64_t target = 0;
            for (size_t i = 0; i < ctx->nstreams && !busy; i++)
                if (emu_completed(ctx->streams[i]) < ctx->streams[i]->submitted) {
                    busy = ctx->streams[i];
                    target = busy->submitted;
                }
            pthread_mutex_unlock(&ctx->mu);
            if (!busy)
                return;
            emu_wait_seq(busy, target);
        }
    }
    for (size_t i = 0; i < n; i++)
        snap[i] = (struct dep){ctx->streams[i], ctx->streams[i]->submitted};
    pthread_mutex_unlock(&ctx->mu);
    for (size_t i = 0; i < n; i++)
        emu_wait_seq(snap[i].s, snap[i].seq);
    free(snap);
}

void emu_sync_all_contexts(void)
{
    emu_host_wait();
    size_t n = atomic_load(&emu_nctx);
    for (size_t i = 0; i < n; i++) {
        struct CUctx_st *c = &emu_ctx_pool[i];
        if (atomic_load(&c->magic) == CTX_MAGIC && atomic_load(&c->alive))
            emu_ctx_sync(c);
    }
}

void emu_sync_outstanding(void)
{
    emu_host_wait();
    if (atomic_load(&emu_pending_ops))
        emu_sync_all_contexts();
}
