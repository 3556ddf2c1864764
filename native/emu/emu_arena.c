/*
 * The emulated device's address space: one large range reserved (PROT_NONE, MAP_NORESERVE) and carved into
 * 2 MiB chunks, with a flat table mapping every chunk to its descriptor (emu_mem_internal.h), so address ->
 * allocation is O(1). Chunk runs are handed out by a bump pointer plus an address-ordered list of free runs;
 * committed pages are read-write and in core files, decommitted ones fresh PROT_NONE pages. What the chunks
 * hold: allocations (emu_mem.c) and virtual memory reservations (emu_mem_vmm.c).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "emu_mem_internal.h"

pthread_mutex_t emu_mem_mem_mu = PTHREAD_MUTEX_INITIALIZER;
uintptr_t emu_mem_arena;
size_t emu_mem_arena_chunks;
size_t emu_mem_next_chunk;
struct chunk **emu_mem_table;
struct run *emu_mem_free_runs;
size_t emu_mem_nfree_runs;
static size_t free_runs_cap;
size_t emu_mem_used[CUDA_EMU_MAX_DEVICES];

rzcu_result emu_mem_init(void)
{
    pthread_mutex_lock(&emu_mem_mem_mu);
    rzcu_result r = RZCUDA_SUCCESS;
    if (!emu_mem_arena) {
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
            emu_mem_table = calloc(bytes >> CHUNK_SHIFT, sizeof *emu_mem_table);
            if (!emu_mem_table) {
                munmap((void *)start, bytes);
                break;
            }
            /* keep the reservation out of core files (gcore and the kernel honour this); committed memory
             * is marked dumpable again, so device memory contents are in cores */
            madvise((void *)start, bytes, MADV_DONTDUMP);
            emu_mem_arena = start;
            emu_mem_arena_chunks = bytes >> CHUNK_SHIFT;
            break;
        }
        if (!emu_mem_arena) {
            fprintf(stderr, "cuda-emu: warning: cannot reserve address space for device memory\n");
            r = RZCUDA_ERROR_OUT_OF_MEMORY;
        }
    }
    pthread_mutex_unlock(&emu_mem_mem_mu);
    return r;
}

/* ---- chunk runs ---- */

bool emu_mem_runs_reserve(size_t n)
{
    if (n <= free_runs_cap)
        return true;
    size_t cap = free_runs_cap ? free_runs_cap * 2 : 64;
    while (cap < n)
        cap *= 2;
    struct run *r = realloc(emu_mem_free_runs, cap * sizeof *r);
    if (!r)
        return false;
    emu_mem_free_runs = r;
    free_runs_cap = cap;
    return true;
}

/* First index of a run of n chunks, or SIZE_MAX. */
size_t emu_mem_chunks_get(size_t n)
{
    for (size_t i = 0; i < emu_mem_nfree_runs; i++) {
        if (emu_mem_free_runs[i].len >= n) {
            size_t start = emu_mem_free_runs[i].start;
            emu_mem_free_runs[i].start += n;
            emu_mem_free_runs[i].len -= n;
            if (emu_mem_free_runs[i].len == 0) {
                memmove(&emu_mem_free_runs[i], &emu_mem_free_runs[i + 1], (emu_mem_nfree_runs - i - 1) * sizeof *emu_mem_free_runs);
                emu_mem_nfree_runs--;
            }
            return start;
        }
    }
    if (n > emu_mem_arena_chunks - emu_mem_next_chunk)
        return SIZE_MAX;
    size_t start = emu_mem_next_chunk;
    emu_mem_next_chunk += n;
    return start;
}

void emu_mem_chunks_put(size_t start, size_t n)
{
    size_t i = 0;
    while (i < emu_mem_nfree_runs && emu_mem_free_runs[i].start < start)
        i++;
    bool merge_prev = i > 0 && emu_mem_free_runs[i - 1].start + emu_mem_free_runs[i - 1].len == start;
    bool merge_next = i < emu_mem_nfree_runs && start + n == emu_mem_free_runs[i].start;
    if (merge_prev && merge_next) {
        emu_mem_free_runs[i - 1].len += n + emu_mem_free_runs[i].len;
        memmove(&emu_mem_free_runs[i], &emu_mem_free_runs[i + 1], (emu_mem_nfree_runs - i - 1) * sizeof *emu_mem_free_runs);
        emu_mem_nfree_runs--;
    } else if (merge_prev) {
        emu_mem_free_runs[i - 1].len += n;
    } else if (merge_next) {
        emu_mem_free_runs[i].start = start;
        emu_mem_free_runs[i].len += n;
    } else {
        if (!emu_mem_runs_reserve(emu_mem_nfree_runs + 1))
            return; /* the address range leaks; harmless */
        memmove(&emu_mem_free_runs[i + 1], &emu_mem_free_runs[i], (emu_mem_nfree_runs - i) * sizeof *emu_mem_free_runs);
        emu_mem_free_runs[i] = (struct run){start, n};
        emu_mem_nfree_runs++;
    }
    /* give the tail back to the bump pointer */
    if (emu_mem_nfree_runs && emu_mem_free_runs[emu_mem_nfree_runs - 1].start + emu_mem_free_runs[emu_mem_nfree_runs - 1].len == emu_mem_next_chunk) {
        emu_mem_next_chunk = emu_mem_free_runs[emu_mem_nfree_runs - 1].start;
        emu_mem_nfree_runs--;
    }
}

uintptr_t emu_mem_chunk_addr(size_t idx) { return emu_mem_arena + (idx << CHUNK_SHIFT); }

bool emu_mem_commit(uintptr_t addr, size_t len)
{
    if (mprotect((void *)addr, len, PROT_READ | PROT_WRITE) != 0)
        return false;
    madvise((void *)addr, len, MADV_DODUMP);
    return true;
}

void emu_mem_decommit(uintptr_t addr, size_t len)
{
    /* replace the pages by fresh inaccessible ones: memory released, later accesses fault */
    if (mmap((void *)addr, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0) ==
        MAP_FAILED) {
        madvise((void *)addr, len, MADV_DONTNEED);
        mprotect((void *)addr, len, PROT_NONE);
    }
    madvise((void *)addr, len, MADV_DONTDUMP);
}

bool emu_mem_is_device_address(uintptr_t p)
{
    return emu_mem_arena && p >= emu_mem_arena && p < emu_mem_arena + (emu_mem_arena_chunks << CHUNK_SHIFT);
}
