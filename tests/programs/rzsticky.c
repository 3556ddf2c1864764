/*
 * A CUDA driver-API program that meets a sticky error (issue 27), run with and without libredzone.so by
 * tests/test_sticky.c and tests/test_nothing_lost.c. It knows nothing of redzone.
 *   rzsticky fault|launchfail exit|abort
 *       three buffers (two plain, one stream-ordered) with device work on them and a kernel that works, then
 *       `fault`: a kernel that stores to address 16, no allocation's (run with CUDA_EMU_STICKY_FAULTS=1: a
 *       sticky CUDA_ERROR_ILLEGAL_ADDRESS, as on a GPU), or `launchfail`: the next synchronisation reports
 *       CUDA_ERROR_LAUNCH_FAILED (injected: what a GPU reports for a kernel that failed). Then it prints what
 *       every later call returns (synchronisations, an event, the frees, an allocation, a reset of the
 *       primary context) and exits with its own code, 3, or aborts.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_emu.h"

#define PROG "rzsticky"
#include "prog.h"

/* Stores one byte at p (address 16: no allocation's, the kernel faults). */
CUDA_EMU_KERNEL(sticky_poke, sizeof(rzcu_deviceptr)) {
    *(volatile unsigned char *)(uintptr_t)CUDA_EMU_PARAM(rzcu_deviceptr, 0) = 0x5a;
}

#define SAY(what, call) printf(PROG ": %s: %u\n", what, (unsigned)(call))

int main(int argc, char **argv) {
    if (argc != 3 || (strcmp(argv[1], "fault") != 0 && strcmp(argv[1], "launchfail") != 0) ||
        (strcmp(argv[2], "exit") != 0 && strcmp(argv[2], "abort") != 0)) {
        fprintf(stderr, "usage: rzsticky fault|launchfail exit|abort\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IONBF, 0);
    setup();
    rzcu_module mod;
    rzcu_function f;
    CHECK(cuModuleLoadData(&mod, "emulated module"));
    CHECK(cuModuleGetFunction(&f, mod, "sticky_poke"));
    rzcu_stream s;
    CHECK(cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING));
    rzcu_deviceptr a, b, pool, c = 0, bad = 16;
    CHECK(cuMemAlloc_v2(&a, 1000));
    CHECK(cuMemAlloc_v2(&b, 500));
    CHECK(cuMemAllocAsync(&pool, 256, s));
    CHECK(cuMemsetD8_v2(a, 0, 1000)); /* device work: the bands are written */
    CHECK(cuMemsetD8Async(pool, 0, 256, s));
    void *good[] = {&a};
    CHECK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, good, NULL)); /* inside a: fine */
    CHECK(cuStreamSynchronize(s));
    rzcu_event e;
    CHECK(cuEventCreate(&e, 0));
    if (strcmp(argv[1], "fault") == 0) {
        void *params[] = {&bad};
        CHECK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, params, NULL)); /* returns before the kernel runs */
    } else if (cuEmuInjectFailure("cuCtxSynchronize", 1, RZCUDA_ERROR_LAUNCH_FAILED) != 0) {
        return 101;
    }
    SAY("synchronise the context", cuCtxSynchronize());
    SAY("synchronise the stream", cuStreamSynchronize(s));
    SAY("record an event", cuEventRecord(e, s));
    SAY("query the event", cuEventQuery(e));
    SAY("free the stream-ordered buffer", cuMemFreeAsync(pool, s));
    SAY("free a", cuMemFree_v2(a));
    SAY("free b", cuMemFree_v2(b));
    SAY("allocate", cuMemAlloc_v2(&c, 100));
    SAY("launch", cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, good, NULL));
    SAY("destroy the stream", cuStreamDestroy_v2(s));
    SAY("reset the primary context", cuDevicePrimaryCtxReset_v2(0));
    SAY("allocate after the reset", cuMemAlloc_v2(&c, 100));
    const char *name = NULL;
    SAY("name the error", cuGetErrorName(cuCtxSynchronize(), &name));
    printf(PROG ": the error: %s\n", name ? name : "?");
    if (strcmp(argv[2], "abort") == 0)
        abort();
    return 3;
}
