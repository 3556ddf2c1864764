/*
 * What the library asks about the driver itself: whether it has shut down, where its code is, and its names
 * for result codes.
 */
#include <stdint.h>

#include "common.h"
#include "driver_info.h"
#include "driver.h"

int rz__dev_deinitialized(void) {
    rzcu_context current = NULL;
    return rz__drv.cuCtxGetCurrent(&current) == RZCUDA_ERROR_DEINITIALIZED;
}

const void *rz__dev_driver_code(void) { return (const void *)(uintptr_t)rz__drv.cuMemAlloc_v2; }

const char *rz__dev_error_name(rzcu_result r) {
    const char *name = NULL;
    if (rz__drv.cuGetErrorName != NULL && rz__drv.cuGetErrorName(r, &name) == RZCUDA_SUCCESS && name != NULL)
        return name;
    return NULL;
}
