/*
 * The context table and the calling thread's state: contexts are slots of a reserved table (never unmapped),
 * so a handle is validated by range and magic without touching foreign memory; each thread has a context
 * stack (the current context is its top) and its per-thread default streams (emu_stream_table.c). Destroyed
 * created contexts are handed out again (see emu_ctx_recycle). The context entry points are emu_context_api.c.
 */
#define _GNU_SOURCE
#include <stdlib.h>

#include "emu_engine.h"

struct CUctx_st *emu_ctx_pool;
atomic_size_t emu_nctx;
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
struct thread_state *emu_thread_state(void)
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
struct CUctx_st *emu_ctx_stack_top(void)
{
    return tstate && tstate->depth ? tstate->stack[tstate->depth - 1] : NULL;
}

static size_t ctx_dump_mark;

bool emu_contexts_init(void)
{
    emu_ctx_pool = emu_table_reserve(MAX_CONTEXTS * sizeof *emu_ctx_pool);
    return emu_ctx_pool != NULL;
}

bool emu_valid_device(rzcu_device dev) { return dev >= 0 && dev < emu_cfg.ndevices; }

int emu_context_device(struct CUctx_st *ctx) { return ctx->device; }
unsigned emu_context_gen(struct CUctx_st *ctx) { return atomic_load(&ctx->gen); }

bool emu_context_live(struct CUctx_st *ctx, unsigned gen)
{
    return ctx && atomic_load(&ctx->magic) == CTX_MAGIC && atomic_load(&ctx->alive) && atomic_load(&ctx->gen) == gen;
}

/* A context handle: a slot of the context table, or NULL. */
struct CUctx_st *emu_ctx_from_handle(rzcu_context h)
{
    uintptr_t p = (uintptr_t)h, base = (uintptr_t)emu_ctx_pool;
    if (!emu_ctx_pool || p < base || p >= base + atomic_load(&emu_nctx) * sizeof *emu_ctx_pool ||
        (p - base) % sizeof *emu_ctx_pool)
        return NULL;
    struct CUctx_st *c = (struct CUctx_st *)h;
    return atomic_load(&c->magic) == CTX_MAGIC ? c : NULL;
}

rzcu_result emu_current_ctx(struct CUctx_st **out)
{
    struct CUctx_st *c = emu_ctx_stack_top();
    if (!c)
        return RZCUDA_ERROR_INVALID_CONTEXT;
    if (!atomic_load(&c->alive))
        return RZCUDA_ERROR_CONTEXT_IS_DESTROYED;
    *out = c;
    return RZCUDA_SUCCESS;
}

bool emu_ctx_stack_push(struct CUctx_st *c)
{
    struct thread_state *t = emu_thread_state();
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

struct CUctx_st *emu_ctx_stack_pop(void)
{
    return tstate && tstate->depth ? tstate->stack[--tstate->depth] : NULL;
}

/* Makes c the top of the calling thread's context stack (pushed when the stack is empty). */
bool emu_ctx_stack_set_top(struct CUctx_st *c)
{
    if (emu_ctx_stack_top()) {
        tstate->stack[tstate->depth - 1] = c;
        return true;
    }
    return emu_ctx_stack_push(c);
}

/*
 * Destroyed created contexts, newest last: cuCtxCreate hands out the most recently destroyed slot again, as
 * a real driver hands out the freed memory of a destroyed context for the next one (the same CUcontext
 * value), so code that keys anything by the handle sees it come back for a different context.
 */
static pthread_mutex_t reuse_mu = PTHREAD_MUTEX_INITIALIZER;
static struct CUctx_st **reusable;
static size_t nreusable, reusable_cap;

void emu_ctx_recycle(struct CUctx_st *c)
{
    pthread_mutex_lock(&reuse_mu);
    if (nreusable == reusable_cap) {
        size_t cap = reusable_cap ? 2 * reusable_cap : 16;
        struct CUctx_st **v = realloc(reusable, cap * sizeof *v);
        if (v) {
            reusable = v;
            reusable_cap = cap;
        }
    }
    if (nreusable < reusable_cap)
        reusable[nreusable++] = c; /* else: out of memory, the slot is simply not reused */
    pthread_mutex_unlock(&reuse_mu);
}

struct CUctx_st *emu_ctx_reused(int device)
{
    pthread_mutex_lock(&reuse_mu);
    struct CUctx_st *c = nreusable ? reusable[--nreusable] : NULL;
    pthread_mutex_unlock(&reuse_mu);
    if (c)
        c->device = device;
    return c;
}

struct CUctx_st *emu_ctx_new(int device, bool is_primary)
{
    size_t idx = atomic_fetch_add(&emu_nctx, 1);
    if (idx >= MAX_CONTEXTS)
        return NULL;
    emu_make_dumpable(emu_ctx_pool, &ctx_dump_mark, (idx + 1) * sizeof *emu_ctx_pool);
    struct CUctx_st *c = &emu_ctx_pool[idx];
    c->device = device;
    c->primary = is_primary;
    pthread_mutex_init(&c->mu, NULL);
    atomic_store(&c->magic, CTX_MAGIC);
    return c;
}
