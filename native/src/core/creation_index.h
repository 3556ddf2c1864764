/*
 * The creation index (the seed's concept): every allocation call made through redzone takes the next number,
 * in call order, whether the driver then succeeds or not, so a run repeated with the same inputs gives each
 * allocation the same index. Windows of indices select what a run watches (METRALE_REDZONE_MIN_IDX), traces
 * (METRALE_REDZONE_TRACE_IDX), poisons (METRALE_REDZONE_POISON, `redzone poison LO HI`) and guards
 * (METRALE_REDZONE_GUARD); `redzone bisect` searches them. The counter lives in the exported state block
 * (`next_index`) so a debugger reads it without running code.
 */
#ifndef REDZONE_CREATION_INDEX_H
#define REDZONE_CREATION_INDEX_H

#include "common.h"
#include "state.h"

/* Take the index of this allocation call (one relaxed atomic add: the hot path). */
static inline uint64_t rz__index_take(void) {
    return atomic_fetch_add_explicit(&RZ_STATE.next_index, 1, memory_order_relaxed);
}

/* The index the next allocation call will take (public: rz_next_index). */
uint64_t rz_next_index(void);

/* Tell helgrind the counter is an atomic read without a lock (rz_annotate.h). */
void rz__index_annotate(void);

#endif /* REDZONE_CREATION_INDEX_H */
