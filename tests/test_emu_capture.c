/*
 * Tests of the emulated driver's capture modes, as cuThreadExchangeStreamCaptureMode documents them (part of
 * the test_emu_real executable): the allocation family refused beside a capture (issue 25), the queries and
 * synchronisations of events, streams and contexts and the pointer attributes too, and what every mode
 * refuses (issue 27); a capture ended only by its beginning thread.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "cuda_emu.h"

#define OK(call) cr_assert_eq((call), RZCUDA_SUCCESS, "%s", #call)
#define FAILS(call, err) cr_assert_eq((call), (rzcu_result)(err), "%s", #call)

static rzcu_context primary_current(void) {
    OK(cuInit(0));
    rzcu_context ctx = NULL;
    OK(cuDevicePrimaryCtxRetain(&ctx, 0));
    OK(cuCtxSetCurrent(ctx));
    return ctx;
}

/* ---- capture modes: the calls cuThreadExchangeStreamCaptureMode's documentation calls potentially unsafe ---- */
#define MODE_GLOBAL RZCU_STREAM_CAPTURE_MODE_GLOBAL
#define MODE_THREAD_LOCAL RZCU_STREAM_CAPTURE_MODE_THREAD_LOCAL
#define MODE_RELAXED RZCU_STREAM_CAPTURE_MODE_RELAXED

/* The thread's mode: set, handed back, validated (an unknown mode changes nothing). */
Test(emu_real, capture_mode_is_exchanged_and_validated) {
    primary_current();
    rzcu_capture_mode m = MODE_RELAXED;
    OK(cuThreadExchangeStreamCaptureMode(&m));
    cr_assert_eq(m, MODE_GLOBAL, "a thread starts in the global mode");
    m = 3;
    FAILS(cuThreadExchangeStreamCaptureMode(&m), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuThreadExchangeStreamCaptureMode(NULL), RZCUDA_ERROR_INVALID_VALUE);
    m = MODE_THREAD_LOCAL;
    OK(cuThreadExchangeStreamCaptureMode(&m));
    cr_assert_eq(m, MODE_RELAXED, "the refused exchanges kept the mode");
    m = MODE_GLOBAL;
    OK(cuThreadExchangeStreamCaptureMode(&m));
    cr_assert_eq(m, MODE_THREAD_LOCAL);
}

/* Each call of the unsafe set, made by the capturing thread (global mode) against live objects: refused,
 * and the capture invalidated. Returns what the call returned. */
static rzcu_result unsafe_call(int which, rzcu_deviceptr dev, void *host, void *plain) {
    rzcu_deviceptr d;
    size_t pitch;
    void *h;
    switch (which) {
    case 0: return cuMemAlloc_v2(&d, 64);
    case 1: return cuMemAllocPitch_v2(&d, &pitch, 64, 2, 4);
    case 2: return cuMemAllocManaged(&d, 64, RZCU_MEM_ATTACH_GLOBAL);
    case 3: return cuMemAllocHost_v2(&h, 64);
    case 4: return cuMemHostAlloc(&h, 64, 0);
    case 5: return cuMemHostRegister_v2(plain, 4096, 0);
    case 6: return cuMemFree_v2(dev);
    case 7: return cuMemFreeHost(host);
    default: return cuMemHostUnregister(plain);
    }
}

Test(emu_real, unsafe_calls_are_refused_in_a_thread_capturing_in_the_global_mode) {
    primary_current();
    rzcu_stream s;
    OK(cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING));
    rzcu_deviceptr dev;
    void *host;
    static char plain[2][4096] __attribute__((aligned(4096)));
    OK(cuMemAlloc_v2(&dev, 64));
    OK(cuMemAllocHost_v2(&host, 64));
    OK(cuMemHostRegister_v2(plain[1], 4096, 0)); /* for the unregister */
    struct CUgraph_st *graph;
    rzcu_capture_status st = 9;
    for (int which = 0; which < 9; which++) {
        OK(cuStreamBeginCapture_v2(s, MODE_GLOBAL));
        cr_assert_eq(unsafe_call(which, dev, host, which == 8 ? plain[1] : plain[0]),
                     RZCUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "unsafe call %d", which);
        OK(cuStreamIsCapturing(s, &st));
        cr_assert_eq(st, 2, "unsafe call %d invalidated the capture", which);
        FAILS(cuStreamEndCapture(s, &graph), RZCUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    }
    /* Nothing was done by them: the memory is still there, the range still registered. */
    OK(cuMemsetD8_v2(dev, 1, 64));
    OK(cuMemFree_v2(dev));
    OK(cuMemFreeHost(host));
    OK(cuMemHostUnregister(plain[1]));
    FAILS(cuMemHostUnregister(plain[0]), RZCUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
}

/* In its own thread: a capture begun global or thread-local prohibits; one begun relaxed does not; a thread
 * in the relaxed mode is never prohibited; the stream-ordered allocation is captured, not refused. */
Test(emu_real, own_capture_prohibits_unless_relaxed) {
    primary_current();
    rzcu_stream s;
    OK(cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING));
    rzcu_deviceptr d;
    struct CUgraph_st *graph;
    OK(cuStreamBeginCapture_v2(s, MODE_THREAD_LOCAL));
    FAILS(cuMemAlloc_v2(&d, 64), RZCUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    FAILS(cuStreamEndCapture(s, &graph), RZCUDA_ERROR_STREAM_CAPTURE_INVALIDATED);

    rzcu_capture_mode m = MODE_THREAD_LOCAL; /* the thread's mode does not lift its own capture's rule */
    OK(cuThreadExchangeStreamCaptureMode(&m));
    OK(cuStreamBeginCapture_v2(s, MODE_GLOBAL));
    FAILS(cuMemAlloc_v2(&d, 64), RZCUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    FAILS(cuStreamEndCapture(s, &graph), RZCUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    OK(cuThreadExchangeStreamCaptureMode(&m)); /* back to global */

    OK(cuStreamBeginCapture_v2(s, MODE_RELAXED));
    OK(cuMemAlloc_v2(&d, 64));
    OK(cuMemFree_v2(d));
    OK(cuStreamEndCapture(s, &graph));
    OK(cuGraphDestroy(graph));

    OK(cuStreamBeginCapture_v2(s, MODE_GLOBAL));
    m = MODE_RELAXED;
    OK(cuThreadExchangeStreamCaptureMode(&m));
    OK(cuMemAlloc_v2(&d, 64));
    OK(cuMemFree_v2(d));
    OK(cuThreadExchangeStreamCaptureMode(&m)); /* the global mode back: prohibited again */
    cr_assert_eq(m, MODE_RELAXED);
    FAILS(cuMemAlloc_v2(&d, 64), RZCUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    FAILS(cuStreamEndCapture(s, &graph), RZCUDA_ERROR_STREAM_CAPTURE_INVALIDATED);

    OK(cuStreamBeginCapture_v2(s, MODE_GLOBAL));
    OK(cuMemAllocAsync(&d, 64, s)); /* stream-ordered: a memory node */
    OK(cuMemFreeAsync(d, s));
    OK(cuStreamEndCapture(s, &graph));
    OK(cuGraphDestroy(graph));
    OK(cuMemAlloc_v2(&d, 64)); /* no capture left */
    OK(cuMemFree_v2(d));
}

/* Another thread's capture, begun in the mode given, ended by that thread after the main thread's calls. */
struct capturer {
    rzcu_context ctx;
    rzcu_stream s;
    rzcu_capture_mode mode;
    pthread_barrier_t began, done;
    rzcu_result end;
};

static void *capture_thread(void *arg) {
    struct capturer *c = arg;
    cuCtxSetCurrent(c->ctx);
    rzcu_result r = cuStreamBeginCapture_v2(c->s, c->mode);
    pthread_barrier_wait(&c->began);
    pthread_barrier_wait(&c->done);
    struct CUgraph_st *graph = NULL;
    c->end = r != RZCUDA_SUCCESS ? r : cuStreamEndCapture(c->s, &graph);
    if (graph)
        cuGraphDestroy(graph);
    return NULL;
}

/* While the other thread captures in capture_mode, this thread (in my_mode) calls cuMemAlloc: the result of
 * that call, and *end what the other thread's cuStreamEndCapture returned. */
static rzcu_result alloc_beside(rzcu_capture_mode capture_mode, rzcu_capture_mode my_mode, rzcu_result *end) {
    struct capturer c = {.ctx = primary_current(), .mode = capture_mode};
    OK(cuStreamCreate(&c.s, RZCU_STREAM_NON_BLOCKING));
    pthread_barrier_init(&c.began, NULL, 2);
    pthread_barrier_init(&c.done, NULL, 2);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, capture_thread, &c), 0);
    pthread_barrier_wait(&c.began);
    rzcu_capture_mode m = my_mode;
    OK(cuThreadExchangeStreamCaptureMode(&m));
    rzcu_deviceptr d = 0;
    rzcu_result r = cuMemAlloc_v2(&d, 64);
    OK(cuThreadExchangeStreamCaptureMode(&m));
    pthread_barrier_wait(&c.done);
    pthread_join(t, NULL);
    if (r == RZCUDA_SUCCESS)
        OK(cuMemFree_v2(d)); /* no capture any more */
    pthread_barrier_destroy(&c.began);
    pthread_barrier_destroy(&c.done);
    *end = c.end;
    return r;
}

Test(emu_real, another_threads_global_capture_prohibits_a_global_thread_only) {
    rzcu_result end;
    FAILS(alloc_beside(MODE_GLOBAL, MODE_GLOBAL, &end), RZCUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    cr_assert_eq(end, RZCUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "the other thread's capture was invalidated");
    OK(alloc_beside(MODE_GLOBAL, MODE_THREAD_LOCAL, &end));
    OK(end);
    OK(alloc_beside(MODE_GLOBAL, MODE_RELAXED, &end));
    OK(end);
    OK(alloc_beside(MODE_THREAD_LOCAL, MODE_GLOBAL, &end));
    OK(end);
    OK(alloc_beside(MODE_RELAXED, MODE_GLOBAL, &end));
    OK(end);
}

/* cuStreamEndCapture on a thread that did not begin the capture: the driver's rule for every mode but RELAXED. */
struct ender {
    rzcu_context ctx;
    rzcu_stream s;
    rzcu_result r;
    struct CUgraph_st *graph;
};

static void *end_elsewhere(void *arg) {
    struct ender *e = arg;
    cuCtxSetCurrent(e->ctx);
    e->r = cuStreamEndCapture(e->s, &e->graph);
    return NULL;
}

static rzcu_result end_on_another_thread(rzcu_stream s, struct CUgraph_st **graph) {
    struct ender e = {.ctx = primary_current(), .s = s};
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, end_elsewhere, &e), 0);
    pthread_join(t, NULL);
    *graph = e.graph;
    return e.r;
}

Test(emu_real, only_the_beginning_thread_ends_a_capture_unless_relaxed) {
    primary_current();
    rzcu_stream s;
    OK(cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING));
    struct CUgraph_st *graph = NULL;
    for (rzcu_capture_mode mode = MODE_GLOBAL; mode <= MODE_THREAD_LOCAL; mode++) {
        OK(cuStreamBeginCapture_v2(s, mode));
        FAILS(end_on_another_thread(s, &graph), RZCUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD);
        cr_assert_null(graph);
        rzcu_capture_status st = 0;
        OK(cuStreamIsCapturing(s, &st));
        cr_assert_eq(st, 1, "the capture goes on");
        OK(cuStreamEndCapture(s, &graph));
        cr_assert_not_null(graph);
        OK(cuGraphDestroy(graph));
        graph = NULL;
    }
    OK(cuStreamBeginCapture_v2(s, MODE_RELAXED));
    OK(end_on_another_thread(s, &graph));
    cr_assert_not_null(graph);
    OK(cuGraphDestroy(graph));
    OK(cuStreamDestroy_v2(s));
}

/* ---- capture modes: queries and synchronisations (issue 27) ----
 * A real driver refuses another thread's cuEventQuery during a global capture with
 * CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and ends the capture CUDA_ERROR_STREAM_CAPTURE_INVALIDATED (seen on an
 * H100): the queries and synchronisations of events, streams and contexts are potentially unsafe calls, and so
 * (the documentation being silent: the stricter reading) are the pointer attribute queries. */
struct sync_objects {
    rzcu_stream other; /* a stream nobody captures */
    rzcu_event done;   /* recorded on it, complete */
    rzcu_deviceptr dev;
};

#define NSYNC_CALLS 8
static const char *const sync_call_name[NSYNC_CALLS] = {
    "cuEventQuery",  "cuEventSynchronize",    "cuStreamQuery",         "cuStreamSynchronize",
    "cuCtxSynchronize", "cuStreamQuery_ptsz", "cuPointerGetAttribute", "cuPointerGetAttributes"};

static rzcu_result sync_call(int which, const struct sync_objects *o) {
    rzcu_context owner;
    rzcu_pointer_attribute attr = RZCU_POINTER_ATTRIBUTE_CONTEXT;
    void *data[] = {&owner};
    switch (which) {
    case 0: return cuEventQuery(o->done);
    case 1: return cuEventSynchronize(o->done);
    case 2: return cuStreamQuery(o->other);
    case 3: return cuStreamSynchronize(o->other);
    case 4: return cuCtxSynchronize();
    case 5: return cuStreamQuery_ptsz(o->other);
    case 6: return cuPointerGetAttribute(&owner, RZCU_POINTER_ATTRIBUTE_CONTEXT, o->dev);
    default: return cuPointerGetAttributes(1, &attr, data, o->dev);
    }
}

static struct sync_objects sync_objects_make(void) {
    struct sync_objects o;
    OK(cuStreamCreate(&o.other, RZCU_STREAM_NON_BLOCKING));
    OK(cuEventCreate(&o.done, 0));
    OK(cuEventRecord(o.done, o.other));
    OK(cuMemAlloc_v2(&o.dev, 64));
    return o;
}

static void sync_objects_free(struct sync_objects *o) {
    OK(cuMemFree_v2(o->dev));
    OK(cuEventDestroy_v2(o->done));
    OK(cuStreamDestroy_v2(o->other));
}

/* While another thread captures in capture_mode (on a stream of another context when own_ctx, so that a
 * context synchronisation here does not synchronise the captured stream), this thread in my_mode makes sync
 * call which: what it returned, and in *end what the other thread's cuStreamEndCapture returned. */
static rzcu_result sync_beside(rzcu_capture_mode capture_mode, rzcu_capture_mode my_mode, int which, int own_ctx,
                               rzcu_result *end) {
    struct capturer c = {.ctx = primary_current(), .mode = capture_mode};
    rzcu_context mine = c.ctx;
    if (own_ctx)
        OK(cuCtxCreate_v4(&c.ctx, NULL, 0, 0));
    OK(cuCtxSetCurrent(c.ctx));
    OK(cuStreamCreate(&c.s, RZCU_STREAM_NON_BLOCKING));
    OK(cuCtxSetCurrent(mine));
    struct sync_objects o = sync_objects_make();
    pthread_barrier_init(&c.began, NULL, 2);
    pthread_barrier_init(&c.done, NULL, 2);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, capture_thread, &c), 0);
    pthread_barrier_wait(&c.began);
    rzcu_capture_mode m = my_mode;
    OK(cuThreadExchangeStreamCaptureMode(&m));
    rzcu_result r = sync_call(which, &o);
    OK(cuThreadExchangeStreamCaptureMode(&m));
    pthread_barrier_wait(&c.done);
    pthread_join(t, NULL);
    pthread_barrier_destroy(&c.began);
    pthread_barrier_destroy(&c.done);
    sync_objects_free(&o);
    if (own_ctx)
        OK(cuCtxDestroy_v2(c.ctx));
    OK(cuCtxSetCurrent(mine));
    *end = c.end;
    return r;
}

/* From a thread in the global mode: refused, and the other thread's global capture invalidated. The
 * capture is in another context, so even the context synchronisation touches nothing captured. */
Test(emu_real, queries_and_syncs_beside_a_global_capture_are_refused_and_invalidate_it) {
    for (int which = 0; which < NSYNC_CALLS; which++) {
        rzcu_result end;
        rzcu_result r = sync_beside(MODE_GLOBAL, MODE_GLOBAL, which, 1, &end);
        cr_assert_eq(r, RZCUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "%s beside a global capture: %d",
                     sync_call_name[which], r);
        cr_assert_eq(end, RZCUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "%s invalidated the capture",
                     sync_call_name[which]);
    }
}

/* From a thread in the relaxed or thread-local mode, or beside a capture not begun global: allowed, and the
 * capture ends well. */
Test(emu_real, queries_and_syncs_beside_a_capture_are_allowed_when_the_modes_allow) {
    static const rzcu_capture_mode pairs[][2] = {
        {MODE_GLOBAL, MODE_RELAXED}, {MODE_GLOBAL, MODE_THREAD_LOCAL}, {MODE_THREAD_LOCAL, MODE_GLOBAL},
        {MODE_RELAXED, MODE_GLOBAL}};
    for (size_t p = 0; p < sizeof pairs / sizeof pairs[0]; p++)
        for (int which = 0; which < NSYNC_CALLS; which++) {
            rzcu_result end;
            rzcu_result r = sync_beside(pairs[p][0], pairs[p][1], which, 1, &end);
            cr_assert_eq(r, RZCUDA_SUCCESS, "%s in mode %d beside a capture begun in mode %d: %d",
                         sync_call_name[which], pairs[p][1], pairs[p][0], r);
            cr_assert_eq(end, RZCUDA_SUCCESS, "%s left the capture going", sync_call_name[which]);
        }
}

/* A context synchronisation synchronises the captured stream when the capture is in the same context: that
 * conflicts with it necessarily, so even a relaxed thread is refused and the capture invalidated. */
Test(emu_real, a_context_sync_of_a_capturing_context_is_refused_even_relaxed) {
    rzcu_result end;
    FAILS(sync_beside(MODE_GLOBAL, MODE_RELAXED, 4, 0, &end), RZCUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    cr_assert_eq(end, RZCUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    FAILS(sync_beside(MODE_RELAXED, MODE_RELAXED, 4, 0, &end), RZCUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    cr_assert_eq(end, RZCUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    OK(sync_beside(MODE_GLOBAL, MODE_RELAXED, 3, 0, &end)); /* another stream of that context: allowed */
    OK(end);
}

/* The capturing thread's own queries and synchronisations of what it does not capture: refused in a capture
 * begun global or thread-local (the thread's mode does not lift its own capture's rule), allowed in one begun
 * relaxed, or from the thread once in the relaxed mode. Its captured stream's never (nor its context's). */
Test(emu_real, the_capturing_threads_own_queries_and_syncs) {
    rzcu_context ctx = primary_current();
    rzcu_context other_ctx;
    OK(cuCtxCreate_v4(&other_ctx, NULL, 0, 0));
    rzcu_stream s; /* captured, in another context than the objects (for cuCtxSynchronize) */
    OK(cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING));
    OK(cuCtxSetCurrent(ctx));
    struct sync_objects o = sync_objects_make();
    struct CUgraph_st *graph;
    for (int which = 0; which < NSYNC_CALLS; which++) {
        for (rzcu_capture_mode mode = MODE_GLOBAL; mode <= MODE_THREAD_LOCAL; mode++) {
            OK(cuCtxSetCurrent(other_ctx));
            OK(cuStreamBeginCapture_v2(s, mode));
            OK(cuCtxSetCurrent(ctx));
            cr_assert_eq(sync_call(which, &o), RZCUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "%s in its own capture",
                         sync_call_name[which]);
            FAILS(cuStreamEndCapture(s, &graph), RZCUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
        }
        OK(cuStreamBeginCapture_v2(s, MODE_RELAXED));
        cr_assert_eq(sync_call(which, &o), RZCUDA_SUCCESS, "%s in its own relaxed capture", sync_call_name[which]);
        OK(cuStreamEndCapture(s, &graph));
        OK(cuGraphDestroy(graph));

        OK(cuStreamBeginCapture_v2(s, MODE_GLOBAL));
        rzcu_capture_mode m = MODE_RELAXED;
        OK(cuThreadExchangeStreamCaptureMode(&m));
        cr_assert_eq(sync_call(which, &o), RZCUDA_SUCCESS, "%s relaxed in its own capture", sync_call_name[which]);
        OK(cuThreadExchangeStreamCaptureMode(&m));
        OK(cuStreamEndCapture(s, &graph));
        OK(cuGraphDestroy(graph));
    }
    /* Relaxed, still: the captured stream itself, and its context, conflict with the capture. */
    rzcu_capture_mode m = MODE_RELAXED;
    OK(cuThreadExchangeStreamCaptureMode(&m));
    OK(cuStreamBeginCapture_v2(s, MODE_GLOBAL));
    FAILS(cuStreamSynchronize(s), RZCUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    FAILS(cuStreamEndCapture(s, &graph), RZCUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    OK(cuStreamBeginCapture_v2(s, MODE_GLOBAL));
    FAILS(cuStreamQuery(s), RZCUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    FAILS(cuStreamEndCapture(s, &graph), RZCUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    OK(cuStreamBeginCapture_v2(s, MODE_GLOBAL));
    OK(cuCtxSetCurrent(other_ctx));
    FAILS(cuCtxSynchronize(), RZCUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    OK(cuCtxSetCurrent(ctx));
    FAILS(cuStreamEndCapture(s, &graph), RZCUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    OK(cuThreadExchangeStreamCaptureMode(&m));
    sync_objects_free(&o);
    OK(cuStreamDestroy_v2(s));
    OK(cuCtxDestroy_v2(other_ctx));
    OK(cuCtxSetCurrent(ctx));
}

/* An event last recorded into a capture in progress: querying or waiting for it conflicts with the capture in
 * every mode (the documentation's example for the relaxed mode); once the capture has ended it is allowed. */
Test(emu_real, an_event_recorded_in_a_capture_cannot_be_asked_during_it) {
    primary_current();
    rzcu_stream s;
    OK(cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING));
    rzcu_event e;
    OK(cuEventCreate(&e, 0));
    rzcu_capture_mode m = MODE_RELAXED;
    OK(cuThreadExchangeStreamCaptureMode(&m));
    struct CUgraph_st *graph;
    OK(cuStreamBeginCapture_v2(s, MODE_RELAXED));
    OK(cuEventRecord(e, s));
    FAILS(cuEventQuery(e), RZCUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    FAILS(cuStreamEndCapture(s, &graph), RZCUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    OK(cuStreamBeginCapture_v2(s, MODE_RELAXED));
    OK(cuEventRecord(e, s));
    FAILS(cuEventSynchronize(e), RZCUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    FAILS(cuStreamEndCapture(s, &graph), RZCUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    OK(cuStreamBeginCapture_v2(s, MODE_RELAXED));
    OK(cuEventRecord(e, s));
    OK(cuStreamEndCapture(s, &graph));
    OK(cuEventQuery(e));
    OK(cuEventSynchronize(e));
    OK(cuThreadExchangeStreamCaptureMode(&m));
    OK(cuGraphDestroy(graph));
    OK(cuEventDestroy_v2(e));
    OK(cuStreamDestroy_v2(s));
}
