/* The band engine on the emulated driver: scan report fields, re-fill, poison windows, the seed's
 * poison/scan flaw fixed, the program's bytes untouched, several contexts, and driver failures. */
#include <pthread.h>

#include "rz_test.h"

static const char *g_log;

static void setup(void) {
    setenv("METRALE_REDZONE", "64", 1);
    g_log = rzt_log_to_file();
    rzt_context(0);
}

static void poke(rz_devptr_t p, uint8_t value) { cr_assert_eq(cuMemcpyHtoD_v2(p, &value, 1), RZCUDA_SUCCESS); }

static void expect_line(const char *line) {
    char *text = rzt_read_log(g_log);
    cr_assert_eq(rzt_count(text, line), 1, "want once: %s\nlog:\n%s", line, text);
    free(text);
}

TestSuite(band, .init = setup);

Test(band, write_at_pad_offset_zero) {
    rz_devptr_t p;
    cr_assert_eq(rz_mem_alloc(&p, 100), RZCUDA_SUCCESS);
    poke(p + 100, 0x41);
    cr_assert_eq(rz_scan(), 1);
    expect_line("REDZONE VIOLATION alloc#0 user_bytes=100 pad=64 : bytes [0..=0] past the end were written "
                "(1 of 64 pad bytes changed), first bad value 0x41\n");
    expect_line("redzone scan: 1 zones checked, 1 violated\n");
    const rz_violation_t *v = &RZ_STATE.last_violations[0];
    cr_assert_eq(RZ_STATE.last_violation_count, 1);
    cr_assert_eq(v->index, 0);
    cr_assert_eq(v->ptr, p);
    cr_assert_eq(v->first, 0);
    cr_assert_eq(v->last, 0);
    cr_assert_eq(v->changed, 1);
    cr_assert_eq(v->first_bad, 0x41);
    cr_assert_eq(v->expected, 0xEE);
}

Test(band, write_at_last_pad_byte) {
    rz_devptr_t a, b;
    cr_assert_eq(rz_mem_alloc(&a, 256), RZCUDA_SUCCESS);
    cr_assert_eq(rz_mem_alloc(&b, 256), RZCUDA_SUCCESS);
    poke(b + 256 + 63, 0x00);
    cr_assert_eq(rz_scan(), 1);
    expect_line("REDZONE VIOLATION alloc#1 user_bytes=256 pad=64 : bytes [63..=63] past the end were written "
                "(1 of 64 pad bytes changed), first bad value 0x00\n");
    expect_line("redzone scan: 2 zones checked, 1 violated\n");
}

Test(band, non_contiguous_writes) {
    rz_devptr_t p;
    cr_assert_eq(rz_mem_alloc(&p, 32), RZCUDA_SUCCESS);
    poke(p + 32 + 3, 0x13);
    poke(p + 32 + 10, 0x99);
    poke(p + 32 + 11, 0xEE); /* the fill byte itself: invisible */
    cr_assert_eq(rz_scan(), 1);
    expect_line("REDZONE VIOLATION alloc#0 user_bytes=32 pad=64 : bytes [3..=10] past the end were written "
                "(2 of 64 pad bytes changed), first bad value 0x13\n");
}

Test(band, writing_the_fill_byte_is_not_a_violation) {
    rz_devptr_t p;
    cr_assert_eq(rz_mem_alloc(&p, 32), RZCUDA_SUCCESS);
    uint8_t same[64];
    memset(same, 0xEE, sizeof same);
    cr_assert_eq(cuMemcpyHtoD_v2(p + 32, same, sizeof same), RZCUDA_SUCCESS);
    cr_assert_eq(rz_scan(), 0);
    expect_line("redzone scan: 1 zones checked, 0 violated\n");
}

Test(band, refill_then_clean_rescan_then_new_write_only) {
    rz_devptr_t p;
    cr_assert_eq(rz_mem_alloc(&p, 48), RZCUDA_SUCCESS);
    poke(p + 48 + 5, 1);
    cr_assert_eq(rz_scan(), 1);
    uint8_t band[64];
    cr_assert_eq(cuMemcpyDtoH_v2(band, p + 48, 64), RZCUDA_SUCCESS);
    for (int i = 0; i < 64; i++)
        cr_assert_eq(band[i], 0xEE, "re-filled");
    cr_assert_eq(rz_scan(), 0, "a later scan reports only new writes");
    poke(p + 48 + 7, 2);
    cr_assert_eq(rz_scan(), 1);
    expect_line("bytes [7..=7] past the end were written (1 of 64 pad bytes changed), first bad value 0x02\n");
    rz_stats_t s;
    rz_stats_get(&s);
    cr_assert_eq(s.scans, 3);
    cr_assert_eq(s.violations, 2);
    cr_assert_eq(s.page_reset_calls, 2);
    cr_assert_eq(s.page_reset_bytes, 128);
}

static void read_band(rz_devptr_t p, size_t user, uint8_t *out) {
    cr_assert_eq(cuMemcpyDtoH_v2(out, p + user, 64), RZCUDA_SUCCESS);
}

static void assert_band(rz_devptr_t p, size_t user, uint8_t want) {
    uint8_t band[64];
    read_band(p, user, band);
    for (int i = 0; i < 64; i++)
        cr_assert_eq(band[i], want, "band byte %d is 0x%02x, want 0x%02x", i, band[i], want);
}

Test(band, poison_window_then_clean_scan_then_exactly_one_violation) {
    rz_devptr_t z[4];
    for (int i = 0; i < 4; i++)
        cr_assert_eq(rz_mem_alloc(&z[i], 128), RZCUDA_SUCCESS);
    cr_assert_eq(rz_poison(1, 3), RZ_OK);
    assert_band(z[0], 128, 0x00);
    assert_band(z[1], 128, 0xEE);
    assert_band(z[2], 128, 0xEE);
    assert_band(z[3], 128, 0x00);
    /* The seed compared with the global fill here and flagged zones 0 and 3. */
    cr_assert_eq(rz_scan(), 0);
    expect_line("redzone scan: 4 zones checked, 0 violated\n");
    poke(z[3] + 128 + 2, 0xEE); /* in a 0x00 band, the fill byte is a change */
    cr_assert_eq(rz_scan(), 1);
    expect_line("REDZONE VIOLATION alloc#3 user_bytes=128 pad=64 : bytes [2..=2] past the end were written "
                "(1 of 64 pad bytes changed), first bad value 0xee\n");
    assert_band(z[3], 128, 0x00); /* re-filled with its own byte, not the global fill */
}

Test(band, zones_allocated_during_a_window_follow_it_until_unpoison) {
    rz_devptr_t a, b, c;
    cr_assert_eq(rz_mem_alloc(&a, 64), RZCUDA_SUCCESS);
    cr_assert_eq(rz_poison(1, 2), RZ_OK);
    cr_assert_eq(rz_mem_alloc(&b, 64), RZCUDA_SUCCESS); /* index 1: inside */
    cr_assert_eq(rz_mem_alloc(&c, 64), RZCUDA_SUCCESS); /* index 2: outside */
    assert_band(a, 64, 0x00);
    assert_band(b, 64, 0xEE);
    assert_band(c, 64, 0x00);
    cr_assert_eq(rz_scan(), 0);
    cr_assert_eq(rz_unpoison(), RZ_OK);
    assert_band(a, 64, 0xEE);
    assert_band(c, 64, 0xEE);
    cr_assert_eq(rz_scan(), 0);
}

Test(band, poison_rejects_an_inverted_window) {
    cr_assert_eq(rz_poison(5, 4), RZ_EINVAL);
    cr_assert_eq(rz_poison(4, 4), RZ_OK, "an empty window is valid: every band 0x00");
}

Test(band, program_bytes_never_touched) {
    enum { N = 8, BYTES = 1000 };
    rz_devptr_t z[N];
    uint8_t data[BYTES];
    for (int i = 0; i < N; i++) {
        cr_assert_eq(rz_mem_alloc(&z[i], BYTES), RZCUDA_SUCCESS);
        for (int j = 0; j < BYTES; j++)
            data[j] = (uint8_t)(i * 31 + j * 7);
        cr_assert_eq(cuMemcpyHtoD_v2(z[i], data, BYTES), RZCUDA_SUCCESS);
    }
    uint64_t sums[N];
    for (int i = 0; i < N; i++)
        sums[i] = rzt_device_checksum(z[i], BYTES);
    poke(z[2] + BYTES, 1);
    cr_assert_eq(rz_scan(), 1);
    cr_assert_eq(rz_poison(3, 6), RZ_OK);
    poke(z[4] + BYTES + 63, 2);
    cr_assert_eq(rz_scan(), 1);
    cr_assert_eq(rz_unpoison(), RZ_OK);
    cr_assert_eq(rz_scan(), 0);
    for (int i = 0; i < N; i++)
        cr_assert_eq(rzt_device_checksum(z[i], BYTES), sums[i], "zone %d's own bytes changed", i);
}

Test(band, batches_beyond_one_staging_round) {
    enum { N = 20000 };
    rz_devptr_t *z = malloc(N * sizeof *z);
    for (int i = 0; i < N; i++)
        cr_assert_eq(rz_mem_alloc(&z[i], 16), RZCUDA_SUCCESS);
    poke(z[N - 1] + 16 + 1, 7);
    poke(z[3] + 16 + 0, 8);
    cr_assert_eq(rz_scan(), 2);
    expect_line("redzone scan: 20000 zones checked, 2 violated\n");
    expect_line("REDZONE VIOLATION alloc#19999 user_bytes=16 pad=64 : bytes [1..=1]");
    cr_assert_eq(rz_poison(100, 200), RZ_OK);
    cr_assert_eq(rz_scan(), 0);
    free(z);
}

/* A sticky error (a kernel fault; cuda.h: every later CUDA call in the process fails): no per-band retry, one
 * line for the process, the registry intact, and no later scan makes a driver call or says more. (This test
 * expected the next scan to work: the lenient model, where the error was one call's.) */
Test(band, sticky_band_read_error_is_said_once_and_ends_scans) {
    rz_devptr_t p, q;
    cr_assert_eq(rz_mem_alloc(&p, 64), RZCUDA_SUCCESS);
    cr_assert_eq(rz_mem_alloc(&q, 64), RZCUDA_SUCCESS);
    poke(p + 64, 3);
    cuEmuResetCallCounts();
    cuEmuInjectFailure("cuMemcpyBatchAsync_v2", 1, RZCUDA_ERROR_LAUNCH_FAILED);
    cr_assert_eq(rz_scan(), RZ_EDRIVER);
    expect_line("redzone: warning: CUDA_ERROR_LAUNCH_FAILED ends all CUDA work in this process: 2 zones could not be "
                "checked\n");
    cr_assert_eq(cuEmuCallCount("cuMemcpyDtoHAsync_v2"), 0, "no per-band retry");
    cr_assert_eq(rz__registry_count(), 2, "registry intact");
    unsigned long long calls = cuEmuCallCountAll();
    cr_assert_eq(rz_scan(), RZ_EDRIVER);
    cr_assert_eq(cuEmuCallCountAll(), calls, "no driver call after the sticky error");
    char *text = rzt_read_log(g_log);
    cr_assert_eq(rzt_count(text, "CUDA_ERROR_LAUNCH_FAILED"), 1, "said once:\n%s", text);
    free(text);
}

/* One band goes by the plain async copy, not a one-entry batch; its failure is reported the same way. */
Test(band, failed_single_band_read_reports_an_error_and_the_next_scan_works) {
    rz_devptr_t p;
    cr_assert_eq(rz_mem_alloc(&p, 64), RZCUDA_SUCCESS);
    poke(p + 64, 3);
    cuEmuResetCallCounts();
    cuEmuInjectFailure("cuMemcpyDtoHAsync_v2", 1, RZCUDA_ERROR_UNKNOWN);
    cr_assert_eq(rz_scan(), RZ_EDRIVER);
    expect_line("redzone: warning: scan: reading 1 bands failed with CUDA_ERROR_UNKNOWN\n");
    cr_assert_eq(cuEmuCallCount("cuMemcpyBatchAsync_v2"), 0);
    cr_assert_eq(rz__registry_count(), 1, "registry intact");
    cr_assert_eq(rz_scan(), 1, "the violation is still found by the next scan");
}

/* A batch the driver refuses for any other reason (an undocumented limit, say) goes band by band, for reads
 * and writes alike: one refused batch must not fail every scan. */
Test(band, refused_batch_falls_back_to_one_copy_per_band) {
    rz_devptr_t p, q;
    cr_assert_eq(rz_mem_alloc(&p, 64), RZCUDA_SUCCESS);
    cr_assert_eq(rz_mem_alloc(&q, 64), RZCUDA_SUCCESS);
    poke(q + 64 + 9, 3);
    static const rzcu_result errors[] = {RZCUDA_ERROR_INVALID_VALUE, RZCUDA_ERROR_OUT_OF_MEMORY, RZCUDA_ERROR_UNKNOWN,
                                         RZCUDA_ERROR_NOT_SUPPORTED};
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++) {
        cuEmuResetCallCounts();
        cuEmuInjectFailure("cuMemcpyBatchAsync_v2", 1, errors[i]);
        cr_assert_eq(rz_scan(), 1, "error %u", errors[i]);
        cr_assert_eq(cuEmuCallCount("cuMemcpyBatchAsync_v2"), 1, "the refused read");
        cr_assert_eq(cuEmuCallCount("cuMemcpyDtoHAsync_v2"), 2, "then each band by itself");
        poke(q + 64 + 9, 3);
    }
    cuEmuInjectFailure("cuMemcpyBatchAsync_v2", 1, RZCUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(rz_poison(5, 6), RZ_OK, "a refused batched fill goes band by band too");
    uint8_t band[64];
    cr_assert_eq(cuMemcpyDtoH_v2(band, p + 64, 64), RZCUDA_SUCCESS);
    cr_assert_eq(band[0], 0x00);
}

Test(band, scan_uses_batched_reads) {
    enum { N = 1000 };
    rz_devptr_t p;
    for (int i = 0; i < N; i++)
        cr_assert_eq(rz_mem_alloc(&p, 32), RZCUDA_SUCCESS);
    cuEmuResetCallCounts();
    cr_assert_eq(rz_scan(), 0);
    cr_assert_eq(cuEmuCallCount("cuMemcpyBatchAsync_v2"), 1);
    cr_assert_eq(cuEmuCallCount("cuMemcpyDtoH_v2") + cuEmuCallCount("cuMemcpyDtoHAsync_v2"), 0);
}

/* Tests with their own environment (no suite fixture). */
Test(band_env, custom_fill_byte) {
    setenv("METRALE_REDZONE", "16", 1);
    setenv("METRALE_REDZONE_FILL", "7", 1);
    g_log = rzt_log_to_file();
    rzt_context(0);
    rz_devptr_t p;
    cr_assert_eq(rz_mem_alloc(&p, 16), RZCUDA_SUCCESS);
    uint8_t band[16];
    cr_assert_eq(cuMemcpyDtoH_v2(band, p + 16, 16), RZCUDA_SUCCESS);
    for (int i = 0; i < 16; i++)
        cr_assert_eq(band[i], 7);
    poke(p + 16 + 4, 0xEE);
    cr_assert_eq(rz_scan(), 1);
    expect_line("REDZONE VIOLATION alloc#0 user_bytes=16 pad=16 : bytes [4..=4] past the end were written "
                "(1 of 16 pad bytes changed), first bad value 0xee\n");
}

struct ctx_arg {
    rzcu_context ctx;
    rz_devptr_t p;
};

static void *alloc_in(void *arg) {
    struct ctx_arg *a = arg;
    if (cuCtxSetCurrent(a->ctx) != RZCUDA_SUCCESS || rz_mem_alloc(&a->p, 200) != RZCUDA_SUCCESS)
        return (void *)1;
    return NULL;
}

Test(band_env, zones_remember_their_context_and_scans_use_it) {
    setenv("METRALE_REDZONE", "32", 1);
    setenv("CUDA_EMU_DEVICES", "2", 1);
    g_log = rzt_log_to_file();
    rzcu_context c0 = rzt_context(0);
    rzcu_context c1 = NULL;
    cr_assert_eq(cuDevicePrimaryCtxRetain(&c1, 1), RZCUDA_SUCCESS);
    cr_assert_neq(c0, c1);
    struct ctx_arg a0 = {.ctx = c0}, a1 = {.ctx = c1};
    pthread_t t;
    pthread_create(&t, NULL, alloc_in, &a1);
    void *ret;
    pthread_join(t, &ret);
    cr_assert_null(ret);
    cr_assert_null(alloc_in(&a0));
    rz__registry_lock();
    rz_zone_node_t *z = rz__registry_first();
    cr_assert_eq(z->ctx, (void *)c1, "zone 0 was allocated with device 1's context current");
    cr_assert_eq(rz__registry_next(z)->ctx, (void *)c0);
    rz__registry_unlock();
    poke(a0.p + 200 + 1, 1);
    poke(a1.p + 200 + 2, 2);
    /* Scan from a thread with no current context at all. */
    cr_assert_eq(cuCtxSetCurrent(NULL), RZCUDA_SUCCESS);
    cr_assert_eq(rz_scan(), 2);
    expect_line("redzone scan: 2 zones checked, 2 violated\n");
    rzcu_context cur = (rzcu_context)1;
    cr_assert_eq(cuCtxGetCurrent(&cur), RZCUDA_SUCCESS);
    cr_assert_null(cur, "the caller's context stack is restored");
}

/* A poison whose band writes fail in one context: the other context's zones, already written, must not be
 * reported by the next scan (they were: 64 of 64 bytes changed), and no window stays behind. */
Test(band_env, poison_failing_in_one_context_leaves_no_false_violations) {
    setenv("METRALE_REDZONE", "64", 1);
    setenv("CUDA_EMU_DEVICES", "2", 1);
    g_log = rzt_log_to_file();
    rzcu_context c0 = rzt_context(0), c1 = NULL;
    cr_assert_eq(cuDevicePrimaryCtxRetain(&c1, 1), RZCUDA_SUCCESS);
    rz_devptr_t a, b;
    cr_assert_eq(rz_mem_alloc(&a, 100), RZCUDA_SUCCESS); /* #0 in c0 */
    cr_assert_eq(cuCtxSetCurrent(c1), RZCUDA_SUCCESS);
    cr_assert_eq(rz_mem_alloc(&b, 100), RZCUDA_SUCCESS); /* #1 in c1 */
    cr_assert_eq(cuCtxSetCurrent(c0), RZCUDA_SUCCESS);
    /* Window [5, 6): both bands change to 0x00; one band per context, so one plain async copy each, c0 first. */
    cuEmuInjectFailure("cuMemcpyHtoDAsync_v2", 2, RZCUDA_ERROR_UNKNOWN);
    cr_assert_eq(rz_poison(5, 6), RZ_EDRIVER);
    expect_line("redzone: warning: poison: filling 1 bands failed with CUDA_ERROR_UNKNOWN\n");
    cr_assert_eq(RZ_STATE.poison_active, 0, "the failed window is not left set");
    uint8_t band[64];
    cr_assert_eq(cuMemcpyDtoH_v2(band, a + 100, 64), RZCUDA_SUCCESS);
    cr_assert_eq(band[0], 0xEE, "the band written in c0 was put back");
    cr_assert_eq(rz_scan(), 0, "no false violations");
    expect_line("redzone scan: 2 zones checked, 0 violated\n");
    cr_assert_eq(rz_poison(5, 6), RZ_OK, "the same window works once the driver does");
    cr_assert_eq(cuMemcpyDtoH_v2(band, b + 100, 64), RZCUDA_SUCCESS);
    cr_assert_eq(band[63], 0x00);
    cr_assert_eq(rz_scan(), 0);
    poke(b + 100, 0x42);
    cr_assert_eq(rz_scan(), 1, "a write into a poisoned band is still found");
}

/* Batched and per-band (fallback) methods: identical reports, and the batched one in O(1) driver calls. */
static void overrun_pattern(rz_devptr_t *z, int n) {
    for (int i = 0; i < n; i += 7)
        poke(z[i] + 24 + (i % 64), (uint8_t)(i & 0xff));
}

static char *scan_text(void) {
    cr_assert_eq(truncate(g_log, 0), 0); /* the library appends to its open log */
    cr_assert_geq(rz_scan(), 0);
    return rzt_read_log(g_log);
}

Test(band, batched_and_per_band_scans_report_the_same) {
    enum { N = 500 };
    rz_devptr_t z[N];
    for (int i = 0; i < N; i++)
        cr_assert_eq(rz_mem_alloc(&z[i], 24), RZCUDA_SUCCESS);
    overrun_pattern(z, N);
    rz__dev_set_per_band(1);
    char *per_band = scan_text();
    overrun_pattern(z, N);
    rz__dev_set_per_band(0);
    char *batched = scan_text();
    cr_assert(strstr(batched, "redzone scan: 500 zones checked, 71 violated\n"), "%s", batched); /* i = 238 writes 0xEE itself */
    cr_assert_str_eq(per_band, batched);
    /* Poison and unpoison leave the same bands either way. */
    rz__dev_set_per_band(1);
    cr_assert_eq(rz_poison(100, 200), RZ_OK);
    rz__dev_set_per_band(0);
    cr_assert_eq(rz_scan(), 0, "per-band fills match what the batched scan expects");
    cr_assert_eq(rz_unpoison(), RZ_OK);
    rz__dev_set_per_band(1);
    cr_assert_eq(rz_scan(), 0, "batched fills match what the per-band scan expects");
    free(per_band);
    free(batched);
}

Test(band, scan_and_poison_take_a_constant_number_of_driver_calls, .timeout = 120) {
    enum { N = 20000 };
    rz_devptr_t p;
    for (int i = 0; i < N; i++)
        cr_assert_eq(rz_mem_alloc(&p, 32), RZCUDA_SUCCESS);
    cuEmuResetCallCounts();
    cr_assert_eq(rz_scan(), 0);
    /* Once per process: pin the staging, with the thread's capture mode relaxed around it (two exchanges). The
     * check kernel is off by default: no module is tried. */
    cr_assert_leq(cuEmuCallCountAll(), 6, "a first scan of %d zones took %llu driver calls", N, cuEmuCallCountAll());
    cr_assert_eq(cuEmuCallCount("cuMemHostRegister_v2"), 1, "the first scan pins its staging");
    cr_assert_eq(cuEmuCallCount("cuThreadExchangeStreamCaptureMode"), 2, "relaxed, then the mode back");
    cr_assert_eq(cuEmuCallCount("cuModuleLoadData"), 0);
    for (int round = 0; round < 3; round++) {
        cuEmuResetCallCounts();
        cr_assert_eq(rz_scan(), 0);
        cr_assert_leq(cuEmuCallCountAll(), 3, "a scan of %d zones took %llu driver calls", N, cuEmuCallCountAll());
        cr_assert_eq(cuEmuCallCount("cuMemHostRegister_v2"), 0, "staging stays pinned");
        cr_assert_eq(cuEmuCallCount("cuThreadExchangeStreamCaptureMode"), 0, "no mode exchange per scan");
        cr_assert_eq(cuEmuCallCount("cuModuleLoadData"), 0, "the kernel is not tried again in this context");
    }
    cuEmuResetCallCounts();
    cr_assert_eq(rz_poison(0, N / 2), RZ_OK);
    cr_assert_leq(cuEmuCallCountAll(), 4, "a poison of %d zones took %llu driver calls", N, cuEmuCallCountAll());
    cr_assert_eq(cuEmuCallCount("cuMemsetD8Async"), 0);
    cr_assert_eq(rz_scan(), 0);
}

/* No current context (as on the agent thread): the staging stays plain memory and scans still work. */
static void *scan_without_context(void *arg) {
    (void)arg;
    return (void *)(intptr_t)rz_scan();
}

Test(band, scan_works_with_unpinned_staging_on_a_thread_without_context) {
    rz_devptr_t p;
    cr_assert_eq(rz_mem_alloc(&p, 100), RZCUDA_SUCCESS);
    cr_assert_eq(cuMemsetD8_v2(p + 100, 0x5a, 1), RZCUDA_SUCCESS);
    cuEmuResetCallCounts();
    pthread_t t;
    void *rc;
    cr_assert_eq(pthread_create(&t, NULL, scan_without_context, NULL), 0);
    cr_assert_eq(pthread_join(t, &rc), 0);
    cr_assert_eq((intptr_t)rc, 1, "the violation is found through plain staging");
    cr_assert_eq(cuEmuCallCount("cuMemHostRegister_v2"), 1, "pinning was tried");
}

/*
 * A context that ends where redzone cannot see it (this test calls the emulated driver directly: no hooks),
 * and a larger buffer y, made by the program in another context, then has x's old address range in its
 * middle (issue 18 item 1). A band is written only for a zone whose block the driver still shows at the
 * zone's address: x is forgotten, y's bytes stay the program's, nothing is reported and no scan fails.
 */
#define UNSEEN_W ((size_t)2 << 20)
#define UNSEEN_X ((size_t)3 << 20)
#define UNSEEN_Y ((size_t)8 << 20)

enum unseen_how { UNSEEN_PENDING, UNSEEN_PENDING_KNOWN, UNSEEN_INSTALLED, UNSEEN_SAME_HANDLE };

/* x (lazy when pending, written at its allocation otherwise) in a created context that is then destroyed
 * behind redzone's back; y (0x33 throughout) in the primary context, or in a new created context that gets
 * the dead one's handle. Returns y. */
static rz_devptr_t unseen_end(enum unseen_how how, rz_devptr_t *x) {
    setenv("METRALE_REDZONE", "64", 1);
    g_log = rzt_log_to_file();
    rzcu_context primary = rzt_context(0), a, b;
    cr_assert_eq(cuCtxCreate_v4(&a, NULL, 0, 0), RZCUDA_SUCCESS);
    rz_devptr_t w, y;
    cr_assert_eq(cuMemAlloc_v2(&w, UNSEEN_W), RZCUDA_SUCCESS); /* y starts here, with x in its middle */
    int pending = how == UNSEEN_PENDING || how == UNSEEN_PENDING_KNOWN;
    if (how == UNSEEN_PENDING_KNOWN)
        rz__dev_ctx_calls_seen(); /* as the hooks say: x's context is named at its allocation, not asked later */
    cr_assert_eq(pending ? rz__alloc_interposed(x, UNSEEN_X) : rz_mem_alloc(x, UNSEEN_X), RZCUDA_SUCCESS);
    cr_assert_eq(rz__registry_pending(), pending);
    if (how == UNSEEN_PENDING_KNOWN) {
        rz__registry_lock();
        void *named = rz__registry_find(*x)->ctx;
        rz__registry_unlock();
        cr_assert_eq(named, (void *)a, "x's zone is named by the context current at its allocation");
    }
    cr_assert_eq(cuCtxDestroy_v2(a), RZCUDA_SUCCESS);
    if (how == UNSEEN_SAME_HANDLE) {
        cr_assert_eq(cuCtxCreate_v4(&b, NULL, 0, 0), RZCUDA_SUCCESS);
        cr_assert_eq(b, a, "the emulated driver hands out the destroyed context's handle again");
    } else {
        cr_assert_eq(cuCtxSetCurrent(primary), RZCUDA_SUCCESS);
    }
    cr_assert_eq(cuMemAlloc_v2(&y, UNSEEN_Y), RZCUDA_SUCCESS);
    cr_assert(y < *x && *x + UNSEEN_X + 64 < y + UNSEEN_Y, "y has x's old range in its middle");
    cr_assert_eq(cuMemsetD8_v2(y, 0x33, UNSEEN_Y), RZCUDA_SUCCESS);
    return y;
}

static void expect_y_untouched_and_x_forgotten(rz_devptr_t y) {
    static uint8_t h[UNSEEN_Y];
    cr_assert_eq(cuMemcpyDtoH_v2(h, y, UNSEEN_Y), RZCUDA_SUCCESS);
    size_t changed = 0;
    for (size_t i = 0; i < UNSEEN_Y; i++)
        changed += h[i] != 0x33;
    cr_assert_eq(changed, 0, "redzone wrote into y");
    cr_assert_eq(rz__registry_count(), 0, "x's zone is forgotten");
    char *log = rzt_read_log(g_log);
    cr_assert(!strstr(log, "REDZONE VIOLATION"), "%s", log);
    cr_assert(!strstr(log, "failed"), "%s", log);
    cr_assert_eq(rzt_count(log, "1 allocations' memory is no longer known to the driver"), 1, "%s", log);
    cr_assert_eq(atomic_load(&RZ_STATE.counters[RZ_C_stale_zones]), 1);
}

/* x's band still waiting: the install must not take y's context for x's and write x's band into y. */
Test(band_env, unseen_context_end_pending_band_is_not_written_into_a_later_buffer) {
    rz_devptr_t x, y = unseen_end(UNSEEN_PENDING, &x);
    rz__bands_install();
    expect_y_untouched_and_x_forgotten(y);
}

/* The same with x's context named at its allocation (device_ctx.h: the hooks see every call that changes the
 * current context, so the install asks no pointer attributes): the band's write in the dead context fails, and
 * only then is the driver asked whether x's block is still there: x is forgotten, nothing is written into y. */
Test(band_env, unseen_context_end_pending_band_with_a_known_context_is_not_written_into_a_later_buffer) {
    rz_devptr_t x, y = unseen_end(UNSEEN_PENDING_KNOWN, &x);
    cuEmuResetCallCounts();
    rz__bands_install();
    cr_assert_geq(cuEmuCallCount("cuPointerGetAttributes") + cuEmuCallCount("cuPointerGetAttribute"), 1,
                  "asked after the failed write");
    expect_y_untouched_and_x_forgotten(y);
}

/* x's band in place: its context is gone, so the scan cannot read it there (CUDA_ERROR_INVALID_CONTEXT); that
 * failed every scan, since the driver named a context (y's) for x's address. */
Test(band_env, unseen_context_end_installed_zone_does_not_fail_scans) {
    rz_devptr_t x, y = unseen_end(UNSEEN_INSTALLED, &x);
    cr_assert_eq(rz_scan(), 0);
    cr_assert_eq(rz_scan(), 0, "and the next scan");
    expect_y_untouched_and_x_forgotten(y);
}

/* The new context has the dead one's handle, so x's band is read, in y: y's bytes are no violation of x's, and
 * the re-fill after a report would write 64 bytes into y. */
Test(band_env, unseen_context_end_same_handle_no_false_report_no_refill) {
    rz_devptr_t x, y = unseen_end(UNSEEN_SAME_HANDLE, &x);
    cr_assert_eq(rz_scan(), 0);
    expect_y_untouched_and_x_forgotten(y);
}
