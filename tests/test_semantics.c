/*
 * What a real driver does that redzone must stay correct under (issue 15), end to end on the emulated
 * driver with libredzone.so preloaded into tests/programs/rzreal.c: kernels still running when their buffer
 * is freed or the program exits, and the emulated driver's imitations of the real driver's rules.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spawn.h"

#define PRELOAD "LD_PRELOAD=" LIBREDZONE
#define EMU "LD_LIBRARY_PATH=" EMU_DIR

static char out[1 << 16];

static int run(const char *const *env, const char *const *argv) { return spawn_capture(env, argv, out, sizeof out); }

static int count_of(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

#define VIOLATION_1000 "REDZONE VIOLATION alloc#0 user_bytes=1000 pad=64 : bytes [0..=7] past the end were written (8 of 64 pad bytes changed), first bad value 0x5a\n"

/* The driver's cuMemFree waits for the device; redzone's check before it must wait too, on every kind of
 * stream the kernel may run on. CUDA_EMU_KERNEL_HOLD starts the kernel only once a thread waits. */
static void expect_free_report(const char *stream) {
    const char *env[] = {PRELOAD, EMU, "METRALE_REDZONE=64", "CUDA_EMU_KERNEL_HOLD=1", NULL};
    const char *argv[] = {RZREAL, "inflight", stream, NULL};
    cr_assert_eq(run(env, argv), 0, "%s", out);
    cr_assert(strstr(out, VIOLATION_1000 "  kernels launched since alloc#0 was last seen clean (most recent first): "
                          "past\nredzone: alloc#0 was violated when it was freed\n"), "%s: %s", stream, out);
    cr_assert(strstr(out, "rzreal: freed with the kernel in flight\n"), "%s", out);
}

Test(semantics, kernel_in_flight_at_free_legacy_stream) { expect_free_report("legacy"); }
Test(semantics, kernel_in_flight_at_free_blocking_stream) { expect_free_report("blocking"); }
Test(semantics, kernel_in_flight_at_free_non_blocking_stream) { expect_free_report("nonblocking"); }
Test(semantics, kernel_in_flight_at_free_per_thread_stream) { expect_free_report("perthread"); }

Test(semantics, kernel_queued_at_exit_is_reported_by_the_exit_scan) {
    const char *env[] = {PRELOAD, EMU, "METRALE_REDZONE=64", "CUDA_EMU_KERNEL_HOLD=1", NULL};
    const char *argv[] = {RZREAL, "inflight", "exit", NULL};
    cr_assert_eq(run(env, argv), 0, "%s", out);
    cr_assert(strstr(out, VIOLATION_1000), "%s", out);
    cr_assert(strstr(out, "redzone: exit: 1 violated at exit;"), "%s", out);
}

/* Without redzone the hold changes nothing a correct program sees: the driver's free waits for the kernel. */
Test(semantics, kernel_hold_needs_a_wait_to_start_kernels) {
    const char *env[] = {EMU, "CUDA_EMU_KERNEL_HOLD=1", NULL};
    const char *argv[] = {RZREAL, "inflight", "legacy", NULL};
    cr_assert_eq(run(env, argv), 0, "%s", out);
    cr_assert(strstr(out, "rzreal: freed with the kernel in flight\n"), "%s", out);
    cr_assert(!strstr(out, "REDZONE"), "%s", out);
}

/* METRALE_REDZONE_SCAN=sync (issue 18 item 8): a kernel has written half of an 8-byte overrun and still runs
 * while the program synchronises another stream (or an event on it); that sync must not judge the zone (it
 * reported [0..=3], then the kernel's own sync [4..=7]). The overrun is reported once, whole, when the
 * kernel's stream is synchronised. The kernel waits for the program between its halves (no sleeps). */
static void expect_one_whole_report(const char *how, const char *synced) {
    const char *env[] = {PRELOAD, EMU, "METRALE_REDZONE=64", "METRALE_REDZONE_SCAN=sync", NULL};
    const char *argv[] = {RZREAL, "syncother", how, NULL};
    cr_assert_eq(run(env, argv), 0, "%s: %s", how, out);
    cr_assert_eq(count_of(out, "REDZONE VIOLATION"), 1, "%s: %s", how, out);
    const char *other = strstr(out, "rzreal: another stream synchronised\n");
    const char *v = strstr(out, VIOLATION_1000);
    const char *done = strstr(out, synced);
    cr_assert(other && v && done && other < v && v < done, "%s: judged at the kernel's own sync:\n%s", how, out);
}

Test(semantics, sync_of_another_stream_waits_for_a_running_kernel_nonblocking) {
    expect_one_whole_report("nonblocking", "rzreal: the kernel's stream synchronised\n");
}
Test(semantics, sync_of_another_stream_waits_for_a_running_kernel_legacy) {
    expect_one_whole_report("legacy", "rzreal: the kernel's stream synchronised\n");
}
Test(semantics, sync_of_another_stream_waits_for_a_running_kernel_per_thread) {
    expect_one_whole_report("perthread", "rzreal: the kernel's stream synchronised\n");
}
Test(semantics, sync_of_another_stream_waits_for_another_threads_kernel) {
    expect_one_whole_report("thread", "rzreal: the other thread synchronised its stream\n");
}
Test(semantics, event_sync_waits_for_a_running_kernel) {
    expect_one_whole_report("event", "rzreal: the kernel's stream synchronised\n");
}
/* The kernel's stream destroyed while it runs: it can no longer be asked; its context's sync judges it. */
Test(semantics, sync_of_another_stream_waits_for_a_destroyed_streams_kernel) {
    expect_one_whole_report("destroyed", "rzreal: the kernel's stream synchronised\n");
}

/* Managed memory is host-accessible: a host store past the end needs no launch, copy or synchronisation to
 * land, so the band must be there from the allocation on (not written lazily over the store). */
static void expect_managed_report(const char *how) {
    const char *env[] = {PRELOAD, EMU, "METRALE_REDZONE=64", NULL};
    const char *argv[] = {RZREAL, "managed", how, NULL};
    cr_assert_eq(run(env, argv), 0, "%s", out);
    cr_assert(strstr(out, "REDZONE VIOLATION alloc#0 user_bytes=1000 pad=64 : bytes [0..=0] past the end were "
                          "written (1 of 64 pad bytes changed), first bad value 0x5a\n"), "%s: %s", how, out);
    cr_assert(strstr(out, "redzone: alloc#0 was violated when it was freed\n"), "%s", out);
}

Test(semantics, managed_host_store_past_the_end_before_device_work) { expect_managed_report("free"); }
Test(semantics, managed_host_store_past_the_end_then_synchronise) { expect_managed_report("sync"); }

/* A context ends and a new one gets the same handle: the old context's live zones are checked before it
 * goes and forgotten with it, and the new context's zones are banded and checked like any others. */
static void expect_context_end(const char *how) {
    const char *env[] = {PRELOAD, EMU, "METRALE_REDZONE=64", NULL};
    const char *argv[] = {RZREAL, "ctxend", how, NULL};
    cr_assert_eq(run(env, argv), 0, "%s", out);
    cr_assert(strstr(out, "rzreal: same context handle again: 1\n"), "%s: %s", how, out);
    cr_assert(strstr(out, "REDZONE VIOLATION alloc#0 user_bytes=500 pad=64 : bytes [0..=0] past the end were written "
                          "(1 of 64 pad bytes changed), first bad value 0x11\nredzone: context ending: 1 zones "
                          "checked, 1 violated\n"), "%s: %s", how, out);
    cr_assert(strstr(out, "REDZONE VIOLATION alloc#2 user_bytes=1000 pad=64 : bytes [0..=7] past the end were written "
                          "(8 of 64 pad bytes changed), first bad value 0x5a\nredzone: alloc#2 was violated when it "
                          "was freed\n"), "%s: %s", how, out);
    cr_assert(!strstr(out, "warning"), "%s: %s", how, out);
    cr_assert(strstr(out, "redzone: exit: 0 violated at exit; 2 violations in 1 scans; 3 allocations, 0 live"), "%s: %s",
              how, out);
}

Test(semantics, context_destroyed_and_created_again_with_the_same_handle) { expect_context_end("destroy"); }
Test(semantics, primary_context_released_and_retained_again) { expect_context_end("release"); }
Test(semantics, primary_context_reset_and_retained_again) { expect_context_end("reset"); }

/* An entry point the driver lacks: the program learns so whichever way it asks, as it would without redzone,
 * and a call that reaches the wrapper anyway gets CUDA_ERROR_NOT_SUPPORTED, not a made-up NOT_INITIALIZED. */
static const char *const missing_lines =
    "rzreal: global dlsym of a missing entry point: none\n"
    "rzreal: global dlsym of a present one: found\n"
    "rzreal: driver dlsym of a missing entry point: none\n"
    "rzreal: cuGetProcAddress of a missing entry point: 500, pfn NULL, status 1\n";

Test(semantics, entry_point_the_driver_lacks_is_absent_under_redzone) {
    const char *env[] = {PRELOAD, EMU, "METRALE_REDZONE=64", NULL};
    const char *argv[] = {RZREAL, "missing", NULL};
    cr_assert_eq(run(env, argv), 0, "%s", out);
    cr_assert(strstr(out, missing_lines), "%s", out);
    cr_assert(strstr(out, "rzreal: calling it anyway: 801\n"), "CUDA_ERROR_NOT_SUPPORTED: %s", out);
}

Test(semantics, entry_point_the_driver_lacks_without_redzone) {
    const char *env[] = {EMU, NULL};
    const char *argv[] = {RZREAL, "missing", NULL};
    cr_assert_eq(run(env, argv), 0, "%s", out);
    cr_assert(strstr(out, missing_lines), "the same answers: %s", out);
    cr_assert(!strstr(out, "calling it anyway"), "%s", out);
}

/* A guard-page buffer's range is the buffer, as for a banded one: not the mapping up to 2 MiB before it. */
Test(semantics, address_range_of_a_guard_page_buffer_is_the_buffer) {
    const char *env[] = {PRELOAD, EMU, "METRALE_REDZONE=64", "METRALE_REDZONE_GUARD=idx:0", NULL};
    const char *argv[] = {RZREAL, "guardrange", NULL};
    cr_assert_eq(run(env, argv), 0, "%s", out);
    cr_assert(strstr(out, "rzreal: range inside: 0 base p size 1000\n"), "%s", out);
    cr_assert(strstr(out, "rzreal: range past the end: 500\n"), "the slack band: CUDA_ERROR_NOT_FOUND: %s", out);
    cr_assert(strstr(out, "rzreal: range before the start: 500\n"), "the mapping before it: %s", out);
}

/* cuMemFree of stream-ordered memory does not wait for the device: neither may the check before it (a host
 * wait the program never asked for). */
Test(semantics, check_before_a_pool_free_adds_no_wait) {
    const char *env[] = {PRELOAD, EMU, "METRALE_REDZONE=64", "CUDA_EMU_KERNEL_HOLD=1", NULL};
    const char *argv[] = {RZREAL, "poolfree", NULL};
    cr_assert_eq(run(env, argv), 0, "%s", out);
    cr_assert(strstr(out, "rzreal: the pool free waited for the kernel: 0\n"), "%s", out);
    cr_assert(!strstr(out, "REDZONE VIOLATION"), "%s", out);
}

/* Kernels of a library launched as cudart 12 does (the CUkernel as the CUfunction) are named in reports: by
 * cuKernelGetName, since cuFuncGetName refuses such a handle. */
Test(semantics, library_kernels_are_named_in_reports) {
    const char *env[] = {PRELOAD, EMU, "METRALE_REDZONE=64", NULL};
    const char *argv[] = {RZREAL, "library", NULL};
    cr_assert_eq(run(env, argv), 0, "%s", out);
    cr_assert(strstr(out, "rzreal: cuFuncGetName of a CUkernel: 1\n"), "the emulated driver refuses it: %s", out);
    cr_assert(strstr(out, VIOLATION_1000 "  kernels launched since alloc#0 was last seen clean (most recent first): "
                          "lib_past\n"), "%s", out);
    cr_assert(strstr(out, "REDZONE VIOLATION alloc#1 user_bytes=1000 pad=64 : bytes [0..=7] past the end were written "
                          "(8 of 64 pad bytes changed), first bad value 0x5a\n  kernels launched since alloc#1 was last "
                          "seen clean (most recent first): lib_past, lib_past\n"), "%s", out);
    cr_assert(!strstr(out, "(unnamed kernel)"), "%s", out);
}

/* The check before a stream-ordered free copies the band into page-locked memory: a copy into pageable memory
 * returns only once the stream's earlier work is done, so cuMemFreeAsync would wait for the program's kernels.
 * The overrun is still reported, when the stream reaches the free. */
Test(semantics, stream_ordered_free_check_adds_no_host_wait) {
    const char *env[] = {PRELOAD, EMU, "METRALE_REDZONE=64", "CUDA_EMU_KERNEL_HOLD=1", NULL};
    const char *argv[] = {RZREAL, "freeasync", NULL};
    cr_assert_eq(run(env, argv), 0, "%s", out);
    cr_assert(strstr(out, "rzreal: cuMemFreeAsync waited for its stream: 0\n"), "%s", out);
    cr_assert(strstr(out, "REDZONE VIOLATION alloc#1 user_bytes=1000 pad=64 : bytes [0..=7] past the end were written "
                          "(8 of 64 pad bytes changed), first bad value 0x5a\n"), "%s", out);
    cr_assert(strstr(out, "redzone: alloc#1 was violated when it was freed\n"), "%s", out);
}

/* An allocation, a kernel and a free captured into a graph (memory nodes), launched twice: redzone must not
 * synchronise the captured stream (which the driver forbids, invalidating the program's graph), and what it
 * captures must survive every launch (no buffer freed by the first); an overrun by the captured kernel is
 * reported at each launch, by the check captured with the free. */
Test(semantics, allocation_and_free_captured_into_a_graph_keep_the_capture_valid) {
    const char *env[] = {PRELOAD, EMU, "METRALE_REDZONE=64", NULL};
    const char *argv[] = {RZREAL, "capture", "inside", NULL};
    cr_assert_eq(run(env, argv), 0, "%s", out);
    cr_assert(strstr(out, "rzreal: end of capture: 0\n"), "%s", out);
    cr_assert(strstr(out, "rzreal: graph launched twice\n"), "%s", out);
    cr_assert(!strstr(out, "warning"), "%s", out);
    cr_assert(!strstr(out, "REDZONE VIOLATION"), "%s", out);
    cr_assert(strstr(out, "redzone: exit: 0 violated at exit; 0 violations in 1 scans; 1 allocations, 0 live, 0 unpadded"),
              "%s", out);
}

Test(semantics, overrun_by_a_captured_kernel_is_reported_at_each_launch) {
    const char *env[] = {PRELOAD, EMU, "METRALE_REDZONE=64", NULL};
    const char *argv[] = {RZREAL, "capture", "past", NULL};
    cr_assert_eq(run(env, argv), 0, "%s", out);
    cr_assert(strstr(out, "rzreal: end of capture: 0\n"), "%s", out);
    const char *report = VIOLATION_1000 "  kernels launched since alloc#0 was last seen clean (most recent first): "
                         "past\nredzone: alloc#0 was violated when it was freed\n";
    const char *once = strstr(out, report), *launched = strstr(out, "rzreal: graph launched once\n");
    cr_assert(once && launched && once < launched, "the first launch's report: %s", out);
    cr_assert(strstr(launched, VIOLATION_1000), "the second launch's: %s", out);
    cr_assert(strstr(out, "rzreal: graph launched twice\n"), "%s", out);
    cr_assert_eq(count(out, "REDZONE VIOLATION"), 2, "%s", out);
    cr_assert(!strstr(out, "warning"), "%s", out);
}

/* A kernel earlier on the stream waits for a flag the host sets after cuMemAllocAsync returns: the allocation
 * must not wait for the stream (it did: the program never finished), nor make any host wait; nothing is
 * reported while the band's memset is still queued (a sync of another stream then), and an overrun after it
 * landed is reported once. (A scan right after the allocation: streamorder::, and gdb case filling.) */
Test(semantics, stream_ordered_allocation_behind_a_waiting_kernel_returns, .timeout = 60) {
    const char *env[] = {PRELOAD, EMU, "METRALE_REDZONE=64", "METRALE_REDZONE_SCAN=free,exit,sync", NULL};
    const char *argv[] = {RZREAL, "asyncalloc", NULL};
    cr_assert_eq(run(env, argv), 0, "%s", out);
    cr_assert(strstr(out, "rzreal: allocated behind a kernel waiting for the host; host waits: 0\n"
                          "rzreal: another stream synchronised before the band's memset ran\n"), "%s", out);
    cr_assert(strstr(out, VIOLATION_1000), "%s", out);
    cr_assert(strstr(out, "redzone scan: 1 zones checked, 1 violated\nrzreal: written past the end after the band "
                          "landed\n"), "%s", out);
    cr_assert_eq(count(out, "REDZONE VIOLATION"), 1, "%s", out);
}
