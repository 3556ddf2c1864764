/*
 * Writes after free named by the launch that made them (METRALE_REDZONE_SCAN=launch; issue 32 item 1). Right
 * after each checked launch, in the launch's stream order, the held blocks of its context are copied into
 * page-locked memory and a host function queued behind the copies compares them with the free byte: the first
 * launch after whose copy a block is seen changed is noted as its writer (quarantine.c), and the block's report
 * (at its next check: a scan, its eviction, the exit) names that launch instead of the kernels launched since
 * the free. No host wait; the launching thread only queues.
 *
 * Why a note can be trusted, and when none is made: a change seen after launch L was made by L or by work
 * before it, so L is the writer only when every launch since the block's free had its copy queued too. A
 * launch that did not come here (not checked: into a capture, or another thread's launch still being made), or
 * whose copies left a held block out (more than HELD_MAX blocks or HELD_BYTES bytes, no page-locked memory, a
 * block whose fill is not ordered before it), is a gap; a change seen by a later launch in a block freed before
 * a gap is not noted, and its report lists the kernels launched since the free, as under the other policies.
 * Launches on other streams running at the same time as L are not named (the band checks name them,
 * launch_check.c); the note says the first launch whose check saw the change.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "quarantine.h"
#include "band_io.h"
#include "fork.h"
#include "report.h"
#include "stream_ops.h"
#include "cu.h"

#define HELD_MAX 32                  /* blocks copied after one launch */
#define HELD_BYTES ((uint64_t)1 << 20) /* bytes copied after one launch (page-locked, RZ_PINNED_BUDGET in all) */

/* Driver calls queued here, by kind (rz__quarantine_launch_calls: tests count a launch's calls without them). */
static _Atomic uint64_t g_singles, g_batches, g_funcs;

void rz__quarantine_launch_calls(uint64_t *singles, uint64_t *batches, uint64_t *funcs) {
    *singles = atomic_load(&g_singles);
    *batches = atomic_load(&g_batches);
    *funcs = atomic_load(&g_funcs);
}

/* The copies of c's n held blocks into buf, in s's order: one batched copy (one per block on a driver without
 * batches, or that refuses one). Returns how many were queued (all, or those before a refused one). */
static size_t copy_held(uint8_t *buf, const rz_qentry_t *held, size_t n, rzcu_stream s, rzcu_result *res) {
    rzcu_deviceptr dsts[HELD_MAX], srcs[HELD_MAX];
    size_t sizes[HELD_MAX], off = 0;
    for (size_t i = 0; i < n; i++) {
        dsts[i] = (rzcu_deviceptr)(uintptr_t)(buf + off);
        srcs[i] = held[i].base;
        sizes[i] = held[i].bytes;
        off += held[i].bytes;
    }
    if (n > 1 && rz__dev_has_copy_batch()) {
        rzcu_memcpy_attributes attr = {.srcAccessOrder = RZCU_MEMCPY_SRC_ACCESS_ORDER_STREAM};
        size_t attr_idx = 0;
        *res = rz__dev_copy_batch_async(dsts, srcs, sizes, n, &attr, &attr_idx, 1, s);
        if (*res == RZCUDA_SUCCESS) {
            atomic_fetch_add(&g_batches, 1);
            return n;
        }
    }
    size_t queued = 0;
    *res = RZCUDA_SUCCESS;
    for (; queued < n && *res == RZCUDA_SUCCESS; queued++) {
        *res = rz__dev_copy_to_host_async((void *)(uintptr_t)dsts[queued], srcs[queued], sizes[queued], s);
        if (*res == RZCUDA_SUCCESS)
            atomic_fetch_add(&g_singles, 1);
    }
    return *res == RZCUDA_SUCCESS ? queued : queued - 1;
}

/* Launches after which not every held block was copied: a ring of ranges [from, to], under g_gap_lock. */
#define GAPS 64
static pthread_mutex_t g_gap_lock = PTHREAD_MUTEX_INITIALIZER;
static struct gap {
    uint64_t from, to;
} g_gaps[GAPS];
static unsigned g_ngaps;
static uint64_t g_gaps_lost; /* the newest `to` of a range the ring overwrote */
static uint64_t g_last;      /* the newest launch number seen here */

static void gap_locked(uint64_t from, uint64_t to) {
    struct gap *g = &g_gaps[g_ngaps++ % GAPS];
    if (g_ngaps > GAPS && g->to > g_gaps_lost)
        g_gaps_lost = g->to;
    *g = (struct gap){from, to};
}

/* Whether some launch in (freed, launch] was a gap. */
static int gap_between(uint64_t freed, uint64_t launch) {
    int gap;
    pthread_mutex_lock(&g_gap_lock);
    gap = g_gaps_lost > freed;
    for (unsigned i = 0; i < GAPS && i < g_ngaps && !gap; i++)
        gap = g_gaps[i].to > freed && g_gaps[i].from <= launch;
    pthread_mutex_unlock(&g_gap_lock);
    return gap;
}

/* A forked child: the lock may have been held by a thread the child does not have (fork.c's rule). */
static void fork_child(void) { pthread_mutex_init(&g_gap_lock, NULL); }

static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void arm(void) { rz__fork_register(NULL, NULL, fork_child); }

/* Launch #launch came here: the launches it skipped over (not seen here) are gaps. */
static void seen(uint64_t launch) {
    pthread_once(&g_once, arm);
    pthread_mutex_lock(&g_gap_lock);
    if (launch > g_last + 1)
        gap_locked(g_last + 1, launch - 1);
    else if (launch <= g_last)
        gap_locked(launch, launch); /* a launch made before the newest one seen here came after it */
    if (launch > g_last)
        g_last = launch;
    pthread_mutex_unlock(&g_gap_lock);
}

static void gap(uint64_t launch) {
    pthread_mutex_lock(&g_gap_lock);
    gap_locked(launch, launch);
    pthread_mutex_unlock(&g_gap_lock);
}

typedef struct copied {
    uint64_t launch, stream;
    char name[RZ_QWRITER_NAME];
    uint8_t *buf; /* page-locked: the blocks one after another */
    size_t n;
    rz_qentry_t held[];
} copied_t;

/* Host function queued behind the copies: no driver call, only the quarantine's lock and the slots' mutex. */
static void judged(void *arg) {
    copied_t *c = arg;
    const uint8_t *p = c->buf;
    for (size_t i = 0; i < c->n; i++) {
        const rz_qentry_t *e = &c->held[i];
        int changed = p[0] != e->byte || (e->bytes > 1 && memcmp(p, p + 1, e->bytes - 1) != 0);
        if (changed && c->launch > e->launch_seq && !gap_between(e->launch_seq, c->launch))
            rz__quarantine_note_writer(e->index, c->launch, c->stream, c->name);
        p += e->bytes;
    }
    rz__dev_pinned_free(c->buf);
    free(c);
}

void rz__quarantine_after_launch(void *ctx, rzcu_stream s, uint64_t launch, const char *name) {
    if (launch == 0)
        return;
    seen(launch);
    if (rz__quarantine_bytes() == 0 || ctx == NULL)
        return;
    copied_t *c = malloc(sizeof *c + HELD_MAX * sizeof c->held[0]);
    if (c == NULL) {
        gap(launch);
        return;
    }
    int all;
    c->n = rz__quarantine_held_of(ctx, s == NULL || s == RZCU_STREAM_LEGACY, c->held, HELD_MAX, HELD_BYTES, &all);
    if (!all)
        gap(launch);
    size_t bytes = 0;
    for (size_t i = 0; i < c->n; i++)
        bytes += c->held[i].bytes;
    c->buf = c->n && rz__dev_has_host_func() ? rz__dev_pinned_alloc(bytes) : NULL;
    if (c->buf == NULL) {
        if (c->n)
            gap(launch);
        free(c);
        return;
    }
    c->launch = launch;
    c->stream = (uint64_t)(uintptr_t)s;
    snprintf(c->name, sizeof c->name, "%s", name);
    rzcu_result r;
    size_t queued = copy_held(c->buf, c->held, c->n, s, &r);
    if (r != RZCUDA_SUCCESS) {
        gap(launch);
        c->n = queued; /* the copies queued before the refused one are judged all the same */
    }
    if (queued > 0) {
        if (rz__dev_host_func(s, judged, c) == RZCUDA_SUCCESS) {
            atomic_fetch_add(&g_funcs, 1);
            return;
        }
        gap(launch);
        static atomic_int warned;
        if (!atomic_exchange(&warned, 1))
            rz__warn("launch checks: queueing the quarantine's check after launch #%llu failed; its page-locked "
                     "copy is not given back", (unsigned long long)launch);
        return; /* copies may still write into the buffer: it is not reused */
    }
    rz__dev_pinned_free(c->buf);
    free(c);
}
