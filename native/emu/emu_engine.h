/*
 * The emulated driver's execution engine, shared by the files of its entry points: the context table and
 * thread state (emu_context.c), the stream table (emu_stream_table.c), operations (emu_op.c), stream capture
 * (emu_capture.c) and the stream engine that queues and runs operations (emu_stream.c). Internal to the
 * emulator.
 */
#ifndef REDZONE_EMU_ENGINE_H
#define REDZONE_EMU_ENGINE_H

#include "emu_internal.h"

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

/* OP_GALLOC, OP_GFREE: a graph's memory allocation and free nodes (emu_graph_nodes.c), recorded during capture and
 * applied when the graph is launched; never queued. */
enum op_kind { OP_NOP, OP_COPY, OP_SET, OP_HOST, OP_BATCH, OP_FREE, OP_KERNEL, OP_GALLOC, OP_GFREE, OP_COPY3D };

/* OP_COPY3D (cuMemcpy2D/3D): depth slices of height rows of width bytes, from src and dst (the first bytes
 * copied), rows pitch bytes apart and slices slice bytes apart on each side. */
struct copy_box {
    size_t width, height, depth;
    size_t src_pitch, src_slice, dst_pitch, dst_slice;
};

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
    /* OP_SET of wider elements or rows (cuMemsetD16/D32, cuMemsetD2D*): elem bytes of pattern (0 or 1: value,
     * n bytes); rows > 0: that many rows of row_bytes, pitch apart */
    unsigned elem;
    uint32_t pattern;
    size_t pitch, rows, row_bytes;
    struct copy_box box; /* OP_COPY3D */
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
    struct dep wait_for; /* OP_NOP of cuStreamWaitEvent: the work the event captured ({NULL, 0}: none) */
    size_t kparams_size, nkparams; /* OP_KERNEL: the parameter block's size and pointer count (graph copies) */
    struct dep after; /* also runs after this (s NULL: none): a graph launch is ordered after the previous one */
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
    _Atomic int capture;      /* stream capture: 0 none, 1 active, 2 invalidated (emu_capture.c) */
    struct emu_graph *graph;  /* the work captured so far, under mu */
    struct CUgraph_st *graph_handle; /* the graph being captured into (cuStreamGetCaptureInfo), under mu */
    uint64_t capture_id;      /* the capture sequence's id, unique in the process, under mu */
    unsigned capture_mode;    /* the mode cuStreamBeginCapture was given (CU_STREAM_CAPTURE_MODE_*), under mu */
    pthread_t capture_thread; /* the thread that began the capture, under mu */
};

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

/* ---- reservations for the context and stream tables (emu_table.c) ---- */
/* A reservation of bytes (not dumped to core files, a LeakSanitizer root); NULL when it cannot be made. */
void *emu_table_reserve(size_t bytes);
/* The part of a reservation in use, [table, table + used_bytes), is dumped to core files (*mark: how much is). */
void emu_make_dumpable(void *table, size_t *mark, size_t used_bytes);

/* ---- the context table and the calling thread's context stack (emu_context.c) ---- */
bool emu_contexts_init(void);
struct thread_state *emu_thread_state(void); /* NULL only when out of memory */
bool emu_valid_device(rzcu_device dev);
/* A context handle: a slot of the context table (whatever its state), or NULL. */
struct CUctx_st *emu_ctx_from_handle(rzcu_context h);
/* A new slot (NULL when the table is full), the most recently destroyed created context's slot (NULL: none),
 * and the recycling of a destroyed created context's slot. */
struct CUctx_st *emu_ctx_new(int device, bool is_primary);
struct CUctx_st *emu_ctx_reused(int device);
void emu_ctx_recycle(struct CUctx_st *c);
/* The calling thread's context stack: its top (NULL when empty), push and replace-top (false: out of
 * memory), pop (NULL when empty). */
struct CUctx_st *emu_ctx_stack_top(void);
bool emu_ctx_stack_push(struct CUctx_st *c);
bool emu_ctx_stack_set_top(struct CUctx_st *c);
struct CUctx_st *emu_ctx_stack_pop(void);

/* ---- the stream table (emu_stream_table.c) ---- */
bool emu_streams_init(void);
struct CUstream_st *emu_stream_new(struct CUctx_st *ctx, unsigned flags, enum stream_kind kind);
/* A user stream handle: a live slot of the stream table whose context is alive, or NULL. */
struct CUstream_st *emu_stream_from_handle(rzcu_stream h);
/* Resolves a stream argument; NULL is the legacy stream, or the per-thread stream for _ptsz/_ptds calls. */
rzcu_result emu_resolve_stream(rzcu_stream h, bool per_thread, struct CUctx_st *ctx, struct CUstream_st **out);

/* ---- operations (emu_op.c) ---- */
/* A zeroed operation with room for a dependency on every stream of ctx (NULL when out of memory). */
struct op *emu_op_new(struct CUctx_st *ctx, enum op_kind kind);
void emu_free_op(struct op *op);

/* ---- the stream engine (emu_stream.c) ---- */
uint64_t emu_completed(struct CUstream_st *s);
uint64_t emu_hold_now(void);
void emu_wait_seq(struct CUstream_st *s, uint64_t seq);
rzcu_result emu_submit_seq_ex(struct CUstream_st *s, struct op *op, bool wait, uint64_t *seq_out, bool inline_only,
                                 struct op **retry);
rzcu_result emu_submit_seq(struct CUstream_st *s, struct op *op, bool wait, uint64_t *seq_out);
rzcu_result emu_submit(struct CUstream_st *s, struct op *op, bool wait);
void emu_stream_sync(struct CUstream_st *s);
void emu_ctx_sync(struct CUctx_st *ctx);
void emu_sync_all_contexts(void);
/* The current context and the stream of a batched copy (cuMemcpyBatchAsync, cuMemcpy3DBatchAsync): the legacy
 * stream is refused; *fail_idx (when given) is SIZE_MAX until a copy is found bad. */
rzcu_result emu_batch_stream(rzcu_stream h, bool per_thread, size_t *fail_idx, struct CUctx_st **ctx,
                             struct CUstream_st **out);
extern struct CUctx_st *emu_ctx_pool;
extern atomic_size_t emu_nctx;
extern struct CUstream_st *emu_stream_pool;
extern atomic_size_t emu_nstreams_total;
extern atomic_ullong emu_pending_ops;

/* CUDA_SUCCESS, or the process's sticky error (a kernel fault, in any context): what a call that waited for
 * ctx's work returns afterwards (the error is the process's, not the context's: cuda.h). */
static inline rzcu_result emu_ctx_error(struct CUctx_st *ctx)
{
    (void)ctx;
    return emu_sticky_error();
}

/* ---- graph executables (emu_graph.c) ---- */
bool emu_graphs_init(void);

/* ---- stream capture (emu_capture.c) ---- */
/* op was submitted to s while it is being captured: record it (taking it) or refuse it (freeing it). */
rzcu_result emu_capture_record(struct CUstream_st *s, struct op *op, bool wait);
/* A synchronisation of s (or of its whole context) while it is captured: illegal; invalidates the capture. */
rzcu_result emu_capture_refuse_sync(struct CUctx_st *ctx, struct CUstream_st *s);
/* A query or wait of an event last recorded into capture capture_id of s (s NULL: none): refused, the
 * capture invalidated, while that capture is in progress. */
rzcu_result emu_capture_event_conflict(struct CUstream_st *s, uint64_t capture_id);
/* The id of the capture s is in (0: none). */
uint64_t emu_capture_id_of(struct CUstream_st *s);
/* cuMemAllocAsync / cuMemAllocFromPoolAsync on a captured stream: a memory allocation node (the memory, of
 * `device`, is the graph's; *dptr its fixed address). cuMemFreeAsync on one: a free node for a graph
 * allocation (CUDA_ERROR_INVALID_VALUE, invalidating the capture, for any other pointer). */
rzcu_result emu_capture_alloc(struct CUstream_st *s, int device, size_t bytesize, rzcu_deviceptr *dptr);
rzcu_result emu_capture_free(struct CUstream_st *s, rzcu_deviceptr dptr);

/* ---- events (emu_events.c) ---- */
bool emu_events_init(void);

#endif /* REDZONE_EMU_ENGINE_H */
