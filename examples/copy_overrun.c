/*
 * A copy past the end: the program copies 1008 bytes into a 1000-byte buffer (allocation #1) and never looks
 * at the result. The driver refuses such a copy (CUDA_ERROR_INVALID_VALUE: nothing is copied), with redzone
 * as without it; redzone, which gave the buffer a band the driver would otherwise let the copy run into,
 * checks the copy against the buffer's own size and reports it: which allocation, which bytes past its end,
 * and (METRALE_REDZONE_STACKS) where the copy and the allocation were made. A write past the end that no
 * driver check sees, by a kernel, is kernel_overrun.c.
 *
 *   METRALE_REDZONE_STACKS=1 redzone run --emulated-device -- ./copy_overrun
 */
#include <string.h>

#include "example.h"

int main(void) {
    example_context();
    rzcu_deviceptr weights, tokens, scratch;
    CHECK(cuMemAlloc_v2(&weights, 4096));
    CHECK(cuMemAlloc_v2(&tokens, 1000));
    CHECK(cuMemAlloc_v2(&scratch, 512));

    CHECK(cuMemsetD8_v2(weights, 0, 4096));

    unsigned char host[1008];
    memset(host, 0x42, sizeof host);
    rzcu_result r = cuMemcpyHtoD_v2(tokens, host, sizeof host); /* the bug: 1008 where the buffer holds 1000 */
    const char *name = "?";
    cuGetErrorName(r, &name);
    printf("copy_overrun: copying %zu bytes into a 1000-byte buffer: %s\n", sizeof host, name);

    CHECK(cuMemFree_v2(weights));
    CHECK(cuMemFree_v2(tokens));
    CHECK(cuMemFree_v2(scratch));
    return 0;
}
