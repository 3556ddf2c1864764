/*
 * The quarantine (core/quarantine.c, issue 32 item 1) in-process: what a held free costs (driver calls, no host
 * wait), the bound and the first-in-first-out order, a stream-ordered free's fill in the program's stream (not
 * judged before it lands), and a context that ends taking its held blocks without a driver call. The program's
 * view (stale writes reported, double frees, the driver's answers) is tests/free_checks.py's.
 */
#include "rz_test.h"

CUDA_EMU_KERNEL(q_wait_host, sizeof(rzcu_deviceptr)) {
    while (!__atomic_load_n((volatile int *)(uintptr_t)CUDA_EMU_PARAM(rzcu_deviceptr, 0), __ATOMIC_ACQUIRE)) {
    }
}

static void hold_stream(rzcu_stream s, int *flag) {
    rzcu_module mod;
    rzcu_function f;
    cr_assert_eq(cuModuleLoadData(&mod, "emulated module"), RZCUDA_SUCCESS);
    cr_assert_eq(cuModuleGetFunction(&f, mod, "q_wait_host"), RZCUDA_SUCCESS);
    static rzcu_deviceptr host_flag;
    host_flag = (rzcu_deviceptr)(uintptr_t)flag;
    void *params[] = {&host_flag};
    cr_assert_eq(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, params, NULL), RZCUDA_SUCCESS);
}

static const char *const waits[] = {"cuStreamSynchronize", "cuStreamSynchronize_ptsz", "cuCtxSynchronize",
                                    "cuCtxSynchronize_v2", "cuEventSynchronize"};

static unsigned long long host_waits(void) {
    unsigned long long n = 0;
    for (size_t i = 0; i < sizeof waits / sizeof waits[0]; i++)
        n += cuEmuCallCount(waits[i]);
    return n;
}

static rz_devptr_t alloc_plain(size_t bytes) {
    rz_devptr_t p;
    rz_alloc_req_t req = {.kind = RZ_ALLOC_PLAIN, .interposed = 1};
    cr_assert_eq(rz__alloc(&p, bytes, &req), RZCUDA_SUCCESS);
    cr_assert_eq(cuMemsetD8_v2(p, 1, bytes), RZCUDA_SUCCESS); /* device work: its band is written */
    return p;
}

static const rz_free_req_t plain_free = {.async = 0};

/* A held free: a memset of the whole block and an event after it, no cuMemFree, no host wait; the bytes and
 * the peak counted. (SCAN=exit: the free-time band check is not the quarantine's.) */
Test(quarantine, a_held_free_costs_a_memset_and_an_event_and_waits_for_nothing) {
    setenv("METRALE_REDZONE", "64", 1);
    setenv("METRALE_REDZONE_SCAN", "exit", 1);
    rzt_context(0);
    rz_devptr_t p = alloc_plain(100);
    cr_assert_eq(cuCtxSynchronize(), RZCUDA_SUCCESS);
    cuEmuResetCallCounts();
    cr_assert_eq(rz__free(p, &plain_free), RZCUDA_SUCCESS);
    cr_assert_eq(cuEmuCallCount("cuMemFree_v2"), 0, "held, not freed");
    cr_assert_eq(cuEmuCallCount("cuMemsetD8Async"), 1);
    cr_assert_eq(cuEmuCallCount("cuEventRecord"), 1);
    cr_assert_eq(host_waits(), 0, "the free waits for nothing");
    rz_stats_t s;
    rz_stats_get(&s);
    cr_assert_eq(s.quarantine_bytes, 164);
    cr_assert_eq(s.peak_quarantine_bytes, 164);
    cr_assert_eq(s.current_mapped_bytes, 0, "freed for the program");
    cr_assert_eq(__redzone_quarantine.count, 1);
    cr_assert_eq(__redzone_quarantine.ring[__redzone_quarantine.head].ptr, p);
    cr_assert_eq(__redzone_quarantine.ring[__redzone_quarantine.head].byte, 0xDD);
    uint8_t back[164];
    cr_assert_eq(cuCtxSynchronize(), RZCUDA_SUCCESS);
    cr_assert_eq(cuMemcpyDtoH_v2(back, p, 164), RZCUDA_SUCCESS);
    for (size_t i = 0; i < sizeof back; i++)
        cr_assert_eq(back[i], 0xDD, "byte %zu of the held block", i);
}

/* Bounded by bytes, first in first out: each block is 164 bytes; a bound of 500 holds three, and the fourth
 * free gives the oldest back (checked, then cuMemFree); the peak never passes the bound. */
Test(quarantine, the_oldest_block_leaves_first_when_the_bound_is_passed) {
    setenv("METRALE_REDZONE", "64", 1);
    setenv("METRALE_REDZONE_QUARANTINE", "500", 1);
    rzt_context(0);
    rz_devptr_t p[6];
    for (int i = 0; i < 6; i++)
        p[i] = alloc_plain(100);
    cr_assert_eq(cuCtxSynchronize(), RZCUDA_SUCCESS);
    cuEmuResetCallCounts();
    for (int i = 0; i < 3; i++)
        cr_assert_eq(rz__free(p[i], &plain_free), RZCUDA_SUCCESS);
    cr_assert_eq(cuEmuCallCount("cuMemFree_v2"), 0);
    cr_assert_eq(cuCtxSynchronize(), RZCUDA_SUCCESS); /* the fills land */
    for (int i = 3; i < 6; i++) {
        cr_assert_eq(rz__free(p[i], &plain_free), RZCUDA_SUCCESS);
        cr_assert_eq(cuEmuCallCount("cuMemFree_v2"), (unsigned long long)(i - 2), "one leaves per free");
        cr_assert_eq(__redzone_quarantine.count, 3);
        cr_assert_eq(__redzone_quarantine.ring[__redzone_quarantine.head].ptr, p[i - 2], "the oldest left");
        cr_assert_eq(cuCtxSynchronize(), RZCUDA_SUCCESS);
    }
    rz_stats_t s;
    rz_stats_get(&s);
    cr_assert_eq(s.quarantine_bytes, 3 * 164);
    cr_assert_leq(s.peak_quarantine_bytes, 500);
    cr_assert_eq(s.violations, 0);
}

/* cuMemFreeAsync: the fill is queued in the program's stream behind its work (a kernel that waits for the
 * host), nothing waits, and a scan meanwhile judges nothing of the block (its bytes are not the fill yet);
 * once the stream is past the free a scan checks it clean, and a store into it is reported. */
Test(quarantine, a_stream_ordered_free_is_filled_in_stream_order_and_judged_once_filled, .timeout = 60) {
    setenv("METRALE_REDZONE", "64", 1);
    setenv("METRALE_REDZONE_SCAN", "exit", 1);
    const char *log = rzt_log_to_file();
    rzt_context(0);
    rzcu_stream s;
    cr_assert_eq(cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING), RZCUDA_SUCCESS);
    int *flag;
    cr_assert_eq(cuMemAllocHost_v2((void **)&flag, sizeof *flag), RZCUDA_SUCCESS);
    *flag = 0;
    rz_devptr_t p;
    rz_alloc_req_t req = {.kind = RZ_ALLOC_ASYNC, .stream = s, .interposed = 1};
    cr_assert_eq(rz__alloc(&p, 1000, &req), RZCUDA_SUCCESS);
    cr_assert_eq(cuStreamSynchronize(s), RZCUDA_SUCCESS);
    hold_stream(s, flag);
    cuEmuResetCallCounts();
    rz_free_req_t fr = {.async = 1, .stream = s};
    cr_assert_eq(rz__free(p, &fr), RZCUDA_SUCCESS);
    cr_assert_eq(cuEmuCallCount("cuMemFreeAsync"), 0, "held");
    cr_assert_eq(cuEmuCallCount("cuMemsetD8Async"), 1);
    cr_assert_eq(host_waits(), 0);
    cr_assert_eq(rz_scan(), 0);
    char *text = rzt_read_log(log);
    cr_assert(!strstr(text, "after free"), "judged before its fill landed: %s", text);
    free(text);
    __atomic_store_n(flag, 1, __ATOMIC_RELEASE);
    cr_assert_eq(cuStreamSynchronize(s), RZCUDA_SUCCESS);
    cr_assert_eq(rz_scan(), 0);
    uint8_t stale[4] = {9, 9, 9, 9};
    cr_assert_eq(cuEmuDeviceStore(p + 500, stale, sizeof stale), RZCUDA_SUCCESS);
    cr_assert_eq(rz_scan(), 0, "the scan's own count is of bands");
    text = rzt_read_log(log);
    cr_assert(strstr(text, "REDZONE VIOLATION alloc#0 user_bytes=1000 : bytes [500..=503] were written after free "
                           "(4 of 1064 freed bytes changed), first bad value 0x09\n"), "%s", text);
    cr_assert_eq(rzt_count(text, "after free"), 1, "%s", text);
    free(text);
    rz_stats_t st;
    rz_stats_get(&st);
    cr_assert_eq(st.violations, 1);
    cr_assert_eq(cuMemFreeHost(flag), RZCUDA_SUCCESS);
}

/* A context that ends takes its held blocks with it: checked while it ends, then forgotten without a driver
 * call (its memory went with it); the other context's block stays held. */
Test(quarantine, a_context_that_ends_drops_its_held_blocks_without_touching_them) {
    setenv("METRALE_REDZONE", "64", 1);
    rzcu_context primary = rzt_context(0), c;
    rz_devptr_t keep = alloc_plain(100);
    cr_assert_eq(cuCtxCreate_v4(&c, NULL, 0, 0), RZCUDA_SUCCESS);
    rz_devptr_t gone = alloc_plain(200);
    cr_assert_eq(rz__free(gone, &plain_free), RZCUDA_SUCCESS);
    cr_assert_eq(cuCtxSetCurrent(primary), RZCUDA_SUCCESS);
    cr_assert_eq(rz__free(keep, &plain_free), RZCUDA_SUCCESS);
    cr_assert_eq(__redzone_quarantine.count, 2);
    cuEmuResetCallCounts();
    /* As the interposed cuCtxDestroy does (hooks.c): the events around the driver's call. */
    rz__event_raise(RZ_EVENT_CONTEXT_ENDING, c);
    cr_assert_eq(cuCtxDestroy_v2(c), RZCUDA_SUCCESS);
    rz__event_raise(RZ_EVENT_CONTEXT_ENDED, c);
    cr_assert_eq(cuEmuCallCount("cuMemFree_v2"), 0, "nothing freed in a context that ended");
    cr_assert_eq(__redzone_quarantine.count, 1);
    cr_assert_eq(__redzone_quarantine.ring[__redzone_quarantine.head].ptr, keep);
    rz_stats_t s;
    rz_stats_get(&s);
    cr_assert_eq(s.quarantine_bytes, 164);
    cr_assert_eq(rz__quarantine_drain(), 1);
    cr_assert_eq(cuEmuCallCount("cuMemFree_v2"), 1, "the primary's block given back");
    cr_assert_eq(__redzone_quarantine.count, 0);
}
