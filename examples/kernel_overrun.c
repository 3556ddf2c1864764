/*
 * A write past the end by a kernel: write_past (write_past.h) fills n + 8 bytes of an n-byte buffer. The
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
#include "write_past.h"

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
    launch_write_past(s, a, 4096, 0, 0x5a); /* correct */
    launch_write_past(s, b, n, 8, 0x5a);    /* 8 bytes too many */
    CHECK(cuStreamSynchronize(s));
    printf("kernel_overrun: kernels done\n");
    CHECK(cuMemFree_v2(a));
    /* b is leaked on purpose: the exit scan still checks it. */
    return 0;
}
