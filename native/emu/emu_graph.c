/*
 * Emulated stream capture and graphs: cuStreamBeginCapture, cuStreamEndCapture, cuStreamIsCapturing,
 * cuStreamGetCaptureInfo (v2, v3), their per-thread-stream (_ptsz) forms, cuGraphInstantiateWithFlags,
 * cuGraphLaunch (and _ptsz), cuGraphDestroy, cuGraphExecDestroy, and graph memory nodes.
 *
 * While a stream is captured, the kernels, copies, memsets and host functions submitted to it are recorded
 * instead of run; launching the instantiated graph submits a copy of each, in order, to the launch stream,
 * after the previous launch of the same executable (as the driver orders them). What the driver forbids
 * during capture fails here too, with its errors: synchronising the captured stream (or its context) is
 * CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidates the capture, so that every later capture call and
 * cuStreamEndCapture return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED; so does a synchronous copy or memset into
 * it, or a batched copy (no batch nodes here).
 *
 * Memory nodes, as the driver makes them: cuMemAllocAsync (or FromPoolAsync) on a captured stream adds an
 * allocation node and returns the graph allocation's address, fixed for the graph's lifetime; cuMemFreeAsync
 * on one adds a free node, and must be given a graph allocation (anything else: CUDA_ERROR_INVALID_VALUE,
 * invalidating the capture). A graph allocation is usable from its allocation node to its free node: during
 * capture, and again from each launch until a free node, cuMemFreeAsync or cuMemFree gives it back to the
 * graph (which keeps the address). A launch whose allocations are still allocated from an earlier launch
 * fails with CUDA_ERROR_INVALID_VALUE, unless instantiated with CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH;
 * a free node of an allocation that is not allocated then fails the launch the same way. At most one
 * executable of a graph with allocation nodes may exist (a second: CUDA_ERROR_INVALID_VALUE, the emulator's
 * choice of code). The emulator's simplification: a launch allocates and frees at the cuGraphLaunch call,
 * in API order (as cuMemAllocAsync outside capture allocates at the call), so the memory is valid earlier
 * and longer than the driver promises; the address is the same.
 *
 * Capture modes, as cuThreadExchangeStreamCaptureMode documents them: each thread has a mode (GLOBAL until
 * exchanged), each capture the mode it was begun with and its beginning thread. A thread whose mode is not
 * RELAXED is prohibited from potentially unsafe calls while it has a capture of its own not begun RELAXED, or,
 * in GLOBAL mode, while any other thread has one begun GLOBAL; such a call fails with
 * CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidates those captures (emu_capture_unsafe_call). A capture
 * not begun RELAXED is ended only by its beginning thread: cuStreamEndCapture on another thread is
 * CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, and the capture goes on. The
 * emulator's set of unsafe calls: the allocation family the documentation names (cuMemAlloc, AllocPitch,
 * AllocManaged, AllocHost, HostAlloc, HostRegister, Free, FreeHost, HostUnregister; not the stream-ordered
 * cuMemAllocAsync/FreeAsync, which are captured); the queries and synchronisations of events, streams and
 * contexts (cuEventQuery, cuEventSynchronize, cuStreamQuery, cuStreamSynchronize, cuCtxSynchronize, with
 * their _ptsz and _v2 forms: a real driver refuses another thread's cuEventQuery during a global capture);
 * and cuPointerGetAttribute(s), where the documentation is silent (the stricter reading). Whatever the mode,
 * synchronising or querying a capturing stream (or its context) and querying or waiting for an event last
 * recorded into a capture in progress necessarily conflict with it: refused and the capture invalidated
 * (emu_capture_refuse_sync, emu_capture_event_conflict). The legacy stream
 * cannot be captured, and while a blocking stream of its context is, asking whether the legacy stream is
 * capturing is CUDA_ERROR_STREAM_CAPTURE_IMPLICIT. The emulator has no graph node handles: capture info
 * reports no dependencies.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "emu_engine.h"

#define GRAPH_MAGIC 0x47525048u
#define EXEC_MAGIC 0x47455843u
#define MAX_GRAPHS ((size_t)1 << 16)
#define AUTO_FREE_ON_LAUNCH 1ull /* CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH */
#define INSTANTIATE_FLAGS 0xfull /* AUTO_FREE_ON_LAUNCH, UPLOAD, DEVICE_LAUNCH, USE_NODE_PRIORITY */

struct emu_graph {
    struct op **ops;
    size_t n, cap;
};

struct CUgraph_st {
    _Atomic uint32_t magic;
    struct emu_graph g;
};

struct CUgraphExec_st {
    _Atomic uint32_t magic;
    struct CUctx_st *ctx;
    unsigned long long flags;
    pthread_mutex_t mu; /* launches of one executable are ordered: the last one's end */
    struct CUstream_st *last_s;
    uint64_t last_seq;
    struct emu_graph g;
};

/* One graph allocation, shared by the allocation and free nodes that name it (op->user_data), in graphs and
 * executables: released when the last such node goes. */
struct emu_gmem {
    struct emu_gmem *next;
    rzcu_deviceptr p;
    uint64_t id;
    int refs;  /* nodes naming it; under gmem_mu */
    int execs; /* executables of its allocating graph; under gmem_mu */
};

static struct emu_table graphs = EMU_TABLE_INIT("graph", struct CUgraph_st, MAX_GRAPHS);
static struct emu_table execs = EMU_TABLE_INIT("graph exec", struct CUgraphExec_st, MAX_GRAPHS);
static pthread_mutex_t gmem_mu = PTHREAD_MUTEX_INITIALIZER;
static struct emu_gmem *gmems; /* every graph allocation, under gmem_mu */
static atomic_ullong next_gmem_id = 1;
static atomic_ullong next_capture_id = 1;
static atomic_int strict_captures; /* captures begun and not ended whose mode is not RELAXED */

bool emu_graphs_init(void) { return emu_table_init(&graphs) && emu_table_init(&execs); }

static bool is_memory_node(const struct op *op) { return op->kind == OP_GALLOC || op->kind == OP_GFREE; }

static void gmem_ref(struct emu_gmem *m)
{
    pthread_mutex_lock(&gmem_mu);
    m->refs++;
    pthread_mutex_unlock(&gmem_mu);
}

static void gmem_unref(struct emu_gmem *m)
{
    pthread_mutex_lock(&gmem_mu);
    bool last = --m->refs == 0;
    if (last)
        for (struct emu_gmem **l = &gmems; *l; l = &(*l)->next)
            if (*l == m) {
                *l = m->next;
                break;
            }
    pthread_mutex_unlock(&gmem_mu);
    if (last) {
        emu_mem_graph_release(m->p, m->id);
        free(m);
    }
}

static struct emu_gmem *gmem_by_id(uint64_t id)
{
    pthread_mutex_lock(&gmem_mu);
    struct emu_gmem *m = gmems;
    while (m && m->id != id)
        m = m->next;
    if (m)
        m->refs++;
    pthread_mutex_unlock(&gmem_mu);
    return m;
}

static void graph_clear(struct emu_graph *g)
{
    for (size_t i = 0; i < g->n; i++) {
        if (is_memory_node(g->ops[i]))
            gmem_unref(g->ops[i]->user_data);
        emu_free_op(g->ops[i]);
    }
    free(g->ops);
    *g = (struct emu_graph){0};
}

/* A copy of a recorded operation that can be submitted (and freed) on its own. */
static struct op *op_clone(struct CUctx_st *ctx, const struct op *op)
{
    struct op *c = emu_op_new(ctx, op->kind);
    if (!c)
        return NULL;
    size_t ndeps = c->ndeps;
    memcpy(c, op, sizeof *c);
    c->next = NULL;
    c->ndeps = ndeps;
    c->after = (struct dep){0};
    if (op->kind == OP_KERNEL && emu_cfg.kernel_hold)
        c->hold_epoch = emu_hold_now(); /* CUDA_EMU_KERNEL_HOLD: held from this launch on */
    if (op->kind == OP_KERNEL && op->kparams) {
        char *block = aligned_alloc(16, op->kparams_size);
        if (!block) {
            c->kparams = NULL;
            emu_free_op(c);
            return NULL;
        }
        memcpy(block, op->kparams, op->kparams_size);
        void **params = (void **)(void *)block;
        for (size_t i = 0; i < op->nkparams; i++)
            params[i] = block + ((char *)op->kparams[i] - (char *)op->kparams);
        c->kparams = params;
    }
    return c;
}

static void invalidate(struct CUstream_st *s)
{
    pthread_mutex_lock(&s->mu);
    int active = 1;
    atomic_compare_exchange_strong(&s->capture, &active, 2);
    pthread_mutex_unlock(&s->mu);
}

/* Append op to the capture of s (under s->mu, capture active): false when out of memory. */
static bool append_locked(struct CUstream_st *s, struct op *op)
{
    struct emu_graph *g = s->graph;
    if (g->n == g->cap) {
        size_t cap = g->cap ? 2 * g->cap : 16;
        struct op **v = realloc(g->ops, cap * sizeof *v);
        if (!v)
            return false;
        g->ops = v;
        g->cap = cap;
    }
    g->ops[g->n++] = op;
    return true;
}

rzcu_result emu_capture_record(struct CUstream_st *s, struct op *op, bool wait)
{
    rzcu_result r = RZCUDA_SUCCESS;
    pthread_mutex_lock(&s->mu);
    int state = atomic_load(&s->capture);
    bool capturable = op->kind == OP_COPY || op->kind == OP_COPY3D || op->kind == OP_SET || op->kind == OP_KERNEL ||
                      op->kind == OP_HOST;
    if (state == 2) {
        r = RZCUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    } else if (op->kind == OP_NOP) {
        r = RZCUDA_SUCCESS; /* an event record: nothing to replay here */
    } else if (wait || !capturable) {
        atomic_store(&s->capture, 2);
        r = RZCUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    } else if (append_locked(s, op)) {
        op = NULL;
    } else {
        r = RZCUDA_ERROR_OUT_OF_MEMORY;
    }
    pthread_mutex_unlock(&s->mu);
    if (op)
        emu_free_op(op);
    return r;
}

/* An event whose last record was made into the capture capture_id of s, while that capture is still in
 * progress: a query or wait of it necessarily conflicts with the capture (refused in every mode, as
 * cuThreadExchangeStreamCaptureMode's documentation says of the relaxed mode); the capture is invalidated. */
rzcu_result emu_capture_event_conflict(struct CUstream_st *s, uint64_t capture_id)
{
    if (!s)
        return RZCUDA_SUCCESS;
    pthread_mutex_lock(&s->mu);
    bool conflict = atomic_load(&s->capture) && s->capture_id == capture_id;
    pthread_mutex_unlock(&s->mu);
    if (!conflict)
        return RZCUDA_SUCCESS;
    invalidate(s);
    return RZCUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

/* The capture s is in now (0: none), for an event recorded into it. */
uint64_t emu_capture_id_of(struct CUstream_st *s)
{
    pthread_mutex_lock(&s->mu);
    uint64_t id = atomic_load(&s->capture) ? s->capture_id : 0;
    pthread_mutex_unlock(&s->mu);
    return id;
}

rzcu_result emu_capture_refuse_sync(struct CUctx_st *ctx, struct CUstream_st *s)
{
    if (s)
        return atomic_load(&s->capture) ? (invalidate(s), RZCUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED) : RZCUDA_SUCCESS;
    rzcu_result r = RZCUDA_SUCCESS;
    pthread_mutex_lock(&ctx->mu);
    for (size_t i = 0; i < ctx->nstreams; i++) {
        if (atomic_load(&ctx->streams[i]->capture)) {
            invalidate(ctx->streams[i]);
            r = RZCUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
        }
    }
    pthread_mutex_unlock(&ctx->mu);
    return r;
}

/* ---- memory nodes -------------------------------------------------------------------------------------- */
/* Record a memory node for m (taking a reference to it) in the capture of s. */
static rzcu_result record_memory_node(struct CUstream_st *s, enum op_kind kind, struct emu_gmem *m)
{
    struct op *op = emu_op_new(s->ctx, kind);
    if (!op)
        return RZCUDA_ERROR_OUT_OF_MEMORY;
    op->ptr = m->p;
    op->user_data = m;
    pthread_mutex_lock(&s->mu);
    rzcu_result r = RZCUDA_SUCCESS;
    if (atomic_load(&s->capture) != 1)
        r = RZCUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    else if (append_locked(s, op))
        op = NULL;
    else
        r = RZCUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_unlock(&s->mu);
    if (op)
        emu_free_op(op);
    else
        gmem_ref(m);
    return r;
}

rzcu_result emu_capture_alloc(struct CUstream_st *s, int device, size_t bytesize, rzcu_deviceptr *dptr)
{
    if (atomic_load(&s->capture) == 2)
        return RZCUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    struct emu_gmem *m = calloc(1, sizeof *m);
    if (!m)
        return RZCUDA_ERROR_OUT_OF_MEMORY;
    m->id = atomic_fetch_add(&next_gmem_id, 1);
    rzcu_result r = emu_mem_graph_alloc(s->ctx, device, bytesize, m->id, &m->p);
    if (r != RZCUDA_SUCCESS) {
        free(m);
        return r;
    }
    pthread_mutex_lock(&gmem_mu);
    m->next = gmems;
    gmems = m;
    pthread_mutex_unlock(&gmem_mu);
    m->refs = 1; /* this function's, until the node holds its own */
    r = record_memory_node(s, OP_GALLOC, m);
    if (r == RZCUDA_SUCCESS)
        *dptr = m->p; /* allocated (usable by the work captured after it) until its free node */
    gmem_unref(m);
    return r;
}

rzcu_result emu_capture_free(struct CUstream_st *s, rzcu_deviceptr dptr)
{
    if (atomic_load(&s->capture) == 2)
        return RZCUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    uint64_t id = emu_mem_graph_id(dptr);
    struct emu_gmem *m = id ? gmem_by_id(id) : NULL;
    if (!m) {
        invalidate(s); /* only a graph allocation, allocated now, can have a free node */
        return RZCUDA_ERROR_INVALID_VALUE;
    }
    rzcu_result r = record_memory_node(s, OP_GFREE, m);
    if (r == RZCUDA_SUCCESS)
        emu_mem_graph_set_live(m->p, m->id, false); /* the work captured after it may not use it */
    gmem_unref(m);
    return r;
}

/* ---- capture -------------------------------------------------------------------------------------------- */
/* A stream that can be captured: not the legacy stream (NULL is the per-thread stream for _ptsz calls). */
static rzcu_result user_stream(rzcu_stream h, bool per_thread, struct CUstream_st **out)
{
    if ((!h && !per_thread) || h == RZCU_STREAM_LEGACY)
        return RZCUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; /* the legacy stream cannot be captured */
    return emu_resolve_stream(h, per_thread, NULL, out);
}

static rzcu_result begin_capture(rzcu_stream hstream, unsigned int mode, bool per_thread)
{
    struct CUstream_st *s;
    CHECK(user_stream(hstream, per_thread, &s));
    if (mode > 2) /* CU_STREAM_CAPTURE_MODE_GLOBAL, THREAD_LOCAL, RELAXED */
        return RZCUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&s->mu);
    rzcu_result r = RZCUDA_SUCCESS;
    struct CUgraph_st *graph = NULL;
    if (atomic_load(&s->capture))
        r = RZCUDA_ERROR_ILLEGAL_STATE;
    else if (!(graph = emu_table_new(&graphs))) /* its handle is valid (magic set) once the capture ends */
        r = RZCUDA_ERROR_OUT_OF_MEMORY;
    if (r == RZCUDA_SUCCESS) {
        s->graph_handle = graph;
        s->graph = &graph->g;
        s->capture_id = atomic_fetch_add(&next_capture_id, 1);
        s->capture_mode = mode;
        s->capture_thread = pthread_self();
        if (mode != RZCU_STREAM_CAPTURE_MODE_RELAXED)
            atomic_fetch_add(&strict_captures, 1);
        atomic_store(&s->capture, 1);
    }
    pthread_mutex_unlock(&s->mu);
    return r;
}

EMU_API rzcu_result cuStreamBeginCapture_v2(rzcu_stream hstream, unsigned int mode)
{
    ENTER(cuStreamBeginCapture_v2);
    return begin_capture(hstream, mode, false);
}

EMU_API rzcu_result cuStreamBeginCapture_v2_ptsz(rzcu_stream hstream, unsigned int mode)
{
    ENTER(cuStreamBeginCapture_v2_ptsz);
    return begin_capture(hstream, mode, true);
}

/* The thread's capture mode, which decides which captures prohibit its unsafe calls (see above). */
static _Thread_local rzcu_capture_mode t_capture_mode; /* CU_STREAM_CAPTURE_MODE_GLOBAL */

/*
 * Whether the calling thread may make a potentially unsafe call now. A capture concerns it when it is not
 * RELAXED and either the thread began it or (in GLOBAL mode) it was begun GLOBAL. Every capture concerned is
 * invalidated, as a synchronisation of its stream would be. Captures of destroyed streams (never ended) no
 * longer count. Without a capture that is not RELAXED (the common case) this is one atomic load.
 */
rzcu_result emu_capture_unsafe_call(void)
{
    rzcu_capture_mode mine = t_capture_mode;
    if (mine == RZCU_STREAM_CAPTURE_MODE_RELAXED || atomic_load(&strict_captures) == 0)
        return RZCUDA_SUCCESS;
    pthread_t self = pthread_self();
    rzcu_result r = RZCUDA_SUCCESS;
    size_t n = atomic_load(&emu_nstreams_total);
    if (n > MAX_STREAMS)
        n = MAX_STREAMS;
    for (size_t i = 0; i < n; i++) {
        struct CUstream_st *s = &emu_stream_pool[i];
        if (!atomic_load(&s->capture) || atomic_load(&s->destroyed))
            continue;
        pthread_mutex_lock(&s->mu);
        unsigned mode = s->capture_mode;
        bool concerned = atomic_load(&s->capture) && mode != RZCU_STREAM_CAPTURE_MODE_RELAXED &&
                         (pthread_equal(s->capture_thread, self) ||
                          (mine == RZCU_STREAM_CAPTURE_MODE_GLOBAL && mode == RZCU_STREAM_CAPTURE_MODE_GLOBAL));
        pthread_mutex_unlock(&s->mu);
        if (concerned) {
            invalidate(s);
            r = RZCUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
        }
    }
    return r;
}

EMU_API rzcu_result cuThreadExchangeStreamCaptureMode(rzcu_capture_mode *mode)
{
    ENTER(cuThreadExchangeStreamCaptureMode);
    if (!mode || *mode > RZCU_STREAM_CAPTURE_MODE_RELAXED)
        return RZCUDA_ERROR_INVALID_VALUE;
    rzcu_capture_mode old = t_capture_mode;
    t_capture_mode = *mode;
    *mode = old;
    return RZCUDA_SUCCESS;
}

/* The legacy stream while a blocking stream of its context is captured: CUDA_ERROR_STREAM_CAPTURE_IMPLICIT. */
static rzcu_result legacy_capture_state(void)
{
    struct CUctx_st *c;
    CHECK(emu_current_ctx(&c));
    rzcu_result r = RZCUDA_SUCCESS;
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < c->nstreams && r == RZCUDA_SUCCESS; i++) {
        struct CUstream_st *t = c->streams[i];
        if (atomic_load(&t->capture) && !(t->flags & RZCU_STREAM_NON_BLOCKING))
            r = RZCUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    }
    pthread_mutex_unlock(&c->mu);
    return r;
}

/* The capture status of a stream argument (NULL: the legacy stream, or the per-thread stream for _ptsz). */
static rzcu_result capture_status(rzcu_stream hstream, bool per_thread, struct CUstream_st **out, int *status)
{
    *out = NULL;
    *status = 0;
    if ((!hstream && !per_thread) || hstream == RZCU_STREAM_LEGACY)
        return legacy_capture_state();
    CHECK(emu_resolve_stream(hstream, per_thread, NULL, out));
    *status = atomic_load(&(*out)->capture);
    return RZCUDA_SUCCESS;
}

static rzcu_result is_capturing(rzcu_stream hstream, rzcu_capture_status *status, bool per_thread)
{
    if (!status)
        return RZCUDA_ERROR_INVALID_VALUE;
    struct CUstream_st *s;
    int st;
    CHECK(capture_status(hstream, per_thread, &s, &st));
    *status = (rzcu_capture_status)st;
    return RZCUDA_SUCCESS;
}

EMU_API rzcu_result cuStreamIsCapturing(rzcu_stream hstream, rzcu_capture_status *status)
{
    ENTER(cuStreamIsCapturing);
    return is_capturing(hstream, status, false);
}

EMU_API rzcu_result cuStreamIsCapturing_ptsz(rzcu_stream hstream, rzcu_capture_status *status)
{
    ENTER(cuStreamIsCapturing_ptsz);
    return is_capturing(hstream, status, true);
}

/* v2 and v3 (v3 adds the edge data): status required; the rest valid only while a capture is active. */
static rzcu_result capture_info(rzcu_stream hstream, bool per_thread, rzcu_capture_status *status_out,
                                rzcu_uint64 *id_out, struct CUgraph_st **graph_out,
                                struct CUgraphNode_st *const **deps_out, const struct CUgraphEdgeData_st **edges_out, size_t *ndeps_out)
{
    if (!status_out || (edges_out && !deps_out))
        return RZCUDA_ERROR_INVALID_VALUE;
    struct CUstream_st *s;
    int st;
    CHECK(capture_status(hstream, per_thread, &s, &st));
    *status_out = (rzcu_capture_status)st;
    if (st != 1)
        return RZCUDA_SUCCESS;
    pthread_mutex_lock(&s->mu);
    if (id_out)
        *id_out = s->capture_id;
    if (graph_out)
        *graph_out = s->graph_handle;
    pthread_mutex_unlock(&s->mu);
    if (deps_out)
        *deps_out = NULL; /* no node handles in the emulator */
    if (edges_out)
        *edges_out = NULL;
    if (ndeps_out)
        *ndeps_out = 0;
    return RZCUDA_SUCCESS;
}

EMU_API rzcu_result cuStreamGetCaptureInfo_v2(rzcu_stream hstream, rzcu_capture_status *status_out,
                                              rzcu_uint64 *id_out, struct CUgraph_st **graph_out,
                                              struct CUgraphNode_st *const **deps_out, size_t *ndeps_out)
{
    ENTER(cuStreamGetCaptureInfo_v2);
    return capture_info(hstream, false, status_out, id_out, graph_out, deps_out, NULL, ndeps_out);
}

EMU_API rzcu_result cuStreamGetCaptureInfo_v2_ptsz(rzcu_stream hstream, rzcu_capture_status *status_out,
                                                   rzcu_uint64 *id_out, struct CUgraph_st **graph_out,
                                                   struct CUgraphNode_st *const **deps_out, size_t *ndeps_out)
{
    ENTER(cuStreamGetCaptureInfo_v2_ptsz);
    return capture_info(hstream, true, status_out, id_out, graph_out, deps_out, NULL, ndeps_out);
}

EMU_API rzcu_result cuStreamGetCaptureInfo_v3(rzcu_stream hstream, rzcu_capture_status *status_out,
                                              rzcu_uint64 *id_out, struct CUgraph_st **graph_out,
                                              struct CUgraphNode_st *const **deps_out, const struct CUgraphEdgeData_st **edges_out,
                                              size_t *ndeps_out)
{
    ENTER(cuStreamGetCaptureInfo_v3);
    return capture_info(hstream, false, status_out, id_out, graph_out, deps_out, edges_out, ndeps_out);
}

EMU_API rzcu_result cuStreamGetCaptureInfo_v3_ptsz(rzcu_stream hstream, rzcu_capture_status *status_out,
                                                   rzcu_uint64 *id_out, struct CUgraph_st **graph_out,
                                                   struct CUgraphNode_st *const **deps_out,
                                                   const struct CUgraphEdgeData_st **edges_out, size_t *ndeps_out)
{
    ENTER(cuStreamGetCaptureInfo_v3_ptsz);
    return capture_info(hstream, true, status_out, id_out, graph_out, deps_out, edges_out, ndeps_out);
}

static rzcu_result end_capture(rzcu_stream hstream, struct CUgraph_st **pgraph, bool per_thread)
{
    if (!pgraph)
        return RZCUDA_ERROR_INVALID_VALUE;
    struct CUstream_st *s;
    CHECK(user_stream(hstream, per_thread, &s));
    pthread_mutex_lock(&s->mu);
    int state = atomic_load(&s->capture);
    if (state && s->capture_mode != RZCU_STREAM_CAPTURE_MODE_RELAXED &&
        !pthread_equal(s->capture_thread, pthread_self())) {
        pthread_mutex_unlock(&s->mu);
        return RZCUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD; /* only its own thread ends it; it goes on */
    }
    struct CUgraph_st *graph = s->graph_handle;
    if (state && s->capture_mode != RZCU_STREAM_CAPTURE_MODE_RELAXED)
        atomic_fetch_sub(&strict_captures, 1);
    s->graph = NULL;
    s->graph_handle = NULL;
    atomic_store(&s->capture, 0);
    pthread_mutex_unlock(&s->mu);
    *pgraph = NULL;
    if (state == 0)
        return RZCUDA_ERROR_ILLEGAL_STATE;
    /* The graph's allocations exist, outside its launches, only until their free nodes: none after capture. */
    for (size_t i = 0; i < graph->g.n; i++) {
        const struct op *op = graph->g.ops[i];
        if (op->kind == OP_GALLOC) {
            const struct emu_gmem *m = op->user_data;
            emu_mem_graph_set_live(m->p, m->id, false);
        }
    }
    if (state == 2) {
        graph_clear(&graph->g); /* the slot stays unused: handles are never reused */
        return RZCUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    }
    atomic_store(&graph->magic, GRAPH_MAGIC);
    *pgraph = graph;
    return RZCUDA_SUCCESS;
}

EMU_API rzcu_result cuStreamEndCapture(rzcu_stream hstream, struct CUgraph_st **pgraph)
{
    ENTER(cuStreamEndCapture);
    return end_capture(hstream, pgraph, false);
}

EMU_API rzcu_result cuStreamEndCapture_ptsz(rzcu_stream hstream, struct CUgraph_st **pgraph)
{
    ENTER(cuStreamEndCapture_ptsz);
    return end_capture(hstream, pgraph, true);
}

/* ---- graphs and executables ---------------------------------------------------------------------------- */
static struct CUgraph_st *graph_from_handle(struct CUgraph_st *h)
{
    struct CUgraph_st *g = emu_table_slot(&graphs, h);
    return g && atomic_load(&g->magic) == GRAPH_MAGIC ? g : NULL;
}

static struct CUgraphExec_st *exec_from_handle(const void *h)
{
    struct CUgraphExec_st *e = emu_table_slot(&execs, h);
    return e && atomic_load(&e->magic) == EXEC_MAGIC ? e : NULL;
}

/* Count (delta +1) or uncount (-1) an executable of the graph whose nodes are g's, for each allocation it
 * makes; with +1, fails (changing nothing) when one already has an executable. */
static bool count_exec(const struct emu_graph *g, int delta)
{
    pthread_mutex_lock(&gmem_mu);
    bool ok = true;
    for (size_t i = 0; i < g->n && ok; i++)
        if (g->ops[i]->kind == OP_GALLOC && delta > 0)
            ok = ((struct emu_gmem *)g->ops[i]->user_data)->execs == 0;
    for (size_t i = 0; i < g->n && ok; i++)
        if (g->ops[i]->kind == OP_GALLOC)
            ((struct emu_gmem *)g->ops[i]->user_data)->execs += delta;
    pthread_mutex_unlock(&gmem_mu);
    return ok;
}

EMU_API rzcu_result cuGraphInstantiateWithFlags(struct CUgraphExec_st **pexec, struct CUgraph_st *hgraph,
                                                unsigned long long flags)
{
    ENTER(cuGraphInstantiateWithFlags);
    struct CUctx_st *c;
    CHECK(emu_current_ctx(&c));
    struct CUgraph_st *graph = graph_from_handle(hgraph);
    if (!pexec || !graph || (flags & ~INSTANTIATE_FLAGS))
        return RZCUDA_ERROR_INVALID_VALUE;
    if (!count_exec(&graph->g, +1))
        return RZCUDA_ERROR_INVALID_VALUE; /* a graph with allocation nodes has one executable at most */
    struct CUgraphExec_st *e = emu_table_new(&execs);
    if (!e) {
        count_exec(&graph->g, -1);
        return RZCUDA_ERROR_OUT_OF_MEMORY;
    }
    e->ctx = c;
    e->flags = flags;
    pthread_mutex_init(&e->mu, NULL);
    for (size_t i = 0; i < graph->g.n; i++) { /* the executable does not depend on the graph afterwards */
        struct op *op = op_clone(c, graph->g.ops[i]);
        struct op **v = e->g.n == e->g.cap ? realloc(e->g.ops, (e->g.cap ? 2 * e->g.cap : 16) * sizeof *v) : e->g.ops;
        if (!op || !v) {
            if (op)
                emu_free_op(op);
            count_exec(&graph->g, -1);
            graph_clear(&e->g);
            return RZCUDA_ERROR_OUT_OF_MEMORY;
        }
        if (is_memory_node(op))
            gmem_ref(op->user_data);
        if (e->g.n == e->g.cap)
            e->g.cap = e->g.cap ? 2 * e->g.cap : 16;
        e->g.ops = v;
        e->g.ops[e->g.n++] = op;
    }
    atomic_store(&e->magic, EXEC_MAGIC);
    *pexec = e;
    return RZCUDA_SUCCESS;
}

/*
 * A launch's memory nodes, at the call: every allocation node's memory must not be allocated now (from an
 * earlier launch), unless AUTO_FREE_ON_LAUNCH frees it first, and every free node's must be allocated when
 * the launch reaches it; if so, they are applied in order. CUDA_ERROR_INVALID_VALUE (nothing changed) if not.
 */
static rzcu_result launch_memory(struct CUgraphExec_st *e)
{
    size_t n = e->g.n, k = 0;
    struct {
        const struct emu_gmem *m;
        int live;
    } *seen = NULL;
    for (size_t i = 0; i < n; i++) {
        const struct op *op = e->g.ops[i];
        if (!is_memory_node(op))
            continue;
        if (!seen && !(seen = malloc(n * sizeof *seen)))
            return RZCUDA_ERROR_OUT_OF_MEMORY;
        const struct emu_gmem *m = op->user_data;
        size_t j = 0;
        while (j < k && seen[j].m != m)
            j++;
        if (j == k) {
            seen[k].m = m;
            seen[k++].live = emu_mem_graph_state(m->p, m->id) == 1;
        }
        if (op->kind == OP_GALLOC && seen[j].live && !(e->flags & AUTO_FREE_ON_LAUNCH)) {
            free(seen);
            return RZCUDA_ERROR_INVALID_VALUE; /* still allocated from an earlier launch */
        }
        if (op->kind == OP_GFREE && !seen[j].live) {
            free(seen);
            return RZCUDA_ERROR_INVALID_VALUE; /* freeing what is not allocated */
        }
        seen[j].live = op->kind == OP_GALLOC;
    }
    free(seen);
    for (size_t i = 0; i < n; i++) {
        const struct op *op = e->g.ops[i];
        if (is_memory_node(op)) {
            const struct emu_gmem *m = op->user_data;
            emu_mem_graph_set_live(m->p, m->id, op->kind == OP_GALLOC);
        }
    }
    return RZCUDA_SUCCESS;
}

/* Each node, in capture order, as a copy submitted to the stream (the graph can be launched again), after the
 * previous launch of the same executable. */
static rzcu_result graph_launch(void *hexec, rzcu_stream hstream, bool per_thread)
{
    struct CUgraphExec_st *e = exec_from_handle(hexec);
    if (!e)
        return RZCUDA_ERROR_INVALID_VALUE;
    struct CUstream_st *s;
    CHECK(emu_resolve_stream(hstream, per_thread, NULL, &s));
    if (s->ctx != e->ctx)
        return RZCUDA_ERROR_INVALID_VALUE;
    bool has_memory = false;
    for (size_t i = 0; i < e->g.n; i++)
        has_memory = has_memory || is_memory_node(e->g.ops[i]);
    bool captured = atomic_load(&s->capture) != 0; /* its nodes are recorded, as a child graph's would be */
    if (captured && has_memory)
        return emu_capture_refuse_sync(NULL, s); /* the driver refuses child graphs with memory nodes */
    pthread_mutex_lock(&e->mu);
    rzcu_result r = captured ? RZCUDA_SUCCESS : launch_memory(e);
    bool first = !captured;
    for (size_t i = 0; i < e->g.n && r == RZCUDA_SUCCESS; i++) {
        if (is_memory_node(e->g.ops[i]))
            continue;
        struct op *op = op_clone(s->ctx, e->g.ops[i]);
        if (!op) {
            r = RZCUDA_ERROR_OUT_OF_MEMORY;
            break;
        }
        if (first && e->last_s)
            op->after = (struct dep){e->last_s, e->last_seq};
        first = false;
        uint64_t seq = 0;
        r = emu_submit_seq(s, op, false, &seq);
        if (r == RZCUDA_SUCCESS && !captured) {
            e->last_s = s;
            e->last_seq = seq;
        }
    }
    pthread_mutex_unlock(&e->mu);
    return r;
}

EMU_API rzcu_result cuGraphLaunch(void *hexec, rzcu_stream hstream)
{
    ENTER(cuGraphLaunch);
    return graph_launch(hexec, hstream, false);
}

EMU_API rzcu_result cuGraphLaunch_ptsz(void *hexec, rzcu_stream hstream)
{
    ENTER(cuGraphLaunch_ptsz);
    return graph_launch(hexec, hstream, true);
}

/* The graph's allocations stay while an executable made from it (or the program, after a launch) has them. */
EMU_API rzcu_result cuGraphDestroy(struct CUgraph_st *hgraph)
{
    ENTER(cuGraphDestroy);
    struct CUgraph_st *g = graph_from_handle(hgraph);
    uint32_t expected = GRAPH_MAGIC;
    if (!g || !atomic_compare_exchange_strong(&g->magic, &expected, 0))
        return RZCUDA_ERROR_INVALID_VALUE;
    graph_clear(&g->g);
    return RZCUDA_SUCCESS;
}

/* Work it queued keeps running: it was submitted as copies. */
EMU_API rzcu_result cuGraphExecDestroy(struct CUgraphExec_st *hexec)
{
    ENTER(cuGraphExecDestroy);
    struct CUgraphExec_st *e = exec_from_handle(hexec);
    uint32_t expected = EXEC_MAGIC;
    if (!e || !atomic_compare_exchange_strong(&e->magic, &expected, 0))
        return RZCUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&e->mu); /* a launch in progress on another thread finishes first */
    count_exec(&e->g, -1);
    graph_clear(&e->g);
    pthread_mutex_unlock(&e->mu);
    return RZCUDA_SUCCESS;
}
