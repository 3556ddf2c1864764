/*
 * The emulated CUDA driver's entry points: initialisation, devices, contexts, streams, memory operations
 * (stream-ordered ones included), events and kernel launches (modules and functions are in emu_module.c).
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "emu_internal.h"
#include "rz_annotate.h"

#define CTX_MAGIC 0x43545831u
#define STREAM_MAGIC 0x5354524du
#define MAX_CONTEXTS ((size_t)1 << 16)
#define MAX_STREAMS ((size_t)1 << 20)
#define WORKER_IDLE_NS 200000000L

struct CUstream_st;

struct CUctx_st {
    _Atomic uint32_t magic;
    int device;
    bool primary;
    atomic_bool alive;
    unsigned refcount; /* primary contexts, under primary_mu */
    atomic_uint gen;   /* activations of a primary context */
    pthread_mutex_t mu; /* submission order and the stream list */
    struct CUstream_st **streams;
    size_t nstreams, cap;
    struct CUstream_st *legacy;
};

enum stream_kind { STREAM_USER, STREAM_LEGACY, STREAM_PER_THREAD };

enum op_kind { OP_NOP, OP_COPY, OP_SET, OP_HOST, OP_BATCH, OP_FREE, OP_KERNEL };

struct dep {
    struct CUstream_st *s;
    uint64_t seq;
};

struct batch_item {
    void *dst;
    const void *src;
    size_t n;
    void *snapshot; /* source read during the API call (CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL) */
};

struct op {
    struct op *next;
    uint64_t seq;
    enum op_kind kind;
    void *dst;
    const void *src;
    size_t n;
    unsigned char value;
    rzcu_host_fn fn;
    void *user_data;
    struct batch_item *items;
    size_t nitems;
    /* OP_BATCH run inline: the caller's arrays, used during the call only (items is NULL then) */
    rzcu_deviceptr *bdsts, *bsrcs;
    size_t *bsizes;
    rzcu_deviceptr ptr;          /* OP_FREE */
    cuda_emu_kernel_fn *kernel;  /* OP_KERNEL */
    cuda_emu_launch_t launch;
    void **kparams; /* pointers to the parameter copies, which follow them in the same block */
    uint64_t hold_epoch; /* OP_KERNEL under CUDA_EMU_KERNEL_HOLD: the wait epoch when it was launched */
    size_t ndeps;
    struct dep deps[];
};

struct CUstream_st {
    _Atomic uint32_t magic; /* STREAM_MAGIC while a valid user handle */
    struct CUctx_st *ctx;
    unsigned flags;
    enum stream_kind kind;
    pthread_mutex_t mu;
    pthread_cond_t cond;
    uint64_t submitted; /* under ctx->mu and mu */
    _Atomic uint64_t completed;
    struct op *head, *tail;
    bool worker_running;
    atomic_bool destroyed;
};

#define EVENT_MAGIC 0x45564e54u
#define MAX_EVENTS ((size_t)1 << 20)
#define EVENT_FLAGS 0x7u /* CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS */

struct CUevent_st {
    _Atomic uint32_t magic; /* EVENT_MAGIC while a valid handle */
    struct CUctx_st *ctx;
    unsigned gen;
    unsigned flags;
    pthread_mutex_t mu;
    struct CUstream_st *s; /* the captured work: s's operations up to seq; NULL before the first record */
    uint64_t seq;
};

static struct emu_table events = EMU_TABLE_INIT("event", struct CUevent_st, MAX_EVENTS);

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static rzcu_result init_result;
static struct CUctx_st *ctx_pool;
static atomic_size_t nctx;
static struct CUstream_st *stream_pool;
static atomic_size_t nstreams_total;
static struct CUctx_st *primary[CUDA_EMU_MAX_DEVICES];
static pthread_mutex_t primary_mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_ullong pending_ops; /* submitted, not yet completed (queued or running inline) */

/* Per-thread state: the context stack and the per-thread default streams, freed when the thread exits. */
struct per_thread_entry {
    struct CUctx_st *ctx;
    unsigned gen;
    struct CUstream_st *s;
};

struct thread_state {
    struct CUctx_st **stack;
    size_t depth, cap;
    struct per_thread_entry *pt;
    size_t pt_n, pt_cap;
};

/* initial-exec: the real driver's current-context lookup is a thread-local read, and so is this one */
static _Thread_local struct thread_state *tstate __attribute__((tls_model("initial-exec")));
static pthread_key_t tstate_key;
static pthread_once_t tstate_once = PTHREAD_ONCE_INIT;

static void tstate_free(void *p)
{
    struct thread_state *t = p;
    free(t->stack);
    free(t->pt);
    free(t);
    tstate = NULL;
}

static void tstate_key_create(void) { pthread_key_create(&tstate_key, tstate_free); }

/* NULL only when out of memory. */
static struct thread_state *thread_state(void)
{
    if (!tstate) {
        pthread_once(&tstate_once, tstate_key_create);
        struct thread_state *t = calloc(1, sizeof *t);
        if (!t)
            return NULL;
        pthread_setspecific(tstate_key, t);
        tstate = t;
    }
    return tstate;
}

/* The top of the calling thread's context stack, or NULL. */
static struct CUctx_st *stack_top(void)
{
    return tstate && tstate->depth ? tstate->stack[tstate->depth - 1] : NULL;
}

/* LeakSanitizer does not scan anonymous mappings: declare the handle tables as roots when it is present. */
extern void __lsan_register_root_region(const void *p, size_t size) __attribute__((weak));

/* ------------------------------------------------------------------------------------------------------ */
/*
 * The handle tables are large reservations that fill from the start: only the part in use is dumped to core
 * files (the rest is MADV_DONTDUMP), so a core of an emulated process stays small.
 */
static pthread_mutex_t dump_mu = PTHREAD_MUTEX_INITIALIZER;

static void make_dumpable(void *table, size_t *mark, size_t used_bytes)
{
    const size_t step = (size_t)64 << 10;
    pthread_mutex_lock(&dump_mu);
    if (used_bytes > *mark) {
        size_t next = (used_bytes + step - 1) / step * step;
        madvise((char *)table + *mark, next - *mark, MADV_DODUMP);
        *mark = next;
    }
    pthread_mutex_unlock(&dump_mu);
}

static size_t ctx_dump_mark, stream_dump_mark;

static void init_tables(void)
{
    ctx_pool = mmap(NULL, MAX_CONTEXTS * sizeof *ctx_pool, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    stream_pool = mmap(NULL, MAX_STREAMS * sizeof *stream_pool, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (ctx_pool == MAP_FAILED || stream_pool == MAP_FAILED) {
        fprintf(stderr, "cuda-emu: warning: cannot reserve handle tables\n");
        init_result = RZCUDA_ERROR_OUT_OF_MEMORY;
        return;
    }
    madvise(ctx_pool, MAX_CONTEXTS * sizeof *ctx_pool, MADV_DONTDUMP);
    madvise(stream_pool, MAX_STREAMS * sizeof *stream_pool, MADV_DONTDUMP);
    if (__lsan_register_root_region) {
        __lsan_register_root_region(ctx_pool, MAX_CONTEXTS * sizeof *ctx_pool);
        __lsan_register_root_region(stream_pool, MAX_STREAMS * sizeof *stream_pool);
    }
    init_result = emu_mem_init();
    if (init_result == RZCUDA_SUCCESS && !(emu_modules_init() && emu_table_init(&events)))
        init_result = RZCUDA_ERROR_OUT_OF_MEMORY;
}

static bool valid_device(rzcu_device dev) { return dev >= 0 && dev < emu_cfg.ndevices; }

int emu_context_device(struct CUctx_st *ctx) { return ctx->device; }
unsigned emu_context_gen(struct CUctx_st *ctx) { return atomic_load(&ctx->gen); }

bool emu_context_live(struct CUctx_st *ctx, unsigned gen)
{
    return ctx && atomic_load(&ctx->magic) == CTX_MAGIC && atomic_load(&ctx->alive) && atomic_load(&ctx->gen) == gen;
}

/* A context handle: a slot of the context table, or NULL. */
static struct CUctx_st *ctx_from_handle(rzcu_context h)
{
    uintptr_t p = (uintptr_t)h, base = (uintptr_t)ctx_pool;
    if (!ctx_pool || p < base || p >= base + atomic_load(&nctx) * sizeof *ctx_pool ||
        (p - base) % sizeof *ctx_pool)
        return NULL;
    struct CUctx_st *c = (struct CUctx_st *)h;
    return atomic_load(&c->magic) == CTX_MAGIC ? c : NULL;
}

static rzcu_result current_ctx(struct CUctx_st **out)
{
    struct CUctx_st *c = stack_top();
    if (!c)
        return RZCUDA_ERROR_INVALID_CONTEXT;
    if (!atomic_load(&c->alive))
        return RZCUDA_ERROR_CONTEXT_IS_DESTROYED;
    *out = c;
    return RZCUDA_SUCCESS;
}

static bool stack_push(struct CUctx_st *c)
{
    struct thread_state *t = thread_state();
    if (!t)
        return false;
    if (t->depth == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 8;
        struct CUctx_st **v = realloc(t->stack, cap * sizeof *v);
        if (!v)
            return false;
        t->stack = v;
        t->cap = cap;
    }
    t->stack[t->depth++] = c;
    return true;
}

static struct CUctx_st *stack_pop(void)
{
    return tstate && tstate->depth ? tstate->stack[--tstate->depth] : NULL;
}

rzcu_result emu_current_ctx(struct CUctx_st **out) { return current_ctx(out); }

/* ------------------------------------------------------------------------------------------------------ */
/* streams */

static struct CUstream_st *stream_new(struct CUctx_st *ctx, unsigned flags, enum stream_kind kind)
{
    size_t idx = atomic_fetch_add(&nstreams_total, 1);
    if (idx >= MAX_STREAMS)
        return NULL;
    make_dumpable(stream_pool, &stream_dump_mark, (idx + 1) * sizeof *stream_pool);
    struct CUstream_st *s = &stream_pool[idx];
    s->ctx = ctx;
    s->flags = flags;
    s->kind = kind;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cond, NULL);
    pthread_mutex_lock(&ctx->mu);
    if (ctx->nstreams == ctx->cap) {
        size_t cap = ctx->cap ? ctx->cap * 2 : 8;
        struct CUstream_st **v = realloc(ctx->streams, cap * sizeof *v);
        if (!v) {
            pthread_mutex_unlock(&ctx->mu);
            atomic_store(&s->destroyed, true);
            return NULL;
        }
        ctx->streams = v;
        ctx->cap = cap;
    }
    ctx->streams[ctx->nstreams++] = s;
    pthread_mutex_unlock(&ctx->mu);
    if (kind == STREAM_USER)
        atomic_store(&s->magic, STREAM_MAGIC);
    return s;
}

static uint64_t completed(struct CUstream_st *s)
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

static uint64_t hold_now(void)
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

static void wait_seq(struct CUstream_st *s, uint64_t seq)
{
    if (completed(s) >= seq)
        return;
    hold_release(); /* this thread now waits for device work: held kernels may start */
    pthread_mutex_lock(&s->mu);
    while (completed(s) < seq)
        pthread_cond_wait(&s->cond, &s->mu);
    pthread_mutex_unlock(&s->mu);
}

static void free_op(struct op *op)
{
    for (size_t i = 0; op->items && i < op->nitems; i++)
        free(op->items[i].snapshot);
    free(op->items);
    free(op->kparams);
    free(op);
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

static void execute(struct op *op)
{
    switch (op->kind) {
    case OP_NOP:
        break;
    case OP_COPY:
        dma_copy(op->dst, op->src, op->n);
        break;
    case OP_SET:
        dma_set(op->dst, op->value, op->n);
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
        while (completed(s) + 1 != op->seq)
            pthread_cond_wait(&s->cond, &s->mu);
        pthread_mutex_unlock(&s->mu);
        for (size_t i = 0; i < op->ndeps; i++)
            wait_seq(op->deps[i].s, op->deps[i].seq);
        if (op->kind == OP_KERNEL && emu_cfg.kernel_hold)
            hold_until_waited(op);
        execute(op);
        uint64_t seq = op->seq;
        free_op(op);
        pthread_mutex_lock(&s->mu);
        mark_completed_locked(s, seq);
        atomic_fetch_sub(&pending_ops, 1);
    }
out:
    s->worker_running = false;
    pthread_mutex_unlock(&s->mu);
}

static void *worker_main(void *arg)
{
    /* 15 characters at most: "cuda-emu-s" and up to 5 digits (longer indices are truncated) */
    char name[16];
    snprintf(name, sizeof name, "cuda-emu-s%zu", (size_t)((struct CUstream_st *)arg - stream_pool));
    pthread_setname_np(pthread_self(), name);
    run_queue(arg, true);
    return NULL;
}

static struct op *op_new(struct CUctx_st *ctx, enum op_kind kind)
{
    /* room for a dependency on every stream of the context; sized again under ctx->mu in submit */
    pthread_mutex_lock(&ctx->mu);
    size_t n = ctx->nstreams + 1;
    pthread_mutex_unlock(&ctx->mu);
    struct op *op = calloc(1, sizeof *op + n * sizeof(struct dep));
    if (op) {
        op->kind = kind;
        op->ndeps = n; /* capacity until submit */
    }
    return op;
}

/* Keeps the context's stream list to live streams and destroyed ones with pending work. */
static void compact_streams_locked(struct CUctx_st *ctx)
{
    size_t j = 0;
    for (size_t i = 0; i < ctx->nstreams; i++) {
        struct CUstream_st *t = ctx->streams[i];
        if (atomic_load(&t->destroyed) && completed(t) >= t->submitted)
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
    return kind == OP_COPY || kind == OP_SET || kind == OP_BATCH || kind == OP_NOP;
}

/*
 * Submits op to s (taking ownership). With wait, or for an operation runs_without_host allows, it runs in the
 * calling thread when s is idle and its dependencies are complete. With wait, returns once it has completed. Returns CUDA_ERROR_OUT_OF_MEMORY
 * only when the operation could not be queued (nothing done). seq_out (optional): the operation's sequence
 * number on s (it has completed once s->completed reaches it).
 */
/* inline_only: run op now if it can run inline; otherwise queue nothing and return CUDA_ERROR_NOT_READY with
 * *retry set to op (which may have moved), for the caller to prepare it for queueing and submit again. */
static rzcu_result submit_seq_ex(struct CUstream_st *s, struct op *op, bool wait, uint64_t *seq_out, bool inline_only,
                                 struct op **retry);

static rzcu_result submit_seq(struct CUstream_st *s, struct op *op, bool wait, uint64_t *seq_out)
{
    return submit_seq_ex(s, op, wait, seq_out, false, NULL);
}

static rzcu_result submit_seq_ex(struct CUstream_st *s, struct op *op, bool wait, uint64_t *seq_out, bool inline_only,
                                 struct op **retry)
{
    struct CUctx_st *ctx = s->ctx;
    size_t capacity = op->ndeps, nd = 0;
    pthread_mutex_lock(&ctx->mu);
    if (s->kind == STREAM_LEGACY)
        compact_streams_locked(ctx);
    if (s->kind == STREAM_LEGACY || !(s->flags & RZCU_STREAM_NON_BLOCKING)) {
        size_t needed = s->kind == STREAM_LEGACY ? ctx->nstreams : 1;
        if (needed > capacity) {
            struct op *bigger = realloc(op, sizeof *op + needed * sizeof(struct dep));
            if (!bigger) {
                pthread_mutex_unlock(&ctx->mu);
                op->ndeps = 0;
                free_op(op);
                return RZCUDA_ERROR_OUT_OF_MEMORY;
            }
            op = bigger;
        }
        if (s->kind == STREAM_LEGACY) {
            for (size_t i = 0; i < ctx->nstreams; i++) {
                struct CUstream_st *t = ctx->streams[i];
                if (t != s && !(t->flags & RZCU_STREAM_NON_BLOCKING) && completed(t) < t->submitted)
                    op->deps[nd++] = (struct dep){t, t->submitted};
            }
        } else if (ctx->legacy && completed(ctx->legacy) < ctx->legacy->submitted) {
            op->deps[nd++] = (struct dep){ctx->legacy, ctx->legacy->submitted};
        }
    }
    op->ndeps = nd;
    pthread_mutex_lock(&s->mu);
    if (inline_only) {
        bool can = (wait || runs_without_host(op->kind)) && !s->head && completed(s) == s->submitted;
        for (size_t i = 0; i < nd && can; i++)
            can = completed(op->deps[i].s) >= op->deps[i].seq;
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
    if ((wait || runs_without_host(op->kind)) && !s->head && completed(s) + 1 == seq) {
        run_inline = true;
        for (size_t i = 0; i < nd && run_inline; i++)
            run_inline = completed(op->deps[i].s) >= op->deps[i].seq;
    }
    bool drain = false;
    atomic_fetch_add(&pending_ops, 1); /* inline too: cuMemFree from another thread waits for it */
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
        free_op(op);
        pthread_mutex_lock(&s->mu);
        mark_completed_locked(s, seq);
        atomic_fetch_sub(&pending_ops, 1);
        pthread_mutex_unlock(&s->mu);
        return RZCUDA_SUCCESS;
    }
    if (drain)
        run_queue(s, false);
    if (wait)
        wait_seq(s, seq);
    return RZCUDA_SUCCESS;
}

static rzcu_result submit(struct CUstream_st *s, struct op *op, bool wait)
{
    return submit_seq(s, op, wait, NULL);
}

static void stream_sync(struct CUstream_st *s)
{
    if (s->kind == STREAM_LEGACY) {
        /* an operation on the legacy stream: also waits for the blocking streams' prior work */
        struct op *op = op_new(s->ctx, OP_NOP);
        if (op && submit(s, op, true) == RZCUDA_SUCCESS)
            return;
        /* out of memory: wait for everything in the context instead */
    }
    pthread_mutex_lock(&s->mu);
    uint64_t target = s->submitted;
    pthread_mutex_unlock(&s->mu);
    wait_seq(s, target);
}

static void ctx_sync(struct CUctx_st *ctx)
{
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
                if (completed(ctx->streams[i]) < ctx->streams[i]->submitted) {
                    busy = ctx->streams[i];
                    target = busy->submitted;
                }
            pthread_mutex_unlock(&ctx->mu);
            if (!busy)
                return;
            wait_seq(busy, target);
        }
    }
    for (size_t i = 0; i < n; i++)
        snap[i] = (struct dep){ctx->streams[i], ctx->streams[i]->submitted};
    pthread_mutex_unlock(&ctx->mu);
    for (size_t i = 0; i < n; i++)
        wait_seq(snap[i].s, snap[i].seq);
    free(snap);
}

static void sync_all_contexts(void)
{
    size_t n = atomic_load(&nctx);
    for (size_t i = 0; i < n; i++) {
        struct CUctx_st *c = &ctx_pool[i];
        if (atomic_load(&c->magic) == CTX_MAGIC && atomic_load(&c->alive))
            ctx_sync(c);
    }
}

void emu_sync_outstanding(void)
{
    if (atomic_load(&pending_ops))
        sync_all_contexts();
}

static struct CUstream_st *per_thread_stream(struct CUctx_st *ctx)
{
    struct thread_state *t = thread_state();
    if (!t)
        return NULL;
    unsigned gen = atomic_load(&ctx->gen);
    for (size_t i = 0; i < t->pt_n; i++)
        if (t->pt[i].ctx == ctx) {
            if (t->pt[i].gen == gen && !atomic_load(&t->pt[i].s->destroyed))
                return t->pt[i].s;
            struct CUstream_st *s = stream_new(ctx, RZCU_STREAM_DEFAULT, STREAM_PER_THREAD);
            if (s)
                t->pt[i] = (struct per_thread_entry){ctx, gen, s};
            return s;
        }
    if (t->pt_n == t->pt_cap) {
        size_t cap = t->pt_cap ? t->pt_cap * 2 : 4;
        struct per_thread_entry *m = realloc(t->pt, cap * sizeof *m);
        if (!m)
            return NULL;
        t->pt = m;
        t->pt_cap = cap;
    }
    struct CUstream_st *s = stream_new(ctx, RZCU_STREAM_DEFAULT, STREAM_PER_THREAD);
    if (s)
        t->pt[t->pt_n++] = (struct per_thread_entry){ctx, gen, s};
    return s;
}

/* A user stream handle: a live slot of the stream table. */
static struct CUstream_st *stream_from_handle(rzcu_stream h)
{
    uintptr_t p = (uintptr_t)h, base = (uintptr_t)stream_pool;
    if (!stream_pool || p < base || p >= base + atomic_load(&nstreams_total) * sizeof *stream_pool ||
        (p - base) % sizeof *stream_pool)
        return NULL;
    struct CUstream_st *s = (struct CUstream_st *)h;
    if (atomic_load(&s->magic) != STREAM_MAGIC || atomic_load(&s->destroyed) || !atomic_load(&s->ctx->alive))
        return NULL;
    return s;
}

/* Resolves a stream argument; NULL is the legacy stream, or the per-thread stream for _ptsz/_ptds calls. */
static rzcu_result resolve_stream(rzcu_stream h, bool per_thread, struct CUctx_st *ctx, struct CUstream_st **out)
{
    if (!h)
        h = per_thread ? RZCU_STREAM_PER_THREAD : RZCU_STREAM_LEGACY;
    if (h == RZCU_STREAM_LEGACY || h == RZCU_STREAM_PER_THREAD) {
        if (!ctx)
            CHECK(current_ctx(&ctx));
        struct CUstream_st *s = h == RZCU_STREAM_LEGACY ? ctx->legacy : per_thread_stream(ctx);
        if (!s)
            return RZCUDA_ERROR_OUT_OF_MEMORY;
        *out = s;
        return RZCUDA_SUCCESS;
    }
    struct CUstream_st *s = stream_from_handle(h);
    if (!s)
        return RZCUDA_ERROR_INVALID_HANDLE;
    *out = s;
    return RZCUDA_SUCCESS;
}

/* ------------------------------------------------------------------------------------------------------ */
/* contexts */

static struct CUctx_st *ctx_new(int device, bool is_primary)
{
    size_t idx = atomic_fetch_add(&nctx, 1);
    if (idx >= MAX_CONTEXTS)
        return NULL;
    make_dumpable(ctx_pool, &ctx_dump_mark, (idx + 1) * sizeof *ctx_pool);
    struct CUctx_st *c = &ctx_pool[idx];
    c->device = device;
    c->primary = is_primary;
    pthread_mutex_init(&c->mu, NULL);
    atomic_store(&c->magic, CTX_MAGIC);
    return c;
}

static bool ctx_activate(struct CUctx_st *c)
{
    atomic_fetch_add(&c->gen, 1);
    c->legacy = stream_new(c, RZCU_STREAM_DEFAULT, STREAM_LEGACY);
    if (!c->legacy)
        return false;
    atomic_store(&c->alive, true);
    return true;
}

/* Completes all work, then releases the context's streams and memory. */
static void ctx_teardown(struct CUctx_st *c)
{
    ctx_sync(c);
    pthread_mutex_lock(&c->mu);
    atomic_store(&c->alive, false);
    for (size_t i = 0; i < c->nstreams; i++) {
        atomic_store(&c->streams[i]->magic, 0);
        atomic_store(&c->streams[i]->destroyed, true);
    }
    c->nstreams = 0;
    c->legacy = NULL;
    pthread_mutex_unlock(&c->mu);
    emu_mem_free_context(c);
    emu_host_free_context(c);
}

/* ------------------------------------------------------------------------------------------------------ */
/* initialisation and devices */

EMU_API rzcu_result cuInit(unsigned int flags)
{
    ENTER_NOINIT(cuInit);
    if (flags != 0)
        return RZCUDA_ERROR_INVALID_VALUE;
    pthread_once(&init_once, init_tables);
    if (init_result != RZCUDA_SUCCESS)
        return init_result;
    emu_set_initialized();
    emu_note_init();
    return RZCUDA_SUCCESS;
}

EMU_API rzcu_result cuDriverGetVersion(int *version)
{
    ENTER_NOINIT(cuDriverGetVersion);
    if (!version)
        return RZCUDA_ERROR_INVALID_VALUE;
    *version = CUDA_EMU_DRIVER_VERSION;
    return RZCUDA_SUCCESS;
}

EMU_API rzcu_result cuDeviceGet(rzcu_device *dev, int ordinal)
{
    ENTER(cuDeviceGet);
    if (!dev)
        return RZCUDA_ERROR_INVALID_VALUE;
    if (!valid_device(ordinal))
        return RZCUDA_ERROR_INVALID_DEVICE;
    *dev = ordinal;
    return RZCUDA_SUCCESS;
}

EMU_API rzcu_result cuDeviceGetCount(int *count)
{
    ENTER(cuDeviceGetCount);
    if (!count)
        return RZCUDA_ERROR_INVALID_VALUE;
    *count = emu_cfg.ndevices;
    return RZCUDA_SUCCESS;
}

EMU_API rzcu_result cuDeviceGetName(char *name, int len, rzcu_device dev)
{
    ENTER(cuDeviceGetName);
    if (!name || len <= 0)
        return RZCUDA_ERROR_INVALID_VALUE;
    if (!valid_device(dev))
        return RZCUDA_ERROR_INVALID_DEVICE;
    snprintf(name, (size_t)len, "redzone emulated device %d", dev);
    return RZCUDA_SUCCESS;
}

/* Values of an H100-class device (compute capability 9.0). */
static bool device_attribute(rzcu_device_attribute attr, int dev, int *out)
{
    static const struct {
        unsigned attr;
        int value;
    } table[] = {
        {1, 1024},       /* MAX_THREADS_PER_BLOCK */
        {2, 1024},       {3, 1024}, {4, 64},           /* MAX_BLOCK_DIM_X/Y/Z */
        {5, 2147483647}, {6, 65535}, {7, 65535},       /* MAX_GRID_DIM_X/Y/Z */
        {8, 49152},      /* MAX_SHARED_MEMORY_PER_BLOCK */
        {9, 65536},      /* TOTAL_CONSTANT_MEMORY */
        {10, 32},        /* WARP_SIZE */
        {11, 2147483647}, /* MAX_PITCH */
        {12, 65536},     /* MAX_REGISTERS_PER_BLOCK */
        {13, 1980000},   /* CLOCK_RATE (kHz) */
        {14, 512},       /* TEXTURE_ALIGNMENT */
        {15, 1},         /* GPU_OVERLAP */
        {16, 132},       /* MULTIPROCESSOR_COUNT */
        {17, 0},         /* KERNEL_EXEC_TIMEOUT */
        {18, 0},         /* INTEGRATED */
        {19, 1},         /* CAN_MAP_HOST_MEMORY */
        {20, 0},         /* COMPUTE_MODE (default) */
        {30, 512},       /* SURFACE_ALIGNMENT */
        {31, 1},         /* CONCURRENT_KERNELS */
        {32, 0},         /* ECC_ENABLED */
        {34, 0},         /* PCI_DEVICE_ID */
        {35, 0},         /* TCC_DRIVER */
        {36, 2619000},   /* MEMORY_CLOCK_RATE (kHz) */
        {37, 5120},      /* GLOBAL_MEMORY_BUS_WIDTH */
        {38, 52428800},  /* L2_CACHE_SIZE */
        {39, 2048},      /* MAX_THREADS_PER_MULTIPROCESSOR */
        {40, 3},         /* ASYNC_ENGINE_COUNT */
        {41, 1},         /* UNIFIED_ADDRESSING */
        {50, 0},         /* PCI_DOMAIN_ID */
        {51, 32},        /* TEXTURE_PITCH_ALIGNMENT */
        {75, 9},         /* COMPUTE_CAPABILITY_MAJOR */
        {76, 0},         /* COMPUTE_CAPABILITY_MINOR */
        {78, 1},         /* STREAM_PRIORITIES_SUPPORTED */
        {79, 1},         /* GLOBAL_L1_CACHE_SUPPORTED */
        {80, 1},         /* LOCAL_L1_CACHE_SUPPORTED */
        {81, 233472},    /* MAX_SHARED_MEMORY_PER_MULTIPROCESSOR */
        {82, 65536},     /* MAX_REGISTERS_PER_MULTIPROCESSOR */
        {83, 1},         /* MANAGED_MEMORY */
        {84, 0},         /* MULTI_GPU_BOARD */
        {85, 0},         /* MULTI_GPU_BOARD_GROUP_ID */
        {86, 0},         /* HOST_NATIVE_ATOMIC_SUPPORTED */
        {88, 0},         /* PAGEABLE_MEMORY_ACCESS */
        {89, 1},         /* CONCURRENT_MANAGED_ACCESS */
        {90, 1},         /* COMPUTE_PREEMPTION_SUPPORTED */
        {95, 1},         /* COOPERATIVE_LAUNCH */
        {97, 232448},    /* MAX_SHARED_MEMORY_PER_BLOCK_OPTIN */
        {99, 1},         /* HOST_REGISTER_SUPPORTED */
        {106, 32},       /* MAX_BLOCKS_PER_MULTIPROCESSOR */
        {115, 1},        /* MEMORY_POOLS_SUPPORTED */
    };
    if (attr == 33) { /* PCI_BUS_ID */
        *out = dev + 1;
        return true;
    }
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (table[i].attr == attr) {
            *out = table[i].value;
            return true;
        }
    return false;
}

EMU_API rzcu_result cuDeviceGetAttribute(int *pi, rzcu_device_attribute attrib, rzcu_device dev)
{
    ENTER(cuDeviceGetAttribute);
    if (!pi)
        return RZCUDA_ERROR_INVALID_VALUE;
    if (!valid_device(dev))
        return RZCUDA_ERROR_INVALID_DEVICE;
    return device_attribute(attrib, dev, pi) ? RZCUDA_SUCCESS : RZCUDA_ERROR_INVALID_VALUE;
}

EMU_API rzcu_result cuDeviceTotalMem_v2(size_t *bytes, rzcu_device dev)
{
    ENTER(cuDeviceTotalMem_v2);
    if (!bytes)
        return RZCUDA_ERROR_INVALID_VALUE;
    if (!valid_device(dev))
        return RZCUDA_ERROR_INVALID_DEVICE;
    *bytes = emu_cfg.mem_bytes;
    return RZCUDA_SUCCESS;
}

/* ------------------------------------------------------------------------------------------------------ */
/* contexts */

EMU_API rzcu_result cuDevicePrimaryCtxRetain(rzcu_context *pctx, rzcu_device dev)
{
    ENTER(cuDevicePrimaryCtxRetain);
    if (!pctx)
        return RZCUDA_ERROR_INVALID_VALUE;
    if (!valid_device(dev))
        return RZCUDA_ERROR_INVALID_DEVICE;
    rzcu_result r = RZCUDA_SUCCESS;
    pthread_mutex_lock(&primary_mu);
    if (!primary[dev])
        primary[dev] = ctx_new(dev, true);
    struct CUctx_st *c = primary[dev];
    if (!c)
        r = RZCUDA_ERROR_OUT_OF_MEMORY;
    else if (c->refcount == 0 && !ctx_activate(c))
        r = RZCUDA_ERROR_OUT_OF_MEMORY;
    else {
        c->refcount++;
        *pctx = c;
    }
    pthread_mutex_unlock(&primary_mu);
    return r;
}

EMU_API rzcu_result cuDevicePrimaryCtxRelease_v2(rzcu_device dev)
{
    ENTER(cuDevicePrimaryCtxRelease_v2);
    if (!valid_device(dev))
        return RZCUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&primary_mu);
    struct CUctx_st *c = primary[dev];
    if (!c || c->refcount == 0) {
        pthread_mutex_unlock(&primary_mu);
        return RZCUDA_ERROR_INVALID_CONTEXT;
    }
    if (--c->refcount == 0)
        ctx_teardown(c); /* the handle stays; a later retain reactivates it */
    pthread_mutex_unlock(&primary_mu);
    return RZCUDA_SUCCESS;
}

EMU_API rzcu_result cuCtxCreate_v4(rzcu_context *pctx, struct CUctxCreateParams_st *params, unsigned int flags,
                                   rzcu_device dev)
{
    ENTER(cuCtxCreate_v4);
    (void)params; /* execution affinity / CIG parameters: accepted and ignored */
    if (!pctx || (flags & ~0xFFu))
        return RZCUDA_ERROR_INVALID_VALUE;
    if (!valid_device(dev))
        return RZCUDA_ERROR_INVALID_DEVICE;
    struct CUctx_st *c = ctx_new(dev, false);
    if (!c || !ctx_activate(c) || !stack_push(c)) {
        if (c)
            ctx_teardown(c);
        return RZCUDA_ERROR_OUT_OF_MEMORY;
    }
    *pctx = c;
    return RZCUDA_SUCCESS;
}

EMU_API rzcu_result cuCtxDestroy_v2(rzcu_context ctx)
{
    ENTER(cuCtxDestroy_v2);
    if (!ctx)
        return RZCUDA_ERROR_INVALID_VALUE;
    struct CUctx_st *c = ctx_from_handle(ctx);
    if (!c || c->primary || !atomic_load(&c->alive))
        return RZCUDA_ERROR_INVALID_CONTEXT;
    ctx_teardown(c);
    if (stack_top() == c)
        stack_pop();
    return RZCUDA_SUCCESS;
}

EMU_API rzcu_result cuCtxGetCurrent(rzcu_context *pctx)
{
    ENTER(cuCtxGetCurrent);
    if (!pctx)
        return RZCUDA_ERROR_INVALID_VALUE;
    *pctx = stack_top();
    return RZCUDA_SUCCESS;
}

/* A handle that may become current: any primary context handle, or a live created context. */
static struct CUctx_st *settable_ctx(rzcu_context ctx)
{
    struct CUctx_st *c = ctx_from_handle(ctx);
    if (!c || (!c->primary && !atomic_load(&c->alive)))
        return NULL;
    return c;
}

EMU_API rzcu_result cuCtxSetCurrent(rzcu_context ctx)
{
    ENTER(cuCtxSetCurrent);
    if (!ctx) {
        stack_pop();
        return RZCUDA_SUCCESS;
    }
    struct CUctx_st *c = settable_ctx(ctx);
    if (!c)
        return RZCUDA_ERROR_INVALID_CONTEXT;
    if (stack_top())
        tstate->stack[tstate->depth - 1] = c;
    else if (!stack_push(c))
        return RZCUDA_ERROR_OUT_OF_MEMORY;
    return RZCUDA_SUCCESS;
}

EMU_API rzcu_result cuCtxPushCurrent_v2(rzcu_context ctx)
{
    ENTER(cuCtxPushCurrent_v2);
    struct CUctx_st *c = settable_ctx(ctx);
    if (!c)
        return RZCUDA_ERROR_INVALID_CONTEXT;
    return stack_push(c) ? RZCUDA_SUCCESS : RZCUDA_ERROR_OUT_OF_MEMORY;
}

EMU_API rzcu_result cuCtxPopCurrent_v2(rzcu_context *pctx)
{
    ENTER(cuCtxPopCurrent_v2);
    struct CUctx_st *c = stack_pop();
    if (!c)
        return RZCUDA_ERROR_INVALID_CONTEXT;
    if (pctx)
        *pctx = c;
    return RZCUDA_SUCCESS;
}

/* ctx NULL: the current context. */
static rzcu_result ctx_or_current(rzcu_context ctx, struct CUctx_st **out)
{
    if (!ctx)
        return current_ctx(out);
    struct CUctx_st *c = ctx_from_handle(ctx);
    if (!c)
        return RZCUDA_ERROR_INVALID_CONTEXT;
    if (!atomic_load(&c->alive))
        return RZCUDA_ERROR_CONTEXT_IS_DESTROYED;
    *out = c;
    return RZCUDA_SUCCESS;
}

EMU_API rzcu_result cuCtxGetDevice(rzcu_device *dev)
{
    ENTER(cuCtxGetDevice);
    struct CUctx_st *c;
    CHECK(current_ctx(&c));
    if (!dev)
        return RZCUDA_ERROR_INVALID_VALUE;
    *dev = c->device;
    return RZCUDA_SUCCESS;
}

EMU_API rzcu_result cuCtxGetDevice_v2(rzcu_device *dev, rzcu_context ctx)
{
    ENTER(cuCtxGetDevice_v2);
    struct CUctx_st *c;
    CHECK(ctx_or_current(ctx, &c));
    if (!dev)
        return RZCUDA_ERROR_INVALID_VALUE;
    *dev = c->device;
    return RZCUDA_SUCCESS;
}

EMU_API rzcu_result cuCtxSynchronize(void)
{
    ENTER(cuCtxSynchronize);
    struct CUctx_st *c;
    CHECK(current_ctx(&c));
    ctx_sync(c);
    return RZCUDA_SUCCESS;
}

EMU_API rzcu_result cuCtxSynchronize_v2(rzcu_context ctx)
{
    ENTER(cuCtxSynchronize_v2);
    struct CUctx_st *c;
    CHECK(ctx_or_current(ctx, &c));
    ctx_sync(c);
    return RZCUDA_SUCCESS;
}

/* ------------------------------------------------------------------------------------------------------ */
/* memory management */

EMU_API rzcu_result cuMemAlloc_v2(rzcu_deviceptr *dptr, size_t bytesize)
{
    ENTER(cuMemAlloc_v2);
    struct CUctx_st *c;
    CHECK(current_ctx(&c));
    if (!dptr || bytesize == 0)
        return RZCUDA_ERROR_INVALID_VALUE;
    return emu_mem_alloc(c, c->device, bytesize, dptr);
}

/*
 * The pitch is the width rounded up to CUDA_EMU_PITCH_ALIGN. A width above the device's MAX_PITCH, or a
 * pitch * height that overflows, is CUDA_ERROR_INVALID_VALUE.
 */
EMU_API rzcu_result cuMemAllocPitch_v2(rzcu_deviceptr *dptr, size_t *pitch, size_t width_bytes, size_t height,
                                       unsigned int element_bytes)
{
    ENTER(cuMemAllocPitch_v2);
    struct CUctx_st *c;
    CHECK(current_ctx(&c));
    if (!dptr || !pitch || width_bytes == 0 || height == 0 || width_bytes > 2147483647u)
        return RZCUDA_ERROR_INVALID_VALUE;
    if (element_bytes != 4 && element_bytes != 8 && element_bytes != 16)
        return RZCUDA_ERROR_INVALID_VALUE;
    size_t p = (width_bytes + CUDA_EMU_PITCH_ALIGN - 1) / CUDA_EMU_PITCH_ALIGN * CUDA_EMU_PITCH_ALIGN;
    if (height > SIZE_MAX / p)
        return RZCUDA_ERROR_INVALID_VALUE;
    CHECK(emu_mem_alloc(c, c->device, p * height, dptr));
    *pitch = p;
    return RZCUDA_SUCCESS;
}

/* Managed memory behaves as device memory here (the host may also dereference it, as on a real system). */
EMU_API rzcu_result cuMemAllocManaged(rzcu_deviceptr *dptr, size_t bytesize, unsigned int flags)
{
    ENTER(cuMemAllocManaged);
    struct CUctx_st *c;
    CHECK(current_ctx(&c));
    if (!dptr || bytesize == 0 || (flags != RZCU_MEM_ATTACH_GLOBAL && flags != RZCU_MEM_ATTACH_HOST))
        return RZCUDA_ERROR_INVALID_VALUE;
    return emu_mem_alloc(c, c->device, bytesize, dptr);
}

EMU_API rzcu_result cuMemAllocHost_v2(void **pp, size_t bytesize)
{
    ENTER(cuMemAllocHost_v2);
    struct CUctx_st *c;
    CHECK(current_ctx(&c));
    if (!pp)
        return RZCUDA_ERROR_INVALID_VALUE;
    return emu_host_alloc(c, bytesize, pp);
}

/* Page-locking existing host memory: any of the documented flags; a current context is required. */
EMU_API rzcu_result cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int flags)
{
    ENTER(cuMemHostRegister_v2);
    struct CUctx_st *c;
    CHECK(current_ctx(&c));
    if (flags & ~0x0fu) /* PORTABLE, DEVICEMAP, IOMEMORY, READ_ONLY */
        return RZCUDA_ERROR_INVALID_VALUE;
    return emu_host_register(p, bytesize);
}

EMU_API rzcu_result cuMemHostUnregister(void *p)
{
    ENTER(cuMemHostUnregister);
    struct CUctx_st *c;
    CHECK(current_ctx(&c));
    if (!p)
        return RZCUDA_ERROR_INVALID_VALUE;
    if (atomic_load(&pending_ops))
        sync_all_contexts(); /* copies into it may still be queued */
    return emu_host_unregister(p);
}

/* cuMemFreeHost(NULL) is CUDA_SUCCESS, as on real drivers (see cuMemFree_v2); an unknown pointer is
 * CUDA_ERROR_INVALID_VALUE. */
EMU_API rzcu_result cuMemFreeHost(void *p)
{
    ENTER(cuMemFreeHost);
    struct CUctx_st *c;
    CHECK(current_ctx(&c));
    if (!p)
        return RZCUDA_SUCCESS;
    /* like cuMemFree, complete outstanding work that may still read or write it */
    if (atomic_load(&pending_ops))
        sync_all_contexts();
    return emu_host_free(p);
}

/*
 * cuMemFree(0) is CUDA_SUCCESS and does nothing, like free(NULL): the documentation names no special case,
 * but that is what real drivers return (observed side by side with the real driver, e.g. driver 590; see
 * lupinemachines/lupine PR #858 and StanfordLegion/legion issue #1001). Any other pointer must be the base
 * of a live allocation, else CUDA_ERROR_INVALID_VALUE (inside an allocation, already freed, unknown).
 * Freeing synchronises with outstanding work (the driver "may perform implicit synchronization"), so
 * queued operations never touch released memory.
 */
EMU_API rzcu_result cuMemFree_v2(rzcu_deviceptr dptr)
{
    ENTER(cuMemFree_v2);
    struct CUctx_st *c;
    CHECK(current_ctx(&c));
    if (!dptr)
        return RZCUDA_SUCCESS;
    if (!emu_mem_is_base(dptr))
        return RZCUDA_ERROR_INVALID_VALUE;
    if (atomic_load(&pending_ops))
        sync_all_contexts();
    return emu_mem_free(dptr);
}

EMU_API rzcu_result cuMemGetAddressRange_v2(rzcu_deviceptr *pbase, size_t *psize, rzcu_deviceptr dptr)
{
    ENTER(cuMemGetAddressRange_v2);
    struct CUctx_st *c;
    CHECK(current_ctx(&c));
    rzcu_deviceptr base;
    size_t size;
    if (!emu_mem_lookup(dptr, &base, &size))
        return RZCUDA_ERROR_NOT_FOUND;
    if (pbase)
        *pbase = base;
    if (psize)
        *psize = size;
    return RZCUDA_SUCCESS;
}

/* The attributes redzone asks for; others are not emulated. */
EMU_API rzcu_result cuPointerGetAttribute(void *data, rzcu_pointer_attribute attribute, rzcu_deviceptr ptr)
{
    ENTER(cuPointerGetAttribute);
    if (!data)
        return RZCUDA_ERROR_INVALID_VALUE;
    struct CUctx_st *owner;
    int device;
    if (attribute != RZCU_POINTER_ATTRIBUTE_CONTEXT && attribute != RZCU_POINTER_ATTRIBUTE_DEVICE_ORDINAL)
        return RZCUDA_ERROR_NOT_SUPPORTED;
    if (!emu_mem_owner(ptr, &owner, &device))
        return RZCUDA_ERROR_INVALID_VALUE; /* not device memory the driver knows */
    if (attribute == RZCU_POINTER_ATTRIBUTE_CONTEXT && !owner)
        return RZCUDA_ERROR_INVALID_VALUE; /* VMM memory: not allocated in a context */
    if (attribute == RZCU_POINTER_ATTRIBUTE_CONTEXT)
        *(rzcu_context *)data = (rzcu_context)owner;
    else
        *(int *)data = device;
    return RZCUDA_SUCCESS;
}

EMU_API rzcu_result cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes)
{
    ENTER(cuMemGetInfo_v2);
    struct CUctx_st *c;
    CHECK(current_ctx(&c));
    if (!free_bytes || !total_bytes)
        return RZCUDA_ERROR_INVALID_VALUE;
    emu_mem_info(c->device, free_bytes, total_bytes);
    return RZCUDA_SUCCESS;
}

/* ------------------------------------------------------------------------------------------------------ */
/* memset and copies */

enum dir { HTOD, DTOH, DTOD };

static rzcu_result memop(struct CUstream_st *s, enum op_kind kind, void *dst, const void *src, size_t n,
                         unsigned char value, bool wait)
{
    struct op *op = op_new(s->ctx, kind);
    if (!op)
        return RZCUDA_ERROR_OUT_OF_MEMORY;
    op->dst = dst;
    op->src = src;
    op->n = n;
    op->value = value;
    return submit(s, op, wait);
}

/* hstream is ignored when !async (the legacy stream, or the per-thread one for _ptds). */
static rzcu_result do_copy(enum dir dir, uintptr_t dst, uintptr_t src, size_t n, bool async, rzcu_stream hstream,
                           bool per_thread)
{
    struct CUctx_st *c;
    CHECK(current_ctx(&c));
    struct CUstream_st *s;
    CHECK(resolve_stream(async ? hstream : NULL, per_thread, c, &s));
    if (n == 0)
        return RZCUDA_SUCCESS;
    bool dst_ok = dir == DTOH ? dst != 0 : emu_mem_range_writable(dst, n);
    bool src_ok = dir == HTOD ? src != 0 : emu_mem_range_ok(src, n);
    if (!dst_ok || !src_ok)
        return RZCUDA_ERROR_INVALID_VALUE;
    if (dir != DTOH)
        emu_trace_write((rzcu_deviceptr)dst, n); /* before it runs: a queued copy may run on the worker */
    return memop(s, OP_COPY, (void *)dst, (const void *)src, n, 0, !async);
}

static rzcu_result do_memset(rzcu_deviceptr dst, unsigned char uc, size_t n, bool async, rzcu_stream hstream,
                             bool per_thread)
{
    struct CUctx_st *c;
    CHECK(current_ctx(&c));
    struct CUstream_st *s;
    CHECK(resolve_stream(async ? hstream : NULL, per_thread, c, &s));
    if (n == 0)
        return RZCUDA_SUCCESS;
    if (!emu_mem_range_writable(dst, n))
        return RZCUDA_ERROR_INVALID_VALUE;
    emu_trace_write(dst, n);
    return memop(s, OP_SET, (void *)(uintptr_t)dst, NULL, n, uc, !async);
}

EMU_API rzcu_result cuMemsetD8_v2(rzcu_deviceptr dst, unsigned char uc, size_t n)
{
    ENTER(cuMemsetD8_v2);
    return do_memset(dst, uc, n, false, NULL, false);
}

EMU_API rzcu_result cuMemsetD8_v2_ptds(rzcu_deviceptr dst, unsigned char uc, size_t n)
{
    ENTER(cuMemsetD8_v2_ptds);
    return do_memset(dst, uc, n, false, NULL, true);
}

EMU_API rzcu_result cuMemsetD8Async(rzcu_deviceptr dst, unsigned char uc, size_t n, rzcu_stream s)
{
    ENTER(cuMemsetD8Async);
    return do_memset(dst, uc, n, true, s, false);
}

EMU_API rzcu_result cuMemsetD8Async_ptsz(rzcu_deviceptr dst, unsigned char uc, size_t n, rzcu_stream s)
{
    ENTER(cuMemsetD8Async_ptsz);
    return do_memset(dst, uc, n, true, s, true);
}

#define COPY_ENTRY(name, dir, dst_t, src_t, async, per_thread)                                               \
    EMU_API rzcu_result name(dst_t dst, src_t src, size_t n)                                                 \
    {                                                                                                        \
        ENTER(name);                                                                                         \
        return do_copy(dir, (uintptr_t)dst, (uintptr_t)src, n, async, NULL, per_thread);                    \
    }
#define COPY_ASYNC_ENTRY(name, dir, dst_t, src_t, per_thread)                                                \
    EMU_API rzcu_result name(dst_t dst, src_t src, size_t n, rzcu_stream s)                                  \
    {                                                                                                        \
        ENTER(name);                                                                                         \
        return do_copy(dir, (uintptr_t)dst, (uintptr_t)src, n, true, s, per_thread);                         \
    }

COPY_ENTRY(cuMemcpyHtoD_v2, HTOD, rzcu_deviceptr, const void *, false, false)
COPY_ENTRY(cuMemcpyHtoD_v2_ptds, HTOD, rzcu_deviceptr, const void *, false, true)
COPY_ENTRY(cuMemcpyDtoH_v2, DTOH, void *, rzcu_deviceptr, false, false)
COPY_ENTRY(cuMemcpyDtoH_v2_ptds, DTOH, void *, rzcu_deviceptr, false, true)
COPY_ENTRY(cuMemcpyDtoD_v2, DTOD, rzcu_deviceptr, rzcu_deviceptr, false, false)
COPY_ENTRY(cuMemcpyDtoD_v2_ptds, DTOD, rzcu_deviceptr, rzcu_deviceptr, false, true)
COPY_ASYNC_ENTRY(cuMemcpyHtoDAsync_v2, HTOD, rzcu_deviceptr, const void *, false)
COPY_ASYNC_ENTRY(cuMemcpyHtoDAsync_v2_ptsz, HTOD, rzcu_deviceptr, const void *, true)
COPY_ASYNC_ENTRY(cuMemcpyDtoHAsync_v2, DTOH, void *, rzcu_deviceptr, false)
COPY_ASYNC_ENTRY(cuMemcpyDtoHAsync_v2_ptsz, DTOH, void *, rzcu_deviceptr, true)
COPY_ASYNC_ENTRY(cuMemcpyDtoDAsync_v2, DTOD, rzcu_deviceptr, rzcu_deviceptr, false)
COPY_ASYNC_ENTRY(cuMemcpyDtoDAsync_v2_ptsz, DTOD, rzcu_deviceptr, rzcu_deviceptr, true)

/*
 * Batched copies (CUDA 12.8 with failIdx, CUDA 13 without). Everything is validated before anything is
 * queued; the direction of each copy follows from its pointers (emulated device range or host). A
 * per-copy error sets *fail_idx to the copy's index, any other error to SIZE_MAX.
 */
static rzcu_result do_batch(rzcu_deviceptr *dsts, rzcu_deviceptr *srcs, size_t *sizes, size_t count,
                            rzcu_memcpy_attributes *attrs, size_t *attrs_idxs, size_t num_attrs, size_t *fail_idx,
                            rzcu_stream hstream, bool per_thread)
{
    if (fail_idx)
        *fail_idx = SIZE_MAX;
    struct CUctx_st *c;
    CHECK(current_ctx(&c));
    /* "Must not be legacy NULL stream." */
    if (hstream == RZCU_STREAM_LEGACY || (!hstream && !per_thread))
        return RZCUDA_ERROR_INVALID_VALUE;
    struct CUstream_st *s;
    CHECK(resolve_stream(hstream, per_thread, c, &s));
    if (count == 0 || !dsts || !srcs || !sizes || !attrs || !attrs_idxs || num_attrs == 0 || num_attrs > count)
        return RZCUDA_ERROR_INVALID_VALUE;
    for (size_t k = 0; k < num_attrs; k++) {
        if ((k == 0 && attrs_idxs[0] != 0) || (k > 0 && attrs_idxs[k] <= attrs_idxs[k - 1]) ||
            attrs_idxs[k] >= count)
            return RZCUDA_ERROR_INVALID_VALUE;
        unsigned order = attrs[k].srcAccessOrder;
        if (order != RZCU_MEMCPY_SRC_ACCESS_ORDER_STREAM && order != RZCU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL &&
            order != RZCU_MEMCPY_SRC_ACCESS_ORDER_ANY)
            return RZCUDA_ERROR_INVALID_VALUE;
        if (attrs[k].flags & ~1u) /* CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE */
            return RZCUDA_ERROR_INVALID_VALUE;
    }
    /* Every device range inside one allocation (one lock for all), every host range non-null and not
     * wrapping; the first bad copy is the one reported. */
    size_t bad = count;
    for (size_t i = 0; i < count; i++) {
        if (sizes[i] == 0)
            continue;
        rzcu_deviceptr ends[2] = {dsts[i], srcs[i]};
        for (int e = 0; e < 2; e++) {
            if (!emu_mem_is_device_address((uintptr_t)ends[e]) &&
                (ends[e] == 0 || sizes[i] > UINTPTR_MAX - (uintptr_t)ends[e])) {
                bad = i;
                break;
            }
        }
        if (bad != count)
            break;
    }
    size_t bad_dst = emu_mem_ranges_writable(dsts, sizes, bad), bad_src = emu_mem_ranges_ok(srcs, sizes, bad);
    bad = bad_dst < bad ? bad_dst : bad;
    bad = bad_src < bad ? bad_src : bad;
    if (bad != count) {
        if (fail_idx)
            *fail_idx = bad;
        return RZCUDA_ERROR_INVALID_VALUE;
    }
    if (emu_trace_on())
        for (size_t i = 0; i < count; i++)
            if (emu_mem_is_device_address((uintptr_t)dsts[i]))
                emu_trace_write(dsts[i], sizes[i]);
    struct op *op = op_new(c, OP_BATCH);
    if (!op)
        return RZCUDA_ERROR_OUT_OF_MEMORY;
    bool snapshots = false;
    for (size_t k = 0; k < num_attrs; k++)
        snapshots = snapshots || attrs[k].srcAccessOrder == RZCU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL;
    if (!snapshots) {
        /* An idle stream runs the batch now, straight from the caller's arrays: no descriptor copy. */
        op->bdsts = dsts;
        op->bsrcs = srcs;
        op->bsizes = sizes;
        op->nitems = count;
        struct op *retry = NULL;
        rzcu_result r = submit_seq_ex(s, op, false, NULL, true, &retry);
        if (r != RZCUDA_ERROR_NOT_READY)
            return r;
        op = retry; /* queued behind other work: it needs its own copy of the descriptors */
        op->nitems = 0;
    }
    struct batch_item *items = calloc(count, sizeof *items);
    if (!items) {
        free_op(op);
        return RZCUDA_ERROR_OUT_OF_MEMORY;
    }
    op->items = items;
    op->nitems = count;
    size_t k = 0;
    for (size_t i = 0; i < count; i++) {
        while (k + 1 < num_attrs && attrs_idxs[k + 1] <= i)
            k++;
        items[i] = (struct batch_item){(void *)(uintptr_t)dsts[i], (const void *)(uintptr_t)srcs[i], sizes[i], NULL};
        if (sizes[i] && attrs[k].srcAccessOrder == RZCU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL) {
            items[i].snapshot = malloc(sizes[i]);
            if (!items[i].snapshot) {
                free_op(op);
                return RZCUDA_ERROR_OUT_OF_MEMORY;
            }
            memcpy(items[i].snapshot, items[i].src, sizes[i]);
        }
    }
    return submit(s, op, false);
}

EMU_API rzcu_result cuMemcpyBatchAsync_v2(rzcu_deviceptr *dsts, rzcu_deviceptr *srcs, size_t *sizes, size_t count,
                                          rzcu_memcpy_attributes *attrs, size_t *attrs_idxs, size_t num_attrs,
                                          rzcu_stream s)
{
    ENTER(cuMemcpyBatchAsync_v2);
    return do_batch(dsts, srcs, sizes, count, attrs, attrs_idxs, num_attrs, NULL, s, false);
}

EMU_API rzcu_result cuMemcpyBatchAsync_v2_ptsz(rzcu_deviceptr *dsts, rzcu_deviceptr *srcs, size_t *sizes,
                                               size_t count, rzcu_memcpy_attributes *attrs, size_t *attrs_idxs,
                                               size_t num_attrs, rzcu_stream s)
{
    ENTER(cuMemcpyBatchAsync_v2_ptsz);
    return do_batch(dsts, srcs, sizes, count, attrs, attrs_idxs, num_attrs, NULL, s, true);
}

EMU_API rzcu_result cuMemcpyBatchAsync(rzcu_deviceptr *dsts, rzcu_deviceptr *srcs, size_t *sizes, size_t count,
                                       rzcu_memcpy_attributes *attrs, size_t *attrs_idxs, size_t num_attrs,
                                       size_t *fail_idx, rzcu_stream s)
{
    ENTER(cuMemcpyBatchAsync);
    return do_batch(dsts, srcs, sizes, count, attrs, attrs_idxs, num_attrs, fail_idx, s, false);
}

EMU_API rzcu_result cuMemcpyBatchAsync_ptsz(rzcu_deviceptr *dsts, rzcu_deviceptr *srcs, size_t *sizes, size_t count,
                                            rzcu_memcpy_attributes *attrs, size_t *attrs_idxs, size_t num_attrs,
                                            size_t *fail_idx, rzcu_stream s)
{
    ENTER(cuMemcpyBatchAsync_ptsz);
    return do_batch(dsts, srcs, sizes, count, attrs, attrs_idxs, num_attrs, fail_idx, s, true);
}

/* ------------------------------------------------------------------------------------------------------ */
/* streams */

EMU_API rzcu_result cuStreamCreate(rzcu_stream *ps, unsigned int flags)
{
    ENTER(cuStreamCreate);
    struct CUctx_st *c;
    CHECK(current_ctx(&c));
    if (!ps || (flags != RZCU_STREAM_DEFAULT && flags != RZCU_STREAM_NON_BLOCKING))
        return RZCUDA_ERROR_INVALID_VALUE;
    struct CUstream_st *s = stream_new(c, flags, STREAM_USER);
    if (!s)
        return RZCUDA_ERROR_OUT_OF_MEMORY;
    *ps = s;
    return RZCUDA_SUCCESS;
}

/* Returns at once; work already queued still completes (the stream leaves the context once drained). */
EMU_API rzcu_result cuStreamDestroy_v2(rzcu_stream hstream)
{
    ENTER(cuStreamDestroy_v2);
    struct CUstream_st *s = stream_from_handle(hstream);
    if (!s)
        return RZCUDA_ERROR_INVALID_HANDLE;
    uint32_t expected = STREAM_MAGIC;
    if (!atomic_compare_exchange_strong(&s->magic, &expected, 0))
        return RZCUDA_ERROR_INVALID_HANDLE;
    atomic_store(&s->destroyed, true);
    return RZCUDA_SUCCESS;
}

static rzcu_result do_stream_sync(rzcu_stream hstream, bool per_thread)
{
    struct CUstream_st *s;
    CHECK(resolve_stream(hstream, per_thread, NULL, &s));
    stream_sync(s);
    return RZCUDA_SUCCESS;
}

EMU_API rzcu_result cuStreamSynchronize(rzcu_stream s)
{
    ENTER(cuStreamSynchronize);
    return do_stream_sync(s, false);
}

EMU_API rzcu_result cuStreamSynchronize_ptsz(rzcu_stream s)
{
    ENTER(cuStreamSynchronize_ptsz);
    return do_stream_sync(s, true);
}

static rzcu_result do_launch_host_func(rzcu_stream hstream, rzcu_host_fn fn, void *user_data, bool per_thread)
{
    struct CUctx_st *c;
    CHECK(current_ctx(&c));
    struct CUstream_st *s;
    CHECK(resolve_stream(hstream, per_thread, c, &s));
    if (!fn)
        return RZCUDA_ERROR_INVALID_VALUE;
    struct op *op = op_new(s->ctx, OP_HOST);
    if (!op)
        return RZCUDA_ERROR_OUT_OF_MEMORY;
    op->fn = fn;
    op->user_data = user_data;
    return submit(s, op, false);
}

EMU_API rzcu_result cuLaunchHostFunc(rzcu_stream s, rzcu_host_fn fn, void *user_data)
{
    ENTER(cuLaunchHostFunc);
    return do_launch_host_func(s, fn, user_data, false);
}

EMU_API rzcu_result cuLaunchHostFunc_ptsz(rzcu_stream s, rzcu_host_fn fn, void *user_data)
{
    ENTER(cuLaunchHostFunc_ptsz);
    return do_launch_host_func(s, fn, user_data, true);
}

/* ------------------------------------------------------------------------------------------------------ */
/* stream-ordered allocation */

/* One default pool per device; the handle is the address of its slot. */
struct CUmemPoolHandle_st {
    int device;
};
static struct CUmemPoolHandle_st default_pools[CUDA_EMU_MAX_DEVICES] = {{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}};

static struct CUmemPoolHandle_st *pool_from_handle(rzcu_mem_pool h)
{
    for (int i = 0; i < emu_cfg.ndevices; i++)
        if (h == &default_pools[i])
            return h;
    return NULL;
}

EMU_API rzcu_result cuDeviceGetDefaultMemPool(rzcu_mem_pool *pool, rzcu_device dev)
{
    ENTER(cuDeviceGetDefaultMemPool);
    if (!pool)
        return RZCUDA_ERROR_INVALID_VALUE;
    if (!valid_device(dev))
        return RZCUDA_ERROR_INVALID_DEVICE;
    *pool = &default_pools[dev];
    return RZCUDA_SUCCESS;
}

/*
 * The memory is allocated at the call, from the pool's device (the stream's device for cuMemAllocAsync), and
 * owned by the stream's context; nothing is queued. It is valid earlier than the driver promises (work
 * ordered after the allocation), which no correct program can tell apart.
 */
static rzcu_result do_alloc_async(rzcu_deviceptr *dptr, size_t bytesize, bool from_pool, rzcu_mem_pool hpool,
                                  rzcu_stream hstream, bool per_thread)
{
    struct CUstream_st *s;
    CHECK(resolve_stream(hstream, per_thread, NULL, &s));
    if (!dptr || bytesize == 0)
        return RZCUDA_ERROR_INVALID_VALUE;
    int device = s->ctx->device;
    if (from_pool) {
        struct CUmemPoolHandle_st *pool = pool_from_handle(hpool);
        if (!pool)
            return RZCUDA_ERROR_INVALID_VALUE;
        device = pool->device;
    }
    return emu_mem_alloc(s->ctx, device, bytesize, dptr);
}

EMU_API rzcu_result cuMemAllocAsync(rzcu_deviceptr *dptr, size_t bytesize, rzcu_stream s)
{
    ENTER(cuMemAllocAsync);
    return do_alloc_async(dptr, bytesize, false, NULL, s, false);
}

EMU_API rzcu_result cuMemAllocAsync_ptsz(rzcu_deviceptr *dptr, size_t bytesize, rzcu_stream s)
{
    ENTER(cuMemAllocAsync_ptsz);
    return do_alloc_async(dptr, bytesize, false, NULL, s, true);
}

EMU_API rzcu_result cuMemAllocFromPoolAsync(rzcu_deviceptr *dptr, size_t bytesize, rzcu_mem_pool pool,
                                            rzcu_stream s)
{
    ENTER(cuMemAllocFromPoolAsync);
    return do_alloc_async(dptr, bytesize, true, pool, s, false);
}

EMU_API rzcu_result cuMemAllocFromPoolAsync_ptsz(rzcu_deviceptr *dptr, size_t bytesize, rzcu_mem_pool pool,
                                                 rzcu_stream s)
{
    ENTER(cuMemAllocFromPoolAsync_ptsz);
    return do_alloc_async(dptr, bytesize, true, pool, s, true);
}

/*
 * Frees any allocation (cuMemAllocAsync or cuMemAlloc*, as the programming guide allows) in stream order:
 * at the call the allocation leaves use (later copies, memsets and frees of it are CUDA_ERROR_INVALID_VALUE:
 * the documentation makes any access by later work undefined), and it is released when the stream reaches
 * the free. 0 is CUDA_SUCCESS and does nothing, as for cuMemFree.
 */
static rzcu_result do_free_async(rzcu_deviceptr dptr, rzcu_stream hstream, bool per_thread)
{
    struct CUstream_st *s;
    CHECK(resolve_stream(hstream, per_thread, NULL, &s));
    if (!dptr)
        return RZCUDA_SUCCESS;
    struct op *op = op_new(s->ctx, OP_FREE);
    if (!op)
        return RZCUDA_ERROR_OUT_OF_MEMORY;
    op->ptr = dptr;
    rzcu_result r = emu_mem_mark_free_pending(dptr);
    if (r != RZCUDA_SUCCESS) {
        free_op(op);
        return r;
    }
    if (submit(s, op, false) != RZCUDA_SUCCESS) {
        /* could not queue it: free it once the stream's work is done */
        stream_sync(s);
        emu_mem_free_pending(dptr);
    }
    return RZCUDA_SUCCESS;
}

EMU_API rzcu_result cuMemFreeAsync(rzcu_deviceptr dptr, rzcu_stream s)
{
    ENTER(cuMemFreeAsync);
    return do_free_async(dptr, s, false);
}

EMU_API rzcu_result cuMemFreeAsync_ptsz(rzcu_deviceptr dptr, rzcu_stream s)
{
    ENTER(cuMemFreeAsync_ptsz);
    return do_free_async(dptr, s, true);
}

/* ------------------------------------------------------------------------------------------------------ */
/* events */

/* A valid event of a live context, or NULL. */
static struct CUevent_st *event_from_handle(rzcu_event h)
{
    struct CUevent_st *e = emu_table_slot(&events, h);
    if (!e || atomic_load(&e->magic) != EVENT_MAGIC || !emu_context_live(e->ctx, e->gen))
        return NULL;
    return e;
}

/* Flags: CU_EVENT_BLOCKING_SYNC, DISABLE_TIMING, INTERPROCESS (only with DISABLE_TIMING); others invalid. */
EMU_API rzcu_result cuEventCreate(rzcu_event *pe, unsigned int flags)
{
    ENTER(cuEventCreate);
    struct CUctx_st *c;
    CHECK(current_ctx(&c));
    if (!pe || (flags & ~EVENT_FLAGS) || ((flags & 0x4u) && !(flags & 0x2u)))
        return RZCUDA_ERROR_INVALID_VALUE;
    struct CUevent_st *e = emu_table_new(&events);
    if (!e)
        return RZCUDA_ERROR_OUT_OF_MEMORY;
    e->ctx = c;
    e->gen = atomic_load(&c->gen);
    e->flags = flags;
    pthread_mutex_init(&e->mu, NULL);
    atomic_store(&e->magic, EVENT_MAGIC);
    *pe = e;
    return RZCUDA_SUCCESS;
}

/*
 * Captures the stream's work so far: the record is an operation on the stream (on the legacy stream it also
 * covers the blocking streams' prior work; on a blocking stream, the legacy stream's), and the event stands
 * for its completion. The stream must belong to the event's context (else CUDA_ERROR_INVALID_HANDLE).
 */
static rzcu_result do_event_record(rzcu_event hevent, rzcu_stream hstream, bool per_thread)
{
    struct CUevent_st *e = event_from_handle(hevent);
    if (!e)
        return RZCUDA_ERROR_INVALID_HANDLE;
    struct CUstream_st *s;
    CHECK(resolve_stream(hstream, per_thread, NULL, &s));
    if (s->ctx != e->ctx)
        return RZCUDA_ERROR_INVALID_HANDLE;
    struct op *op = op_new(s->ctx, OP_NOP);
    if (!op)
        return RZCUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&e->mu); /* records of one event take effect in call order */
    uint64_t seq = 0;
    rzcu_result r = submit_seq(s, op, false, &seq);
    if (r == RZCUDA_SUCCESS) {
        e->s = s;
        e->seq = seq;
    }
    pthread_mutex_unlock(&e->mu);
    return r;
}

EMU_API rzcu_result cuEventRecord(rzcu_event e, rzcu_stream s)
{
    ENTER(cuEventRecord);
    return do_event_record(e, s, false);
}

EMU_API rzcu_result cuEventRecord_ptsz(rzcu_event e, rzcu_stream s)
{
    ENTER(cuEventRecord_ptsz);
    return do_event_record(e, s, true);
}

/* Waits for the work captured by the last record; an event never recorded has none (CUDA_SUCCESS at once). */
EMU_API rzcu_result cuEventSynchronize(rzcu_event hevent)
{
    ENTER(cuEventSynchronize);
    struct CUevent_st *e = event_from_handle(hevent);
    if (!e)
        return RZCUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&e->mu);
    struct CUstream_st *s = e->s;
    uint64_t seq = e->seq;
    pthread_mutex_unlock(&e->mu);
    if (s)
        wait_seq(s, seq);
    return RZCUDA_SUCCESS;
}

/* Returns at once, even while the captured work is pending. */
EMU_API rzcu_result cuEventDestroy_v2(rzcu_event hevent)
{
    ENTER(cuEventDestroy_v2);
    struct CUevent_st *e = event_from_handle(hevent);
    if (!e)
        return RZCUDA_ERROR_INVALID_HANDLE;
    uint32_t expected = EVENT_MAGIC;
    if (!atomic_compare_exchange_strong(&e->magic, &expected, 0))
        return RZCUDA_ERROR_INVALID_HANDLE;
    return RZCUDA_SUCCESS;
}

/* ------------------------------------------------------------------------------------------------------ */
/* kernel launches (modules and functions: emu_module.c) */

#define MAX_DYNAMIC_SHARED 49152u /* MAX_SHARED_MEMORY_PER_BLOCK: more needs an opt-in the emulator lacks */
#define PARAM_ALIGN 16u

/* CUlaunchAttribute, laid out as in cuda.h (cu.h only passes it by pointer). */
struct CUlaunchAttribute_st {
    unsigned int id;
    char pad[4];
    union {
        char pad[64];
        int i;
        void *p;
        unsigned long long u;
    } value;
};
_Static_assert(sizeof(struct CUlaunchAttribute_st) == 72, "CUlaunchAttribute layout");

/*
 * Launch attributes: those that do not change what a kernel computes are accepted and ignored (IGNORE,
 * ACCESS_POLICY_WINDOW, COOPERATIVE: the whole grid runs at once anyway, SYNCHRONIZATION_POLICY,
 * CLUSTER_SCHEDULING_POLICY_PREFERENCE, PROGRAMMATIC_STREAM_SERIALIZATION: the emulator never overlaps,
 * PRIORITY, MEM_SYNC_DOMAIN_MAP, MEM_SYNC_DOMAIN, PREFERRED_SHARED_MEMORY_CARVEOUT,
 * NVLINK_UTIL_CENTRIC_SCHEDULING); CLUSTER_DIMENSION, PROGRAMMATIC_EVENT, PREFERRED_CLUSTER_DIMENSION,
 * LAUNCH_COMPLETION_EVENT and DEVICE_UPDATABLE_KERNEL_NODE are CUDA_ERROR_NOT_SUPPORTED; unknown ids are
 * CUDA_ERROR_INVALID_VALUE.
 */
static rzcu_result check_launch_attrs(const struct CUlaunchAttribute_st *attrs, unsigned n)
{
    if (n && !attrs)
        return RZCUDA_ERROR_INVALID_VALUE;
    for (unsigned i = 0; i < n; i++) {
        switch (attrs[i].id) {
        case 0: case 1: case 2: case 3: case 5: case 6: case 8: case 9: case 10: case 14: case 16:
            break;
        case 4: case 7: case 11: case 12: case 13:
            return RZCUDA_ERROR_NOT_SUPPORTED;
        default:
            return RZCUDA_ERROR_INVALID_VALUE;
        }
    }
    return RZCUDA_SUCCESS;
}

static rzcu_result do_launch(rzcu_function f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                             unsigned bz, unsigned shared_bytes, rzcu_stream hstream, void **params, void **extra,
                             bool per_thread)
{
    struct emu_kernel k;
    CHECK(emu_function_resolve(f, &k));
    struct CUstream_st *s;
    CHECK(resolve_stream(hstream, per_thread, NULL, &s));
    if (s->ctx != k.ctx)
        return RZCUDA_ERROR_INVALID_HANDLE;
    if (!gx || !gy || !gz || !bx || !by || !bz || gx > 2147483647u || gy > 65535u || gz > 65535u || bx > 1024u ||
        by > 1024u || bz > 64u || (unsigned long long)bx * by * bz > 1024u || shared_bytes > MAX_DYNAMIC_SHARED)
        return RZCUDA_ERROR_INVALID_VALUE;
    if (params && extra)
        return RZCUDA_ERROR_INVALID_VALUE;
    if (extra && extra[0]) /* a parameter buffer (an empty list, CU_LAUNCH_PARAM_END first, is no extra) */
        return RZCUDA_ERROR_NOT_SUPPORTED;
    if (k.nparams && !params)
        return RZCUDA_ERROR_INVALID_VALUE;
    size_t bytes = 0;
    for (size_t i = 0; i < k.nparams; i++) {
        if (!params[i] || k.sizes[i] > SIZE_MAX / 2 - bytes)
            return RZCUDA_ERROR_INVALID_VALUE;
        bytes += (k.sizes[i] + PARAM_ALIGN - 1) / PARAM_ALIGN * PARAM_ALIGN;
    }
    struct op *op = op_new(s->ctx, OP_KERNEL);
    size_t ptrs = (k.nparams * sizeof(void *) + PARAM_ALIGN - 1) / PARAM_ALIGN * PARAM_ALIGN;
    void **kparams = op ? aligned_alloc(PARAM_ALIGN, ptrs + bytes + PARAM_ALIGN) : NULL;
    if (!kparams) {
        free(op);
        return RZCUDA_ERROR_OUT_OF_MEMORY;
    }
    /* the values are copied now: the caller may reuse its argument storage as soon as this returns */
    char *data = (char *)kparams + ptrs;
    for (size_t i = 0; i < k.nparams; i++) {
        memcpy(data, params[i], k.sizes[i]);
        kparams[i] = data;
        data += (k.sizes[i] + PARAM_ALIGN - 1) / PARAM_ALIGN * PARAM_ALIGN;
    }
    op->kernel = k.fn;
    op->kparams = kparams;
    op->hold_epoch = emu_cfg.kernel_hold ? hold_now() : 0;
    op->launch = (cuda_emu_launch_t){{gx, gy, gz}, {bx, by, bz}, shared_bytes};
    return submit(s, op, false);
}

EMU_API rzcu_result cuLaunchKernel(rzcu_function f, unsigned int gx, unsigned int gy, unsigned int gz,
                                   unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared_bytes,
                                   rzcu_stream s, void **params, void **extra)
{
    ENTER(cuLaunchKernel);
    return do_launch(f, gx, gy, gz, bx, by, bz, shared_bytes, s, params, extra, false);
}

EMU_API rzcu_result cuLaunchKernel_ptsz(rzcu_function f, unsigned int gx, unsigned int gy, unsigned int gz,
                                        unsigned int bx, unsigned int by, unsigned int bz,
                                        unsigned int shared_bytes, rzcu_stream s, void **params, void **extra)
{
    ENTER(cuLaunchKernel_ptsz);
    return do_launch(f, gx, gy, gz, bx, by, bz, shared_bytes, s, params, extra, true);
}

static rzcu_result do_launch_ex(const rzcu_launch_config *config, rzcu_function f, void **params, void **extra,
                                bool per_thread)
{
    if (!config)
        return RZCUDA_ERROR_INVALID_VALUE;
    CHECK(check_launch_attrs(config->attrs, config->numAttrs));
    return do_launch(f, config->gridDimX, config->gridDimY, config->gridDimZ, config->blockDimX, config->blockDimY,
                     config->blockDimZ, config->sharedMemBytes, config->hStream, params, extra, per_thread);
}

EMU_API rzcu_result cuLaunchKernelEx(const rzcu_launch_config *config, rzcu_function f, void **params, void **extra)
{
    ENTER(cuLaunchKernelEx);
    return do_launch_ex(config, f, params, extra, false);
}

EMU_API rzcu_result cuLaunchKernelEx_ptsz(const rzcu_launch_config *config, rzcu_function f, void **params,
                                          void **extra)
{
    ENTER(cuLaunchKernelEx_ptsz);
    return do_launch_ex(config, f, params, extra, true);
}

/* ------------------------------------------------------------------------------------------------------ */
/* errors and entry points (no cuInit needed) */

EMU_API rzcu_result cuGetErrorName(rzcu_result error, const char **pstr)
{
    ENTER_NOINIT(cuGetErrorName);
    if (!pstr)
        return RZCUDA_ERROR_INVALID_VALUE;
    *pstr = emu_error_name(error);
    return *pstr ? RZCUDA_SUCCESS : RZCUDA_ERROR_INVALID_VALUE;
}

EMU_API rzcu_result cuGetErrorString(rzcu_result error, const char **pstr)
{
    ENTER_NOINIT(cuGetErrorString);
    if (!pstr)
        return RZCUDA_ERROR_INVALID_VALUE;
    *pstr = emu_error_string(error);
    return *pstr ? RZCUDA_SUCCESS : RZCUDA_ERROR_INVALID_VALUE;
}

EMU_API rzcu_result cuGetProcAddress_v2(const char *symbol, void **pfn, int cuda_version, rzcu_uint64 flags,
                                        rzcu_proc_query_result *status)
{
    ENTER_NOINIT(cuGetProcAddress_v2);
    return emu_get_proc_address(symbol, pfn, cuda_version, flags, status);
}

EMU_API rzcu_result cuGetProcAddress(const char *symbol, void **pfn, int cuda_version, rzcu_uint64 flags)
{
    ENTER_NOINIT(cuGetProcAddress);
    return emu_get_proc_address(symbol, pfn, cuda_version, flags, NULL);
}
