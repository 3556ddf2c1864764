/*
 * The exit scan (exit_scan.c).
 */
#ifndef REDZONE_EXIT_SCAN_H
#define REDZONE_EXIT_SCAN_H

#include "common.h"

/* Register the exit scan once, lazily (after the driver's own exit handlers, so it runs before them). */
void rz__exit_scan_arm(void);

#endif /* REDZONE_EXIT_SCAN_H */
