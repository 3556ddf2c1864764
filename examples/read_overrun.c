/*
 * A read past the end: sum_past adds up n + 1 bytes of an n-byte buffer, so the printed sum depends on the
 * byte after the buffer. Bands never change on a read, so scans stay clean; instead the output changes with
 * the band's fill byte (METRALE_REDZONE_FILL, or a poison window), which is how a read past the end is
 * found:
 *
 *   redzone run --emulated-device --fill 0 -- ./read_overrun      # sum = 1000
 *   redzone run --emulated-device --fill 1 -- ./read_overrun      # sum = 1001
 */
#include <string.h>

#include "example.h"

CUDA_EMU_KERNEL(sum_past, sizeof(rzcu_deviceptr), sizeof(unsigned long long), sizeof(rzcu_deviceptr)) {
    const unsigned char *buf = (const unsigned char *)(uintptr_t)CUDA_EMU_PARAM(rzcu_deviceptr, 0);
    unsigned long long n = CUDA_EMU_PARAM(unsigned long long, 1);
    unsigned long long *out = (unsigned long long *)(uintptr_t)CUDA_EMU_PARAM(rzcu_deviceptr, 2);
    unsigned long long s = 0;
    for (unsigned long long i = 0; i <= n; i++) /* the bug: <= */
        s += buf[i];
    *out = s;
}

int main(void) {
    example_context();
    enum { N = 1000 };
    rzcu_deviceptr buf, out;
    CHECK(cuMemAlloc_v2(&buf, N));
    CHECK(cuMemAlloc_v2(&out, sizeof(unsigned long long)));
    unsigned char ones[N];
    memset(ones, 1, sizeof ones);
    CHECK(cuMemcpyHtoD_v2(buf, ones, N));
    unsigned long long n = N;
    void *params[] = {&buf, &n, &out};
    CHECK(cuLaunchKernel(example_kernel("sum_past"), 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL));
    unsigned long long sum = 0;
    CHECK(cuMemcpyDtoH_v2(&sum, out, sizeof sum));
    printf("read_overrun: sum = %llu\n", sum);
    CHECK(cuMemFree_v2(buf));
    CHECK(cuMemFree_v2(out));
    return 0;
}
