/*
 * Signals are the program's (issue 27 items 1, 6, 7): tests/programs/rzsignal.c run with and without
 * libredzone.so preloaded shows the same lines and exit status; redzone adds only its own lines. A daemon
 * that blocks signals and waits for them with sigwait gets them (no redzone thread takes them first); the
 * program reads back the dispositions it set, not redzone's handler; its own fatal-signal handler runs, and
 * the final scan either follows (the signal comes back to its default action) or one line says it will not;
 * a forked child with nothing of its own to check dies without a redzone line.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spawn.h"

#define PRELOAD "LD_PRELOAD=" LIBREDZONE
#define EMU "LD_LIBRARY_PATH=" EMU_DIR

static char out[1 << 16], bare[1 << 16];
static char mine[1 << 16], theirs[1 << 16];

#define HANDLER_LINE                                                                                         \
    "redzone: SIGSEGV: the program's own handler takes it; no final scan unless the signal then takes its "  \
    "default action\n"

/* Runs rzsignal with argv[1..] with and without redzone: the same status (returned) and program lines. */
static int same_as_without(const char *mode, const char *how) {
    const char *env_bare[] = {EMU, NULL};
    const char *env[] = {PRELOAD, EMU, "METRALE_REDZONE=64", NULL};
    const char *argv[] = {RZSIGNAL, mode, how, NULL};
    int without = spawn_capture(env_bare, argv, bare, sizeof bare);
    int with = spawn_capture(env, argv, out, sizeof out);
    spawn_lines_with_prefix("rzsignal: ", bare, theirs, sizeof theirs);
    spawn_lines_with_prefix("rzsignal: ", out, mine, sizeof mine);
    cr_assert(theirs[0], "no program output: %s", bare);
    cr_assert_str_eq(mine, theirs, "with redzone:\n%s\nwithout:\n%s", out, bare);
    cr_assert_eq(with, without, "exit status %d with redzone, %d without:\n%s\nwithout:\n%s", with, without, out, bare);
    return with;
}

/* ---- item 1: threads redzone starts ------------------------------------------------------------------- */
/* The daemon pattern: signals blocked in every thread of the program's, waited for with sigwait in one. The
 * agent thread started at the first allocation, before the program blocked them; it must not take them (their
 * default action would end the process: 128 + SIGUSR1). */
Test(signals, a_daemon_waiting_with_sigwait_gets_its_signals) {
    cr_assert_eq(same_as_without("sigwait", NULL), 0, "%s", out);
    cr_assert(strstr(mine, "rzsignal: sigwait got SIGUSR1\nrzsignal: sigwait got SIGTERM\nrzsignal: waiter done\n"),
              "%s", out);
}

/* Which threads exist besides main, and what each blocks: without redzone none; with it the agent only,
 * every asynchronous signal blocked and the ones an instruction raises open. */
Test(signals, redzone_threads_block_every_asynchronous_signal) {
    const char *env_bare[] = {EMU, NULL};
    const char *env[] = {PRELOAD, EMU, "METRALE_REDZONE=64", NULL};
    const char *argv[] = {RZSIGNAL, "masks", NULL};
    cr_assert_eq(spawn_capture(env_bare, argv, bare, sizeof bare), 0, "%s", bare);
    cr_assert(strstr(bare, "rzsignal: 0 threads besides main\n"), "%s", bare);
    cr_assert_eq(spawn_capture(env, argv, out, sizeof out), 0, "%s", out);
    cr_assert(strstr(out, "rzsignal: thread redzone-agent: 0 asynchronous signals open, 0 synchronous ones blocked\n"
                          "rzsignal: 1 threads besides main\n"), "%s", out);
}

/* ---- item 7: dispositions ----------------------------------------------------------------------------- */
/* After the first allocation (redzone's handler is the kernel's for the five fatal signals), every way of
 * reading and setting a disposition answers as without redzone: SIG_DFL at first, then the program's own
 * handler, flags (SA_RESETHAND, SA_NODEFER, SA_ONSTACK, SA_RESTART) and mask; the old handler each call
 * returns; sysv_signal, sigset with SIG_HOLD, sigignore, siginterrupt; another signal untouched. */
Test(signals, the_program_reads_back_its_own_dispositions) {
    cr_assert_eq(same_as_without("dispositions", NULL), 0, "%s", out);
    cr_assert(strstr(mine, "rzsignal: signal 11 at start (rc 0): handler SIG_DFL flags 0x0 mask { }\n"), "%s", mine);
    cr_assert(strstr(mine, "rzsignal: signal(SIGSEGV, SIG_DFL) -> SIG_DFL\n"), "%s", mine);
    cr_assert(strstr(mine, "rzsignal: SIGSEGV after sigaction(on_info) (rc 0): handler on_info"), "%s", mine);
    cr_assert(strstr(mine, "rzsignal: signal(SIGSEGV, SIG_DFL) -> on_info\n"), "%s", mine);
    cr_assert(strstr(mine, "rzsignal: sigset(SIGILL, SIG_HOLD) -> on_signal\nrzsignal: sigset(SIGILL, SIG_DFL) -> SIG_HOLD\n"),
              "%s", mine);
    cr_assert(strstr(mine, "rzsignal: signal(SIGFPE, SIG_DFL) -> SIG_IGN\n"), "%s", mine);
    cr_assert_eq(count(out, "redzone:"), 1, "nothing to say but the exit line: %s", out);
    cr_assert(strstr(out, "redzone: exit: "), "%s", out);
}

/* The program's SA_SIGINFO handler runs (siginfo intact) and ends the process with its own status; redzone
 * says once, before it, that there is no final scan. */
Test(signals, the_programs_handler_runs_and_one_line_says_no_final_scan) {
    cr_assert_eq(same_as_without("crash", "exit"), 42, "%s", out);
    cr_assert(strstr(mine, "rzsignal: store\nrzsignal: handler: SIGSEGV at the page without access\n"), "%s", mine);
    cr_assert(strstr(out, "rzsignal: store\n" HANDLER_LINE "rzsignal: handler: SIGSEGV at the page without access\n"), "%s", out);
    cr_assert_eq(count(out, "redzone:"), 1, "%s", out);
}

/* A handler the program set before the first allocation is kept the same way. */
Test(signals, a_handler_set_before_the_first_allocation_still_runs) {
    cr_assert_eq(same_as_without("crash", "before"), 43, "%s", out);
    cr_assert(strstr(out, HANDLER_LINE "rzsignal: handler: SIGSEGV at the page without access\n"), "%s", out);
    cr_assert_eq(count(out, "redzone:"), 1, "%s", out);
}

/* A handler that siglongjmps back: the program goes on; the buffer it then frees is reported as usual. */
Test(signals, a_handler_that_jumps_back_lets_the_program_go_on) {
    cr_assert_eq(same_as_without("crash", "longjmp"), 0, "%s", out);
    cr_assert(strstr(mine, "rzsignal: back from the handler\n"), "%s", mine);
    cr_assert(strstr(out, "redzone: alloc#0 was violated when it was freed\n"), "%s", out);
    cr_assert_eq(count(out, "one final scan"), 0, "%s", out);
}

/* A handler that gives the signal back to its default action (signal(SIG_DFL) and return, or SA_RESETHAND
 * and return): the store faults again, and the final scan runs before the process dies of it. */
static void expect_final_scan_after_the_handler(const char *how) {
    cr_assert_eq(same_as_without("crash", how), 128 + SIGSEGV, "%s", out);
    cr_assert(strstr(mine, "rzsignal: handler: SIGSEGV, returning\n"), "%s", mine);
    const char *at = strstr(out, HANDLER_LINE "rzsignal: handler: SIGSEGV, returning\n"
                                 "redzone: SIGSEGV: one final scan before the process dies\n");
    cr_assert(at, "%s", out);
    cr_assert(strstr(at, "REDZONE VIOLATION alloc#0 user_bytes=128 pad=64 : bytes [0..=0] past the end were written"),
              "%s", out);
    cr_assert_eq(count(out, "one final scan"), 1, "%s", out);
}

Test(signals, a_handler_that_resets_the_default_gets_the_final_scan) { expect_final_scan_after_the_handler("reraise"); }
Test(signals, an_sa_resethand_handler_gets_the_final_scan) { expect_final_scan_after_the_handler("resethand"); }

/* The emulated driver catches its kernels' faults with a SIGSEGV handler of its own (CUDA_EMU_STICKY_FAULTS,
 * a sticky CUDA_ERROR_ILLEGAL_ADDRESS as on a GPU): that handler runs behind redzone's without the line,
 * which is about the program's handlers. */
Test(signals, the_drivers_own_fault_handler_gets_no_line) {
    const char *env[] = {PRELOAD, EMU, "METRALE_REDZONE=64", "CUDA_EMU_STICKY_FAULTS=1", NULL};
    const char *argv[] = {RZSTICKY, "fault", "exit", NULL};
    cr_assert_eq(spawn_capture(env, argv, out, sizeof out), 3, "%s", out);
    cr_assert(strstr(out, "rzsticky: synchronise the context: 700\n"), "the fault became the sticky error: %s", out);
    cr_assert_eq(count(out, "own handler"), 0, "%s", out);
}

/* ---- item 6: a process with nothing to check ---------------------------------------------------------- */
/* Every buffer freed (and reported then): the crash prints no redzone line. */
Test(signals, a_crash_with_no_live_zone_prints_nothing) {
    cr_assert_eq(same_as_without("crash", "freed"), 128 + SIGSEGV, "%s", out);
    cr_assert(strstr(out, "redzone: alloc#0 was violated when it was freed\nrzsignal: store\n"), "%s", out);
    cr_assert_eq(count(out, "final scan"), 0, "%s", out);
}

/* A forked child -------------------------------------------------------------------------------------- */
/* The child never touches CUDA (its zones and driver state are its parent's): it dies as without redzone,
 * printing nothing; the parent's own abort afterwards still gets its final scan. */
static void expect_silent_child(const char *how, int child_status) {
    cr_assert_eq(same_as_without("fork-die", how), 128 + SIGABRT, "%s", out);
    char want[256];
    snprintf(want, sizeof want, "rzsignal: child dies\nrzsignal: child status %d\nrzsignal: parent aborts\n"
                                "redzone: SIGABRT: one final scan before the process dies\n", child_status);
    cr_assert(strstr(out, want), "%s", out);
    cr_assert(strstr(out, "REDZONE VIOLATION alloc#0 user_bytes=128 pad=64 : bytes [0..=0] past the end were written"),
              "%s", out);
    cr_assert_eq(count(out, "one final scan"), 1, "the parent's: %s", out);
    cr_assert_eq(count(out, "skipped"), 0, "%s", out);
}

Test(signals, a_forked_child_that_aborts_prints_nothing) { expect_silent_child("abort", 128 + SIGABRT); }
Test(signals, a_forked_child_that_faults_prints_nothing) { expect_silent_child("segv", 128 + SIGSEGV); }
