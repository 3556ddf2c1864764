/*
 * Mapping counters with the seed's rules (mnemosyne recorders): relaxed atomics, telemetry only; a failed
 * release counts the call but not the bytes; the peak never regresses; guard installs, page resets and
 * decommits never touch current_mapped_bytes. The counters live in the exported state block so a debugger
 * can read them without running code.
 */
#include "common.h"
#include "stats.h"
#include "state.h"

#define C(name) (&RZ_STATE.counters[RZ_C_##name])

static inline void add(_Atomic uint64_t *c, uint64_t v) { atomic_fetch_add_explicit(c, v, memory_order_relaxed); }

void rz__count(int counter, int64_t delta) {
    RZ_ASSERT(counter >= 0 && counter < RZ_NCOUNTERS);
    atomic_fetch_add_explicit(&RZ_STATE.counters[counter], (uint64_t)delta, memory_order_relaxed);
}

void rz__record_map(uint64_t bytes) {
    add(C(map_calls), 1);
    uint64_t current = atomic_fetch_add_explicit(C(current_mapped_bytes), bytes, memory_order_relaxed) + bytes;
    uint64_t peak = atomic_load_explicit(C(peak_mapped_bytes), memory_order_relaxed);
    while (current > peak &&
           !atomic_compare_exchange_weak_explicit(C(peak_mapped_bytes), &peak, current, memory_order_relaxed,
                                                  memory_order_relaxed)) {
    }
}

void rz__record_unmap(uint64_t bytes) {
    add(C(unmap_calls), 1);
    atomic_fetch_sub_explicit(C(current_mapped_bytes), bytes, memory_order_relaxed);
}

void rz__record_unmap_failure(void) { add(C(unmap_calls), 1); }

void rz__record_page_reset(uint64_t bytes) {
    add(C(page_reset_calls), 1);
    add(C(page_reset_bytes), bytes);
}

void rz__record_guard_install(uint64_t bytes) {
    add(C(guard_install_calls), 1);
    add(C(guard_install_bytes), bytes);
}

void rz__record_decommit(uint64_t bytes) {
    add(C(decommit_calls), 1);
    add(C(decommit_bytes), bytes);
}

RZ_EXPORT int rz_stats_get(rz_stats_t *out) {
    if (out == NULL)
        return RZ_EINVAL;
#define RZ_STATS_COPY(name, kind, desc) out->name = atomic_load_explicit(C(name), memory_order_relaxed);
    RZ_COUNTERS(RZ_STATS_COPY)
#undef RZ_STATS_COPY
    return RZ_OK;
}
