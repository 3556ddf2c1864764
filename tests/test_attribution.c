/*
 * The launch policy (METRALE_REDZONE_SCAN=launch, issue 17): every kernel launch checked in its stream's
 * order, and a violation reported with exactly that launch. Two suites: `launch` runs programs with
 * libredzone.so preloaded on the emulated driver (tests/programs/rzlaunch.c, examples/stream_overrun.c) and
 * compares their reports line by line; `launch_calls` drives the library's launch path in this process
 * (rz__launch_pre / the emulated driver's cuLaunchKernel / rz__launch_post, as the interposed cuLaunchKernel
 * does) and counts what it costs: driver calls per launch, and no host wait.
 */
#include "rz_test.h"
#include "launch_check.h"
#include "quarantine.h"
#include "spawn.h"
#include "alloc.h"
#include "band.h"
#include "registry.h"
#include "state.h"

/* ---- programs under the preloaded library ------------------------------------------------------------ */
static char g_out[1 << 16];

#define PRELOAD "LD_PRELOAD=" LIBREDZONE
#define EMU "LD_LIBRARY_PATH=" EMU_DIR

static int run_launch(const char *scan, const char *extra_env, const char *const *argv) {
    char scan_var[64];
    snprintf(scan_var, sizeof scan_var, "METRALE_REDZONE_SCAN=%s", scan);
    const char *env[] = {PRELOAD, EMU, "METRALE_REDZONE=64", scan_var, extra_env, NULL};
    return spawn_capture(env, argv, g_out, sizeof g_out);
}

/* The line that starts with `prefix`, or NULL. */
static const char *line_of(const char *prefix) {
    for (const char *p = g_out; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (strncmp(p, prefix, strlen(prefix)) == 0)
            return p;
    return NULL;
}

/* The line after `line` starts with `prefix`. */
static int next_line_is(const char *line, const char *prefix) {
    const char *nl = line ? strchr(line, '\n') : NULL;
    return nl && strncmp(nl + 1, prefix, strlen(prefix)) == 0;
}

TestSuite(launch, .timeout = 120);

Test(launch, pipeline_over_three_streams_names_the_one_launch) {
    const char *argv[] = {RZLAUNCH, "pipeline", NULL};
    cr_assert_eq(run_launch("launch,exit", NULL, argv), 0, "%s", g_out);
    const char *v = line_of("REDZONE VIOLATION alloc#1 user_bytes=256 pad=64 : bytes [0..=7] past the end were "
                            "written (8 of 64 pad bytes changed), first bad value 0x5a\n");
    cr_assert(v, "%s", g_out);
    cr_assert_eq(count(g_out, "REDZONE VIOLATION"), 1, "reported once:\n%s", g_out);
    cr_assert(next_line_is(v, "  written by kernel fill (launch #5, grid 4x1x1, block 64x1x1, stream 0x"), "%s", g_out);
    const char *w = strchr(v, '\n') + 1;
    cr_assert(next_line_is(w, "    #0 0x"), "%s", g_out);
    cr_assert(strstr(w, " in fill+0x") && strstr(w, " in pipeline+0x") && strstr(w, " in main+0x"),
              "the stack of the launch call:\n%s", g_out);
    /* sum on stream 3 was launched before the check completed, but waits for an event recorded after the
     * overrun's check: it cannot have run, so it is not named; nor are the candidates of a scan. */
    cr_assert_eq(count(g_out, "other streams' launches"), 0, "%s", g_out);
    cr_assert_eq(count(g_out, "kernels launched since"), 0, "%s", g_out);
    cr_assert(strstr(g_out, "rzlaunch: pipeline done\n"), "%s", g_out);
    cr_assert(strstr(g_out, "redzone scan: 4 zones checked, 0 violated\n"), "written back: %s", g_out);
    cr_assert(strstr(g_out, "redzone: exit: 0 violated at exit; 1 violations in 1 scans; 4 allocations, 4 live"),
              "%s", g_out);
}

Test(launch, default_policy_still_lists_the_candidates) {
    const char *argv[] = {RZLAUNCH, "pipeline", NULL};
    cr_assert_eq(run_launch("free,exit,fatal", NULL, argv), 0, "%s", g_out);
    const char *v = line_of("REDZONE VIOLATION alloc#1 user_bytes=256 pad=64 : bytes [0..=7] past the end were ");
    cr_assert(v, "%s", g_out);
    cr_assert(next_line_is(v, "  kernels launched since alloc#1 was last seen clean (most recent first): sum, fill, "
                              "fill, fill, fill, fill\n"),
              "%s", g_out);
    cr_assert_eq(count(g_out, "written by"), 0, "%s", g_out);
}

Test(launch, overlapping_launch_on_another_stream_is_named_with_it) {
    const char *argv[] = {RZLAUNCH, "overlap", NULL};
    cr_assert_eq(run_launch("launch", NULL, argv), 0, "%s", g_out);
    const char *v = line_of("REDZONE VIOLATION alloc#1 user_bytes=256 pad=64 : bytes [0..=3] past the end");
    cr_assert(v, "%s", g_out);
    cr_assert(next_line_is(v, "  written by kernel fill (launch #2, grid 4x1x1, block 64x1x1, stream 0x"), "%s", g_out);
    const char *o = line_of("  other streams' launches in flight then, which may have written it instead: launch #1 "
                            "spin (stream 0x");
    cr_assert(o && o > v, "spin ran on stream 2 all along:\n%s", g_out);
    cr_assert(strstr(g_out, "rzlaunch: overrun checked while spin runs\n") > o, "judged before the sync returned: %s",
              g_out);
}

Test(launch, every_kind_of_launch_and_stream) {
    const char *argv[] = {RZLAUNCH, "kinds", NULL};
    cr_assert_eq(run_launch("launch", NULL, argv), 0, "%s", g_out);
    cr_assert_eq(count(g_out, "REDZONE VIOLATION"), 5, "%s", g_out);
    static const char *const want[][2] = {
        {"REDZONE VIOLATION alloc#0 ", "  written by kernel fill (launch #1, grid 1x1x1, block 32x1x1, stream 0x0), "},
        {"REDZONE VIOLATION alloc#1 ", "  written by kernel fill (launch #2, grid 1x2x1, block 32x1x1, stream 0x2), "},
        {"REDZONE VIOLATION alloc#2 ", "  written by kernel fill (launch #3, grid 2x1x1, block 16x2x1, stream 0x"},
        {"REDZONE VIOLATION alloc#3 ", "  written by cooperative kernel fill (launch #4, grid 3x1x1, block 8x1x1, "},
        {"REDZONE VIOLATION alloc#4 ", "  written by graph launch (launch #6, graph 0x"},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const char *v = line_of(want[i][0]);
        cr_assert(v && strstr(v, "bytes [0..=0] past the end"), "%s\n%s", want[i][0], g_out);
        cr_assert(next_line_is(v, want[i][1]), "%s\n%s", want[i][1], g_out);
    }
    /* The graph: the launch captured into it (#5) is not checked, the graph's launch is, as one launch. */
    const char *exec = strstr(g_out, "rzlaunch: graph exec 0x");
    cr_assert(exec, "%s", g_out);
    char graph[64];
    snprintf(graph, sizeof graph, "graph %.*s, stream", (int)strcspn(exec + 21, "\n"), exec + 21);
    cr_assert(strstr(g_out, graph), "%s in\n%s", graph, g_out);
    cr_assert_eq(count(g_out, "redzone: warning: launch checks: launches into a stream being captured are not checked"),
                 1, "%s", g_out);
}

Test(launch, the_same_overrun_again_is_a_new_report) {
    const char *argv[] = {RZLAUNCH, "repeat", NULL};
    cr_assert_eq(run_launch("launch,exit", NULL, argv), 0, "%s", g_out);
    cr_assert_eq(count(g_out, "REDZONE VIOLATION alloc#1 user_bytes=256 pad=64 : bytes [0..=7]"), 2, "%s", g_out);
    cr_assert_eq(count(g_out, "  written by kernel fill (launch #1, "), 1, "%s", g_out);
    cr_assert_eq(count(g_out, "  written by kernel fill (launch #3, "), 1, "%s", g_out);
    cr_assert_eq(count(g_out, "written by"), 2, "%s", g_out);
    cr_assert(strstr(g_out, "redzone: exit: 0 violated at exit; 2 violations in 1 scans"), "%s", g_out);
}

Test(launch, freed_right_after_the_launch_reported_once_with_the_launch) {
    const char *argv[] = {RZLAUNCH, "free", NULL};
    cr_assert_eq(run_launch("launch,free,exit", NULL, argv), 0, "%s", g_out);
    const char *v = line_of("REDZONE VIOLATION alloc#0 user_bytes=256 pad=64 : bytes [0..=1] past the end");
    cr_assert(v, "%s", g_out);
    cr_assert(next_line_is(v, "  written by kernel fill (launch #1, "), "%s", g_out);
    cr_assert_eq(count(g_out, "REDZONE VIOLATION"), 1, "%s", g_out);
    cr_assert_eq(count(g_out, "was violated when it was freed"), 0, "%s", g_out);
}

Test(launch, front_band) {
    const char *argv[] = {RZLAUNCH, "front", NULL};
    cr_assert_eq(run_launch("launch", "METRALE_REDZONE_FRONT=256", argv), 0, "%s", g_out);
    const char *v = line_of("REDZONE VIOLATION alloc#0 user_bytes=256 front=256 : bytes [-16..=-1] before the start "
                            "were written (16 of 256 front bytes changed), first bad value 0x5a\n");
    cr_assert(v, "%s", g_out);
    cr_assert(next_line_is(v, "  written by kernel fill (launch #1, grid 4x1x1, block 64x1x1, stream 0x"), "%s", g_out);
}

Test(launch, a_capture_is_left_intact) {
    const char *argv[] = {RZLAUNCH, "captured", NULL};
    cr_assert_eq(run_launch("launch", NULL, argv), 0, "the program's capture was not invalidated:\n%s", g_out);
    const char *cap = strstr(g_out, "rzlaunch: captured\n"), *v = line_of("REDZONE VIOLATION alloc#0 ");
    cr_assert(cap && v && v > cap, "reported when the graph ran, not when captured:\n%s", g_out);
    cr_assert(next_line_is(v, "  written by graph launch (launch #2, graph 0x"), "%s", g_out);
}

Test(launch, the_stack_of_each_launch_call_not_a_cached_one) {
    const char *argv[] = {RZLAUNCH, "callers", NULL};
    cr_assert_eq(run_launch("launch", NULL, argv), 0, "%s", g_out);
    const char *v = line_of("REDZONE VIOLATION alloc#0 user_bytes=256 pad=64 : bytes [0..=3] past the end");
    cr_assert(v && next_line_is(v, "  written by kernel fill (launch #3, "), "%s", g_out);
    const char *f = strstr(v, "    #0 0x"), *end = strstr(v, "rzlaunch: callers done");
    cr_assert(f && strstr(f, " in fill+0x") && strstr(f, " in fill_from+0x"), "%s", g_out);
    const char *second = strstr(f, " in second_caller+0x"), *first = strstr(f, " in first_caller+0x");
    cr_assert(second && second < end && (first == NULL || first > end), "called from second_caller:\n%s", g_out);
}

Test(launch, checked_at_exit_when_the_program_never_waited) {
    const char *argv[] = {RZLAUNCH, "nowait", NULL};
    /* The emulated driver holds the kernel until some thread waits for device work: only the library's wait
     * at exit lets it, and its check, run. */
    cr_assert_eq(run_launch("launch", "CUDA_EMU_KERNEL_HOLD=1", argv), 0, "%s", g_out);
    const char *v = line_of("REDZONE VIOLATION alloc#0 user_bytes=256 pad=64 : bytes [0..=3] past the end");
    cr_assert(v && next_line_is(v, "  written by kernel fill (launch #1, "), "%s", g_out);
    cr_assert(strstr(g_out, "rzlaunch: exiting\n") < v, "%s", g_out);
}

Test(launch, a_band_whose_fill_is_still_queued_is_left_out) {
    const char *argv[] = {RZLAUNCH, "asyncalloc", NULL};
    cr_assert_eq(run_launch("launch,free,exit", NULL, argv), 0, "%s", g_out);
    cr_assert_eq(count(g_out, "REDZONE VIOLATION"), 1, "%s", g_out);
    const char *v = line_of("REDZONE VIOLATION alloc#2 user_bytes=256 pad=64 : bytes [0..=1] past the end");
    cr_assert(v && next_line_is(v, "  written by kernel fill (launch #3, "), "%s", g_out);
    cr_assert(strstr(g_out, "rzlaunch: checked while b's fill waits\n") < v, "%s", g_out);
}

/* Three driver calls per checked launch while no capture is in progress (cuCtxGetCurrent, the batched copy, the
 * host function); four while one is, anywhere in the process: then every launch asks the driver whether its
 * stream is capturing. A capture begun through an entry point from cuGetProcAddress is seen too. */
/* Compared on the device: cuCtxGetCurrent, the check kernel, the copy of the changed bands, cuLaunchHostFunc. */
Test(launch, four_driver_calls_per_launch_outside_a_capture) {
    const char *argv[] = {RZLAUNCH, "calls", NULL};
    cr_assert_eq(run_launch("launch", "CUDA_EMU_KERNEL_HOLD=1", argv), 0, "%s", g_out);
    cr_assert(strstr(g_out, "rzlaunch: no capture: 4.00 driver calls per launch, 0.00 of them cuStreamIsCapturing\n"),
              "%s", g_out);
    cr_assert(strstr(g_out, "rzlaunch: while another stream is captured: 5.00 driver calls per launch, 1.00 of them "
                            "cuStreamIsCapturing\n"),
              "%s", g_out);
    cr_assert(strstr(g_out, "rzlaunch: after the capture: 4.00 driver calls per launch, 0.00 of them "
                            "cuStreamIsCapturing\n"),
              "%s", g_out);
    const char *warned = strstr(g_out, "launches into a stream being captured are not checked");
    cr_assert(warned && warned < strstr(g_out, "rzlaunch: capture ended\n"), "the launch into the capture: %s", g_out);
    cr_assert_eq(count(g_out, "REDZONE VIOLATION"), 0, "%s", g_out);
}

/* Another thread captures in the global mode while this one, in the global mode too, makes its first launch
 * (checked: the library makes its page-locked staging then) and synchronises: the capture must end, and its
 * graph run, as without redzone; the launch is still checked. The program's own cuMemAlloc beside a capture
 * keeps the driver's answer (refused, and that capture invalidated) with redzone and without. A cuMemFree the
 * driver allows beside a capture (the freeing thread relaxed) leaves that capture valid too: its band is
 * checked without the context synchronisation that would invalidate it. */
static const char *const g_beside_lines[] = {
    "rzlaunch: launched and synchronised beside the capture\n", "rzlaunch: capture 1 ended with 0\n",
    "rzlaunch: graph 1 ran: a[0] = 1\n", "rzlaunch: cuMemAlloc beside the capture: 900\n",
    "rzlaunch: capture 2 ended with 901\n", "rzlaunch: cuMemFree beside the capture (relaxed): 0\n",
    "rzlaunch: capture 3 ended with 0\n", "rzlaunch: graph 3 ran: a[0] = 3\n"};

static void expect_beside_lines(void) {
    const char *at = g_out;
    for (size_t i = 0; i < sizeof g_beside_lines / sizeof g_beside_lines[0]; i++) {
        const char *l = strstr(at, g_beside_lines[i]);
        cr_assert(l, "missing, or out of order: %s\n%s", g_beside_lines[i], g_out);
        at = l + strlen(g_beside_lines[i]);
    }
}

Test(launch, a_global_capture_on_another_thread_survives_the_first_checked_launch_and_a_relaxed_free) {
    const char *argv[] = {RZLAUNCH, "beside", NULL};
    const char *plain[] = {EMU, NULL};
    cr_assert_eq(spawn_capture(plain, argv, g_out, sizeof g_out), 0, "%s", g_out);
    expect_beside_lines(); /* the driver's answers, without redzone */
    cr_assert_eq(run_launch("launch,free,exit", NULL, argv), 0, "%s", g_out);
    expect_beside_lines();
    const char *v = line_of("REDZONE VIOLATION alloc#1 user_bytes=256 pad=64 : bytes [0..=3] past the end");
    cr_assert(v && next_line_is(v, "  written by kernel fill (launch #"), "the launch was checked:\n%s", g_out);
    cr_assert(v < strstr(g_out, "rzlaunch: launched and synchronised beside the capture\n"), "%s", g_out);
    cr_assert_eq(count(g_out, "REDZONE VIOLATION"), 1, "%s", g_out);
    cr_assert_null(strstr(g_out, "could not be page-locked"), "the staging was page-locked:\n%s", g_out);
    cr_assert(strstr(g_out, "redzone: warning: a free during a graph capture is checked without waiting for the "
                            "device (that would invalidate the capture)"),
              "the free's check says what it left out:\n%s", g_out);
}

Test(launch, example_stream_overrun) {
    const char *argv[] = {REDZONE_CLI, "run", "--emulated-device", "--scan", "launch,free,exit,fatal", "--",
                          EXAMPLES "/stream_overrun", NULL};
    cr_assert_eq(spawn_capture(NULL, argv, g_out, sizeof g_out), 0, "%s", g_out);
    const char *v = line_of("REDZONE VIOLATION alloc#1 user_bytes=1000 pad=64 : bytes [0..=7] past the end were "
                            "written (8 of 64 pad bytes changed), first bad value 0x5a\n");
    cr_assert(v, "%s", g_out);
    cr_assert(next_line_is(v, "  written by kernel write_past (launch #4, grid 4x1x1, block 256x1x1, stream 0x"), "%s",
              g_out);
    cr_assert_eq(count(g_out, "REDZONE VIOLATION"), 1, "%s", g_out);
    cr_assert(strstr(g_out, "redzone: exit: 0 violated at exit; 1 violations in 1 scans; 4 allocations, 0 live"),
              "%s", g_out);
    const char *argv2[] = {REDZONE_CLI, "run", "--emulated-device", "--", EXAMPLES "/stream_overrun", NULL};
    cr_assert_eq(spawn_capture(NULL, argv2, g_out, sizeof g_out), 0, "%s", g_out);
    v = line_of("REDZONE VIOLATION alloc#1 user_bytes=1000 pad=64 : bytes [0..=7] past the end were ");
    cr_assert(next_line_is(v, "  kernels launched since alloc#1 was last seen clean (most recent first): sum_past, "
                              "write_past, write_past, write_past, write_past\n"),
              "%s", g_out);
}

/* Issue 27: the library's own queries and synchronisations (a lazy band install's pointer query and wait, a
 * fill event's query, a free's check) are calls a real driver refuses beside a global capture, and refusing
 * them loses the program's capture. Every scan policy, and the default. */
static const char *const g_policies[] = {"free,exit,fatal", "free", "sync", "exit", "launch", "launch,free,sync,exit"};

/* The commonest graph pattern: a buffer allocated before the capture, the first launch over it inside the
 * capture, on the same thread, in the global mode. The capture ends well and its graph runs, as without
 * redzone. */
Test(launch, an_allocation_then_its_first_launch_captured_ends_well_under_every_policy) {
    const char *argv[] = {RZLAUNCH, "captured", NULL};
    const char *plain[] = {EMU, NULL};
    cr_assert_eq(spawn_capture(plain, argv, g_out, sizeof g_out), 0, "without redzone: %s", g_out);
    cr_assert(strstr(g_out, "rzlaunch: captured\nrzlaunch: graph ran\n"), "%s", g_out);
    for (size_t i = 0; i < sizeof g_policies / sizeof g_policies[0]; i++) {
        cr_assert_eq(run_launch(g_policies[i], NULL, argv), 0, "scan=%s: the capture was lost:\n%s", g_policies[i],
                     g_out);
        cr_assert(strstr(g_out, "rzlaunch: captured\n") && strstr(g_out, "rzlaunch: graph ran\n"), "scan=%s:\n%s",
                  g_policies[i], g_out);
    }
}

static void expect_quiet_lines(const char *what, const char *scan) {
    static const char *const lines[] = {"rzlaunch: launched beside the capture\n", "rzlaunch: capture ended with 0\n",
                                        "rzlaunch: graph ran: a[0] = 7\n", "rzlaunch: quiet done: b[255] = 3\n"};
    const char *at = g_out;
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
        const char *l = strstr(at, lines[i]);
        cr_assert(l, "quiet %s, scan=%s: missing, or out of order: %s\n%s", what, scan, lines[i], g_out);
        at = l + strlen(lines[i]);
    }
}

/* Another thread captures in the global mode while this one (global mode) does only what the driver allows
 * it then; the capture must end well with redzone as without. install: the first launch over a buffer
 * allocated before the capture (its band installed then), a stream-ordered allocation, launch and free.
 * fill: launches while a stream-ordered allocation's band fill waits behind a kernel (the launch policy asks
 * the fill's event at each launch). */
static void quiet_beside(const char *what) {
    const char *argv[] = {RZLAUNCH, "quiet", what, NULL};
    const char *plain[] = {EMU, NULL};
    cr_assert_eq(spawn_capture(plain, argv, g_out, sizeof g_out), 0, "without redzone: %s", g_out);
    expect_quiet_lines(what, "(no redzone)");
    for (size_t i = 0; i < sizeof g_policies / sizeof g_policies[0]; i++) {
        cr_assert_eq(run_launch(g_policies[i], NULL, argv), 0, "quiet %s, scan=%s:\n%s", what, g_policies[i], g_out);
        expect_quiet_lines(what, g_policies[i]);
        cr_assert_eq(count(g_out, "REDZONE VIOLATION"), 0, "%s", g_out);
    }
}

Test(launch, a_global_capture_on_another_thread_survives_a_lazy_install_and_a_stream_ordered_free) {
    quiet_beside("install");
}

Test(launch, a_global_capture_on_another_thread_survives_the_launch_policys_fill_event_query) {
    quiet_beside("fill");
}

/* ---- the launch path in this process: what a launch costs ---------------------------------------------- */
CUDA_EMU_KERNEL(poke, sizeof(rzcu_deviceptr), sizeof(unsigned long long)) {
    unsigned char *p = (unsigned char *)(uintptr_t)CUDA_EMU_PARAM(rzcu_deviceptr, 0);
    p[CUDA_EMU_PARAM(unsigned long long, 1)] = 0x42;
}

static const char *g_log;
static rzcu_function g_poke;

static void calls_setup(void) {
    setenv("METRALE_REDZONE", "64", 1);
    setenv("METRALE_REDZONE_SCAN", "launch", 1);
    setenv("METRALE_REDZONE_AGENT", "0", 1);
    setenv("CUDA_EMU_KERNEL_HOLD", "1", 1); /* a kernel runs only once some thread waits for device work */
    g_log = rzt_log_to_file();
    rzt_context(0);
    rzcu_module mod;
    cr_assert_eq(cuModuleLoadData(&mod, "emulated module"), RZCUDA_SUCCESS);
    cr_assert_eq(cuModuleGetFunction(&g_poke, mod, "poke"), RZCUDA_SUCCESS);
}

TestSuite(launch_calls, .init = calls_setup, .timeout = 120);

/* What the interposed cuLaunchKernel does around the driver's. */
static void launch_poke(rzcu_stream s, rz_devptr_t p, unsigned long long at) {
    rz_launch_call_t call = {.kind = RZ_LAUNCH_KERNEL, .f = g_poke, .grid = {1, 1, 1}, .block = {1, 1, 1}, .stream = s};
    void *params[] = {&p, &at};
    struct rz_check *c = rz__launch_pre(&call);
    rzcu_result r = cuLaunchKernel(g_poke, 1, 1, 1, 1, 1, 1, 0, s, params, NULL);
    cr_assert_eq(r, RZCUDA_SUCCESS);
    rz__launch_post(c, &call, r);
}

static unsigned long long violations(void) {
    rz_stats_t st;
    rz_stats_get(&st);
    return st.violations;
}

static unsigned long long calls(const char *name) { return cuEmuCallCount(name); }

/* device: compared on the device by the check kernel (the default; the emulated driver runs its host twin),
 * else copied to the host. */
static void count_per_launch(int zones, int device) {
    rz__changed_enable(device);
    rzcu_stream s;
    cr_assert_eq(cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING), RZCUDA_SUCCESS);
    rz_devptr_t p = 0;
    for (int i = 0; i < zones; i++)
        cr_assert_eq(rz_mem_alloc(&p, 64), RZCUDA_SUCCESS);
    enum { LAUNCHES = 20 };
    for (int i = 0; i < LAUNCHES; i++) /* the checks in flight make their staging, kept for later checks */
        launch_poke(s, p, 0);
    cr_assert_eq(cuStreamSynchronize(s), RZCUDA_SUCCESS);
    rz__launch_checks();
    cuEmuResetCallCounts();
    for (int i = 0; i < LAUNCHES; i++)
        launch_poke(s, p, (unsigned long long)(i % 64));
    /* No host wait: nothing synchronised, and the held kernels have not run (no thread waited yet). */
    cr_assert_eq(calls("cuStreamSynchronize") + calls("cuCtxSynchronize") + calls("cuEventSynchronize"), 0);
    cr_assert_eq(violations(), 0, "the kernels are held until a wait");
    unsigned long long total = 0;
    static const char *const names[] = {
#define NAME(name, ret, params) #name,
        RZCU_ENTRY_POINTS(NAME)
#undef NAME
    };
    char which[2048] = "";
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        total += calls(names[i]);
        if (calls(names[i]))
            snprintf(which + strlen(which), sizeof which - strlen(which), " %s=%llu", names[i], calls(names[i]));
    }
    uint64_t uploads = rz__changed_uploads();
    cr_assert_eq(calls("cuLaunchKernel"), (device ? 2 : 1) * LAUNCHES);
    /* Per launch on the device: cuCtxGetCurrent, cuStreamIsCapturing, the check kernel's cuLaunchKernel (the
     * bands' table was uploaded by the first launches: no upload, no band copied), one cuMemcpyDtoHAsync_v2
     * of the changed bands, cuLaunchHostFunc. Copied: cuMemcpyBatchAsync (one for every band) instead of the
     * kernel and its copy.
     * Per launch: cuCtxGetCurrent, cuStreamIsCapturing, cuMemcpyBatchAsync (one for every band), cuLaunchHostFunc;
     * the kernel's name was asked for once, at its first launch. cuStreamIsCapturing is asked because this test
     * links the library without its interposed entry points, so captures are not seen begin (under the preloaded
     * library it is not asked while none is in progress: launch::four_driver_calls_per_launch_outside_a_capture). */
    cr_assert_eq(calls("cuCtxGetCurrent"), LAUNCHES);
    cr_assert_eq(calls("cuStreamIsCapturing"), LAUNCHES);
    if (device) {
        cr_assert_eq(calls("cuMemcpyDtoHAsync_v2"), LAUNCHES);
        cr_assert_eq(calls("cuMemcpyBatchAsync_v2") + calls("cuMemcpyHtoDAsync_v2"), 0, "%s", which);
        cr_assert_eq(rz__changed_uploads(), uploads, "the zones did not change: no table uploaded");
    } else {
        cr_assert_eq(calls(zones > 1 ? "cuMemcpyBatchAsync_v2" : "cuMemcpyDtoHAsync_v2"), LAUNCHES);
    }
    cr_assert_eq(calls("cuLaunchHostFunc"), LAUNCHES);
    cr_assert_eq(calls("cuFuncGetName"), 0);
    cr_assert_eq(total - LAUNCHES, (device ? 5 : 4) * LAUNCHES, "driver calls besides the launches: %llu:%s",
                 total - LAUNCHES, which);
    cr_assert_eq(cuStreamSynchronize(s), RZCUDA_SUCCESS);
    rz__launch_checks();
    cr_assert_eq(violations(), 0, "every poke in bounds");
    /* An overrun is seen by the next check, with its launch named. */
    rz_devptr_t q;
    cr_assert_eq(rz_mem_alloc(&q, 64), RZCUDA_SUCCESS);
    launch_poke(s, q, 0);
    cr_assert_eq(cuStreamSynchronize(s), RZCUDA_SUCCESS);
    rz__launch_checks();
    launch_poke(s, q, 64 + 3);
    cr_assert_eq(cuStreamSynchronize(s), RZCUDA_SUCCESS);
    rz__launch_checks();
    cr_assert_eq(violations(), 1, "the poke past the end");
    rz__changed_enable(1);
}

Test(launch_calls, one_zone) { count_per_launch(1, 1); }
Test(launch_calls, hundreds_of_zones_cost_the_same_calls) { count_per_launch(300, 1); }
Test(launch_calls, one_zone_copied) { count_per_launch(1, 0); }
Test(launch_calls, hundreds_of_zones_copied_cost_the_same_calls) { count_per_launch(300, 0); }

/* A program that allocates and frees between launches (issue 29 item 5): each launch uploads the rows that
 * changed (the freed buffer's tombstone, the new one's row: neighbours, one copy; two when they are not),
 * never a table of every band, and still sees an overrun of a buffer allocated just before its launch. */
Test(launch_calls, an_allocation_and_a_free_between_launches_upload_only_their_rows) {
    rzcu_stream s;
    cr_assert_eq(cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING), RZCUDA_SUCCESS);
    rz_devptr_t p = 0;
    for (int i = 0; i < 300; i++)
        cr_assert_eq(rz_mem_alloc(&p, 64), RZCUDA_SUCCESS);
    enum { LAUNCHES = 20 };
    for (int i = 0; i < LAUNCHES; i++)
        launch_poke(s, p, 0);
    cr_assert_eq(cuStreamSynchronize(s), RZCUDA_SUCCESS);
    rz__launch_checks();
    uint64_t uploads = rz__changed_uploads(), rows = rz__changed_row_copies();
    cuEmuResetCallCounts();
    for (int i = 0; i < LAUNCHES; i++) {
        rz_devptr_t q;
        cr_assert_eq(rz_mem_alloc(&q, 64), RZCUDA_SUCCESS);
        launch_poke(s, q, i == LAUNCHES / 2 ? 64 + 5 : 0);
        /* Not waited for: the check may run after the quarantine's fill of the freed block (0xdd, in the
         * legacy stream's order), which is not a write (the commit before this test reported each buffer). */
        cr_assert_eq(rz_mem_free(q), RZCUDA_SUCCESS);
    }
    cr_assert_eq(rz__changed_uploads(), uploads, "no table uploaded whole");
    uint64_t copies = rz__changed_row_copies() - rows;
    cr_assert(copies >= LAUNCHES && copies <= 2 * LAUNCHES, "row copies: %llu for %d launches",
              (unsigned long long)copies, LAUNCHES);
    cr_assert_eq(calls("cuMemcpyHtoDAsync_v2"), copies);
    cr_assert_eq(calls("cuLaunchKernel"), 2 * LAUNCHES);
    /* Besides the launch check's own copy back and host function, the quarantine's copies of the held blocks
     * (naming the launch that writes one, quarantine_launch.c): at most one batch and one host function. */
    uint64_t singles, batches, funcs;
    rz__quarantine_launch_calls(&singles, &batches, &funcs);
    cr_assert(batches + singles <= 2 * LAUNCHES && funcs <= LAUNCHES, "the quarantine's calls: %llu %llu %llu",
              (unsigned long long)singles, (unsigned long long)batches, (unsigned long long)funcs);
    cr_assert_eq(calls("cuMemcpyDtoHAsync_v2"), LAUNCHES + singles);
    cr_assert_eq(calls("cuMemcpyBatchAsync_v2"), batches);
    cr_assert_eq(calls("cuLaunchHostFunc"), LAUNCHES + funcs);
    cr_assert_eq(cuStreamSynchronize(s), RZCUDA_SUCCESS);
    rz__launch_checks();
    cr_assert_eq(violations(), 1, "the poke past the end of a buffer allocated right before its launch: %llu",
                 violations());
}

Test(launch_calls, kernel_names_asked_again_after_an_unload) {
    rzcu_stream s;
    cr_assert_eq(cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING), RZCUDA_SUCCESS);
    rz_devptr_t p;
    cr_assert_eq(rz_mem_alloc(&p, 64), RZCUDA_SUCCESS);
    cuEmuResetCallCounts();
    launch_poke(s, p, 0);
    launch_poke(s, p, 1);
    cr_assert_eq(calls("cuFuncGetName"), 1);
    rz__launch_names_forget(); /* what the interposed cuModuleUnload and cuLibraryUnload do */
    launch_poke(s, p, 2);
    cr_assert_eq(calls("cuFuncGetName"), 2);
    cr_assert_eq(cuStreamSynchronize(s), RZCUDA_SUCCESS);
}

Test(launch_calls, judged_inside_the_launch_under_a_debugger) {
    rzcu_stream s;
    cr_assert_eq(cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING), RZCUDA_SUCCESS);
    rz_devptr_t p;
    cr_assert_eq(rz_mem_alloc(&p, 100), RZCUDA_SUCCESS);
    rz__launch_set_sync(1);
    launch_poke(s, p, 100);
    cr_assert_eq(violations(), 1, "reported before the launch call returned");
    char *log = rzt_read_log(g_log);
    cr_assert(strstr(log, "REDZONE VIOLATION alloc#0 user_bytes=100 pad=64 : bytes [0..=0] past the end were written "
                          "(1 of 64 pad bytes changed), first bad value 0x42\n  written by kernel poke (launch #1, grid "
                          "1x1x1, block 1x1x1, stream 0x"),
              "%s", log);
    free(log);
    /* Written back right away: the same write by the next launch is a new report. */
    launch_poke(s, p, 100);
    cr_assert_eq(violations(), 2);
}

Test(launch_calls, queued_not_waited_for_outside_a_debugger) {
    rzcu_stream s;
    cr_assert_eq(cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING), RZCUDA_SUCCESS);
    rz_devptr_t p;
    cr_assert_eq(rz_mem_alloc(&p, 100), RZCUDA_SUCCESS);
    rz__launch_set_sync(0);
    launch_poke(s, p, 100);
    cr_assert_eq(violations(), 0, "the kernel has not even run");
    cr_assert_eq(cuStreamSynchronize(s), RZCUDA_SUCCESS);
    rz__launch_checks(); /* what the interposed synchronisation does after it returns */
    cr_assert_eq(violations(), 1);
}

Test(launch_calls, a_zone_allocated_during_a_launch_call_is_checked_once_its_band_is_written) {
    rzcu_stream s;
    cr_assert_eq(cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING), RZCUDA_SUCCESS);
    rz_devptr_t a, b;
    cr_assert_eq(rz_mem_alloc(&a, 64), RZCUDA_SUCCESS);
    /* Another thread allocates (through the hooks: its band waits for the next install) while this launch is
     * in the driver, before its check takes the context's bands. */
    rz_launch_call_t call = {.kind = RZ_LAUNCH_KERNEL, .f = g_poke, .grid = {1, 1, 1}, .block = {1, 1, 1}, .stream = s};
    unsigned long long at = 0;
    void *params[] = {&a, &at};
    struct rz_check *c = rz__launch_pre(&call);
    rzcu_result r = cuLaunchKernel(g_poke, 1, 1, 1, 1, 1, 1, 0, s, params, NULL);
    cr_assert_eq(r, RZCUDA_SUCCESS);
    rz_alloc_req_t hooked = {.kind = RZ_ALLOC_PLAIN, .interposed = 1};
    cr_assert_eq(rz__alloc(&b, 100, &hooked), RZCUDA_SUCCESS);
    rz__launch_post(c, &call, r);
    /* The next launch writes the waiting band first (as every interposed launch does), then overruns it. */
    rz__bands_install();
    launch_poke(s, b, 100);
    cr_assert_eq(cuStreamSynchronize(s), RZCUDA_SUCCESS);
    rz__launch_checks();
    cr_assert_eq(violations(), 1, "the launch right after the install checks the new band");
    char *log = rzt_read_log(g_log);
    cr_assert(strstr(log, "REDZONE VIOLATION alloc#1 user_bytes=100 pad=64 : bytes [0..=0] past the end were written "
                          "(1 of 64 pad bytes changed), first bad value 0x42\n  written by kernel poke (launch #2,"),
              "%s", log);
    free(log);
}

/* ---- judging: checks complete out of order across streams, and a copy may overlap the writing kernel ---- */
/* Judge a check of launch #launch, begun at `begin`, that saw the back band of zone p as `band` (what
 * launch_check.c hands launch_attribution.c once the check's copy completed), while launches of other streams begun
 * at `overlap` and later were still running (0: none). */
static void judge_seen_beside(rz_devptr_t p, uint64_t begin, uint64_t overlap, uint64_t launch, const uint8_t *band) {
    rz__registry_lock();
    const rz_zone_node_t *z = rz__registry_find(p);
    cr_assert(z != NULL && z->pad_bytes == 64);
    rz_band_meta_t m = {.ptr = z->ptr, .user_bytes = z->user_bytes, .index = z->index, .bytes = z->pad_bytes,
                        .pad_bytes = z->pad_bytes, .expected = z->expected, .flags = z->flags};
    rzcu_deviceptr src = z->ptr + z->user_bytes;
    size_t size = m.bytes, off = 0;
    rz_layout_t l = {.n = 1, .bytes = 64, .srcs = &src, .sizes = &size, .offs = &off, .meta = &m, .ctx = z->ctx};
    uint8_t copy[64];
    memcpy(copy, band, sizeof copy);
    rz_staging_buf_t st = {.p = copy, .size = sizeof copy};
    rz_check_t c = {.begin = begin, .launch = launch, .ctx = z->ctx, .kind = RZ_LAUNCH_KERNEL, .layout = &l,
                    .st = &st, .grid = {1, 1, 1}, .block = {1, 1, 1}, .name = "poke", .overlap_begin = overlap,
                    .overlap_last = overlap};
    rz__attrib_judge_locked(&c);
    rz__registry_unlock();
}

static void judge_seen(rz_devptr_t p, uint64_t begin, uint64_t launch, const uint8_t *band) {
    judge_seen_beside(p, begin, 0, launch, band);
}

/* Zone p's back band with bytes [from, to) set to value. */
static const uint8_t *band_with(rz_devptr_t p, unsigned from, unsigned to, uint8_t value) {
    static uint8_t band[64];
    rz__registry_lock();
    memset(band, rz__registry_find(p)->expected, sizeof band);
    rz__registry_unlock();
    memset(band + from, value, to - from);
    return band;
}

Test(launch_calls, a_check_copied_before_an_older_write_back_reports_nothing_again) {
    rz_devptr_t p;
    cr_assert_eq(rz_mem_alloc(&p, 100), RZCUDA_SUCCESS);
    uint64_t before = rz__launch_begun(); /* the write-backs below come after every launch begun so far */
    judge_seen(p, before, 1, band_with(p, 0, 8, 0x43));
    cr_assert_eq(violations(), 1);
    rz__launch_checks(); /* written back */
    judge_seen(p, before + 1, 3, band_with(p, 0, 8, 0x45)); /* begun after: a new write */
    cr_assert_eq(violations(), 2);
    /* Another stream's check, begun before the first write-back, completes only now: it saw the first write. */
    judge_seen(p, before, 2, band_with(p, 0, 8, 0x43));
    cr_assert_eq(violations(), 2, "the first write, seen by a copy made before it was written back");
    /* The same bytes seen by a check begun after that write-back: written again. */
    judge_seen(p, before + 1, 4, band_with(p, 0, 8, 0x43));
    cr_assert_eq(violations(), 3);
}

Test(launch_calls, a_copy_that_saw_part_of_a_write_then_more_of_it_reports_it_once) {
    rz_devptr_t p;
    cr_assert_eq(rz_mem_alloc(&p, 100), RZCUDA_SUCCESS);
    uint64_t before = rz__launch_begun();
    judge_seen(p, before, 1, band_with(p, 0, 2, 0x40)); /* copied while the kernel was writing */
    cr_assert_eq(violations(), 1);
    judge_seen(p, before, 2, band_with(p, 0, 8, 0x40)); /* the whole write */
    cr_assert_eq(violations(), 1, "more of the same write");
    char *log = rzt_read_log(g_log);
    cr_assert(strstr(log, "REDZONE VIOLATION alloc#0 user_bytes=100 pad=64 : bytes [0..=1] past the end were written "
                          "(2 of 64 pad bytes changed), first bad value 0x40\n"),
              "%s", log);
    cr_assert(strstr(log, "\nredzone: more of alloc#0's reported write seen by launch #2: bytes [0..=7] past the end "
                          "(8 of 64 pad bytes changed)\n"),
              "%s", log);
    free(log);
    judge_seen(p, before, 3, band_with(p, 2, 5, 0x40)); /* a part of it, copied earlier */
    cr_assert_eq(violations(), 1);
    judge_seen(p, before, 4, band_with(p, 0, 8, 0x41)); /* other values over those bytes: another write */
    cr_assert_eq(violations(), 2);
    judge_seen(p, before, 5, band_with(p, 32, 34, 0x40)); /* the same value, no byte in common: another write */
    cr_assert_eq(violations(), 3);
    rz__launch_checks(); /* all written back, the grown record with them */
    judge_seen(p, before + 1, 6, band_with(p, 0, 8, 0x40)); /* begun after the write-back: written again */
    cr_assert_eq(violations(), 4);
}

Test(launch_calls, the_same_bytes_after_a_write_back_while_an_older_launch_still_ran_are_that_launch_s) {
    rz_devptr_t p;
    cr_assert_eq(rz_mem_alloc(&p, 100), RZCUDA_SUCCESS);
    rzcu_stream s;
    cr_assert_eq(cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING), RZCUDA_SUCCESS);
    launch_poke(s, p, 0); /* one launch made, in bounds: begin counters from 1 on */
    cr_assert_eq(cuStreamSynchronize(s), RZCUDA_SUCCESS);
    rz__launch_checks();
    uint64_t before = rz__launch_begun();
    cr_assert_eq(before, 1);
    judge_seen(p, before, 2, band_with(p, 0, 8, 0x40));
    cr_assert_eq(violations(), 1);
    rz__launch_checks(); /* written back while the writing kernel (another stream's launch) still runs */
    /* A check begun after the write-back, which completed while that launch (begun before it) was still in
     * flight: the kernel may have written the same bytes again after the write-back. */
    judge_seen_beside(p, before + 1, before, 3, band_with(p, 0, 8, 0x40));
    cr_assert_eq(violations(), 1, "the same write, not a new one");
    /* Nothing older in flight: written again. */
    judge_seen_beside(p, before + 1, before + 1, 4, band_with(p, 0, 8, 0x40));
    cr_assert_eq(violations(), 2);
}

Test(launch_calls, a_band_seen_while_another_streams_kernel_ran_is_written_back_once_that_kernel_is_done) {
    rzcu_stream s;
    cr_assert_eq(cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING), RZCUDA_SUCCESS);
    rz_devptr_t p;
    cr_assert_eq(rz_mem_alloc(&p, 100), RZCUDA_SUCCESS);
    launch_poke(s, p, 0); /* in bounds; held until a thread waits: in flight */
    uint64_t running = rz__launch_begun();
    unsigned char past[8], band[8], expected;
    memset(past, 0x40, sizeof past);
    cr_assert_eq(cuMemcpyHtoD_v2(p + 100, past, sizeof past), RZCUDA_SUCCESS); /* what a kernel wrote */
    rz__registry_lock();
    expected = rz__registry_find(p)->expected;
    rz__registry_unlock();
    /* Another stream's check saw it while that launch was in flight: it may still be writing the band. */
    judge_seen_beside(p, running + 1, running, 7, band_with(p, 0, 8, 0x40));
    cr_assert_eq(violations(), 1);
    rz__launch_checks();
    cr_assert_eq(cuMemcpyDtoH_v2(band, p + 100, sizeof band), RZCUDA_SUCCESS);
    cr_assert_eq(memcmp(band, past, sizeof band), 0, "not written back while that kernel may still write");
    cr_assert_eq(cuStreamSynchronize(s), RZCUDA_SUCCESS); /* it runs; its check completes */
    rz__launch_checks();
    cr_assert_eq(cuMemcpyDtoH_v2(band, p + 100, sizeof band), RZCUDA_SUCCESS);
    for (size_t i = 0; i < sizeof band; i++)
        cr_assert_eq(band[i], expected, "written back once it was done");
    cr_assert_eq(violations(), 1, "its own check saw the same write");
}

Test(launch_calls, a_band_written_again_before_its_write_back_is_left_for_a_check_to_see) {
    rz_devptr_t p;
    cr_assert_eq(rz_mem_alloc(&p, 100), RZCUDA_SUCCESS);
    uint64_t before = rz__launch_begun();
    unsigned char bytes[8], band[8];
    memset(bytes, 0x40, sizeof bytes);
    cr_assert_eq(cuMemcpyHtoD_v2(p + 100, bytes, sizeof bytes), RZCUDA_SUCCESS); /* a kernel's overrun */
    judge_seen(p, before, 1, band_with(p, 0, 8, 0x40));
    cr_assert_eq(violations(), 1);
    memset(bytes, 0x43, sizeof bytes);
    /* The next overrun, before the write-back. */
    cr_assert_eq(cuMemcpyHtoD_v2(p + 100, bytes, sizeof bytes), RZCUDA_SUCCESS);
    rz__launch_checks();
    cr_assert_eq(cuMemcpyDtoH_v2(band, p + 100, sizeof band), RZCUDA_SUCCESS);
    cr_assert_eq(memcmp(band, bytes, sizeof band), 0, "the newer write is not erased by the write-back");
    judge_seen(p, before + 1, 2, band_with(p, 0, 8, 0x43)); /* the check of that launch */
    cr_assert_eq(violations(), 2);
    rz__launch_checks(); /* now written back */
    cr_assert_eq(cuMemcpyDtoH_v2(band, p + 100, sizeof band), RZCUDA_SUCCESS);
    cr_assert_neq(band[0], 0x43);
}
