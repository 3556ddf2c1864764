/*
 * The program the gdb tests debug: plain driver-API code with named stopping points.
 *   gdbprog overrun      3 allocations, #1 written past its end, then stop_here(1); frees all (stop_here(2))
 *   gdbprog threads N    N threads each allocating, overrunning nothing, calling tick() 50 times
 *   gdbprog signal       raises SIGUSR1 (handled: sets g_got_signal), then stop_here(3)
 *   gdbprog spin         tick(0), then spins until a debugger sets g_release, then stop_here(4)
 *   gdbprog meminfo      overrun, cuMemGetInfo_v2 (a lock inside the driver), stop_here(5), free
 *   gdbprog many N       N allocations of 64 bytes, the last one overrun, then stop_here(6) (benchmarks)
 *   gdbprog fork         overrun, then fork (a debugger's `catch fork` stops there); the child exits 0, the
 *                        parent waits for it, then stop_here(7), frees
 *   gdbprog forkchild    fork before any CUDA call; the child initialises, overruns a zone and calls
 *                        stop_here(8) (follow-fork-mode child); the parent waits for it
 *   gdbprog copypast     2 allocations; read_back() copies 108 bytes of the 100-byte alloc#1 to the host (a copy
 *                        the driver refuses); prints what it returned; exits 0 only for CUDA_ERROR_INVALID_VALUE
 *   gdbprog badfree      2 allocations; free_early() frees 16 bytes before alloc#1's start (no allocation's start:
 *                        the driver refuses it); prints what it returned; exits 0 only for CUDA_ERROR_INVALID_VALUE
 */
#include <sys/wait.h>
#include <unistd.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_emu.h"
#include "device_store.h"

#define CHECK(call)                                                                                          \
    do {                                                                                                     \
        if ((call) != 0) {                                                                                   \
            fprintf(stderr, "gdbprog: %s failed\n", #call);                                                  \
            exit(100);                                                                                       \
        }                                                                                                    \
    } while (0)

#include <signal.h>

volatile int g_sink;
volatile sig_atomic_t g_got_signal;
volatile int g_release;
void stop_here(int where);
void tick(int thread);
__attribute__((noinline)) void stop_here(int where) { g_sink = where; }
/* Called by several threads at once: an atomic add, so the program itself has no data race (TSan builds). */
__attribute__((noinline)) void tick(int thread) { __atomic_fetch_add(&g_sink, thread, __ATOMIC_RELAXED); }

static rzcu_context g_ctx;

/* The copy past the end of q (100 bytes), on a line of its own: `redzone break on` stops with this frame
 * selected, on this line. */
rzcu_result read_back(unsigned char *host, rzcu_deviceptr q);
__attribute__((noinline)) rzcu_result read_back(unsigned char *host, rzcu_deviceptr q) {
    rzcu_result r = cuMemcpyDtoH_v2(host, q, 108);
    return r;
}

/* The free of a pointer 16 bytes before q's start, on a line of its own (as read_back). */
rzcu_result free_early(rzcu_deviceptr q);
__attribute__((noinline)) rzcu_result free_early(rzcu_deviceptr q) {
    rzcu_result r = cuMemFree_v2(q - 16);
    return r;
}

static void on_usr1(int sig) {
    (void)sig;
    g_got_signal = 1;
}

/* Puts a known pattern in ymm0 (AVX2 code on the user's thread) right before stopping, so a test can check
 * that a scan leaves the stopped thread's vector registers alone. */
static void load_ymm0(void) {
#if defined(__x86_64__)
    static const int pattern[8] = {0x11111111, 0x22222222, 0x33333333, 0x44444444,
                                   0x55555555, 0x66666666, 0x77777777, 0x0badcafe};
    if (__builtin_cpu_supports("avx2"))
        __asm__ volatile("vmovdqu %0, %%ymm0" ::"m"(pattern) : "xmm0");
#endif
}

static void *worker(void *arg) {
    int id = (int)(long)arg;
    CHECK(cuCtxSetCurrent(g_ctx));
    for (int i = 0; i < 50; i++) {
        rzcu_deviceptr p;
        CHECK(cuMemAlloc_v2(&p, 64 + (size_t)i));
        tick(id);
        CHECK(cuMemFree_v2(p));
    }
    return NULL;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "overrun";
    if (strcmp(mode, "forkchild") == 0) {
        pid_t child = fork();
        if (child == 0) {
            rzcu_deviceptr q;
            CHECK(cuInit(0));
            CHECK(cuDevicePrimaryCtxRetain(&g_ctx, 0));
            CHECK(cuCtxSetCurrent(g_ctx));
            CHECK(cuMemAlloc_v2(&q, 100));
            CHECK(device_fill(q + 100, 0x35, 3)); /* past the end */
            stop_here(8);
            CHECK(cuMemFree_v2(q));
            return 0;
        }
        int status = 0;
        waitpid(child, &status, 0);
        return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
    }
    CHECK(cuInit(0));
    CHECK(cuDevicePrimaryCtxRetain(&g_ctx, 0));
    CHECK(cuCtxSetCurrent(g_ctx));
    if (strcmp(mode, "signal") == 0 || strcmp(mode, "spin") == 0 || strcmp(mode, "meminfo") == 0) {
        rzcu_deviceptr q;
        CHECK(cuMemAlloc_v2(&q, 100));
        CHECK(device_fill(q + 100, 0x33, 2)); /* past the end */
        if (mode[1] == 'i') {
            signal(SIGUSR1, on_usr1);
            raise(SIGUSR1);
            stop_here(3);
        } else if (mode[1] == 'p') {
            tick(0);
            while (!g_release)
                g_sink++;
            stop_here(4);
        } else {
            size_t free_bytes, total;
            CHECK(cuMemGetInfo_v2(&free_bytes, &total));
            stop_here(5);
        }
        CHECK(cuMemFree_v2(q));
        printf("gdbprog: %s done\n", mode);
        return 0;
    }
    if (strcmp(mode, "copypast") == 0 || strcmp(mode, "badfree") == 0) {
        rzcu_deviceptr a, q;
        CHECK(cuMemAlloc_v2(&a, 256));
        CHECK(cuMemAlloc_v2(&q, 100));
        unsigned char host[108];
        rzcu_result r = mode[0] == 'c' ? read_back(host, q) : free_early(q);
        printf("gdbprog: %s returned %s\n", mode[0] == 'c' ? "read_back" : "free_early",
               r == RZCUDA_ERROR_INVALID_VALUE ? "CUDA_ERROR_INVALID_VALUE" : "something else");
        CHECK(cuMemFree_v2(q));
        CHECK(cuMemFree_v2(a));
        return r == RZCUDA_ERROR_INVALID_VALUE ? 0 : 3;
    }
    if (strcmp(mode, "fork") == 0) {
        rzcu_deviceptr q;
        CHECK(cuMemAlloc_v2(&q, 100));
        CHECK(device_fill(q + 100, 0x36, 4)); /* past the end */
        pid_t child = fork();
        if (child == 0)
            _exit(0);
        int status = 0;
        waitpid(child, &status, 0);
        stop_here(7);
        CHECK(cuMemFree_v2(q));
        return 0;
    }
    if (strcmp(mode, "many") == 0) {
        long n = argc > 2 ? atol(argv[2]) : 1000;
        rzcu_deviceptr q = 0;
        for (long i = 0; i < n; i++)
            CHECK(cuMemAlloc_v2(&q, 64));
        CHECK(device_fill(q + 64, 0x44, 1)); /* past the end */
        stop_here(6);
        return 0;
    }
    if (strcmp(mode, "threads") == 0) {
        int n = argc > 2 ? atoi(argv[2]) : 4;
        pthread_t t[16];
        for (long i = 0; i < n && i < 16; i++)
            pthread_create(&t[i], NULL, worker, (void *)(i + 1));
        for (int i = 0; i < n && i < 16; i++)
            pthread_join(t[i], NULL);
        stop_here(9);
        return 0;
    }
    rzcu_deviceptr p[3];
    CHECK(cuMemAlloc_v2(&p[0], 256));
    CHECK(cuMemAlloc_v2(&p[1], 1000));
    CHECK(cuMemAlloc_v2(&p[2], 512));
    unsigned char host[1008];
    memset(host, 0x42, sizeof host);
    host[1000] = 0xab;
    CHECK(cuMemcpyHtoD_v2(p[1], host, 1000));
    CHECK(device_store(p[1] + 1000, host + 1000, 8)); /* the 8 bytes past the end, as a kernel writes them */
    load_ymm0();
    stop_here(1);
    for (int i = 0; i < 3; i++)
        CHECK(cuMemFree_v2(p[i]));
    stop_here(2);
    printf("gdbprog: done\n");
    return 0;
}
