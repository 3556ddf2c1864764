/*
 * How the test programs write or read past a buffer's end: as device code does, through a store or load
 * redzone does not see. A copy or memset past the end is refused by the driver (and by redzone, which checks
 * the program's sizes: docs/design.md), so it cannot stand in for a kernel's overrun any more. The emulated
 * driver's cuEmuDeviceStore/cuEmuDeviceLoad move the bytes with the driver's own range check (inside the
 * padded block redzone allocated, a band byte is in range; past an unpadded buffer nothing moves and
 * CUDA_ERROR_INVALID_VALUE comes back). A zero-byte memset first is device work for redzone, as a kernel
 * launch is: bands still waiting to be written (lazy install) are written before the store.
 */
#ifndef RZ_TEST_DEVICE_STORE_H
#define RZ_TEST_DEVICE_STORE_H

#include <string.h>

#include "cuda_emu.h"

static inline rzcu_result device_store(rzcu_deviceptr dst, const void *src, size_t n) {
    rzcu_result r = cuMemsetD8_v2(dst, 0, 0);
    return r != 0 ? r : cuEmuDeviceStore(dst, src, n);
}

/* n bytes of value (at most 4096). */
static inline rzcu_result device_fill(rzcu_deviceptr dst, unsigned char value, size_t n) {
    unsigned char bytes[4096];
    if (n > sizeof bytes)
        return 1; /* CUDA_ERROR_INVALID_VALUE */
    memset(bytes, value, n);
    return device_store(dst, bytes, n);
}

static inline rzcu_result device_load(void *dst, rzcu_deviceptr src, size_t n) {
    rzcu_result r = cuMemsetD8_v2(src, 0, 0);
    return r != 0 ? r : cuEmuDeviceLoad(dst, src, n);
}

#endif
