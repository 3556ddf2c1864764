/*
 * The agent: the one thread through which a debugger makes the library scan or poison without running
 * code on the program's threads. gdb 13 on these machines cannot make inferior function calls, and an
 * inferior call would run on a user thread anyway; instead the library keeps a helper thread,
 * "redzone-agent", blocked in a futex wait on `__redzone_agent.request`. gdb writes the operation and its
 * arguments, then a new request number, resumes only this thread (scheduler-locking), and stops it again
 * at `__redzone_agent_done`, where it reads the result and the report lines the request produced.
 *
 * Why the futex wake-up needs no syscall from gdb: a thread stopped by the debugger inside futex_wait is
 * interrupted; when gdb resumes it the wait is restarted, sees the request word changed, and returns.
 * The wait also has a timeout, as a safety net.
 *
 * The agent takes the registry lock with a timeout (a stopped user thread may hold it), so a request
 * always answers: RZ_EBUSY rather than hanging. Output of a request is captured into `out` instead of the
 * program's log: gdb prints it.
 */
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "agent.h"
#include "fork.h"
#include "options.h"
#include "report.h"
#include "state.h"
#include "thread_state.h"

RZ_EXPORT rz_agent_t __redzone_agent = {
    .magic = RZ_AGENT_MAGIC,
    .version = RZ_AGENT_VERSION,
    .size = sizeof(rz_agent_t),
};

RZ_EXPORT RZ_NOINLINE void __redzone_agent_done(void) {
    /* A debugger stops here after each request. The asm keeps the call. */
    __asm__ volatile("" ::: "memory");
}

/* This thread's log lines, collected for the debugger (the agent's log sink, report.h). */
static void capture(const char *line, size_t len) {
    rz_agent_t *a = &__redzone_agent;
    if (a->out_len + len + 1 > sizeof a->out) {
        a->out_truncated = 1;
        return;
    }
    memcpy(a->out + a->out_len, line, len);
    a->out_len += (uint32_t)len;
    a->out[a->out_len] = '\0';
}

static void serve(rz_agent_t *a) {
    a->out_len = 0;
    a->out_truncated = 0;
    a->out[0] = '\0';
    atomic_store(&a->serving, 1);
    int64_t r;
    switch (a->op) {
    case RZ_AGENT_PING:
        r = RZ_OK;
        break;
    case RZ_AGENT_SCAN:
        r = rz_scan();
        break;
    case RZ_AGENT_POISON:
        r = rz_poison(a->arg0, a->arg1);
        break;
    case RZ_AGENT_UNPOISON:
        r = rz_unpoison();
        break;
    default:
        r = RZ_EINVAL;
        break;
    }
    a->result = r;
    atomic_store(&a->serving, 0);
}

static void *agent_main(void *arg) {
    (void)arg;
    rz_agent_t *a = &__redzone_agent;
    /* SIGINT is open while a request is served: the gdb plugin stops an agent that does not answer in time
     * with a SIGINT to this thread (tgkill), and a Ctrl-C during a request must reach a thread gdb sees run. A
     * blocked signal never shows to a debugger. Between requests it is blocked like every other. */
    sigset_t interrupt;
    sigemptyset(&interrupt);
    sigaddset(&interrupt, SIGINT);
    rz__thread.is_agent = 1;
    rz__log_set_thread_sink(capture);
    pthread_setname_np(pthread_self(), "redzone-agent");
    a->tid = (uint64_t)syscall(SYS_gettid);
    atomic_store(&a->alive, 1);
    for (;;) {
        uint32_t req = atomic_load(&a->request);
        if (req == 0 || req == a->answered) {
            struct timespec timeout = {.tv_sec = 5};
            syscall(SYS_futex, &a->request, FUTEX_WAIT_PRIVATE, req, &timeout, NULL, 0);
            continue;
        }
        pthread_sigmask(SIG_UNBLOCK, &interrupt, NULL);
        serve(a);
        if (atomic_load(&a->abandoned) == req && a->out_len)
            /* Nobody is waiting for this answer any more: nothing is lost, it goes to the program's log. */
            rz__log_text(a->out, a->out_len);
        __atomic_store_n(&a->answered, req, __ATOMIC_RELEASE); /* publishes the result and out to the requester */
        __redzone_agent_done();
        pthread_sigmask(SIG_BLOCK, &interrupt, NULL);
    }
    return NULL;
}

static pthread_once_t g_agent_once = PTHREAD_ONCE_INIT;
static _Atomic int g_agent_failed; /* pthread_create refused: the final scan says so instead of METRALE_REDZONE_AGENT */
static pthread_once_t g_fork_once = PTHREAD_ONCE_INIT;

/* The agent never takes a signal meant for the program: a thread inherits the mask of the thread that creates
 * it, and the first allocation can come before a daemon blocks SIGTERM and SIGUSR1 everywhere to sigwait for
 * them in one thread; the kernel would then deliver them to the agent, their default action killing the
 * process. So it starts with every asynchronous signal blocked; the ones an instruction raises stay open
 * (a fault in the agent still reaches the fatal-signal handler, a breakpoint the debugger). */
int rz__thread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *), void *arg) {
    sigset_t all, old;
    sigfillset(&all);
    static const int k_synchronous[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS};
    for (size_t i = 0; i < sizeof k_synchronous / sizeof k_synchronous[0]; i++)
        sigdelset(&all, k_synchronous[i]);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(t, attr, fn, arg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}

static void start(void) {
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 256 << 10);
    pthread_t t;
    if (rz__thread_create(&t, &attr, agent_main, NULL) != 0) {
        rz__warn("cannot start the debugger agent thread; gdb's redzone scan and poison will not work");
        atomic_store(&g_agent_failed, 1);
        pthread_attr_destroy(&attr);
        return;
    }
    pthread_attr_destroy(&attr);
    /* Wait until the agent has published its thread id, so a debugger that stops the program right after
     * this first allocation already finds it (once, at start-up: microseconds). */
    while (!atomic_load(&__redzone_agent.alive)) {
        struct timespec tick = {.tv_nsec = 50000};
        nanosleep(&tick, NULL);
    }
}

static void after_fork_child(void);
static void register_fork_handler(void) { rz__fork_register(NULL, NULL, after_fork_child); }

static _Atomic int g_agent_started; /* fast path past the two pthread_once calls */

void rz__agent_start(void) {
    if (RZ_LIKELY(atomic_load_explicit(&g_agent_started, memory_order_acquire)) || !rz__options()->agent)
        return;
    pthread_once(&g_fork_once, register_fork_handler);
    pthread_once(&g_agent_once, start);
    atomic_store_explicit(&g_agent_started, 1, memory_order_release);
}

int rz__agent_failed(void) { return atomic_load(&g_agent_failed); }

/* A forked child has no agent thread: let the next allocation start one (the start-up runs again there,
 * interpose/start.c). */
static void after_fork_child(void) {
    atomic_store(&g_agent_started, 0);
    atomic_store(&g_agent_failed, 0);
    g_agent_once = (pthread_once_t)PTHREAD_ONCE_INIT;
    atomic_store(&__redzone_agent.alive, 0);
    __redzone_agent.answered = 0;
    atomic_store(&__redzone_agent.request, 0);
}

/* For in-process tests and tools: post a request as a debugger would, wake the agent, wait for it. */
int64_t rz__agent_request(uint32_t op, uint64_t arg0, uint64_t arg1) {
    rz_agent_t *a = &__redzone_agent;
    a->op = op;
    a->arg0 = arg0;
    a->arg1 = arg1;
    uint32_t answered = __atomic_load_n(&a->answered, __ATOMIC_RELAXED);
    uint32_t req = answered + 1 != 0 ? answered + 1 : 1;
    atomic_store(&a->request, req);
    syscall(SYS_futex, &a->request, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
    while (__atomic_load_n(&a->answered, __ATOMIC_ACQUIRE) != req) {
        struct timespec ms = {.tv_nsec = 1000000};
        nanosleep(&ms, NULL);
    }
    return a->result;
}
