/*
 * Emulated graph executables: cuGraphInstantiateWithFlags, cuGraphLaunch (and _ptsz), cuGraphDestroy,
 * cuGraphExecDestroy. The rules below are also those of stream capture (emu_capture.c: the capture entry
 * points and what they refuse) and of graph memory nodes (recorded by emu_capture.c, kept by
 * emu_graph_nodes.c).
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


#include "emu_graph.h"

#define EXEC_MAGIC 0x47455843u
#define AUTO_FREE_ON_LAUNCH 1ull /* CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH */
#define INSTANTIATE_FLAGS 0xfull /* AUTO_FREE_ON_LAUNCH, UPLOAD, DEVICE_LAUNCH, USE_NODE_PRIORITY */

struct CUgraphExec_st {
    _Atomic uint32_t magic;
    struct CUctx_st *ctx;
    unsigned long long flags;
    pthread_mutex_t mu; /* launches of one executable are ordered: the last one's end */
    struct CUstream_st *last_s;
    uint64_t last_seq;
    struct emu_graph g;
};


#define MAX_EXECS ((size_t)1 << 16)
static struct emu_table execs = EMU_TABLE_INIT("graph exec", struct CUgraphExec_st, MAX_EXECS);

bool emu_graphs_init(void) { return emu_graph_handles_init() && emu_table_init(&execs); }

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

/* ---- graphs and executables ---------------------------------------------------------------------------- */
static struct CUgraphExec_st *exec_from_handle(const void *h)
{
    struct CUgraphExec_st *e = emu_table_slot(&execs, h);
    return e && atomic_load(&e->magic) == EXEC_MAGIC ? e : NULL;
}


EMU_API rzcu_result cuGraphInstantiateWithFlags(struct CUgraphExec_st **pexec, struct CUgraph_st *hgraph,
                                                unsigned long long flags)
{
    ENTER_CTX(cuGraphInstantiateWithFlags, c);
    struct CUgraph_st *graph = emu_graph_from_handle(hgraph);
    if (!pexec || !graph || (flags & ~INSTANTIATE_FLAGS))
        return RZCUDA_ERROR_INVALID_VALUE;
    if (!emu_graph_count_exec(&graph->g, +1))
        return RZCUDA_ERROR_INVALID_VALUE; /* a graph with allocation nodes has one executable at most */
    struct CUgraphExec_st *e = emu_table_new(&execs);
    if (!e) {
        emu_graph_count_exec(&graph->g, -1);
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
            emu_graph_count_exec(&graph->g, -1);
            emu_graph_clear(&e->g);
            return RZCUDA_ERROR_OUT_OF_MEMORY;
        }
        if (emu_is_memory_node(op))
            emu_gmem_ref(op->user_data);
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
        if (!emu_is_memory_node(op))
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
        if (emu_is_memory_node(op)) {
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
        has_memory = has_memory || emu_is_memory_node(e->g.ops[i]);
    bool captured = atomic_load(&s->capture) != 0; /* its nodes are recorded, as a child graph's would be */
    if (captured && has_memory)
        return emu_capture_refuse_sync(NULL, s); /* the driver refuses child graphs with memory nodes */
    pthread_mutex_lock(&e->mu);
    rzcu_result r = captured ? RZCUDA_SUCCESS : launch_memory(e);
    bool first = !captured;
    for (size_t i = 0; i < e->g.n && r == RZCUDA_SUCCESS; i++) {
        if (emu_is_memory_node(e->g.ops[i]))
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
    struct CUgraph_st *g = emu_graph_from_handle(hgraph);
    uint32_t expected = GRAPH_MAGIC;
    if (!g || !atomic_compare_exchange_strong(&g->magic, &expected, 0))
        return RZCUDA_ERROR_INVALID_VALUE;
    emu_graph_clear(&g->g);
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
    emu_graph_count_exec(&e->g, -1);
    emu_graph_clear(&e->g);
    pthread_mutex_unlock(&e->mu);
    return RZCUDA_SUCCESS;
}
