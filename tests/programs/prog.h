/*
 * What the test programs that call the (emulated) driver share: CHECK (a call that must succeed, else exit
 * 100 naming it) and setup (the primary context of device 0, made current). Define PROG (the program's
 * name, as its lines start) before including it, after cuda_emu.h.
 */
#ifndef REDZONE_TESTS_PROG_H
#define REDZONE_TESTS_PROG_H

#include <stdio.h>
#include <stdlib.h>

#define CHECK(call)                                                                                          \
    do {                                                                                                     \
        rzcu_result rc_ = (call);                                                                            \
        if (rc_ != 0) {                                                                                      \
            fprintf(stderr, PROG ":%d: %s failed: %u\n", __LINE__, #call, rc_);                              \
            exit(100);                                                                                       \
        }                                                                                                    \
    } while (0)

static inline rzcu_context setup(void) {
    rzcu_context ctx;
    CHECK(cuInit(0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, 0));
    CHECK(cuCtxSetCurrent(ctx));
    return ctx;
}

#endif /* REDZONE_TESTS_PROG_H */
