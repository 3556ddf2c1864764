/*
 * A runtime that integrates red zones directly (as the seed's GPU runtime does): it allocates through
 * rz_mem_alloc, then a bug in a kernel writes 8 bytes more than the buffer holds. Without red zones that
 * write lands in whatever follows the buffer; with METRALE_REDZONE set it lands in the band, and rz_scan
 * reports it. (A copy of 8 bytes too many would not get that far: the driver refuses it, and redzone reports
 * it as it does for copy_overrun.)
 *
 *   METRALE_REDZONE=64 ./runtime_overrun
 */
#include "example.h"
#include "redzone.h"
#include "write_past.h"

int main(void) {
    example_context();

    rz_devptr_t weights, tokens, scratch;
    CHECK(rz_mem_alloc(&weights, 4096));
    CHECK(rz_mem_alloc(&tokens, 1000));
    CHECK(rz_mem_alloc(&scratch, 512));

    /* The bug: the kernel is told 1000 + 8 bytes where the buffer holds 1000. */
    launch_write_past(NULL, tokens, 1000, 8, 0xab);
    CHECK(cuCtxSynchronize());

    int violated = rz_scan();
    printf("runtime_overrun: rz_scan found %d violated zone(s)\n", violated);
    CHECK(rz_mem_free(weights));
    CHECK(rz_mem_free(tokens));
    CHECK(rz_mem_free(scratch));
    return 0;
}
