/*
 * Emulated device memory's internals, shared by the arena of 2 MiB chunks (emu_arena.c) and its two users:
 * allocations (emu_mem.c: slabs, large allocations, lookups) and virtual memory management (emu_mem_vmm.c:
 * reservations, physical handles, mappings, access). Private to those three files; the rest of the emulator
 * uses emu_internal.h.
 */
#ifndef REDZONE_EMU_MEM_INTERNAL_H
#define REDZONE_EMU_MEM_INTERNAL_H

#include "emu_internal.h"

#define CHUNK_SHIFT 21
#define CHUNK_SIZE ((uintptr_t)1 << CHUNK_SHIFT)

struct blk {
    size_t size;          /* requested size; 0 when free */
    struct CUctx_st *ctx; /* owner */
    int device;           /* whose memory it is */
    bool free_pending;    /* cuMemFreeAsync called, the stream has not reached the free yet; or graph
                           * memory not allocated now */
    uint64_t graph;       /* graph memory: its id (emu_graph_nodes.c); 0 for other allocations */
    uint64_t serial;      /* which allocation this is (never reused: an IPC handle names it) */
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
    uint64_t graph;
    uint64_t serial;
    /* vmm: a reservation of nchunks chunks from base */
    struct vmm_resv *resv;
};

struct run {
    size_t start, len; /* in chunks */
};

/* The arena and its chunk table (emu_arena.c); every field under emu_mem_mem_mu. */
extern pthread_mutex_t emu_mem_mem_mu;
extern uintptr_t emu_mem_arena;
extern size_t emu_mem_arena_chunks;
extern size_t emu_mem_next_chunk;
extern struct chunk **emu_mem_table;
extern struct run *emu_mem_free_runs;
extern size_t emu_mem_nfree_runs;
extern size_t emu_mem_used[CUDA_EMU_MAX_DEVICES];
uintptr_t emu_mem_chunk_addr(size_t idx);
size_t emu_mem_chunks_get(size_t n);
void emu_mem_chunks_put(size_t start, size_t n);
/* Pages made read-write and dumpable (false: mprotect failed); made inaccessible and released again. */
bool emu_mem_commit(uintptr_t addr, size_t len);
void emu_mem_decommit(uintptr_t addr, size_t len);
bool emu_mem_runs_reserve(size_t n);

/* Reservations (emu_mem_vmm.c), for the allocation half's lookups and range checks. */
struct chunk *emu_mem_vmm_chunk_locked(uintptr_t p);
bool emu_mem_vmm_lookup_locked(struct chunk *ch, uintptr_t p, uintptr_t *base, size_t *size, int *device);
bool emu_mem_vmm_range_ok_locked(struct chunk *ch, uintptr_t p, size_t n, unsigned need);

#endif /* REDZONE_EMU_MEM_INTERNAL_H */
