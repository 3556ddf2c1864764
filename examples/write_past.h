/*
 * The examples' kernel that writes past a buffer's end, write_past (kernels.cu): fills n + extra bytes of an
 * n-byte buffer with `value`. On a GPU it is the PTX of kernels.cu; on the emulated driver, the host function
 * below, run in stream order (the program exports it: ENABLE_EXPORTS).
 */
#ifndef REDZONE_EXAMPLE_WRITE_PAST_H
#define REDZONE_EXAMPLE_WRITE_PAST_H

#include "example.h"

/* Emulated-device version of kernels.cu's write_past: every "thread" of the grid, in one host call. */
CUDA_EMU_KERNEL(write_past, sizeof(rzcu_deviceptr), sizeof(unsigned long long), sizeof(unsigned long long),
                sizeof(unsigned int)) {
    unsigned char *buf = (unsigned char *)(uintptr_t)CUDA_EMU_PARAM(rzcu_deviceptr, 0);
    unsigned long long n = CUDA_EMU_PARAM(unsigned long long, 1);
    unsigned long long extra = CUDA_EMU_PARAM(unsigned long long, 2);
    unsigned int value = CUDA_EMU_PARAM(unsigned int, 3);
    unsigned long long threads = (unsigned long long)launch->grid.x * launch->block.x;
    for (unsigned long long i = 0; i < threads; i++)
        if (i < n + extra)
            buf[i] = (unsigned char)value;
}

static inline void launch_write_past(rzcu_stream s, rzcu_deviceptr buf, unsigned long long n, unsigned long long extra,
                                     unsigned int value) {
    void *params[] = {&buf, &n, &extra, &value};
    unsigned threads = 256, blocks = (unsigned)((n + extra + threads - 1) / threads);
    CHECK(cuLaunchKernel(example_kernel("write_past"), blocks, 1, 1, threads, 1, 1, 0, s, params, NULL));
}

#endif
