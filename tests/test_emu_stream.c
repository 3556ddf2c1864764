/* Tests of the emulated CUDA driver (native/emu): streams, events, and scale and concurrency. Part of test_emu (tests/emu.cmake); shared
 * helpers in emu_test_util.h. Criterion runs every test in its own process. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "emu_test_util.h"

/* ---- streams ---- */

Test(emu, stream_runs_asynchronously_in_order)
{
    primary_current();
    rzcu_stream s;
    OK(cuStreamCreate(&s, 0));
    rzcu_deviceptr d;
    OK(cuMemAlloc_v2(&d, 16));
    OK(cuMemcpyHtoD_v2(d, "after-the-gate!", 16));
    char *host; /* pinned: a copy into pageable memory would return only once done */
    OK(cuMemAllocHost_v2((void **)&host, 16));
    strcpy(host, "untouched");
    struct gate g = GATE_INIT;
    OK(cuLaunchHostFunc(s, gate_wait_fn, &g));
    OK(cuMemcpyDtoHAsync_v2(host, d, 16, s));
    int done = 0;
    OK(cuLaunchHostFunc(s, set_flag_fn, &done));
    gate_await_entered(&g); /* the host function runs on another thread */
    cr_assert_str_eq(host, "untouched", "the copy ran before the work ahead of it");
    cr_assert_eq(get_flag(&done), 0);
    gate_open(&g);
    OK(cuStreamSynchronize(s));
    cr_assert_str_eq(host, "after-the-gate!");
    cr_assert_eq(get_flag(&done), 1);
    OK(cuStreamDestroy_v2(s));
    OK(cuMemFreeHost(host));
}

/* cuStreamQuery answers without waiting: NOT_READY while work is queued or running, SUCCESS once it is all
 * complete; the per-thread and legacy streams by their handles; on a stream being captured it is illegal (as
 * synchronising it is) and invalidates the capture. */
Test(emu, stream_query_answers_without_waiting)
{
    primary_current();
    rzcu_stream s;
    OK(cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING));
    OK(cuStreamQuery(s));
    struct gate g = GATE_INIT;
    OK(cuLaunchHostFunc(s, gate_wait_fn, &g));
    FAILS(cuStreamQuery(s), RZCUDA_ERROR_NOT_READY);
    gate_await_entered(&g);
    FAILS(cuStreamQuery(s), RZCUDA_ERROR_NOT_READY);
    OK(cuStreamQuery(NULL)); /* the legacy stream is idle: a non-blocking stream's work is not its own */
    OK(cuStreamQuery(RZCU_STREAM_PER_THREAD));
    gate_open(&g);
    OK(cuStreamSynchronize(s));
    OK(cuStreamQuery(s));
    struct gate p = GATE_INIT;
    OK(cuLaunchHostFunc_ptsz(NULL, gate_wait_fn, &p));
    FAILS(cuStreamQuery_ptsz(NULL), RZCUDA_ERROR_NOT_READY);
    FAILS(cuStreamQuery(RZCU_STREAM_PER_THREAD), RZCUDA_ERROR_NOT_READY);
    gate_open(&p);
    OK(cuStreamSynchronize_ptsz(NULL));
    OK(cuStreamQuery_ptsz(NULL));
    OK(cuStreamBeginCapture_v2(s, 0));
    FAILS(cuStreamQuery(s), RZCUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    struct CUgraph_st *graph;
    FAILS(cuStreamEndCapture(s, &graph), RZCUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    OK(cuStreamDestroy_v2(s));
    FAILS(cuStreamQuery(s), RZCUDA_ERROR_INVALID_HANDLE);
}

Test(emu, legacy_stream_waits_for_blocking_streams)
{
    primary_current();
    rzcu_stream blocking, nonblocking;
    OK(cuStreamCreate(&blocking, RZCU_STREAM_DEFAULT));
    OK(cuStreamCreate(&nonblocking, RZCU_STREAM_NON_BLOCKING));
    struct gate g = GATE_INIT;
    OK(cuLaunchHostFunc(blocking, gate_wait_fn, &g));
    int legacy_done = 0, nb_done = 0;
    OK(cuLaunchHostFunc(NULL, set_flag_fn, &legacy_done));
    OK(cuLaunchHostFunc(nonblocking, set_flag_fn, &nb_done));
    OK(cuStreamSynchronize(nonblocking)); /* a non-blocking stream does not wait */
    cr_assert_eq(get_flag(&nb_done), 1);
    gate_await_entered(&g);
    cr_assert_eq(get_flag(&legacy_done), 0, "legacy stream work ran before the blocking stream's");
    gate_open(&g);
    OK(cuStreamSynchronize(NULL));
    cr_assert_eq(get_flag(&legacy_done), 1);
}

Test(emu, blocking_stream_waits_for_legacy_stream)
{
    primary_current();
    rzcu_stream blocking, nonblocking;
    OK(cuStreamCreate(&blocking, 0));
    OK(cuStreamCreate(&nonblocking, RZCU_STREAM_NON_BLOCKING));
    struct gate g = GATE_INIT;
    OK(cuLaunchHostFunc(RZCU_STREAM_LEGACY, gate_wait_fn, &g));
    int s_done = 0, nb_done = 0, pt_done = 0;
    OK(cuLaunchHostFunc(blocking, set_flag_fn, &s_done));
    OK(cuLaunchHostFunc_ptsz(NULL, set_flag_fn, &pt_done)); /* per-thread stream: blocking too */
    OK(cuLaunchHostFunc(nonblocking, set_flag_fn, &nb_done));
    OK(cuStreamSynchronize(nonblocking));
    cr_assert_eq(get_flag(&nb_done), 1);
    gate_await_entered(&g);
    cr_assert_eq(get_flag(&s_done), 0);
    cr_assert_eq(get_flag(&pt_done), 0);
    gate_open(&g);
    OK(cuStreamSynchronize(blocking));
    cr_assert_eq(get_flag(&s_done), 1);
    OK(cuStreamSynchronize_ptsz(NULL));
    cr_assert_eq(get_flag(&pt_done), 1);
}

Test(emu, stream_errors_and_destroy_with_pending_work)
{
    primary_current();
    rzcu_stream s;
    FAILS(cuStreamCreate(&s, 2), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuStreamCreate(NULL, 0), RZCUDA_ERROR_INVALID_VALUE);
    OK(cuStreamCreate(&s, 0));
    struct gate g = GATE_INIT;
    int done = 0;
    OK(cuLaunchHostFunc(s, gate_wait_fn, &g));
    OK(cuLaunchHostFunc(s, set_flag_fn, &done));
    OK(cuStreamDestroy_v2(s)); /* returns at once */
    FAILS(cuStreamSynchronize(s), RZCUDA_ERROR_INVALID_HANDLE);
    FAILS(cuStreamDestroy_v2(s), RZCUDA_ERROR_INVALID_HANDLE);
    FAILS(cuLaunchHostFunc(s, set_flag_fn, &done), RZCUDA_ERROR_INVALID_HANDLE);
    cr_assert_eq(get_flag(&done), 0);
    gate_open(&g);
    OK(cuCtxSynchronize()); /* the destroyed stream's work still completes */
    cr_assert_eq(get_flag(&done), 1);
    int x;
    FAILS(cuStreamSynchronize((rzcu_stream)&x), RZCUDA_ERROR_INVALID_HANDLE);
    FAILS(cuMemsetD8Async(0, 0, 0, (rzcu_stream)&x), RZCUDA_ERROR_INVALID_HANDLE);
    FAILS(cuStreamDestroy_v2(NULL), RZCUDA_ERROR_INVALID_HANDLE);
    FAILS(cuLaunchHostFunc(NULL, NULL, NULL), RZCUDA_ERROR_INVALID_VALUE);
}

Test(emu, ctx_synchronize_waits_for_all_streams)
{
    primary_current();
    rzcu_stream s[3];
    int done[3] = {0, 0, 0};
    struct gate g = GATE_INIT;
    for (int i = 0; i < 3; i++) {
        OK(cuStreamCreate(&s[i], i == 2 ? RZCU_STREAM_NON_BLOCKING : 0));
        if (i == 2)
            OK(cuLaunchHostFunc(s[i], gate_wait_fn, &g));
        OK(cuLaunchHostFunc(s[i], set_flag_fn, &done[i]));
    }
    gate_await_entered(&g);
    gate_open(&g);
    OK(cuCtxSynchronize());
    for (int i = 0; i < 3; i++)
        cr_assert_eq(get_flag(&done[i]), 1);
}

/* ---- events ---- */

Test(emu, events_capture_the_work_recorded)
{
    primary_current();
    rzcu_event e;
    FAILS(cuEventCreate(NULL, 0), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuEventCreate(&e, 8), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuEventCreate(&e, 0x4), RZCUDA_ERROR_INVALID_VALUE); /* interprocess needs disable-timing */
    OK(cuEventCreate(&e, 0x4 | 0x2 | 0x1));
    OK(cuEventDestroy_v2(e));
    OK(cuEventCreate(&e, 0));
    OK(cuEventSynchronize(e)); /* never recorded: no work */
    rzcu_stream s;
    OK(cuStreamCreate(&s, 0));
    struct gate g1 = GATE_INIT, g2 = GATE_INIT;
    int a = 0, b = 0;
    OK(cuLaunchHostFunc(s, gate_wait_fn, &g1));
    OK(cuLaunchHostFunc(s, set_flag_fn, &a));
    OK(cuEventRecord(e, s));
    OK(cuLaunchHostFunc(s, gate_wait_fn, &g2));
    OK(cuLaunchHostFunc(s, set_flag_fn, &b));
    gate_open(&g1);
    OK(cuEventSynchronize(e));
    cr_assert_eq(get_flag(&a), 1, "the event completed before the work it captured");
    gate_await_entered(&g2);
    cr_assert_eq(get_flag(&b), 0);
    /* a new record replaces the captured work */
    OK(cuEventRecord(e, s));
    gate_open(&g2);
    OK(cuEventSynchronize(e));
    cr_assert_eq(get_flag(&b), 1);
    OK(cuEventDestroy_v2(e));
    FAILS(cuEventSynchronize(e), RZCUDA_ERROR_INVALID_HANDLE);
    FAILS(cuEventRecord(e, s), RZCUDA_ERROR_INVALID_HANDLE);
    FAILS(cuEventDestroy_v2(e), RZCUDA_ERROR_INVALID_HANDLE);
    FAILS(cuEventDestroy_v2(NULL), RZCUDA_ERROR_INVALID_HANDLE);
    int x;
    FAILS(cuEventSynchronize((rzcu_event)&x), RZCUDA_ERROR_INVALID_HANDLE);
}

/* cuStreamWaitEvent: later work on the stream waits for the work the event captured, on another stream;
 * the call itself does not wait. */
Test(emu, stream_wait_event_orders_later_work)
{
    primary_current();
    rzcu_stream s1, s2;
    OK(cuStreamCreate(&s1, RZCU_STREAM_NON_BLOCKING));
    OK(cuStreamCreate(&s2, RZCU_STREAM_NON_BLOCKING));
    rzcu_deviceptr p;
    OK(cuMemAlloc_v2(&p, 16));
    OK(cuMemsetD8_v2(p, 0, 16));
    rzcu_event e, never;
    OK(cuEventCreate(&e, 0));
    OK(cuEventCreate(&never, 0));
    struct gate g = GATE_INIT;
    OK(cuLaunchHostFunc(s1, gate_wait_fn, &g));
    OK(cuEventRecord(e, s1));
    OK(cuStreamWaitEvent(s2, e, 0));
    OK(cuMemsetD8Async(p, 0x5a, 16, s2));
    gate_await_entered(&g);
    unsigned char seen = 1;
    OK(cuMemcpyDtoH_v2(&seen, p, 1)); /* the legacy stream does not wait for non-blocking streams */
    cr_assert_eq(seen, 0, "the memset ran before the work the event captured");
    gate_open(&g);
    OK(cuStreamSynchronize(s2));
    OK(cuMemcpyDtoH_v2(&seen, p, 1));
    cr_assert_eq(seen, 0x5a);
    /* complete or never-recorded events: nothing to wait for, the next copy runs in the call */
    OK(cuStreamWaitEvent(s2, never, 0));
    OK(cuStreamWaitEvent_ptsz(NULL, e, 0));
    OK(cuMemsetD8Async(p, 0x33, 1, s2));
    OK(cuMemcpyDtoH_v2(&seen, p, 1));
    cr_assert_eq(seen, 0x33);
    FAILS(cuStreamWaitEvent(s2, e, 1), RZCUDA_ERROR_INVALID_VALUE); /* CU_EVENT_WAIT_EXTERNAL: capture only */
    FAILS(cuStreamWaitEvent(s2, NULL, 0), RZCUDA_ERROR_INVALID_HANDLE);
    FAILS(cuStreamWaitEvent((rzcu_stream)&seen, e, 0), RZCUDA_ERROR_INVALID_HANDLE);
    /* no event nodes in emulated graphs: refused during capture, which it invalidates */
    OK(cuStreamBeginCapture_v2(s2, 0));
    FAILS(cuStreamWaitEvent(s2, e, 0), RZCUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    struct CUgraph_st *graph;
    FAILS(cuStreamEndCapture(s2, &graph), RZCUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    void *fn = NULL;
    OK(cuGetProcAddress_v2("cuStreamWaitEvent", &fn, 13000, RZCU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, NULL));
    cr_assert_eq(fn, (void *)&cuStreamWaitEvent_ptsz);
    OK(cuGetProcAddress_v2("cuStreamWaitEvent", &fn, 3020, 0, NULL));
    cr_assert_eq(fn, (void *)&cuStreamWaitEvent);
}

/* The legacy stream waits on an event of another context's stream too, and a blocking stream waiting on the
 * legacy stream's event keeps both orders. */
Test(emu, stream_wait_event_across_contexts)
{
    OK(cuInit(0));
    rzcu_context a, b;
    OK(cuCtxCreate_v4(&a, NULL, 0, 0));
    rzcu_stream sa;
    OK(cuStreamCreate(&sa, RZCU_STREAM_NON_BLOCKING));
    rzcu_event e;
    OK(cuEventCreate(&e, 0));
    struct gate g = GATE_INIT;
    int done = 0;
    OK(cuLaunchHostFunc(sa, gate_wait_fn, &g));
    OK(cuEventRecord(e, sa));
    OK(cuCtxCreate_v4(&b, NULL, 0, 0)); /* now current: b */
    OK(cuStreamWaitEvent(NULL, e, 0));
    OK(cuLaunchHostFunc(NULL, set_flag_fn, &done));
    gate_await_entered(&g);
    cr_assert_eq(get_flag(&done), 0);
    gate_open(&g);
    OK(cuCtxSynchronize());
    cr_assert_eq(get_flag(&done), 1);
    OK(cuCtxDestroy_v2(b));
    OK(cuCtxDestroy_v2(a));
}

Test(emu, event_on_legacy_stream_covers_blocking_streams)
{
    primary_current();
    rzcu_stream s;
    OK(cuStreamCreate(&s, 0));
    struct gate g = GATE_INIT;
    int done = 0;
    OK(cuLaunchHostFunc(s, gate_wait_fn, &g));
    OK(cuLaunchHostFunc(s, set_flag_fn, &done));
    rzcu_event e, pt;
    OK(cuEventCreate(&e, 0x2));
    OK(cuEventCreate(&pt, 0));
    OK(cuEventRecord(e, NULL));
    gate_await_entered(&g);
    gate_open(&g);
    OK(cuEventSynchronize(e));
    cr_assert_eq(get_flag(&done), 1);
    OK(cuEventRecord_ptsz(pt, NULL));
    OK(cuEventSynchronize(pt));
    /* a destroyed event's pending work still completes */
    OK(cuLaunchHostFunc(s, set_flag_fn, &done));
    OK(cuEventRecord(e, s));
    OK(cuEventDestroy_v2(e));
    OK(cuCtxSynchronize());
}

Test(emu, event_and_stream_of_different_contexts)
{
    rzcu_context p = primary_current();
    rzcu_event e;
    OK(cuEventCreate(&e, 0));
    rzcu_context other;
    OK(cuCtxCreate_v4(&other, NULL, 0, 0));
    rzcu_stream s;
    OK(cuStreamCreate(&s, 0));
    FAILS(cuEventRecord(e, s), RZCUDA_ERROR_INVALID_HANDLE);
    FAILS(cuEventRecord(e, NULL), RZCUDA_ERROR_INVALID_HANDLE);
    OK(cuCtxSetCurrent(p));
    OK(cuEventRecord(e, NULL));
    OK(cuEventSynchronize(e));
    while (cuCtxPopCurrent_v2(NULL) == RZCUDA_SUCCESS)
        ;
    FAILS(cuEventCreate(&e, 0), RZCUDA_ERROR_INVALID_CONTEXT);
    FAILS(cuEventRecord(e, NULL), RZCUDA_ERROR_INVALID_CONTEXT);
}

/* ---- scale and concurrency ---- */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

Test(emu, one_million_allocations, .timeout = 60)
{
    primary_current();
    enum { N = 1000000 };
    size_t free0 = free_bytes();
    rzcu_deviceptr *p = malloc(N * sizeof *p);
    cr_assert_not_null(p);
    double t0 = now_s();
    for (size_t i = 0; i < N; i++) {
        rzcu_result r = cuMemAlloc_v2(&p[i], 64);
        if (r != RZCUDA_SUCCESS)
            cr_assert_fail("allocation %zu failed with %u", i, r);
    }
    cr_assert_eq(free_bytes(), free0 - (size_t)N * 256);
    rzcu_deviceptr base;
    size_t size;
    OK(cuMemGetAddressRange_v2(&base, &size, p[N / 2] + 63));
    cr_assert_eq(base, p[N / 2]);
    cr_assert_eq(size, 64);
    for (size_t i = 0; i < N; i++) {
        rzcu_result r = cuMemFree_v2(p[i]);
        if (r != RZCUDA_SUCCESS)
            cr_assert_fail("free %zu failed with %u", i, r);
    }
    double elapsed = now_s() - t0;
    cr_assert_eq(free_bytes(), free0);
    cr_assert_lt(elapsed, 5.0, "1M allocations + frees took %.2f s", elapsed);
    free(p);
}

struct mt_arg {
    rzcu_context ctx;
    int id;
    pthread_barrier_t *barrier;
    rzcu_deviceptr *ptrs;
    size_t *sizes;
    int n;
    int errors;
};

static void *mt_worker(void *p)
{
    struct mt_arg *a = p;
    if (cuCtxSetCurrent(a->ctx) != RZCUDA_SUCCESS)
        a->errors++;
    unsigned seed = (unsigned)a->id * 7919u + 1;
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < a->n; i++) {
            seed = seed * 1103515245u + 12345u;
            a->sizes[i] = 1 + (seed >> 8) % (round == 2 ? 300000 : 5000);
            if (cuMemAlloc_v2(&a->ptrs[i], a->sizes[i]) != RZCUDA_SUCCESS)
                a->errors++;
            /* mark both ends (the whole allocation when small) with the thread's id */
            size_t n = a->sizes[i] <= 8192 ? a->sizes[i] : 1;
            if (cuMemsetD8_v2(a->ptrs[i], (unsigned char)a->id, n) != RZCUDA_SUCCESS ||
                cuMemsetD8_v2(a->ptrs[i] + a->sizes[i] - 1, (unsigned char)a->id, 1) != RZCUDA_SUCCESS)
                a->errors++;
        }
        pthread_barrier_wait(a->barrier); /* everybody's allocations are live here */
        pthread_barrier_wait(a->barrier); /* the main thread checked overlaps */
        for (int i = 0; i < a->n; i++) {
            unsigned char first, last;
            if (cuMemcpyDtoH_v2(&first, a->ptrs[i], 1) || cuMemcpyDtoH_v2(&last, a->ptrs[i] + a->sizes[i] - 1, 1))
                a->errors++;
            if (first != (unsigned char)a->id || last != (unsigned char)a->id)
                a->errors++;
            if (cuMemFree_v2(a->ptrs[i]) != RZCUDA_SUCCESS)
                a->errors++;
        }
    }
    return NULL;
}

struct range {
    rzcu_deviceptr base;
    size_t size;
};

static int cmp_range(const void *x, const void *y)
{
    const struct range *a = x, *b = y;
    return a->base < b->base ? -1 : a->base > b->base;
}

Test(emu, multithreaded_alloc_free_no_overlap, .timeout = 120)
{
    rzcu_context ctx = primary_current();
    enum { T = 8, N = 2000 };
    size_t free0 = free_bytes();
    pthread_barrier_t barrier;
    pthread_barrier_init(&barrier, NULL, T + 1);
    struct mt_arg args[T];
    pthread_t th[T];
    for (int t = 0; t < T; t++) {
        args[t] = (struct mt_arg){ctx, t + 1, &barrier, calloc(N, sizeof(rzcu_deviceptr)), calloc(N, sizeof(size_t)),
                                  N, 0};
        pthread_create(&th[t], NULL, mt_worker, &args[t]);
    }
    struct range *all = malloc(sizeof *all * T * N);
    for (int round = 0; round < 3; round++) {
        pthread_barrier_wait(&barrier);
        size_t k = 0;
        for (int t = 0; t < T; t++)
            for (int i = 0; i < N; i++)
                all[k++] = (struct range){args[t].ptrs[i], args[t].sizes[i]};
        qsort(all, k, sizeof *all, cmp_range);
        for (size_t i = 1; i < k; i++)
            cr_assert_leq(all[i - 1].base + all[i - 1].size, all[i].base, "allocations overlap");
        pthread_barrier_wait(&barrier);
    }
    for (int t = 0; t < T; t++) {
        pthread_join(th[t], NULL);
        cr_assert_eq(args[t].errors, 0, "thread %d saw %d errors", t, args[t].errors);
        free(args[t].ptrs);
        free(args[t].sizes);
    }
    free(all);
    cr_assert_eq(free_bytes(), free0);
}
