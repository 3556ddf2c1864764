/*
 * An unmodified driver-API program for bench/run's callgrind measurement: LIVE allocations stay alive, then
 * PAIRS allocation+free pairs run. Run with and without libredzone preloaded, at two PAIRS counts: the
 * difference of the slopes is redzone's added instructions per pair. With "touch", each pair also memsets
 * the buffer's first byte (device work between the allocation and the free: the band is written, then
 * checked at the free); with "copy", it copies one byte to the buffer's first byte instead, and with
 * "copy-inside" to its second byte (an address inside the buffer: the copy's range check asks the driver
 * which allocation holds it).
 *   alloc_bench LIVE PAIRS [touch|copy|copy-inside]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_emu.h"

int main(int argc, char **argv) {
    long live = argc > 1 ? atol(argv[1]) : 1000, pairs = argc > 2 ? atol(argv[2]) : 1000;
    int touch = argc > 3 && strcmp(argv[3], "touch") == 0, copy = argc > 3 && strcmp(argv[3], "copy") == 0;
    int inside = argc > 3 && strcmp(argv[3], "copy-inside") == 0;
    unsigned char byte = 1;
    rzcu_context ctx;
    if (cuInit(0) || cuDevicePrimaryCtxRetain(&ctx, 0) || cuCtxSetCurrent(ctx))
        return 1;
    rzcu_deviceptr p;
    for (long i = 0; i < live; i++)
        if (cuMemAlloc_v2(&p, 64))
            return 1;
    for (long i = 0; i < pairs; i++)
        if (cuMemAlloc_v2(&p, 64) || (touch && cuMemsetD8_v2(p, 1, 1)) || (copy && cuMemcpyHtoD_v2(p, &byte, 1)) ||
            (inside && cuMemcpyHtoD_v2(p + 1, &byte, 1)) || cuMemFree_v2(p))
            return 1;
    printf("alloc_bench: %ld live, %ld pairs\n", live, pairs);
    return 0;
}
