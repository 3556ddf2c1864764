/*
 * The program's copies and memsets against its sizes (copy_check.c).
 */
#ifndef REDZONE_COPY_CHECK_H
#define REDZONE_COPY_CHECK_H

#include "common.h"
#include "format.h"
#include "options.h"
#include "state.h"


/* Whether a copy or memset could reach a band: bands are on and some allocation is live (two loads). */
static inline int rz__bounds_armed(void) {
    const rz_options_t *o = rz__options();
    return (o->pad_bytes | o->front_bytes) &&
           atomic_load_explicit(&RZ_STATE.counters[RZ_C_current_mapped_bytes], memory_order_relaxed) != 0;
}

/* The device range [p, p + n) that entry point `entry` touches (how: RZ_BOUNDS_*) starts in a padded zone's
 * block and leaves the program's buffer (or starts in a band), where the driver without redzone would refuse
 * it: report it, count a violation and return 1; the caller returns CUDA_ERROR_INVALID_VALUE without calling
 * the driver. 0 otherwise (the driver judges it). */
int rz__bounds_check(const char *entry, int how, rz_devptr_t p, uint64_t n);

/* Under the registry lock: the zone whose padded block the driver says starts at base (its front band first,
 * when front bands are on) or, for a guard-page zone, whose mapping holds p; NULL when none. */
const rz_zone_node_t *rz__zone_of_block(rz_devptr_t base, rz_devptr_t p);

/* Pure: the bytes one side of a pitched copy touches, `depth` layers of `layer_rows` rows (`height` of them
 * copied) of `width` bytes, each row `pitch` bytes on, starting at column x, row y, layer z of base: 1 and
 * [*start, *start + *bytes), or 0 when it touches nothing or the driver refuses it by itself (overflow,
 * overlapping rows or layers). */
int rz__pitched_extent(uint64_t base, uint64_t x, uint64_t y, uint64_t z, uint64_t pitch, uint64_t layer_rows,
                       uint64_t width, uint64_t height, uint64_t depth, uint64_t *start, uint64_t *bytes);

/* The same for the source (dst 0) or destination (dst 1) of a CUDA_MEMCPY2D / CUDA_MEMCPY3D(_PEER); 0 also
 * when that side is host memory or an array. */
int rz__memcpy2d_extent(const rzcu_memcpy2d *d, int dst, uint64_t *start, uint64_t *bytes);

int rz__memcpy3d_extent(const rzcu_memcpy3d *d, int dst, uint64_t *start, uint64_t *bytes);

/* Pure: whether [p, p + n) (n > 0, not wrapping) leaves the buffer [ptr, ptr + user_bytes); if so the bytes
 * outside it as the report gives them: offsets from the end ([0..=7]: the 8 bytes after it), or for a range
 * that starts before the buffer, negative distances back from its start, the farthest first. */
int rz__outside_user_range(uint64_t ptr, uint64_t user_bytes, uint64_t p, uint64_t n, int64_t *first, int64_t *last);

#endif /* REDZONE_COPY_CHECK_H */
