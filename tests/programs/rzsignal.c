/*
 * Signals as a program sees them, with and without libredzone.so preloaded (run by tests/test_signals.c):
 * the same lines and the same exit status either way; redzone adds only its own lines.
 *   rzsignal sigwait          the daemon pattern: after the first allocation, block SIGUSR1 and SIGTERM in main,
 *                             start a thread that waits for them with sigwait, send both to the process
 *   rzsignal masks            after the first allocation, every thread but main: which signals it blocks
 *   rzsignal dispositions     after the first allocation, read and set the dispositions of the fatal signals
 *                             (sigaction, signal, bsd_signal, sysv_signal, sigset, sigignore, siginterrupt) and
 *                             print what each call returns and what a read shows
 *   rzsignal crash HOW        one byte written past a buffer never freed, a handler of the program's own for
 *                             SIGSEGV, then a store that faults. HOW: exit (an SA_SIGINFO handler that _exits 42),
 *                             longjmp (it siglongjmps back; the program frees the buffer and exits 0), reraise
 *                             (a signal() handler that sets SIG_DFL and returns: the store faults again),
 *                             resethand (an SA_RESETHAND handler that returns), before (the handler is set
 *                             before the first allocation and _exits 43), freed (no handler; the buffer is
 *                             freed first, so nothing is left to check)
 *   rzsignal fork-die HOW     one byte written past a buffer never freed, fork; the child, which never touches
 *                             CUDA, dies (HOW: abort, segv); then the parent aborts
 * The faults are stores to a page mapped without access (UBSan would report a null store itself, before the
 * signal).
 */
#define _GNU_SOURCE
#pragma GCC diagnostic ignored "-Wdeprecated-declarations" /* sigset, sigignore, siginterrupt: programs still call them */
#include <dirent.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cuda_emu.h"

#define PROG "rzsignal"
#include "device_store.h"
#include "prog.h"

/* Dropped from POSIX in 2008, so <signal.h> no longer declares it; glibc still has it. */
extern __sighandler_t bsd_signal(int sig, __sighandler_t handler);

static const int k_fatal[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};

/* A buffer with one byte written past its end, as a kernel would (the store is refused without redzone). */
static rzcu_deviceptr overrun_buffer(void) {
    rzcu_deviceptr p;
    CHECK(cuMemAlloc_v2(&p, 128));
    static const unsigned char byte = 0x11;
    (void)device_store(p + 128, &byte, 1);
    return p;
}

/* ---- sigwait ------------------------------------------------------------------------------------------ */
static sigset_t g_waited;

static void *waiter(void *arg) {
    (void)arg;
    for (int got = 0; got < 2; got++) {
        int sig = 0;
        if (sigwait(&g_waited, &sig) != 0)
            return (void *)1;
        printf("rzsignal: sigwait got %s\n", sig == SIGUSR1 ? "SIGUSR1" : sig == SIGTERM ? "SIGTERM" : "another");
    }
    return NULL;
}

static int mode_sigwait(void) {
    setup();
    rzcu_deviceptr p;
    CHECK(cuMemAlloc_v2(&p, 256));
    sigemptyset(&g_waited);
    sigaddset(&g_waited, SIGUSR1);
    sigaddset(&g_waited, SIGTERM);
    if (pthread_sigmask(SIG_BLOCK, &g_waited, NULL) != 0)
        return 2;
    pthread_t t;
    if (pthread_create(&t, NULL, waiter, NULL) != 0)
        return 3;
    kill(getpid(), SIGUSR1);
    kill(getpid(), SIGTERM);
    void *r;
    pthread_join(t, &r);
    CHECK(cuMemFree_v2(p));
    printf("rzsignal: waiter %s\n", r == NULL ? "done" : "failed");
    return 0;
}

/* ---- masks -------------------------------------------------------------------------------------------- */
static int mode_masks(void) {
    setup();
    rzcu_deviceptr p;
    CHECK(cuMemAlloc_v2(&p, 256));
    DIR *dir = opendir("/proc/self/task");
    if (dir == NULL)
        return 2;
    int others = 0;
    for (struct dirent *e; (e = readdir(dir)) != NULL;) {
        if (e->d_name[0] == '.' || atoi(e->d_name) == getpid())
            continue;
        char path[300], line[256], name[64] = "?";
        unsigned long long blocked = 0;
        snprintf(path, sizeof path, "/proc/self/task/%s/status", e->d_name);
        FILE *f = fopen(path, "r");
        if (f == NULL)
            continue;
        while (fgets(line, sizeof line, f)) {
            sscanf(line, "Name:\t%63s", name);
            sscanf(line, "SigBlk:\t%llx", &blocked);
        }
        fclose(f);
        /* Signals that cannot be blocked: SIGKILL, SIGSTOP, and glibc's two internal ones (32, 33). */
        int open_async = 0, blocked_sync = 0;
        for (int sig = 1; sig <= 64; sig++) {
            int is_blocked = (blocked >> (sig - 1)) & 1;
            int sync = sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL || sig == SIGTRAP || sig == SIGSYS;
            if (sig == SIGKILL || sig == SIGSTOP || sig == 32 || sig == 33)
                continue;
            open_async += !sync && !is_blocked;
            blocked_sync += sync && is_blocked;
        }
        printf("rzsignal: thread %s: %d asynchronous signals open, %d synchronous ones blocked\n", name, open_async,
               blocked_sync);
        others++;
    }
    closedir(dir);
    printf("rzsignal: %d threads besides main\n", others);
    CHECK(cuMemFree_v2(p));
    return 0;
}

/* ---- dispositions ------------------------------------------------------------------------------------- */
static void on_signal(int sig) { (void)sig; }
static void on_info(int sig, siginfo_t *si, void *uc) {
    (void)sig;
    (void)si;
    (void)uc;
}

static const char *handler_name(void (*h)(int)) {
    return h == SIG_DFL ? "SIG_DFL" : h == SIG_IGN ? "SIG_IGN" : h == SIG_ERR ? "SIG_ERR" : h == SIG_HOLD ? "SIG_HOLD"
         : h == on_signal ? "on_signal" : h == (void (*)(int))(void (*)(void))on_info ? "on_info" : "ANOTHER";
}

static void show(const char *what, const struct sigaction *sa) {
    char mask[256] = "";
    size_t n = 0;
    for (int sig = 1; sig < 65; sig++)
        if (sigismember(&sa->sa_mask, sig) == 1 && n < sizeof mask - 8)
            n += (size_t)snprintf(mask + n, sizeof mask - n, " %d", sig);
    printf("rzsignal: %s: handler %s flags 0x%x mask {%s }\n", what, handler_name(sa->sa_handler),
           (unsigned)sa->sa_flags, mask);
}

static void read_back(int sig, const char *what) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    int rc = sigaction(sig, NULL, &sa);
    char label[128];
    snprintf(label, sizeof label, "%s (rc %d)", what, rc);
    show(label, &sa);
}

static int mode_dispositions(void) {
    setup();
    rzcu_deviceptr p;
    CHECK(cuMemAlloc_v2(&p, 256));
    for (size_t i = 0; i < sizeof k_fatal / sizeof k_fatal[0]; i++) {
        char what[64];
        snprintf(what, sizeof what, "signal %d at start", k_fatal[i]);
        read_back(k_fatal[i], what);
    }
    printf("rzsignal: signal(SIGSEGV, SIG_DFL) -> %s\n", handler_name(signal(SIGSEGV, SIG_DFL)));
    read_back(SIGSEGV, "SIGSEGV after signal(SIG_DFL)");

    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    memset(&old, 0, sizeof old);
    sa.sa_sigaction = on_info;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_RESETHAND | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, SIGUSR2);
    sigaddset(&sa.sa_mask, SIGKILL); /* the kernel drops it */
    printf("rzsignal: sigaction(SIGSEGV, on_info) -> %d\n", sigaction(SIGSEGV, &sa, &old));
    show("its old action", &old);
    read_back(SIGSEGV, "SIGSEGV after sigaction(on_info)");
    printf("rzsignal: signal(SIGSEGV, SIG_DFL) -> %s\n", handler_name(signal(SIGSEGV, SIG_DFL)));
    read_back(SIGSEGV, "SIGSEGV after signal(SIG_DFL) again");

    printf("rzsignal: sysv_signal(SIGBUS, on_signal) -> %s\n", handler_name(sysv_signal(SIGBUS, on_signal)));
    read_back(SIGBUS, "SIGBUS after sysv_signal");
    printf("rzsignal: bsd_signal(SIGBUS, SIG_DFL) -> %s\n", handler_name(bsd_signal(SIGBUS, SIG_DFL)));
    read_back(SIGBUS, "SIGBUS after bsd_signal");

    printf("rzsignal: sigset(SIGILL, on_signal) -> %s\n", handler_name(sigset(SIGILL, on_signal)));
    printf("rzsignal: sigset(SIGILL, SIG_HOLD) -> %s\n", handler_name(sigset(SIGILL, SIG_HOLD)));
    printf("rzsignal: sigset(SIGILL, SIG_DFL) -> %s\n", handler_name(sigset(SIGILL, SIG_DFL)));
    read_back(SIGILL, "SIGILL after sigset");

    printf("rzsignal: sigignore(SIGFPE) -> %d\n", sigignore(SIGFPE));
    read_back(SIGFPE, "SIGFPE after sigignore");
    printf("rzsignal: signal(SIGFPE, SIG_DFL) -> %s\n", handler_name(signal(SIGFPE, SIG_DFL)));
    read_back(SIGFPE, "SIGFPE after signal(SIG_DFL)");

    printf("rzsignal: siginterrupt(SIGABRT, 1) -> %d\n", siginterrupt(SIGABRT, 1));
    printf("rzsignal: signal(SIGABRT, on_signal) -> %s\n", handler_name(signal(SIGABRT, on_signal)));
    read_back(SIGABRT, "SIGABRT after siginterrupt and signal");
    printf("rzsignal: siginterrupt(SIGABRT, 0) -> %d\n", siginterrupt(SIGABRT, 0));
    read_back(SIGABRT, "SIGABRT after siginterrupt(0)");
    printf("rzsignal: signal(SIGABRT, SIG_DFL) -> %s\n", handler_name(signal(SIGABRT, SIG_DFL)));

    printf("rzsignal: signal(SIGUSR1, on_signal) -> %s\n", handler_name(signal(SIGUSR1, on_signal)));
    read_back(SIGUSR1, "SIGUSR1 after signal");
    printf("rzsignal: signal(0, SIG_DFL) -> %s\n", handler_name(signal(0, SIG_DFL)));
    printf("rzsignal: sigaction(SIGKILL, on_signal) -> %d\n", sigaction(SIGKILL, &(struct sigaction){.sa_handler = on_signal}, NULL));
    CHECK(cuMemFree_v2(p));
    return 0;
}

/* ---- crash -------------------------------------------------------------------------------------------- */
static volatile int *g_no_access;

/* A store the kernel refuses with SIGSEGV (SEGV_ACCERR at g_no_access). */
static void fault(void) {
    if (g_no_access == NULL) {
        void *page = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (page == MAP_FAILED)
            exit(7);
        g_no_access = page;
    }
    *g_no_access = 1;
}

static sigjmp_buf g_back;
static const char *g_how;

static void say(const char *line) {
    ssize_t w = write(2, line, strlen(line));
    (void)w;
}

static void segv_info(int sig, siginfo_t *si, void *uc) {
    (void)uc;
    say(sig == SIGSEGV && si->si_code == SEGV_ACCERR && si->si_addr == (void *)g_no_access
            ? "rzsignal: handler: SIGSEGV at the page without access\n"
            : "rzsignal: handler: something else\n");
    if (strcmp(g_how, "longjmp") == 0)
        siglongjmp(g_back, 1);
    _exit(strcmp(g_how, "before") == 0 ? 43 : 42);
}

static void segv_plain(int sig) {
    say(sig == SIGSEGV ? "rzsignal: handler: SIGSEGV, returning\n" : "rzsignal: handler: something else\n");
    if (strcmp(g_how, "reraise") == 0)
        signal(SIGSEGV, SIG_DFL);
}

static void install(const char *how) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    if (strcmp(how, "reraise") == 0) {
        signal(SIGSEGV, segv_plain);
        return;
    }
    if (strcmp(how, "resethand") == 0) {
        sa.sa_handler = segv_plain;
        sa.sa_flags = SA_RESETHAND;
    } else {
        sa.sa_sigaction = segv_info;
        sa.sa_flags = SA_SIGINFO;
    }
    sigaction(SIGSEGV, &sa, NULL);
}

static int mode_crash(const char *how) {
    g_how = how;
    if (strcmp(how, "before") == 0)
        install(how);
    setup();
    rzcu_deviceptr p = overrun_buffer();
    if (strcmp(how, "freed") == 0)
        CHECK(cuMemFree_v2(p));
    else if (strcmp(how, "before") != 0)
        install(how);
    if (sigsetjmp(g_back, 1) == 0) {
        say("rzsignal: store\n");
        fault();
        say("rzsignal: not reached\n");
        return 9;
    }
    say("rzsignal: back from the handler\n");
    CHECK(cuMemFree_v2(p));
    return 0;
}

/* ---- fork-die ----------------------------------------------------------------------------------------- */
static int mode_fork_die(const char *how) {
    setup();
    overrun_buffer();
    pid_t child = fork();
    if (child == 0) {
        say("rzsignal: child dies\n");
        if (strcmp(how, "abort") == 0)
            abort();
        fault();
        _exit(9);
    }
    int st = 0;
    waitpid(child, &st, 0);
    fprintf(stderr, "rzsignal: child status %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
    say("rzsignal: parent aborts\n");
    abort();
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IONBF, 0);
    const char *mode = argc > 1 ? argv[1] : "";
    if (strcmp(mode, "sigwait") == 0)
        return mode_sigwait();
    if (strcmp(mode, "masks") == 0)
        return mode_masks();
    if (strcmp(mode, "dispositions") == 0)
        return mode_dispositions();
    if (strcmp(mode, "crash") == 0 && argc > 2)
        return mode_crash(argv[2]);
    if (strcmp(mode, "fork-die") == 0 && argc > 2)
        return mode_fork_die(argv[2]);
    fprintf(stderr, "rzsignal: unknown mode '%s'\n", mode);
    return 2;
}
