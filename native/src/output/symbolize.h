/*
 * Allocation stacks and their symbols (symbolize.c).
 */
#ifndef REDZONE_SYMBOLIZE_H
#define REDZONE_SYMBOLIZE_H

#include "common.h"

/* One line per frame, function names from each object's ELF symbol table (symbolize.c). */
void rz__symbolize_frames(void *const *frames, int n);

/* The same frames resolved into out (at most max), for records and rule matching; their number. */
typedef struct rz_frame_sym {
    uint64_t addr, off;
    int named;      /* func holds the function's name */
    char func[160];
    char file[256]; /* the object's file name */
} rz_frame_sym_t;

int rz__symbolize_to(void *const *frames, int n, rz_frame_sym_t *out, int max);

/* The program's frames of the current call, without redzone's own leading ones (at most max). */
int rz__capture_stack(void **frames, int max);

/* Whether an address lies in redzone's own code (the mapping rz__capture_stack skips). */
int rz__in_redzone(uintptr_t addr);

#endif /* REDZONE_SYMBOLIZE_H */
