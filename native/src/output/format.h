/*
 * The one formatter (format.c), shared with the gdb plugin through the view library.
 */
#ifndef REDZONE_FORMAT_H
#define REDZONE_FORMAT_H

#include "common.h"
#include "options.h"
#include "state.h"

/* A copy's source, its destination, a memset: the values rz_refusal_t.how takes (redzone.h). */
enum { RZ_BOUNDS_READ = RZ_REFUSED_READ, RZ_BOUNDS_WRITE = RZ_REFUSED_WRITTEN, RZ_BOUNDS_SET = RZ_REFUSED_SET };
size_t rz__format_violation(const rz_violation_t *v, char *out, size_t cap);

size_t rz__format_scan_summary(uint64_t checked, uint64_t violated, char *out, size_t cap);

size_t rz__format_zone_header(char *out, size_t cap);

size_t rz__format_zone_row(const rz_zone_node_t *z, char *out, size_t cap);

size_t rz__format_zone_json(const rz_zone_node_t *z, char *out, size_t cap);

size_t rz__format_counters(const uint64_t *counters, char *out, size_t cap);

size_t rz__format_counters_json(const uint64_t *counters, char *out, size_t cap);

/* A copy or memset refused for leaving alloc#index's buffer (how: RZ_BOUNDS_*; first < 0: before its start). */
size_t rz__format_out_of_range(int how, const char *entry, uint64_t index, uint64_t user_bytes, int64_t first,
                               int64_t last, const char *driver_answer, char *out, size_t cap);

/* The same line from the record passed to __redzone_refused (the gdb plugin formats it through the view). */
/* The bad-free lines but the front band's (rz_refusal_t.how >= RZ_REFUSED_DOUBLE_FREE). */
size_t rz__format_bad_free_kind(const rz_refusal_t *r, const char *driver_answer, char *out, size_t cap);

size_t rz__format_refusal(const rz_refusal_t *r, const char *driver_answer, char *out, size_t cap);

/* A CUresult's name from the table in cu.h, without asking a driver ("CUDA_ERROR_(unknown)" outside it). */
const char *rz__cu_result_name(int r);

/* A free of a pointer `before` bytes inside alloc#index's front band. */
size_t rz__format_bad_free(uint64_t ptr, uint64_t index, uint64_t user_bytes, uint64_t before, const char *driver_answer,
                           char *out, size_t cap);

/* The judge, pure: whether `bytes` band bytes of zone z differ from z->expected; if so fill *v (front: the
 * band before the pointer) and return 1. The library's scans and the debugger's memory scans both use it. */
int rz__band_violation(const rz_zone_node_t *z, const uint8_t *band, uint64_t bytes, int front, rz_violation_t *v);

/* The byte a zone with this index holds under a window rule (poison active: 0xEE inside, 0x00 outside). */
static inline uint8_t rz__window_byte(int poison_active, uint64_t lo, uint64_t hi, uint8_t fill, uint64_t index) {
    if (poison_active)
        return (index >= lo && index < hi) ? RZ_POISON_IN : RZ_POISON_OUT;
    return fill;
}

/* One frame of an allocation stack as the library prints it: "    #k 0x... in func+0xoff (file)", or without
 * " in func+0xoff" when func is NULL. */
size_t rz__format_frame(int k, uint64_t addr, const char *func, uint64_t off, const char *file, char *out, size_t cap);

/* Whether a frame belongs to redzone's own allocation path (function name, or the frame is in libredzone). */
static inline int rz__frame_is_ours(const char *func, int in_redzone_object) {
    return strncmp(func, "rz_", 3) == 0 || strncmp(func, "do_alloc", 8) == 0 || in_redzone_object;
}

/* The kernel-candidates line of a report for zone index `index`: launches after `since` still kept in
 * the ring that were made after the zone existed (0 when there are none). */
size_t rz__format_launch_candidates(const rz_launches_t *ring, uint64_t since, uint64_t index, char *out, size_t cap);

#endif /* REDZONE_FORMAT_H */
