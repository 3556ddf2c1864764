/*
 * Kernel launches on several streams for the launch policy (METRALE_REDZONE_SCAN=launch), run by
 * test_attribution.c with libredzone.so preloaded on the emulated driver. It knows nothing of redzone.
 *   rzlaunch pipeline    three streams fill a, c and out at once; then s1 fills b, s2 overruns b (after the
 *                        fill, by an event) and s3 sums b (after the overrun, by an event)
 *   rzlaunch overlap     s2 runs `spin` (it waits for a flag) while s1 overruns b: the two overlap
 *   rzlaunch kinds       the overrun through the legacy stream, the per-thread stream (_ptsz),
 *                        cuLaunchKernelEx, a cooperative launch, and a graph launch, each on a new buffer
 *   rzlaunch repeat      the same overrun launched twice on b, a synchronisation and a clean launch between:
 *                        two reports
 *   rzlaunch free        an overrun, then cuMemFree of the buffer at once
 *   rzlaunch front       an overrun before the start (run with METRALE_REDZONE_FRONT=256)
 *   rzlaunch captured    launches captured into a graph are not checked; the graph's launch is
 *   rzlaunch callers     the same launch call, from two callers whose frames lie at the same place
 *   rzlaunch threads     four threads, a stream and a buffer each, two overruns each (the tree's TSan run)
 *   rzlaunch nowait      an overrun, then exit without synchronising
 *   rzlaunch asyncalloc  a launch checked while a stream-ordered allocation's band fill still waits
 *   rzlaunch calls       driver calls per checked launch, without and during another stream's capture
 *   rzlaunch beside      another thread captures in the global mode while this one (global mode) makes its
 *                        first launch, an overrun, and synchronises; then, in a second capture, its cuMemAlloc
 *                        (which the driver refuses then); in a third, in the relaxed mode, it allocates, launches
 *                        over the buffer, synchronises its stream and cuMemFrees it (which the driver allows);
 *                        each capture's end and the graph's launch printed
 *   rzlaunch quiet install|fill
 *                        another thread captures in the global mode while this one, in the global mode, does
 *                        only what the driver allows it then: install: the first launch over a buffer
 *                        allocated before the capture, a stream-ordered allocation, launch and free; fill:
 *                        launches while a stream-ordered allocation's band fill still waits behind a kernel;
 *                        the capture's end and the graph's launch printed
 *   rzlaunch many N      N clean launches on one stream over 3 buffers (the cost of a check)
 * Every kernel is `fill(buf, from, to, value)`: buf[from .. to) = value, or `spin(flag)`: waits until
 * *flag != 0, or `sum(buf, n, out)`.
 */
#define _GNU_SOURCE /* pthread barriers */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_emu.h"

#define CHECK(call)                                                                                          \
    do {                                                                                                     \
        rzcu_result rc_ = (call);                                                                            \
        if (rc_ != 0) {                                                                                      \
            fprintf(stderr, "rzlaunch:%d: %s failed: %u\n", __LINE__, #call, rc_);                           \
            exit(100);                                                                                       \
        }                                                                                                    \
    } while (0)

CUDA_EMU_KERNEL(fill, sizeof(rzcu_deviceptr), sizeof(unsigned long long), sizeof(unsigned long long),
                sizeof(unsigned int)) {
    unsigned char *buf = (unsigned char *)(uintptr_t)CUDA_EMU_PARAM(rzcu_deviceptr, 0);
    long long from = CUDA_EMU_PARAM(long long, 1), to = CUDA_EMU_PARAM(long long, 2);
    for (long long i = from; i < to; i++)
        buf[i] = (unsigned char)CUDA_EMU_PARAM(unsigned int, 3);
}

CUDA_EMU_KERNEL(spin, sizeof(rzcu_deviceptr)) {
    volatile unsigned char *flag = (volatile unsigned char *)(uintptr_t)CUDA_EMU_PARAM(rzcu_deviceptr, 0);
    while (*flag == 0)
        ;
}

CUDA_EMU_KERNEL(sum, sizeof(rzcu_deviceptr), sizeof(unsigned long long), sizeof(rzcu_deviceptr)) {
    const unsigned char *buf = (const unsigned char *)(uintptr_t)CUDA_EMU_PARAM(rzcu_deviceptr, 0);
    unsigned long long n = CUDA_EMU_PARAM(unsigned long long, 1), s = 0;
    for (unsigned long long i = 0; i < n; i++)
        s += buf[i];
    *(unsigned long long *)(uintptr_t)CUDA_EMU_PARAM(rzcu_deviceptr, 2) = s;
}

static rzcu_module g_mod;

static rzcu_function kernel(const char *name) {
    rzcu_function f;
    if (g_mod == NULL)
        CHECK(cuModuleLoadData(&g_mod, "emulated module"));
    CHECK(cuModuleGetFunction(&f, g_mod, name));
    return f;
}

/* fill(buf, from, to, value) on s, grid of 4 blocks of 64 (the grid the report shows). */
static void fill(rzcu_stream s, rzcu_deviceptr buf, long long from, long long to, unsigned value) {
    void *params[] = {&buf, &from, &to, &value};
    CHECK(cuLaunchKernel(kernel("fill"), 4, 1, 1, 64, 1, 1, 0, s, params, NULL));
}

static rzcu_stream stream(void) {
    rzcu_stream s;
    CHECK(cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING));
    return s;
}

static rzcu_deviceptr alloc(size_t n) {
    rzcu_deviceptr p;
    CHECK(cuMemAlloc_v2(&p, n));
    return p;
}

static void pipeline(void) {
    rzcu_stream s1 = stream(), s2 = stream(), s3 = stream();
    rzcu_event filled, overrun;
    CHECK(cuEventCreate(&filled, 0));
    CHECK(cuEventCreate(&overrun, 0));
    rzcu_deviceptr a = alloc(256), b = alloc(256), c = alloc(256), out = alloc(8);
    fill(s1, a, 0, 256, 1); /* three streams at once */
    fill(s2, c, 0, 256, 2);
    fill(s3, out, 0, 8, 0);
    CHECK(cuCtxSynchronize());
    fill(s1, b, 0, 256, 3);
    CHECK(cuEventRecord(filled, s1));
    CHECK(cuStreamWaitEvent(s2, filled, 0));
    fill(s2, b, 128, 264, 0x5a); /* 8 bytes past the end */
    CHECK(cuEventRecord(overrun, s2));
    CHECK(cuStreamWaitEvent(s3, overrun, 0));
    unsigned long long n = 256;
    void *params[] = {&b, &n, &out};
    CHECK(cuLaunchKernel(kernel("sum"), 1, 1, 1, 1, 1, 1, 0, s3, params, NULL));
    CHECK(cuCtxSynchronize());
    printf("rzlaunch: pipeline done\n");
}

static void overlap(void) {
    rzcu_stream s1 = stream(), s2 = stream(), s3 = stream();
    rzcu_deviceptr flag = alloc(1), b = alloc(256);
    CHECK(cuMemsetD8_v2(flag, 0, 1));
    void *params[] = {&flag};
    CHECK(cuLaunchKernel(kernel("spin"), 1, 1, 1, 1, 1, 1, 0, s2, params, NULL));
    fill(s1, b, 0, 260, 0x5a); /* 4 bytes past the end while spin runs */
    CHECK(cuStreamSynchronize(s1));
    printf("rzlaunch: overrun checked while spin runs\n");
    CHECK(cuMemsetD8Async(flag, 1, 1, s3));
    CHECK(cuCtxSynchronize());
}

static void kinds(void) {
    rzcu_stream s = stream();
    rzcu_deviceptr legacy = alloc(100), pts = alloc(100), ex = alloc(100), coop = alloc(100), graph = alloc(100);
    long long from = 0, to = 101;
    unsigned value = 0x77;
    void *params[] = {&legacy, &from, &to, &value};
    CHECK(cuLaunchKernel(kernel("fill"), 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL));
    CHECK(cuCtxSynchronize());
    params[0] = &pts;
    CHECK(cuLaunchKernel_ptsz(kernel("fill"), 1, 2, 1, 32, 1, 1, 0, NULL, params, NULL));
    CHECK(cuCtxSynchronize());
    params[0] = &ex;
    rzcu_launch_config config = {.gridDimX = 2, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 16, .blockDimY = 2,
                                 .blockDimZ = 1, .hStream = s};
    CHECK(cuLaunchKernelEx(&config, kernel("fill"), params, NULL));
    CHECK(cuCtxSynchronize());
    params[0] = &coop;
    CHECK(cuLaunchCooperativeKernel(kernel("fill"), 3, 1, 1, 8, 1, 1, 0, s, params));
    CHECK(cuCtxSynchronize());
    params[0] = &graph;
    struct CUgraph_st *g;
    struct CUgraphExec_st *exec;
    CHECK(cuStreamBeginCapture_v2(s, 0));
    CHECK(cuLaunchKernel(kernel("fill"), 1, 1, 1, 32, 1, 1, 0, s, params, NULL));
    CHECK(cuStreamEndCapture(s, &g));
    CHECK(cuGraphInstantiateWithFlags(&exec, g, 0));
    CHECK(cuGraphLaunch(exec, s));
    CHECK(cuCtxSynchronize());
    printf("rzlaunch: graph exec %p\n", (void *)exec);
}

static void repeat(void) {
    rzcu_stream s = stream();
    rzcu_deviceptr a = alloc(256), b = alloc(256);
    fill(s, b, 0, 264, 0x5a);
    CHECK(cuStreamSynchronize(s)); /* the band is written back here */
    fill(s, a, 0, 256, 1);
    fill(s, b, 0, 264, 0x5a); /* the same bytes again: a new write */
    CHECK(cuStreamSynchronize(s));
    fill(s, b, 0, 256, 1); /* in bounds: nothing */
    CHECK(cuStreamSynchronize(s));
    printf("rzlaunch: repeat done\n");
}

static void free_at_once(void) {
    rzcu_stream s = stream();
    rzcu_deviceptr b = alloc(256);
    fill(s, b, 0, 258, 0x5a);
    CHECK(cuMemFree_v2(b));
    printf("rzlaunch: freed\n");
}

static void front(void) {
    rzcu_stream s = stream();
    rzcu_deviceptr b = alloc(256);
    fill(s, b - 16, 0, 16, 0x5a); /* 16 bytes before the start */
    CHECK(cuStreamSynchronize(s));
    printf("rzlaunch: front done\n");
}

static void captured(void) {
    rzcu_stream s = stream();
    rzcu_deviceptr b = alloc(256);
    long long from = 0, to = 260;
    unsigned value = 0x5a;
    void *params[] = {&b, &from, &to, &value};
    struct CUgraph_st *g;
    struct CUgraphExec_st *exec;
    CHECK(cuStreamBeginCapture_v2(s, 0));
    CHECK(cuLaunchKernel(kernel("fill"), 1, 1, 1, 1, 1, 1, 0, s, params, NULL));
    CHECK(cuStreamEndCapture(s, &g));
    printf("rzlaunch: captured\n");
    CHECK(cuGraphInstantiateWithFlags(&exec, g, 0));
    CHECK(cuGraphLaunch(exec, s));
    CHECK(cuStreamSynchronize(s));
    printf("rzlaunch: graph ran\n");
}

/* The same launch call reached from two callers with the same frame layout: the launch call's stack is at
 * the same place both times, its outer frames differ (the library's stack cache must see that). */
static __attribute__((noinline)) void fill_from(rzcu_stream s, rzcu_deviceptr b, long long to) { fill(s, b, 0, to, 0x5a); }
static __attribute__((noinline)) void first_caller(rzcu_stream s, rzcu_deviceptr b, long long to) {
    fill_from(s, b, to);
}
static __attribute__((noinline)) void second_caller(rzcu_stream s, rzcu_deviceptr b, long long to) {
    fill_from(s, b, to);
}

static void callers(void) {
    rzcu_stream s = stream();
    rzcu_deviceptr b = alloc(256);
    first_caller(s, b, 256);
    first_caller(s, b, 256);
    second_caller(s, b, 260);
    CHECK(cuStreamSynchronize(s));
    printf("rzlaunch: callers done\n");
}

/* Four threads, a stream each, launching on their own buffer; each overruns it twice (other bytes each time),
 * synchronising after each overrun. Every overrun is reported once (by whichever check saw it first). */
enum { THREADS = 4, ROUNDS = 100 };

static void *thread_main(void *arg) {
    rzcu_context ctx = arg;
    CHECK(cuCtxSetCurrent(ctx));
    rzcu_stream s = stream();
    rzcu_deviceptr b = alloc(256);
    static _Atomic unsigned value = 0x40;
    for (int i = 0; i < ROUNDS; i++) {
        int bad = i == ROUNDS / 2 || i == ROUNDS - 10;
        fill(s, b, 0, bad ? 264 : 256, bad ? atomic_fetch_add(&value, 1) : 1);
        if (bad)
            CHECK(cuStreamSynchronize(s));
    }
    CHECK(cuStreamSynchronize(s));
    CHECK(cuMemFree_v2(b));
    return NULL;
}

static void threads(void) {
    rzcu_context ctx;
    CHECK(cuCtxGetCurrent(&ctx));
    kernel("fill"); /* the module, loaded once */
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        if (pthread_create(&t[i], NULL, thread_main, ctx) != 0)
            exit(101);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    printf("rzlaunch: threads done\n");
}

/* A stream-ordered allocation whose band fill waits behind a kernel on its stream, while another stream's
 * launch is checked: that band is not in place yet, and must not be judged; later, an overrun of it is. */
static void async_alloc(void) {
    rzcu_stream s1 = stream(), s2 = stream(), s3 = stream();
    rzcu_deviceptr flag = alloc(1), a = alloc(256), b;
    CHECK(cuMemsetD8_v2(flag, 0, 1));
    void *params[] = {&flag};
    CHECK(cuLaunchKernel(kernel("spin"), 1, 1, 1, 1, 1, 1, 0, s1, params, NULL));
    CHECK(cuMemAllocAsync(&b, 256, s1)); /* its band's fill queued behind spin */
    fill(s2, a, 0, 256, 1);
    CHECK(cuStreamSynchronize(s2));
    printf("rzlaunch: checked while b's fill waits\n");
    CHECK(cuMemsetD8Async(flag, 1, 1, s3));
    CHECK(cuCtxSynchronize());
    fill(s2, b, 0, 258, 0x5a);
    CHECK(cuStreamSynchronize(s2));
    printf("rzlaunch: async done\n");
}

/* An overrun, and the program ends without waiting for it. */
static void no_wait(void) {
    rzcu_stream s = stream();
    rzcu_deviceptr b = alloc(256);
    fill(s, b, 0, 260, 0x5a);
    printf("rzlaunch: exiting\n");
}

static void many(long n) {
    rzcu_stream s = stream();
    rzcu_deviceptr b[3] = {alloc(256), alloc(256), alloc(256)};
    for (long i = 0; i < n; i++)
        fill(s, b[i % 3], 0, 256, (unsigned)i);
    CHECK(cuStreamSynchronize(s));
    printf("rzlaunch: %ld launches\n", n);
}

/* LAUNCHES launches of f on s over b[0..3), with the driver calls they cost besides the launches. */
static void calls_per_launch(rzcu_function f, rzcu_stream s, rzcu_deviceptr *b, const char *when) {
    enum { LAUNCHES = 20 };
    cuEmuResetCallCounts();
    for (int i = 0; i < LAUNCHES; i++) {
        long long from = 0, to = 256;
        unsigned value = (unsigned)i;
        void *params[] = {&b[i % 3], &from, &to, &value};
        CHECK(cuLaunchKernel(f, 4, 1, 1, 64, 1, 1, 0, s, params, NULL));
    }
    unsigned long long other = cuEmuCallCountAll() - LAUNCHES; /* the library's check kernels count */
    unsigned long long asked = cuEmuCallCount("cuStreamIsCapturing");
    /* Relaxed: this thread may be capturing another stream in the global mode, where a synchronisation of any
     * stream is refused and invalidates the capture. */
    rzcu_capture_mode relaxed = RZCU_STREAM_CAPTURE_MODE_RELAXED;
    CHECK(cuThreadExchangeStreamCaptureMode(&relaxed));
    CHECK(cuStreamSynchronize(s));
    CHECK(cuThreadExchangeStreamCaptureMode(&relaxed));
    printf("rzlaunch: %s: %.2f driver calls per launch, %.2f of them cuStreamIsCapturing\n", when,
           (double)other / LAUNCHES, (double)asked / LAUNCHES);
}

/* What a checked launch costs in driver calls, with no capture in the process, while another stream is being
 * captured (begun through an entry point from cuGetProcAddress, as the runtime begins one), and after that
 * capture and one of the per-thread stream ended; the launch made into the capture is seen as one (the library's warning) and the capture stays
 * valid. Run with
 * CUDA_EMU_KERNEL_HOLD=1, so no check completes while the calls are counted. */
static void calls(void) {
    rzcu_stream s = stream(), c = stream();
    rzcu_deviceptr b[3] = {alloc(256), alloc(256), alloc(256)};
    rzcu_function f = kernel("fill");
    calls_per_launch(f, s, b, "first launches"); /* the checks' staging, made once */
    calls_per_launch(f, s, b, "no capture");
    rzcu_result (*begin)(rzcu_stream, unsigned int);
    CHECK(cuGetProcAddress("cuStreamBeginCapture", (void **)&begin, 12000, 0));
    CHECK(begin(c, 0));
    calls_per_launch(f, s, b, "while another stream is captured");
    fill(c, b[0], 0, 256, 1);
    struct CUgraph_st *g;
    CHECK(cuStreamEndCapture(c, &g));
    CHECK(cuStreamBeginCapture_v2_ptsz(NULL, 2)); /* this thread's per-thread stream, relaxed */
    long long from = 0, to = 256;
    unsigned value = 2;
    void *params[] = {&b[1], &from, &to, &value};
    CHECK(cuLaunchKernel_ptsz(f, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL));
    CHECK(cuStreamEndCapture_ptsz(NULL, &g));
    printf("rzlaunch: capture ended\n");
    calls_per_launch(f, s, b, "after the capture");
}

/* Thread A of `beside`: three captures of its stream in the global mode (a kernel on a each), each held open
 * until the main thread is done beside it; then ended (and, when that succeeds, instantiated and launched). */
struct beside {
    rzcu_context ctx;
    rzcu_stream s;
    rzcu_deviceptr a;
    pthread_barrier_t began, done;
};

static void *beside_capturer(void *arg) {
    struct beside *b = arg;
    CHECK(cuCtxSetCurrent(b->ctx));
    for (int round = 1; round <= 3; round++) {
        CHECK(cuStreamBeginCapture_v2(b->s, 0)); /* CU_STREAM_CAPTURE_MODE_GLOBAL */
        fill(b->s, b->a, 0, 256, (unsigned)round);
        pthread_barrier_wait(&b->began);
        pthread_barrier_wait(&b->done);
        struct CUgraph_st *g = NULL;
        rzcu_result r = cuStreamEndCapture(b->s, &g);
        printf("rzlaunch: capture %d ended with %u\n", round, r);
        if (r != 0)
            continue;
        struct CUgraphExec_st *exec;
        CHECK(cuGraphInstantiateWithFlags(&exec, g, 0));
        CHECK(cuGraphLaunch(exec, b->s));
        CHECK(cuStreamSynchronize(b->s));
        unsigned char first = 0;
        CHECK(cuMemcpyDtoH_v2(&first, b->a, 1));
        printf("rzlaunch: graph %d ran: a[0] = %u\n", round, first);
        CHECK(cuGraphExecDestroy(exec));
        CHECK(cuGraphDestroy(g));
    }
    return NULL;
}

static void beside(rzcu_context ctx) {
    struct beside t = {.ctx = ctx};
    t.s = stream();
    t.a = alloc(256); /* alloc#0 */
    rzcu_stream s = stream();
    rzcu_deviceptr b = alloc(256); /* alloc#1 */
    pthread_barrier_init(&t.began, NULL, 2);
    pthread_barrier_init(&t.done, NULL, 2);
    pthread_t thread;
    if (pthread_create(&thread, NULL, beside_capturer, &t) != 0)
        exit(101);
    pthread_barrier_wait(&t.began); /* capture 1 in progress */
    fill(s, b, 0, 260, 0x5a);      /* this process's first checked launch: 4 bytes past the end */
    /* The synchronisation relaxed: in the global mode the driver refuses it beside the global capture. */
    rzcu_capture_mode mode = RZCU_STREAM_CAPTURE_MODE_RELAXED;
    CHECK(cuThreadExchangeStreamCaptureMode(&mode));
    CHECK(cuStreamSynchronize(s));
    CHECK(cuThreadExchangeStreamCaptureMode(&mode));
    printf("rzlaunch: launched and synchronised beside the capture\n");
    pthread_barrier_wait(&t.done);
    pthread_barrier_wait(&t.began); /* capture 2 in progress */
    rzcu_deviceptr p = 0;
    printf("rzlaunch: cuMemAlloc beside the capture: %u\n", cuMemAlloc_v2(&p, 256));
    pthread_barrier_wait(&t.done);
    pthread_barrier_wait(&t.began); /* capture 3 in progress */
    rzcu_capture_mode relaxed = RZCU_STREAM_CAPTURE_MODE_RELAXED;
    CHECK(cuThreadExchangeStreamCaptureMode(&relaxed));
    CHECK(cuMemAlloc_v2(&p, 256)); /* alloc#2 */
    fill(s, p, 0, 256, 0x11);
    CHECK(cuStreamSynchronize(s));
    printf("rzlaunch: cuMemFree beside the capture (relaxed): %u\n", cuMemFree_v2(p));
    CHECK(cuThreadExchangeStreamCaptureMode(&relaxed));
    pthread_barrier_wait(&t.done);
    pthread_join(thread, NULL);
    pthread_barrier_destroy(&t.began);
    pthread_barrier_destroy(&t.done);
}

/* The other thread of `quiet`: one capture of its stream in the global mode, held open until the main thread
 * is done beside it; then ended, instantiated and launched. */
static void *quiet_capturer(void *arg) {
    struct beside *b = arg;
    CHECK(cuCtxSetCurrent(b->ctx));
    CHECK(cuStreamBeginCapture_v2(b->s, 0)); /* CU_STREAM_CAPTURE_MODE_GLOBAL */
    fill(b->s, b->a, 0, 256, 7);
    pthread_barrier_wait(&b->began);
    pthread_barrier_wait(&b->done);
    struct CUgraph_st *g = NULL;
    rzcu_result r = cuStreamEndCapture(b->s, &g);
    printf("rzlaunch: capture ended with %u\n", r);
    if (r != 0)
        return NULL;
    struct CUgraphExec_st *exec;
    CHECK(cuGraphInstantiateWithFlags(&exec, g, 0));
    CHECK(cuGraphLaunch(exec, b->s));
    CHECK(cuStreamSynchronize(b->s));
    unsigned char first = 0;
    CHECK(cuMemcpyDtoH_v2(&first, b->a, 1));
    printf("rzlaunch: graph ran: a[0] = %u\n", first);
    CHECK(cuGraphExecDestroy(exec));
    CHECK(cuGraphDestroy(g));
    return NULL;
}

static void quiet(rzcu_context ctx, const char *what) {
    struct beside t = {.ctx = ctx};
    t.s = stream();
    t.a = alloc(256);
    rzcu_stream s = stream(), s2 = stream();
    rzcu_deviceptr b = alloc(256), flag = alloc(1), c = 0;
    int install = strcmp(what, "install") == 0;
    if (!install) {
        fill(s2, b, 0, 256, 1); /* b's band written before the capture */
        CHECK(cuStreamSynchronize(s2));
        CHECK(cuMemsetD8_v2(flag, 0, 1));
        void *params[] = {&flag};
        CHECK(cuLaunchKernel(kernel("spin"), 1, 1, 1, 1, 1, 1, 0, s, params, NULL));
        CHECK(cuMemAllocAsync(&c, 256, s)); /* its band's fill queued behind spin */
    }
    pthread_barrier_init(&t.began, NULL, 2);
    pthread_barrier_init(&t.done, NULL, 2);
    pthread_t thread;
    if (pthread_create(&thread, NULL, quiet_capturer, &t) != 0)
        exit(101);
    pthread_barrier_wait(&t.began); /* the capture in progress */
    if (install) {
        fill(s, b, 0, 256, 3); /* the first launch over b */
        CHECK(cuMemAllocAsync(&c, 256, s));
        fill(s, c, 0, 256, 2);
        CHECK(cuMemFreeAsync(c, s));
    } else {
        fill(s2, b, 0, 256, 2); /* c's fill still waits behind spin */
        fill(s2, b, 0, 256, 3);
    }
    printf("rzlaunch: launched beside the capture\n");
    pthread_barrier_wait(&t.done);
    pthread_join(thread, NULL);
    pthread_barrier_destroy(&t.began);
    pthread_barrier_destroy(&t.done);
    if (!install) {
        CHECK(cuMemsetD8Async(flag, 1, 1, s2));
        CHECK(cuMemFreeAsync(c, s));
    }
    CHECK(cuCtxSynchronize());
    unsigned char last = 0;
    CHECK(cuMemcpyDtoH_v2(&last, b + 255, 1));
    printf("rzlaunch: quiet done: b[255] = %u\n", last);
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    setvbuf(stdout, NULL, _IOLBF, 0); /* its lines and the library's, in the order they happened */
    rzcu_context ctx;
    CHECK(cuInit(0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, 0));
    CHECK(cuCtxSetCurrent(ctx));
    if (strcmp(mode, "pipeline") == 0)
        pipeline();
    else if (strcmp(mode, "overlap") == 0)
        overlap();
    else if (strcmp(mode, "kinds") == 0)
        kinds();
    else if (strcmp(mode, "repeat") == 0)
        repeat();
    else if (strcmp(mode, "free") == 0)
        free_at_once();
    else if (strcmp(mode, "front") == 0)
        front();
    else if (strcmp(mode, "captured") == 0)
        captured();
    else if (strcmp(mode, "callers") == 0)
        callers();
    else if (strcmp(mode, "threads") == 0)
        threads();
    else if (strcmp(mode, "nowait") == 0)
        no_wait();
    else if (strcmp(mode, "asyncalloc") == 0)
        async_alloc();
    else if (strcmp(mode, "calls") == 0)
        calls();
    else if (strcmp(mode, "beside") == 0)
        beside(ctx);
    else if (strcmp(mode, "quiet") == 0 && argc > 2)
        quiet(ctx, argv[2]);
    else if (strcmp(mode, "many") == 0 && argc > 2)
        many(atol(argv[2]));
    else {
        fprintf(stderr, "usage: rzlaunch pipeline|overlap|kinds|repeat|free|front|captured|callers|threads|nowait|"
                        "asyncalloc|calls|beside|quiet install|fill|many N\n");
        return 2;
    }
    return 0;
}
