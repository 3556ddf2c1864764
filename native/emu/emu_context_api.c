/*
 * The context entry points: primary contexts (retain, release, reset, state), created contexts (create,
 * destroy), the current context (get, set, push, pop), cuCtxGetDevice and cuCtxSynchronize. A context's
 * activation creates its legacy stream; its teardown completes its work, then releases its streams, device
 * memory, pinned host memory and opened IPC handles. The context table itself is emu_context.c.
 */
#define _GNU_SOURCE
#include <stdlib.h>

#include "emu_engine.h"

static struct CUctx_st *primary[CUDA_EMU_MAX_DEVICES];
static pthread_mutex_t primary_mu = PTHREAD_MUTEX_INITIALIZER;

static bool ctx_activate(struct CUctx_st *c)
{
    atomic_fetch_add(&c->gen, 1);
    c->legacy = emu_stream_new(c, RZCU_STREAM_DEFAULT, STREAM_LEGACY);
    if (!c->legacy)
        return false;
    atomic_store(&c->alive, true);
    return true;
}

/* Completes all work, then releases the context's streams and memory. */
static void ctx_teardown(struct CUctx_st *c)
{
    emu_ctx_sync(c);
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
    emu_ipc_free_context(c);
}

/* ------------------------------------------------------------------------------------------------------ */
/* contexts */

EMU_API rzcu_result cuDevicePrimaryCtxRetain(rzcu_context *pctx, rzcu_device dev)
{
    ENTER(cuDevicePrimaryCtxRetain);
    if (!pctx)
        return RZCUDA_ERROR_INVALID_VALUE;
    if (!emu_valid_device(dev))
        return RZCUDA_ERROR_INVALID_DEVICE;
    rzcu_result r = RZCUDA_SUCCESS;
    pthread_mutex_lock(&primary_mu);
    if (!primary[dev])
        primary[dev] = emu_ctx_new(dev, true);
    struct CUctx_st *c = primary[dev];
    if (!c)
        r = RZCUDA_ERROR_OUT_OF_MEMORY;
    else if (!atomic_load(&c->alive) && !ctx_activate(c)) /* first retain, or after a release or reset */
        r = RZCUDA_ERROR_OUT_OF_MEMORY;
    else {
        c->refcount++;
        *pctx = c;
    }
    pthread_mutex_unlock(&primary_mu);
    return r;
}

static rzcu_result primary_release(rzcu_device dev);
static rzcu_result primary_reset(rzcu_device dev);
static rzcu_result ctx_destroy(rzcu_context ctx);

/* The CUDA 7.0 (release, reset) and 2.0 (destroy) ABIs, still exported by drivers for programs built against
 * old headers and handed out by cuGetProcAddress for old versions: the same behaviour here. */
EMU_API rzcu_result cuDevicePrimaryCtxRelease(rzcu_device dev)
{
    ENTER(cuDevicePrimaryCtxRelease);
    return primary_release(dev);
}

EMU_API rzcu_result cuDevicePrimaryCtxReset(rzcu_device dev)
{
    ENTER(cuDevicePrimaryCtxReset);
    return primary_reset(dev);
}

EMU_API rzcu_result cuCtxDestroy(rzcu_context ctx)
{
    ENTER(cuCtxDestroy);
    return ctx_destroy(ctx);
}

EMU_API rzcu_result cuDevicePrimaryCtxRelease_v2(rzcu_device dev)
{
    ENTER(cuDevicePrimaryCtxRelease_v2);
    return primary_release(dev);
}

static rzcu_result primary_release(rzcu_device dev)
{
    if (!emu_valid_device(dev))
        return RZCUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&primary_mu);
    struct CUctx_st *c = primary[dev];
    if (!c || c->refcount == 0) {
        pthread_mutex_unlock(&primary_mu);
        return RZCUDA_ERROR_INVALID_CONTEXT;
    }
    if (--c->refcount == 0 && atomic_load(&c->alive))
        ctx_teardown(c); /* the handle stays; a later retain reactivates it */
    pthread_mutex_unlock(&primary_mu);
    return RZCUDA_SUCCESS;
}

/* As documented: destroys all allocations and state of the primary context now, without releasing it (the
 * references stay; a later retain activates it again, under the same handle, as cudaDeviceReset and the
 * runtime's next call do). Resetting an inactive primary context is a no-op. */
EMU_API rzcu_result cuDevicePrimaryCtxReset_v2(rzcu_device dev)
{
    ENTER(cuDevicePrimaryCtxReset_v2);
    return primary_reset(dev);
}

static rzcu_result primary_reset(rzcu_device dev)
{
    if (!emu_valid_device(dev))
        return RZCUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&primary_mu);
    struct CUctx_st *c = primary[dev];
    if (c && atomic_load(&c->alive))
        ctx_teardown(c);
    pthread_mutex_unlock(&primary_mu);
    return RZCUDA_SUCCESS;
}

/* Flags are always 0 (cuDevicePrimaryCtxSetFlags is not emulated); active: retained and not reset since. */
EMU_API rzcu_result cuDevicePrimaryCtxGetState(rzcu_device dev, unsigned int *flags, int *active)
{
    ENTER(cuDevicePrimaryCtxGetState);
    if (!flags || !active)
        return RZCUDA_ERROR_INVALID_VALUE;
    if (!emu_valid_device(dev))
        return RZCUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&primary_mu);
    struct CUctx_st *c = primary[dev];
    *flags = 0;
    *active = c && atomic_load(&c->alive);
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
    if (!emu_valid_device(dev))
        return RZCUDA_ERROR_INVALID_DEVICE;
    struct CUctx_st *c = emu_ctx_reused(dev);
    if (!c)
        c = emu_ctx_new(dev, false);
    if (!c || !ctx_activate(c) || !emu_ctx_stack_push(c)) {
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
    return ctx_destroy(ctx);
}

static rzcu_result ctx_destroy(rzcu_context ctx)
{
    if (!ctx)
        return RZCUDA_ERROR_INVALID_VALUE;
    struct CUctx_st *c = emu_ctx_from_handle(ctx);
    if (!c || c->primary || !atomic_load(&c->alive))
        return RZCUDA_ERROR_INVALID_CONTEXT;
    ctx_teardown(c);
    if (emu_ctx_stack_top() == c)
        emu_ctx_stack_pop();
    emu_ctx_recycle(c);
    return RZCUDA_SUCCESS;
}

EMU_API rzcu_result cuCtxGetCurrent(rzcu_context *pctx)
{
    ENTER(cuCtxGetCurrent);
    if (!pctx)
        return RZCUDA_ERROR_INVALID_VALUE;
    *pctx = emu_ctx_stack_top();
    return RZCUDA_SUCCESS;
}

/* A handle that may become current: any primary context handle, or a live created context. */
static struct CUctx_st *settable_ctx(rzcu_context ctx)
{
    struct CUctx_st *c = emu_ctx_from_handle(ctx);
    if (!c || (!c->primary && !atomic_load(&c->alive)))
        return NULL;
    return c;
}

EMU_API rzcu_result cuCtxSetCurrent(rzcu_context ctx)
{
    ENTER(cuCtxSetCurrent);
    if (!ctx) {
        emu_ctx_stack_pop();
        return RZCUDA_SUCCESS;
    }
    struct CUctx_st *c = settable_ctx(ctx);
    if (!c)
        return RZCUDA_ERROR_INVALID_CONTEXT;
    return emu_ctx_stack_set_top(c) ? RZCUDA_SUCCESS : RZCUDA_ERROR_OUT_OF_MEMORY;
}

EMU_API rzcu_result cuCtxPushCurrent_v2(rzcu_context ctx)
{
    ENTER(cuCtxPushCurrent_v2);
    struct CUctx_st *c = settable_ctx(ctx);
    if (!c)
        return RZCUDA_ERROR_INVALID_CONTEXT;
    return emu_ctx_stack_push(c) ? RZCUDA_SUCCESS : RZCUDA_ERROR_OUT_OF_MEMORY;
}

EMU_API rzcu_result cuCtxPopCurrent_v2(rzcu_context *pctx)
{
    ENTER(cuCtxPopCurrent_v2);
    struct CUctx_st *c = emu_ctx_stack_pop();
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
        return emu_current_ctx(out);
    struct CUctx_st *c = emu_ctx_from_handle(ctx);
    if (!c)
        return RZCUDA_ERROR_INVALID_CONTEXT;
    if (!atomic_load(&c->alive))
        return RZCUDA_ERROR_CONTEXT_IS_DESTROYED;
    *out = c;
    return RZCUDA_SUCCESS;
}

EMU_API rzcu_result cuCtxGetDevice(rzcu_device *dev)
{
    ENTER_CTX(cuCtxGetDevice, c);
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
    ENTER_CTX(cuCtxSynchronize, c);
    CHECK(emu_capture_refuse_sync(c, NULL));
    CHECK(emu_capture_unsafe_call());
    emu_ctx_sync(c);
    return emu_ctx_error(c);
}

EMU_API rzcu_result cuCtxSynchronize_v2(rzcu_context ctx)
{
    ENTER(cuCtxSynchronize_v2);
    struct CUctx_st *c;
    CHECK(ctx_or_current(ctx, &c));
    CHECK(emu_capture_refuse_sync(c, NULL));
    CHECK(emu_capture_unsafe_call());
    emu_ctx_sync(c);
    return emu_ctx_error(c);
}

