/*
 * The program's signal dispositions stay its own (libredzone.so only; the sanitizers intercept the same
 * names). From the first allocation on, redzone's fatal-signal handler is the kernel's for SIGSEGV, SIGBUS,
 * SIGILL, SIGFPE and SIGABRT (fatal_scan.c); every way a program sets or reads a disposition is interposed here
 * so that for those five it sees and sets its own (fatal_scan.c keeps it and calls the program's handler), and
 * for every other signal the call goes to libc untouched:
 *   sigaction, __sigaction;
 *   signal, bsd_signal, ssignal (one function in glibc: BSD semantics, the signal itself blocked in its
 *   handler, SA_RESTART unless siginterrupt said otherwise), sysv_signal, __sysv_signal (what `signal`
 *   becomes under strict X/Open: SA_RESETHAND | SA_NODEFER); sigset, sigignore, siginterrupt.
 * Each of glibc's own versions calls its internal sigaction, not this one, so for the five signals each is
 * rebuilt here on top of rz__fatal_sigaction, as glibc builds it. Not covered: a raw rt_sigaction system
 * call, and sigvec (a compatibility symbol no new program links against).
 */
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>

#include "common.h"
#include "fatal_scan.h"
#include "free_check.h"
#include "hooks.h"

/* Passes the call on to the next definition of name (libc's), resolved at its first use; where there is
 * none, fails as libc would with ENOSYS, returning `failed`. */
#define PASS_ON(type, name, failed, ...)                                                                     \
    do {                                                                                                     \
        static type *_Atomic next_;                                                                          \
        type *real_ = atomic_load_explicit(&next_, memory_order_acquire);                                   \
        if (real_ == NULL) {                                                                                 \
            real_ = (type *)dlsym(RTLD_NEXT, name);                                                          \
            atomic_store_explicit(&next_, real_, memory_order_release);                                      \
        }                                                                                                    \
        if (real_ == NULL) {                                                                                 \
            errno = ENOSYS;                                                                                  \
            return failed;                                                                                   \
        }                                                                                                    \
        return real_(__VA_ARGS__);                                                                           \
    } while (0)

typedef __sighandler_t signal_fn(int, __sighandler_t);
typedef int siginterrupt_fn(int, int);
typedef int sigignore_fn(int);

/* siginterrupt(sig, 1) for the five signals: their signal() leaves SA_RESTART out (glibc keeps the same set
 * for its own signal, which the five no longer reach). One bit per signal number. */
static _Atomic unsigned long long g_interrupting;

static unsigned long long bit(int sig) { return 1ULL << (sig & 63); }

static int bad_signal(int sig) { return sig <= 0 || sig >= NSIG; }

RZ_EXPORT int sigaction(int sig, const struct sigaction *restrict act, struct sigaction *restrict old);
int sigaction(int sig, const struct sigaction *restrict act, struct sigaction *restrict old) {
    return rz__fatal_signal(sig) ? rz__fatal_sigaction(sig, act, old) : rz__sigaction_next(sig, act, old);
}

RZ_EXPORT int __sigaction(int sig, const struct sigaction *restrict act, struct sigaction *restrict old);
int __sigaction(int sig, const struct sigaction *restrict act, struct sigaction *restrict old) {
    return sigaction(sig, act, old);
}

/* glibc's signal() (bsd_signal, ssignal) and sysv_signal, for the five signals. */
static __sighandler_t set_with(int sig, __sighandler_t handler, int sysv) {
    if (handler == SIG_ERR || bad_signal(sig)) {
        errno = EINVAL;
        return SIG_ERR;
    }
    struct sigaction act, old;
    memset(&act, 0, sizeof act);
    act.sa_handler = handler;
    sigemptyset(&act.sa_mask);
    if (sysv) {
        act.sa_flags = SA_RESETHAND | SA_NODEFER | SA_INTERRUPT;
    } else {
        sigaddset(&act.sa_mask, sig);
        act.sa_flags = (atomic_load(&g_interrupting) & bit(sig)) ? 0 : SA_RESTART;
    }
    if (rz__fatal_sigaction(sig, &act, &old) < 0)
        return SIG_ERR;
    return old.sa_handler;
}

/* signal() and its relatives; sysv: the handler is reset to SIG_DFL when it runs (SA_RESETHAND|SA_NODEFER). */
#define SIGNAL_FN(name, sysv)                                                                                \
    RZ_EXPORT __sighandler_t name(int sig, __sighandler_t handler);                                          \
    __sighandler_t name(int sig, __sighandler_t handler) {                                                   \
        if (rz__fatal_signal(sig))                                                                           \
            return set_with(sig, handler, sysv);                                                             \
        PASS_ON(signal_fn, #name, SIG_ERR, sig, handler);                                                    \
    }
SIGNAL_FN(signal, 0)
SIGNAL_FN(bsd_signal, 0)
SIGNAL_FN(ssignal, 0)
SIGNAL_FN(sysv_signal, 1)
SIGNAL_FN(__sysv_signal, 1)

RZ_EXPORT __sighandler_t sigset(int sig, __sighandler_t disp);
__sighandler_t sigset(int sig, __sighandler_t disp) {
    if (!rz__fatal_signal(sig)) {
        PASS_ON(signal_fn, "sigset", SIG_ERR, sig, disp);
    }
    /* glibc's sigset: SIG_HOLD blocks the signal; anything else is set with an empty mask and no flags and
     * unblocks it; SIG_HOLD is returned where the signal was blocked. */
    sigset_t set, oset;
    sigemptyset(&set);
    sigaddset(&set, sig);
    struct sigaction act, oact;
    if (disp == SIG_HOLD) {
        if (sigprocmask(SIG_BLOCK, &set, &oset) < 0)
            return SIG_ERR;
        if (sigismember(&oset, sig))
            return SIG_HOLD;
        if (rz__fatal_sigaction(sig, NULL, &oact) < 0)
            return SIG_ERR;
        return oact.sa_handler;
    }
    memset(&act, 0, sizeof act);
    act.sa_handler = disp;
    sigemptyset(&act.sa_mask);
    if (rz__fatal_sigaction(sig, &act, &oact) < 0)
        return SIG_ERR;
    if (sigprocmask(SIG_UNBLOCK, &set, &oset) < 0)
        return SIG_ERR;
    return sigismember(&oset, sig) ? SIG_HOLD : oact.sa_handler;
}

RZ_EXPORT int sigignore(int sig);
int sigignore(int sig) {
    if (!rz__fatal_signal(sig)) {
        PASS_ON(sigignore_fn, "sigignore", -1, sig);
    }
    struct sigaction act;
    memset(&act, 0, sizeof act);
    act.sa_handler = SIG_IGN;
    sigemptyset(&act.sa_mask);
    return rz__fatal_sigaction(sig, &act, NULL);
}

RZ_EXPORT int siginterrupt(int sig, int interrupt);
int siginterrupt(int sig, int interrupt) {
    if (!rz__fatal_signal(sig)) {
        PASS_ON(siginterrupt_fn, "siginterrupt", -1, sig, interrupt);
    }
    struct sigaction act;
    if (rz__fatal_sigaction(sig, NULL, &act) < 0)
        return -1;
    if (interrupt) {
        atomic_fetch_or(&g_interrupting, bit(sig));
        act.sa_flags &= ~SA_RESTART;
    } else {
        atomic_fetch_and(&g_interrupting, ~bit(sig));
        act.sa_flags |= SA_RESTART;
    }
    return rz__fatal_sigaction(sig, &act, NULL) < 0 ? -1 : 0;
}
