/*
 * The program's device work, counted (work_epoch.h). Three numbers, each one atomic: the work noted so far,
 * the count at the last work on a stream handle, and the count up to which every band the hooks see was
 * judged clean with that work complete. Work the hooks cannot see (a program writing device memory past the
 * interposed entry points) is not counted: zones of memory such writes may reach are not RZ_ZONE_SEEN and
 * are always read.
 */
#include <stdatomic.h>

#include "common.h"
#include "work_epoch.h"
#include "rz_annotate.h"

static _Atomic uint64_t g_work;  /* work noted */
static _Atomic uint64_t g_named; /* g_work at the last work on a stream handle */
static _Atomic uint64_t g_clean; /* every seen band judged clean with the work up to here complete */
static _Atomic uint64_t g_done;  /* the work up to here is known complete */

void rz__work_annotate(void) {
    RZ_ANNOTATE_ATOMIC(&g_work, sizeof g_work);
    RZ_ANNOTATE_ATOMIC(&g_named, sizeof g_named);
    RZ_ANNOTATE_ATOMIC(&g_clean, sizeof g_clean);
    RZ_ANNOTATE_ATOMIC(&g_done, sizeof g_done);
}

void rz__work_note(rzcu_stream s, int per_thread) {
    (void)per_thread;
    uint64_t e = atomic_fetch_add_explicit(&g_work, 1, memory_order_acq_rel) + 1;
    if (s != NULL && s != RZCU_STREAM_LEGACY && s != RZCU_STREAM_PER_THREAD)
        atomic_store_explicit(&g_named, e, memory_order_release);
}

uint64_t rz__work_now(void) { return atomic_load_explicit(&g_work, memory_order_acquire); }

static void raise_to(_Atomic uint64_t *v, uint64_t epoch) {
    uint64_t old = atomic_load_explicit(v, memory_order_relaxed);
    while (old < epoch && !atomic_compare_exchange_weak_explicit(v, &old, epoch, memory_order_acq_rel,
                                                                 memory_order_relaxed))
        ;
}

void rz__work_judged_all(uint64_t epoch) {
    raise_to(&g_clean, epoch);
    raise_to(&g_done, epoch);
}

int rz__work_none_since_clean(void) {
    return atomic_load_explicit(&g_work, memory_order_acquire) == atomic_load_explicit(&g_clean, memory_order_acquire);
}

uint64_t rz__work_named_stream_last(void) { return atomic_load_explicit(&g_named, memory_order_acquire); }

int rz__work_default_streams_since(uint64_t epoch) { return rz__work_named_stream_last() <= epoch; }

uint64_t rz__work_done(void) { return atomic_load_explicit(&g_done, memory_order_acquire); }

void rz__work_completed(uint64_t epoch) { raise_to(&g_done, epoch); }
