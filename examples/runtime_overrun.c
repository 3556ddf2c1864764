/*
 * A runtime that integrates red zones directly (as the seed's GPU runtime does): it allocates through
 * rz_mem_alloc, then a bug copies 8 bytes more than the buffer holds. Without red zones that write lands
 * in whatever follows the buffer; with METRALE_REDZONE set it lands in the band, and rz_scan reports it.
 *
 *   METRALE_REDZONE=64 ./runtime_overrun
 */
#include <string.h>

#include "example.h"
#include "redzone.h"

int main(void) {
    example_context();

    rz_devptr_t weights, tokens, scratch;
    CHECK(rz_mem_alloc(&weights, 4096));
    CHECK(rz_mem_alloc(&tokens, 1000));
    CHECK(rz_mem_alloc(&scratch, 512));

    unsigned char host[1008];
    memset(host, 0x42, sizeof host);
    host[1000] = 0xab; /* the 8 bytes that do not belong to `tokens` */
    /* The bug: the copy length counts 1008 bytes where the buffer holds 1000. */
    CHECK(cuMemcpyHtoD_v2(tokens, host, sizeof host));

    int violated = rz_scan();
    printf("runtime_overrun: rz_scan found %d violated zone(s)\n", violated);
    CHECK(rz_mem_free(weights));
    CHECK(rz_mem_free(tokens));
    CHECK(rz_mem_free(scratch));
    return 0;
}
