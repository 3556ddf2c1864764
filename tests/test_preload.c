/*
 * Unmodified programs with libredzone.so preloaded, on the emulated driver: every interposed entry point
 * through each lookup path, the scan policies, kernel attribution, fork, several contexts, MIN_IDX and
 * TRACE_IDX end to end, the out-of-memory fallback, `redzone run` and its exit codes, and proof that the
 * program's own bytes and the driver's result codes are unchanged.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "spawn.h"

struct run {
    int status; /* exit code, or 128 + signal */
    char out[1 << 16];
};

static void run(struct run *r, const char *const *env, const char *const *argv) {
    r->status = spawn_capture(env, argv, r->out, sizeof r->out);
}

#define PRELOAD "LD_PRELOAD=" LIBREDZONE
#define EMU "LD_LIBRARY_PATH=" EMU_DIR

static struct run R;

static void expect_zone_lines(const char *out, int zones) {
    for (int i = 0; i < zones; i++) {
        char line[160];
        snprintf(line, sizeof line, "REDZONE VIOLATION alloc#%d ", i);
        cr_assert_eq(count(out, line), 1, "zone %d reported once:\n%s", i, out);
    }
    cr_assert_eq(count(out, "REDZONE VIOLATION"), zones, "%s", out);
}

static void check_paths(const char *how) {
    const char *env[] = {PRELOAD, EMU, "METRALE_REDZONE=64", NULL};
    const char *argv[] = {RZPROG, "paths", how, NULL};
    run(&R, env, argv);
    cr_assert_eq(R.status, 0, "%s", R.out);
    expect_zone_lines(R.out, 7);
    /* One byte past the end of each, reported when freed (stream-ordered for the async frees). */
    cr_assert_eq(count(R.out, "bytes [0..=0] past the end were written (1 of "), 7, "%s", R.out);
    cr_assert_eq(count(R.out, "was violated when it was freed"), 7, "%s", R.out);
    cr_assert(strstr(R.out, "REDZONE VIOLATION alloc#0 user_bytes=100 pad=64 :"), "%s", R.out);
    cr_assert(strstr(R.out, "REDZONE VIOLATION alloc#2 user_bytes=1024 pad=512 :"), "pitched: whole rows, %s", R.out);
    /* The program sees its own range, not the padded one. */
    cr_assert_eq(count(R.out, "range base ok 1 size 100 (user 100)"), 6, "%s", R.out);
    cr_assert_eq(count(R.out, "range base ok 1 size 1024 (user 1024)"), 1, "%s", R.out);
    cr_assert(strstr(R.out, "redzone: exit: 0 violated at exit; 7 violations in 1 scans; 7 allocations, 0 live"), "%s", R.out);
}

Test(preload, direct_link) { check_paths("direct"); }
Test(preload, dlopen_dlsym) {
    check_paths("dlsym");
    cr_assert_eq(count(R.out, "same as the global definition, in libredzone"), 15,
                 "sync, launch, copy, memset and lookup entry points:\n%s", R.out);
    cr_assert_eq(count(R.out, "DIFFERENT"), 0, "%s", R.out);
}

Test(preload, cuGetProcAddress_versions_and_flags) {
    check_paths("procaddr");
    cr_assert_eq(count(R.out, "same as the global definition, in libredzone"), 26,
                 "every entry point handed out is the wrapper:\n%s", R.out);
    cr_assert_eq(count(R.out, "DIFFERENT"), 0, "%s", R.out);
}

Test(preload, without_the_library_nothing_is_reported) {
    const char *env[] = {EMU, "METRALE_REDZONE=64", NULL};
    const char *argv[] = {RZPROG, "paths", "direct", NULL};
    run(&R, env, argv);
    cr_assert_eq(R.status, 0, "%s", R.out);
    cr_assert_eq(count(R.out, "REDZONE"), 0);
    cr_assert_eq(count(R.out, "in libredzone"), 0);
    cr_assert_eq(count(R.out, "rzprog: overrun refused by the driver: 1"), 7, "no bands to absorb them: %s", R.out);
}

Test(preload, scan_policy_free_only) {
    const char *env[] = {PRELOAD, EMU, "METRALE_REDZONE=32", "METRALE_REDZONE_SCAN=free", NULL};
    const char *argv[] = {RZPROG, "nofree", NULL};
    run(&R, env, argv);
    cr_assert_eq(R.status, 0);
    cr_assert_eq(count(R.out, "REDZONE VIOLATION"), 0, "never freed, no exit scan: %s", R.out);
    cr_assert_eq(count(R.out, "redzone: exit:"), 0);
}

Test(preload, scan_policy_exit_finds_a_leaked_zone) {
    const char *env[] = {PRELOAD, EMU, "METRALE_REDZONE=32", NULL};
    const char *argv[] = {RZPROG, "nofree", NULL};
    run(&R, env, argv);
    cr_assert_eq(R.status, 0);
    cr_assert(strstr(R.out, "REDZONE VIOLATION alloc#0 user_bytes=128 pad=32 : bytes [0..=0] past the end were "
                            "written (1 of 32 pad bytes changed), first bad value 0x11\n"), "%s", R.out);
    cr_assert(strstr(R.out, "redzone scan: 1 zones checked, 1 violated\n"), "%s", R.out);
    cr_assert(strstr(R.out, "redzone: exit: 1 violated at exit; 1 violations in 1 scans; 1 allocations, 1 live, 0 unpadded\n"),
              "%s", R.out);
}

Test(preload, scan_policy_none) {
    const char *env[] = {PRELOAD, EMU, "METRALE_REDZONE=32", "METRALE_REDZONE_SCAN=none", NULL};
    const char *argv[] = {RZPROG, "sync", NULL};
    run(&R, env, argv);
    cr_assert_eq(R.status, 0);
    cr_assert_eq(count(R.out, "REDZONE"), 0, "%s", R.out);
}

Test(preload, scan_policy_sync_scans_when_the_sync_returns) {
    const char *env[] = {PRELOAD, EMU, "METRALE_REDZONE=32", "METRALE_REDZONE_SCAN=sync", NULL};
    const char *argv[] = {RZPROG, "sync", NULL};
    run(&R, env, argv);
    cr_assert_eq(R.status, 0);
    const char *before = strstr(R.out, "rzprog: before sync"), *v = strstr(R.out, "REDZONE VIOLATION alloc#0"),
               *after = strstr(R.out, "rzprog: after sync");
    cr_assert(before && v && after && before < v && v < after, "reported inside cuCtxSynchronize:\n%s", R.out);
    cr_assert_eq(count(R.out, "REDZONE VIOLATION"), 1, "no free-time report with scan=sync only: %s", R.out);
}

Test(preload, bad_scan_list_warns_and_keeps_the_default) {
    const char *env[] = {PRELOAD, EMU, "METRALE_REDZONE=32", "METRALE_REDZONE_SCAN=free,later", NULL};
    const char *argv[] = {RZPROG, "nofree", NULL};
    run(&R, env, argv);
    cr_assert_eq(count(R.out, "redzone: warning: METRALE_REDZONE_SCAN=\"free,later\" is not a comma list of free, "
                              "sync, launch, exit, fatal, none; using free,exit,fatal"), 1, "%s", R.out);
    cr_assert_eq(count(R.out, "REDZONE VIOLATION"), 1, "the default includes exit: %s", R.out);
}

Test(preload, kernel_attribution_names_the_kernels_since_the_zone_existed) {
    const char *env[] = {PRELOAD, EMU, "METRALE_REDZONE=64", "METRALE_REDZONE_SCAN=sync", NULL};
    const char *argv[] = {RZPROG, "kernels", NULL};
    run(&R, env, argv);
    cr_assert_eq(R.status, 0, "%s", R.out);
    cr_assert(strstr(R.out, "REDZONE VIOLATION alloc#1 user_bytes=64 pad=64 : bytes [0..=0] past the end were "
                            "written (1 of 64 pad bytes changed), first bad value 0x77\n"
                            "  kernels launched since alloc#1 was last seen clean (most recent first): touch, touch\n"),
              "two launches after alloc#1 existed, not the one before:\n%s", R.out);
}

Test(preload, fork_child_does_not_scan_its_parents_zones) {
    const char *env[] = {PRELOAD, EMU, "METRALE_REDZONE=32", NULL};
    const char *argv[] = {RZPROG, "fork", NULL};
    run(&R, env, argv);
    cr_assert_eq(R.status, 0, "%s", R.out);
    cr_assert(strstr(R.out, "rzprog: child exits"));
    cr_assert(strstr(R.out, "rzprog: child status 0"));
    cr_assert_eq(count(R.out, "REDZONE VIOLATION alloc#0"), 1, "reported once, by the parent: %s", R.out);
    cr_assert_eq(count(R.out, "redzone: exit:"), 1, "%s", R.out);
}

Test(preload, several_devices_and_contexts) {
    const char *env[] = {PRELOAD, EMU, "METRALE_REDZONE=32", "CUDA_EMU_DEVICES=2", NULL};
    const char *argv[] = {RZPROG, "multictx", NULL};
    run(&R, env, argv);
    cr_assert_eq(R.status, 0, "%s", R.out);
    cr_assert(strstr(R.out, "REDZONE VIOLATION alloc#0 user_bytes=300 pad=32"), "%s", R.out);
    cr_assert(strstr(R.out, "REDZONE VIOLATION alloc#1 user_bytes=200 pad=32"), "%s", R.out);
    cr_assert(strstr(R.out, "redzone scan: 2 zones checked, 2 violated"), "%s", R.out);
}

Test(preload, min_idx_and_trace_idx_end_to_end) {
    const char *env[] = {PRELOAD, EMU, "METRALE_REDZONE=32", "METRALE_REDZONE_MIN_IDX=1",
                         "METRALE_REDZONE_TRACE_IDX=2", NULL};
    const char *argv[] = {RZPROG, "three", NULL};
    run(&R, env, argv);
    cr_assert_eq(R.status, 0);
    cr_assert_eq(count(R.out, "REDZONE VIOLATION alloc#0"), 0, "below MIN_IDX: %s", R.out);
    cr_assert_eq(count(R.out, "rzprog: overrun refused by the driver"), 1, "alloc#0 has no band: %s", R.out);
    cr_assert_eq(count(R.out, "REDZONE VIOLATION alloc#1"), 1, "%s", R.out);
    cr_assert_eq(count(R.out, "REDZONE VIOLATION alloc#2"), 1, "%s", R.out);
    cr_assert_eq(count(R.out, "METRALE_REDZONE_TRACE_IDX=2: allocation #2 (user_bytes=32 pad=32) made here"), 1, "%s", R.out);
    cr_assert(strstr(R.out, " in main+0x"), "the backtrace names the program's (hidden) main: %s", R.out);
    cr_assert(strstr(R.out, "made here:\n    #0 0x"), "%s", R.out);
    cr_assert_eq(count(R.out, "libredzone"), 0, "the program's frames, not redzone's: %s", R.out);
}

Test(preload, out_of_memory_with_a_band_falls_back_unpadded) {
    const char *env[] = {PRELOAD, EMU, "METRALE_REDZONE=32", "CUDA_EMU_FAIL=cuMemAlloc_v2:1:CUDA_ERROR_OUT_OF_MEMORY", NULL};
    const char *argv[] = {RZPROG, "nofree", NULL};
    run(&R, env, argv);
    cr_assert_eq(R.status, 0, "the program still gets its memory: %s", R.out);
    cr_assert_eq(count(R.out, "redzone: warning: allocation #0 of 128 bytes: out of memory with 32 pad bytes; "
                              "retrying without a band"), 1, "%s", R.out);
    cr_assert(strstr(R.out, "1 allocations, 1 live, 1 unpadded"), "%s", R.out);
    cr_assert(strstr(R.out, "rzprog: overrun refused by the driver: 1"), "no band: %s", R.out);
}

Test(preload, program_bytes_and_driver_results_unchanged) {
    static struct run with, without;
    const char *argv[] = {RZPROG, "data", NULL};
    const char *env_with[] = {PRELOAD, EMU, "METRALE_REDZONE=64", "METRALE_REDZONE_LOG=/dev/null", NULL};
    const char *env_without[] = {EMU, NULL};
    run(&with, env_with, argv);
    run(&without, env_without, argv);
    cr_assert_eq(with.status, 0, "%s", with.out);
    cr_assert_eq(without.status, 0, "%s", without.out);
    cr_assert(strstr(without.out, "checksum "), "%s", without.out);
    cr_assert(strstr(without.out, "free interior -> 1"), "%s", without.out);
    cr_assert_str_eq(with.out, without.out);
}

/* ---- redzone run ------------------------------------------------------------------------------------- */
Test(redzone_run, reports_with_the_exact_line_at_free_and_keeps_the_exit_code) {
    const char *argv[] = {REDZONE_CLI, "run", "--emulated-device", "--", RZPROG, "exit", "5", "1", NULL};
    run(&R, NULL, argv);
    cr_assert_eq(R.status, 5, "the program's exit code: %s", R.out);
    cr_assert(strstr(R.out, "REDZONE VIOLATION alloc#0 user_bytes=32 pad=64 : bytes [0..=0] past the end were "
                            "written (1 of 64 pad bytes changed), first bad value 0x11\n"), "on at 64 bytes: %s", R.out);
}

Test(redzone_run, error_exitcode_only_when_violations_were_found) {
    const char *bad[] = {REDZONE_CLI, "run", "--emulated-device", "--error-exitcode", "42", "--", RZPROG, "exit", "0", "1", NULL};
    run(&R, NULL, bad);
    cr_assert_eq(R.status, 42, "%s", R.out);
    const char *good[] = {REDZONE_CLI, "run", "--emulated-device", "--error-exitcode", "42", "--", RZPROG, "exit", "3", "0", NULL};
    run(&R, NULL, good);
    cr_assert_eq(R.status, 3, "%s", R.out);
}

/* docs/running.md, "Exit status and signals": N "when --error-exitcode N was given and a violation was found",
 * the program's own status otherwise. So a violation (a kernel's store past the end) wins over the program's
 * own non-zero exit code: 42, not 3. (The library has no exit-code option of its own: options.inc only
 * writes the summary line the launcher reads.) */
Test(redzone_run, error_exitcode_wins_over_the_programs_own_nonzero_code) {
    const char *argv[] = {REDZONE_CLI, "run", "--emulated-device", "--error-exitcode", "42", "--", RZPROG, "exit", "3", "1", NULL};
    run(&R, NULL, argv);
    cr_assert(strstr(R.out, "REDZONE VIOLATION alloc#0 user_bytes=32"), "the violation was reported: %s", R.out);
    cr_assert_eq(R.status, 42, "the violation's code, not the program's 3: %s", R.out);
}

/* As in `redzone bisect` (docs/running.md): the command line wins over the environment. */
Test(redzone_run, options_map_to_variables_and_an_option_wins_over_the_variable) {
    const char *argv[] = {REDZONE_CLI, "run", "--emulated-device", "--bytes", "16", "--fill", "7", "--scan", "exit",
                          "--", RZPROG, "nofree", NULL};
    run(&R, NULL, argv);
    cr_assert(strstr(R.out, "REDZONE VIOLATION alloc#0 user_bytes=128 pad=16 :"), "%s", R.out);
    const char *env[] = {"METRALE_REDZONE=48", NULL};
    run(&R, env, argv);
    cr_assert(strstr(R.out, "REDZONE VIOLATION alloc#0 user_bytes=128 pad=16 :"), "the option wins: %s", R.out);
    const char *no_bytes[] = {REDZONE_CLI, "run", "--emulated-device", "--fill", "7", "--scan", "exit", "--", RZPROG,
                              "nofree", NULL};
    run(&R, env, no_bytes);
    cr_assert(strstr(R.out, "REDZONE VIOLATION alloc#0 user_bytes=128 pad=48 :"), "the variable applies: %s", R.out);
}

Test(redzone_run, bad_usage_is_refused_with_usage) {
    const char *nothing[] = {REDZONE_CLI, "run", "--emulated-device", NULL};
    run(&R, NULL, nothing);
    cr_assert_eq(R.status, 2, "%s", R.out);
    cr_assert(strstr(R.out, "usage: redzone run"), "%s", R.out);
    const char *fill[] = {REDZONE_CLI, "run", "--fill", "300", "--", RZPROG, NULL};
    run(&R, NULL, fill);
    cr_assert_eq(R.status, 2);
    cr_assert(strstr(R.out, "is not a byte"), "%s", R.out);
    const char *missing[] = {REDZONE_CLI, "run", "--", "/nonexistent/program", NULL};
    run(&R, NULL, missing);
    cr_assert_eq(R.status, 127, "%s", R.out);
}

Test(redzone_run, help_documents_every_option) {
    const char *argv[] = {REDZONE_CLI, "run", "--help", NULL};
    run(&R, NULL, argv);
    cr_assert_eq(R.status, 0);
    const char *flags[] = {"--bytes", "--fill", "--min-idx", "--trace-idx", "--scan", "--log", "--poison",
                           "--error-exitcode", "--emulated-device", "METRALE_REDZONE_SCAN", "METRALE_REDZONE_POISON"};
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
        cr_assert(strstr(R.out, flags[i]), "help lacks %s:\n%s", flags[i], R.out);
    const char *top[] = {REDZONE_CLI, "--help", NULL};
    run(&R, NULL, top);
    cr_assert_eq(R.status, 0);
    cr_assert(strstr(R.out, "run     run a program with red zones"), "%s", R.out);
    cr_assert(strstr(R.out, "bisect  find the allocation a program reads past the end of"), "%s", R.out);
}

/* The examples, as the demo runs them. */
Test(examples, copy_overrun_refused_and_reported) {
    const char *argv[] = {REDZONE_CLI, "run", "--emulated-device", "--", EXAMPLES "/copy_overrun", NULL};
    run(&R, NULL, argv);
    cr_assert_eq(R.status, 0, "%s", R.out);
    cr_assert(strstr(R.out, "redzone: copy past the end of alloc#1: bytes [0..=7] written by cuMemcpyHtoD "
                            "(user_bytes=1000); nothing copied, CUDA_ERROR_INVALID_VALUE returned as without redzone\n"),
              "%s", R.out);
    cr_assert(strstr(R.out, "copy_overrun: copying 1008 bytes into a 1000-byte buffer: CUDA_ERROR_INVALID_VALUE\n"),
              "the driver's answer without redzone: %s", R.out);
    cr_assert(strstr(R.out, "; 1 violations in 1 scans; 3 allocations, 0 live, 0 unpadded\n"), "%s", R.out);
    cr_assert_eq(count(R.out, "REDZONE VIOLATION"), 0, "nothing reached a band: %s", R.out);
}

Test(examples, kernel_overrun_reported_at_exit_with_the_kernel) {
    const char *argv[] = {REDZONE_CLI, "run", "--emulated-device", "--", EXAMPLES "/kernel_overrun", NULL};
    run(&R, NULL, argv);
    cr_assert_eq(R.status, 0, "%s", R.out);
    cr_assert(strstr(R.out, "REDZONE VIOLATION alloc#1 user_bytes=1000 pad=64 : bytes [0..=7] past the end were "
                            "written (8 of 64 pad bytes changed), first bad value 0x5a\n"
                            "  kernels launched since alloc#1 was last seen clean (most recent first): write_past, write_past\n"),
              "%s", R.out);
    cr_assert(strstr(R.out, "redzone: exit: 1 violated at exit"), "%s", R.out);
}

Test(examples, read_overrun_output_follows_the_fill) {
    const char *fill0[] = {REDZONE_CLI, "run", "--emulated-device", "--fill", "0", "--", EXAMPLES "/read_overrun", NULL};
    run(&R, NULL, fill0);
    cr_assert(strstr(R.out, "read_overrun: sum = 1000\n"), "%s", R.out);
    const char *fill1[] = {REDZONE_CLI, "run", "--emulated-device", "--fill", "1", "--", EXAMPLES "/read_overrun", NULL};
    run(&R, NULL, fill1);
    cr_assert(strstr(R.out, "read_overrun: sum = 1001\n"), "%s", R.out);
    cr_assert_eq(count(R.out, "REDZONE VIOLATION"), 0, "a read changes no band: %s", R.out);
}

/* A violation found at free time prints the allocation stack too (issue 21.5): the zone judged there is a copy
 * of the removed node, whose stack slot the next allocation may reuse; the frames are copied at the removal. */
Test(preload, free_time_violation_prints_the_allocation_stack) {
    const char *env[] = {PRELOAD, EMU, "METRALE_REDZONE=64", "METRALE_REDZONE_STACKS=8", NULL};
    const char *argv[] = {RZPROG, "exit", "0", "1", NULL};
    run(&R, env, argv);
    cr_assert_eq(R.status, 0, "%s", R.out);
    const char *v = strstr(R.out, "REDZONE VIOLATION alloc#0 ");
    const char *at = strstr(R.out, "  alloc#0 was allocated at:\n    #0 0x");
    const char *freed = strstr(R.out, "redzone: alloc#0 was violated when it was freed\n");
    cr_assert(v && at && freed && v < at && at < freed, "%s", R.out);
    cr_assert(strstr(at, " in main+0x"), "the program's own frame is named: %s", R.out);
}

/* METRALE_REDZONE_SCAN=sync scans only when device work was queued since the last scan (issue 20.4): an idle
 * synchronisation makes no driver call; the overrun is reported once. */
Test(preload, sync_scan_skips_idle_synchronisations) {
    const char *env[] = {PRELOAD, EMU, "METRALE_REDZONE=64", "METRALE_REDZONE_SCAN=sync,free,exit", NULL};
    const char *argv[] = {RZPROG, "idlesync", NULL};
    run(&R, env, argv);
    cr_assert_eq(R.status, 0, "%s", R.out);
    cr_assert(strstr(R.out, "idlesync: band driver calls for 10 idle syncs: 0\n"), "%s", R.out);
    cr_assert(strstr(R.out, "idlesync: a sync after device work reads bands: 1\n"), "%s", R.out);
    cr_assert(strstr(R.out, "idlesync: band driver calls for 10 more idle syncs: 0\n"), "%s", R.out);
    cr_assert_eq(count(R.out, "REDZONE VIOLATION alloc#5 "), 1, "%s", R.out);
    cr_assert_eq(count(R.out, "redzone scan: 100 zones checked"), 2, "two syncs followed device work: %s", R.out);
}

/* Sync scans read only the contexts that received device work since their last scan (issue 20.4): with zones
 * in two contexts, a sync after a memset in one reads that one's bands (it read both: 200 zones, two batches,
 * the other context pushed and popped); an idle sync adds no driver call. */
Test(preload, sync_scan_reads_only_the_contexts_with_work) {
    const char *env[] = {PRELOAD, EMU, "METRALE_REDZONE=64", "METRALE_REDZONE_SCAN=sync", NULL};
    const char *argv[] = {RZPROG, "ctxsync", NULL};
    run(&R, env, argv);
    cr_assert_eq(R.status, 0, "%s", R.out);
    const char *both = strstr(R.out, "redzone scan: 200 zones checked, 0 violated\n");
    const char *first = strstr(R.out, "ctxsync: work in both contexts synchronised\n");
    cr_assert(both && first && both < first, "work in both: both judged at the first sync:\n%s", R.out);
    cr_assert(strstr(R.out, "ctxsync: driver calls of an idle sync: 1\n"), "only the program's own: %s", R.out);
    /* The memset and its context; the sync, its context, and a scan of one context: the current context,
     * one batch copy, one synchronisation of the library's stream. */
    cr_assert(strstr(R.out, "ctxsync: driver calls of a memset: 2; of the sync after it: 5, 1 batch copies, 0 "
                            "context pushes, 0 stream queries\n"), "%s", R.out);
    cr_assert_eq(count(R.out, "redzone scan: 100 zones checked, 0 violated\n"), 1, "%s", R.out);
    cr_assert_eq(count(R.out, "redzone scan:"), 2, "%s", R.out);
}

/* Lazy install: a band is written just before the program's next copy, memset or launch, in batches; an
 * allocation freed before any of them costs no driver call at all. */
Test(preload, bands_are_installed_lazily_before_device_work) {
    /* The band's cost alone: the quarantine's fill of each freed block is counted in test_quarantine.c. */
    const char *env[] = {PRELOAD, EMU, "METRALE_REDZONE=64", "METRALE_REDZONE_QUARANTINE=0", NULL};
    const char *argv[] = {RZPROG, "lazy", NULL};
    run(&R, env, argv);
    cr_assert_eq(R.status, 0, "%s", R.out);
    cr_assert(strstr(R.out, "lazy: after alloc band[0]=0x") && !strstr(R.out, "lazy: after alloc band[0]=0xee"),
              "not written at the allocation: %s", R.out);
    cr_assert(strstr(R.out, "lazy: band driver calls for 100 alloc+free pairs: 0\n"), "%s", R.out);
    cr_assert(strstr(R.out, "lazy: after memset band[0]=0xee band[63]=0xee user[99]=0x5a\n"),
              "written before the memset, which kept its bytes: %s", R.out);
    cr_assert(strstr(R.out, "lazy: batched band writes during 1100 allocations: 0\n"),
              "no count of waiting zones forces an install: %s", R.out);
    cr_assert(strstr(R.out, "lazy: band driver calls for 600 FIFO churn steps, 1100 live: 0\n"), "%s", R.out);
    cr_assert(strstr(R.out, "lazy: band driver calls for 600 random churn steps, 1100 live: 0\n"), "%s", R.out);
    cr_assert_eq(count(R.out, "REDZONE VIOLATION"), 0, "%s", R.out);
    cr_assert(strstr(R.out, "redzone: exit: 0 violated at exit; 0 violations in 1 scans; 3501 allocations, 0 live"),
              "%s", R.out);
}

Test(preload, eager_install_writes_the_band_at_the_allocation) {
    const char *env[] = {PRELOAD, EMU, "METRALE_REDZONE=64", "METRALE_REDZONE_INSTALL=eager", NULL};
    const char *argv[] = {RZPROG, "lazy", NULL};
    run(&R, env, argv);
    cr_assert_eq(R.status, 0, "%s", R.out);
    cr_assert(strstr(R.out, "lazy: after alloc band[0]=0xee\n"), "%s", R.out);
    cr_assert(!strstr(R.out, "lazy: band driver calls for 100 alloc+free pairs: 0\n"), "eager pays per pair: %s", R.out);
}

Test(preload, bad_install_value_warns_once_and_stays_lazy) {
    const char *env[] = {PRELOAD, EMU, "METRALE_REDZONE=64", "METRALE_REDZONE_INSTALL=sometimes",
                         "METRALE_REDZONE_QUARANTINE=0", NULL};
    const char *argv[] = {RZPROG, "lazy", NULL};
    run(&R, env, argv);
    cr_assert_eq(R.status, 0, "%s", R.out);
    cr_assert_eq(count(R.out, "redzone: warning: METRALE_REDZONE_INSTALL=\"sometimes\" is not lazy or eager; using lazy"), 1,
                 "%s", R.out);
    cr_assert(strstr(R.out, "lazy: band driver calls for 100 alloc+free pairs: 0\n"), "%s", R.out);
}

Test(preload, zones_whose_context_died_before_their_bands_were_written) {
    const char *env[] = {PRELOAD, EMU, "METRALE_REDZONE=64", NULL};
    const char *argv[] = {RZPROG, "ctxgone", NULL};
    run(&R, env, argv);
    cr_assert_eq(R.status, 0, "%s", R.out);
    cr_assert(strstr(R.out, "ctxgone: address handed out again: 1\n"), "the emulator reuses the address: %s", R.out);
    /* The destroy is seen: both zones get their bands, are checked and forgotten with their context, so the
     * reused address is a new zone and nothing is found unknown later. */
    cr_assert_eq(count(R.out, "no longer known to the driver"), 0, "%s", R.out);
    cr_assert_eq(count(R.out, "REDZONE VIOLATION"), 0, "%s", R.out);
    cr_assert(!strstr(R.out, "redzone scan:"), "an exit scan that checks nothing prints no scan line: %s", R.out);
    cr_assert(strstr(R.out, "redzone: exit: 0 violated at exit;"), "%s", R.out);
    cr_assert(strstr(R.out, "4 allocations, 0 live"), "both stale zones counted as released: %s", R.out);
}

/* METRALE_REDZONE_STACKS: where the violated zone was allocated, under its report (program frames only). */
Test(preload, allocation_stacks_under_violation_reports) {
    const char *env[] = {PRELOAD, EMU, "METRALE_REDZONE=64", "METRALE_REDZONE_SCAN=sync", "METRALE_REDZONE_STACKS=3",
                         NULL};
    const char *argv[] = {RZPROG, "kernels", NULL};
    run(&R, env, argv);
    cr_assert_eq(R.status, 0, "%s", R.out);
    const char *at = strstr(R.out, "REDZONE VIOLATION alloc#1 user_bytes=64 pad=64 : bytes [0..=0] past the end were "
                                   "written (1 of 64 pad bytes changed), first bad value 0x77\n"
                                   "  alloc#1 was allocated at:\n    #0 0x");
    cr_assert(at, "%s", R.out);
    cr_assert(strstr(at, " in mode_kernels+0x") || strstr(at, " in main+0x"), "the program's frame: %s", R.out);
    cr_assert_eq(count(R.out, "libredzone"), 0, "redzone's own frames are left out: %s", R.out);
    cr_assert_eq(count(R.out, "    #3 "), 0, "at most 3 frames: %s", R.out);
}

Test(preload, bad_stack_depth_warns_and_keeps_none) {
    const char *env[] = {PRELOAD, EMU, "METRALE_REDZONE=64", "METRALE_REDZONE_SCAN=sync", "METRALE_REDZONE_STACKS=99",
                         NULL};
    const char *argv[] = {RZPROG, "kernels", NULL};
    run(&R, env, argv);
    cr_assert_eq(R.status, 0, "%s", R.out);
    cr_assert_eq(count(R.out, "redzone: warning: METRALE_REDZONE_STACKS=\"99\" is not a frame count 0-32; using 0 (off)"),
                 1, "%s", R.out);
    cr_assert_eq(count(R.out, "was allocated at:"), 0, "%s", R.out);
}

/* METRALE_REDZONE_SCAN=fatal (default): one last scan when the program dies of a signal; the signal's
 * default action then runs, so the exit status (and any core) is the crash's. */
static void expect_fatal_scan(const char *how, const char *signame, int sig) {
    const char *env[] = {PRELOAD, EMU, "METRALE_REDZONE=64", NULL};
    const char *argv[] = {RZPROG, "crash", how, NULL};
    run(&R, env, argv);
    cr_assert_eq(R.status, 128 + sig, "died of %s: %s", signame, R.out);
    char line[128];
    snprintf(line, sizeof line, "rzprog: about to die\nredzone: %s: one final scan before the process dies\n", signame);
    const char *at = strstr(R.out, line);
    cr_assert(at, "%s", R.out);
    cr_assert(strstr(at, "REDZONE VIOLATION alloc#0 user_bytes=128 pad=64 : bytes [0..=0] past the end were written"),
              "%s", R.out);
    cr_assert(strstr(at, "redzone scan: 1 zones checked, 1 violated"), "%s", R.out);
    cr_assert_eq(count(R.out, "one final scan"), 1, "once: %s", R.out);
    cr_assert_eq(count(R.out, "redzone: exit:"), 0, "no exit scan on a signal death: %s", R.out);
}

Test(preload, fatal_signal_final_scan_on_sigsegv) { expect_fatal_scan("segv", "SIGSEGV", SIGSEGV); }

Test(preload, fatal_signal_final_scan_on_abort) { expect_fatal_scan("abort", "SIGABRT", SIGABRT); }

Test(preload, fatal_signal_scan_can_be_left_out) {
    const char *env[] = {PRELOAD, EMU, "METRALE_REDZONE=64", "METRALE_REDZONE_SCAN=free,exit", NULL};
    const char *argv[] = {RZPROG, "crash", "segv", NULL};
    run(&R, env, argv);
    cr_assert_eq(R.status, 128 + SIGSEGV, "%s", R.out);
    cr_assert_eq(count(R.out, "final scan"), 0, "%s", R.out);
}

Test(preload, fatal_signal_scan_without_agent_says_skipped) {
    const char *env[] = {PRELOAD, EMU, "METRALE_REDZONE=64", "METRALE_REDZONE_AGENT=0", NULL};
    const char *argv[] = {RZPROG, "crash", "segv", NULL};
    run(&R, env, argv);
    cr_assert_eq(R.status, 128 + SIGSEGV, "%s", R.out);
    cr_assert(strstr(R.out, "redzone: final scan skipped: no agent thread (METRALE_REDZONE_AGENT=0)\n"), "%s", R.out);
}

/* METRALE_REDZONE_FRONT: a band before the start, the pointer still 256-byte aligned, the program's range
 * as it asked for it; writes before the start reported on their own line kind. */
Test(preload, front_bands_catch_writes_before_the_start) {
    const char *env[] = {PRELOAD, EMU, "METRALE_REDZONE=64", "METRALE_REDZONE_FRONT=200", NULL};
    const char *argv[] = {RZPROG, "front", NULL};
    run(&R, env, argv);
    cr_assert_eq(R.status, 0, "%s", R.out);
    cr_assert(strstr(R.out, "front: aligned 1 1\n"), "%s", R.out);
    cr_assert(strstr(R.out, "front: range inside 0 base ok 1 size 100\n"), "%s", R.out);
    cr_assert(strstr(R.out, "front: range in the front band 500\n"), "CUDA_ERROR_NOT_FOUND: %s", R.out);
    cr_assert(strstr(R.out, "REDZONE VIOLATION alloc#0 user_bytes=100 front=256 : bytes [-1..=-1] before the start "
                            "were written (1 of 256 front bytes changed), first bad value 0x11\n"
                            "redzone: alloc#0 was violated when it was freed\n"), "at free: %s", R.out);
    cr_assert(strstr(R.out, "REDZONE VIOLATION alloc#1 user_bytes=300 front=256 : bytes [-40..=-33] before the start "
                            "were written (8 of 256 front bytes changed), first bad value 0x22\n"), "at exit: %s", R.out);
    cr_assert_eq(count(R.out, "REDZONE VIOLATION"), 2, "no false reports (the pitched block has no front band): %s",
                 R.out);
    cr_assert(strstr(R.out, "redzone: exit: 1 violated at exit; 2 violations in 1 scans; 3 allocations, 1 live"),
              "%s", R.out);
}

Test(preload, bad_front_size_warns_and_keeps_none) {
    const char *env[] = {PRELOAD, EMU, "METRALE_REDZONE=64", "METRALE_REDZONE_FRONT=2000000", NULL};
    const char *argv[] = {RZPROG, "nofree", NULL};
    run(&R, env, argv);
    cr_assert_eq(count(R.out, "redzone: warning: METRALE_REDZONE_FRONT=\"2000000\" is not a number of bytes up to "
                              "1048576; using 0 (no front bands)"), 1, "%s", R.out);
    cr_assert_eq(count(R.out, "REDZONE VIOLATION"), 1, "the band after the end still works: %s", R.out);
}

/* METRALE_REDZONE_GUARD: a hardware guard page after the buffer (VMM on the emulated driver). */
static void run_guard(const char *how) {
    const char *env[] = {PRELOAD, EMU, "METRALE_REDZONE=64", "METRALE_REDZONE_GUARD=idx:0", NULL};
    const char *argv[] = {RZPROG, "guard", how, NULL};
    run(&R, env, argv);
}

Test(preload, guard_page_allocation_works_and_is_fully_released) {
    run_guard("free");
    cr_assert_eq(R.status, 0, "%s", R.out);
    cr_assert(strstr(R.out, "guard: aligned 1\nguard: round trip 1\nguard: copy into the guard granule refused 1\n"),
              "%s", R.out);
    cr_assert(strstr(R.out, "guard: live: physical 2097152 reserved 4194304 mapped 2097152 allocations 1\n"),
              "1000 bytes in one 2 MiB granule, one more reserved: %s", R.out);
    cr_assert(strstr(R.out, "guard: after free: physical 0 reserved 0 mapped 0 allocations 0\n"), "%s", R.out);
    cr_assert_eq(count(R.out, "REDZONE VIOLATION"), 0, "%s", R.out);
}

Test(preload, guard_page_slack_is_an_ordinary_band) {
    run_guard("slack");
    cr_assert_eq(R.status, 0, "%s", R.out);
    cr_assert(strstr(R.out, "REDZONE VIOLATION alloc#0 user_bytes=1000 pad=24 : bytes [0..=0] past the end were "
                            "written (1 of 24 pad bytes changed), first bad value 0x55\n"), "%s", R.out);
}

Test(preload, guard_page_faults_a_kernel_writing_past_the_end) {
    run_guard("write");
    cr_assert_eq(R.status, 128 + SIGSEGV, "%s", R.out);
    cr_assert(strstr(R.out, "rzprog: launching a kernel that writes past the end\n"), "%s", R.out);
    cr_assert(!strstr(R.out, "not reached"), "%s", R.out);
    cr_assert(strstr(R.out, "redzone: SIGSEGV: one final scan before the process dies\n"), "%s", R.out);
}

Test(preload, guard_page_faults_a_kernel_reading_past_the_end) {
    run_guard("read");
    cr_assert_eq(R.status, 128 + SIGSEGV, "%s", R.out);
    cr_assert(!strstr(R.out, "not reached"), "%s", R.out);
}

Test(preload, bad_guard_selection_warns_and_uses_none) {
    const char *env[] = {PRELOAD, EMU, "METRALE_REDZONE=64", "METRALE_REDZONE_GUARD=idx:1,,2", NULL};
    const char *argv[] = {RZPROG, "guard", "free", NULL};
    run(&R, env, argv);
    cr_assert_eq(R.status, 0, "%s", R.out);
    cr_assert_eq(count(R.out, "redzone: warning: METRALE_REDZONE_GUARD=\"idx:1,,2\" is not N (every N-th allocation, "
                              "N >= 1) or idx:I,J,... (at most 32 indices); using unset (no guard pages)"), 1, "%s", R.out);
    cr_assert(strstr(R.out, "guard: live: physical 0 reserved 0 mapped 0 allocations 0\n"), "%s", R.out);
}
