/*
 * What the driver-API examples share: error checks, a context, and the module holding their kernels (PTX
 * on a GPU; on the emulated driver the kernels are the host functions each example defines with
 * CUDA_EMU_KERNEL). These are ordinary CUDA programs: nothing in them knows about redzone.
 */
#ifndef REDZONE_EXAMPLE_H
#define REDZONE_EXAMPLE_H

#include <stdio.h>
#include <stdlib.h>

#include "cuda_emu.h" /* driver API declarations (cu.h types) and CUDA_EMU_KERNEL */
#include "kernels_ptx.h"

#define CHECK(call)                                                                                          \
    do {                                                                                                     \
        rzcu_result rc_ = (call);                                                                            \
        if (rc_ != 0) {                                                                                      \
            const char *name_ = "?";                                                                         \
            cuGetErrorName(rc_, &name_);                                                                     \
            fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, name_);                     \
            exit(1);                                                                                         \
        }                                                                                                    \
    } while (0)

static inline rzcu_context example_context(void) {
    rzcu_device dev;
    rzcu_context ctx;
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cuCtxSetCurrent(ctx));
    return ctx;
}

static inline rzcu_function example_kernel(const char *name) {
    static rzcu_module mod;
    rzcu_function f;
    if (mod == NULL)
        CHECK(cuModuleLoadData(&mod, kernels_ptx));
    CHECK(cuModuleGetFunction(&f, mod, name));
    return f;
}

#endif
