/*
 * Kernel names for launch checks, cached (launch_names.c).
 */
#ifndef REDZONE_LAUNCH_NAMES_H
#define REDZONE_LAUNCH_NAMES_H

#include "common.h"

/* The kernel's name into out (RZ_KERNEL_NAME bytes, launch_check.h), asked of the driver once per kernel
 * until rz__launch_names_forget. */
void rz__launch_kernel_name_cached(rzcu_function f, char *out);

#endif /* REDZONE_LAUNCH_NAMES_H */
