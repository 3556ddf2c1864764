/*
 * The emulated driver's memory entry points: allocation and free (stream-ordered ones included), pointer
 * queries, memsets, copies and batched copies, all submitted to the stream engine (emu_stream.c). Device
 * memory itself is emu_mem.c; pinned host memory emu_host.c; 2D/3D copies and cuMemcpy3DBatchAsync emu_copy2d.c.
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
/* memory management */

/*
 * Which live allocations came from the stream-ordered allocator: cuMemFree of those does not synchronise (the
 * program must have waited for their users, as the driver documents for pool memory), while cuMemFree of any
 * other memory first completes all outstanding work. A base leaves the set when it is freed or handed out
 * again by another allocation call (its old allocation went with its context).
 */
#define POOL_BUCKETS 4096
struct pool_base {
    struct pool_base *next;
    rzcu_deviceptr p;
};
static struct pool_base *pool_bases[POOL_BUCKETS];
static pthread_mutex_t pool_bases_mu = PTHREAD_MUTEX_INITIALIZER;

static size_t pool_bucket(rzcu_deviceptr p) { return (size_t)((p >> 8) * 0x9E3779B97F4A7C15ull >> 52) % POOL_BUCKETS; }

/* Forgets p; returns whether it was a stream-ordered allocation's base. */
static bool pool_forget(rzcu_deviceptr p)
{
    bool found = false;
    pthread_mutex_lock(&pool_bases_mu);
    for (struct pool_base **l = &pool_bases[pool_bucket(p)]; *l; l = &(*l)->next) {
        if ((*l)->p == p) {
            struct pool_base *dead = *l;
            *l = dead->next;
            free(dead);
            found = true;
            break;
        }
    }
    pthread_mutex_unlock(&pool_bases_mu);
    return found;
}

bool emu_mem_is_pool(rzcu_deviceptr p)
{
    bool found = false;
    pthread_mutex_lock(&pool_bases_mu);
    for (struct pool_base *b = pool_bases[pool_bucket(p)]; b && !found; b = b->next)
        found = b->p == p;
    pthread_mutex_unlock(&pool_bases_mu);
    return found && emu_mem_is_base(p);
}

static void pool_note(rzcu_deviceptr p)
{
    pool_forget(p);
    struct pool_base *b = malloc(sizeof *b);
    if (!b)
        return; /* out of host memory: its cuMemFree synchronises, as for other memory (stricter) */
    b->p = p;
    pthread_mutex_lock(&pool_bases_mu);
    b->next = pool_bases[pool_bucket(p)];
    pool_bases[pool_bucket(p)] = b;
    pthread_mutex_unlock(&pool_bases_mu);
}

/* An allocation that is not stream-ordered: its base is no pool memory, whatever was there before. */
static rzcu_result plain_alloc(struct CUctx_st *c, int device, size_t size, rzcu_deviceptr *out)
{
    rzcu_result r = emu_mem_alloc(c, device, size, out);
    if (r == RZCUDA_SUCCESS)
        pool_forget(*out);
    return r;
}

EMU_API rzcu_result cuMemAlloc_v2(rzcu_deviceptr *dptr, size_t bytesize)
{
    ENTER(cuMemAlloc_v2);
    struct CUctx_st *c;
    CHECK(emu_current_ctx(&c));
    CHECK(emu_capture_unsafe_call());
    if (!dptr || bytesize == 0)
        return RZCUDA_ERROR_INVALID_VALUE;
    return plain_alloc(c, c->device, bytesize, dptr);
}

/*
 * The pitch is the width rounded up to CUDA_EMU_PITCH_ALIGN. A width above the device's MAX_PITCH, or a
 * pitch * height that overflows, is CUDA_ERROR_INVALID_VALUE.
 */
EMU_API rzcu_result cuMemAllocPitch_v2(rzcu_deviceptr *dptr, size_t *pitch, size_t width_bytes, size_t height,
                                       unsigned int element_bytes)
{
    ENTER(cuMemAllocPitch_v2);
    struct CUctx_st *c;
    CHECK(emu_current_ctx(&c));
    CHECK(emu_capture_unsafe_call());
    if (!dptr || !pitch || width_bytes == 0 || height == 0 || width_bytes > 2147483647u)
        return RZCUDA_ERROR_INVALID_VALUE;
    if (element_bytes != 4 && element_bytes != 8 && element_bytes != 16)
        return RZCUDA_ERROR_INVALID_VALUE;
    size_t p = (width_bytes + CUDA_EMU_PITCH_ALIGN - 1) / CUDA_EMU_PITCH_ALIGN * CUDA_EMU_PITCH_ALIGN;
    if (height > SIZE_MAX / p)
        return RZCUDA_ERROR_INVALID_VALUE;
    CHECK(plain_alloc(c, c->device, p * height, dptr));
    *pitch = p;
    return RZCUDA_SUCCESS;
}

/* Managed memory behaves as device memory here (the host may also dereference it, as on a real system). */
EMU_API rzcu_result cuMemAllocManaged(rzcu_deviceptr *dptr, size_t bytesize, unsigned int flags)
{
    ENTER(cuMemAllocManaged);
    struct CUctx_st *c;
    CHECK(emu_current_ctx(&c));
    CHECK(emu_capture_unsafe_call());
    if (!dptr || bytesize == 0 || (flags != RZCU_MEM_ATTACH_GLOBAL && flags != RZCU_MEM_ATTACH_HOST))
        return RZCUDA_ERROR_INVALID_VALUE;
    return plain_alloc(c, c->device, bytesize, dptr);
}

/*
 * cuMemFree(0) is CUDA_SUCCESS and does nothing, like free(NULL): the documentation names no special case,
 * but that is what real drivers return (observed side by side with the real driver, e.g. driver 590; see
 * lupinemachines/lupine PR #858 and StanfordLegion/legion issue #1001). Any other pointer must be the base
 * of a live allocation, else CUDA_ERROR_INVALID_VALUE (inside an allocation, already freed, unknown).
 * Freeing synchronises with outstanding work (the driver "may perform implicit synchronization"), so
 * queued operations never touch released memory.
 */
EMU_API rzcu_result cuMemFree_v2(rzcu_deviceptr dptr)
{
    ENTER(cuMemFree_v2);
    struct CUctx_st *c;
    CHECK(emu_current_ctx(&c));
    CHECK(emu_capture_unsafe_call());
    if (!dptr)
        return RZCUDA_SUCCESS;
    if (!emu_mem_is_base(dptr))
        return RZCUDA_ERROR_INVALID_VALUE;
    /* The driver's cuMemFree waits for the device, except for memory from the stream-ordered allocator. */
    if (!pool_forget(dptr) && atomic_load(&emu_pending_ops))
        emu_sync_all_contexts();
    return emu_mem_free(dptr);
}

EMU_API rzcu_result cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes)
{
    ENTER(cuMemGetInfo_v2);
    struct CUctx_st *c;
    CHECK(emu_current_ctx(&c));
    if (!free_bytes || !total_bytes)
        return RZCUDA_ERROR_INVALID_VALUE;
    emu_mem_info(c->device, free_bytes, total_bytes);
    return RZCUDA_SUCCESS;
}

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
    return do_copy(HTOD, (uintptr_t)dst, (uintptr_t)src, n, false, NULL, false);
}

rzcu_result cuEmuDeviceLoad(void *dst, rzcu_deviceptr src, size_t n)
{
    if (!emu_initialized())
        return RZCUDA_ERROR_NOT_INITIALIZED;
    emu_trace_enter(EP_cuMemcpyDtoH_v2, __builtin_return_address(0));
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

/* ------------------------------------------------------------------------------------------------------ */
/* stream-ordered allocation */

/* One default pool per device; the handle is the address of its slot. */
struct CUmemPoolHandle_st {
    int device;
};
static struct CUmemPoolHandle_st default_pools[CUDA_EMU_MAX_DEVICES] = {{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}};

static struct CUmemPoolHandle_st *pool_from_handle(rzcu_mem_pool h)
{
    for (int i = 0; i < emu_cfg.ndevices; i++)
        if (h == &default_pools[i])
            return h;
    return NULL;
}

EMU_API rzcu_result cuDeviceGetDefaultMemPool(rzcu_mem_pool *pool, rzcu_device dev)
{
    ENTER(cuDeviceGetDefaultMemPool);
    if (!pool)
        return RZCUDA_ERROR_INVALID_VALUE;
    if (!emu_valid_device(dev))
        return RZCUDA_ERROR_INVALID_DEVICE;
    *pool = &default_pools[dev];
    return RZCUDA_SUCCESS;
}

/*
 * The memory is allocated at the call, from the pool's device (the stream's device for cuMemAllocAsync), and
 * owned by the stream's context; nothing is queued. It is valid earlier than the driver promises (work
 * ordered after the allocation), which no correct program can tell apart. On a captured stream: an allocation
 * node (emu_graph.c).
 */
static rzcu_result do_alloc_async(rzcu_deviceptr *dptr, size_t bytesize, bool from_pool, rzcu_mem_pool hpool,
                                  rzcu_stream hstream, bool per_thread)
{
    struct CUstream_st *s;
    CHECK(emu_resolve_stream(hstream, per_thread, NULL, &s));
    if (!dptr || bytesize == 0)
        return RZCUDA_ERROR_INVALID_VALUE;
    int device = s->ctx->device;
    if (from_pool) {
        struct CUmemPoolHandle_st *pool = pool_from_handle(hpool);
        if (!pool)
            return RZCUDA_ERROR_INVALID_VALUE;
        device = pool->device;
    }
    if (atomic_load(&s->capture))
        return emu_capture_alloc(s, device, bytesize, dptr); /* an allocation node: the graph's memory */
    rzcu_result r = emu_mem_alloc(s->ctx, device, bytesize, dptr);
    if (r == RZCUDA_SUCCESS)
        pool_note(*dptr);
    return r;
}

EMU_API rzcu_result cuMemAllocAsync(rzcu_deviceptr *dptr, size_t bytesize, rzcu_stream s)
{
    ENTER(cuMemAllocAsync);
    return do_alloc_async(dptr, bytesize, false, NULL, s, false);
}

EMU_API rzcu_result cuMemAllocAsync_ptsz(rzcu_deviceptr *dptr, size_t bytesize, rzcu_stream s)
{
    ENTER(cuMemAllocAsync_ptsz);
    return do_alloc_async(dptr, bytesize, false, NULL, s, true);
}

EMU_API rzcu_result cuMemAllocFromPoolAsync(rzcu_deviceptr *dptr, size_t bytesize, rzcu_mem_pool pool,
                                            rzcu_stream s)
{
    ENTER(cuMemAllocFromPoolAsync);
    return do_alloc_async(dptr, bytesize, true, pool, s, false);
}

EMU_API rzcu_result cuMemAllocFromPoolAsync_ptsz(rzcu_deviceptr *dptr, size_t bytesize, rzcu_mem_pool pool,
                                                 rzcu_stream s)
{
    ENTER(cuMemAllocFromPoolAsync_ptsz);
    return do_alloc_async(dptr, bytesize, true, pool, s, true);
}

/*
 * Frees any allocation (cuMemAllocAsync or cuMemAlloc*, as the programming guide allows) in stream order:
 * at the call the allocation leaves use (later copies, memsets and frees of it are CUDA_ERROR_INVALID_VALUE:
 * the documentation makes any access by later work undefined), and it is released when the stream reaches
 * the free. 0 is CUDA_SUCCESS and does nothing, as for cuMemFree.
 */
static rzcu_result do_free_async(rzcu_deviceptr dptr, rzcu_stream hstream, bool per_thread)
{
    struct CUstream_st *s;
    CHECK(emu_resolve_stream(hstream, per_thread, NULL, &s));
    if (!dptr)
        return RZCUDA_SUCCESS;
    if (atomic_load(&s->capture))
        return emu_capture_free(s, dptr); /* a free node, of a graph allocation only */
    struct op *op = emu_op_new(s->ctx, OP_FREE);
    if (!op)
        return RZCUDA_ERROR_OUT_OF_MEMORY;
    op->ptr = dptr;
    rzcu_result r = emu_mem_mark_free_pending(dptr);
    if (r != RZCUDA_SUCCESS) {
        emu_free_op(op);
        return r;
    }
    pool_forget(dptr);
    if (emu_submit(s, op, false) != RZCUDA_SUCCESS) {
        /* could not queue it: free it once the stream's work is done */
        emu_stream_sync(s);
        emu_mem_free_pending(dptr);
    }
    return RZCUDA_SUCCESS;
}

EMU_API rzcu_result cuMemFreeAsync(rzcu_deviceptr dptr, rzcu_stream s)
{
    ENTER(cuMemFreeAsync);
    return do_free_async(dptr, s, false);
}

EMU_API rzcu_result cuMemFreeAsync_ptsz(rzcu_deviceptr dptr, rzcu_stream s)
{
    ENTER(cuMemFreeAsync_ptsz);
    return do_free_async(dptr, s, true);
}

