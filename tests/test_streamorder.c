/*
 * What the library leaves in a program's stream without waiting (stream_fills.c): stream-ordered band fills
 * followed by events from a bounded pool, zones not judged until their fill is done, and the pool released
 * with its context. Allocations go through rz__alloc as the interposed cuMemAllocAsync does. Also the quiet
 * sections its event queries (and the library's other queries and synchronisations) run in.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "rz_test.h"

CUDA_EMU_KERNEL(wait_host, sizeof(rzcu_deviceptr)) {
    while (!__atomic_load_n((volatile int *)(uintptr_t)CUDA_EMU_PARAM(rzcu_deviceptr, 0), __ATOMIC_ACQUIRE)) {
    }
}

/* A kernel on s that runs until *flag is set by the host. */
static void hold_stream(rzcu_stream s, int *flag) {
    rzcu_module mod;
    rzcu_function f;
    cr_assert_eq(cuModuleLoadData(&mod, "emulated module"), RZCUDA_SUCCESS);
    cr_assert_eq(cuModuleGetFunction(&f, mod, "wait_host"), RZCUDA_SUCCESS);
    static rzcu_deviceptr host_flag;
    host_flag = (rzcu_deviceptr)(uintptr_t)flag;
    void *params[] = {&host_flag};
    cr_assert_eq(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, params, NULL), RZCUDA_SUCCESS);
}

static rzcu_result alloc_async(rz_devptr_t *p, size_t bytes, rzcu_stream s) {
    rz_alloc_req_t req = {.kind = RZ_ALLOC_ASYNC, .stream = s, .interposed = 1};
    return (rzcu_result)rz__alloc(p, bytes, &req);
}

static const char *const waits[] = {"cuStreamSynchronize", "cuStreamSynchronize_ptsz", "cuCtxSynchronize",
                                    "cuCtxSynchronize_v2", "cuEventSynchronize"};

static unsigned long long host_waits(void) {
    unsigned long long n = 0;
    for (size_t i = 0; i < sizeof waits / sizeof waits[0]; i++)
        n += cuEmuCallCount(waits[i]);
    return n;
}

/* Behind a kernel that waits for the host, the allocation returns without waiting (it used to synchronise the
 * stream: a deadlock); a scan then leaves the zone alone, and judges it once the fill has landed. */
Test(streamorder, allocation_behind_busy_work_waits_for_nothing_and_is_judged_once_filled, .timeout = 60) {
    setenv("METRALE_REDZONE", "64", 1);
    const char *log = rzt_log_to_file();
    rzt_context(0);
    rzcu_stream s;
    cr_assert_eq(cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING), RZCUDA_SUCCESS);
    int *flag;
    cr_assert_eq(cuMemAllocHost_v2((void **)&flag, sizeof *flag), RZCUDA_SUCCESS);
    *flag = 0;
    hold_stream(s, flag);
    cuEmuResetCallCounts();
    rz_devptr_t p;
    cr_assert_eq(alloc_async(&p, 1000, s), RZCUDA_SUCCESS);
    cr_assert_eq(host_waits(), 0, "the allocation waited for the program's stream");
    cr_assert_eq(cuEmuCallCount("cuMemsetD8Async"), 1);
    cr_assert_eq(cuEmuCallCount("cuEventRecord"), 1);
    cr_assert_eq(rz_scan(), 0, "the band has not landed: nothing to judge");
    cr_assert_eq(RZ_STATE.last_scan_checked, 0);
    /* A poison leaves it alone too: a 0x00 written now would be overwritten by the memset still queued. */
    cr_assert_eq(rz_poison(5, 10), RZ_OK);
    __atomic_store_n(flag, 1, __ATOMIC_RELEASE);
    cr_assert_eq(cuStreamSynchronize(s), RZCUDA_SUCCESS);
    cr_assert_eq(rz_scan(), 0);
    cr_assert_eq(RZ_STATE.last_scan_checked, 1, "judged once its fill is done");
    cr_assert_eq(rz_unpoison(), RZ_OK);
    uint8_t past[8];
    memset(past, 0x5a, sizeof past);
    cr_assert_eq(cuMemcpyHtoD_v2(p + 1000, past, sizeof past), RZCUDA_SUCCESS);
    cr_assert_eq(rz_scan(), 1, "an overrun after the band landed is reported");
    char *text = rzt_read_log(log);
    cr_assert(strstr(text, "REDZONE VIOLATION alloc#0 user_bytes=1000 pad=64 : bytes [0..=7] past the end were "
                           "written (8 of 64 pad bytes changed), first bad value 0x5a\n"), "%s", text);
    cr_assert_eq(rzt_count(text, "REDZONE VIOLATION"), 1, "%s", text);
    free(text);
    rz_free_req_t fr = {.async = 1, .stream = s};
    cr_assert_eq(rz__free(p, &fr), RZCUDA_SUCCESS);
    cr_assert_eq(cuStreamSynchronize(s), RZCUDA_SUCCESS);
    cr_assert_eq(cuMemFreeHost(flag), RZCUDA_SUCCESS);
}

/* A plain cuMemFree of a zone whose fill has not landed neither reads its band now (it would judge the bytes
 * before the memset) nor frees it under the memset still queued: it is freed and checked in the allocating
 * stream's order. A stream-ordered free's check runs after the memset anyway. */
Test(streamorder, free_before_the_fill_landed_reports_nothing_false, .timeout = 60) {
    setenv("METRALE_REDZONE", "64", 1);
    setenv("METRALE_REDZONE_QUARANTINE", "0", 1); /* the frees the driver gets, counted (held ones: test_quarantine.c) */
    const char *log = rzt_log_to_file();
    rzt_context(0);
    rzcu_stream s;
    cr_assert_eq(cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING), RZCUDA_SUCCESS);
    int *flag;
    cr_assert_eq(cuMemAllocHost_v2((void **)&flag, sizeof *flag), RZCUDA_SUCCESS);
    *flag = 0;
    hold_stream(s, flag);
    rz_devptr_t a, b;
    cr_assert_eq(alloc_async(&a, 1000, s), RZCUDA_SUCCESS);
    cr_assert_eq(alloc_async(&b, 1000, s), RZCUDA_SUCCESS);
    rz_free_req_t sync_free = {.async = 0}, async_free = {.async = 1, .stream = s};
    cuEmuResetCallCounts();
    cr_assert_eq(rz__free(a, &sync_free), RZCUDA_SUCCESS);
    cr_assert_eq(rz__free(b, &async_free), RZCUDA_SUCCESS);
    cr_assert_eq(cuEmuCallCount("cuMemFree_v2"), 0, "not freed under the queued memset");
    cr_assert_eq(cuEmuCallCount("cuMemFreeAsync"), 2);
    cr_assert_eq(host_waits(), 0);
    __atomic_store_n(flag, 1, __ATOMIC_RELEASE);
    cr_assert_eq(cuStreamSynchronize(s), RZCUDA_SUCCESS);
    rz__free_checks_deferred();
    char *text = rzt_read_log(log);
    cr_assert(!strstr(text, "REDZONE"), "%s", text);
    free(text);
    rz_stats_t st;
    rz_stats_get(&st);
    cr_assert_eq(st.violations, 0);
    cr_assert_eq(st.live_zones, 0);
    cr_assert_eq(cuMemFreeHost(flag), RZCUDA_SUCCESS);
}

/* A stream-ordered free's check whose host function finds the registry busy is queued; the next scan judges it
 * before it reads any band (the free check's scan-begin step, registered at start-up): the overrun is reported
 * by that scan, not left waiting for a later free or synchronisation. */
Test(streamorder, a_check_queued_while_the_registry_was_busy_is_judged_by_the_next_scan, .timeout = 60) {
    setenv("METRALE_REDZONE", "64", 1);
    const char *log = rzt_log_to_file();
    rzt_context(0);
    rzcu_stream s;
    cr_assert_eq(cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING), RZCUDA_SUCCESS);
    rz_devptr_t p;
    cr_assert_eq(alloc_async(&p, 1000, s), RZCUDA_SUCCESS);
    cr_assert_eq(cuStreamSynchronize(s), RZCUDA_SUCCESS); /* the band's fill has landed */
    uint8_t b;
    cr_assert_eq(cuMemcpyDtoH_v2(&b, p + 1000, 1), RZCUDA_SUCCESS);
    b ^= 0xFF; /* one byte past the end, changed */
    cr_assert_eq(cuMemcpyHtoD_v2(p + 1000, &b, 1), RZCUDA_SUCCESS);
    int *flag;
    cr_assert_eq(cuMemAllocHost_v2((void **)&flag, sizeof *flag), RZCUDA_SUCCESS);
    *flag = 0;
    hold_stream(s, flag);
    rz_free_req_t async_free = {.async = 1, .stream = s};
    cr_assert_eq(rz__free(p, &async_free), RZCUDA_SUCCESS); /* its check queued behind the held kernel */
    rz__registry_lock();
    __atomic_store_n(flag, 1, __ATOMIC_RELEASE);
    cr_assert_eq(cuStreamSynchronize(s), RZCUDA_SUCCESS); /* the check's host function ran: the lock was busy */
    rz__registry_unlock();
    rz_stats_t st;
    rz_stats_get(&st);
    cr_assert_eq(st.violations, 0, "judged only later, by the next scan");
    rz_scan();
    rz_stats_get(&st);
    cr_assert_eq(st.violations, 1, "the queued check was judged by the scan");
    char *text = rzt_read_log(log);
    cr_assert_eq(rzt_count(text, "REDZONE VIOLATION"), 1, "%s", text);
    free(text);
    cr_assert_eq(cuMemFreeHost(flag), RZCUDA_SUCCESS);
}

/* More fills in flight than event slots, all behind one waiting kernel: the slots are shared on that stream
 * (recorded again), every zone stays watched, and each is judged once the stream has run. Bounded: the pool
 * never holds more than its slots, and its events go with their context. */
Test(streamorder, event_pool_is_bounded_shared_and_released_with_its_context, .timeout = 120) {
    setenv("METRALE_REDZONE", "64", 1);
    const char *log = rzt_log_to_file();
    cr_assert_eq(cuInit(0), RZCUDA_SUCCESS);
    rzcu_context ctx;
    cr_assert_eq(cuCtxCreate_v4(&ctx, NULL, 0, 0), RZCUDA_SUCCESS);
    rzcu_stream s;
    cr_assert_eq(cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING), RZCUDA_SUCCESS);
    int *flag;
    cr_assert_eq(cuMemAllocHost_v2((void **)&flag, sizeof *flag), RZCUDA_SUCCESS);
    *flag = 0;
    hold_stream(s, flag);
    enum { N = 1500 };
    cuEmuResetCallCounts();
    for (int i = 0; i < N; i++) {
        rz_devptr_t p;
        cr_assert_eq(alloc_async(&p, 100, s), RZCUDA_SUCCESS);
    }
    cr_assert_eq(host_waits(), 0);
    unsigned held = rz__fill_events();
    cr_assert(held > 0 && held <= 1024, "%u events", held);
    cr_assert_eq(cuEmuCallCount("cuEventCreate"), held, "one event per slot, made once");
    cr_assert_eq(rz_scan(), 0);
    cr_assert_eq(RZ_STATE.last_scan_checked, 0, "every fill still waits");
    __atomic_store_n(flag, 1, __ATOMIC_RELEASE);
    cr_assert_eq(cuStreamSynchronize(s), RZCUDA_SUCCESS);
    cr_assert_eq(rz_scan(), 0);
    cr_assert_eq(RZ_STATE.last_scan_checked, N, "every zone judged once its fill is done");
    /* Idle now: new fills reuse done slots, no new events. */
    for (int i = 0; i < 200; i++) {
        rz_devptr_t p;
        cr_assert_eq(alloc_async(&p, 100, s), RZCUDA_SUCCESS);
    }
    cr_assert_eq(cuEmuCallCount("cuEventCreate"), held);
    char *text = rzt_read_log(log);
    cr_assert(!strstr(text, "not watched"), "%s", text);
    cr_assert(!strstr(text, "REDZONE"), "%s", text);
    free(text);
    rz__bands_context_ending(ctx);
    cr_assert_eq(cuCtxDestroy_v2(ctx), RZCUDA_SUCCESS);
    rz__bands_context_ended(ctx);
    cr_assert_eq(rz__fill_events(), 0, "the context's events went with it"); /* and flag, its host memory */
}

/* ---- quiet sections (band_io.c, capture.c): the library's own queries and synchronisations ---- */
static unsigned long long exchanges(void) { return cuEmuCallCount("cuThreadExchangeStreamCaptureMode"); }

/* Nothing exchanged while no capture is in progress; relaxed around the call (two exchanges) while one is;
 * the context synchronisation left out then (no mode makes it legal beside a capture in its context). The
 * capture is reported as the interposed cuStreamBeginCapture reports it. */
Test(quiet, relaxed_only_while_a_capture_is_in_progress) {
    rzt_context(0);
    cr_assert_eq(rz__dev_load(), RZ_OK);
    rzcu_stream origin = (rzcu_stream)(uintptr_t)0x1234;
    cuEmuResetCallCounts();
    rz__dev_quiet_end(rz__dev_quiet_begin());
    cr_assert_eq(exchanges(), 0, "no capture: the program's mode, nothing exchanged");
    cr_assert_eq(rz__dev_settle(NULL), RZCUDA_SUCCESS);
    cr_assert_eq(cuEmuCallCount("cuCtxSynchronize"), 1);
    int added = rz__capture_beginning(origin);
    cr_assert_eq(added, 1);
    rzcu_capture_mode saved = rz__dev_quiet_begin();
    rzcu_capture_mode now = RZCU_STREAM_CAPTURE_MODE_GLOBAL;
    cr_assert_eq(cuThreadExchangeStreamCaptureMode(&now), RZCUDA_SUCCESS);
    cr_assert_eq(now, RZCU_STREAM_CAPTURE_MODE_RELAXED, "relaxed inside the section");
    cr_assert_eq(cuThreadExchangeStreamCaptureMode(&now), RZCUDA_SUCCESS);
    rz__dev_quiet_end(saved);
    now = RZCU_STREAM_CAPTURE_MODE_RELAXED;
    cr_assert_eq(cuThreadExchangeStreamCaptureMode(&now), RZCUDA_SUCCESS);
    cr_assert_eq(now, RZCU_STREAM_CAPTURE_MODE_GLOBAL, "the program's mode back after it");
    cr_assert_eq(cuThreadExchangeStreamCaptureMode(&now), RZCUDA_SUCCESS);
    cr_assert_eq(exchanges(), 6, "two for the section, four for the test's looks");
    cr_assert_eq(rz__dev_settle(NULL), RZCUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    cr_assert_eq(cuEmuCallCount("cuCtxSynchronize"), 1, "no context synchronisation during the capture");
    rz__capture_stream_gone(origin);
    cuEmuResetCallCounts();
    rz__dev_quiet_end(rz__dev_quiet_begin());
    cr_assert_eq(exchanges(), 0, "the capture gone: nothing exchanged again");
}

/* A section made in the program's mode (no capture when it began) is never met by a capture: a capture's
 * beginning waits until it has ended. */
static atomic_int g_entered, g_left;

static void *section_thread(void *arg) {
    (void)arg;
    rzcu_capture_mode saved = rz__dev_quiet_begin();
    atomic_store(&g_entered, 1);
    while (!rz__capture_in_progress()) /* the capture has published itself: it must now wait for us */
        sched_yield();
    for (int i = 0; i < 1000; i++) /* give a capture that does not wait every chance to return first */
        sched_yield();
    atomic_store(&g_left, 1);
    rz__dev_quiet_end(saved);
    return NULL;
}

Test(quiet, a_capture_begins_only_after_the_sections_in_flight) {
    rzt_context(0);
    cr_assert_eq(rz__dev_load(), RZ_OK);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, section_thread, NULL), 0);
    while (!atomic_load(&g_entered))
        sched_yield();
    cuEmuResetCallCounts();
    rzcu_stream origin = (rzcu_stream)(uintptr_t)0x1234;
    rz__capture_beginning(origin);
    cr_assert_eq(atomic_load(&g_left), 1, "the capture began while a section in the program's mode was in flight");
    pthread_join(t, NULL);
    cr_assert_eq(exchanges(), 0, "that section exchanged nothing");
    rz__capture_stream_gone(origin);
}

/* Page-locked slots for free checks (pinned_slots.c, issue 29): any band size gets one (a size class, or a
 * region of its own past 1 MiB), registering memory waits for no device work, every slot is page-locked (so a
 * copy into it is queued, never a host wait), all of them together stay within RZ_PINNED_BUDGET, and a slot
 * given back is used again. */
Test(streamorder, pinned_slots_any_size_bounded_no_wait, .timeout = 60) {
    rzt_context(0);
    cr_assert_eq(rz__dev_load(), RZ_OK);
    enum { MAX = 4096 };
    static void *got[MAX];
    size_t sizes[] = {64, 4096, 5000, 70000, 1u << 20, (3u << 20) + 5};
    size_t n = 0, bytes = 0;
    cuEmuResetCallCounts();
    for (size_t k = 0; n < MAX; k++) {
        size_t want = sizes[k % (sizeof sizes / sizeof sizes[0])];
        void *p = rz__dev_pinned_alloc(want);
        if (p == NULL)
            break;
        memset(p, 0xab, want); /* the whole size is the caller's */
        rz_devptr_t d;
        cr_assert_eq(cuMemAlloc_v2(&d, 1), RZCUDA_SUCCESS);
        cr_assert_eq(cuMemcpyDtoHAsync_v2(p, d, 1, NULL), RZCUDA_SUCCESS);
        cr_assert_eq(cuEmuHostWaits("cuMemcpyDtoHAsync_v2"), 0, "a copy into a slot of %zu bytes waited", want);
        cr_assert_eq(cuMemFree_v2(d), RZCUDA_SUCCESS);
        got[n++] = p;
        bytes += want;
    }
    cr_assert_lt(n, MAX, "the budget ended the loop");
    cr_assert_leq(rz__dev_pinned_bytes(), RZ_PINNED_BUDGET);
    cr_assert_geq(rz__dev_pinned_bytes(), RZ_PINNED_BUDGET - ((size_t)4 << 20), "%zu", rz__dev_pinned_bytes());
    cr_assert_eq(cuEmuHostWaits("cuMemHostRegister_v2"), 0);
    size_t held = rz__dev_pinned_bytes();
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(rz__dev_pinned_free(got[i]), 1);
    for (size_t i = 0; i < n; i++)
        cr_assert_neq(rz__dev_pinned_alloc(sizes[i % (sizeof sizes / sizeof sizes[0])]), NULL, "slot %zu reused", i);
    cr_assert_eq(rz__dev_pinned_bytes(), held, "no new region for slots given back");
    int x;
    cr_assert_eq(rz__dev_pinned_free(&x), 0, "not a slot");
}
