/*
 * The GPU run's driver-API program (tests/gpu/run): one ordinary CUDA program, knowing nothing of redzone,
 * whose first argument picks what it does. It runs on a GPU (the kernels are the PTX of examples/kernels.cu)
 * and on the emulated driver (the same kernel names, as the host functions below), so every step built on
 * it is rehearsed in CI exactly as it will run on the GPU.
 *
 *   driver_prog alloc|async|managed|pitch|nosync|nosync-stream
 *                                                   a kernel writes 8 bytes past one buffer of that kind
 *   driver_prog readpast                            a kernel reads one byte past a buffer (bisect finds it)
 *   driver_prog clean                               the same calls without the bug (exit status 0 checks)
 *   driver_prog guard                               a kernel writes past a 1024-byte buffer (run it with
 *                                                   METRALE_REDZONE_GUARD=idx:0: it faults at the first
 *                                                   byte), a second buffer keeps an ordinary band
 *   driver_prog gdb                                 three buffers, one overrun, then gpurun_stop_here()
 *   driver_prog workload STEPS PER_STEP             PER_STEP allocations, 2 launches, a synchronisation
 *                                                   and PER_STEP frees per step
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "example.h"

/* Emulated-device versions of kernels.cu: every "thread" of the grid, in one host call. */
CUDA_EMU_KERNEL(write_past, sizeof(rzcu_deviceptr), sizeof(unsigned long long), sizeof(unsigned long long),
                sizeof(unsigned int)) {
    unsigned char *buf = (unsigned char *)(uintptr_t)CUDA_EMU_PARAM(rzcu_deviceptr, 0);
    unsigned long long n = CUDA_EMU_PARAM(unsigned long long, 1);
    unsigned long long extra = CUDA_EMU_PARAM(unsigned long long, 2);
    unsigned int value = CUDA_EMU_PARAM(unsigned int, 3);
    unsigned long long threads = (unsigned long long)launch->grid.x * launch->block.x;
    for (unsigned long long i = 0; i < threads; i++)
        if (i < n + extra)
            buf[i] = (unsigned char)value; /* gpurun: the faulting line */
}

CUDA_EMU_KERNEL(sum_past, sizeof(rzcu_deviceptr), sizeof(unsigned long long), sizeof(rzcu_deviceptr)) {
    const unsigned char *buf = (const unsigned char *)(uintptr_t)CUDA_EMU_PARAM(rzcu_deviceptr, 0);
    unsigned long long n = CUDA_EMU_PARAM(unsigned long long, 1);
    unsigned long long *out = (unsigned long long *)(uintptr_t)CUDA_EMU_PARAM(rzcu_deviceptr, 2);
    unsigned long long s = 0;
    for (unsigned long long i = 0; i <= n; i++)
        s += buf[i];
    *out = s;
}

static void write_past(rzcu_stream s, rzcu_deviceptr buf, unsigned long long n, unsigned long long extra) {
    unsigned int value = 0x5a;
    void *params[] = {&buf, &n, &extra, &value};
    unsigned threads = 256, blocks = (unsigned)((n + extra + threads - 1) / threads);
    CHECK(cuLaunchKernel(example_kernel("write_past"), blocks, 1, 1, threads, 1, 1, 0, s, params, NULL));
}

/* A host breakpoint for the debugger sessions: the overrun has happened and nothing is freed yet. */
__attribute__((noinline, used, visibility("default"))) void gpurun_stop_here(void);
void gpurun_stop_here(void) { __asm__ volatile(""); }

static int overrun(const char *kind, int bug) {
    enum { N = 1000 };
    unsigned long long extra = bug ? 8 : 0;
    rzcu_stream s;
    CHECK(cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING));
    rzcu_deviceptr p;
    if (strcmp(kind, "alloc") == 0 || strcmp(kind, "clean") == 0) {
        CHECK(cuMemAlloc_v2(&p, N));
        write_past(s, p, N, extra);
        CHECK(cuStreamSynchronize(s));
        CHECK(cuMemFree_v2(p));
    } else if (strcmp(kind, "async") == 0) {
        CHECK(cuMemAllocAsync(&p, N, s));
        write_past(s, p, N, extra);
        CHECK(cuMemFreeAsync(p, s)); /* the band is judged in stream order, after the kernel */
        CHECK(cuStreamSynchronize(s));
    } else if (strcmp(kind, "managed") == 0) {
        CHECK(cuMemAllocManaged(&p, N, 1 /* CU_MEM_ATTACH_GLOBAL */));
        write_past(s, p, N, extra);
        CHECK(cuStreamSynchronize(s));
        CHECK(cuMemFree_v2(p));
    } else if (strcmp(kind, "pitch") == 0) {
        size_t pitch = 0, width = 1000, height = 4;
        CHECK(cuMemAllocPitch_v2(&p, &pitch, width, height, 4));
        write_past(s, p, (unsigned long long)(pitch * height), extra); /* past the last row */
        CHECK(cuStreamSynchronize(s));
        CHECK(cuMemFree_v2(p));
    } else if (strcmp(kind, "nosync") == 0 || strcmp(kind, "nosync-stream") == 0) {
        /* No synchronisation between the kernel and the free: the kernel may still be running. nosync
         * launches on the legacy default stream, nosync-stream on a non-blocking stream, which nothing
         * the free does on the legacy stream waits for. */
        rzcu_stream ks = strcmp(kind, "nosync") == 0 ? NULL : s;
        CHECK(cuMemAlloc_v2(&p, N));
        write_past(ks, p, N, extra);
        CHECK(cuMemFree_v2(p));
        CHECK(cuStreamSynchronize(s));
    } else {
        fprintf(stderr, "driver_prog: unknown kind %s\n", kind);
        return 2;
    }
    CHECK(cuStreamDestroy_v2(s));
    printf("driver_prog: %s done\n", kind);
    return 0;
}

static int readpast(void) {
    enum { N = 1000 };
    rzcu_deviceptr buf, out;
    CHECK(cuMemAlloc_v2(&out, sizeof(unsigned long long)));
    CHECK(cuMemAlloc_v2(&buf, N));
    CHECK(cuMemsetD8_v2(buf, 1, N));
    unsigned long long n = N;
    void *params[] = {&buf, &n, &out};
    CHECK(cuLaunchKernel(example_kernel("sum_past"), 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL));
    unsigned long long sum = 0;
    CHECK(cuMemcpyDtoH_v2(&sum, out, sizeof sum));
    printf("driver_prog: sum = %llu\n", sum);
    CHECK(cuMemFree_v2(buf));
    CHECK(cuMemFree_v2(out));
    return 0;
}

static int guard(void) {
    rzcu_deviceptr p, q;
    CHECK(cuMemAlloc_v2(&p, 1024)); /* a multiple of 256: the buffer ends where mapped memory ends */
    CHECK(cuMemAlloc_v2(&q, 1000)); /* an ordinary band, for the exit scan to (fail to) read */
    write_past(NULL, p, 1024, 8);
    rzcu_result rc = cuCtxSynchronize();
    const char *name = "?";
    cuGetErrorName(rc, &name);
    printf("driver_prog: guard: synchronize returned %s\n", name);
    return rc == 0 ? 0 : 1; /* the context is unusable now (a sticky error): no free */
}

static int gdb_target(void) {
    rzcu_deviceptr a, b, c;
    CHECK(cuMemAlloc_v2(&a, 4096));
    CHECK(cuMemAlloc_v2(&b, 1000));
    CHECK(cuMemAlloc_v2(&c, 2048));
    write_past(NULL, a, 4096, 0);
    write_past(NULL, b, 1000, 8); /* the bug */
    CHECK(cuCtxSynchronize());
    gpurun_stop_here();
    CHECK(cuMemFree_v2(a));
    CHECK(cuMemFree_v2(b));
    CHECK(cuMemFree_v2(c));
    printf("driver_prog: gdb done\n");
    return 0;
}

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* Prints its own time (first allocation to last free), so start-up and exit are not in the ratios. */
static int workload(long steps, long per_step) {
    rzcu_deviceptr *p = calloc((size_t)per_step, sizeof *p);
    if (p == NULL)
        return 1;
    double t0 = now_ms();
    for (long s = 0; s < steps; s++) {
        for (long i = 0; i < per_step; i++)
            CHECK(cuMemAlloc_v2(&p[i], (size_t)(256 + 64 * ((s + i) % 16))));
        write_past(NULL, p[0], 256, 0);
        write_past(NULL, p[per_step - 1], 256, 0);
        CHECK(cuCtxSynchronize());
        for (long i = 0; i < per_step; i++)
            CHECK(cuMemFree_v2(p[i]));
    }
    double ms = now_ms() - t0;
    free(p);
    printf("driver_prog: workload %ld steps x %ld allocations done in %.3f ms\n", steps, per_step, ms);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: driver_prog alloc|async|managed|pitch|nosync|nosync-stream|clean|readpast|guard|gdb|"
                        "workload STEPS PER_STEP\n");
        return 2;
    }
    example_context();
    const char *mode = argv[1];
    if (strcmp(mode, "readpast") == 0)
        return readpast();
    if (strcmp(mode, "guard") == 0)
        return guard();
    if (strcmp(mode, "gdb") == 0)
        return gdb_target();
    if (strcmp(mode, "workload") == 0) {
        long steps = argc > 2 ? atol(argv[2]) : 200, per = argc > 3 ? atol(argv[3]) : 20;
        return steps > 0 && per > 0 ? workload(steps, per) : 2;
    }
    return overrun(mode, strcmp(mode, "clean") != 0);
}
