/*
 * The emulated driver's events: cuEventCreate, cuEventRecord, cuEventSynchronize, cuEventQuery,
 * cuStreamWaitEvent, cuEventDestroy (and the _ptsz forms). An event stands for the work of a stream up to its
 * last record (an operation on the stream); waits go through the stream engine (emu_stream.c).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "emu_engine.h"
#include "rz_annotate.h"

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
    uint64_t capture_id; /* the last record was made into this capture of s (0: none) */
};

static struct emu_table events = EMU_TABLE_INIT("event", struct CUevent_st, MAX_EVENTS);

bool emu_events_init(void) { return emu_table_init(&events); }

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
    ENTER_CTX(cuEventCreate, c);
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
    CHECK(emu_resolve_stream(hstream, per_thread, NULL, &s));
    if (s->ctx != e->ctx)
        return RZCUDA_ERROR_INVALID_HANDLE;
    struct op *op = emu_op_new(s->ctx, OP_NOP);
    if (!op)
        return RZCUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&e->mu); /* records of one event take effect in call order */
    uint64_t seq = 0, capture_id = emu_capture_id_of(s);
    rzcu_result r = emu_submit_seq(s, op, false, &seq);
    if (r == RZCUDA_SUCCESS) {
        e->s = s;
        e->seq = seq;
        e->capture_id = capture_id;
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

/* The stream and position of the event's last record (s NULL: never recorded); 0 for a handle that is no
 * event. A query or wait of it may also be refused for capture (see emu_capture.c): CUDA_SUCCESS when not,
 * else the refusal in *refused. */
static int last_record(rzcu_event hevent, struct CUstream_st **s, uint64_t *seq, rzcu_result *refused)
{
    struct CUevent_st *e = event_from_handle(hevent);
    if (!e)
        return 0;
    pthread_mutex_lock(&e->mu);
    *s = e->s;
    *seq = e->seq;
    uint64_t capture_id = e->capture_id;
    pthread_mutex_unlock(&e->mu);
    *refused = emu_capture_event_conflict(capture_id ? *s : NULL, capture_id);
    if (*refused == RZCUDA_SUCCESS)
        *refused = emu_capture_unsafe_call();
    return 1;
}

/* Waits for the work captured by the last record; an event never recorded has none (CUDA_SUCCESS at once). */
EMU_API rzcu_result cuEventSynchronize(rzcu_event hevent)
{
    ENTER(cuEventSynchronize);
    struct CUstream_st *s;
    uint64_t seq;
    rzcu_result refused;
    if (!last_record(hevent, &s, &seq, &refused))
        return RZCUDA_ERROR_INVALID_HANDLE;
    CHECK(refused);
    if (s)
        emu_wait_seq(s, seq);
    return s ? emu_ctx_error(s->ctx) : RZCUDA_SUCCESS;
}

/* Whether the work captured by the last record has completed: CUDA_SUCCESS (also for an event never
 * recorded), CUDA_ERROR_NOT_READY while it has not. Never waits. */
EMU_API rzcu_result cuEventQuery(rzcu_event hevent)
{
    ENTER(cuEventQuery);
    struct CUstream_st *s;
    uint64_t seq;
    rzcu_result refused;
    if (!last_record(hevent, &s, &seq, &refused))
        return RZCUDA_ERROR_INVALID_HANDLE;
    CHECK(refused);
    if (s && emu_completed(s) < seq)
        return RZCUDA_ERROR_NOT_READY;
    return s ? emu_ctx_error(s->ctx) : RZCUDA_SUCCESS;
}

/*
 * Work submitted to the stream after this call waits for the work the event's last record captured (of any
 * stream or context): an operation on the stream that completes when that work has (a never-recorded event
 * captured nothing). The call never waits. Flags must be 0 (CU_EVENT_WAIT_EXTERNAL is for graph capture,
 * which the emulator does not build event nodes for: a wait on a captured stream is refused and invalidates
 * the capture, as for the other operations a capture cannot hold here).
 */
static rzcu_result do_stream_wait_event(rzcu_stream hstream, rzcu_event hevent, unsigned flags, bool per_thread)
{
    struct CUstream_st *s;
    CHECK(emu_resolve_stream(hstream, per_thread, NULL, &s));
    struct CUevent_st *e = event_from_handle(hevent);
    if (!e)
        return RZCUDA_ERROR_INVALID_HANDLE;
    if (flags != 0)
        return RZCUDA_ERROR_INVALID_VALUE;
    CHECK(emu_capture_refuse_sync(NULL, s));
    pthread_mutex_lock(&e->mu);
    struct dep d = {e->s, e->seq};
    pthread_mutex_unlock(&e->mu);
    if (!d.s || emu_completed(d.s) >= d.seq)
        return RZCUDA_SUCCESS; /* nothing left to wait for */
    struct op *op = emu_op_new(s->ctx, OP_NOP);
    if (!op)
        return RZCUDA_ERROR_OUT_OF_MEMORY;
    op->wait_for = d;
    return emu_submit(s, op, false);
}

EMU_API rzcu_result cuStreamWaitEvent(rzcu_stream s, rzcu_event e, unsigned int flags)
{
    ENTER(cuStreamWaitEvent);
    return do_stream_wait_event(s, e, flags, false);
}

EMU_API rzcu_result cuStreamWaitEvent_ptsz(rzcu_stream s, rzcu_event e, unsigned int flags)
{
    ENTER(cuStreamWaitEvent_ptsz);
    return do_stream_wait_event(s, e, flags, true);
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

