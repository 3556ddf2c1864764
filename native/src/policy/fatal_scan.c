/*
 * One final scan when the program dies of a fatal signal (METRALE_REDZONE_SCAN=fatal, on by default):
 * SIGSEGV, SIGBUS, SIGILL, SIGFPE or SIGABRT. A band written just before a crash is often the cause.
 *
 * The handler itself does nothing that is not async-signal-safe: the crashing thread may hold the registry
 * lock, malloc's locks or the driver's. It hands the scan to the agent thread (the same request block gdb
 * uses, marked abandoned so the report goes to the program's log), waits a bounded time, and otherwise says
 * why the scan was skipped. The agent takes the registry lock with a timeout, so a lock held by the crashing
 * thread gives a clear "held" line instead of a hang. Then the signal takes its default course: a fault
 * raised by an instruction returns and faults again at that instruction (the core shows it on top), any
 * other signal is raised again. A process with nothing to check prints nothing: one with no live zone, and a
 * forked child that has made no allocation of its own (the zones and driver state it has are its parent's)
 * die as they would without redzone.
 *
 * Dispositions stay the program's (as ASan does, the library's sigaction, signal and friends in
 * hooks_signal.c come here for these five signals). From the first allocation on, redzone's handler is the
 * kernel's for each of them, with the program's sa_mask and flags (SA_NODEFER, SA_ONSTACK, SA_RESTART as the
 * program set them), and the program reads back its own disposition: SIG_DFL until it sets another, its own
 * handler, flags and mask after. When the signal arrives and the program's disposition is a handler, that
 * handler runs, called as the kernel would (SA_SIGINFO or not, SA_RESETHAND honoured), and the final scan
 * runs only if the signal then takes its default action (the handler resets SIG_DFL and re-raises, or
 * returns from a fault it did not repair); redzone says so once, before the program's handler runs (not for
 * a handler of the driver's own: the emulated driver turns its kernels' faults into CUDA errors). SIG_IGN
 * goes to the kernel as it is: an ignored signal must not interrupt system calls or stay pending, so
 * redzone's handler steps aside for it (and a fault the kernel then forces kills without a final scan).
 *
 * Each signal's disposition has a small lock (the holder's thread id; signals blocked while it is held, so a
 * handler on the same thread never waits for it; a holder that is not a thread of this process, as after a
 * fork, is stale). The program's structures are copied in before it is taken and out after it is released.
 */
#include <dlfcn.h>
#include <errno.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "fatal_scan.h"
#include "agent.h"
#include "driver_info.h"
#include "free_check.h"
#include "options.h"
#include "registry.h"
#include "report.h"
#include "state.h"
#include "thread_state.h"

#define FATAL_WAIT_MS 5000 /* the agent's lock timeout (1.5 s) plus a scan */
#define FATAL_SIGNALS 5

static const int k_signals[FATAL_SIGNALS] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
static atomic_int g_fired;        /* the final scan ran or was skipped (once per process) */
static atomic_int g_told;         /* the line that the program's handler takes the signal (once) */
static atomic_int g_armed_once;   /* the handlers are installed (a forked child inherits them) */
static _Atomic pid_t g_owner_pid; /* the process whose zones a final scan checks */

typedef void plain_handler(int);
typedef void info_handler(int, siginfo_t *, void *);

/* The program's disposition of one of the signals, as it would read it back without redzone. */
struct disposition {
    _Atomic pid_t lock; /* the holder's thread id, 0 when free */
    int armed;          /* redzone manages this signal (from the first allocation on) */
    int hooked;         /* redzone's handler is the kernel's (not while the program ignores the signal) */
    plain_handler *handler; /* SIG_DFL or the program's function (sa_handler and sa_sigaction share it) */
    int drivers;            /* that function is in the driver (the emulated driver catches its kernels' faults) */
    int flags;              /* sa_flags as the kernel would report them for the program's own action */
    void (*restorer)(void); /* likewise sa_restorer */
};
static struct disposition g_disp[FATAL_SIGNALS];

static int index_of(int sig) {
    for (int i = 0; i < FATAL_SIGNALS; i++)
        if (k_signals[i] == sig)
            return i;
    return -1;
}

int rz__fatal_signal(int sig) { return index_of(sig) >= 0; }

/* ---- the real sigaction ------------------------------------------------------------------------------ */
typedef int sigaction_fn(int, const struct sigaction *, struct sigaction *);
static sigaction_fn *_Atomic g_next;

/* Resolved once, at the first call (the first allocation arms the handlers through it, so the fatal path
 * finds it resolved); dlsym is never called from a handler the library installed. */
int rz__sigaction_next(int sig, const struct sigaction *act, struct sigaction *old) {
    sigaction_fn *f = atomic_load_explicit(&g_next, memory_order_acquire);
    if (RZ_UNLIKELY(f == NULL)) {
        f = (sigaction_fn *)dlsym(RTLD_NEXT, "sigaction");
        if (f == NULL) {
            errno = ENOSYS;
            return -1;
        }
        atomic_store_explicit(&g_next, f, memory_order_release);
    }
    return f(sig, act, old);
}

/* ---- the per-signal lock ----------------------------------------------------------------------------- */
/* Returns 1 when taken, 0 when this thread already holds it (a fault inside the section: go on unlocked). */
static int lock(struct disposition *d, sigset_t *saved) {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, saved);
    int saved_errno = errno;
    pid_t me = (pid_t)syscall(SYS_gettid), holder = 0;
    while (!atomic_compare_exchange_weak(&d->lock, &holder, me)) {
        if (holder == me) {
            errno = saved_errno;
            return 0;
        }
        /* A holder that is no thread of this process: a fork copied the lock while another thread held it. */
        if (holder != 0 && syscall(SYS_tgkill, getpid(), holder, 0) != 0 && errno == ESRCH &&
            atomic_compare_exchange_strong(&d->lock, &holder, me))
            break;
        holder = 0;
        sched_yield();
    }
    errno = saved_errno;
    return 1;
}

static void unlock(struct disposition *d, int taken, const sigset_t *saved) {
    if (taken)
        atomic_store(&d->lock, 0);
    pthread_sigmask(SIG_SETMASK, saved, NULL);
}

/* ---- the handler ------------------------------------------------------------------------------------- */
/* One line to the log, with write() only. */
static void say(const char *a, const char *b, const char *c) {
    char line[320];
    size_t n = rz__log_line_start(line); /* the pid, where log lines carry it */
    const char *parts[] = {a, b, c};
    for (size_t p = 0; p < 3; p++)
        for (const char *ch = parts[p]; *ch && n < sizeof line - 1; ch++)
            line[n++] = *ch;
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

static const char *name_of(int sig) {
    return sig == SIGSEGV ? "SIGSEGV" : sig == SIGBUS ? "SIGBUS" : sig == SIGILL ? "SIGILL" : sig == SIGFPE ? "SIGFPE" : "SIGABRT";
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

static void final_scan(int sig) {
    say("redzone: ", name_of(sig), ": one final scan before the process dies");
    int r = rz__thread.is_agent ? -2 : agent_scan();
    if (r == -1)
        say("redzone: final scan skipped: ",
            !rz__options()->agent ? "no agent thread (METRALE_REDZONE_AGENT=0)"
            : rz__agent_failed()  ? "the agent thread could not be started"
                                  : "no agent thread",
            "");
    else if (r == -2)
        say("redzone: final scan skipped: ", "the fault is in redzone's own agent thread", "");
    else if (r == 0)
        say("redzone: final scan skipped: ", "it did not finish in 5 s (a lock held by the crashing thread?)", "");
}

static void on_fatal(int sig, siginfo_t *si, void *uc) {
    int saved = errno;
    int i = index_of(sig);
    struct disposition *d = &g_disp[i];
    sigset_t mask;
    int taken = lock(d, &mask);
    plain_handler *handler = d->handler;
    int flags = d->flags, drivers = d->drivers;
    if (handler != SIG_DFL && handler != SIG_IGN && (flags & SA_RESETHAND))
        d->handler = SIG_DFL; /* as the kernel resets it on entry (the flags stay, as Linux keeps them) */
    unlock(d, taken, &mask);
    /* Something to check: this process's own zones (not a forked child's copy of its parent's), at least one. */
    int mine = getpid() == atomic_load(&g_owner_pid) && rz__registry_count() > 0;
    if (handler == SIG_IGN) { /* set by another thread while this signal was on its way */
        errno = saved;
        return;
    }
    if (handler != SIG_DFL) {
        if (mine && !drivers && atomic_exchange(&g_told, 1) == 0)
            say("redzone: ", name_of(sig),
                ": the program's own handler takes it; no final scan unless the signal then takes its default action");
        errno = saved;
        if (flags & SA_SIGINFO)
            ((info_handler *)(void (*)(void))handler)(sig, si, uc);
        else
            handler(sig);
        return;
    }
    if (mine && atomic_exchange(&g_fired, 1) == 0)
        final_scan(sig);
    /* The default action from here on, exactly once more. */
    taken = lock(d, &mask);
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    if (rz__sigaction_next(sig, &dfl, NULL) == 0)
        d->hooked = 0;
    unlock(d, taken, &mask);
    errno = saved;
    if (si && si->si_code > 0 && sig != SIGABRT)
        return; /* raised by an instruction: returning runs it again, and it faults where it did */
    raise(sig);
}

/* ---- the program's dispositions ---------------------------------------------------------------------- */
/* Whether handler is code of the driver's object. dladdr is not async-signal-safe: it runs when a function is
 * set as the handler, which a program may do inside a handler of its own (as it may call dlsym there). */
static int in_driver(plain_handler *handler) {
    if (handler == SIG_DFL || handler == SIG_IGN || rz__dev_driver_code() == NULL)
        return 0;
    Dl_info mine, drivers;
    return dladdr((void *)(uintptr_t)handler, &mine) && dladdr(rz__dev_driver_code(), &drivers) &&
           mine.dli_fbase == drivers.dli_fbase;
}

/* Make redzone's handler the kernel's for signal i, standing for the program's action prog (SIG_DFL or a
 * handler): its mask and flags, and what the program reads back. kold: the kernel's previous action. */
static int install(int i, const struct sigaction *prog, int drivers, struct sigaction *kold) {
    struct disposition *d = &g_disp[i];
    struct sigaction k;
    memset(&k, 0, sizeof k);
    k.sa_sigaction = on_fatal;
    k.sa_flags = SA_SIGINFO | (prog->sa_flags & ~SA_RESETHAND); /* resetting is redzone's to do (on_fatal) */
    k.sa_mask = prog->sa_mask;
    if (rz__sigaction_next(k_signals[i], &k, kold) != 0)
        return -1;
    struct sigaction now;
    if (rz__sigaction_next(k_signals[i], NULL, &now) != 0)
        now = k;
    d->hooked = 1;
    d->handler = prog->sa_handler;
    d->drivers = drivers;
    /* What the kernel keeps of the flags (libc adds SA_RESTORER; unknown bits are dropped), with the
     * program's own SA_SIGINFO and SA_RESETHAND. */
    d->flags = (now.sa_flags & ~(SA_SIGINFO | SA_RESETHAND)) | (prog->sa_flags & (SA_SIGINFO | SA_RESETHAND));
    d->restorer = now.sa_restorer;
    return 0;
}

/* What the kernel reports (k), with the program's own action in place of redzone's (d's fields before). */
static void as_the_programs(struct sigaction *k, plain_handler *handler, int flags, void (*restorer)(void)) {
    k->sa_handler = handler;
    k->sa_flags = flags;
    k->sa_restorer = restorer;
}

int rz__fatal_sigaction(int sig, const struct sigaction *act, struct sigaction *old) {
    int i = index_of(sig);
    if (i < 0)
        return rz__sigaction_next(sig, act, old);
    struct sigaction want, k;
    memset(&k, 0, sizeof k);
    if (act)
        want = *act; /* a bad pointer faults here, outside the lock, as it would in libc */
    int drivers = act && in_driver(want.sa_handler);
    struct disposition *d = &g_disp[i];
    sigset_t mask;
    int taken = lock(d, &mask);
    int rc;
    if (!d->armed) {
        rc = rz__sigaction_next(sig, act ? &want : NULL, &k);
    } else {
        int was_hooked = d->hooked, flags = d->flags;
        plain_handler *handler = d->handler;
        void (*restorer)(void) = d->restorer;
        if (act == NULL)
            rc = rz__sigaction_next(sig, NULL, &k);
        else if (want.sa_handler == SIG_IGN) {
            rc = rz__sigaction_next(sig, &want, &k);
            if (rc == 0)
                d->hooked = 0;
        } else {
            rc = install(i, &want, drivers, &k);
        }
        if (rc == 0 && was_hooked)
            as_the_programs(&k, handler, flags, restorer);
    }
    int e = errno;
    unlock(d, taken, &mask);
    errno = e;
    if (rc == 0 && old)
        *old = k;
    return rc;
}

void rz__fatal_arm(void) {
    if (!(rz__options()->scan & RZ_SCAN_FATAL))
        return;
    if (atomic_exchange(&g_owner_pid, getpid()) != getpid()) { /* again in a forked child that allocates */
        atomic_store(&g_fired, 0);
        atomic_store(&g_told, 0);
    }
    if (atomic_exchange(&g_armed_once, 1))
        return;
    for (int i = 0; i < FATAL_SIGNALS; i++) {
        struct disposition *d = &g_disp[i];
        sigset_t mask;
        int taken = lock(d, &mask);
        struct sigaction old;
        if (rz__sigaction_next(k_signals[i], NULL, &old) == 0) {
            d->armed = 1;
            /* Whatever is there (the default, the program's handler, a runtime's), redzone's stands in front of
             * it; an ignored signal stays ignored. */
            if (old.sa_handler != SIG_IGN && install(i, &old, in_driver(old.sa_handler), NULL) == 0) {
                d->flags = old.sa_flags;
                d->restorer = old.sa_restorer;
            }
        }
        unlock(d, taken, &mask);
    }
}
