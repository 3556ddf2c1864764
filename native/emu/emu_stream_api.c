/*
 * The emulated driver's stream entry points: cuStreamCreate/Destroy, cuStreamSynchronize, cuStreamQuery,
 * cuLaunchHostFunc (and the _ptsz forms). Stream handles and the resolution of a stream argument are the
 * stream table's (emu_stream_table.c); the work itself runs in the stream engine (emu_stream.c).
 */
#define _GNU_SOURCE
#include <stdlib.h>

#include "emu_engine.h"

/* ------------------------------------------------------------------------------------------------------ */
/* streams */

EMU_API rzcu_result cuStreamCreate(rzcu_stream *ps, unsigned int flags)
{
    ENTER_CTX(cuStreamCreate, c);
    if (!ps || (flags != RZCU_STREAM_DEFAULT && flags != RZCU_STREAM_NON_BLOCKING))
        return RZCUDA_ERROR_INVALID_VALUE;
    struct CUstream_st *s = emu_stream_new(c, flags, STREAM_USER);
    if (!s)
        return RZCUDA_ERROR_OUT_OF_MEMORY;
    *ps = s;
    return RZCUDA_SUCCESS;
}

/* Returns at once; work already queued still completes (the stream leaves the context once drained). */
EMU_API rzcu_result cuStreamDestroy_v2(rzcu_stream hstream)
{
    ENTER(cuStreamDestroy_v2);
    struct CUstream_st *s = emu_stream_from_handle(hstream);
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
    CHECK(emu_resolve_stream(hstream, per_thread, NULL, &s));
    CHECK(emu_capture_refuse_sync(NULL, s));
    CHECK(emu_capture_unsafe_call());
    emu_stream_sync(s);
    return emu_ctx_error(s->ctx);
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

/* Whether the stream's work so far is complete, without waiting (and so without starting kernels held by
 * CUDA_EMU_KERNEL_HOLD, which only a wait releases). On a stream being captured it is illegal, as
 * synchronising it is: CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, and the capture is invalidated. */
static rzcu_result do_stream_query(rzcu_stream hstream, bool per_thread)
{
    struct CUstream_st *s;
    CHECK(emu_resolve_stream(hstream, per_thread, NULL, &s));
    CHECK(emu_capture_refuse_sync(NULL, s));
    CHECK(emu_capture_unsafe_call());
    CHECK(emu_ctx_error(s->ctx));
    pthread_mutex_lock(&s->mu);
    uint64_t target = s->submitted;
    pthread_mutex_unlock(&s->mu);
    return emu_completed(s) >= target ? RZCUDA_SUCCESS : RZCUDA_ERROR_NOT_READY;
}

EMU_API rzcu_result cuStreamQuery(rzcu_stream s)
{
    ENTER(cuStreamQuery);
    return do_stream_query(s, false);
}

EMU_API rzcu_result cuStreamQuery_ptsz(rzcu_stream s)
{
    ENTER(cuStreamQuery_ptsz);
    return do_stream_query(s, true);
}

static rzcu_result do_launch_host_func(rzcu_stream hstream, rzcu_host_fn fn, void *user_data, bool per_thread)
{
    struct CUctx_st *c;
    CHECK(emu_current_ctx(&c));
    struct CUstream_st *s;
    CHECK(emu_resolve_stream(hstream, per_thread, c, &s));
    if (!fn)
        return RZCUDA_ERROR_INVALID_VALUE;
    struct op *op = emu_op_new(s->ctx, OP_HOST);
    if (!op)
        return RZCUDA_ERROR_OUT_OF_MEMORY;
    op->fn = fn;
    op->user_data = user_data;
    return emu_submit(s, op, false);
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

