/*
 * Stream capture as the interposers see it (hooks_capture.c).
 */
#ifndef REDZONE_HOOKS_CAPTURE_H
#define REDZONE_HOOKS_CAPTURE_H

#include "common.h"

/* Tell capture.c that the capture entry points are interposed (subscriptions.c, before the first query). */
void rz__hooks_capture_arm(void);

#endif /* REDZONE_HOOKS_CAPTURE_H */
