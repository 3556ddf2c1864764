/*
 * Process life under LD_PRELOAD=libredzone.so (run by test_reliability.c): fork, exec, exit from another
 * thread, _exit, abort, a signal in the middle of a scan, and dlclose of the driver. The program reaches the
 * driver only through dlopen("libcuda.so.1") and dlsym, as plugins do, so it can also dlclose it; it knows
 * nothing of redzone. Each mode prints what it did; the test checks what redzone printed.
 *   rzlife fork-nocuda CODE       overrun zone, fork; the child exits with CODE without touching CUDA
 *   rzlife fork-cuda CODE         fork before any CUDA call; the child initialises, overruns a zone it
 *                                 never frees and exits with CODE; then the parent does the same with 0
 *                                 (the parent prints both pids)
 *   rzlife fork-abort             overrun zone, freed (reported), fork; the child overruns a zone of its own
 *                                 and aborts (its final scan's lines go to the log it inherited: a child with
 *                                 no allocation of its own would print none); both print their pids. The
 *                                 child uses the driver its parent initialised, which NVIDIA leaves undefined
 *                                 and the emulated driver allows: this is about the log, not about CUDA
 *   rzlife exec CODE              overrun zone never freed, then exec itself as `after-exec CODE`
 *   rzlife after-exec CODE        (the exec'd image) overrun zone, freed; exit with CODE
 *   rzlife thread-exit CODE       overrun zone never freed; another thread calls exit(CODE)
 *   rzlife underscore-exit CODE   overrun zone freed (reported), another never freed; _exit(CODE)
 *   rzlife abort                  overrun zone freed (reported), another never freed; abort()
 *   rzlife scan-signal HOW        two zones, one overrun; a signal arrives inside the scan that
 *                                 cuCtxSynchronize runs (METRALE_REDZONE_SCAN=sync): HOW is `default`
 *                                 (SIGTERM, default action), `exit` (a SIGTERM handler calling exit(9)) or
 *                                 `return` (a SIGUSR1 handler that returns)
 *   rzlife dlclose                overrun zone never freed, dlclose of the driver, then dlopen again and one
 *                                 more overrun zone
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cu.h"

static struct driver {
    void *handle;
    rzcu_fn_cuInit *init;
    rzcu_fn_cuDevicePrimaryCtxRetain *retain;
    rzcu_fn_cuCtxSetCurrent *set_current;
    rzcu_fn_cuMemAlloc_v2 *alloc;
    rzcu_fn_cuMemFree_v2 *free;
    rzcu_fn_cuMemsetD8_v2 *memset;
    rzcu_fn_cuCtxSynchronize *sync;
    int (*inject_signal)(const char *, unsigned long long, int); /* the emulated driver's extensions */
    rzcu_result (*store)(rzcu_deviceptr, const void *, size_t);
} d;

static void *sym(const char *name) {
    void *p = dlsym(d.handle, name);
    if (p == NULL) {
        fprintf(stderr, "rzlife: no %s\n", name);
        exit(101);
    }
    return p;
}

static void open_driver(void) {
    d.handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (d.handle == NULL) {
        fprintf(stderr, "rzlife: %s\n", dlerror());
        exit(101);
    }
    d.init = (rzcu_fn_cuInit *)sym("cuInit");
    d.retain = (rzcu_fn_cuDevicePrimaryCtxRetain *)sym("cuDevicePrimaryCtxRetain");
    d.set_current = (rzcu_fn_cuCtxSetCurrent *)sym("cuCtxSetCurrent");
    d.alloc = (rzcu_fn_cuMemAlloc_v2 *)sym("cuMemAlloc_v2");
    d.free = (rzcu_fn_cuMemFree_v2 *)sym("cuMemFree_v2");
    d.memset = (rzcu_fn_cuMemsetD8_v2 *)sym("cuMemsetD8_v2");
    d.sync = (rzcu_fn_cuCtxSynchronize *)sym("cuCtxSynchronize");
    d.inject_signal = (int (*)(const char *, unsigned long long, int))dlsym(d.handle, "cuEmuInjectSignal");
    d.store = (rzcu_result(*)(rzcu_deviceptr, const void *, size_t))sym("cuEmuDeviceStore");
}

#define CHECK(call)                                                                                          \
    do {                                                                                                     \
        rzcu_result rc_ = (call);                                                                            \
        if (rc_ != 0) {                                                                                      \
            fprintf(stderr, "rzlife:%d: %s failed: %u\n", __LINE__, #call, rc_);                             \
            exit(100);                                                                                       \
        }                                                                                                    \
    } while (0)

static void setup(void) {
    open_driver();
    rzcu_context ctx;
    CHECK(d.init(0));
    CHECK(d.retain(&ctx, 0));
    CHECK(d.set_current(ctx));
}

/* One byte past the end, as a kernel's store (tests/programs/device_store.h says how). */
static rzcu_result overrun(rzcu_deviceptr end) {
    static const unsigned char byte = 0x11;
    rzcu_result r = d.memset(end, 0, 0);
    return r != 0 ? r : d.store(end, &byte, 1);
}

/* A zone of `user` bytes written one byte past its end. */
static rzcu_deviceptr overrun_zone(size_t user) {
    rzcu_deviceptr p;
    CHECK(d.alloc(&p, user));
    CHECK(overrun(p + user));
    return p;
}

/* Whether a thread named `name` runs in this process. */
static int has_thread(const char *name) {
    DIR *dir = opendir("/proc/self/task");
    if (dir == NULL)
        return -1;
    int found = 0;
    for (struct dirent *e; (e = readdir(dir)) != NULL && !found;) {
        char path[300], comm[64] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (f == NULL)
            continue;
        if (fgets(comm, sizeof comm, f))
            found = strncmp(comm, name, strlen(name)) == 0;
        fclose(f);
    }
    closedir(dir);
    return found;
}

static int wait_child(pid_t child) {
    int st;
    if (waitpid(child, &st, 0) != child)
        return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void *exit_thread(void *arg) {
    fprintf(stderr, "rzlife: thread calls exit\n");
    exit((int)(intptr_t)arg);
}

static void exit_on_signal(int sig) {
    (void)sig;
    static const char msg[] = "rzlife: handler calls exit\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
    exit(9);
}

static volatile sig_atomic_t g_signals;
static void count_signal(int sig) {
    (void)sig;
    g_signals++;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IONBF, 0);
    const char *mode = argc > 1 ? argv[1] : "";
    int code = argc > 2 ? atoi(argv[2]) : 0;
    if (strcmp(mode, "fork-nocuda") == 0) {
        setup();
        rzcu_deviceptr p = overrun_zone(128);
        pid_t child = fork();
        if (child == 0) {
            printf("rzlife: child agent thread %d\n", has_thread("redzone-agent"));
            exit(code);
        }
        printf("rzlife: child status %d\n", wait_child(child));
        printf("rzlife: parent agent thread %d\n", has_thread("redzone-agent"));
        CHECK(d.free(p));
        return 0;
    }
    if (strcmp(mode, "fork-cuda") == 0) {
        pid_t child = fork();
        if (child == 0) {
            setup();
            overrun_zone(64);
            printf("rzlife: child agent thread %d\n", has_thread("redzone-agent"));
            exit(code);
        }
        printf("rzlife: child pid %ld, parent pid %ld\n", (long)child, (long)getpid());
        printf("rzlife: child status %d\n", wait_child(child));
        setup();
        overrun_zone(32);
        printf("rzlife: parent agent thread %d\n", has_thread("redzone-agent"));
        return 0;
    }
    if (strcmp(mode, "fork-abort") == 0) {
        setup();
        CHECK(d.free(overrun_zone(128)));
        pid_t child = fork();
        if (child == 0) {
            overrun_zone(64);
            abort(); /* the fatal-signal scan's lines, from a child that inherited the parent's log */
        }
        printf("rzlife: child pid %ld, parent pid %ld\n", (long)child, (long)getpid());
        printf("rzlife: child status %d\n", wait_child(child));
        return 0;
    }
    if (strcmp(mode, "exec") == 0) {
        setup();
        overrun_zone(256);
        char arg[16];
        snprintf(arg, sizeof arg, "%d", code);
        fprintf(stderr, "rzlife: exec\n");
        execl("/proc/self/exe", argv[0], "after-exec", arg, (char *)NULL);
        perror("rzlife: exec");
        return 102;
    }
    if (strcmp(mode, "after-exec") == 0) {
        setup();
        CHECK(d.free(overrun_zone(48)));
        fprintf(stderr, "rzlife: after exec, exiting with %d\n", code);
        return code;
    }
    if (strcmp(mode, "thread-exit") == 0) {
        setup();
        overrun_zone(80);
        pthread_t t;
        if (pthread_create(&t, NULL, exit_thread, (void *)(intptr_t)code) != 0)
            return 103;
        pthread_join(t, NULL); /* never returns: the thread ends the process */
        return 104;
    }
    if (strcmp(mode, "underscore-exit") == 0 || strcmp(mode, "abort") == 0) {
        setup();
        CHECK(d.free(overrun_zone(40)));
        overrun_zone(72);
        fprintf(stderr, "rzlife: %s now\n", mode);
        if (mode[0] == 'a')
            abort();
        _exit(code);
    }
    if (strcmp(mode, "scan-signal") == 0 && argc > 2) {
        const char *how = argv[2];
        int sig = SIGTERM;
        if (strcmp(how, "exit") == 0)
            signal(SIGTERM, exit_on_signal);
        else if (strcmp(how, "return") == 0) {
            sig = SIGUSR1;
            struct sigaction sa = {.sa_handler = count_signal};
            sigaction(SIGUSR1, &sa, NULL);
        }
        setup();
        rzcu_deviceptr a, b;
        CHECK(d.alloc(&a, 100));
        CHECK(d.alloc(&b, 200));
        CHECK(d.memset(a, 1, 100)); /* device work: both bands are written now */
        CHECK(overrun(a + 100));
        /* The next batched copy is the scan's read of both bands. */
        if (d.inject_signal == NULL || d.inject_signal("cuMemcpyBatchAsync_v2", 1, sig) != 0)
            return 105;
        fprintf(stderr, "rzlife: sync\n");
        CHECK(d.sync());
        fprintf(stderr, "rzlife: after sync, signals handled %d\n", (int)g_signals);
        CHECK(d.free(a));
        CHECK(d.free(b));
        return 0;
    }
    if (strcmp(mode, "dlclose") == 0) {
        setup();
        overrun_zone(100);
        printf("rzlife: dlclose -> %d\n", dlclose(d.handle));
        setup(); /* dlopen again */
        overrun_zone(200);
        printf("rzlife: exiting\n");
        return 0;
    }
    fprintf(stderr, "rzlife: unknown mode '%s'\n", mode);
    return 2;
}
