/* Performance at scale (issue 20), where a count can be asserted exactly: library streams bounded by the
 * contexts used and released with them, driver calls per scan independent of how zones spread over
 * contexts, reports printed after the registry lock. Timings are bench/run's (bench/scale_bench.c,
 * bench/mem_bench.c, bench/report_bench.c), not asserted here. */
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <time.h>

#include "rz_test.h"

static const char *g_log;

static void setup(void) {
    setenv("METRALE_REDZONE", "64", 1);
    g_log = rzt_log_to_file();
    rzt_context(0);
}

TestSuite(scale, .init = setup);

/* 200 live contexts (more than the old 64-slot stream cache): one library stream per context, created at
 * its first band operation, none at later scans, and every one dropped when its context ends. */
Test(scale, streams_bounded_by_contexts_and_released_with_them, .timeout = 120) {
    enum { C = 200 };
    static rzcu_context ctx[C];
    rz_devptr_t p[C];
    rzcu_context home;
    cr_assert_eq(cuCtxGetCurrent(&home), RZCUDA_SUCCESS);
    cr_assert_eq(rz_scan(), 0); /* the home context's stream, if any, exists before counting */
    size_t base = rz__dev_stream_count();
    cuEmuResetCallCounts();
    for (int i = 0; i < C; i++) {
        cr_assert_eq(cuCtxCreate_v4(&ctx[i], NULL, 0, 0), RZCUDA_SUCCESS);
        cr_assert_eq(rz_mem_alloc(&p[i], 32), RZCUDA_SUCCESS);
        rzcu_context popped;
        cr_assert_eq(cuCtxPopCurrent_v2(&popped), RZCUDA_SUCCESS);
    }
    cr_assert_eq(rz_scan(), 0);
    cr_assert_eq(cuEmuCallCount("cuStreamCreate"), C, "one stream per context: %llu",
                 cuEmuCallCount("cuStreamCreate"));
    for (int round = 0; round < 3; round++) {
        cuEmuResetCallCounts();
        cr_assert_eq(rz_scan(), 0);
        cr_assert_eq(cuEmuCallCount("cuStreamCreate"), 0, "scan %d created %llu streams", round,
                     cuEmuCallCount("cuStreamCreate"));
    }
    cr_assert_eq(rz__dev_stream_count(), base + C);
    for (int i = 0; i < C; i++) {
        rz__bands_context_ending(ctx[i]);
        cr_assert_eq(cuCtxDestroy_v2(ctx[i]), RZCUDA_SUCCESS);
        rz__bands_context_ended(ctx[i]);
    }
    cr_assert_eq(rz__dev_stream_count(), base, "every context's stream is dropped with it");
    cr_assert_eq(cuCtxSetCurrent(home), RZCUDA_SUCCESS);
}

/* Zones spread over contexts in blocks (the case that was quadratic): a scan's driver calls grow with the
 * contexts, not the zones, and a violation in each context is found once. */
static unsigned long long scan_calls(void) {
    static const char *const names[] = {"cuMemcpyBatchAsync_v2", "cuMemcpyDtoHAsync_v2", "cuStreamSynchronize",
                                        "cuCtxPushCurrent_v2", "cuCtxPopCurrent_v2", "cuCtxGetCurrent"};
    unsigned long long n = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        n += cuEmuCallCount(names[i]);
    return n;
}

Test(scale, scan_calls_per_context_independent_of_zone_count, .timeout = 120) {
    enum { C = 3 };
    rzcu_context ctx[C];
    unsigned long long calls[2];
    int per_ctx[2] = {100, 2000};
    for (int i = 0; i < C; i++) {
        cr_assert_eq(cuCtxCreate_v4(&ctx[i], NULL, 0, 0), RZCUDA_SUCCESS);
        rzcu_context popped;
        cr_assert_eq(cuCtxPopCurrent_v2(&popped), RZCUDA_SUCCESS);
    }
    int have = 0;
    for (int round = 0; round < 2; round++) {
        rz_devptr_t last[C];
        for (int i = 0; i < C; i++) {
            cr_assert_eq(cuCtxPushCurrent_v2(ctx[i]), RZCUDA_SUCCESS);
            for (int k = have; k < per_ctx[round]; k++)
                cr_assert_eq(rz_mem_alloc(&last[i], 32), RZCUDA_SUCCESS);
            rzcu_context popped;
            cr_assert_eq(cuCtxPopCurrent_v2(&popped), RZCUDA_SUCCESS);
        }
        have = per_ctx[round];
        cr_assert_eq(rz_scan(), 0); /* bands installed */
        for (int i = 0; i < C; i++) {
            cr_assert_eq(cuCtxPushCurrent_v2(ctx[i]), RZCUDA_SUCCESS);
            uint8_t bad = 0x42;
            cr_assert_eq(cuMemcpyHtoD_v2(last[i] + 32 + (unsigned)i, &bad, 1), RZCUDA_SUCCESS);
            rzcu_context popped;
            cr_assert_eq(cuCtxPopCurrent_v2(&popped), RZCUDA_SUCCESS);
        }
        cr_assert_eq(rz_scan(), C, "one violation per context");
        cuEmuResetCallCounts();
        cr_assert_eq(rz_scan(), 0, "re-filled");
        calls[round] = scan_calls();
    }
    cr_assert_eq(calls[0], calls[1], "%d zones: %llu calls, %d zones: %llu calls", C * per_ctx[0], calls[0],
                 C * per_ctx[1], calls[1]);
    /* Per context: look up the current one, push, one batch, one sync, pop. */
    cr_assert_leq(calls[1], 5 * C, "%llu calls for %d contexts", calls[1], C);
}

/* Two synchronisations after the same device work (issue 20.4, merged scans): the second, finding a scan of
 * the context in progress that began after the work had completed, waits for it and does not scan again.
 * The first scan is held inside its band read (a signal the emulated driver raises there) until the second
 * waits for the registry lock (its lock word says a thread waits). */
static sem_t g_scanning, g_go;

static void hold_scan(int sig) {
    (void)sig;
    sem_post(&g_scanning);
    while (sem_wait(&g_go) != 0)
        ;
}

static void *sync_after_work(void *ctx) {
    cr_assert_eq(cuCtxSetCurrent(ctx), RZCUDA_SUCCESS);
    const rz_sync_t what = {.kind = RZ_SYNC_CTX}; /* what the cuCtxSynchronize hook passes */
    uint64_t ticket = rz__sync_ticket();
    cr_assert_eq(cuCtxSynchronize(), RZCUDA_SUCCESS);
    rz__scan_after_sync(&what, ticket);
    return NULL;
}

Test(scale, concurrent_syncs_after_the_same_work_scan_once) {
    setenv("METRALE_REDZONE_SCAN", "sync", 1);
    rzcu_context ctx;
    cr_assert_eq(cuCtxGetCurrent(&ctx), RZCUDA_SUCCESS);
    rz_devptr_t p[10];
    for (int i = 0; i < 10; i++)
        cr_assert_eq(rz_mem_alloc(&p[i], 64), RZCUDA_SUCCESS);
    rz__bands_install();
    rz__note_device_work(NULL, 0); /* what the hooks note for a memset on the legacy stream */
    sem_init(&g_scanning, 0, 0);
    sem_init(&g_go, 0, 0);
    signal(SIGUSR1, hold_scan);
    uint64_t scans = RZ_STATE.counters[RZ_C_scans];
    cuEmuResetCallCounts();
    cr_assert_eq(cuEmuInjectSignal("cuMemcpyBatchAsync_v2", 1, SIGUSR1), 0);
    pthread_t first, second;
    pthread_create(&first, NULL, sync_after_work, ctx);
    while (sem_wait(&g_scanning) != 0)
        ;
    pthread_create(&second, NULL, sync_after_work, ctx);
    while (atomic_load(&RZ_STATE.lock) != 2) /* the second sync waits for the registry lock */
        sched_yield();
    sem_post(&g_go);
    pthread_join(first, NULL);
    pthread_join(second, NULL);
    cr_assert_eq(RZ_STATE.counters[RZ_C_scans] - scans, 1, "one scan for the two syncs");
    cr_assert_eq(cuEmuCallCount("cuMemcpyBatchAsync_v2"), 1);
}

/* Bounded batches (issue 20.8): a scan's scratch stays within one batch's worth however many zones there are
 * (it was sized for the whole registry: some 150 bytes a zone, kept after the first scan), and a registry
 * larger than a batch costs 3 driver calls per batch: one at 100k zones, three at 300k (114,688 bands of 64
 * bytes a batch). */
Test(scale, scan_scratch_bounded_three_calls_per_batch, .timeout = 300) {
    enum { FIRST = 100000, ALL = 300000 };
    rz_devptr_t p;
    for (int i = 0; i < FIRST; i++)
        cr_assert_eq(rz__alloc_interposed(&p, 64), RZCUDA_SUCCESS); /* lazy: installed by the first scan */
    cr_assert_eq(rz_scan(), 0);
    cuEmuResetCallCounts();
    cr_assert_eq(rz_scan(), 0);
    cr_assert_eq(scan_calls(), 3, "100k zones: one batch, %llu calls", scan_calls());
    for (int i = FIRST; i < ALL; i++)
        cr_assert_eq(rz__alloc_interposed(&p, 64), RZCUDA_SUCCESS);
    cr_assert_eq(rz_scan(), 0);
    cuEmuResetCallCounts();
    cr_assert_eq(rz_scan(), 0);
    cr_assert_eq(scan_calls(), 9, "300k zones: three batches, %llu calls", scan_calls());
    rz__registry_lock();
    uint64_t scratch = rz__band_scratch_bytes();
    rz__registry_unlock();
    cr_assert_leq(scratch, (uint64_t)18 << 20, "scratch of %llu bytes for %d zones", (unsigned long long)scratch, ALL);
    cr_assert_geq(scratch, (uint64_t)7 << 20, "the staging and the entries of a batch: %llu", (unsigned long long)scratch);
}

/* A guard-page allocation that cannot fit under the 1 GiB cap makes no virtual-memory driver call before
 * the cap says so (issue 20.9): it gets an ordinary band. */
Test(scale, guard_cap_checked_before_any_driver_call) {
    setenv("METRALE_REDZONE_GUARD", "idx:0", 1);
    __atomic_store_n(&RZ_STATE.guard_bytes, RZ_GUARD_CAP - 100, __ATOMIC_RELAXED);
    cuEmuResetCallCounts();
    rz_devptr_t p;
    cr_assert_eq(rz_mem_alloc(&p, 1000), RZCUDA_SUCCESS);
    cr_assert_eq(cuEmuCallCount("cuCtxGetDevice") + cuEmuCallCount("cuMemGetAllocationGranularity") +
                     cuEmuCallCount("cuMemAddressReserve") + cuEmuCallCount("cuMemCreate"),
                 0, "no virtual-memory call for an allocation over the cap");
    cr_assert_eq(cuEmuCallCount("cuMemAlloc_v2"), 1, "an ordinary allocation instead");
    cr_assert_eq(rz_mem_free(p), RZCUDA_SUCCESS);
    __atomic_store_n(&RZ_STATE.guard_bytes, 0, __ATOMIC_RELAXED);
}

/* Reports are printed after the scan releases the registry lock (issue 20.6). The log is a pipe nobody reads
 * yet: the scan fills it and blocks writing its reports. The registry must be free by then: the scan's
 * allocation stacks are symbolized and its lines written after the lock, so a program's allocations and
 * frees never wait for them. (Printed under the lock, as before, the blocked writer held it.) Then every
 * report is complete, in order: its line, its stack, the next one. */
static void *scan_thread(void *arg) {
    (void)arg;
    return (void *)(intptr_t)rz_scan();
}

Test(scale, reports_are_printed_after_the_registry_lock, .timeout = 60) {
    enum { N = 1500 };
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    char path[32];
    snprintf(path, sizeof path, "/dev/fd/%d", fds[1]);
    setenv("METRALE_REDZONE_LOG", path, 1);
    setenv("METRALE_REDZONE_STACKS", "4", 1);
    for (int i = 0; i < N; i++) {
        rz_devptr_t p;
        cr_assert_eq(rz_mem_alloc(&p, 64), RZCUDA_SUCCESS);
        cr_assert_eq(cuMemsetD8_v2(p + 64, 0x5a, 1), RZCUDA_SUCCESS); /* one byte into the band */
    }
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, scan_thread, NULL), 0);
    /* Wait (bounded) until the pipe is all but full: the scan has written a pipe's worth of reports and
     * cannot finish writing them. */
    int cap = fcntl(fds[0], F_GETPIPE_SZ), queued = 0;
    for (int waited = 0; waited < 20000 && queued < cap - 4096; waited++) {
        struct timespec ms = {.tv_nsec = 1000000};
        nanosleep(&ms, NULL);
        cr_assert_eq(ioctl(fds[0], FIONREAD, &queued), 0);
    }
    cr_assert_geq(queued, cap - 4096, "the reports fill the pipe (%d of %d bytes)", queued, cap);
    cr_assert_eq(rz__registry_lock_timed(3000), RZ_OK, "the registry is free while the reports are written");
    rz__registry_unlock();
    size_t size = 4 << 20, len = 0;
    char *out = malloc(size);
    const char *summary = "redzone scan: 1500 zones checked, 1500 violated\n";
    while (len < size - 1) {
        ssize_t got = read(fds[0], out + len, size - 1 - len);
        cr_assert_gt(got, 0);
        len += (size_t)got;
        out[len] = '\0';
        if (strstr(out, summary))
            break;
    }
    void *rc;
    cr_assert_eq(pthread_join(t, &rc), 0);
    cr_assert_eq((intptr_t)rc, N);
    /* A log file without %p may be shared: each line starts with this process's `redzone[<pid>]: `. */
    char prefix[40];
    int np = snprintf(prefix, sizeof prefix, "redzone[%d]: ", (int)getpid());
    cr_assert_eq(strncmp(out, prefix, (size_t)np), 0, "lines carry the pid: %.200s", out);
    size_t kept = 0;
    for (size_t i = 0; i < len;) {
        if ((i == 0 || out[i - 1] == '\n') && strncmp(out + i, prefix, (size_t)np) == 0)
            i += (size_t)np;
        else
            out[kept++] = out[i++];
    }
    out[kept] = '\0';
    cr_assert_eq(rzt_count(out, "REDZONE VIOLATION alloc#"), N, "%.2000s", out);
    cr_assert_eq(rzt_count(out, " was allocated at:\n    #0 0x"), N, "each report with its stack: %.2000s", out);
    /* In order: each report's stack comes right after its line, before the next report. */
    for (const char *v = strstr(out, "REDZONE VIOLATION alloc#"); v; v = strstr(v + 1, "REDZONE VIOLATION alloc#")) {
        unsigned long long index = strtoull(v + strlen("REDZONE VIOLATION alloc#"), NULL, 10);
        char at[64];
        snprintf(at, sizeof at, "\n  alloc#%llu was allocated at:\n", index);
        const char *next = strstr(v + 1, "REDZONE VIOLATION alloc#");
        const char *stack = strstr(v, at);
        cr_assert(stack && (next == NULL || stack < next), "alloc#%llu's stack follows its report", index);
    }
    cr_assert(strstr(out, summary) > strstr(out, " was allocated at:"), "the summary comes last");
    free(out);
}
