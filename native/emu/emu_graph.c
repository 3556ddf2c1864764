/*
 * Emulated stream capture and graphs: cuStreamBeginCapture, cuStreamEndCapture, cuStreamIsCapturing,
 * cuGraphInstantiateWithFlags, cuGraphLaunch, cuGraphDestroy, cuGraphExecDestroy.
 *
 * While a stream is captured, the kernels, copies, memsets and host functions submitted to it are recorded
 * instead of run; launching the instantiated graph submits a copy of each, in order, to the launch stream.
 * What the driver forbids during capture fails here too, with its errors: synchronising the captured stream
 * (or its context) is CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidates the capture, so that every later
 * capture call and cuStreamEndCapture return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED; so does a synchronous
 * copy or memset into it. The emulator's choices: stream-ordered allocation during capture allocates at the
 * call (as outside capture), and a stream-ordered free or a batched copy cannot be captured (no memory or
 * batch nodes: CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, which invalidates the capture). Capture modes are
 * accepted and not enforced beyond the captured stream and its context; the legacy stream cannot be captured.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "emu_engine.h"

#define GRAPH_MAGIC 0x47525048u
#define EXEC_MAGIC 0x47455843u
#define MAX_GRAPHS ((size_t)1 << 16)

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
    struct emu_graph g;
};

static struct emu_table graphs = EMU_TABLE_INIT("graph", struct CUgraph_st, MAX_GRAPHS);
static struct emu_table execs = EMU_TABLE_INIT("graph exec", struct CUgraphExec_st, MAX_GRAPHS);

bool emu_graphs_init(void) { return emu_table_init(&graphs) && emu_table_init(&execs); }

static void graph_clear(struct emu_graph *g)
{
    for (size_t i = 0; i < g->n; i++)
        emu_free_op(g->ops[i]);
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
    } else {
        struct emu_graph *g = s->graph;
        if (g->n == g->cap) {
            size_t cap = g->cap ? 2 * g->cap : 16;
            struct op **v = realloc(g->ops, cap * sizeof *v);
            if (v) {
                g->ops = v;
                g->cap = cap;
            }
        }
        if (g->n < g->cap) {
            g->ops[g->n++] = op;
            op = NULL;
        } else {
            r = RZCUDA_ERROR_OUT_OF_MEMORY;
        }
    }
    pthread_mutex_unlock(&s->mu);
    if (op)
        emu_free_op(op);
    return r;
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

static rzcu_result user_stream(rzcu_stream h, struct CUstream_st **out)
{
    if (!h || h == RZCU_STREAM_LEGACY)
        return RZCUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; /* the legacy stream cannot be captured */
    return emu_resolve_stream(h, false, NULL, out);
}

EMU_API rzcu_result cuStreamBeginCapture_v2(rzcu_stream hstream, unsigned int mode)
{
    ENTER(cuStreamBeginCapture_v2);
    struct CUstream_st *s;
    CHECK(user_stream(hstream, &s));
    if (mode > 2) /* CU_STREAM_CAPTURE_MODE_GLOBAL, THREAD_LOCAL, RELAXED */
        return RZCUDA_ERROR_INVALID_VALUE;
    struct emu_graph *g = calloc(1, sizeof *g);
    if (!g)
        return RZCUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&s->mu);
    rzcu_result r = RZCUDA_SUCCESS;
    if (atomic_load(&s->capture)) {
        r = RZCUDA_ERROR_ILLEGAL_STATE;
    } else {
        s->graph = g;
        g = NULL;
        atomic_store(&s->capture, 1);
    }
    pthread_mutex_unlock(&s->mu);
    free(g);
    return r;
}

EMU_API rzcu_result cuStreamIsCapturing(rzcu_stream hstream, rzcu_capture_status *status)
{
    ENTER(cuStreamIsCapturing);
    if (!status)
        return RZCUDA_ERROR_INVALID_VALUE;
    if (!hstream || hstream == RZCU_STREAM_LEGACY) {
        *status = 0;
        return RZCUDA_SUCCESS;
    }
    struct CUstream_st *s;
    CHECK(emu_resolve_stream(hstream, false, NULL, &s));
    *status = (rzcu_capture_status)atomic_load(&s->capture);
    return RZCUDA_SUCCESS;
}

EMU_API rzcu_result cuStreamEndCapture(rzcu_stream hstream, struct CUgraph_st **pgraph)
{
    ENTER(cuStreamEndCapture);
    if (!pgraph)
        return RZCUDA_ERROR_INVALID_VALUE;
    struct CUstream_st *s;
    CHECK(user_stream(hstream, &s));
    pthread_mutex_lock(&s->mu);
    int state = atomic_load(&s->capture);
    struct emu_graph *g = s->graph;
    s->graph = NULL;
    atomic_store(&s->capture, 0);
    pthread_mutex_unlock(&s->mu);
    *pgraph = NULL;
    if (state == 0)
        return RZCUDA_ERROR_ILLEGAL_STATE;
    if (state == 2) {
        graph_clear(g);
        free(g);
        return RZCUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    }
    struct CUgraph_st *graph = emu_table_new(&graphs);
    if (!graph) {
        graph_clear(g);
        free(g);
        return RZCUDA_ERROR_OUT_OF_MEMORY;
    }
    graph->g = *g;
    free(g);
    atomic_store(&graph->magic, GRAPH_MAGIC);
    *pgraph = graph;
    return RZCUDA_SUCCESS;
}

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

EMU_API rzcu_result cuGraphInstantiateWithFlags(struct CUgraphExec_st **pexec, struct CUgraph_st *hgraph,
                                                unsigned long long flags)
{
    ENTER(cuGraphInstantiateWithFlags);
    struct CUctx_st *c;
    CHECK(emu_current_ctx(&c));
    (void)flags;
    struct CUgraph_st *graph = graph_from_handle(hgraph);
    if (!pexec || !graph)
        return RZCUDA_ERROR_INVALID_VALUE;
    struct CUgraphExec_st *e = emu_table_new(&execs);
    if (!e)
        return RZCUDA_ERROR_OUT_OF_MEMORY;
    e->ctx = c;
    for (size_t i = 0; i < graph->g.n; i++) { /* the executable does not depend on the graph afterwards */
        struct op *op = op_clone(c, graph->g.ops[i]);
        struct op **v = e->g.n == e->g.cap ? realloc(e->g.ops, (e->g.cap ? 2 * e->g.cap : 16) * sizeof *v) : e->g.ops;
        if (!op || !v) {
            if (op)
                emu_free_op(op);
            graph_clear(&e->g);
            return RZCUDA_ERROR_OUT_OF_MEMORY;
        }
        if (e->g.n == e->g.cap)
            e->g.cap = e->g.cap ? 2 * e->g.cap : 16;
        e->g.ops = v;
        e->g.ops[e->g.n++] = op;
    }
    atomic_store(&e->magic, EXEC_MAGIC);
    *pexec = e;
    return RZCUDA_SUCCESS;
}

/* Each node, in capture order, as a copy submitted to the stream: the graph can be launched again. */
EMU_API rzcu_result cuGraphLaunch(void *hexec, rzcu_stream hstream)
{
    ENTER(cuGraphLaunch);
    struct CUgraphExec_st *e = exec_from_handle(hexec);
    if (!e)
        return RZCUDA_ERROR_INVALID_VALUE;
    struct CUstream_st *s;
    CHECK(emu_resolve_stream(hstream, false, NULL, &s));
    if (s->ctx != e->ctx)
        return RZCUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < e->g.n; i++) {
        struct op *op = op_clone(s->ctx, e->g.ops[i]);
        if (!op)
            return RZCUDA_ERROR_OUT_OF_MEMORY;
        CHECK(emu_submit(s, op, false));
    }
    return RZCUDA_SUCCESS;
}

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
    graph_clear(&e->g);
    return RZCUDA_SUCCESS;
}
