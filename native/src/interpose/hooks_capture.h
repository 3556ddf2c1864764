/*
 * Stream capture as the interposers see it (hooks_capture.c).
 */
#ifndef REDZONE_HOOKS_CAPTURE_H
#define REDZONE_HOOKS_CAPTURE_H

#include "common.h"

int rz__capture_hooks_present(void);

#endif /* REDZONE_HOOKS_CAPTURE_H */
