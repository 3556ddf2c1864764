/*
 * The quarantine's findings (quarantine_report.h): a held block or region found written after its free or
 * unregistration, reported with its stacks and the launch that wrote it (SCAN=launch) or the kernels launched
 * since. Split from quarantine.c, which finds the change; nothing here takes the quarantine's lock.
 */
#include <stdatomic.h>
#include <stdio.h>

#include "common.h"
#include "quarantine.h"
#include "quarantine_report.h"
#include "depot.h"
#include "finding.h"
#include "format.h"
#include "judge.h"
#include "launch_ring.h"
#include "options.h"
#include "report.h"
#include "stats.h"
#include "symbolize.h"
#include "thread_state.h"

/* The kernels launched since entry e was freed, from the launch ring (the newest few). */
static void launches_since(const rz_qentry_t *e) {
    uint64_t seqs[4], n;
    char names[4][RZ_FINDING_NAME];
    unsigned k = rz__launch_names_since(e->launch_seq, seqs, names[0], sizeof names[0], 4, &n);
    const char *since = (e->flags & RZ_QENTRY_REGION) ? "it was unregistered" : "the free";
    if (n == 0) {
        rz__log("  no kernel was launched since %s (a copy or memset wrote it, or the host)", since);
        return;
    }
    rz__log("  %llu kernel launch%s since %s; the newest:", (unsigned long long)n, n == 1 ? "" : "es", since);
    for (unsigned i = 0; i < k; i++)
        rz__log("    launch #%llu %s", (unsigned long long)seqs[i], names[i]);
}

static void print_depot_stack(uint32_t id, const char *what, uint64_t index) {
    const uint64_t *kept;
    if (id == 0 || rz__depot_get(id, &kept) == 0)
        return;
    rz__log("  alloc#%llu was %s at:", (unsigned long long)index, what);
    rz__depot_symbolize(id);
}

static _Atomic(rz_qdescribe_fn *) g_describe;

void rz__quarantine_on_region(rz_qdescribe_fn *fn) { atomic_store_explicit(&g_describe, fn, memory_order_release); }

/* A held region's line, as the NVTX layer names the region. */
static void region_line(const rz_qentry_t *e, const rz_violation_t *v, char *line, size_t cap) {
    char what[192] = "a pool region";
    rz_qdescribe_fn *describe = atomic_load_explicit(&g_describe, memory_order_acquire);
    if (describe)
        describe(e->arg, what, sizeof what);
    snprintf(line, cap, "REDZONE VIOLATION %s : bytes [%llu..=%llu] were written after it was unregistered (%llu of "
             "%llu bytes held changed), first bad value 0x%02x", what, (unsigned long long)v->first,
             (unsigned long long)v->last, (unsigned long long)v->changed, (unsigned long long)e->bytes,
             v->first_bad);
}

void rz__quarantine_report(const rz_qentry_t *e, uint64_t first, uint64_t last, uint64_t changed, uint8_t bad,
                           const rz_qwriter_t *w) {
    int64_t off = (int64_t)(e->base - e->ptr); /* the front band lies before the pointer */
    rz_violation_t v = {.index = e->index, .ptr = e->ptr, .user_bytes = e->user_bytes, .pad_bytes = e->bytes,
                        .first = (uint64_t)((int64_t)first + off), .last = (uint64_t)((int64_t)last + off),
                        .changed = changed, .first_bad = bad, .expected = e->byte, .after_free = 1};
    int region = (e->flags & RZ_QENTRY_REGION) != 0;
    char line[512];
    if (region)
        region_line(e, &v, line, sizeof line);
    else
        rz__format_violation(&v, line, sizeof line);
    const uint64_t *kept = NULL;
    uint32_t nkept = e->alloc_stack ? rz__depot_get(e->alloc_stack, &kept) : 0;
    rz_finding_t f = {.kind = region ? RZ_FINDING_REGION_AFTER_FREE : RZ_FINDING_WRITE_AFTER_FREE, .alloc = e->index, .ptr = e->ptr,
                      .user_bytes = e->user_bytes, .pad = (int64_t)e->bytes, .first = (int64_t)v.first,
                      .last = (int64_t)v.last, .changed = (int64_t)changed, .first_bad = bad, .addr = e->base,
                      .bytes = e->bytes, .text = line, .alloc_frames = kept, .nalloc = nkept};
    uint64_t seqs[RZ_FINDING_KERNELS], total;
    if (w) { /* SCAN=launch saw which launch wrote it */
        snprintf(f.launch, sizeof f.launch, "%s", w->name);
        f.launch_seq = w->launch;
    }
    f.nkernels = rz__launch_names_since(e->launch_seq, seqs, f.kernels[0], sizeof f.kernels[0], RZ_FINDING_KERNELS,
                                        &total);
    int fate = rz__finding_admit(&f);
    if (fate == RZ_FINDING_SUPPRESSED)
        return; /* neither reported nor counted; the block is filled again by its check all the same */
    /* A scan holds its lines back until it lets the registry go (judge.c); this report goes out now, before
     * its hook, so a debugger stopped there has it (the scan's own held lines follow later). */
    struct rz_reports *held = rz__thread.reports;
    if (held)
        rz__log_hold(NULL);
    rz__log_mute(fate != RZ_FINDING_REPORT);
    rz__log("%s", line);
    if (region) {
        const uint64_t *fk;
        if (e->free_stack && rz__depot_get(e->free_stack, &fk)) {
            rz__log("  the region was unregistered at:");
            rz__depot_symbolize(e->free_stack);
        }
    } else {
        print_depot_stack(e->alloc_stack, "allocated", e->index);
        print_depot_stack(e->free_stack, "freed", e->index);
    }
    if (w)
        rz__log("  written by kernel %s (launch #%llu, stream 0x%llx): the first launch after the %s whose check "
                "saw it changed", w->name, (unsigned long long)w->launch, (unsigned long long)w->stream,
                region ? "unregistration" : "free");
    else
        launches_since(e);
    rz__log_mute(0);
    rz__count(RZ_C_violations, 1); /* before the hook, so a debugger stopped there sees it counted */
    __redzone_violation(&v);
    if (held)
        rz__log_hold(&held->lines);
    rz__finding_done(fate);
}

