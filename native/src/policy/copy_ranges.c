/*
 * Which device ranges each interposed copy and memset touches, from its arguments: the bytes of a 1D copy
 * or memset, the extent of each device side of a 2D/3D descriptor copy (first row to last), each copy of a
 * batch, and each pointer operand of a 3D batch (first row to the last row of its last layer). Each range
 * goes to rz__bounds_check (copy_check.c), which reports one that leaves its buffer where the driver would let
 * it; hooks.c's writer wrappers then return the driver's answer without redzone. Both sides of a copy are
 * judged, so a copy wrong at both ends is reported at both (the source first). A batch stops at its first
 * bad copy and names it in failIdx, as the driver does.
 */
#include <stdarg.h>

#include "copy_ranges.h"
#include "copy_check.h"

int rz__bounds_both(const char *e, rzcu_deviceptr dst, rzcu_deviceptr src, size_t n) {
    int bad = rz__bounds_check(e, RZ_BOUNDS_READ, src, n);
    bad |= rz__bounds_check(e, RZ_BOUNDS_WRITE, dst, n);
    return bad;
}

int rz__bounds_set_1d(const char *e, rzcu_deviceptr dst, size_t n, unsigned elem) {
    uint64_t bytes;
    return !__builtin_mul_overflow(n, elem, &bytes) && rz__bounds_check(e, RZ_BOUNDS_SET, dst, bytes);
}

int rz__bounds_set_2d(const char *e, rzcu_deviceptr dst, size_t pitch, size_t width, size_t height, unsigned elem) {
    uint64_t row, start, bytes;
    return !__builtin_mul_overflow(width, elem, &row) &&
           rz__pitched_extent(dst, 0, 0, 0, pitch, 0, row, height, 1, &start, &bytes) &&
           rz__bounds_check(e, RZ_BOUNDS_SET, start, bytes);
}

int rz__bounds_copy_2d(const char *e, const void *desc) {
    const rzcu_memcpy2d *d = desc;
    uint64_t start, bytes;
    int bad = 0;
    if (d && rz__memcpy2d_extent(d, 0, &start, &bytes))
        bad |= rz__bounds_check(e, RZ_BOUNDS_READ, start, bytes);
    if (d && rz__memcpy2d_extent(d, 1, &start, &bytes))
        bad |= rz__bounds_check(e, RZ_BOUNDS_WRITE, start, bytes);
    return bad;
}

int rz__bounds_copy_3d(const char *e, const void *desc) {
    const rzcu_memcpy3d *d = desc;
    uint64_t start, bytes;
    int bad = 0;
    if (d && rz__memcpy3d_extent(d, 0, &start, &bytes))
        bad |= rz__bounds_check(e, RZ_BOUNDS_READ, start, bytes);
    if (d && rz__memcpy3d_extent(d, 1, &start, &bytes))
        bad |= rz__bounds_check(e, RZ_BOUNDS_WRITE, start, bytes);
    return bad;
}

/* cuMemcpyBatchAsync: (attrs, attrs_idxs, num_attrs, fail_idx, stream) before CUDA 13, (..., num_attrs,
 * stream) since. The first bad copy's index goes to fail_idx, as the driver reports a bad copy. */
int rz__bounds_batch(const char *e, int since, rzcu_deviceptr *dsts, rzcu_deviceptr *srcs, size_t *sizes,
                     size_t count, ...) {
    if (dsts == NULL || srcs == NULL || sizes == NULL)
        return 0;
    for (size_t i = 0; i < count; i++) {
        if (!rz__bounds_both(e, dsts[i], srcs[i], sizes[i]))
            continue;
        if (since < 13000) {
            va_list ap;
            va_start(ap, count);
            (void)va_arg(ap, void *);   /* attrs */
            (void)va_arg(ap, size_t *); /* attrs_idxs */
            (void)va_arg(ap, size_t);   /* num_attrs */
            size_t *fail_idx = va_arg(ap, size_t *);
            va_end(ap);
            if (fail_idx)
                *fail_idx = i;
        }
        return 1;
    }
    return 0;
}

/* Whether the driver refuses this operation of a 3D batch by itself, whatever its memory (its documented
 * rules: a source access order, no unknown flag, no zero extent, a row length and layer height, when given,
 * that hold the extent). Such an operation, and everything after it, is the driver's to judge: it refuses
 * the batch at that operation as it would without redzone. */
static int op_refused_by_driver(const rzcu_memcpy3d_batch_op *op) {
    const rzcu_memcpy3d_operand *sides[2] = {&op->src, &op->dst};
    if (op->srcAccessOrder < RZCU_MEMCPY_SRC_ACCESS_ORDER_STREAM ||
        op->srcAccessOrder > RZCU_MEMCPY_SRC_ACCESS_ORDER_ANY || (op->flags & ~1u) || op->extent.width == 0 ||
        op->extent.height == 0 || op->extent.depth == 0)
        return 1;
    for (int k = 0; k < 2; k++) {
        const rzcu_memcpy3d_operand *o = sides[k];
        if (o->type != RZCU_MEMCPY_OPERAND_TYPE_POINTER && o->type != RZCU_MEMCPY_OPERAND_TYPE_ARRAY)
            return 1;
        if (o->type == RZCU_MEMCPY_OPERAND_TYPE_POINTER &&
            ((o->op.ptr.rowLength && o->op.ptr.rowLength < op->extent.width) ||
             (o->op.ptr.layerHeight && o->op.ptr.layerHeight < op->extent.height)))
            return 1;
    }
    return 0;
}

/* One operand of a 3D batch copy: a pointer's bytes, elements of one byte, rows rowLength apart and layers
 * layerHeight rows apart (0: tightly packed by the extent). An array operand is no buffer of the program's. */
static int operand_bad(const char *e, int how, const rzcu_memcpy3d_operand *o, const rzcu_extent3d *x) {
    if (o->type != RZCU_MEMCPY_OPERAND_TYPE_POINTER)
        return 0;
    uint64_t row = o->op.ptr.rowLength ? o->op.ptr.rowLength : x->width;
    uint64_t layer = o->op.ptr.layerHeight ? o->op.ptr.layerHeight : x->height;
    uint64_t start, bytes;
    return rz__pitched_extent(o->op.ptr.ptr, 0, 0, 0, row, layer, x->width, x->height, x->depth, &start, &bytes) &&
           rz__bounds_check(e, how, start, bytes);
}

/* cuMemcpy3DBatchAsync: (count, ops, fail_idx, flags, stream) before CUDA 13, (count, ops, flags, stream)
 * since. A call the driver refuses as a whole (call flags) is left to it. */
int rz__bounds_batch3d(const char *e, int since, size_t count, void *ops, ...) {
    const rzcu_memcpy3d_batch_op *op = ops;
    size_t *fail_idx = NULL;
    va_list ap;
    va_start(ap, ops);
    if (since < 13000)
        fail_idx = va_arg(ap, size_t *);
    unsigned long long flags = va_arg(ap, unsigned long long);
    va_end(ap);
    if (op == NULL || flags != 0)
        return 0;
    for (size_t i = 0; i < count && !op_refused_by_driver(&op[i]); i++) {
        int bad = operand_bad(e, RZ_BOUNDS_READ, &op[i].src, &op[i].extent);
        bad |= operand_bad(e, RZ_BOUNDS_WRITE, &op[i].dst, &op[i].extent);
        if (bad) {
            if (fail_idx)
                *fail_idx = i;
            return 1;
        }
    }
    return 0;
}
