/*
 * What the library asks about the driver itself (driver_info.c): whether it has shut down, where its code
 * is, and its names for result codes.
 */
#ifndef REDZONE_DRIVER_INFO_H
#define REDZONE_DRIVER_INFO_H

#include "common.h"

/* Whether the driver's own exit handler has run: cuCtxGetCurrent answers CUDA_ERROR_DEINITIALIZED. */
int rz__dev_deinitialized(void);

/* An address in the driver's code (its cuMemAlloc_v2, for dladdr), NULL while it is not loaded. */
const void *rz__dev_driver_code(void);

/* The driver's name for r (cuGetErrorName), NULL when it has none or lacks the entry point. Registered with
 * output/report.c's rz__cu_name when the driver is loaded. */
const char *rz__dev_error_name(rzcu_result r);

#endif /* REDZONE_DRIVER_INFO_H */
