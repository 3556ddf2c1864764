/*
 * The program's device work, counted (work_epoch.h). Three numbers, each one atomic: the work noted so far,
 * the count at the last work on a stream handle, and the count up to which every band the hooks see was
 * judged clean with that work complete. Work the hooks cannot see (a program writing device memory past the
 * interposed entry points) is not counted: zones of memory such writes may reach are not RZ_ZONE_SEEN and
 * are always read.
 */
#include <pthread.h>
#include <stdatomic.h>

#include "common.h"
#include "work_epoch.h"
#include "device_ctx.h"
#include "rz_annotate.h"

static _Atomic uint64_t g_work;  /* work noted */
static _Atomic uint64_t g_named; /* g_work at the last work on a stream handle */
static _Atomic uint64_t g_clean; /* every seen band judged clean with the work up to here complete */
static _Atomic uint64_t g_done;  /* the work up to here is known complete */

/*
 * The stream handles that got work, each with the count at its last work, so a free can order its read after
 * exactly them (rz__work_named_streams), and the context current when it took its slot (asked then, once),
 * so the records go with their context. A handle keeps its slot; when every slot holds one, the least
 * recently used that has no work past the completed count gives way, and when none can, the work is "lost":
 * g_lost says a free must synchronise the context. A mutex, taken only for work on a stream handle (never a
 * driver call under it).
 */
struct named_slot {
    rzcu_stream s;
    void *ctx;
    uint64_t last;
};
static pthread_mutex_t g_named_lock = PTHREAD_MUTEX_INITIALIZER;
static struct named_slot g_slots[RZ_WORK_NAMED_SLOTS];
static unsigned g_nslots;
static _Atomic uint64_t g_lost; /* the count at the last work no slot records */

void rz__work_annotate(void) {
    RZ_ANNOTATE_ATOMIC(&g_work, sizeof g_work);
    RZ_ANNOTATE_ATOMIC(&g_named, sizeof g_named);
    RZ_ANNOTATE_ATOMIC(&g_clean, sizeof g_clean);
    RZ_ANNOTATE_ATOMIC(&g_done, sizeof g_done);
    RZ_ANNOTATE_ATOMIC(&g_lost, sizeof g_lost);
}

static void raise_to(_Atomic uint64_t *v, uint64_t epoch);

/* Lock held: the slot of s, or NULL. */
static struct named_slot *slot_of_locked(rzcu_stream s) {
    for (unsigned i = 0; i < g_nslots; i++)
        if (g_slots[i].s == s)
            return &g_slots[i];
    return NULL;
}

static void note_named(rzcu_stream s, uint64_t e) {
    pthread_mutex_lock(&g_named_lock);
    struct named_slot *n = slot_of_locked(s);
    if (n != NULL) {
        if (n->last < e)
            n->last = e;
        pthread_mutex_unlock(&g_named_lock);
        return;
    }
    pthread_mutex_unlock(&g_named_lock);
    void *ctx = rz__dev_current_ctx(); /* a launch or copy on s runs in s's context, current now */
    pthread_mutex_lock(&g_named_lock);
    if ((n = slot_of_locked(s)) == NULL) {
        if (g_nslots < RZ_WORK_NAMED_SLOTS) {
            n = &g_slots[g_nslots++];
        } else {
            uint64_t done = atomic_load_explicit(&g_done, memory_order_acquire);
            for (unsigned i = 0; i < g_nslots; i++)
                if (g_slots[i].last <= done && (n == NULL || g_slots[i].last < n->last))
                    n = &g_slots[i];
        }
        if (n != NULL)
            *n = (struct named_slot){.s = s, .ctx = ctx, .last = 0};
    }
    if (n != NULL && n->last < e)
        n->last = e;
    pthread_mutex_unlock(&g_named_lock);
    if (n == NULL)
        raise_to(&g_lost, e);
}

void rz__work_note(rzcu_stream s, int per_thread) {
    (void)per_thread;
    uint64_t e = atomic_fetch_add_explicit(&g_work, 1, memory_order_acq_rel) + 1;
    if (s != NULL && s != RZCU_STREAM_LEGACY && s != RZCU_STREAM_PER_THREAD) {
        note_named(s, e);
        atomic_store_explicit(&g_named, e, memory_order_release);
    }
}

size_t rz__work_named_streams(uint64_t epoch, rzcu_stream *out, size_t max) {
    if (atomic_load_explicit(&g_lost, memory_order_acquire) > epoch)
        return SIZE_MAX;
    size_t n = 0;
    pthread_mutex_lock(&g_named_lock);
    for (unsigned i = 0; i < g_nslots && n != SIZE_MAX; i++)
        if (g_slots[i].last > epoch)
            n = n < max ? (out[n] = g_slots[i].s, n + 1) : SIZE_MAX;
    pthread_mutex_unlock(&g_named_lock);
    return n;
}

void rz__work_forget_ctx(void *ctx) {
    pthread_mutex_lock(&g_named_lock);
    for (unsigned i = g_nslots; i-- > 0;)
        if (g_slots[i].ctx == ctx)
            g_slots[i] = g_slots[--g_nslots];
    pthread_mutex_unlock(&g_named_lock);
}

void rz__work_stream_gone(rzcu_stream s) {
    pthread_mutex_lock(&g_named_lock);
    struct named_slot *n = slot_of_locked(s);
    uint64_t last = 0;
    if (n != NULL) {
        last = n->last;
        *n = g_slots[--g_nslots];
    }
    pthread_mutex_unlock(&g_named_lock);
    if (last > atomic_load_explicit(&g_done, memory_order_acquire))
        raise_to(&g_lost, last); /* its work may still run, and can no longer be waited for by handle */
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
