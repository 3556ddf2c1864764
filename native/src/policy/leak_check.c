/*
 * The leak check (METRALE_REDZONE_LEAK_CHECK, `redzone run --leak-check 1`; compute-sanitizer's name): at
 * exit, the allocations still live are grouped by allocation stack (one group without
 * METRALE_REDZONE_STACKS), each group reported with its bytes, count and first creation index, largest first,
 * its stack symbolized when kept, and counted as a violation, so `redzone run --error-exitcode` fails on it.
 * Without the option nothing is reported or counted (the exit line's `live` count says it still).
 */
#include <stdio.h>
#include <stdlib.h>

#include "common.h"
#include "leak_check.h"
#include "depot.h"
#include "finding.h"
#include "options.h"
#include "registry.h"
#include "report.h"
#include "state.h"
#include "stats.h"

struct group {
    uint32_t stack;
    uint64_t bytes, count, first;
};

static int by_bytes(const void *a, const void *b) {
    const struct group *x = a, *y = b;
    if (x->bytes != y->bytes)
        return x->bytes < y->bytes ? 1 : -1;
    return x->first < y->first ? -1 : x->first > y->first;
}

void rz__leak_check_at_exit(void) {
    if (!rz__options()->leak_check)
        return;
    size_t n = 0, cap = 0;
    struct group *g = NULL;
    uint64_t bytes = 0, count = 0;
    int nomem = 0;
    rz__registry_lock();
    for (const rz_zone_node_t *z = rz__registry_first(); z; z = rz__registry_next(z)) {
        uint32_t id = rz__registry_stack_id(z);
        bytes += z->user_bytes;
        count++;
        size_t i = 0;
        while (i < n && g[i].stack != id)
            i++; /* groups are few: a linear search at exit */
        if (i == n) {
            if (n == cap) {
                size_t ncap = cap ? cap * 2 : 64;
                struct group *ng = realloc(g, ncap * sizeof *g);
                if (ng == NULL) {
                    nomem = 1;
                    continue;
                }
                g = ng;
                cap = ncap;
            }
            g[n++] = (struct group){.stack = id, .first = z->index};
        }
        g[i].bytes += z->user_bytes;
        g[i].count++;
    }
    rz__registry_unlock();
    if (count == 0) {
        free(g);
        return;
    }
    qsort(g, n, sizeof *g, by_bytes);
    if (rz__options()->stacks)
        rz__log("redzone: leak check: %llu bytes in %llu allocations still live at exit, from %zu allocation stack%s",
                (unsigned long long)bytes, (unsigned long long)count, n, n == 1 ? "" : "s");
    else
        rz__log("redzone: leak check: %llu bytes in %llu allocations still live at exit (METRALE_REDZONE_STACKS "
                "groups them by allocation stack)", (unsigned long long)bytes, (unsigned long long)count);
    for (size_t i = 0; i < n; i++) {
        const uint64_t *kept = NULL;
        uint32_t nf = g[i].stack ? rz__depot_get(g[i].stack, &kept) : 0;
        char line[256];
        snprintf(line, sizeof line, "redzone: leak: %llu bytes in %llu allocation%s (first alloc#%llu)%s",
                 (unsigned long long)g[i].bytes, (unsigned long long)g[i].count, g[i].count == 1 ? "" : "s",
                 (unsigned long long)g[i].first, nf ? " allocated at:" : "");
        rz_finding_t f = {.kind = RZ_FINDING_LEAK, .alloc = g[i].first, .user_bytes = g[i].bytes,
                          .pad = RZ_FINDING_NONE, .first = RZ_FINDING_NONE, .last = RZ_FINDING_NONE,
                          .changed = RZ_FINDING_NONE, .first_bad = RZ_FINDING_NONE, .bytes = g[i].count,
                          .text = line, .alloc_frames = kept, .nalloc = nf};
        int fate = rz__finding_admit(&f);
        if (fate == RZ_FINDING_SUPPRESSED)
            continue; /* neither reported nor counted */
        rz__log_mute(fate != RZ_FINDING_REPORT);
        rz__log("%s", line);
        if (nf)
            rz__depot_symbolize(g[i].stack);
        rz__log_mute(0);
        rz__count(RZ_C_violations, 1);
        rz__finding_done(fate);
    }
    if (nomem)
        rz__warn("leak check: out of host memory while grouping; some allocations are in no group above");
    free(g);
}
