/*
 * The driver's name for a kernel, as the launch ring records it. Static inline: it runs at every launch
 * (core/launch_ring.c), where it was inline before the seam had it.
 */
#ifndef REDZONE_KERNEL_NAMES_H
#define REDZONE_KERNEL_NAMES_H

#include "common.h"
#include "driver.h"

/* cuFuncGetName's name for f; else cuKernelGetName's (cudart 12+ launches library kernels by passing their
 * CUkernel as the CUfunction, for which cuFuncGetName is not documented); NULL when neither names it. */
static inline __attribute__((always_inline)) const char *rz__dev_kernel_name(rzcu_function f) {
    const char *name = NULL;
    if (rz__drv.cuFuncGetName != NULL && rz__drv.cuFuncGetName(&name, f) == RZCUDA_SUCCESS && name != NULL)
        return name;
    name = NULL;
    if (rz__drv.cuKernelGetName != NULL &&
        rz__drv.cuKernelGetName(&name, (rzcu_kernel)(void *)f) == RZCUDA_SUCCESS && name != NULL)
        return name;
    return NULL;
}

#endif /* REDZONE_KERNEL_NAMES_H */
