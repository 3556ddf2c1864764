/*
 * A write past the end by a kernel: write_past fills n + 8 bytes of an n-byte buffer. On a GPU the kernel is
 * the PTX of kernels.cu; on the emulated driver it is the host function below, run in stream order. The
 * second buffer is never freed, so redzone finds the overrun in its exit scan, and names the kernel.
 *
 *   redzone run --emulated-device -- ./kernel_overrun
 *
 * An optional argument sets the second buffer's size (default 1000). With a hardware guard page on it
 * (METRALE_REDZONE_GUARD=idx:1) and a size that is a multiple of 256, the buffer ends exactly where mapped
 * memory ends, and the kernel faults at its first byte past the end:
 *
 *   METRALE_REDZONE_GUARD=idx:1 redzone run --emulated-device -- ./kernel_overrun 1024
 */
#include <stdlib.h>
#include <string.h>

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

static void launch_write_past(rzcu_stream s, rzcu_deviceptr buf, unsigned long long n, unsigned long long extra) {
    unsigned int value = 0x5a;
    void *params[] = {&buf, &n, &extra, &value};
    unsigned threads = 256, blocks = (unsigned)((n + extra + threads - 1) / threads);
    CHECK(cuLaunchKernel(example_kernel("write_past"), blocks, 1, 1, threads, 1, 1, 0, s, params, NULL));
}

int main(int argc, char **argv) {
    unsigned long long n = argc > 1 ? strtoull(argv[1], NULL, 10) : 1000;
    if (n == 0) {
        fprintf(stderr, "usage: kernel_overrun [BYTES > 0]\n");
        return 2;
    }
    example_context();
    rzcu_stream s;
    CHECK(cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING));
    rzcu_deviceptr a, b;
    CHECK(cuMemAlloc_v2(&a, 4096));
    CHECK(cuMemAlloc_v2(&b, n));
    launch_write_past(s, a, 4096, 0); /* correct */
    launch_write_past(s, b, n, 8);    /* 8 bytes too many */
    CHECK(cuStreamSynchronize(s));
    printf("kernel_overrun: kernels done\n");
    CHECK(cuMemFree_v2(a));
    /* b is leaked on purpose: the exit scan still checks it. */
    return 0;
}
