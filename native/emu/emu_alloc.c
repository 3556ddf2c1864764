/*
 * The emulated driver's allocation entry points: cuMemAlloc, cuMemAllocPitch, cuMemAllocManaged, cuMemFree,
 * cuMemGetInfo, the default memory pools and the stream-ordered cuMemAllocAsync, cuMemAllocFromPoolAsync and
 * cuMemFreeAsync (submitted to the stream engine, emu_stream.c, or recorded by capture). Device memory itself
 * is emu_mem.c; pinned host memory emu_host.c; copies and memsets emu_copy.c.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "emu_engine.h"
#include "emu_pool.h"
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
    ENTER_CTX(cuMemAlloc_v2, c);
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
    ENTER_CTX(cuMemAllocPitch_v2, c);
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
    ENTER_CTX(cuMemAllocManaged, c);
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
    ENTER_CTX(cuMemFree_v2, c);
    CHECK(emu_capture_unsafe_call());
    if (!dptr)
        return RZCUDA_SUCCESS;
    if (!emu_mem_is_base(dptr))
        return RZCUDA_ERROR_INVALID_VALUE;
    if (emu_pool_free_import(dptr))
        return RZCUDA_SUCCESS; /* an import's free (cuMemPoolImportPointer): the allocation stays */
    emu_pool_note_free(dptr);
    /* The driver's cuMemFree waits for the device, except for memory from the stream-ordered allocator. */
    if (!pool_forget(dptr)) {
        emu_host_wait(); /* by contract, also when nothing is outstanding */
        if (atomic_load(&emu_pending_ops))
            emu_sync_all_contexts();
    }
    return emu_mem_free(dptr);
}

EMU_API rzcu_result cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes)
{
    ENTER_CTX(cuMemGetInfo_v2, c);
    if (!free_bytes || !total_bytes)
        return RZCUDA_ERROR_INVALID_VALUE;
    emu_mem_info(c->device, free_bytes, total_bytes);
    return RZCUDA_SUCCESS;
}


/* ------------------------------------------------------------------------------------------------------ */
/* stream-ordered allocation */

/* The pools themselves (default, created, imported) and their accounting: emu_pool.c. */

/*
 * The memory is allocated at the call, from the pool's device (the stream's device for cuMemAllocAsync), and
 * owned by the stream's context; nothing is queued. It is valid earlier than the driver promises (work
 * ordered after the allocation), which no correct program can tell apart. On a captured stream: an allocation
 * node (emu_capture.c).
 */
static rzcu_result do_alloc_async(rzcu_deviceptr *dptr, size_t bytesize, bool from_pool, rzcu_mem_pool hpool,
                                  rzcu_stream hstream, bool per_thread)
{
    struct CUstream_st *s;
    CHECK(emu_resolve_stream(hstream, per_thread, NULL, &s));
    if (!dptr || bytesize == 0)
        return RZCUDA_ERROR_INVALID_VALUE;
    int device;
    rzcu_mem_pool pool;
    if (from_pool && !hpool)
        return RZCUDA_ERROR_INVALID_VALUE;
    CHECK(emu_pool_begin_alloc(from_pool ? hpool : NULL, s->ctx->device, bytesize, &device, &pool));
    if (atomic_load(&s->capture))
        return emu_capture_alloc(s, device, bytesize, dptr); /* an allocation node: the graph's memory */
    rzcu_result r = emu_mem_alloc(s->ctx, device, bytesize, dptr);
    if (r == RZCUDA_SUCCESS) {
        pool_note(*dptr);
        emu_pool_note_alloc(pool, *dptr, bytesize);
    }
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
    if (emu_mem_is_base(dptr) && emu_pool_free_import(dptr))
        return RZCUDA_SUCCESS; /* an import's free (cuMemPoolImportPointer): the allocation stays */
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
    emu_pool_note_free(dptr);
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

