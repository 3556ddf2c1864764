/*
 * Blocks of the program's own memory pools in the quarantine (issue 32 item 5): a block from
 * cuMemAllocFromPoolAsync is held at its free like any other, and what the pool says of itself stays as
 * without redzone where the program reads it. For that the quarantine must know each held block's pool: the
 * allocation path notes pointer -> pool here (a table of the live pool allocations, only while the quarantine
 * is on), the free takes the note, and the held block carries its pool as its release argument. The
 * interposed pool calls (interpose/hooks_vmm.c) then ask: cuMemPoolGetAttribute(USED_MEM_CURRENT) is the
 * driver's answer less the bytes held for that pool, cuMemPoolTrimTo and cuMemPoolDestroy first give the
 * pool's held blocks back (checked, then freed), so a trim releases them and a destroy finds none
 * outstanding. A held block leaves by cuMemFree of its base, as every held block does (quarantine.c), which
 * returns it to its pool.
 */
#include <pthread.h>
#include <stdlib.h>

#include "common.h"
#include "quarantine.h"
#include "fork.h"
#include "memory.h"
#include "options.h"
#include "report.h"
#include "sticky.h"

/* Open addressing, linear probing, power-of-two capacity; ptr 0 is an empty slot, ptr 1 a removed one. */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static struct slot {
    uint64_t ptr;
    void *pool;
} *g_slots;
static size_t g_cap, g_used; /* g_used counts removed slots too, until the table is rebuilt */
static _Atomic size_t g_live;

#define GONE 1

static size_t hash(uint64_t p, size_t cap) { return (size_t)((p >> 8) * 0x9E3779B97F4A7C15ull) & (cap - 1); }

static int rebuild_locked(size_t cap) {
    struct slot *s = calloc(cap, sizeof *s);
    if (s == NULL)
        return 0;
    size_t used = 0;
    for (size_t i = 0; i < g_cap; i++) {
        if (g_slots[i].ptr <= GONE)
            continue;
        size_t h = hash(g_slots[i].ptr, cap);
        while (s[h].ptr)
            h = (h + 1) & (cap - 1);
        s[h] = g_slots[i];
        used++;
    }
    free(g_slots);
    g_slots = s;
    g_cap = cap;
    g_used = used;
    return 1;
}

static void fork_child(void) { pthread_mutex_init(&g_mu, NULL); }
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static void arm(void) { rz__fork_register(NULL, NULL, fork_child); }

void rz__quarantine_pool_note(uint64_t ptr, void *pool) {
    if (rz__options()->quarantine == 0 || ptr <= GONE)
        return;
    pthread_once(&g_once, arm);
    pthread_mutex_lock(&g_mu);
    if ((g_used + 1) * 2 > g_cap && !rebuild_locked(g_cap ? (g_live * 4 > g_cap ? g_cap * 2 : g_cap) : 256)) {
        pthread_mutex_unlock(&g_mu);
        static atomic_int warned;
        if (!atomic_exchange(&warned, 1))
            rz__warn("quarantine: out of host memory for the table of pool allocations; their frees are not held");
        return;
    }
    size_t h = hash(ptr, g_cap);
    while (g_slots[h].ptr > GONE && g_slots[h].ptr != ptr)
        h = (h + 1) & (g_cap - 1);
    if (g_slots[h].ptr != ptr) {
        if (g_slots[h].ptr == 0)
            g_used++;
        atomic_fetch_add_explicit(&g_live, 1, memory_order_relaxed);
    }
    g_slots[h] = (struct slot){ptr, pool};
    pthread_mutex_unlock(&g_mu);
}

int rz__quarantine_pool_take(uint64_t ptr, void **pool) {
    if (atomic_load_explicit(&g_live, memory_order_relaxed) == 0 || ptr <= GONE)
        return 0;
    int found = 0;
    pthread_mutex_lock(&g_mu);
    if (g_cap) {
        size_t h = hash(ptr, g_cap);
        while (g_slots[h].ptr && g_slots[h].ptr != ptr)
            h = (h + 1) & (g_cap - 1);
        if (g_slots[h].ptr == ptr) {
            *pool = g_slots[h].pool;
            g_slots[h].ptr = GONE;
            atomic_fetch_sub_explicit(&g_live, 1, memory_order_relaxed);
            found = 1;
        }
    }
    pthread_mutex_unlock(&g_mu);
    return found;
}

/* The release of a held pool block: back to its pool (the driver's cuMemFree of pool memory). */
void rz__quarantine_pool_release(uint64_t base, uint64_t bytes, void *pool) {
    (void)bytes;
    (void)pool;
    rzcu_result r = rz__dev_mem_free(base);
    if (r != RZCUDA_SUCCESS && !rz__sticky_note(r))
        rz__warn("a pool block at 0x%llx: freeing it as it left the quarantine failed with %s",
                 (unsigned long long)base, rz__cu_name(r));
}
