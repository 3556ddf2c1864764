/*
 * The leak check at exit (leak_check.c, METRALE_REDZONE_LEAK_CHECK).
 */
#ifndef REDZONE_LEAK_CHECK_H
#define REDZONE_LEAK_CHECK_H

#include "common.h"

/* With METRALE_REDZONE_LEAK_CHECK=1: report the allocations still live, grouped by allocation stack, largest
 * first, each group counted as a violation. Called once at exit (exit_scan.c), before the summary line. */
void rz__leak_check_at_exit(void);

#endif /* REDZONE_LEAK_CHECK_H */
