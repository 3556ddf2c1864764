/* Allocation and free through the public API on the emulated driver: creation indices, MIN_IDX, padding
 * decisions, result codes passed through, counters, and the fallbacks that keep the program running. */
#include <signal.h>
#include <sys/wait.h>

#include "rz_test.h"
#include "fork.h"

static int collect(const rz_zone_info_t *z, void *arg) {
    rz_zone_info_t *out = arg;
    for (int i = 0; i < 64; i++) {
        if (out[i].ptr == 0) {
            out[i] = *z;
            return 0;
        }
    }
    return 1;
}

Test(api, creation_index_counts_failed_calls_and_nothing_registers_on_failure) {
    setenv("METRALE_REDZONE", "64", 1);
    rzt_context(0);
    rz_devptr_t a = 0, b = 0, c = 0;
    cr_assert_eq(rz_mem_alloc(&a, 100), RZCUDA_SUCCESS);
    cr_assert_eq(cuEmuInjectFailure("cuMemAlloc_v2", 1, RZCUDA_ERROR_INVALID_VALUE), 0);
    cr_assert_eq(rz_mem_alloc(&b, 100), RZCUDA_ERROR_INVALID_VALUE, "the driver's code comes back unchanged");
    cr_assert_eq(b, 0);
    cr_assert_eq(rz_mem_alloc(&c, 100), RZCUDA_SUCCESS);
    cr_assert_eq(rz_next_index(), 3);
    rz_zone_info_t zones[64] = {0};
    cr_assert_eq(rz_zone_foreach(collect, zones), 0);
    cr_assert_eq(zones[0].index, 0);
    cr_assert_eq(zones[0].ptr, a);
    cr_assert_eq(zones[1].index, 2, "index 1 was consumed by the failed call");
    cr_assert_eq(zones[1].ptr, c);
    cr_assert_eq(zones[2].ptr, 0);
    rz_stats_t s;
    rz_stats_get(&s);
    cr_assert_eq(s.map_calls, 2);
    cr_assert_eq(s.live_zones, 2);
}

/* The same through the interposed entry (rz__alloc_interposed, what the cuMemAlloc_v2 hook calls) on its fast
 * path (no stacks, no front band, no guard pages, lazy install: the defaults). Documented (docs/options.md,
 * METRALE_REDZONE_SUMMARY: "next_index counts every allocation call, failed ones too"): a call the driver
 * refuses, with a code that is not out of memory and with out of memory where there is no band to drop,
 * uses up its creation index and registers nothing; the next successful call gets the index after it. */
Test(api, interposed_fast_path_failed_calls_use_up_their_index) {
    setenv("METRALE_REDZONE", "64", 1);
    setenv("METRALE_REDZONE_MIN_IDX", "3", 1); /* indices 0-2 unpadded: out of memory comes back as it is */
    setenv("CUDA_EMU_MEM", "1048576", 1);
    rzt_context(0);
    rz_devptr_t a = 0, b = 0, c = 0, d = 0, e = 0;
    cr_assert_eq(rz__alloc_interposed(&a, 100), RZCUDA_SUCCESS);                       /* index 0 */
    cr_assert_eq(cuEmuInjectFailure("cuMemAlloc_v2", 1, RZCUDA_ERROR_INVALID_VALUE), 0);
    cr_assert_eq(rz__alloc_interposed(&b, 100), RZCUDA_ERROR_INVALID_VALUE);           /* index 1, refused */
    cr_assert_eq(b, 0);
    cr_assert_eq(rz__alloc_interposed(&c, 2 << 20), RZCUDA_ERROR_OUT_OF_MEMORY);       /* index 2, too big */
    cr_assert_eq(c, 0);
    cr_assert_eq(rz_next_index(), 3, "both refused calls took an index");
    cr_assert_eq(rz__alloc_interposed(&d, 100), RZCUDA_SUCCESS);                       /* index 3, padded */
    cr_assert_eq(rz__alloc_interposed(&e, 100), RZCUDA_SUCCESS);                       /* index 4 */
    cr_assert_eq(rz_next_index(), 5);
    rz_zone_info_t zones[64] = {0};
    cr_assert_eq(rz_zone_foreach(collect, zones), 0);
    cr_assert_eq(zones[0].index, 0);
    cr_assert_eq(zones[0].ptr, a);
    cr_assert_eq(zones[1].index, 3, "indices 1 and 2 were used up by the refused calls");
    cr_assert_eq(zones[1].ptr, d);
    cr_assert_eq(zones[2].index, 4);
    cr_assert_eq(zones[2].ptr, e);
    cr_assert_eq(zones[3].ptr, 0, "nothing registered for a refused call");
    rz_stats_t s;
    rz_stats_get(&s);
    cr_assert_eq(s.map_calls, 3);
}

Test(api, min_idx_pads_only_later_allocations) {
    setenv("METRALE_REDZONE", "20", 1); /* rounds up to 32 */
    setenv("METRALE_REDZONE_MIN_IDX", "2", 1);
    rzt_context(0);
    rz_devptr_t p[4];
    for (int i = 0; i < 4; i++)
        cr_assert_eq(rz_mem_alloc(&p[i], 48), RZCUDA_SUCCESS);
    rz_zone_info_t zones[64] = {0};
    rz_zone_foreach(collect, zones);
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(zones[i].index, (uint64_t)i);
        cr_assert_eq(zones[i].pad_bytes, i < 2 ? 0 : 32, "zone %d pad %llu", i, (unsigned long long)zones[i].pad_bytes);
    }
    rz_stats_t s;
    rz_stats_get(&s);
    cr_assert_eq(s.live_zones, 2);
    cr_assert_eq(s.unpadded_allocs, 0, "below MIN_IDX is not a failure to pad");
    cr_assert_eq(s.current_mapped_bytes, 4 * 48 + 2 * 32);
    cr_assert_eq(s.guard_install_calls, 2);
    cr_assert_eq(s.guard_install_bytes, 64);
}

Test(api, min_idx_with_injected_failures_counts_failed_calls) {
    setenv("METRALE_REDZONE", "16", 1);
    setenv("METRALE_REDZONE_MIN_IDX", "2", 1);
    rzt_context(0);
    cuEmuInjectFailure("cuMemAlloc_v2", 1, RZCUDA_ERROR_INVALID_VALUE);
    rz_devptr_t p;
    cr_assert_eq(rz_mem_alloc(&p, 64), RZCUDA_ERROR_INVALID_VALUE); /* index 0, failed */
    cr_assert_eq(rz_mem_alloc(&p, 64), RZCUDA_SUCCESS);             /* index 1: below MIN_IDX */
    rz_devptr_t q;
    cr_assert_eq(rz_mem_alloc(&q, 64), RZCUDA_SUCCESS); /* index 2: padded */
    rz_zone_info_t zones[64] = {0};
    rz_zone_foreach(collect, zones);
    cr_assert_eq(zones[0].index, 1);
    cr_assert_eq(zones[0].pad_bytes, 0);
    cr_assert_eq(zones[1].index, 2);
    cr_assert_eq(zones[1].pad_bytes, 16);
}

Test(api, disabled_means_no_bands_but_indices_and_counters) {
    unsetenv("METRALE_REDZONE");
    const char *log = rzt_log_to_file();
    rzt_context(0);
    rz_devptr_t p;
    cr_assert_eq(rz_mem_alloc(&p, 1000), RZCUDA_SUCCESS);
    size_t size = 0;
    rz_devptr_t base = 0;
    cr_assert_eq(cuMemGetAddressRange_v2(&base, &size, p), RZCUDA_SUCCESS);
    cr_assert_eq(size, 1000, "no pad requested from the driver");
    cr_assert_eq(rz_scan(), 0);
    rz_stats_t s;
    rz_stats_get(&s);
    cr_assert_eq(s.map_calls, 1);
    cr_assert_eq(s.live_zones, 0);
    cr_assert_eq(rz_mem_free(p), RZCUDA_SUCCESS);
    rz_stats_get(&s);
    cr_assert_eq(s.current_mapped_bytes, 0);
    char *text = rzt_read_log(log);
    cr_assert(strstr(text, "redzone scan: 0 zones checked, 0 violated"), "%s", text);
    free(text);
}

Test(api, padded_allocation_asks_the_driver_for_user_plus_pad) {
    setenv("METRALE_REDZONE", "64", 1);
    rzt_context(0);
    rz_devptr_t p;
    cr_assert_eq(rz_mem_alloc(&p, 1000), RZCUDA_SUCCESS);
    size_t size = 0;
    rz_devptr_t base = 0;
    cr_assert_eq(cuMemGetAddressRange_v2(&base, &size, p), RZCUDA_SUCCESS);
    cr_assert_eq(base, p);
    cr_assert_eq(size, 1064);
    uint8_t band[64];
    cr_assert_eq(cuMemcpyDtoH_v2(band, p + 1000, 64), RZCUDA_SUCCESS);
    for (int i = 0; i < 64; i++)
        cr_assert_eq(band[i], 0xEE);
}

Test(api, out_of_memory_with_pad_retries_unpadded) {
    setenv("METRALE_REDZONE", "64", 1);
    const char *log = rzt_log_to_file();
    rzt_context(0);
    cuEmuInjectFailure("cuMemAlloc_v2", 1, RZCUDA_ERROR_OUT_OF_MEMORY);
    rz_devptr_t p = 0;
    cr_assert_eq(rz_mem_alloc(&p, 4096), RZCUDA_SUCCESS, "the program still gets its memory");
    cr_assert_neq(p, 0);
    cr_assert_eq(cuEmuCallCount("cuMemAlloc_v2"), 2);
    size_t size = 0;
    cr_assert_eq(cuMemGetAddressRange_v2(NULL, &size, p), RZCUDA_SUCCESS);
    cr_assert_eq(size, 4096);
    rz_stats_t s;
    rz_stats_get(&s);
    cr_assert_eq(s.unpadded_allocs, 1);
    cr_assert_eq(s.live_zones, 0);
    cr_assert_eq(s.current_mapped_bytes, 4096);
    char *text = rzt_read_log(log);
    cr_assert_eq(rzt_count(text, "redzone: warning: allocation #0 of 4096 bytes: out of memory with 64 pad bytes; "
                                 "retrying without a band"), 1, "%s", text);
    free(text);
}

Test(api, out_of_memory_without_pad_is_returned) {
    setenv("METRALE_REDZONE", "64", 1);
    setenv("CUDA_EMU_MEM", "1048576", 1);
    rzt_context(0);
    rz_devptr_t p = 0;
    cr_assert_eq(rz_mem_alloc(&p, 2 << 20), RZCUDA_ERROR_OUT_OF_MEMORY);
    cr_assert_eq(p, 0);
    rz_stats_t s;
    rz_stats_get(&s);
    cr_assert_eq(s.map_calls, 0);
    cr_assert_eq(rz_next_index(), 1);
}

Test(api, size_overflow_is_never_wrapped) {
    setenv("METRALE_REDZONE", "64", 1);
    const char *log = rzt_log_to_file();
    rzt_context(0);
    rz_devptr_t p = 0;
    size_t huge = SIZE_MAX - 8;
    int r = rz_mem_alloc(&p, huge);
    cr_assert_eq(r, RZCUDA_ERROR_OUT_OF_MEMORY, "the driver's answer for the unpadded size, got %d", r);
    char *text = rzt_read_log(log);
    cr_assert(strstr(text, "size + 64 pad bytes overflows; passed to the driver unpadded"), "%s", text);
    free(text);
}

Test(api, zero_bytes_and_null_pointer_get_the_drivers_answer) {
    setenv("METRALE_REDZONE", "64", 1);
    rzt_context(0);
    rz_devptr_t p = 0;
    cr_assert_eq(rz_mem_alloc(&p, 0), RZCUDA_ERROR_INVALID_VALUE, "no pad turns a 0-byte request into a valid one");
    cr_assert_eq(rz_mem_alloc(NULL, 16), RZCUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(rz_next_index(), 2);
}

Test(api, free_of_unknown_pointer_passes_through) {
    setenv("METRALE_REDZONE", "64", 1);
    rzt_context(0);
    rz_devptr_t raw;
    cr_assert_eq(cuMemAlloc_v2(&raw, 256), RZCUDA_SUCCESS); /* not through redzone */
    rz_stats_t before, after;
    rz_stats_get(&before);
    cr_assert_eq(rz_mem_free(raw), RZCUDA_SUCCESS);
    cr_assert_eq(rz_mem_free(raw), RZCUDA_ERROR_INVALID_VALUE, "double free: the driver's code");
    rz_stats_get(&after);
    cr_assert_eq(after.unmap_calls, before.unmap_calls);
    cr_assert_eq(after.current_mapped_bytes, before.current_mapped_bytes);
}

Test(api, failed_free_counts_the_call_and_keeps_the_zone) {
    setenv("METRALE_REDZONE", "32", 1);
    setenv("METRALE_REDZONE_QUARANTINE", "0", 1); /* the driver is asked at the free, not when it leaves */
    rzt_context(0);
    rz_devptr_t p;
    cr_assert_eq(rz_mem_alloc(&p, 100), RZCUDA_SUCCESS);
    cuEmuInjectFailure("cuMemFree_v2", 1, RZCUDA_ERROR_INVALID_CONTEXT);
    cr_assert_eq(rz_mem_free(p), RZCUDA_ERROR_INVALID_CONTEXT);
    rz_stats_t s;
    rz_stats_get(&s);
    cr_assert_eq(s.unmap_calls, 1);
    cr_assert_eq(s.current_mapped_bytes, 132);
    cr_assert_eq(s.live_zones, 1);
    cr_assert_eq(rz__registry_count(), 1);
    cr_assert_eq(rz_mem_free(p), RZCUDA_SUCCESS);
    rz_stats_get(&s);
    cr_assert_eq(s.unmap_calls, 2);
    cr_assert_eq(s.current_mapped_bytes, 0);
    cr_assert_eq(s.peak_mapped_bytes, 132);
    cr_assert_eq(s.live_zones, 0);
}

/* A free the driver refuses changes nothing: the zone comes back with its allocation stack, so a later report
 * of it still says where it was allocated (issue 18: it came back with none, or with whatever stack its new
 * registry node last held). Another allocation lands between the removal and the refusal (in a handler of a
 * signal the emulated driver raises inside cuMemFree, as another thread would), so the zone cannot get its
 * old node, and slot, back. */
static rzcu_context g_refused_ctx;
static rz_devptr_t g_between;

static void allocate_in_between(int sig) {
    (void)sig;
    cuCtxSetCurrent(g_refused_ctx);
    rz_mem_alloc(&g_between, 200);
    cuCtxSetCurrent(NULL); /* the free goes on without a context: refused */
}

Test(api, refused_free_keeps_the_allocation_stack) {
    setenv("METRALE_REDZONE", "64", 1);
    setenv("METRALE_REDZONE_STACKS", "4", 1);
    const char *log = rzt_log_to_file();
    g_refused_ctx = rzt_context(0);
    rz_devptr_t p;
    cr_assert_eq(rz_mem_alloc(&p, 100), RZCUDA_SUCCESS);
    struct sigaction sa = {.sa_handler = allocate_in_between};
    cr_assert_eq(sigaction(SIGUSR1, &sa, NULL), 0);
    cr_assert_eq(cuEmuInjectSignal("cuMemFree_v2", 1, SIGUSR1), 0);
    cr_assert_eq(cuCtxSetCurrent(NULL), RZCUDA_SUCCESS);
    cr_assert_eq(rz_mem_free(p), RZCUDA_ERROR_INVALID_CONTEXT, "no current context: the driver refuses");
    cr_assert_neq(g_between, 0, "the allocation in between was made");
    cr_assert_eq(cuCtxSetCurrent(g_refused_ctx), RZCUDA_SUCCESS);
    rz__registry_lock();
    uint32_t n = 0;
    rz__registry_stack(rz__registry_find(p), &n);
    rz__registry_unlock();
    cr_assert_gt(n, 0, "the zone came back without its allocation stack");
    uint8_t bad = 0x41;
    cr_assert_eq(cuMemcpyHtoD_v2(p + 100, &bad, 1), RZCUDA_SUCCESS);
    cr_assert_eq(rz_scan(), 1);
    char *text = rzt_read_log(log);
    cr_assert(strstr(text, "REDZONE VIOLATION alloc#0 user_bytes=100 pad=64 : bytes [0..=0] past the end were written "
                           "(1 of 64 pad bytes changed), first bad value 0x41\n  alloc#0 was allocated at:\n    #0 0x"),
              "%s", text);
    free(text);
}

Test(api, failed_band_fill_leaves_working_unwatched_memory) {
    setenv("METRALE_REDZONE", "32", 1);
    const char *log = rzt_log_to_file();
    rzt_context(0);
    cuEmuInjectFailure("cuMemsetD8Async", 1, RZCUDA_ERROR_UNKNOWN);
    rz_devptr_t p;
    cr_assert_eq(rz_mem_alloc(&p, 64), RZCUDA_SUCCESS);
    uint8_t data[64];
    memset(data, 0x5A, sizeof data);
    cr_assert_eq(cuMemcpyHtoD_v2(p, data, sizeof data), RZCUDA_SUCCESS, "the memory works");
    rz_stats_t s;
    rz_stats_get(&s);
    cr_assert_eq(s.unpadded_allocs, 1);
    cr_assert_eq(s.live_zones, 0);
    cr_assert_eq(s.current_mapped_bytes, 96, "the pad bytes are still allocated");
    cr_assert_eq(rz_scan(), 0, "an unwatched zone is not scanned");
    cr_assert_eq(rz_mem_free(p), RZCUDA_SUCCESS);
    rz_stats_get(&s);
    cr_assert_eq(s.current_mapped_bytes, 0, "free balances the pad too");
    char *text = rzt_read_log(log);
    cr_assert_eq(rzt_count(text, "filling its band failed with CUDA_ERROR_UNKNOWN; the zone is unpadded"), 1, "%s", text);
    free(text);
}

Test(api, trace_idx_logs_a_backtrace_for_that_allocation_only) {
    setenv("METRALE_REDZONE", "16", 1);
    setenv("METRALE_REDZONE_TRACE_IDX", "1", 1);
    const char *log = rzt_log_to_file();
    rzt_context(0);
    rz_devptr_t p;
    for (int i = 0; i < 3; i++)
        cr_assert_eq(rz_mem_alloc(&p, 16), RZCUDA_SUCCESS);
    char *text = rzt_read_log(log);
    cr_assert_eq(rzt_count(text, "METRALE_REDZONE_TRACE_IDX=1: allocation #1 (user_bytes=16 pad=16) made here"), 1,
                 "%s", text);
    cr_assert_eq(rzt_count(text, "allocation #0 ("), 0);
    cr_assert(strstr(text, "made here:\n    #0 0x"), "%s", text);
    cr_assert(strstr(text, " in api_trace_idx_logs_a_backtrace_for_that_allocation_only_impl+0x"),
              "frame #0 names the (static) function that allocated: %s", text);
    free(text);
}

Test(api, library_work_never_takes_a_creation_index) {
    setenv("METRALE_REDZONE", "64", 1);
    rzt_context(0);
    rz_devptr_t p;
    cr_assert_eq(rz_mem_alloc(&p, 64), RZCUDA_SUCCESS);
    uint64_t before_allocs = cuEmuCallCount("cuMemAlloc_v2");
    cr_assert_eq(rz_scan(), 0);
    cr_assert_eq(rz_poison(0, 1), RZ_OK);
    cr_assert_eq(rz_unpoison(), RZ_OK);
    cr_assert_eq(rz_next_index(), 1, "scans and poisons take no index");
    cr_assert_eq(cuEmuCallCount("cuMemAlloc_v2"), before_allocs, "and allocate no device memory");
}

/* Many threads allocating and freeing while another scans and poisons: counters balance, no zone lost or
 * duplicated, and no false violation (nobody writes past an end here). */
#include <pthread.h>
static rzcu_context g_ctx;
static _Atomic int g_stop;

static void *alloc_free_loop(void *arg) {
    unsigned seed = (unsigned)(uintptr_t)arg;
    rz_devptr_t keep[16] = {0};
    if (cuCtxSetCurrent(g_ctx) != RZCUDA_SUCCESS)
        return (void *)1;
    for (int i = 0; i < 3000; i++) {
        seed = seed * 1103515245u + 12345u;
        int slot = (int)((seed >> 8) % 16);
        if (keep[slot]) {
            if (rz_mem_free(keep[slot]) != RZCUDA_SUCCESS)
                return (void *)2;
            keep[slot] = 0;
        } else if (rz_mem_alloc(&keep[slot], 1 + (seed >> 12) % 3000) != RZCUDA_SUCCESS) {
            return (void *)3;
        }
    }
    for (int s = 0; s < 16; s++)
        if (keep[s] && rz_mem_free(keep[s]) != RZCUDA_SUCCESS)
            return (void *)4;
    return NULL;
}

static void *scan_loop(void *arg) {
    (void)arg;
    int scans = 0;
    while (!atomic_load(&g_stop) || scans < 3) {
        if (rz_scan() != 0)
            return (void *)1; /* a false violation, or an error */
        if (rz_poison((uint64_t)scans, (uint64_t)scans + 100) != RZ_OK || rz_scan() != 0)
            return (void *)2;
        if (rz_unpoison() != RZ_OK)
            return (void *)3;
        scans++;
    }
    return NULL;
}

Test(api, concurrent_alloc_free_with_scans_and_poisons, .timeout = 300) {
    setenv("METRALE_REDZONE", "32", 1);
    rzt_log_to_file();
    g_ctx = rzt_context(0);
    pthread_t workers[4], scanner;
    pthread_create(&scanner, NULL, scan_loop, NULL);
    for (uintptr_t i = 0; i < 4; i++)
        pthread_create(&workers[i], NULL, alloc_free_loop, (void *)(i + 1));
    void *ret;
    for (int i = 0; i < 4; i++) {
        pthread_join(workers[i], &ret);
        cr_assert_null(ret, "worker %d failed at step %p", i, ret);
    }
    atomic_store(&g_stop, 1);
    pthread_join(scanner, &ret);
    cr_assert_null(ret, "scanner failed: %p", ret);
    rz_stats_t s;
    rz_stats_get(&s);
    cr_assert_eq(s.map_calls, s.unmap_calls, "every allocation freed");
    cr_assert_eq(s.current_mapped_bytes, 0);
    cr_assert_eq(s.live_zones, 0);
    cr_assert_eq(rz__registry_count(), 0);
    cr_assert_eq(s.violations, 0);
    cr_assert_eq(s.map_calls, rz_next_index());
    size_t free_bytes = 0, total = 0;
    cr_assert_eq(cuMemGetInfo_v2(&free_bytes, &total), RZCUDA_SUCCESS);
    cr_assert_leq(s.quarantine_bytes, (uint64_t)64 << 20, "the quarantine is bounded");
    cr_assert_lt(free_bytes, total, "the quarantine holds freed blocks");
    cr_assert_eq(rz__quarantine_drain(), 1);
    rz_stats_get(&s);
    cr_assert_eq(s.quarantine_bytes, 0);
    cr_assert_eq(cuMemGetInfo_v2(&free_bytes, &total), RZCUDA_SUCCESS);
    cr_assert_eq(free_bytes, total, "the driver got every byte back once the quarantine was drained");
}

/* What cuGetProcAddress hands out for the interposed names, by version and per-thread flag (cudaTypedefs.h),
 * used when a driver returns addresses the library cannot match by identity. */
Test(api, proc_address_version_table) {
    const rzcu_uint64 PT = RZCU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
    cr_assert_str_eq(rz__proc_exported_name("cuMemAlloc", 13000, 0), "cuMemAlloc_v2");
    cr_assert_null(rz__proc_exported_name("cuMemAlloc", 3010, 0), "the 32-bit v1 ABI is not wrapped");
    cr_assert_str_eq(rz__proc_exported_name("cuMemAlloc", 13000, PT), "cuMemAlloc_v2", "no per-thread variant");
    cr_assert_str_eq(rz__proc_exported_name("cuCtxSynchronize", 12090, 0), "cuCtxSynchronize");
    cr_assert_str_eq(rz__proc_exported_name("cuCtxSynchronize", 13000, 0), "cuCtxSynchronize_v2");
    cr_assert_str_eq(rz__proc_exported_name("cuStreamSynchronize", 13000, PT), "cuStreamSynchronize_ptsz");
    cr_assert_str_eq(rz__proc_exported_name("cuStreamSynchronize", 6050, PT), "cuStreamSynchronize",
                     "before 7.0 there was no per-thread variant");
    cr_assert_str_eq(rz__proc_exported_name("cuLaunchKernel", 12000, PT), "cuLaunchKernel_ptsz");
    cr_assert_str_eq(rz__proc_exported_name("cuMemFreeAsync", 11020, 0), "cuMemFreeAsync");
    cr_assert_null(rz__proc_exported_name("cuMemFreeAsync", 11010, 0));
    cr_assert_str_eq(rz__proc_exported_name("cuGetProcAddress", 11030, 0), "cuGetProcAddress");
    cr_assert_str_eq(rz__proc_exported_name("cuGetProcAddress", 12000, 0), "cuGetProcAddress_v2");
    cr_assert_str_eq(rz__proc_exported_name("cuMemcpyHtoD", 13000, 0), "cuMemcpyHtoD_v2", "installs bands first");
    cr_assert_str_eq(rz__proc_exported_name("cuMemcpyHtoD", 13000, PT), "cuMemcpyHtoD_v2_ptds");
    cr_assert_str_eq(rz__proc_exported_name("cuMemsetD8Async", 12000, PT), "cuMemsetD8Async_ptsz");
    cr_assert_str_eq(rz__proc_exported_name("cuMemcpyBatchAsync", 12080, 0), "cuMemcpyBatchAsync");
    cr_assert_str_eq(rz__proc_exported_name("cuMemcpyBatchAsync", 13000, 0), "cuMemcpyBatchAsync_v2");
    cr_assert_null(rz__proc_exported_name("cuMemGetInfo", 13000, 0), "not interposed");
}

/* The entry points that end a context (a runtime's cudaDeviceReset fetches them with cuGetProcAddress) and
 * the pointer attribute query are found by name too, the older ABIs at older versions (issue 18 item 1). */
Test(api, proc_address_version_table_context_end) {
    cr_assert_str_eq(rz__proc_exported_name("cuDevicePrimaryCtxRelease", 12000, 0), "cuDevicePrimaryCtxRelease_v2");
    cr_assert_str_eq(rz__proc_exported_name("cuDevicePrimaryCtxRelease", 10000, 0), "cuDevicePrimaryCtxRelease");
    cr_assert_null(rz__proc_exported_name("cuDevicePrimaryCtxRelease", 6050, 0));
    cr_assert_str_eq(rz__proc_exported_name("cuDevicePrimaryCtxReset", 11000, 0), "cuDevicePrimaryCtxReset_v2");
    cr_assert_str_eq(rz__proc_exported_name("cuDevicePrimaryCtxReset", 7000, 0), "cuDevicePrimaryCtxReset");
    cr_assert_str_eq(rz__proc_exported_name("cuCtxDestroy", 13000, 0), "cuCtxDestroy_v2");
    cr_assert_str_eq(rz__proc_exported_name("cuCtxDestroy", 3020, 0), "cuCtxDestroy");
    cr_assert_str_eq(rz__proc_exported_name("cuPointerGetAttribute", 12000, 0), "cuPointerGetAttribute");
}

/* A failed band read must not make a guard-page zone look stale (the driver names no context for virtual
 * memory): it stays registered, its free succeeds and releases everything, and the counters balance. */
Test(api, failed_band_read_keeps_a_guard_page_zone) {
    setenv("METRALE_REDZONE", "64", 1);
    setenv("METRALE_REDZONE_GUARD", "idx:0", 1);
    rzt_context(0);
    rz_devptr_t p;
    cr_assert_eq(rz_mem_alloc(&p, 1000), RZCUDA_SUCCESS);
    cuda_emu_vmm_usage_t u;
    cuEmuVmmUsage(&u);
    cr_assert_eq(u.mapped_bytes, (size_t)2 << 20, "a guard allocation");
    cr_assert_eq(cuEmuInjectFailure("cuMemcpyDtoHAsync_v2", 1, RZCUDA_ERROR_UNKNOWN), 0);
    cr_assert_eq(rz_scan(), RZ_EDRIVER);
    cr_assert_eq(rz__registry_count(), 1, "the zone is still known");
    cr_assert_eq(rz_mem_free(p), RZCUDA_SUCCESS);
    cuEmuVmmUsage(&u);
    cr_assert_eq(u.mapped_bytes + u.reserved_bytes + u.physical_bytes, 0, "mapping and reservation released");
    rz_stats_t s;
    rz_stats_get(&s);
    cr_assert_eq(s.current_mapped_bytes, 0);
    cr_assert_eq(s.stale_zones, 0);
}

/* A guard-page allocation is one guard install (its granule and slack band), as a banded one is one. */
Test(api, guard_page_allocation_counts_one_guard_install) {
    setenv("METRALE_REDZONE", "64", 1);
    setenv("METRALE_REDZONE_GUARD", "idx:0", 1);
    rzt_context(0);
    rz_devptr_t p;
    cr_assert_eq(rz_mem_alloc(&p, 1000), RZCUDA_SUCCESS);
    rz_stats_t s;
    rz_stats_get(&s);
    cr_assert_eq(s.guard_install_calls, 1);
    cr_assert_eq(s.guard_install_bytes, ((uint64_t)2 << 20) + 24, "the 2 MiB guard granule and 24 slack bytes");
    cr_assert_eq(s.map_calls, 1);
    cr_assert_eq(s.current_mapped_bytes, (uint64_t)2 << 20, "the mapping");
    cr_assert_eq(rz_mem_free(p), RZCUDA_SUCCESS);
}

/* The free-time check takes the registry lock once per free (issue 20 item 7; it took it three times, and
 * holding it across the band read): to remove the zone. The band is read and judged without it; only a
 * violated band takes it again, to report. An unused buffer (its band never written) is not read at all. */
Test(api, a_free_takes_the_registry_lock_once) {
    setenv("METRALE_REDZONE", "64", 1);
    rzt_log_to_file();
    rzt_context(0);
    rz_devptr_t used, unused, overrun;
    cr_assert_eq(rz_mem_alloc(&used, 1000), RZCUDA_SUCCESS);
    cr_assert_eq(rz_mem_alloc(&overrun, 1000), RZCUDA_SUCCESS);
    rz__bands_install(); /* what the hooks do before the program's first copy, memset or launch */
    cr_assert_eq(rz_mem_alloc(&unused, 1000), RZCUDA_SUCCESS); /* allocated after it: band still waiting */
    cr_assert_eq(cuMemsetD8_v2(used, 1, 1000), RZCUDA_SUCCESS);
    cr_assert_eq(cuMemsetD8_v2(overrun, 1, 1001), RZCUDA_SUCCESS);
    uint64_t before = rz__registry_locks_taken();
    cr_assert_eq(rz_mem_free(used), RZCUDA_SUCCESS);
    cr_assert_eq(rz__registry_locks_taken() - before, 1, "a clean used buffer: %llu",
                 (unsigned long long)(rz__registry_locks_taken() - before));
    before = rz__registry_locks_taken();
    cr_assert_eq(rz_mem_free(unused), RZCUDA_SUCCESS);
    cr_assert_eq(rz__registry_locks_taken() - before, 1, "an unused buffer");
    before = rz__registry_locks_taken();
    cr_assert_eq(rz_mem_free(overrun), RZCUDA_SUCCESS);
    cr_assert_eq(rz__registry_locks_taken() - before, 2, "a violated one: removed, then reported");
    rz_stats_t s;
    rz_stats_get(&s);
    cr_assert_eq(s.violations, 1);
}

/* The library's one fork owner (base/fork.c) runs the handlers modules register in pthread_atfork's order:
 * prepare handlers in reverse registration order, parent and child handlers in registration order. */
static char g_fork_order[16];
static size_t g_fork_n;
static void fork_note(char c) {
    if (g_fork_n + 1 < sizeof g_fork_order)
        g_fork_order[g_fork_n++] = c;
}
static void prepare_a(void) { fork_note('a'); }
static void prepare_b(void) { fork_note('b'); }
static void parent_a(void) { fork_note('A'); }
static void parent_b(void) { fork_note('B'); }
static void parent_c(void) { fork_note('C'); }
static void child_a(void) { fork_note('1'); }
static void child_c(void) { fork_note('3'); }

Test(api, fork_handlers_run_in_pthread_atfork_order) {
    rz__fork_register(prepare_a, parent_a, child_a);
    rz__fork_register(prepare_b, parent_b, NULL);
    rz__fork_register(NULL, parent_c, child_c);
    pid_t child = fork();
    cr_assert_geq(child, 0);
    if (child == 0)
        _exit(strcmp(g_fork_order, "ba13") == 0 ? 0 : 1);
    int status = 0;
    cr_assert_eq(waitpid(child, &status, 0), child);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child ran its handlers in order");
    cr_assert_str_eq(g_fork_order, "baABC");
}
