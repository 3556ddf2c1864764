/*
 * The stack depot (METRALE_REDZONE_STACKS): every distinct allocation stack is stored once, and a zone keeps
 * a 4-byte id of it (as ASan's StackDepot does). A program allocates from a few thousand call sites at
 * most, so a million zones cost 4 MB of ids plus a few hundred KiB of stacks, where a slot of 32 frames
 * per zone cost 264 bytes each.
 *
 * Layout, read by the debugger from the exported state (live or a core file): stacks lie in chunks of
 * 2^RZ_DEPOT_SHIFT words (RZ_STATE.depot_chunks); a stack is a header word (its frame count in the low 32
 * bits, its hash in the high 32) followed by its return addresses, never split across chunks. Its id is
 * its word position (chunk << RZ_DEPOT_SHIFT | word) plus one; 0 is "no stack".
 *
 * Concurrency: stacks are only ever appended, and never change once written; an id is handed out only
 * after its stack is complete, under the depot's mutex, and reaches other threads through the registry
 * lock, so readers (the scans, the free-time check, the report after the lock) read without a lock. A
 * hash table of ids (open addressing, its memory mmap'd) finds an existing stack. Nothing is ever freed.
 */
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>

#include "common.h"
#include "depot.h"
#include "fork.h"
#include "state.h"
#include "symbolize.h"

#define CHUNK_WORDS ((uint64_t)1 << RZ_DEPOT_SHIFT)

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t g_next;      /* the next free word position */
static uint32_t *g_table;    /* ids, 0 = empty */
static size_t g_table_cap;   /* a power of two */
static size_t g_stacks;      /* stacks stored */
static uint64_t g_table_bytes;

static uint32_t hash_frames(const uint64_t *frames, uint32_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ n;
    for (uint32_t i = 0; i < n; i++) {
        h ^= frames[i];
        h *= 0xff51afd7ed558ccdull;
        h ^= h >> 32;
    }
    return (uint32_t)h;
}

static const uint64_t *at(uint32_t id) {
    uint64_t w = (uint64_t)id - 1;
    const uint64_t *chunk = RZ_STATE.depot_chunks[w >> RZ_DEPOT_SHIFT];
    return chunk ? chunk + (w & (CHUNK_WORDS - 1)) : NULL;
}

uint32_t rz__depot_get(uint32_t id, const uint64_t **frames) {
    *frames = NULL;
    if (id == 0 || ((uint64_t)id - 1) >> RZ_DEPOT_SHIFT >= RZ_DEPOT_CHUNKS)
        return 0;
    const uint64_t *e = at(id);
    if (e == NULL)
        return 0;
    *frames = e + 1;
    return (uint32_t)(e[0] & 0xffffffffu);
}

/* Double the table (or make the first one), reinserting every id. Lock held. */
static int grow_table(void) {
    size_t cap = g_table_cap ? 2 * g_table_cap : 1024;
    uint32_t *t = mmap(NULL, cap * sizeof *t, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (t == MAP_FAILED)
        return 0;
    for (size_t i = 0; i < g_table_cap; i++) {
        uint32_t id = g_table[i];
        if (id == 0)
            continue;
        size_t j = (at(id)[0] >> 32) & (cap - 1);
        while (t[j])
            j = (j + 1) & (cap - 1);
        t[j] = id;
    }
    if (g_table)
        munmap(g_table, g_table_cap * sizeof *g_table);
    g_table = t;
    g_table_cap = cap;
    g_table_bytes = cap * sizeof *t;
    return 1;
}

/* Room for an entry of `words` words: its position, or UINT64_MAX when the depot is full. Lock held. */
static uint64_t place(uint64_t words) {
    uint64_t w = g_next;
    if ((w & (CHUNK_WORDS - 1)) + words > CHUNK_WORDS)
        w = (w | (CHUNK_WORDS - 1)) + 1; /* would straddle two chunks: start the next one */
    uint64_t chunk = w >> RZ_DEPOT_SHIFT;
    if (chunk >= RZ_DEPOT_CHUNKS)
        return UINT64_MAX;
    if (RZ_STATE.depot_chunks[chunk] == NULL) {
        void *p = mmap(NULL, CHUNK_WORDS * 8, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            return UINT64_MAX;
        RZ_STATE.depot_chunks[chunk] = p;
    }
    g_next = w + words;
    return w;
}

/* A child forked while another thread held the lock: the lock is the child's own now (an entry being added
 * then is not in the table yet: at worst its words are lost). */
static void after_fork(void) { pthread_mutex_init(&g_lock, NULL); }
static void register_fork_handler(void) { rz__fork_register(NULL, NULL, after_fork); }
static pthread_once_t g_fork_once = PTHREAD_ONCE_INIT;

uint32_t rz__depot_put(const uint64_t *frames, uint32_t n) {
    if (n == 0)
        return 0;
    pthread_once(&g_fork_once, register_fork_handler);
    if (n > RZ_STACK_MAX)
        n = RZ_STACK_MAX;
    uint32_t h = hash_frames(frames, n);
    uint32_t id = 0;
    pthread_mutex_lock(&g_lock);
    if (2 * (g_stacks + 1) > g_table_cap && !grow_table())
        goto out;
    size_t j = h & (g_table_cap - 1);
    for (; g_table[j]; j = (j + 1) & (g_table_cap - 1)) {
        const uint64_t *e = at(g_table[j]);
        if ((uint32_t)(e[0] >> 32) == h && (uint32_t)e[0] == n && memcmp(e + 1, frames, n * sizeof *frames) == 0) {
            id = g_table[j];
            goto out;
        }
    }
    uint64_t w = place(1 + (uint64_t)n);
    if (w == UINT64_MAX)
        goto out;
    uint64_t *e = RZ_STATE.depot_chunks[w >> RZ_DEPOT_SHIFT] + (w & (CHUNK_WORDS - 1));
    memcpy(e + 1, frames, n * sizeof *frames);
    e[0] = (uint64_t)h << 32 | n;
    id = (uint32_t)(w + 1);
    g_table[j] = id;
    g_stacks++;
out:
    pthread_mutex_unlock(&g_lock);
    return id;
}

uint64_t rz__depot_bytes(void) {
    pthread_mutex_lock(&g_lock);
    uint64_t bytes = g_next * 8 + g_table_bytes;
    pthread_mutex_unlock(&g_lock);
    return bytes;
}

uint32_t rz__depot_symbolize(uint32_t id) {
    const uint64_t *kept;
    uint32_t n = id ? rz__depot_get(id, &kept) : 0;
    void *frames[RZ_STACK_MAX];
    n = n < RZ_STACK_MAX ? n : RZ_STACK_MAX;
    for (uint32_t i = 0; i < n; i++)
        frames[i] = (void *)(uintptr_t)kept[i];
    if (n)
        rz__symbolize_frames(frames, (int)n);
    return n;
}
