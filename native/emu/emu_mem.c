/*
 * Emulated device memory. One large address range is reserved (PROT_NONE, MAP_NORESERVE) and carved into
 * 2 MiB chunks; a flat table maps every chunk to its descriptor, so address -> allocation is O(1):
 *  - small allocations (<= 256 KiB) come from slabs: a slab is one chunk of equal blocks of a size class,
 *    with a per-block record (requested size, owning context); freed blocks go to a per-class free stack;
 *  - large allocations take whole chunks, committed (read/write) only up to the requested size rounded to a
 *    page; on free they are decommitted back to PROT_NONE, so a use after free faults.
 *  - virtual memory management reservations (cuMemAddressReserve) take whole chunks, one chunk a granule;
 *    they are not allocations (see the section at the end).
 * Chunk runs are handed out by a bump pointer plus an address-ordered list of free runs.
 * Pinned host memory (cuMemAllocHost, cuMemHostRegister) is emu_host.c.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "emu_internal.h"

#define CHUNK_SHIFT 21
#define CHUNK_SIZE ((uintptr_t)1 << CHUNK_SHIFT)
#define SMALL_MAX ((size_t)256 << 10)
#define NCLASSES 40

struct blk {
    size_t size;          /* requested size; 0 when free */
    struct CUctx_st *ctx; /* owner */
    int device;           /* whose memory it is */
    bool free_pending;    /* cuMemFreeAsync called, the stream has not reached the free yet */
};

enum chunk_kind { CHUNK_SLAB = 1, CHUNK_LARGE = 2, CHUNK_VMM = 3 };

struct vmm_resv;

struct chunk {
    enum chunk_kind kind;
    uintptr_t base;
    /* slab */
    size_t block, nblocks, carved;
    struct blk *blks;
    /* large */
    size_t size, nchunks;
    struct CUctx_st *ctx;
    int device;
    bool free_pending;
    /* vmm: a reservation of nchunks chunks from base */
    struct vmm_resv *resv;
};

struct run {
    size_t start, len; /* in chunks */
};

struct size_class {
    uintptr_t *free; /* free block addresses */
    size_t nfree, cap;
    struct chunk *current; /* slab being carved */
};

static pthread_mutex_t mem_mu = PTHREAD_MUTEX_INITIALIZER;
static uintptr_t arena;
static size_t arena_chunks;
static size_t next_chunk;
static struct chunk **table;
static struct run *free_runs;
static size_t nfree_runs, free_runs_cap;
static struct size_class classes[NCLASSES];
static size_t used[CUDA_EMU_MAX_DEVICES];

static size_t round_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

rzcu_result emu_mem_init(void)
{
    pthread_mutex_lock(&mem_mu);
    rzcu_result r = RZCUDA_SUCCESS;
    if (!arena) {
        /* 1 TiB, or the largest power of two down to 1 GiB that can be reserved. */
        for (size_t bytes = (size_t)1 << 40; bytes >= ((size_t)1 << 30); bytes >>= 1) {
            void *p = mmap(NULL, bytes + CHUNK_SIZE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
            if (p == MAP_FAILED)
                continue;
            /* align the arena to a chunk; give back the slack */
            uintptr_t start = ((uintptr_t)p + CHUNK_SIZE - 1) & ~(CHUNK_SIZE - 1);
            if (start > (uintptr_t)p)
                munmap(p, start - (uintptr_t)p);
            uintptr_t end = (uintptr_t)p + bytes + CHUNK_SIZE;
            if (end > start + bytes)
                munmap((void *)(start + bytes), end - (start + bytes));
            table = calloc(bytes >> CHUNK_SHIFT, sizeof *table);
            if (!table) {
                munmap((void *)start, bytes);
                break;
            }
            /* keep the reservation out of core files (gcore and the kernel honour this); committed memory
             * is marked dumpable again, so device memory contents are in cores */
            madvise((void *)start, bytes, MADV_DONTDUMP);
            arena = start;
            arena_chunks = bytes >> CHUNK_SHIFT;
            break;
        }
        if (!arena) {
            fprintf(stderr, "cuda-emu: warning: cannot reserve address space for device memory\n");
            r = RZCUDA_ERROR_OUT_OF_MEMORY;
        }
    }
    pthread_mutex_unlock(&mem_mu);
    return r;
}

/* ---- chunk runs ---- */

static bool runs_reserve(size_t n)
{
    if (n <= free_runs_cap)
        return true;
    size_t cap = free_runs_cap ? free_runs_cap * 2 : 64;
    while (cap < n)
        cap *= 2;
    struct run *r = realloc(free_runs, cap * sizeof *r);
    if (!r)
        return false;
    free_runs = r;
    free_runs_cap = cap;
    return true;
}

/* First index of a run of n chunks, or SIZE_MAX. */
static size_t chunks_get(size_t n)
{
    for (size_t i = 0; i < nfree_runs; i++) {
        if (free_runs[i].len >= n) {
            size_t start = free_runs[i].start;
            free_runs[i].start += n;
            free_runs[i].len -= n;
            if (free_runs[i].len == 0) {
                memmove(&free_runs[i], &free_runs[i + 1], (nfree_runs - i - 1) * sizeof *free_runs);
                nfree_runs--;
            }
            return start;
        }
    }
    if (n > arena_chunks - next_chunk)
        return SIZE_MAX;
    size_t start = next_chunk;
    next_chunk += n;
    return start;
}

static void chunks_put(size_t start, size_t n)
{
    size_t i = 0;
    while (i < nfree_runs && free_runs[i].start < start)
        i++;
    bool merge_prev = i > 0 && free_runs[i - 1].start + free_runs[i - 1].len == start;
    bool merge_next = i < nfree_runs && start + n == free_runs[i].start;
    if (merge_prev && merge_next) {
        free_runs[i - 1].len += n + free_runs[i].len;
        memmove(&free_runs[i], &free_runs[i + 1], (nfree_runs - i - 1) * sizeof *free_runs);
        nfree_runs--;
    } else if (merge_prev) {
        free_runs[i - 1].len += n;
    } else if (merge_next) {
        free_runs[i].start = start;
        free_runs[i].len += n;
    } else {
        if (!runs_reserve(nfree_runs + 1))
            return; /* the address range leaks; harmless */
        memmove(&free_runs[i + 1], &free_runs[i], (nfree_runs - i) * sizeof *free_runs);
        free_runs[i] = (struct run){start, n};
        nfree_runs++;
    }
    /* give the tail back to the bump pointer */
    if (nfree_runs && free_runs[nfree_runs - 1].start + free_runs[nfree_runs - 1].len == next_chunk) {
        next_chunk = free_runs[nfree_runs - 1].start;
        nfree_runs--;
    }
}

static uintptr_t chunk_addr(size_t idx) { return arena + (idx << CHUNK_SHIFT); }

static bool commit(uintptr_t addr, size_t len)
{
    if (mprotect((void *)addr, len, PROT_READ | PROT_WRITE) != 0)
        return false;
    madvise((void *)addr, len, MADV_DODUMP);
    return true;
}

static void decommit(uintptr_t addr, size_t len)
{
    /* replace the pages by fresh inaccessible ones: memory released, later accesses fault */
    if (mmap((void *)addr, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0) ==
        MAP_FAILED) {
        madvise((void *)addr, len, MADV_DONTNEED);
        mprotect((void *)addr, len, PROT_NONE);
    }
    madvise((void *)addr, len, MADV_DONTDUMP);
}

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
        ch = table[(addr - arena) >> CHUNK_SHIFT];
    } else {
        ch = sc->current;
        if (!ch || ch->carved == ch->nblocks) {
            size_t idx = chunks_get(1);
            if (idx == SIZE_MAX)
                return 0;
            ch = calloc(1, sizeof *ch);
            size_t nblocks = CHUNK_SIZE / block;
            struct blk *blks = ch ? calloc(nblocks, sizeof *blks) : NULL;
            if (!blks || !commit(chunk_addr(idx), CHUNK_SIZE)) {
                free(blks);
                free(ch);
                chunks_put(idx, 1);
                return 0;
            }
            *ch = (struct chunk){.kind = CHUNK_SLAB, .base = chunk_addr(idx), .block = block, .nblocks = nblocks,
                                 .blks = blks};
            table[idx] = ch;
            sc->current = ch;
        }
        addr = ch->base + ch->carved++ * block;
    }
    struct blk *b = &ch->blks[(addr - ch->base) / block];
    b->size = size;
    b->ctx = ctx;
    b->device = device;
    b->free_pending = false;
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
    if (n == 0 || n > arena_chunks)
        return 0;
    size_t idx = chunks_get(n);
    if (idx == SIZE_MAX)
        return 0;
    struct chunk *ch = calloc(1, sizeof *ch);
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    if (!ch || !commit(chunk_addr(idx), round_up(size, page))) {
        free(ch);
        chunks_put(idx, n);
        return 0;
    }
    *ch = (struct chunk){.kind = CHUNK_LARGE, .base = chunk_addr(idx), .size = size, .nchunks = n, .ctx = ctx,
                         .device = device};
    for (size_t i = 0; i < n; i++)
        table[idx + i] = ch;
    return ch->base;
}

static void large_free(struct chunk *ch)
{
    size_t idx = (ch->base - arena) >> CHUNK_SHIFT;
    decommit(ch->base, ch->nchunks << CHUNK_SHIFT);
    for (size_t i = 0; i < ch->nchunks; i++)
        table[idx + i] = NULL;
    chunks_put(idx, ch->nchunks);
    free(ch);
}

rzcu_result emu_mem_alloc(struct CUctx_st *ctx, int device, size_t size, rzcu_deviceptr *out)
{
    if (size == 0)
        return RZCUDA_ERROR_INVALID_VALUE;
    if (size > SIZE_MAX - CHUNK_SIZE)
        return RZCUDA_ERROR_OUT_OF_MEMORY;
    size_t accounted = round_up(size, CUDA_EMU_ALLOC_ALIGN);
    pthread_mutex_lock(&mem_mu);
    rzcu_result r = RZCUDA_ERROR_OUT_OF_MEMORY;
    if (accounted <= emu_cfg.mem_bytes - used[device]) {
        uintptr_t p = size <= SMALL_MAX ? small_alloc(size, ctx, device) : large_alloc(size, ctx, device);
        if (p) {
            used[device] += accounted;
            *out = (rzcu_deviceptr)p;
            r = RZCUDA_SUCCESS;
        }
    }
    pthread_mutex_unlock(&mem_mu);
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
    if (!arena || p < arena || p >= arena + (arena_chunks << CHUNK_SHIFT))
        return false;
    struct chunk *ch = table[(p - arena) >> CHUNK_SHIFT];
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

static void free_found_locked(struct chunk *ch, size_t idx, size_t size)
{
    int device = ch->kind == CHUNK_SLAB ? ch->blks[idx].device : ch->device;
    used[device] -= round_up(size, CUDA_EMU_ALLOC_ALIGN);
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
    pthread_mutex_lock(&mem_mu);
    struct chunk *ch;
    size_t idx, size;
    uintptr_t base;
    rzcu_result r = RZCUDA_ERROR_INVALID_VALUE;
    if (find_locked((uintptr_t)p, &ch, &idx, &base, &size) && base == (uintptr_t)p) {
        free_found_locked(ch, idx, size);
        r = RZCUDA_SUCCESS;
    }
    pthread_mutex_unlock(&mem_mu);
    if (r == RZCUDA_SUCCESS)
        emu_trace_free(p);
    return r;
}

rzcu_result emu_mem_mark_free_pending(rzcu_deviceptr p)
{
    pthread_mutex_lock(&mem_mu);
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
    pthread_mutex_unlock(&mem_mu);
    if (r == RZCUDA_SUCCESS)
        emu_trace_free(p);
    return r;
}

void emu_mem_free_pending(rzcu_deviceptr p)
{
    pthread_mutex_lock(&mem_mu);
    struct chunk *ch;
    size_t idx, size;
    uintptr_t base;
    if (find_any_locked((uintptr_t)p, true, &ch, &idx, &base, &size) && base == (uintptr_t)p)
        free_found_locked(ch, idx, size);
    pthread_mutex_unlock(&mem_mu);
}

/* The base of an allocation (not of a VMM mapping: cuMemFree does not free those). */
bool emu_mem_is_base(rzcu_deviceptr p)
{
    pthread_mutex_lock(&mem_mu);
    struct chunk *ch;
    size_t idx, size;
    uintptr_t base;
    bool found = find_locked((uintptr_t)p, &ch, &idx, &base, &size) && base == (uintptr_t)p;
    pthread_mutex_unlock(&mem_mu);
    return found;
}

static struct chunk *vmm_chunk_locked(uintptr_t p);
static bool vmm_lookup_locked(struct chunk *ch, uintptr_t p, uintptr_t *base, size_t *size, int *device);
static bool vmm_range_ok_locked(struct chunk *ch, uintptr_t p, size_t n, unsigned need);

bool emu_mem_lookup(rzcu_deviceptr p, rzcu_deviceptr *pbase, size_t *psize)
{
    pthread_mutex_lock(&mem_mu);
    struct chunk *ch;
    size_t idx, size;
    uintptr_t base;
    bool found = find_locked((uintptr_t)p, &ch, &idx, &base, &size);
    if (!found && (ch = vmm_chunk_locked((uintptr_t)p))) /* a VMM mapping: cuMemGetAddressRange gives it */
        found = vmm_lookup_locked(ch, (uintptr_t)p, &base, &size, &(int){0});
    pthread_mutex_unlock(&mem_mu);
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
    pthread_mutex_lock(&mem_mu);
    struct chunk *ch;
    size_t idx, size;
    uintptr_t base;
    bool found = find_locked((uintptr_t)p, &ch, &idx, &base, &size);
    if (found) {
        *ctx = ch->kind == CHUNK_SLAB ? ch->blks[idx].ctx : ch->ctx;
        *device = ch->kind == CHUNK_SLAB ? ch->blks[idx].device : ch->device;
    } else if ((ch = vmm_chunk_locked((uintptr_t)p)) && vmm_lookup_locked(ch, (uintptr_t)p, &base, &size, device)) {
        *ctx = NULL; /* VMM memory belongs to its device, not to a context */
        found = true;
    }
    pthread_mutex_unlock(&mem_mu);
    return found;
}

/* need: the VMM access the range must have (CU_MEM_ACCESS_FLAGS_PROT_READ or _READWRITE). */
static bool range_access_locked(rzcu_deviceptr p, size_t n, unsigned need)
{
    struct chunk *ch;
    size_t idx, size;
    uintptr_t base;
    if (!find_locked((uintptr_t)p, &ch, &idx, &base, &size)) {
        ch = vmm_chunk_locked((uintptr_t)p);
        return ch && vmm_range_ok_locked(ch, (uintptr_t)p, n, need);
    }
    return n <= size - (size_t)((uintptr_t)p - base);
}

static bool range_ok_locked(rzcu_deviceptr p, size_t n)
{
    return range_access_locked(p, n, RZCU_MEM_ACCESS_FLAGS_PROT_READ);
}

bool emu_mem_range_ok(rzcu_deviceptr p, size_t n)
{
    pthread_mutex_lock(&mem_mu);
    bool ok = range_ok_locked(p, n);
    pthread_mutex_unlock(&mem_mu);
    return ok;
}

bool emu_mem_range_writable(rzcu_deviceptr p, size_t n)
{
    pthread_mutex_lock(&mem_mu);
    bool ok = range_access_locked(p, n, RZCU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    pthread_mutex_unlock(&mem_mu);
    return ok;
}

static size_t ranges_access(const rzcu_deviceptr *ptrs, const size_t *sizes, size_t count, unsigned need)
{
    size_t i = 0;
    pthread_mutex_lock(&mem_mu);
    for (; i < count; i++)
        if (sizes[i] && emu_mem_is_device_address((uintptr_t)ptrs[i]) &&
            !range_access_locked(ptrs[i], sizes[i], need))
            break;
    pthread_mutex_unlock(&mem_mu);
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

bool emu_mem_is_device_address(uintptr_t p)
{
    return arena && p >= arena && p < arena + (arena_chunks << CHUNK_SHIFT);
}

void emu_mem_free_context(struct CUctx_st *ctx)
{
    pthread_mutex_lock(&mem_mu);
    for (size_t i = 0; i < next_chunk;) {
        struct chunk *ch = table[i];
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
    pthread_mutex_unlock(&mem_mu);
}

void emu_mem_info(int device, size_t *free_bytes, size_t *total_bytes)
{
    pthread_mutex_lock(&mem_mu);
    *free_bytes = emu_cfg.mem_bytes - used[device];
    *total_bytes = emu_cfg.mem_bytes;
    pthread_mutex_unlock(&mem_mu);
}

/* ---- virtual memory management (cuMemAddressReserve, cuMemCreate, cuMemMap, cuMemSetAccess) ---- */
/*
 * A reservation is a run of arena chunks whose table entries point at one CHUNK_VMM descriptor; one granule
 * is one chunk, with one record: the mapping covering it and the access each device was given. Its pages
 * stay PROT_NONE except where a handle is mapped and access was granted, so any other access faults.
 * Physical memory (cuMemCreate) is a run of granules of one memfd, one file descriptor whatever the number
 * of handles; a mapping is a MAP_SHARED view of the handle's pages, so every mapping of a handle shows the
 * same bytes, and unmapping puts fresh PROT_NONE pages back. A handle's memory is freed (its pages punched
 * out of the file, its bytes given back to the device) once it is released and its last mapping is gone,
 * as the driver documents for cuMemRelease.
 */
_Static_assert(CUDA_EMU_VMM_GRANULARITY == CHUNK_SIZE, "one VMM granule is one arena chunk");

#define VMM_BUCKETS 1024
#define VMM_HANDLE_TAG 0x564d4d0000000000ull /* "VMM": a handle is never a small integer */

struct vmm_handle {
    struct vmm_handle *next; /* hash chain */
    rzcu_mem_generic_alloc_handle id;
    size_t size, first; /* bytes; its first granule in the file */
    int device;
    size_t maps;   /* its mappings */
    bool released; /* cuMemRelease called: the id is no longer valid */
};

struct vmm_map {
    uintptr_t base;
    size_t size;
    struct vmm_handle *h;
};

struct vmm_granule {
    struct vmm_map *map;                        /* NULL when not mapped */
    unsigned char access[CUDA_EMU_MAX_DEVICES]; /* CU_MEM_ACCESS_FLAGS_PROT_* given to each device */
};

struct vmm_resv {
    size_t size; /* as requested: cuMemAddressFree must repeat it */
    struct vmm_granule *g;
};

/* Address-ordered free runs of the physical file, below its size. */
struct run_list {
    struct run *v;
    size_t n, cap;
};

static struct vmm_handle *vmm_handles[VMM_BUCKETS];
static unsigned long long vmm_last_id;
static int phys_fd = -1;
static size_t phys_granules; /* the file's size */
static struct run_list phys_free;
static cuda_emu_vmm_usage_t vmm_usage;

/* ---- reservations in the arena ---- */

/* Takes the n chunks from start when all are free: inside one free run, or past the bump pointer. */
static bool chunks_take(size_t start, size_t n)
{
    if (n == 0 || start > arena_chunks || n > arena_chunks - start)
        return false;
    if (start >= next_chunk) {
        /* the skipped chunks become a free run; none ends at the bump pointer, so nothing to merge */
        if (start > next_chunk) {
            if (!runs_reserve(nfree_runs + 1))
                return false;
            free_runs[nfree_runs++] = (struct run){next_chunk, start - next_chunk};
        }
        next_chunk = start + n;
        return true;
    }
    for (size_t i = 0; i < nfree_runs && free_runs[i].start <= start; i++) {
        size_t end = free_runs[i].start + free_runs[i].len;
        if (n > end - start || start >= end)
            continue;
        size_t before = start - free_runs[i].start, after = end - (start + n);
        if (before && after) {
            if (!runs_reserve(nfree_runs + 1))
                return false;
            memmove(&free_runs[i + 2], &free_runs[i + 1], (nfree_runs - i - 1) * sizeof *free_runs);
            free_runs[i + 1] = (struct run){start + n, after};
            free_runs[i].len = before;
            nfree_runs++;
        } else if (before) {
            free_runs[i].len = before;
        } else if (after) {
            free_runs[i] = (struct run){start + n, after};
        } else {
            memmove(&free_runs[i], &free_runs[i + 1], (nfree_runs - i - 1) * sizeof *free_runs);
            nfree_runs--;
        }
        return true;
    }
    return false;
}

/* The first chunk index at or after i whose address is a multiple of align chunks (a power of two). */
static size_t chunk_align_up(size_t i, size_t align)
{
    size_t phase = ((arena >> CHUNK_SHIFT) + i) & (align - 1);
    return phase ? i + (align - phase) : i;
}

/* First index of a run of n free chunks starting at a multiple of align chunks, or SIZE_MAX. */
static size_t chunks_get_aligned(size_t n, size_t align)
{
    if (align <= 1)
        return chunks_get(n);
    for (size_t i = 0; i < nfree_runs; i++) {
        size_t s = chunk_align_up(free_runs[i].start, align), end = free_runs[i].start + free_runs[i].len;
        if (s < end && n <= end - s && chunks_take(s, n))
            return s;
    }
    size_t s = chunk_align_up(next_chunk, align);
    return s <= arena_chunks && n <= arena_chunks - s && chunks_take(s, n) ? s : SIZE_MAX;
}

/* The reservation containing p, or NULL. */
static struct chunk *vmm_chunk_locked(uintptr_t p)
{
    if (!emu_mem_is_device_address(p))
        return NULL;
    struct chunk *ch = table[(p - arena) >> CHUNK_SHIFT];
    return ch && ch->kind == CHUNK_VMM ? ch : NULL;
}

static size_t granule_index(const struct chunk *ch, uintptr_t p) { return (p - ch->base) >> CHUNK_SHIFT; }

/* [p, p + n) lies inside the reservation (p is inside it). */
static bool in_reservation(const struct chunk *ch, uintptr_t p, size_t n)
{
    return n <= (ch->nchunks << CHUNK_SHIFT) - (p - ch->base);
}

/* What any device may do: the host protection of the granule. */
static unsigned granule_access(const struct vmm_granule *g)
{
    unsigned a = 0;
    for (int d = 0; d < CUDA_EMU_MAX_DEVICES; d++)
        a |= g->access[d];
    return a;
}

static int host_prot(unsigned access)
{
    if ((access & RZCU_MEM_ACCESS_FLAGS_PROT_READWRITE) == RZCU_MEM_ACCESS_FLAGS_PROT_READWRITE)
        return PROT_READ | PROT_WRITE;
    return access & RZCU_MEM_ACCESS_FLAGS_PROT_READ ? PROT_READ : PROT_NONE;
}

static bool vmm_lookup_locked(struct chunk *ch, uintptr_t p, uintptr_t *base, size_t *size, int *device)
{
    struct vmm_map *m = ch->resv->g[granule_index(ch, p)].map;
    if (!m)
        return false;
    *base = m->base;
    *size = m->size;
    *device = m->h->device;
    return true;
}

/* [p, p + n) inside one mapping, every granule of it with the access `need` for some device. */
static bool vmm_range_ok_locked(struct chunk *ch, uintptr_t p, size_t n, unsigned need)
{
    struct vmm_map *m = ch->resv->g[granule_index(ch, p)].map;
    if (!m || n > m->size - (p - m->base))
        return false;
    if (n == 0)
        return true;
    for (size_t i = granule_index(ch, p), last = granule_index(ch, p + n - 1); i <= last; i++)
        if ((granule_access(&ch->resv->g[i]) & need) != need)
            return false;
    return true;
}

rzcu_result emu_vmm_reserve(size_t size, size_t alignment, rzcu_deviceptr hint, rzcu_deviceptr *out)
{
    size_t n = size / CHUNK_SIZE + (size % CHUNK_SIZE != 0);
    size_t align = alignment > CHUNK_SIZE ? alignment >> CHUNK_SHIFT : 1;
    struct chunk *ch = NULL;
    struct vmm_resv *resv = NULL;
    struct vmm_granule *g = NULL;
    size_t idx = SIZE_MAX;
    pthread_mutex_lock(&mem_mu);
    if (n <= arena_chunks && (ch = calloc(1, sizeof *ch)) && (resv = calloc(1, sizeof *resv)) &&
        (g = calloc(n, sizeof *g))) {
        /* the hint is honoured when it is a free, suitably aligned device range */
        uintptr_t h = (uintptr_t)hint;
        if (h && emu_mem_is_device_address(h) && ((h - arena) & (CHUNK_SIZE - 1)) == 0 &&
            (alignment == 0 || (h & (alignment - 1)) == 0) && chunks_take((h - arena) >> CHUNK_SHIFT, n))
            idx = (h - arena) >> CHUNK_SHIFT;
        if (idx == SIZE_MAX)
            idx = chunks_get_aligned(n, align);
    }
    if (idx == SIZE_MAX) {
        pthread_mutex_unlock(&mem_mu);
        free(g);
        free(resv);
        free(ch);
        return RZCUDA_ERROR_OUT_OF_MEMORY;
    }
    *resv = (struct vmm_resv){size, g};
    *ch = (struct chunk){.kind = CHUNK_VMM, .base = chunk_addr(idx), .nchunks = n, .resv = resv};
    for (size_t i = 0; i < n; i++)
        table[idx + i] = ch;
    vmm_usage.reserved_bytes += n << CHUNK_SHIFT;
    *out = ch->base;
    pthread_mutex_unlock(&mem_mu);
    return RZCUDA_SUCCESS;
}

/* ---- physical memory ---- */

/* Inserts [start, start + len) into an address-ordered run list, merging with its neighbours. */
static bool run_list_put(struct run_list *l, size_t start, size_t len)
{
    size_t i = 0;
    while (i < l->n && l->v[i].start < start)
        i++;
    bool merge_prev = i > 0 && l->v[i - 1].start + l->v[i - 1].len == start;
    bool merge_next = i < l->n && start + len == l->v[i].start;
    if (merge_prev && merge_next) {
        l->v[i - 1].len += len + l->v[i].len;
        memmove(&l->v[i], &l->v[i + 1], (l->n - i - 1) * sizeof *l->v);
        l->n--;
    } else if (merge_prev) {
        l->v[i - 1].len += len;
    } else if (merge_next) {
        l->v[i].start = start;
        l->v[i].len += len;
    } else {
        if (l->n == l->cap) {
            size_t cap = l->cap ? l->cap * 2 : 64;
            struct run *v = realloc(l->v, cap * sizeof *v);
            if (!v)
                return false;
            l->v = v;
            l->cap = cap;
        }
        memmove(&l->v[i + 1], &l->v[i], (l->n - i) * sizeof *l->v);
        l->v[i] = (struct run){start, len};
        l->n++;
    }
    return true;
}

/* First granule of n free granules of the physical file (grown as needed), or SIZE_MAX. */
static size_t phys_get(size_t n)
{
    for (size_t i = 0; i < phys_free.n; i++) {
        struct run *r = &phys_free.v[i];
        if (r->len < n)
            continue;
        size_t start = r->start;
        r->start += n;
        r->len -= n;
        if (r->len == 0) {
            memmove(r, r + 1, (phys_free.n - i - 1) * sizeof *r);
            phys_free.n--;
        }
        return start;
    }
    if (phys_fd < 0 && (phys_fd = memfd_create("cuda-emu-vmm", MFD_CLOEXEC)) < 0)
        return SIZE_MAX;
    if (n > ((size_t)INT64_MAX >> CHUNK_SHIFT) - phys_granules ||
        ftruncate(phys_fd, (off_t)((phys_granules + n) << CHUNK_SHIFT)) != 0)
        return SIZE_MAX;
    size_t start = phys_granules;
    phys_granules += n;
    return start;
}

static void phys_put(size_t start, size_t n)
{
    /* the pages go back to the system now, whatever becomes of the file offsets */
    fallocate(phys_fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)(start << CHUNK_SHIFT),
              (off_t)(n << CHUNK_SHIFT));
    if (start + n == phys_granules) {
        phys_granules = start;
        if (phys_free.n && phys_free.v[phys_free.n - 1].start + phys_free.v[phys_free.n - 1].len == start)
            phys_granules = phys_free.v[--phys_free.n].start;
        if (ftruncate(phys_fd, (off_t)(phys_granules << CHUNK_SHIFT)) != 0) {
            /* the file keeps a tail of holes: harmless, the next growth sets its size again */
        }
        return;
    }
    run_list_put(&phys_free, start, n); /* on failure those offsets are never reused: harmless */
}

static struct vmm_handle **handle_bucket(rzcu_mem_generic_alloc_handle id) { return &vmm_handles[id % VMM_BUCKETS]; }

/* A handle that was created and not released, or NULL. */
static struct vmm_handle *handle_find_locked(rzcu_mem_generic_alloc_handle id)
{
    for (struct vmm_handle *h = *handle_bucket(id); h; h = h->next)
        if (h->id == id)
            return h->released ? NULL : h;
    return NULL;
}

static void handle_free_locked(struct vmm_handle *h)
{
    struct vmm_handle **link = handle_bucket(h->id);
    while (*link != h)
        link = &(*link)->next;
    *link = h->next;
    phys_put(h->first, h->size >> CHUNK_SHIFT);
    used[h->device] -= h->size;
    vmm_usage.physical_bytes -= h->size;
    vmm_usage.allocations--;
    free(h);
}

rzcu_result emu_vmm_create(int device, size_t size, rzcu_mem_generic_alloc_handle *out)
{
    pthread_mutex_lock(&mem_mu);
    rzcu_result r = RZCUDA_ERROR_OUT_OF_MEMORY;
    struct vmm_handle *h = NULL;
    size_t first = SIZE_MAX;
    if (size <= emu_cfg.mem_bytes - used[device] && (h = calloc(1, sizeof *h)) &&
        (first = phys_get(size >> CHUNK_SHIFT)) != SIZE_MAX) {
        *h = (struct vmm_handle){.id = VMM_HANDLE_TAG | ++vmm_last_id, .size = size, .first = first,
                                 .device = device};
        h->next = *handle_bucket(h->id);
        *handle_bucket(h->id) = h;
        used[device] += size;
        vmm_usage.physical_bytes += size;
        vmm_usage.allocations++;
        *out = h->id;
        r = RZCUDA_SUCCESS;
    } else {
        free(h);
    }
    pthread_mutex_unlock(&mem_mu);
    return r;
}

/* ---- mappings ---- */

/* Unmaps m (a whole mapping of the reservation ch): fresh PROT_NONE pages, the handle loses a reference. */
static void unmap_locked(struct chunk *ch, struct vmm_map *m)
{
    decommit(m->base, m->size);
    for (size_t i = granule_index(ch, m->base), end = i + (m->size >> CHUNK_SHIFT); i < end; i++)
        ch->resv->g[i] = (struct vmm_granule){0};
    vmm_usage.mapped_bytes -= m->size;
    struct vmm_handle *h = m->h;
    free(m);
    if (--h->maps == 0 && h->released)
        handle_free_locked(h);
}

rzcu_result emu_vmm_release(rzcu_mem_generic_alloc_handle id)
{
    pthread_mutex_lock(&mem_mu);
    struct vmm_handle *h = handle_find_locked(id);
    if (h) {
        h->released = true; /* its mappings keep the memory until the last one goes */
        if (h->maps == 0)
            handle_free_locked(h);
    }
    pthread_mutex_unlock(&mem_mu);
    return h ? RZCUDA_SUCCESS : RZCUDA_ERROR_INVALID_VALUE;
}

rzcu_result emu_vmm_map(rzcu_deviceptr p, size_t size, size_t offset, rzcu_mem_generic_alloc_handle id)
{
    pthread_mutex_lock(&mem_mu);
    rzcu_result r = RZCUDA_ERROR_INVALID_VALUE;
    struct vmm_handle *h = handle_find_locked(id);
    struct chunk *ch = vmm_chunk_locked((uintptr_t)p);
    if (!h || offset > h->size || size > h->size - offset || !ch || !in_reservation(ch, (uintptr_t)p, size))
        goto out;
    size_t first = granule_index(ch, (uintptr_t)p), end = first + (size >> CHUNK_SHIFT);
    for (size_t i = first; i < end; i++)
        if (ch->resv->g[i].map) /* only unmapped parts of a reservation can be mapped */
            goto out;
    r = RZCUDA_ERROR_OUT_OF_MEMORY;
    struct vmm_map *m = malloc(sizeof *m);
    if (!m)
        goto out;
    /* mapped without access: cuMemSetAccess grants it */
    if (mmap((void *)(uintptr_t)p, size, PROT_NONE, MAP_SHARED | MAP_FIXED, phys_fd,
             (off_t)((h->first << CHUNK_SHIFT) + offset)) == MAP_FAILED) {
        decommit((uintptr_t)p, size); /* a failed MAP_FIXED may have left a hole: reserve it again */
        free(m);
        goto out;
    }
    *m = (struct vmm_map){(uintptr_t)p, size, h};
    for (size_t i = first; i < end; i++)
        ch->resv->g[i] = (struct vmm_granule){.map = m};
    h->maps++;
    vmm_usage.mapped_bytes += size;
    r = RZCUDA_SUCCESS;
out:
    pthread_mutex_unlock(&mem_mu);
    return r;
}

/* The range must be whole mappings, back to back (one or more), covering it exactly. */
rzcu_result emu_vmm_unmap(rzcu_deviceptr p, size_t size)
{
    pthread_mutex_lock(&mem_mu);
    rzcu_result r = RZCUDA_ERROR_INVALID_VALUE;
    struct chunk *ch = vmm_chunk_locked((uintptr_t)p);
    uintptr_t start = (uintptr_t)p;
    if (!ch || size == 0 || !in_reservation(ch, start, size))
        goto out;
    for (uintptr_t at = start; at - start < size;) {
        struct vmm_map *m = ch->resv->g[granule_index(ch, at)].map;
        if (!m || m->base != at || m->size > size - (at - start))
            goto out;
        at += m->size;
    }
    for (uintptr_t at = start; at - start < size;) {
        struct vmm_map *m = ch->resv->g[granule_index(ch, at)].map;
        at += m->size;
        unmap_locked(ch, m);
    }
    r = RZCUDA_SUCCESS;
out:
    pthread_mutex_unlock(&mem_mu);
    return r;
}

rzcu_result emu_vmm_address_free(rzcu_deviceptr p, size_t size)
{
    pthread_mutex_lock(&mem_mu);
    struct chunk *ch = vmm_chunk_locked((uintptr_t)p);
    if (!ch || ch->base != (uintptr_t)p || ch->resv->size != size) {
        pthread_mutex_unlock(&mem_mu);
        return RZCUDA_ERROR_INVALID_VALUE;
    }
    /* mappings left go with the range (the driver accepts a free of a range still mapped) */
    for (size_t i = 0; i < ch->nchunks; i++)
        if (ch->resv->g[i].map)
            unmap_locked(ch, ch->resv->g[i].map);
    size_t idx = (ch->base - arena) >> CHUNK_SHIFT;
    for (size_t i = 0; i < ch->nchunks; i++)
        table[idx + i] = NULL;
    chunks_put(idx, ch->nchunks);
    vmm_usage.reserved_bytes -= ch->nchunks << CHUNK_SHIFT;
    free(ch->resv->g);
    free(ch->resv);
    free(ch);
    pthread_mutex_unlock(&mem_mu);
    return RZCUDA_SUCCESS;
}

/* desc: count checked descriptors (device locations, known flags). The range must be fully mapped. */
rzcu_result emu_vmm_set_access(rzcu_deviceptr p, size_t size, const rzcu_mem_access_desc *desc, size_t count)
{
    pthread_mutex_lock(&mem_mu);
    rzcu_result r = RZCUDA_ERROR_INVALID_VALUE;
    struct chunk *ch = vmm_chunk_locked((uintptr_t)p);
    if (!ch || size == 0 || !in_reservation(ch, (uintptr_t)p, size))
        goto out;
    size_t first = granule_index(ch, (uintptr_t)p), end = first + (size >> CHUNK_SHIFT);
    struct vmm_granule *g = ch->resv->g;
    for (size_t i = first; i < end; i++)
        if (!g[i].map)
            goto out;
    for (size_t i = first; i < end; i++)
        for (size_t k = 0; k < count; k++)
            g[i].access[desc[k].location.id] = (unsigned char)desc[k].flags;
    r = RZCUDA_SUCCESS;
    for (size_t i = first; i < end;) { /* one mprotect per run of equal protection */
        int prot = host_prot(granule_access(&g[i]));
        size_t j = i + 1;
        while (j < end && host_prot(granule_access(&g[j])) == prot)
            j++;
        if (mprotect((void *)(ch->base + (i << CHUNK_SHIFT)), (j - i) << CHUNK_SHIFT, prot) != 0) {
            for (size_t k = i; k < j; k++) /* copies must not trust protection that was not applied */
                memset(g[k].access, 0, sizeof g[k].access);
            r = RZCUDA_ERROR_OUT_OF_MEMORY;
        }
        i = j;
    }
out:
    pthread_mutex_unlock(&mem_mu);
    return r;
}

void emu_vmm_usage(cuda_emu_vmm_usage_t *usage)
{
    pthread_mutex_lock(&mem_mu);
    *usage = vmm_usage;
    pthread_mutex_unlock(&mem_mu);
}
