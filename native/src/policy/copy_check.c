/*
 * The driver's own range check for the program's copies and memsets, against the program's sizes. The
 * driver sees padded blocks, so a copy or memset that runs from a buffer into its band (or starts in a band)
 * lies inside one allocation for it and succeeds, where without redzone it would be refused with
 * CUDA_ERROR_INVALID_VALUE. The interposed copies and memsets (hooks.c) ask here first, for each device range
 * they touch: such a range is reported (`copy past the end of alloc#N: ...`, counted as a violation, passed
 * to the __redzone_refused hook a debugger breaks on) and the call returns the driver's answer without
 * redzone, nothing done. Everything else goes to the driver as it
 * was, which judges it as it would without redzone.
 *
 * Cost: a range that starts at a buffer's own pointer (most copies) is one registry lookup; any other
 * address adds one cuMemGetAddressRange, whose answer (the padded block) names the zone. Nothing at all
 * while no padded zone is live (rz__bounds_armed).
 */
#include <stdio.h>

#include "common.h"
#include "copy_check.h"
#include "finding.h"
#include "format.h"
#include "guard_pages.h"
#include "memory.h"
#include "options.h"
#include "registry.h"
#include "report.h"
#include "state.h"
#include "stats.h"
#include "symbolize.h"

/* ---- extents (pure) ---------------------------------------------------------------------------------- */
int rz__pitched_extent(uint64_t base, uint64_t x, uint64_t y, uint64_t z, uint64_t pitch, uint64_t layer_rows,
                       uint64_t width, uint64_t height, uint64_t depth, uint64_t *start, uint64_t *bytes) {
    if (width == 0 || height == 0 || depth == 0)
        return 0; /* nothing touched */
    if ((height > 1 || depth > 1) && pitch < width)
        return 0; /* rows that overlap: the driver refuses the pitch itself */
    if (depth > 1 && layer_rows < height)
        return 0; /* layers that overlap: the same */
    uint64_t row, off, rows, span;
    /* first byte: base + (z * layer_rows + y) * pitch + x */
    if (__builtin_mul_overflow(z, layer_rows, &row) || __builtin_add_overflow(row, y, &row) ||
        __builtin_mul_overflow(row, pitch, &off) || __builtin_add_overflow(off, x, &off) ||
        __builtin_add_overflow(base, off, start))
        return 0;
    /* rows after the first one: (depth - 1) * layer_rows + height - 1, each pitch bytes on */
    if (__builtin_mul_overflow(depth - 1, layer_rows, &rows) || __builtin_add_overflow(rows, height - 1, &rows) ||
        __builtin_mul_overflow(rows, pitch, &span) || __builtin_add_overflow(span, width, bytes) ||
        *bytes - 1 > UINT64_MAX - *start)
        return 0;
    return 1;
}

/* Whether a side of a descriptor copy is device memory the wrappers check (an array or host memory is not). */
static int device_side(unsigned type) { return type == RZCU_MEMORYTYPE_DEVICE || type == RZCU_MEMORYTYPE_UNIFIED; }

int rz__memcpy2d_extent(const rzcu_memcpy2d *d, int dst, uint64_t *start, uint64_t *bytes) {
    if (dst)
        return device_side(d->dstMemoryType) &&
               rz__pitched_extent(d->dstDevice, d->dstXInBytes, d->dstY, 0, d->dstPitch, 0, d->WidthInBytes, d->Height,
                                  1, start, bytes);
    return device_side(d->srcMemoryType) && rz__pitched_extent(d->srcDevice, d->srcXInBytes, d->srcY, 0, d->srcPitch, 0,
                                                               d->WidthInBytes, d->Height, 1, start, bytes);
}

int rz__memcpy3d_extent(const rzcu_memcpy3d *d, int dst, uint64_t *start, uint64_t *bytes) {
    if (dst)
        return device_side(d->dstMemoryType) &&
               rz__pitched_extent(d->dstDevice, d->dstXInBytes, d->dstY, d->dstZ, d->dstPitch, d->dstHeight,
                                  d->WidthInBytes, d->Height, d->Depth, start, bytes);
    return device_side(d->srcMemoryType) &&
           rz__pitched_extent(d->srcDevice, d->srcXInBytes, d->srcY, d->srcZ, d->srcPitch, d->srcHeight,
                              d->WidthInBytes, d->Height, d->Depth, start, bytes);
}

int rz__outside_user_range(uint64_t ptr, uint64_t user_bytes, uint64_t p, uint64_t n, int64_t *first, int64_t *last) {
    uint64_t end = ptr + user_bytes, final = p + (n - 1); /* callers pass ranges that do not wrap */
    if (n == 0 || (p >= ptr && p < end && n <= end - p))
        return 0;
    if (p < ptr) { /* before the start: distances back from it, the farthest first */
        *first = -(int64_t)(ptr - p);
        *last = final < ptr ? -(int64_t)(ptr - final) : -1;
    } else {
        *first = (int64_t)((p > end ? p : end) - end);
        *last = (int64_t)(final - end);
    }
    return 1;
}

/* ---- the zone a range starts in ---------------------------------------------------------------------- */
const rz_zone_node_t *rz__zone_of_block(rz_devptr_t base, rz_devptr_t p) {
    const rz_zone_node_t *z = rz__registry_find(base);
    uint64_t front = rz__options()->front_bytes;
    if (z == NULL && front) {
        /* A front band: the driver's block starts that far before the program's pointer. */
        z = rz__registry_find(base + front);
        if (z && rz__zone_front(z) != front)
            z = NULL;
    }
    if (z == NULL && __atomic_load_n(&RZ_STATE.guard_live, __ATOMIC_RELAXED))
        z = rz__guard_zone_containing(p); /* the driver answered with the whole guard mapping */
    return z;
}

typedef struct {
    uint64_t index, ptr, user_bytes;
    uint64_t lo, hi; /* the block the driver holds for it: bands (or a guard mapping) included */
    uint32_t nframes;
    uint64_t frames[RZ_STACK_MAX];
} zone_view_t;

/* A zone whose block the driver sees larger than the program's buffer: the driver alone cannot judge
 * ranges in it. */
static int padded(const rz_zone_node_t *z) { return z->pad_bytes || z->front_units || (z->flags & RZ_ZONE_GUARD); }

/* Under the registry lock: copy what the report and the check need. */
static void view_of(const rz_zone_node_t *z, rz_devptr_t block, size_t block_bytes, zone_view_t *v) {
    v->index = z->index;
    v->ptr = z->ptr;
    v->user_bytes = z->user_bytes;
    v->lo = block;
    v->hi = block + block_bytes;
    v->nframes = 0;
    uint32_t n = 0;
    const uint64_t *stack = rz__registry_stack(z, &n);
    if (stack) {
        v->nframes = n < RZ_STACK_MAX ? n : RZ_STACK_MAX;
        memcpy(v->frames, stack, v->nframes * sizeof *stack);
    }
}

/* The zone whose driver block holds p, from the driver's own answer for p; 0 when p is in none of them (not
 * device memory, an unpadded buffer, memory redzone did not allocate). */
__attribute__((noinline)) static int zone_by_block(rz_devptr_t p, zone_view_t *v) {
    rz_devptr_t base = 0;
    size_t size = 0;
    if (!rz__dev_has_address_range() || rz__dev_address_range(&base, &size, p) != RZCUDA_SUCCESS)
        return 0;
    int found = 0;
    rz__registry_lock();
    const rz_zone_node_t *z = rz__zone_of_block(base, p);
    /* The zone's block must be the one the driver holds there now (not a zone whose context ended unseen). */
    if (z && padded(z) && ((z->flags & RZ_ZONE_GUARD) || size >= rz__zone_mapped_bytes(z))) {
        view_of(z, base, size, v);
        found = 1;
    }
    rz__registry_unlock();
    return found;
}

/* ---- the check ----------------------------------------------------------------------------------------- */
/* The line (and stacks), the count, then the __redzone_refused hook (judge.c) a debugger breaks on: called
 * with no lock held (the caller released the registry), so a debugger stopped there finds it free. */
__attribute__((cold, noinline)) static void report(const char *entry, int how, const zone_view_t *v, rz_devptr_t p,
                                                   uint64_t bytes, int64_t first, int64_t last) {
    rz_refusal_t r = {.index = v->index, .ptr = v->ptr, .user_bytes = v->user_bytes, .addr = p, .bytes = bytes,
                      .first = first, .last = last, .result = RZCUDA_ERROR_INVALID_VALUE, .how = (uint8_t)how};
    snprintf(r.entry, sizeof r.entry, "%s", entry);
    char line[512];
    rz__format_refusal(&r, rz__cu_name(RZCUDA_ERROR_INVALID_VALUE), line, sizeof line);
    uint64_t depth = rz__options()->stacks;
    void *frames[RZ_STACK_MAX];
    int n = depth ? rz__capture_stack(frames, depth < RZ_STACK_MAX ? (int)depth : RZ_STACK_MAX) : 0;
    rz_finding_t f = {.kind = RZ_FINDING_COPY_REFUSED, .alloc = v->index, .ptr = v->ptr, .user_bytes = v->user_bytes,
                      .pad = RZ_FINDING_NONE, .first = first, .last = last, .changed = RZ_FINDING_NONE,
                      .first_bad = RZ_FINDING_NONE, .addr = p, .bytes = bytes, .entry = entry, .text = line,
                      .alloc_frames = v->frames, .nalloc = v->nframes, .call_frames = frames,
                      .ncall = n > 0 ? (uint32_t)n : 0};
    int fate = rz__finding_admit(&f);
    if (fate == RZ_FINDING_SUPPRESSED)
        return; /* the copy is still refused: only its report and count are left out */
    rz__log_mute(fate != RZ_FINDING_REPORT);
    rz__log("%s", line);
    if (depth) {
        if (n > 0) {
            rz__log("  %s was called at:", entry);
            rz__symbolize_frames(frames, n);
        }
        if (v->nframes) {
            void *alloc[RZ_STACK_MAX];
            for (uint32_t i = 0; i < v->nframes; i++)
                alloc[i] = (void *)(uintptr_t)v->frames[i];
            rz__log("  alloc#%llu was allocated at:", (unsigned long long)v->index);
            rz__symbolize_frames(alloc, (int)v->nframes);
        }
    }
    rz__log_mute(0);
    rz__count(RZ_C_violations, 1); /* before the hook, so a debugger stopped there sees it counted */
    __redzone_refused(&r);
    rz__finding_done(fate);
}

int rz__bounds_check(const char *entry, int how, rz_devptr_t p, uint64_t n) {
    if (n == 0 || n - 1 > UINT64_MAX - p)
        return 0; /* nothing touched, or a range the driver refuses by itself */
    zone_view_t v;
    int known = 0, fits = 0;
    rz__registry_lock();
    const rz_zone_node_t *z = rz__registry_find(p);
    if (z) {
        known = padded(z);
        fits = n <= z->user_bytes; /* from the buffer's own pointer, within it: the common case */
    }
    rz__registry_unlock();
    if (z && (!known || fits))
        return 0;
    /* Another address, or a range that does not fit: the zone whose block the driver says holds p (which also
     * makes sure a zone found by its pointer is the allocation at p now). */
    if (!zone_by_block(p, &v) || p < v.lo || p >= v.hi)
        return 0;
    int64_t first, last;
    if (!rz__outside_user_range(v.ptr, v.user_bytes, p, n, &first, &last))
        return 0;
    report(entry, how, &v, p, n, first, last);
    return 1;
}
