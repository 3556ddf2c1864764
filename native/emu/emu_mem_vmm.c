/*
 * Emulated virtual memory management: reservations in the device arena, physical handles (one memfd),
 * mappings and access. The entry points are emu_vmm.c; allocations and lookups are emu_mem.c.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "emu_mem_internal.h"

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
_Static_assert(CUDA_EMU_VMM_GRANULARITY == CHUNK_SIZE, "one VMM granule is one emu_mem_arena chunk");

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
    if (n == 0 || start > emu_mem_arena_chunks || n > emu_mem_arena_chunks - start)
        return false;
    if (start >= emu_mem_next_chunk) {
        /* the skipped chunks become a free run; none ends at the bump pointer, so nothing to merge */
        if (start > emu_mem_next_chunk) {
            if (!emu_mem_runs_reserve(emu_mem_nfree_runs + 1))
                return false;
            emu_mem_free_runs[emu_mem_nfree_runs++] = (struct run){emu_mem_next_chunk, start - emu_mem_next_chunk};
        }
        emu_mem_next_chunk = start + n;
        return true;
    }
    for (size_t i = 0; i < emu_mem_nfree_runs && emu_mem_free_runs[i].start <= start; i++) {
        size_t end = emu_mem_free_runs[i].start + emu_mem_free_runs[i].len;
        if (n > end - start || start >= end)
            continue;
        size_t before = start - emu_mem_free_runs[i].start, after = end - (start + n);
        if (before && after) {
            if (!emu_mem_runs_reserve(emu_mem_nfree_runs + 1))
                return false;
            memmove(&emu_mem_free_runs[i + 2], &emu_mem_free_runs[i + 1], (emu_mem_nfree_runs - i - 1) * sizeof *emu_mem_free_runs);
            emu_mem_free_runs[i + 1] = (struct run){start + n, after};
            emu_mem_free_runs[i].len = before;
            emu_mem_nfree_runs++;
        } else if (before) {
            emu_mem_free_runs[i].len = before;
        } else if (after) {
            emu_mem_free_runs[i] = (struct run){start + n, after};
        } else {
            memmove(&emu_mem_free_runs[i], &emu_mem_free_runs[i + 1], (emu_mem_nfree_runs - i - 1) * sizeof *emu_mem_free_runs);
            emu_mem_nfree_runs--;
        }
        return true;
    }
    return false;
}

/* The first chunk index at or after i whose address is a multiple of align chunks (a power of two). */
static size_t chunk_align_up(size_t i, size_t align)
{
    size_t phase = ((emu_mem_arena >> CHUNK_SHIFT) + i) & (align - 1);
    return phase ? i + (align - phase) : i;
}

/* First index of a run of n free chunks starting at a multiple of align chunks, or SIZE_MAX. */
static size_t chunks_get_aligned(size_t n, size_t align)
{
    if (align <= 1)
        return emu_mem_chunks_get(n);
    for (size_t i = 0; i < emu_mem_nfree_runs; i++) {
        size_t s = chunk_align_up(emu_mem_free_runs[i].start, align), end = emu_mem_free_runs[i].start + emu_mem_free_runs[i].len;
        if (s < end && n <= end - s && chunks_take(s, n))
            return s;
    }
    size_t s = chunk_align_up(emu_mem_next_chunk, align);
    return s <= emu_mem_arena_chunks && n <= emu_mem_arena_chunks - s && chunks_take(s, n) ? s : SIZE_MAX;
}

/* The reservation containing p, or NULL. */
struct chunk *emu_mem_vmm_chunk_locked(uintptr_t p)
{
    if (!emu_mem_is_device_address(p))
        return NULL;
    struct chunk *ch = emu_mem_table[(p - emu_mem_arena) >> CHUNK_SHIFT];
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

bool emu_mem_vmm_lookup_locked(struct chunk *ch, uintptr_t p, uintptr_t *base, size_t *size, int *device)
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
bool emu_mem_vmm_range_ok_locked(struct chunk *ch, uintptr_t p, size_t n, unsigned need)
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
    pthread_mutex_lock(&emu_mem_mem_mu);
    if (n <= emu_mem_arena_chunks && (ch = calloc(1, sizeof *ch)) && (resv = calloc(1, sizeof *resv)) &&
        (g = calloc(n, sizeof *g))) {
        /* the hint is honoured when it is a free, suitably aligned device range */
        uintptr_t h = (uintptr_t)hint;
        if (h && emu_mem_is_device_address(h) && ((h - emu_mem_arena) & (CHUNK_SIZE - 1)) == 0 &&
            (alignment == 0 || (h & (alignment - 1)) == 0) && chunks_take((h - emu_mem_arena) >> CHUNK_SHIFT, n))
            idx = (h - emu_mem_arena) >> CHUNK_SHIFT;
        if (idx == SIZE_MAX)
            idx = chunks_get_aligned(n, align);
    }
    if (idx == SIZE_MAX) {
        pthread_mutex_unlock(&emu_mem_mem_mu);
        free(g);
        free(resv);
        free(ch);
        return RZCUDA_ERROR_OUT_OF_MEMORY;
    }
    *resv = (struct vmm_resv){size, g};
    *ch = (struct chunk){.kind = CHUNK_VMM, .base = emu_mem_chunk_addr(idx), .nchunks = n, .resv = resv};
    for (size_t i = 0; i < n; i++)
        emu_mem_table[idx + i] = ch;
    vmm_usage.reserved_bytes += n << CHUNK_SHIFT;
    *out = ch->base;
    pthread_mutex_unlock(&emu_mem_mem_mu);
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
    emu_mem_used[h->device] -= h->size;
    vmm_usage.physical_bytes -= h->size;
    vmm_usage.allocations--;
    free(h);
}

rzcu_result emu_vmm_create(int device, size_t size, rzcu_mem_generic_alloc_handle *out)
{
    pthread_mutex_lock(&emu_mem_mem_mu);
    rzcu_result r = RZCUDA_ERROR_OUT_OF_MEMORY;
    struct vmm_handle *h = NULL;
    size_t first = SIZE_MAX;
    if (size <= emu_cfg.mem_bytes - emu_mem_used[device] && (h = calloc(1, sizeof *h)) &&
        (first = phys_get(size >> CHUNK_SHIFT)) != SIZE_MAX) {
        *h = (struct vmm_handle){.id = VMM_HANDLE_TAG | ++vmm_last_id, .size = size, .first = first,
                                 .device = device};
        h->next = *handle_bucket(h->id);
        *handle_bucket(h->id) = h;
        emu_mem_used[device] += size;
        vmm_usage.physical_bytes += size;
        vmm_usage.allocations++;
        *out = h->id;
        r = RZCUDA_SUCCESS;
    } else {
        free(h);
    }
    pthread_mutex_unlock(&emu_mem_mem_mu);
    return r;
}

/* ---- mappings ---- */

/* Unmaps m (a whole mapping of the reservation ch): fresh PROT_NONE pages, the handle loses a reference. */
static void unmap_locked(struct chunk *ch, struct vmm_map *m)
{
    emu_mem_decommit(m->base, m->size);
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
    pthread_mutex_lock(&emu_mem_mem_mu);
    struct vmm_handle *h = handle_find_locked(id);
    if (h) {
        h->released = true; /* its mappings keep the memory until the last one goes */
        if (h->maps == 0)
            handle_free_locked(h);
    }
    pthread_mutex_unlock(&emu_mem_mem_mu);
    return h ? RZCUDA_SUCCESS : RZCUDA_ERROR_INVALID_VALUE;
}

rzcu_result emu_vmm_map(rzcu_deviceptr p, size_t size, size_t offset, rzcu_mem_generic_alloc_handle id)
{
    pthread_mutex_lock(&emu_mem_mem_mu);
    rzcu_result r = RZCUDA_ERROR_INVALID_VALUE;
    struct vmm_handle *h = handle_find_locked(id);
    struct chunk *ch = emu_mem_vmm_chunk_locked((uintptr_t)p);
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
        emu_mem_decommit((uintptr_t)p, size); /* a failed MAP_FIXED may have left a hole: reserve it again */
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
    pthread_mutex_unlock(&emu_mem_mem_mu);
    return r;
}

/* The range must be whole mappings, back to back (one or more), covering it exactly. */
rzcu_result emu_vmm_unmap(rzcu_deviceptr p, size_t size)
{
    pthread_mutex_lock(&emu_mem_mem_mu);
    rzcu_result r = RZCUDA_ERROR_INVALID_VALUE;
    struct chunk *ch = emu_mem_vmm_chunk_locked((uintptr_t)p);
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
    pthread_mutex_unlock(&emu_mem_mem_mu);
    return r;
}

rzcu_result emu_vmm_address_free(rzcu_deviceptr p, size_t size)
{
    pthread_mutex_lock(&emu_mem_mem_mu);
    struct chunk *ch = emu_mem_vmm_chunk_locked((uintptr_t)p);
    if (!ch || ch->base != (uintptr_t)p || ch->resv->size != size) {
        pthread_mutex_unlock(&emu_mem_mem_mu);
        return RZCUDA_ERROR_INVALID_VALUE;
    }
    /* mappings left go with the range (the driver accepts a free of a range still mapped) */
    for (size_t i = 0; i < ch->nchunks; i++)
        if (ch->resv->g[i].map)
            unmap_locked(ch, ch->resv->g[i].map);
    size_t idx = (ch->base - emu_mem_arena) >> CHUNK_SHIFT;
    for (size_t i = 0; i < ch->nchunks; i++)
        emu_mem_table[idx + i] = NULL;
    emu_mem_chunks_put(idx, ch->nchunks);
    vmm_usage.reserved_bytes -= ch->nchunks << CHUNK_SHIFT;
    free(ch->resv->g);
    free(ch->resv);
    free(ch);
    pthread_mutex_unlock(&emu_mem_mem_mu);
    return RZCUDA_SUCCESS;
}

/* desc: count checked descriptors (device locations, known flags). The range must be fully mapped. */
rzcu_result emu_vmm_set_access(rzcu_deviceptr p, size_t size, const rzcu_mem_access_desc *desc, size_t count)
{
    pthread_mutex_lock(&emu_mem_mem_mu);
    rzcu_result r = RZCUDA_ERROR_INVALID_VALUE;
    struct chunk *ch = emu_mem_vmm_chunk_locked((uintptr_t)p);
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
    pthread_mutex_unlock(&emu_mem_mem_mu);
    return r;
}

void emu_vmm_usage(cuda_emu_vmm_usage_t *usage)
{
    pthread_mutex_lock(&emu_mem_mem_mu);
    *usage = vmm_usage;
    pthread_mutex_unlock(&emu_mem_mem_mu);
}

