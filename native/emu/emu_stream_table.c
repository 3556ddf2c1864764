/*
 * The stream table: streams are slots of a reserved table (never unmapped or reused), so a handle is
 * validated by range and magic without touching foreign memory. Here: creating a stream (listed in its
 * context), each thread's per-thread default stream per context activation, and the resolution of a stream
 * argument (the legacy stream, the per-thread stream, a user handle). The work on streams: emu_stream.c.
 */
#define _GNU_SOURCE
#include <stdlib.h>

#include "emu_engine.h"

struct CUstream_st *emu_stream_pool;
atomic_size_t emu_nstreams_total;
static size_t stream_dump_mark;

bool emu_streams_init(void)
{
    emu_stream_pool = emu_table_reserve(MAX_STREAMS * sizeof *emu_stream_pool);
    return emu_stream_pool != NULL;
}

struct CUstream_st *emu_stream_new(struct CUctx_st *ctx, unsigned flags, enum stream_kind kind)
{
    size_t idx = atomic_fetch_add(&emu_nstreams_total, 1);
    if (idx >= MAX_STREAMS)
        return NULL;
    emu_make_dumpable(emu_stream_pool, &stream_dump_mark, (idx + 1) * sizeof *emu_stream_pool);
    struct CUstream_st *s = &emu_stream_pool[idx];
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

static struct CUstream_st *per_thread_stream(struct CUctx_st *ctx)
{
    struct thread_state *t = emu_thread_state();
    if (!t)
        return NULL;
    unsigned gen = atomic_load(&ctx->gen);
    for (size_t i = 0; i < t->pt_n; i++)
        if (t->pt[i].ctx == ctx) {
            if (t->pt[i].gen == gen && !atomic_load(&t->pt[i].s->destroyed))
                return t->pt[i].s;
            struct CUstream_st *s = emu_stream_new(ctx, RZCU_STREAM_DEFAULT, STREAM_PER_THREAD);
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
    struct CUstream_st *s = emu_stream_new(ctx, RZCU_STREAM_DEFAULT, STREAM_PER_THREAD);
    if (s)
        t->pt[t->pt_n++] = (struct per_thread_entry){ctx, gen, s};
    return s;
}

/* A user stream handle: a live slot of the stream table. */
struct CUstream_st *emu_stream_from_handle(rzcu_stream h)
{
    uintptr_t p = (uintptr_t)h, base = (uintptr_t)emu_stream_pool;
    if (!emu_stream_pool || p < base || p >= base + atomic_load(&emu_nstreams_total) * sizeof *emu_stream_pool ||
        (p - base) % sizeof *emu_stream_pool)
        return NULL;
    struct CUstream_st *s = (struct CUstream_st *)h;
    if (atomic_load(&s->magic) != STREAM_MAGIC || atomic_load(&s->destroyed) || !atomic_load(&s->ctx->alive))
        return NULL;
    return s;
}

/* Resolves a stream argument; NULL is the legacy stream, or the per-thread stream for _ptsz/_ptds calls. */
rzcu_result emu_resolve_stream(rzcu_stream h, bool per_thread, struct CUctx_st *ctx, struct CUstream_st **out)
{
    if (!h)
        h = per_thread ? RZCU_STREAM_PER_THREAD : RZCU_STREAM_LEGACY;
    if (h == RZCU_STREAM_LEGACY || h == RZCU_STREAM_PER_THREAD) {
        if (!ctx)
            CHECK(emu_current_ctx(&ctx));
        struct CUstream_st *s = h == RZCU_STREAM_LEGACY ? ctx->legacy : per_thread_stream(ctx);
        if (!s)
            return RZCUDA_ERROR_OUT_OF_MEMORY;
        *out = s;
        return RZCUDA_SUCCESS;
    }
    struct CUstream_st *s = emu_stream_from_handle(h);
    if (!s)
        return RZCUDA_ERROR_INVALID_HANDLE;
    *out = s;
    return RZCUDA_SUCCESS;
}
