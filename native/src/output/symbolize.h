/*
 * Allocation stacks and their symbols (symbolize.c).
 */
#ifndef REDZONE_SYMBOLIZE_H
#define REDZONE_SYMBOLIZE_H

#include "common.h"

/* One line per frame, function names from each object's ELF symbol table (symbolize.c). */
void rz__symbolize_frames(void *const *frames, int n);

/* The program's frames of the current call, without redzone's own leading ones (at most max). */
int rz__capture_stack(void **frames, int max);

/* Whether an address lies in redzone's own code (the mapping rz__capture_stack skips). */
int rz__in_redzone(uintptr_t addr);

#endif /* REDZONE_SYMBOLIZE_H */
