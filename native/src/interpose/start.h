/*
 * Start-up (start.c): the one place where the library starts, at the first allocation of a process.
 */
#ifndef REDZONE_START_H
#define REDZONE_START_H

#include "common.h"

/* 1 once the library is started (in this process: a forked child that must restart its agent sets it back). */
extern __attribute__((visibility("hidden"))) _Atomic int rz__started;

int rz__start_slow(void);

/* Start the library unless it is: options, driver, the scans at exit and on a fatal signal, the agent thread,
 * the allocation fast path. RZ_OK, or RZ_ENODRIVER (then it is tried again at the next call). Once started,
 * one acquire load. */
static inline int rz__start(void) {
    if (RZ_LIKELY(atomic_load_explicit(&rz__started, memory_order_acquire)))
        return RZ_OK;
    return rz__start_slow();
}

#endif /* REDZONE_START_H */
