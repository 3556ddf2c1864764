/*
 * The emulated driver's copy and memset entry points: cuMemsetD8 (the wider memsets: emu_memset.c), the 1D
 * copies (host to device, device to host, device to device, unified), cuEmuDeviceStore/Load, and the batched
 * copies, all submitted to the stream engine (emu_stream.c). 2D/3D copies and cuMemcpy3DBatchAsync:
 * emu_copy2d.c.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "emu_engine.h"
#include "rz_annotate.h"


/* ------------------------------------------------------------------------------------------------------ */
/* memset and copies */

enum dir { HTOD, DTOH, DTOD, HTOH /* cuMemcpy between two host addresses (unified addressing) */ };

static rzcu_result memop(struct CUstream_st *s, enum op_kind kind, void *dst, const void *src, size_t n,
                         unsigned char value, bool wait)
{
    struct op *op = emu_op_new(s->ctx, kind);
    if (!op)
        return RZCUDA_ERROR_OUT_OF_MEMORY;
    op->dst = dst;
    op->src = src;
    op->n = n;
    op->value = value;
    rzcu_result r = emu_submit(s, op, wait);
    return r == RZCUDA_SUCCESS && wait ? emu_ctx_error(s->ctx) : r; /* a synchronous copy waited for a fault */
}

/* As the driver documents ("for transfers from device memory to pageable host memory, the function will
 * return only once the copy has completed"), an asynchronous copy from device memory to pageable host memory
 * waits for the stream's earlier work and itself; into pinned memory it is queued like any other. */
bool emu_copy_waits(bool async, bool device_to_host, const void *host, size_t n)
{
    return !async || (device_to_host && !emu_host_is_pinned(host, n));
}

/* hstream is ignored when !async (the legacy stream, or the per-thread one for _ptds). */
static rzcu_result do_copy(enum dir dir, uintptr_t dst, uintptr_t src, size_t n, bool async, rzcu_stream hstream,
                           bool per_thread)
{
    struct CUctx_st *c;
    CHECK(emu_current_ctx(&c));
    struct CUstream_st *s;
    CHECK(emu_resolve_stream(async ? hstream : NULL, per_thread, c, &s));
    if (n == 0)
        return RZCUDA_SUCCESS;
    bool dst_ok = dir == DTOH || dir == HTOH ? dst != 0 : emu_mem_range_writable(dst, n);
    bool src_ok = dir == HTOD || dir == HTOH ? src != 0 : emu_mem_range_ok(src, n);
    if (!dst_ok || !src_ok)
        return RZCUDA_ERROR_INVALID_VALUE;
    if (dir == HTOD || dir == DTOD)
        emu_trace_write((rzcu_deviceptr)dst, n); /* before it runs: a queued copy may run on the worker */
    bool wait = emu_copy_waits(async, dir == DTOH, (const void *)dst, n);
    return memop(s, OP_COPY, (void *)dst, (const void *)src, n, 0, wait);
}

static rzcu_result do_memset(rzcu_deviceptr dst, unsigned char uc, size_t n, bool async, rzcu_stream hstream,
                             bool per_thread)
{
    struct CUctx_st *c;
    CHECK(emu_current_ctx(&c));
    struct CUstream_st *s;
    CHECK(emu_resolve_stream(async ? hstream : NULL, per_thread, c, &s));
    if (n == 0)
        return RZCUDA_SUCCESS;
    if (!emu_mem_range_writable(dst, n))
        return RZCUDA_ERROR_INVALID_VALUE;
    emu_trace_write(dst, n);
    return memop(s, OP_SET, (void *)(uintptr_t)dst, NULL, n, uc, !async);
}

EMU_API rzcu_result cuMemsetD8_v2(rzcu_deviceptr dst, unsigned char uc, size_t n)
{
    ENTER(cuMemsetD8_v2);
    return do_memset(dst, uc, n, false, NULL, false);
}

EMU_API rzcu_result cuMemsetD8_v2_ptds(rzcu_deviceptr dst, unsigned char uc, size_t n)
{
    ENTER(cuMemsetD8_v2_ptds);
    return do_memset(dst, uc, n, false, NULL, true);
}

EMU_API rzcu_result cuMemsetD8Async(rzcu_deviceptr dst, unsigned char uc, size_t n, rzcu_stream s)
{
    ENTER(cuMemsetD8Async);
    return do_memset(dst, uc, n, true, s, false);
}

EMU_API rzcu_result cuMemsetD8Async_ptsz(rzcu_deviceptr dst, unsigned char uc, size_t n, rzcu_stream s)
{
    ENTER(cuMemsetD8Async_ptsz);
    return do_memset(dst, uc, n, true, s, true);
}

#define COPY_ENTRY(name, dir, dst_t, src_t, async, per_thread)                                               \
    EMU_API rzcu_result name(dst_t dst, src_t src, size_t n)                                                 \
    {                                                                                                        \
        ENTER(name);                                                                                         \
        return do_copy(dir, (uintptr_t)dst, (uintptr_t)src, n, async, NULL, per_thread);                    \
    }
#define COPY_ASYNC_ENTRY(name, dir, dst_t, src_t, per_thread)                                                \
    EMU_API rzcu_result name(dst_t dst, src_t src, size_t n, rzcu_stream s)                                  \
    {                                                                                                        \
        ENTER(name);                                                                                         \
        return do_copy(dir, (uintptr_t)dst, (uintptr_t)src, n, true, s, per_thread);                         \
    }

COPY_ENTRY(cuMemcpyHtoD_v2, HTOD, rzcu_deviceptr, const void *, false, false)
COPY_ENTRY(cuMemcpyHtoD_v2_ptds, HTOD, rzcu_deviceptr, const void *, false, true)
COPY_ENTRY(cuMemcpyDtoH_v2, DTOH, void *, rzcu_deviceptr, false, false)
COPY_ENTRY(cuMemcpyDtoH_v2_ptds, DTOH, void *, rzcu_deviceptr, false, true)
/* cuMemcpy/cuMemcpyAsync (unified addressing): the direction from where each address lies. */
static enum dir unified_dir(rzcu_deviceptr dst, rzcu_deviceptr src)
{
    bool d = emu_mem_is_device_address((uintptr_t)dst), s = emu_mem_is_device_address((uintptr_t)src);
    return d ? (s ? DTOD : HTOD) : (s ? DTOH : HTOH);
}

#define UNIFIED_ENTRY(name, per_thread)                                                                      \
    EMU_API rzcu_result name(rzcu_deviceptr dst, rzcu_deviceptr src, size_t n)                               \
    {                                                                                                        \
        ENTER(name);                                                                                         \
        return do_copy(unified_dir(dst, src), (uintptr_t)dst, (uintptr_t)src, n, false, NULL, per_thread);   \
    }
#define UNIFIED_ASYNC_ENTRY(name, per_thread)                                                                \
    EMU_API rzcu_result name(rzcu_deviceptr dst, rzcu_deviceptr src, size_t n, rzcu_stream s)                \
    {                                                                                                        \
        ENTER(name);                                                                                         \
        return do_copy(unified_dir(dst, src), (uintptr_t)dst, (uintptr_t)src, n, true, s, per_thread);       \
    }
UNIFIED_ENTRY(cuMemcpy, false)
UNIFIED_ENTRY(cuMemcpy_ptds, true)
UNIFIED_ASYNC_ENTRY(cuMemcpyAsync, false)
UNIFIED_ASYNC_ENTRY(cuMemcpyAsync_ptsz, true)
COPY_ENTRY(cuMemcpyDtoD_v2, DTOD, rzcu_deviceptr, rzcu_deviceptr, false, false)
COPY_ENTRY(cuMemcpyDtoD_v2_ptds, DTOD, rzcu_deviceptr, rzcu_deviceptr, false, true)
COPY_ASYNC_ENTRY(cuMemcpyHtoDAsync_v2, HTOD, rzcu_deviceptr, const void *, false)
COPY_ASYNC_ENTRY(cuMemcpyHtoDAsync_v2_ptsz, HTOD, rzcu_deviceptr, const void *, true)
COPY_ASYNC_ENTRY(cuMemcpyDtoHAsync_v2, DTOH, void *, rzcu_deviceptr, false)
COPY_ASYNC_ENTRY(cuMemcpyDtoHAsync_v2_ptsz, DTOH, void *, rzcu_deviceptr, true)
COPY_ASYNC_ENTRY(cuMemcpyDtoDAsync_v2, DTOD, rzcu_deviceptr, rzcu_deviceptr, false)
COPY_ASYNC_ENTRY(cuMemcpyDtoDAsync_v2_ptsz, DTOD, rzcu_deviceptr, rzcu_deviceptr, true)

/*
 * Test programs' stand-ins for device code's stores and loads (cuda_emu.h): the legacy stream's synchronous
 * host-to-device and device-to-host copies, with the driver's checks, under names no interposer wraps. No call
 * counting, no injected failures: they are not driver entry points.
 */
rzcu_result cuEmuDeviceStore(rzcu_deviceptr dst, const void *src, size_t n)
{
    if (!emu_initialized())
        return RZCUDA_ERROR_NOT_INITIALIZED;
    emu_trace_enter(EP_cuMemcpyHtoD_v2, __builtin_return_address(0)); /* the trace names the caller */
    emu_waits_enter(-1); /* not an entry point: its wait counts for none */
    return do_copy(HTOD, (uintptr_t)dst, (uintptr_t)src, n, false, NULL, false);
}

rzcu_result cuEmuDeviceLoad(void *dst, rzcu_deviceptr src, size_t n)
{
    if (!emu_initialized())
        return RZCUDA_ERROR_NOT_INITIALIZED;
    emu_trace_enter(EP_cuMemcpyDtoH_v2, __builtin_return_address(0));
    emu_waits_enter(-1);
    return do_copy(DTOH, (uintptr_t)dst, (uintptr_t)src, n, false, NULL, false);
}

/*
 * Batched copies (CUDA 12.8 with failIdx, CUDA 13 without). Everything is validated before anything is
 * queued; the direction of each copy follows from its pointers (emulated device range or host). A
 * per-copy error sets *fail_idx to the copy's index, any other error to SIZE_MAX.
 */
rzcu_result emu_batch_stream(rzcu_stream hstream, bool per_thread, size_t *fail_idx, struct CUctx_st **ctx,
                             struct CUstream_st **out)
{
    if (fail_idx)
        *fail_idx = SIZE_MAX;
    CHECK(emu_current_ctx(ctx));
    /* "Must not be legacy NULL stream." */
    if (hstream == RZCU_STREAM_LEGACY || (!hstream && !per_thread))
        return RZCUDA_ERROR_INVALID_VALUE;
    return emu_resolve_stream(hstream, per_thread, *ctx, out);
}

static rzcu_result do_batch(rzcu_deviceptr *dsts, rzcu_deviceptr *srcs, size_t *sizes, size_t count,
                            rzcu_memcpy_attributes *attrs, size_t *attrs_idxs, size_t num_attrs, size_t *fail_idx,
                            rzcu_stream hstream, bool per_thread)
{
    struct CUctx_st *c;
    struct CUstream_st *s;
    CHECK(emu_batch_stream(hstream, per_thread, fail_idx, &c, &s));
    if (count == 0 || !dsts || !srcs || !sizes || !attrs || !attrs_idxs || num_attrs == 0 || num_attrs > count)
        return RZCUDA_ERROR_INVALID_VALUE;
    for (size_t k = 0; k < num_attrs; k++) {
        if ((k == 0 && attrs_idxs[0] != 0) || (k > 0 && attrs_idxs[k] <= attrs_idxs[k - 1]) ||
            attrs_idxs[k] >= count)
            return RZCUDA_ERROR_INVALID_VALUE;
        unsigned order = attrs[k].srcAccessOrder;
        if (order != RZCU_MEMCPY_SRC_ACCESS_ORDER_STREAM && order != RZCU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL &&
            order != RZCU_MEMCPY_SRC_ACCESS_ORDER_ANY)
            return RZCUDA_ERROR_INVALID_VALUE;
        if (attrs[k].flags & ~1u) /* CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE */
            return RZCUDA_ERROR_INVALID_VALUE;
    }
    /* Every device range inside one allocation (one lock for all), every host range non-null and not
     * wrapping; the first bad copy is the one reported. */
    size_t bad = count;
    for (size_t i = 0; i < count; i++) {
        if (sizes[i] == 0)
            continue;
        rzcu_deviceptr ends[2] = {dsts[i], srcs[i]};
        for (int e = 0; e < 2; e++) {
            if (!emu_mem_is_device_address((uintptr_t)ends[e]) &&
                (ends[e] == 0 || sizes[i] > UINTPTR_MAX - (uintptr_t)ends[e])) {
                bad = i;
                break;
            }
        }
        if (bad != count)
            break;
    }
    size_t bad_dst = emu_mem_ranges_writable(dsts, sizes, bad), bad_src = emu_mem_ranges_ok(srcs, sizes, bad);
    bad = bad_dst < bad ? bad_dst : bad;
    bad = bad_src < bad ? bad_src : bad;
    if (bad != count) {
        if (fail_idx)
            *fail_idx = bad;
        return RZCUDA_ERROR_INVALID_VALUE;
    }
    if (emu_trace_on())
        for (size_t i = 0; i < count; i++)
            if (emu_mem_is_device_address((uintptr_t)dsts[i]))
                emu_trace_write(dsts[i], sizes[i]);
    struct op *op = emu_op_new(c, OP_BATCH);
    if (!op)
        return RZCUDA_ERROR_OUT_OF_MEMORY;
    bool snapshots = false;
    for (size_t k = 0; k < num_attrs; k++)
        snapshots = snapshots || attrs[k].srcAccessOrder == RZCU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL;
    if (!snapshots) {
        /* An idle stream runs the batch now, straight from the caller's arrays: no descriptor copy. */
        op->bdsts = dsts;
        op->bsrcs = srcs;
        op->bsizes = sizes;
        op->nitems = count;
        struct op *retry = NULL;
        rzcu_result r = emu_submit_seq_ex(s, op, false, NULL, true, &retry);
        if (r != RZCUDA_ERROR_NOT_READY)
            return r;
        op = retry; /* queued behind other work: it needs its own copy of the descriptors */
        op->nitems = 0;
    }
    struct batch_item *items = calloc(count, sizeof *items);
    if (!items) {
        emu_free_op(op);
        return RZCUDA_ERROR_OUT_OF_MEMORY;
    }
    op->items = items;
    op->nitems = count;
    size_t k = 0;
    for (size_t i = 0; i < count; i++) {
        while (k + 1 < num_attrs && attrs_idxs[k + 1] <= i)
            k++;
        items[i] = (struct batch_item){(void *)(uintptr_t)dsts[i], (const void *)(uintptr_t)srcs[i], sizes[i], NULL};
        if (sizes[i] && attrs[k].srcAccessOrder == RZCU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL) {
            items[i].snapshot = malloc(sizes[i]);
            if (!items[i].snapshot) {
                emu_free_op(op);
                return RZCUDA_ERROR_OUT_OF_MEMORY;
            }
            memcpy(items[i].snapshot, items[i].src, sizes[i]);
        }
    }
    return emu_submit(s, op, false);
}

EMU_API rzcu_result cuMemcpyBatchAsync_v2(rzcu_deviceptr *dsts, rzcu_deviceptr *srcs, size_t *sizes, size_t count,
                                          rzcu_memcpy_attributes *attrs, size_t *attrs_idxs, size_t num_attrs,
                                          rzcu_stream s)
{
    ENTER(cuMemcpyBatchAsync_v2);
    return do_batch(dsts, srcs, sizes, count, attrs, attrs_idxs, num_attrs, NULL, s, false);
}

EMU_API rzcu_result cuMemcpyBatchAsync_v2_ptsz(rzcu_deviceptr *dsts, rzcu_deviceptr *srcs, size_t *sizes,
                                               size_t count, rzcu_memcpy_attributes *attrs, size_t *attrs_idxs,
                                               size_t num_attrs, rzcu_stream s)
{
    ENTER(cuMemcpyBatchAsync_v2_ptsz);
    return do_batch(dsts, srcs, sizes, count, attrs, attrs_idxs, num_attrs, NULL, s, true);
}

EMU_API rzcu_result cuMemcpyBatchAsync(rzcu_deviceptr *dsts, rzcu_deviceptr *srcs, size_t *sizes, size_t count,
                                       rzcu_memcpy_attributes *attrs, size_t *attrs_idxs, size_t num_attrs,
                                       size_t *fail_idx, rzcu_stream s)
{
    ENTER(cuMemcpyBatchAsync);
    return do_batch(dsts, srcs, sizes, count, attrs, attrs_idxs, num_attrs, fail_idx, s, false);
}

EMU_API rzcu_result cuMemcpyBatchAsync_ptsz(rzcu_deviceptr *dsts, rzcu_deviceptr *srcs, size_t *sizes, size_t count,
                                            rzcu_memcpy_attributes *attrs, size_t *attrs_idxs, size_t num_attrs,
                                            size_t *fail_idx, rzcu_stream s)
{
    ENTER(cuMemcpyBatchAsync_ptsz);
    return do_batch(dsts, srcs, sizes, count, attrs, attrs_idxs, num_attrs, fail_idx, s, true);
}
