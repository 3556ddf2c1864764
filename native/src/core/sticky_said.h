/*
 * Saying once what a sticky error left unchecked (sticky_said.c).
 */
#ifndef REDZONE_STICKY_SAID_H
#define REDZONE_STICKY_SAID_H

#include "common.h"

/* With a sticky error noted: 1, after writing, once per process, the line that says so and how many zones
 * could not be checked (the registry's, plus `held` taken out of it by the caller). 0 without one. */
int rz__sticky_say(uint64_t held);

/* A failure of the library's own work with result r: when r is sticky, noted and said (as above) and 1, so
 * the caller writes no warning of its own; else 0. */
int rz__sticky_failed(rzcu_result r, uint64_t held);

/* The exit line says it instead: whether the line was written already (1) or is now ruled out (0). */
int rz__sticky_said(void);

#endif /* REDZONE_STICKY_SAID_H */
