/*
 * The emulated driver's 2D and 3D copies: cuMemcpy2D_v2, cuMemcpy2DUnaligned_v2, cuMemcpy2DAsync_v2,
 * cuMemcpy3D_v2, cuMemcpy3DAsync_v2 and their per-thread forms, from CUDA_MEMCPY2D / CUDA_MEMCPY3D
 * descriptors (cuda_emu.h). Each side is host, device or unified memory (unified: device when the address
 * lies in the emulated device range, host otherwise); the emulator has no CUDA arrays, so an array side is
 * CUDA_ERROR_NOT_SUPPORTED. As the driver documents: a pitch holds the row from its X offset and is at most
 * the device's MAX_PITCH, a 3D slice height holds the rows from its Y offset (it may be 0 for one slice), the
 * LODs are 0 and the reserved pointers NULL. Stricter than the documentation, as for the other copies: a
 * device side lies, from its first to its last byte, in one live allocation (written: read-write), device
 * memory is not named host memory nor the reverse, host pointers are not NULL. Anything else is
 * CUDA_ERROR_INVALID_VALUE and copies nothing. A copy with nothing to copy is CUDA_SUCCESS. The copy itself is one operation of the stream engine (OP_COPY3D),
 * ordered like cuMemcpy*Async; the synchronous forms wait for it, and so does an asynchronous copy from
 * device memory into pageable host memory (emu_copy_waits). Also the batch of 3D copies between pointers,
 * cuMemcpy3DBatchAsync (below).
 */
#include <stdlib.h>
#include <string.h>

#include "emu_engine.h"

#define MAX_PITCH 2147483647u /* CU_DEVICE_ATTRIBUTE_MAX_PITCH (emu_device.c's attribute table) */

/* One side of a copy, from either descriptor. */
struct side {
    unsigned type;
    uintptr_t base; /* srcHost/srcDevice (dstHost/dstDevice) by type */
    size_t x, y, z, pitch, height, lod;
    const void *reserved;
};

/* The type alone: NOT_SUPPORTED for arrays, INVALID_VALUE for unknown types. */
static rzcu_result check_type(unsigned type)
{
    if (type == CUDA_EMU_MEMORYTYPE_ARRAY)
        return RZCUDA_ERROR_NOT_SUPPORTED;
    if (type != CUDA_EMU_MEMORYTYPE_HOST && type != CUDA_EMU_MEMORYTYPE_DEVICE && type != CUDA_EMU_MEMORYTYPE_UNIFIED)
        return RZCUDA_ERROR_INVALID_VALUE;
    return RZCUDA_SUCCESS;
}

/* a * b + c without overflow, or false. */
static bool mul_add(size_t a, size_t b, size_t c, size_t *out)
{
    if (b && a > (SIZE_MAX - c) / b)
        return false;
    *out = a * b + c;
    return true;
}

/*
 * Validates one side of a w x h x d copy (d == 1 for 2D): its first byte (*start), the bytes from there to
 * its last (*extent) and whether it is device memory. three_d: the slice height, LOD and reserved fields
 * count.
 */
static bool check_side(const struct side *sd, size_t w, size_t h, size_t d, bool three_d, uintptr_t *start,
                       size_t *extent, bool *device)
{
    if (sd->pitch > MAX_PITCH || w > sd->pitch || sd->x > sd->pitch - w)
        return false;
    size_t rows_before = sd->y, rows_between = h - 1; /* rows from base to start; start row to last row */
    if (three_d) {
        if (sd->lod != 0 || sd->reserved != NULL)
            return false;
        if ((d > 1 || sd->height != 0) && (sd->height < h || sd->y > sd->height - h))
            return false;
        if (!mul_add(sd->z, sd->height, sd->y, &rows_before) || !mul_add(d - 1, sd->height, h - 1, &rows_between))
            return false;
    }
    size_t off, span;
    if (!mul_add(rows_before, sd->pitch, sd->x, &off) || !mul_add(rows_between, sd->pitch, w, &span))
        return false;
    if (sd->base == 0 || off > UINTPTR_MAX - sd->base || span > UINTPTR_MAX - (sd->base + off))
        return false;
    *start = sd->base + off;
    *extent = span;
    bool in_device_range = emu_mem_is_device_address(sd->base);
    if (sd->type == CUDA_EMU_MEMORYTYPE_HOST && in_device_range)
        return false; /* device memory named as host memory */
    *device = sd->type == CUDA_EMU_MEMORYTYPE_DEVICE || (sd->type == CUDA_EMU_MEMORYTYPE_UNIFIED && in_device_range);
    return true;
}

static rzcu_result do_copy_box(const struct side *src, const struct side *dst, size_t w, size_t h, size_t d,
                               bool three_d, bool async, rzcu_stream hstream, bool per_thread)
{
    struct CUctx_st *c;
    CHECK(emu_current_ctx(&c));
    struct CUstream_st *s;
    CHECK(emu_resolve_stream(async ? hstream : NULL, per_thread, c, &s));
    CHECK(check_type(src->type));
    CHECK(check_type(dst->type));
    if (w == 0 || h == 0 || d == 0)
        return RZCUDA_SUCCESS;
    uintptr_t sstart, dstart;
    size_t sext, dext;
    bool sdev, ddev;
    if (!check_side(src, w, h, d, three_d, &sstart, &sext, &sdev) ||
        !check_side(dst, w, h, d, three_d, &dstart, &dext, &ddev))
        return RZCUDA_ERROR_INVALID_VALUE;
    if ((sdev && !emu_mem_range_ok((rzcu_deviceptr)sstart, sext)) ||
        (ddev && !emu_mem_range_writable((rzcu_deviceptr)dstart, dext)))
        return RZCUDA_ERROR_INVALID_VALUE;
    if (ddev)
        emu_trace_write((rzcu_deviceptr)dstart, dext); /* before it runs: a queued copy may run on the worker */
    struct op *op = emu_op_new(s->ctx, OP_COPY3D);
    if (!op)
        return RZCUDA_ERROR_OUT_OF_MEMORY;
    op->dst = (void *)dstart;
    op->src = (const void *)sstart;
    op->box = (struct copy_box){w, h, d, src->pitch, src->pitch * src->height, dst->pitch, dst->pitch * dst->height};
    bool wait = emu_copy_waits(async, sdev && !ddev, (const void *)dstart, dext);
    rzcu_result r = emu_submit(s, op, wait);
    return r == RZCUDA_SUCCESS && wait ? emu_ctx_error(s->ctx) : r; /* a waited copy returns a fault's error */
}

static rzcu_result copy_2d(const cuda_emu_memcpy2d_t *p, bool async, rzcu_stream s, bool per_thread)
{
    if (!p)
        return RZCUDA_ERROR_INVALID_VALUE;
    struct side src = {p->srcMemoryType, p->srcMemoryType == CUDA_EMU_MEMORYTYPE_HOST ? (uintptr_t)p->srcHost
                                                                                    : (uintptr_t)p->srcDevice,
                       p->srcXInBytes, p->srcY, 0, p->srcPitch, 0, 0, NULL};
    struct side dst = {p->dstMemoryType, p->dstMemoryType == CUDA_EMU_MEMORYTYPE_HOST ? (uintptr_t)p->dstHost
                                                                                    : (uintptr_t)p->dstDevice,
                       p->dstXInBytes, p->dstY, 0, p->dstPitch, 0, 0, NULL};
    return do_copy_box(&src, &dst, p->WidthInBytes, p->Height, 1, false, async, s, per_thread);
}

static rzcu_result copy_3d(const cuda_emu_memcpy3d_t *p, bool async, rzcu_stream s, bool per_thread)
{
    if (!p)
        return RZCUDA_ERROR_INVALID_VALUE;
    struct side src = {p->srcMemoryType, p->srcMemoryType == CUDA_EMU_MEMORYTYPE_HOST ? (uintptr_t)p->srcHost
                                                                                    : (uintptr_t)p->srcDevice,
                       p->srcXInBytes, p->srcY, p->srcZ, p->srcPitch, p->srcHeight, p->srcLOD, p->srcContext};
    struct side dst = {p->dstMemoryType, p->dstMemoryType == CUDA_EMU_MEMORYTYPE_HOST ? (uintptr_t)p->dstHost
                                                                                    : (uintptr_t)p->dstDevice,
                       p->dstXInBytes, p->dstY, p->dstZ, p->dstPitch, p->dstHeight, p->dstLOD, p->dstContext};
    return do_copy_box(&src, &dst, p->WidthInBytes, p->Height, p->Depth, true, async, s, per_thread);
}

/* cuMemcpy2D may refuse intra-device pitches that cuMemAllocPitch would not give (the documentation does not
 * say which); cuMemcpy2DUnaligned never does. The emulator refuses none: both run the same copy. */
#define COPY_SYNC(name, kind, desc_t, per_thread)                                                            \
    EMU_API rzcu_result name(const desc_t *copy)                                                             \
    {                                                                                                        \
        ENTER(name);                                                                                         \
        return copy_##kind(copy, false, NULL, per_thread);                                                   \
    }
#define COPY_ASYNC(name, kind, desc_t, per_thread)                                                           \
    EMU_API rzcu_result name(const desc_t *copy, rzcu_stream s)                                              \
    {                                                                                                        \
        ENTER(name);                                                                                         \
        return copy_##kind(copy, true, s, per_thread);                                                       \
    }

COPY_SYNC(cuMemcpy2D_v2, 2d, cuda_emu_memcpy2d_t, false)
COPY_SYNC(cuMemcpy2D_v2_ptds, 2d, cuda_emu_memcpy2d_t, true)
COPY_SYNC(cuMemcpy2DUnaligned_v2, 2d, cuda_emu_memcpy2d_t, false)
COPY_SYNC(cuMemcpy2DUnaligned_v2_ptds, 2d, cuda_emu_memcpy2d_t, true)
COPY_ASYNC(cuMemcpy2DAsync_v2, 2d, cuda_emu_memcpy2d_t, false)
COPY_ASYNC(cuMemcpy2DAsync_v2_ptsz, 2d, cuda_emu_memcpy2d_t, true)
COPY_SYNC(cuMemcpy3D_v2, 3d, cuda_emu_memcpy3d_t, false)
COPY_SYNC(cuMemcpy3D_v2_ptds, 3d, cuda_emu_memcpy3d_t, true)
COPY_ASYNC(cuMemcpy3DAsync_v2, 3d, cuda_emu_memcpy3d_t, false)
COPY_ASYNC(cuMemcpy3DAsync_v2_ptsz, 3d, cuda_emu_memcpy3d_t, true)

_Static_assert(sizeof(cuda_emu_memcpy2d_t) == 128, "CUDA_MEMCPY2D_v2 layout");
_Static_assert(sizeof(cuda_emu_memcpy3d_t) == 200, "CUDA_MEMCPY3D_v2 layout");

/* ------------------------------------------------------------------------------------------------------ */
/*
 * cuMemcpy3DBatchAsync (CUDA 12.8 with failIdx, CUDA 13 without): a batch of 3D copies between pointer
 * operands, each its own source access order and flags. As for cuMemcpyBatchAsync: the legacy NULL stream is
 * refused, every operation is validated before anything is queued, an error that concerns one operation sets
 * *fail_idx to its index (any other error: SIZE_MAX), and the batch is one operation of the stream engine
 * (OP_BATCH, its rows as items), queued whatever the host memory. A pointer operand is device memory when it
 * lies in the emulated device range, host memory otherwise; its rows are rowLength bytes apart and its layers
 * layerHeight rows apart (0: tightly packed by the extent, else at least the extent's width or height). CUDA
 * arrays: CUDA_ERROR_NOT_SUPPORTED, as for the 3D copies.
 */

/* One pointer operand of a w x h x d copy: its first byte, its row and layer strides, whether it is device
 * memory. */
struct operand {
    uintptr_t ptr;
    size_t row, layer; /* bytes from one row (layer) to the next */
    size_t extent;     /* bytes from the first to the last byte */
    bool device;
};

static rzcu_result check_operand(const rzcu_memcpy3d_operand *o, const rzcu_extent3d *e, bool write,
                                 struct operand *out)
{
    if (o->type == RZCU_MEMCPY_OPERAND_TYPE_ARRAY)
        return RZCUDA_ERROR_NOT_SUPPORTED;
    if (o->type != RZCU_MEMCPY_OPERAND_TYPE_POINTER)
        return RZCUDA_ERROR_INVALID_VALUE;
    size_t rl = o->op.ptr.rowLength ? o->op.ptr.rowLength : e->width;
    size_t lh = o->op.ptr.layerHeight ? o->op.ptr.layerHeight : e->height;
    size_t rows, span;
    if (rl < e->width || lh < e->height || !mul_add(e->depth - 1, lh, e->height - 1, &rows) ||
        !mul_add(rows, rl, e->width, &span))
        return RZCUDA_ERROR_INVALID_VALUE;
    out->layer = e->depth > 1 ? lh * rl : 0; /* no overflow: within the span when there is a second layer */
    uintptr_t p = (uintptr_t)o->op.ptr.ptr;
    out->ptr = p;
    out->row = rl;
    out->extent = span;
    out->device = emu_mem_is_device_address(p);
    if (out->device)
        return (write ? emu_mem_range_writable(p, span) : emu_mem_range_ok(p, span)) ? RZCUDA_SUCCESS
                                                                                     : RZCUDA_ERROR_INVALID_VALUE;
    return p == 0 || span - 1 > UINTPTR_MAX - p ? RZCUDA_ERROR_INVALID_VALUE : RZCUDA_SUCCESS;
}

static rzcu_result check_op(const rzcu_memcpy3d_batch_op *op, struct operand *src, struct operand *dst)
{
    unsigned order = op->srcAccessOrder;
    if (order != RZCU_MEMCPY_SRC_ACCESS_ORDER_STREAM && order != RZCU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL &&
        order != RZCU_MEMCPY_SRC_ACCESS_ORDER_ANY)
        return RZCUDA_ERROR_INVALID_VALUE;
    if (op->flags & ~1u) /* CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE */
        return RZCUDA_ERROR_INVALID_VALUE;
    if (op->extent.width == 0 || op->extent.height == 0 || op->extent.depth == 0)
        return RZCUDA_ERROR_INVALID_VALUE; /* "must not be 0" */
    rzcu_result r = check_operand(&op->src, &op->extent, false, src);
    return r != RZCUDA_SUCCESS ? r : check_operand(&op->dst, &op->extent, true, dst);
}

/* How an operation is cut into batch items: rows, unless both sides are tightly packed rows (then layers, or the
 * whole copy when the layers are tightly packed too). */
struct pieces {
    size_t layers, rows; /* items per operation: layers x rows */
    size_t bytes;        /* each */
};

static struct pieces pieces_of(const rzcu_extent3d *e, const struct operand *s, const struct operand *d)
{
    /* No overflow: the checked extent of each side holds every row, so depth x height x width fits. */
    if (s->row != e->width || d->row != e->width)
        return (struct pieces){e->depth, e->height, e->width};
    if (e->depth > 1 && (s->layer != e->width * e->height || d->layer != e->width * e->height))
        return (struct pieces){e->depth, 1, e->width * e->height};
    return (struct pieces){1, 1, e->width * e->height * e->depth};
}

static rzcu_result do_batch3d(size_t count, const rzcu_memcpy3d_batch_op *ops, size_t *fail_idx,
                              unsigned long long flags, rzcu_stream hstream, bool per_thread)
{
    struct CUctx_st *c;
    struct CUstream_st *s;
    CHECK(emu_batch_stream(hstream, per_thread, fail_idx, &c, &s));
    if (count == 0 || !ops || flags != 0) /* "flags for future use, must be zero now" */
        return RZCUDA_ERROR_INVALID_VALUE;
    size_t nitems = 0;
    for (size_t i = 0; i < count; i++) {
        struct operand src, dst;
        size_t n = 0;
        rzcu_result r = check_op(&ops[i], &src, &dst);
        if (r == RZCUDA_SUCCESS) {
            struct pieces p = pieces_of(&ops[i].extent, &src, &dst);
            if (__builtin_add_overflow(nitems, p.layers * p.rows, &n))
                r = RZCUDA_ERROR_OUT_OF_MEMORY;
        }
        if (r != RZCUDA_SUCCESS) {
            if (fail_idx)
                *fail_idx = i;
            return r;
        }
        nitems = n;
    }
    struct op *op = emu_op_new(c, OP_BATCH);
    struct batch_item *items = op ? calloc(nitems, sizeof *items) : NULL;
    if (!items) {
        if (op)
            emu_free_op(op);
        return RZCUDA_ERROR_OUT_OF_MEMORY;
    }
    op->items = items;
    op->nitems = nitems;
    size_t k = 0;
    for (size_t i = 0; i < count; i++) {
        struct operand src, dst;
        (void)check_op(&ops[i], &src, &dst); /* validated above: fills the operands again */
        struct pieces p = pieces_of(&ops[i].extent, &src, &dst);
        bool snapshot = ops[i].srcAccessOrder == RZCU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL;
        if (dst.device)
            emu_trace_write((rzcu_deviceptr)dst.ptr, dst.extent); /* before it runs: it may run on the worker */
        for (size_t z = 0; z < p.layers; z++)
            for (size_t y = 0; y < p.rows; y++, k++) {
                items[k] = (struct batch_item){(void *)(dst.ptr + z * dst.layer + y * dst.row),
                                               (const void *)(src.ptr + z * src.layer + y * src.row), p.bytes, NULL};
                if (snapshot) {
                    items[k].snapshot = malloc(p.bytes);
                    if (!items[k].snapshot) {
                        emu_free_op(op);
                        return RZCUDA_ERROR_OUT_OF_MEMORY;
                    }
                    memcpy(items[k].snapshot, items[k].src, p.bytes);
                }
            }
    }
    return emu_submit(s, op, false);
}

EMU_API rzcu_result cuMemcpy3DBatchAsync_v2(size_t count, rzcu_memcpy3d_batch_op *ops, unsigned long long flags,
                                            rzcu_stream s)
{
    ENTER(cuMemcpy3DBatchAsync_v2);
    return do_batch3d(count, ops, NULL, flags, s, false);
}

EMU_API rzcu_result cuMemcpy3DBatchAsync_v2_ptsz(size_t count, rzcu_memcpy3d_batch_op *ops, unsigned long long flags,
                                                 rzcu_stream s)
{
    ENTER(cuMemcpy3DBatchAsync_v2_ptsz);
    return do_batch3d(count, ops, NULL, flags, s, true);
}

EMU_API rzcu_result cuMemcpy3DBatchAsync(size_t count, rzcu_memcpy3d_batch_op *ops, size_t *fail_idx,
                                         unsigned long long flags, rzcu_stream s)
{
    ENTER(cuMemcpy3DBatchAsync);
    return do_batch3d(count, ops, fail_idx, flags, s, false);
}

EMU_API rzcu_result cuMemcpy3DBatchAsync_ptsz(size_t count, rzcu_memcpy3d_batch_op *ops, size_t *fail_idx,
                                              unsigned long long flags, rzcu_stream s)
{
    ENTER(cuMemcpy3DBatchAsync_ptsz);
    return do_batch3d(count, ops, fail_idx, flags, s, true);
}
