/*
 * Emulated stream capture: cuStreamBeginCapture, cuStreamEndCapture, cuStreamIsCapturing,
 * cuStreamGetCaptureInfo (v2, v3), their per-thread-stream (_ptsz) forms, cuThreadExchangeStreamCaptureMode,
 * the recording of what is submitted to a captured stream (emu_capture_record, called by the stream engine)
 * and of graph memory nodes, and the refusals of what capture forbids. The rules: emu_graph.c's opening
 * comment.
 */
#define _GNU_SOURCE
#include <stdlib.h>

#include "emu_graph.h"

static atomic_ullong next_capture_id = 1;
static atomic_int strict_captures; /* captures begun and not ended whose mode is not RELAXED */

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
        emu_gmem_ref(m);
    return r;
}


rzcu_result emu_capture_alloc(struct CUstream_st *s, int device, size_t bytesize, rzcu_deviceptr *dptr)
{
    if (atomic_load(&s->capture) == 2)
        return RZCUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    struct emu_gmem *m;
    rzcu_result r = emu_gmem_alloc(s->ctx, device, bytesize, &m);
    if (r != RZCUDA_SUCCESS)
        return r;
    /* m's one reference is this function's, until the node holds its own */
    r = record_memory_node(s, OP_GALLOC, m);
    if (r == RZCUDA_SUCCESS)
        *dptr = m->p; /* allocated (usable by the work captured after it) until its free node */
    emu_gmem_unref(m);
    return r;
}

rzcu_result emu_capture_free(struct CUstream_st *s, rzcu_deviceptr dptr)
{
    if (atomic_load(&s->capture) == 2)
        return RZCUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    uint64_t id = emu_mem_graph_id(dptr);
    struct emu_gmem *m = id ? emu_gmem_by_id(id) : NULL;
    if (!m) {
        invalidate(s); /* only a graph allocation, allocated now, can have a free node */
        return RZCUDA_ERROR_INVALID_VALUE;
    }
    rzcu_result r = record_memory_node(s, OP_GFREE, m);
    if (r == RZCUDA_SUCCESS)
        emu_mem_graph_set_live(m->p, m->id, false); /* the work captured after it may not use it */
    emu_gmem_unref(m);
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
    else if (!(graph = emu_graph_handle_new())) /* its handle is valid (magic set) once the capture ends */
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
        emu_graph_clear(&graph->g); /* the slot stays unused: handles are never reused */
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

