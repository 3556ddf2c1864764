/*
 * A runtime that integrates red zones directly (as the seed's GPU runtime does): it allocates through
 * rz_mem_alloc, then a bug copies 8 bytes more than the buffer holds. Without red zones that write lands
 * in whatever follows the buffer; with METRALE_REDZONE set it lands in the band, and rz_scan reports it.
 *
 *   METRALE_REDZONE=64 ./runtime_overrun
 */
#include <stdio.h>
#include <string.h>

#include "cu.h"
#include "redzone.h"

/* The few driver entry points this program calls (declared from cu.h's types; the real driver exports
 * the same names). */
rzcu_fn_cuInit cuInit;
rzcu_fn_cuDeviceGet cuDeviceGet;
rzcu_fn_cuDevicePrimaryCtxRetain cuDevicePrimaryCtxRetain;
rzcu_fn_cuCtxSetCurrent cuCtxSetCurrent;
rzcu_fn_cuMemcpyHtoD_v2 cuMemcpyHtoD_v2;

#define CHECK(call)                                                                                          \
    do {                                                                                                     \
        int rc_ = (int)(call);                                                                               \
        if (rc_ != 0) {                                                                                      \
            fprintf(stderr, "runtime_overrun: %s failed: %d\n", #call, rc_);                                 \
            return 1;                                                                                        \
        }                                                                                                    \
    } while (0)

int main(void) {
    rzcu_device dev;
    rzcu_context ctx;
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cuCtxSetCurrent(ctx));

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
