/*
 * Emulated device memory. One large address range is reserved (PROT_NONE, MAP_NORESERVE) and carved into
 * 2 MiB chunks; a flat table maps every chunk to its descriptor, so address -> allocation is O(1):
 *  - small allocations (<= 256 KiB) come from slabs: a slab is one chunk of equal blocks of a size class,
 *    with a per-block record (requested size, owning context); freed blocks go to a per-class free stack;
 *  - large allocations take whole chunks, committed (read/write) only up to the requested size rounded to a
 *    page; on free they are decommitted back to PROT_NONE, so a use after free faults.
 *  - virtual memory management reservations (cuMemAddressReserve) take whole chunks, one chunk a granule;
 *    they are not allocations (emu_mem_vmm.c).
 * The arena and its chunk runs are emu_arena.c.
 * Pinned host memory (cuMemAllocHost, cuMemHostRegister) is emu_host.c.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "emu_mem_internal.h"

#define SMALL_MAX ((size_t)256 << 10)
#define NCLASSES 40

struct size_class {
    uintptr_t *free; /* free block addresses */
    size_t nfree, cap;
    struct chunk *current; /* slab being carved */
};

static struct size_class classes[NCLASSES];

static uint64_t alloc_serial; /* allocations made so far, under emu_mem_mem_mu */

static size_t round_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

/* ---- size classes ---- */

static unsigned size_class(size_t size, size_t *block)
{
    if (size <= 4096) {
        *block = round_up(size, CUDA_EMU_ALLOC_ALIGN);
        return (unsigned)(*block / CUDA_EMU_ALLOC_ALIGN - 1); /* 0..15 */
    }
    unsigned lg = 63 - (unsigned)__builtin_clzll((unsigned long long)(size - 1)); /* 12..17 */
    size_t step = ((size_t)1 << lg) / 4;
    *block = round_up(size, step);
    return 16 + (lg - 12) * 4 + (unsigned)(*block / step - 5);
}

static uintptr_t small_alloc(size_t size, struct CUctx_st *ctx, int device)
{
    size_t block;
    unsigned c = size_class(size, &block);
    struct size_class *sc = &classes[c];
    struct chunk *ch;
    uintptr_t addr;
    if (sc->nfree) {
        addr = sc->free[--sc->nfree];
        ch = emu_mem_table[(addr - emu_mem_arena) >> CHUNK_SHIFT];
    } else {
        ch = sc->current;
        if (!ch || ch->carved == ch->nblocks) {
            size_t idx = emu_mem_chunks_get(1);
            if (idx == SIZE_MAX)
                return 0;
            ch = calloc(1, sizeof *ch);
            size_t nblocks = CHUNK_SIZE / block;
            struct blk *blks = ch ? calloc(nblocks, sizeof *blks) : NULL;
            if (!blks || !emu_mem_commit(emu_mem_chunk_addr(idx), CHUNK_SIZE)) {
                free(blks);
                free(ch);
                emu_mem_chunks_put(idx, 1);
                return 0;
            }
            *ch = (struct chunk){.kind = CHUNK_SLAB, .base = emu_mem_chunk_addr(idx), .block = block, .nblocks = nblocks,
                                 .blks = blks};
            emu_mem_table[idx] = ch;
            sc->current = ch;
        }
        addr = ch->base + ch->carved++ * block;
    }
    struct blk *b = &ch->blks[(addr - ch->base) / block];
    b->size = size;
    b->ctx = ctx;
    b->device = device;
    b->free_pending = false;
    b->graph = 0;
    b->serial = ++alloc_serial;
    return addr;
}

static bool small_free(struct chunk *ch, size_t i)
{
    size_t c = size_class(ch->block, &(size_t){0});
    struct size_class *sc = &classes[c];
    if (sc->nfree == sc->cap) {
        size_t cap = sc->cap ? sc->cap * 2 : 1024;
        uintptr_t *f = realloc(sc->free, cap * sizeof *f);
        if (!f)
            return false; /* the block leaks; still marked free */
        sc->free = f;
        sc->cap = cap;
    }
    sc->free[sc->nfree++] = ch->base + i * ch->block;
    return true;
}

static uintptr_t large_alloc(size_t size, struct CUctx_st *ctx, int device)
{
    size_t n = (size + CHUNK_SIZE - 1) >> CHUNK_SHIFT;
    if (n == 0 || n > emu_mem_arena_chunks)
        return 0;
    size_t idx = emu_mem_chunks_get(n);
    if (idx == SIZE_MAX)
        return 0;
    struct chunk *ch = calloc(1, sizeof *ch);
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    if (!ch || !emu_mem_commit(emu_mem_chunk_addr(idx), round_up(size, page))) {
        free(ch);
        emu_mem_chunks_put(idx, n);
        return 0;
    }
    *ch = (struct chunk){.kind = CHUNK_LARGE, .base = emu_mem_chunk_addr(idx), .size = size, .nchunks = n, .ctx = ctx,
                         .device = device, .serial = ++alloc_serial};
    for (size_t i = 0; i < n; i++)
        emu_mem_table[idx + i] = ch;
    return ch->base;
}

static void large_free(struct chunk *ch)
{
    size_t idx = (ch->base - emu_mem_arena) >> CHUNK_SHIFT;
    emu_mem_decommit(ch->base, ch->nchunks << CHUNK_SHIFT);
    for (size_t i = 0; i < ch->nchunks; i++)
        emu_mem_table[idx + i] = NULL;
    emu_mem_chunks_put(idx, ch->nchunks);
    free(ch);
}

rzcu_result emu_mem_alloc(struct CUctx_st *ctx, int device, size_t size, rzcu_deviceptr *out)
{
    if (size == 0)
        return RZCUDA_ERROR_INVALID_VALUE;
    if (size > SIZE_MAX - CHUNK_SIZE)
        return RZCUDA_ERROR_OUT_OF_MEMORY;
    size_t accounted = round_up(size, CUDA_EMU_ALLOC_ALIGN);
    pthread_mutex_lock(&emu_mem_mem_mu);
    rzcu_result r = RZCUDA_ERROR_OUT_OF_MEMORY;
    if (accounted <= emu_cfg.mem_bytes - emu_mem_used[device]) {
        uintptr_t p = size <= SMALL_MAX ? small_alloc(size, ctx, device) : large_alloc(size, ctx, device);
        if (p) {
            emu_mem_used[device] += accounted;
            *out = (rzcu_deviceptr)p;
            r = RZCUDA_SUCCESS;
        }
    }
    pthread_mutex_unlock(&emu_mem_mem_mu);
    if (r == RZCUDA_SUCCESS)
        emu_trace_alloc(*out, size);
    return r;
}

/*
 * The chunk and (for a slab) block index of the allocation containing p; false when none. An allocation
 * whose stream-ordered free is pending counts only with pending (and then only such ones).
 */
static bool find_any_locked(uintptr_t p, bool pending, struct chunk **pch, size_t *pidx, uintptr_t *pbase,
                            size_t *psize)
{
    if (!emu_mem_arena || p < emu_mem_arena || p >= emu_mem_arena + (emu_mem_arena_chunks << CHUNK_SHIFT))
        return false;
    struct chunk *ch = emu_mem_table[(p - emu_mem_arena) >> CHUNK_SHIFT];
    if (!ch || ch->kind == CHUNK_VMM)
        return false;
    uintptr_t base;
    size_t size, idx = 0;
    bool is_pending;
    if (ch->kind == CHUNK_SLAB) {
        idx = (p - ch->base) / ch->block;
        if (idx >= ch->carved || ch->blks[idx].size == 0)
            return false;
        base = ch->base + idx * ch->block;
        size = ch->blks[idx].size;
        is_pending = ch->blks[idx].free_pending;
    } else {
        base = ch->base;
        size = ch->size;
        is_pending = ch->free_pending;
    }
    if (is_pending != pending)
        return false;
    if (p - base >= size)
        return false;
    *pch = ch;
    *pidx = idx;
    *pbase = base;
    *psize = size;
    return true;
}

/* A live allocation (not free-pending). */
static bool find_locked(uintptr_t p, struct chunk **pch, size_t *pidx, uintptr_t *pbase, size_t *psize)
{
    return find_any_locked(p, false, pch, pidx, pbase, psize);
}

static uint64_t *graph_of(struct chunk *ch, size_t idx) { return ch->kind == CHUNK_SLAB ? &ch->blks[idx].graph : &ch->graph; }
static bool *pending_of(struct chunk *ch, size_t idx)
{
    return ch->kind == CHUNK_SLAB ? &ch->blks[idx].free_pending : &ch->free_pending;
}

static void free_found_locked(struct chunk *ch, size_t idx, size_t size)
{
    *graph_of(ch, idx) = 0;
    int device = ch->kind == CHUNK_SLAB ? ch->blks[idx].device : ch->device;
    emu_mem_used[device] -= round_up(size, CUDA_EMU_ALLOC_ALIGN);
    if (ch->kind == CHUNK_SLAB) {
        ch->blks[idx].size = 0;
        ch->blks[idx].ctx = NULL;
        ch->blks[idx].free_pending = false;
        small_free(ch, idx);
    } else {
        large_free(ch);
    }
}

rzcu_result emu_mem_free(rzcu_deviceptr p)
{
    pthread_mutex_lock(&emu_mem_mem_mu);
    struct chunk *ch;
    size_t idx, size;
    uintptr_t base;
    rzcu_result r = RZCUDA_ERROR_INVALID_VALUE;
    if (find_locked((uintptr_t)p, &ch, &idx, &base, &size) && base == (uintptr_t)p) {
        if (*graph_of(ch, idx))
            *pending_of(ch, idx) = true; /* graph memory: returned to its graph, which keeps the address */
        else
            free_found_locked(ch, idx, size);
        r = RZCUDA_SUCCESS;
    }
    pthread_mutex_unlock(&emu_mem_mem_mu);
    if (r == RZCUDA_SUCCESS)
        emu_trace_free(p);
    return r;
}

rzcu_result emu_mem_mark_free_pending(rzcu_deviceptr p)
{
    pthread_mutex_lock(&emu_mem_mem_mu);
    struct chunk *ch;
    size_t idx, size;
    uintptr_t base;
    rzcu_result r = RZCUDA_ERROR_INVALID_VALUE;
    if (find_locked((uintptr_t)p, &ch, &idx, &base, &size) && base == (uintptr_t)p) {
        if (ch->kind == CHUNK_SLAB)
            ch->blks[idx].free_pending = true;
        else
            ch->free_pending = true;
        r = RZCUDA_SUCCESS;
    }
    pthread_mutex_unlock(&emu_mem_mem_mu);
    if (r == RZCUDA_SUCCESS)
        emu_trace_free(p);
    return r;
}

void emu_mem_free_pending(rzcu_deviceptr p)
{
    pthread_mutex_lock(&emu_mem_mem_mu);
    struct chunk *ch;
    size_t idx, size;
    uintptr_t base;
    if (find_any_locked((uintptr_t)p, true, &ch, &idx, &base, &size) && base == (uintptr_t)p && !*graph_of(ch, idx))
        free_found_locked(ch, idx, size); /* graph memory stays its graph's, not allocated */
    pthread_mutex_unlock(&emu_mem_mem_mu);
}

/*
 * Graph memory (emu_graph_nodes.c): the allocation behind a graph's allocation node. Its address is fixed for the
 * graph's lifetime; it is allocated (live: usable by copies, memsets, lookups and frees) from the node's
 * capture to its free node's, and from each launch of the graph until a free node, cuMemFreeAsync or
 * cuMemFree, which give it back to the graph (not live) instead of releasing it.
 */
rzcu_result emu_mem_graph_alloc(struct CUctx_st *ctx, int device, size_t size, uint64_t id, rzcu_deviceptr *out)
{
    rzcu_result r = emu_mem_alloc(ctx, device, size, out);
    if (r != RZCUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&emu_mem_mem_mu);
    struct chunk *ch;
    size_t idx, sz;
    uintptr_t base;
    if (find_locked((uintptr_t)*out, &ch, &idx, &base, &sz))
        *graph_of(ch, idx) = id;
    pthread_mutex_unlock(&emu_mem_mem_mu);
    return RZCUDA_SUCCESS;
}

/* The allocation whose base is p, live or not; false when none. */
static bool find_base_locked(uintptr_t p, struct chunk **ch, size_t *idx)
{
    uintptr_t base;
    size_t size;
    return (find_any_locked(p, false, ch, idx, &base, &size) || find_any_locked(p, true, ch, idx, &base, &size)) &&
           base == p;
}

uint64_t emu_mem_graph_id(rzcu_deviceptr p)
{
    pthread_mutex_lock(&emu_mem_mem_mu);
    struct chunk *ch;
    size_t idx;
    uint64_t id = find_base_locked((uintptr_t)p, &ch, &idx) && !*pending_of(ch, idx) ? *graph_of(ch, idx) : 0;
    pthread_mutex_unlock(&emu_mem_mem_mu);
    return id;
}

int emu_mem_graph_state(rzcu_deviceptr p, uint64_t id)
{
    pthread_mutex_lock(&emu_mem_mem_mu);
    struct chunk *ch;
    size_t idx;
    int state = -1;
    if (find_base_locked((uintptr_t)p, &ch, &idx) && *graph_of(ch, idx) == id)
        state = !*pending_of(ch, idx);
    pthread_mutex_unlock(&emu_mem_mem_mu);
    return state;
}

void emu_mem_graph_set_live(rzcu_deviceptr p, uint64_t id, bool live)
{
    pthread_mutex_lock(&emu_mem_mem_mu);
    struct chunk *ch;
    size_t idx;
    if (find_base_locked((uintptr_t)p, &ch, &idx) && *graph_of(ch, idx) == id)
        *pending_of(ch, idx) = !live;
    pthread_mutex_unlock(&emu_mem_mem_mu);
}

void emu_mem_graph_release(rzcu_deviceptr p, uint64_t id)
{
    pthread_mutex_lock(&emu_mem_mem_mu);
    struct chunk *ch;
    size_t idx;
    uintptr_t base;
    size_t size;
    if (find_base_locked((uintptr_t)p, &ch, &idx) && *graph_of(ch, idx) == id) {
        if (*pending_of(ch, idx) && find_any_locked((uintptr_t)p, true, &ch, &idx, &base, &size))
            free_found_locked(ch, idx, size);
        else
            *graph_of(ch, idx) = 0; /* allocated by a launch and not freed: the program's, until it frees it */
    }
    pthread_mutex_unlock(&emu_mem_mem_mu);
}

/* The base of an allocation (not of a VMM mapping: cuMemFree does not free those). */
bool emu_mem_is_base(rzcu_deviceptr p)
{
    pthread_mutex_lock(&emu_mem_mem_mu);
    struct chunk *ch;
    size_t idx, size;
    uintptr_t base;
    bool found = find_locked((uintptr_t)p, &ch, &idx, &base, &size) && base == (uintptr_t)p;
    pthread_mutex_unlock(&emu_mem_mem_mu);
    return found;
}


bool emu_mem_base_serial(rzcu_deviceptr p, uint64_t *serial)
{
    pthread_mutex_lock(&emu_mem_mem_mu);
    struct chunk *ch;
    size_t idx, size;
    uintptr_t base;
    bool found = find_locked((uintptr_t)p, &ch, &idx, &base, &size) && base == (uintptr_t)p;
    if (found)
        *serial = ch->kind == CHUNK_SLAB ? ch->blks[idx].serial : ch->serial;
    pthread_mutex_unlock(&emu_mem_mem_mu);
    return found;
}

bool emu_mem_lookup(rzcu_deviceptr p, rzcu_deviceptr *pbase, size_t *psize)
{
    pthread_mutex_lock(&emu_mem_mem_mu);
    struct chunk *ch;
    size_t idx, size;
    uintptr_t base;
    bool found = find_locked((uintptr_t)p, &ch, &idx, &base, &size);
    if (!found && (ch = emu_mem_vmm_chunk_locked((uintptr_t)p))) /* a VMM mapping: cuMemGetAddressRange gives it */
        found = emu_mem_vmm_lookup_locked(ch, (uintptr_t)p, &base, &size, &(int){0});
    pthread_mutex_unlock(&emu_mem_mem_mu);
    if (found) {
        if (pbase)
            *pbase = base;
        if (psize)
            *psize = size;
    }
    return found;
}

bool emu_mem_owner(rzcu_deviceptr p, struct CUctx_st **ctx, int *device)
{
    pthread_mutex_lock(&emu_mem_mem_mu);
    struct chunk *ch;
    size_t idx, size;
    uintptr_t base;
    bool found = find_locked((uintptr_t)p, &ch, &idx, &base, &size);
    if (found) {
        *ctx = ch->kind == CHUNK_SLAB ? ch->blks[idx].ctx : ch->ctx;
        *device = ch->kind == CHUNK_SLAB ? ch->blks[idx].device : ch->device;
    } else if ((ch = emu_mem_vmm_chunk_locked((uintptr_t)p)) && emu_mem_vmm_lookup_locked(ch, (uintptr_t)p, &base, &size, device)) {
        *ctx = NULL; /* VMM memory belongs to its device, not to a context */
        found = true;
    }
    pthread_mutex_unlock(&emu_mem_mem_mu);
    return found;
}

/* need: the VMM access the range must have (CU_MEM_ACCESS_FLAGS_PROT_READ or _READWRITE). */
static bool range_access_locked(rzcu_deviceptr p, size_t n, unsigned need)
{
    struct chunk *ch;
    size_t idx, size;
    uintptr_t base;
    if (!find_locked((uintptr_t)p, &ch, &idx, &base, &size)) {
        ch = emu_mem_vmm_chunk_locked((uintptr_t)p);
        return ch && emu_mem_vmm_range_ok_locked(ch, (uintptr_t)p, n, need);
    }
    return n <= size - (size_t)((uintptr_t)p - base);
}

static bool range_ok_locked(rzcu_deviceptr p, size_t n)
{
    return range_access_locked(p, n, RZCU_MEM_ACCESS_FLAGS_PROT_READ);
}

bool emu_mem_range_ok(rzcu_deviceptr p, size_t n)
{
    pthread_mutex_lock(&emu_mem_mem_mu);
    bool ok = range_ok_locked(p, n);
    pthread_mutex_unlock(&emu_mem_mem_mu);
    return ok;
}

bool emu_mem_range_writable(rzcu_deviceptr p, size_t n)
{
    pthread_mutex_lock(&emu_mem_mem_mu);
    bool ok = range_access_locked(p, n, RZCU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    pthread_mutex_unlock(&emu_mem_mem_mu);
    return ok;
}

static size_t ranges_access(const rzcu_deviceptr *ptrs, const size_t *sizes, size_t count, unsigned need)
{
    size_t i = 0;
    pthread_mutex_lock(&emu_mem_mem_mu);
    for (; i < count; i++)
        if (sizes[i] && emu_mem_is_device_address((uintptr_t)ptrs[i]) &&
            !range_access_locked(ptrs[i], sizes[i], need))
            break;
    pthread_mutex_unlock(&emu_mem_mem_mu);
    return i;
}

size_t emu_mem_ranges_ok(const rzcu_deviceptr *ptrs, const size_t *sizes, size_t count)
{
    return ranges_access(ptrs, sizes, count, RZCU_MEM_ACCESS_FLAGS_PROT_READ);
}

size_t emu_mem_ranges_writable(const rzcu_deviceptr *ptrs, const size_t *sizes, size_t count)
{
    return ranges_access(ptrs, sizes, count, RZCU_MEM_ACCESS_FLAGS_PROT_READWRITE);
}

void emu_mem_free_context(struct CUctx_st *ctx)
{
    pthread_mutex_lock(&emu_mem_mem_mu);
    for (size_t i = 0; i < emu_mem_next_chunk;) {
        struct chunk *ch = emu_mem_table[i];
        if (!ch) {
            i++;
            continue;
        }
        if (ch->kind == CHUNK_SLAB) {
            for (size_t b = 0; b < ch->carved; b++)
                if (ch->blks[b].size && ch->blks[b].ctx == ctx)
                    free_found_locked(ch, b, ch->blks[b].size);
            i++;
        } else {
            size_t n = ch->nchunks;
            if (ch->ctx == ctx)
                free_found_locked(ch, 0, ch->size);
            i += n;
        }
    }
    pthread_mutex_unlock(&emu_mem_mem_mu);
}

void emu_mem_info(int device, size_t *free_bytes, size_t *total_bytes)
{
    const size_t *used = emu_mem_used; /* tests/gdb/case_timeout.py breaks on the next line, by its text */
    pthread_mutex_lock(&emu_mem_mem_mu);
    *free_bytes = emu_cfg.mem_bytes - used[device];
    *total_bytes = emu_cfg.mem_bytes;
    pthread_mutex_unlock(&emu_mem_mem_mu);
}

