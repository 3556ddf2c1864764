/*
 * METRALE_REDZONE_TRACE_IDX: where the traced allocation was made, once per process, right after its zone is
 * registered: its size from the registry (`redzone bisect` reads it on that line) and the program's stack.
 */
#include <execinfo.h>

#include "common.h"
#include "alloc_trace.h"
#include "report.h"
#include "symbolize.h"

/* The traced zone's size, for the trace line (`redzone bisect` reads it there). */
struct trace_find {
    uint64_t index;
    rz_zone_info_t info;
    int found;
};

static int trace_find_visit(const rz_zone_info_t *zone, void *arg) {
    struct trace_find *f = arg;
    if (zone->index < f->index)
        return 0;
    if (zone->index == f->index) {
        f->info = *zone;
        f->found = 1;
    }
    return 1; /* in index order: nothing further can match */
}

void rz__backtrace(uint64_t index) {
    void *frames[64];
    int n = backtrace(frames, 64);
    /* Called right after the zone is registered, once per process: a walk in index order is cheap enough,
     * and finds nothing only when another thread has freed the zone already. */
    struct trace_find f = {.index = index};
    rz_zone_foreach(trace_find_visit, &f);
    if (f.found)
        rz__log("redzone: METRALE_REDZONE_TRACE_IDX=%llu: allocation #%llu (user_bytes=%llu pad=%llu) made here:",
                (unsigned long long)index, (unsigned long long)index, (unsigned long long)f.info.user_bytes,
                (unsigned long long)f.info.pad_bytes);
    else
        rz__log("redzone: METRALE_REDZONE_TRACE_IDX=%llu: allocation #%llu made here:", (unsigned long long)index,
                (unsigned long long)index);
    /* Frame 0 is this function. */
    rz__symbolize_frames(frames + 1, n - 1);
}
