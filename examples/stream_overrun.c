/*
 * Several kernels on several streams, one of which writes past the end of a buffer that another kernel, on
 * another stream, then reads. Three streams fill three buffers at once (correctly); then, on stream 1,
 * write_past fills buffer b with 8 bytes too many, and stream 2 waits for it (an event) before sum_past sums
 * b. Every kernel launched after b was allocated is a suspect for a scan; the launch policy names the one:
 *
 *   redzone run --emulated-device -- ./stream_overrun               # at free: five candidate kernels
 *   redzone run --emulated-device --scan launch -- ./stream_overrun # the launch, its grid, stream and line
 *
 * On a GPU the kernels are the PTX of kernels.cu; on the emulated driver, host functions (write_past.h, and
 * sum_past below).
 */
#include <stdlib.h>
#include <string.h>

#include "example.h"
#include "write_past.h"

/* sum_past(buf, n, out): *out = buf[0] + ... + buf[n] (n + 1 bytes: called with the size minus one here). */
CUDA_EMU_KERNEL(sum_past, sizeof(rzcu_deviceptr), sizeof(unsigned long long), sizeof(rzcu_deviceptr)) {
    const unsigned char *buf = (const unsigned char *)(uintptr_t)CUDA_EMU_PARAM(rzcu_deviceptr, 0);
    unsigned long long n = CUDA_EMU_PARAM(unsigned long long, 1);
    unsigned long long *out = (unsigned long long *)(uintptr_t)CUDA_EMU_PARAM(rzcu_deviceptr, 2);
    unsigned long long s = 0;
    for (unsigned long long i = 0; i <= n; i++)
        s += buf[i];
    *out = s;
}

/* write_past (write_past.h): extra bytes too many; 0x5a in them, 1 in a correct fill. */
static void fill(rzcu_stream s, rzcu_deviceptr buf, unsigned long long n, unsigned long long extra) {
    launch_write_past(s, buf, n, extra, extra ? 0x5a : 1);
}

static void sum(rzcu_stream s, rzcu_deviceptr buf, unsigned long long n, rzcu_deviceptr out) {
    unsigned long long last = n - 1; /* sum_past adds buf[0 .. last] */
    void *params[] = {&buf, &last, &out};
    CHECK(cuLaunchKernel(example_kernel("sum_past"), 1, 1, 1, 1, 1, 1, 0, s, params, NULL));
}

int main(void) {
    example_context();
    rzcu_stream s1, s2, s3;
    CHECK(cuStreamCreate(&s1, RZCU_STREAM_NON_BLOCKING));
    CHECK(cuStreamCreate(&s2, RZCU_STREAM_NON_BLOCKING));
    CHECK(cuStreamCreate(&s3, RZCU_STREAM_NON_BLOCKING));
    rzcu_event b_written;
    CHECK(cuEventCreate(&b_written, 0));
    rzcu_deviceptr a, b, c, out;
    CHECK(cuMemAlloc_v2(&a, 4096));
    CHECK(cuMemAlloc_v2(&b, 1000));
    CHECK(cuMemAlloc_v2(&c, 4096));
    CHECK(cuMemAlloc_v2(&out, sizeof(unsigned long long)));
    fill(s1, a, 4096, 0); /* three streams at once, each in bounds */
    fill(s2, b, 1000, 0);
    fill(s3, c, 4096, 0);
    CHECK(cuCtxSynchronize());
    fill(s1, b, 1000, 8); /* the bug: 8 bytes too many */
    CHECK(cuEventRecord(b_written, s1));
    CHECK(cuStreamWaitEvent(s2, b_written, 0));
    sum(s2, b, 1000, out); /* another stream's kernel reads b */
    unsigned long long total = 0;
    CHECK(cuStreamSynchronize(s2));
    CHECK(cuMemcpyDtoH_v2(&total, out, sizeof total));
    printf("stream_overrun: sum of b = %llu\n", total);
    CHECK(cuMemFree_v2(a));
    CHECK(cuMemFree_v2(b));
    CHECK(cuMemFree_v2(c));
    CHECK(cuMemFree_v2(out));
    return 0;
}
