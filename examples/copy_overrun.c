/*
 * A write past the end through a host-to-device copy: the program copies 1008 bytes into a 1000-byte
 * buffer (allocation #1). The driver only sees a copy inside the padded allocation; redzone reports it
 * when the buffer is freed.
 *
 *   redzone run --emulated-device -- ./copy_overrun
 */
#include <string.h>

#include "example.h"

int main(void) {
    example_context();
    rzcu_deviceptr weights, tokens, scratch;
    CHECK(cuMemAlloc_v2(&weights, 4096));
    CHECK(cuMemAlloc_v2(&tokens, 1000));
    CHECK(cuMemAlloc_v2(&scratch, 512));

    unsigned char host[1008];
    memset(host, 0x42, sizeof host);
    host[1000] = 0xab; /* the first of the 8 bytes that do not belong to `tokens` */
    CHECK(cuMemcpyHtoD_v2(tokens, host, sizeof host)); /* the bug: 1008 where the buffer holds 1000 */
    printf("copy_overrun: copied %zu bytes into a 1000-byte buffer\n", sizeof host);

    CHECK(cuMemFree_v2(weights));
    CHECK(cuMemFree_v2(tokens));
    CHECK(cuMemFree_v2(scratch));
    return 0;
}
