/*
 * The trivial program of issue 29 item 6, as a user writes it: cuInit, one allocation in the primary
 * context, exit. bench/run and tests/instructions.py count its instructions (callgrind) bare and with
 * libredzone.so preloaded: the library's start-up cost.
 *   start_bench
 */
#include <stdio.h>

#include "cuda_emu.h"

int main(void) {
    rzcu_context ctx;
    rzcu_deviceptr p;
    if (cuInit(0) || cuDevicePrimaryCtxRetain(&ctx, 0) || cuCtxSetCurrent(ctx) || cuMemAlloc_v2(&p, 64))
        return 1;
    puts("start_bench: one allocation");
    return 0;
}
