/*
 * The marks of zones whose stream-ordered band fill is not yet seen done (RZ_ZONE_FILLING; the fills' events
 * are the device seam's, device/stream_fills.c), noted as the zones are registered, so a successful
 * synchronisation can clear the marks of those whose fill is done.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "common.h"
#include "fill_marks.h"
#include "registry.h"
#include "rz_annotate.h"
#include "state.h"
#include "stream_fills.h"

static pthread_mutex_t g_marks_lock = PTHREAD_MUTEX_INITIALIZER;

/*
 * Zones marked RZ_ZONE_FILLING, by pointer and fill, so a synchronisation can clear the marks of those whose
 * fill is done without walking the registry: a debugger judging bands itself (the memory method) cannot ask
 * an event and skips marked zones, so marks must not outlive the fill by long. Bounded: a zone that finds the
 * list full keeps its mark until a scan, poison or free looks at it. Entries of zones freed since are
 * dropped when met (the pointer no longer names a zone with that fill).
 */
#define FILLING_LIST 4096u
static struct filling {
    uint64_t ptr;
    uint16_t fill;
} g_filling[FILLING_LIST];
static unsigned g_nfilling;          /* under g_marks_lock */
static _Atomic unsigned g_filling_hint; /* g_nfilling, read without the lock */

/* helgrind: the hint is a C11 atomic read without the lock. */
void rz__fill_marks_annotate(void) { RZ_ANNOTATE_ATOMIC(&g_filling_hint, sizeof g_filling_hint); }

void rz__fill_note(uint64_t ptr, uint16_t fill) {
    pthread_mutex_lock(&g_marks_lock);
    if (g_nfilling < FILLING_LIST) {
        g_filling[g_nfilling++] = (struct filling){ptr, fill};
        atomic_store_explicit(&g_filling_hint, g_nfilling, memory_order_relaxed);
    }
    pthread_mutex_unlock(&g_marks_lock);
}

void rz__fills_settle(void) {
    if (RZ_LIKELY(atomic_load_explicit(&g_filling_hint, memory_order_relaxed) == 0))
        return;
    rz__registry_lock();
    pthread_mutex_lock(&g_marks_lock);
    unsigned kept = 0;
    for (unsigned k = 0; k < g_nfilling; k++) {
        rz_zone_node_t *z = rz__registry_find(g_filling[k].ptr);
        if (z && (z->flags & RZ_ZONE_FILLING) && z->fill == g_filling[k].fill && !rz__zone_filled(z))
            g_filling[kept++] = g_filling[k];
    }
    g_nfilling = kept;
    atomic_store_explicit(&g_filling_hint, kept, memory_order_relaxed);
    pthread_mutex_unlock(&g_marks_lock);
    rz__registry_unlock();
}
