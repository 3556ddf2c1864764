/*
 * One final scan when the program dies of a fatal signal (METRALE_REDZONE_SCAN=fatal, on by default):
 * SIGSEGV, SIGBUS, SIGILL, SIGFPE or SIGABRT. A band written just before a crash is often the cause.
 *
 * The handler itself does nothing that is not async-signal-safe: the crashing thread may hold the registry
 * lock, malloc's locks or the driver's. It hands the scan to the agent thread (the same request block gdb
 * uses, marked abandoned so the report goes to the program's log), waits a bounded time, and otherwise says
 * the scan was skipped. The agent takes the registry lock with a timeout, so a lock held by the crashing
 * thread gives a clear "held" line instead of a hang. Then the signal takes its default course: a fault
 * raised by an instruction returns and faults again at that instruction (the core shows it on top), any
 * other signal is raised again.
 *
 * Handlers are installed at the first allocation, only for signals whose disposition is still the default:
 * a program's own handler is never replaced (and a later one replaces ours). Once per process.
 */
#include <errno.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "rz_internal.h"

#define FATAL_WAIT_MS 5000 /* the agent's lock timeout (1.5 s) plus a scan */

static const int k_signals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
static atomic_int g_fired;

/* One line to the log, with write() only. */
static void say(const char *a, const char *b) {
    char line[320];
    size_t n = rz__log_line_start(line); /* the pid, where log lines carry it */
    for (const char *c = a; *c && n < sizeof line - 1; c++)
        line[n++] = *c;
    for (const char *c = b; *c && n < sizeof line - 1; c++)
        line[n++] = *c;
    line[n++] = '\n';
    int fd = RZ_STATE.log_fd >= 0 ? RZ_STATE.log_fd : 2;
    for (size_t done = 0; done < n;) {
        ssize_t w = write(fd, line + done, n - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        done += (size_t)w;
    }
}

/* Post a scan to the agent, abandoned from the start (its report goes to the log); 1 when it finished. */
static int agent_scan(void) {
    rz_agent_t *a = &__redzone_agent;
    if (!atomic_load(&a->alive))
        return -1;
    uint32_t answered = __atomic_load_n(&a->answered, __ATOMIC_RELAXED); /* the agent writes it */
    uint32_t req = answered + 1 != 0 ? answered + 1 : 1;
    a->op = RZ_AGENT_SCAN;
    atomic_store(&a->abandoned, req);
    atomic_store(&a->request, req);
    syscall(SYS_futex, &a->request, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
    for (int waited = 0; waited < FATAL_WAIT_MS; waited++) {
        if (__atomic_load_n(&a->answered, __ATOMIC_ACQUIRE) == req)
            return 1;
        struct timespec ms = {.tv_nsec = 1000000};
        nanosleep(&ms, NULL);
    }
    return 0;
}

static void on_fatal(int sig, siginfo_t *si, void *uc) {
    (void)uc;
    int saved = errno;
    if (atomic_exchange(&g_fired, 1) == 0) {
        say("redzone: ", sig == SIGSEGV ? "SIGSEGV: one final scan before the process dies"
                         : sig == SIGBUS ? "SIGBUS: one final scan before the process dies"
                         : sig == SIGILL ? "SIGILL: one final scan before the process dies"
                         : sig == SIGFPE ? "SIGFPE: one final scan before the process dies"
                                         : "SIGABRT: one final scan before the process dies");
        int r = rz__is_agent_thread() ? -2 : agent_scan();
        if (r == -1)
            say("redzone: final scan skipped: ", "no agent thread (METRALE_REDZONE_AGENT=0)");
        else if (r == -2)
            say("redzone: final scan skipped: ", "the fault is in redzone's own agent thread");
        else if (r == 0)
            say("redzone: final scan skipped: ", "it did not finish in 5 s (a lock held by the crashing thread?)");
    }
    /* The default action from here on, exactly once more. */
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, NULL);
    errno = saved;
    if (si && si->si_code > 0 && sig != SIGABRT)
        return; /* raised by an instruction: returning runs it again, and it faults where it did */
    raise(sig);
}

void rz__fatal_arm(void) {
    static atomic_int armed;
    if (!(rz__options()->scan & RZ_SCAN_FATAL) || atomic_exchange(&armed, 1))
        return;
    for (size_t i = 0; i < sizeof k_signals / sizeof k_signals[0]; i++) {
        struct sigaction old;
        if (sigaction(k_signals[i], NULL, &old) != 0 || (old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL)
            continue; /* the program's own handler, or ignored: leave it */
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_fatal;
        sa.sa_flags = SA_SIGINFO | SA_RESTART;
        sigemptyset(&sa.sa_mask);
        sigaction(k_signals[i], &sa, NULL);
    }
}
