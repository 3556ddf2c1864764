/*
 * Formatting of everything a user reads about zones: the violation line, the scan summary, a zone row
 * for `redzone list`, the counters. One implementation, used by the library's log and, through the view
 * library (view.c, loaded into gdb with ctypes), by the gdb plugin: the text exists once, in C.
 * Pure functions: no globals, no allocation; each returns the length it wrote (snprintf semantics).
 */
#include <stdio.h>
#include <string.h>

#include "common.h"
#include "format.h"
#include "state.h"

static size_t clamp(int n, size_t cap) { return n < 0 ? 0 : ((size_t)n < cap ? (size_t)n : (cap ? cap - 1 : 0)); }

size_t rz__format_violation(const rz_violation_t *v, char *out, size_t cap) {
    if (v->after_free) { /* a block held in the quarantine (core/quarantine.c) */
        int n = snprintf(out, cap,
                         "REDZONE VIOLATION alloc#%llu user_bytes=%llu : bytes [%lld..=%lld] were written after free "
                         "(%llu of %llu freed bytes changed), first bad value 0x%02x",
                         (unsigned long long)v->index, (unsigned long long)v->user_bytes, (long long)v->first,
                         (long long)v->last, (unsigned long long)v->changed, (unsigned long long)v->pad_bytes,
                         (unsigned)v->first_bad);
        return clamp(n, cap);
    }
    if (v->front) {
        int n = snprintf(out, cap,
                         "REDZONE VIOLATION alloc#%llu user_bytes=%llu front=%llu : bytes [-%llu..=-%llu] before the "
                         "start were written (%llu of %llu front bytes changed), first bad value 0x%02x",
                         (unsigned long long)v->index, (unsigned long long)v->user_bytes,
                         (unsigned long long)v->pad_bytes, (unsigned long long)v->first, (unsigned long long)v->last,
                         (unsigned long long)v->changed, (unsigned long long)v->pad_bytes, (unsigned)v->first_bad);
        return clamp(n, cap);
    }
    int n = snprintf(out, cap,
                     "REDZONE VIOLATION alloc#%llu user_bytes=%llu pad=%llu : bytes [%llu..=%llu] past the end were "
                     "written (%llu of %llu pad bytes changed), first bad value 0x%02x",
                     (unsigned long long)v->index, (unsigned long long)v->user_bytes, (unsigned long long)v->pad_bytes,
                     (unsigned long long)v->first, (unsigned long long)v->last, (unsigned long long)v->changed,
                     (unsigned long long)v->pad_bytes, (unsigned)v->first_bad);
    return clamp(n, cap);
}

int rz__band_violation(const rz_zone_node_t *z, const uint8_t *band, uint64_t bytes, int front, rz_violation_t *v) {
    /* Clean in the common case: the first byte, then the range against itself shifted by one (libc's
     * vectorised memcmp does the wide compare). */
    if (bytes == 0 || (band[0] == z->expected && memcmp(band, band + 1, bytes - 1) == 0))
        return 0;
    *v = (rz_violation_t){.index = z->index, .ptr = z->ptr, .user_bytes = z->user_bytes, .pad_bytes = bytes,
                          .expected = z->expected, .front = (uint8_t)front};
    uint64_t first = UINT64_MAX, last = 0, changed = 0;
    for (uint64_t i = 0; i < bytes; i++) {
        if (band[i] != z->expected) {
            if (first == UINT64_MAX)
                first = i;
            last = i;
            changed++;
        }
    }
    /* Past the end: offsets from the end. Before the start: distances back from the start. */
    v->first = front ? bytes - first : first;
    v->last = front ? bytes - last : last;
    v->changed = changed;
    v->first_bad = band[first];
    return 1;
}

size_t rz__format_launch_candidates(const rz_launches_t *ring, uint64_t since, uint64_t index, char *out, size_t cap) {
    enum { NAMES_SHOWN = 8 };
    char names[768];
    size_t n = 0;
    unsigned shown = 0, more = 0;
    uint64_t newest = ring->seq;
    uint64_t oldest_kept = newest > RZ_LAUNCH_RING ? newest - RZ_LAUNCH_RING + 1 : 1;
    int lost = since + 1 < oldest_kept;
    for (uint64_t seq = newest; seq > since && seq >= oldest_kept; seq--) {
        const struct rz_launch *l = &ring->ring[(seq - 1) % RZ_LAUNCH_RING];
        if (l->next_index <= index)
            continue; /* launched before this zone existed */
        if (shown == NAMES_SHOWN) {
            more++;
            continue;
        }
        int w = snprintf(names + n, sizeof names - n, "%s%.*s", shown ? ", " : "", (int)sizeof l->name, l->name);
        if (w > 0 && (size_t)w < sizeof names - n)
            n += (size_t)w;
        shown++;
    }
    if (shown == 0) {
        if (cap)
            out[0] = '\0';
        return 0;
    }
    int w = snprintf(out, cap, "  kernels launched since alloc#%llu was last seen clean (most recent first): %s%s%s",
                     (unsigned long long)index, names, more ? " and more" : "", lost ? " (older launches not kept)" : "");
    return clamp(w, cap);
}

size_t rz__format_frame(int k, uint64_t addr, const char *func, uint64_t off, const char *file, char *out, size_t cap) {
    int n = func ? snprintf(out, cap, "    #%d 0x%llx in %s+0x%llx (%s)", k, (unsigned long long)addr, func,
                            (unsigned long long)off, file)
                 : snprintf(out, cap, "    #%d 0x%llx (%s)", k, (unsigned long long)addr, file);
    return clamp(n, cap);
}

size_t rz__format_scan_summary(uint64_t checked, uint64_t violated, char *out, size_t cap) {
    int n = snprintf(out, cap, "redzone scan: %llu zones checked, %llu violated", (unsigned long long)checked,
                     (unsigned long long)violated);
    return clamp(n, cap);
}

static const char *zone_state(const rz_zone_node_t *z) {
    if (z->flags & RZ_ZONE_GUARD)
        return (z->pad_bytes && !(z->flags & RZ_ZONE_UNWATCHED)) ? "guard-page+band" : "guard-page";
    if (z->pad_bytes == 0)
        return "unpadded";
    if (z->flags & RZ_ZONE_UNWATCHED)
        return "unwatched";
    if (z->flags & RZ_ZONE_PENDING)
        return "pending";
    if (z->flags & RZ_ZONE_GRAPH)
        return "graph";
    if (z->flags & RZ_ZONE_FILLING)
        return "filling";
    return "watched";
}

/* `redzone list` columns: index, user pointer, user bytes, pad, expected byte, state. */
size_t rz__format_zone_header(char *out, size_t cap) {
    int n = snprintf(out, cap, "%10s  %-18s  %12s  %8s  %8s  %s", "index", "pointer", "user_bytes", "pad",
                     "expected", "state");
    return clamp(n, cap);
}

size_t rz__format_zone_row(const rz_zone_node_t *z, char *out, size_t cap) {
    char expected[8] = "-", pad[32];
    if (rz__zone_watched(z) && !(z->flags & RZ_ZONE_PENDING)) /* pending: decided when it is written */
        snprintf(expected, sizeof expected, "0x%02x", (unsigned)z->expected);
    if (z->front_units)
        snprintf(pad, sizeof pad, "%llu+%u", (unsigned long long)rz__zone_front(z), (unsigned)z->pad_bytes);
    else
        snprintf(pad, sizeof pad, "%u", (unsigned)z->pad_bytes);
    int n = snprintf(out, cap, "%10llu  0x%016llx  %12llu  %8s  %8s  %s", (unsigned long long)z->index,
                     (unsigned long long)z->ptr, (unsigned long long)z->user_bytes, pad, expected, zone_state(z));
    return clamp(n, cap);
}

size_t rz__format_zone_json(const rz_zone_node_t *z, char *out, size_t cap) {
    int n = snprintf(out, cap,
                     "{\"index\": %llu, \"pointer\": \"0x%llx\", \"user_bytes\": %llu, \"pad\": %u, "
                     "\"front\": %llu, \"expected\": %u, \"state\": \"%s\"}",
                     (unsigned long long)z->index, (unsigned long long)z->ptr, (unsigned long long)z->user_bytes,
                     (unsigned)z->pad_bytes, (unsigned long long)rz__zone_front(z), (unsigned)z->expected,
                     zone_state(z));
    return clamp(n, cap);
}

/* Every counter as `name: value`, one per line. */
size_t rz__format_counters(const uint64_t *counters, char *out, size_t cap) {
    size_t used = 0;
    int i = 0;
#define RZ_FMT_COUNTER(name, kind, desc)                                                                     \
    used += clamp(snprintf(out + used, cap - used, "%s: %llu\n", #name, (unsigned long long)counters[i++]),  \
                  cap - used);
    RZ_COUNTERS(RZ_FMT_COUNTER)
#undef RZ_FMT_COUNTER
    return used;
}

size_t rz__format_counters_json(const uint64_t *counters, char *out, size_t cap) {
    size_t used = clamp(snprintf(out, cap, "{"), cap);
    int i = 0;
#define RZ_FMT_COUNTER_JSON(name, kind, desc)                                                                \
    used += clamp(snprintf(out + used, cap - used, "%s\"%s\": %llu", i ? ", " : "", #name,                   \
                           (unsigned long long)counters[i]),                                                 \
                  cap - used);                                                                               \
    i++;
    RZ_COUNTERS(RZ_FMT_COUNTER_JSON)
#undef RZ_FMT_COUNTER_JSON
    used += clamp(snprintf(out + used, cap - used, "}"), cap - used);
    return used;
}

size_t rz__format_bad_free(uint64_t ptr, uint64_t index, uint64_t user_bytes, uint64_t before, const char *driver_answer,
                           char *out, size_t cap) {
    int n = snprintf(out, cap,
                     "redzone: bad free of 0x%llx: %llu bytes before the start of alloc#%llu (user_bytes=%llu), in its "
                     "front band; nothing freed, %s returned as without redzone",
                     (unsigned long long)ptr, (unsigned long long)before, (unsigned long long)index,
                     (unsigned long long)user_bytes, driver_answer);
    return clamp(n, cap);
}

size_t rz__format_bad_free_kind(const rz_refusal_t *r, const char *driver_answer, char *out, size_t cap) {
    unsigned long long p = r->addr, idx = r->index, ub = r->user_bytes;
    long long off = (long long)r->first;
    int n;
    if (r->how == RZ_REFUSED_DOUBLE_FREE)
        n = snprintf(out, cap, "redzone: bad free of 0x%llx: double free of alloc#%llu (user_bytes=%llu), freed already; "
                     "%s returned as without redzone", p, idx, ub, driver_answer);
    else if (r->how == RZ_REFUSED_INTERIOR_FREE)
        n = snprintf(out, cap, "redzone: bad free of 0x%llx: %lld bytes into alloc#%llu (user_bytes=%llu), not its "
                     "start; %s returned as without redzone", p, off, idx, ub, driver_answer);
    else if (r->how == RZ_REFUSED_FREED_INTERIOR)
        n = snprintf(out, cap, "redzone: bad free of 0x%llx: %lld bytes into alloc#%llu (user_bytes=%llu), freed "
                     "already; %s returned as without redzone", p, off, idx, ub, driver_answer);
    else if (r->how == RZ_REFUSED_ENDED_FREE && off == 0)
        n = snprintf(out, cap, "redzone: bad free of 0x%llx: alloc#%llu (user_bytes=%llu) after its context ended "
                     "(its memory went with the context); %s returned as without redzone", p, idx, ub, driver_answer);
    else if (r->how == RZ_REFUSED_ENDED_FREE)
        n = snprintf(out, cap, "redzone: bad free of 0x%llx: %lld bytes into alloc#%llu (user_bytes=%llu), after its "
                     "context ended (its memory went with the context); %s returned as without redzone", p, off, idx,
                     ub, driver_answer);
    else
        n = snprintf(out, cap, "redzone: bad free of 0x%llx: no allocation redzone knows of holds it; %s returned as "
                     "without redzone", p, driver_answer);
    return clamp(n, cap);
}

size_t rz__format_out_of_range(int how, const char *entry, uint64_t index, uint64_t user_bytes, int64_t first,
                               int64_t last, const char *driver_answer, char *out, size_t cap) {
    int n = snprintf(out, cap,
                     "redzone: %s %s of alloc#%llu: bytes [%lld..=%lld] %s by %s (user_bytes=%llu); nothing %s, %s "
                     "returned as without redzone",
                     how == RZ_BOUNDS_SET ? "memset" : "copy", first < 0 ? "before the start" : "past the end",
                     (unsigned long long)index, (long long)first, (long long)last, how == RZ_BOUNDS_READ ? "read" : "written",
                     entry, (unsigned long long)user_bytes, how == RZ_BOUNDS_SET ? "set" : "copied", driver_answer);
    return clamp(n, cap);
}

size_t rz__format_refusal(const rz_refusal_t *r, const char *driver_answer, char *out, size_t cap) {
    char entry[sizeof r->entry + 1]; /* a record read from a program: its name may lack its NUL */
    memcpy(entry, r->entry, sizeof r->entry);
    entry[sizeof r->entry] = '\0';
    if (r->how >= RZ_REFUSED_DOUBLE_FREE)
        return rz__format_bad_free_kind(r, driver_answer, out, cap);
    if (r->how == RZ_REFUSED_FREE)
        return rz__format_bad_free(r->addr, r->index, r->user_bytes, 0 - (uint64_t)r->first, driver_answer, out, cap);
    return rz__format_out_of_range(r->how, entry, r->index, r->user_bytes, r->first, r->last, driver_answer, out, cap);
}

const char *rz__cu_result_name(int r) {
    switch (r) {
#define RZ_CU_NAME_CASE(n, value)                                                                            \
    case value:                                                                                              \
        return #n;
        RZCU_RESULTS(RZ_CU_NAME_CASE)
#undef RZ_CU_NAME_CASE
    default:
        return "CUDA_ERROR_(unknown)";
    }
}
