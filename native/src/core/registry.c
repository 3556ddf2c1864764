/*
 * The zone registry: every live allocation made through redzone, found by user pointer in O(1) average
 * (chained hash of node ids) and walked in creation-index order (doubly linked list kept sorted on insert;
 * inserts land at the tail except when threads race between taking an index and registering, so the
 * backwards walk is O(1) amortised). Nodes live in fixed 64Ki-node chunks that never move, addressed by
 * 32-bit ids, so a node costs 56 bytes plus 4 bytes of bucket at load factor <= 1.
 *
 * Concurrency: one mutex serialises writers and scans. The sequence word in the state block is odd while
 * a change is in progress, so a debugger reading a stopped process can tell a torn view from a stable one
 * without taking the lock.
 */
#include <errno.h>
#include <linux/futex.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "registry.h"
#include "depot.h"
#include "rz_annotate.h"
#include "state.h"
#include "stats.h"

#define CHUNK_MASK (RZ_CHUNK_NODES - 1u)

/* The registry lock: a three-state futex lock (0 free, 1 held, 2 held with waiters), a few instructions when
 * uncontended; every allocation and free takes it once. */
/* The lock word lives in the state block (RZ_STATE.lock) so a debugger can see it is held. */
#define g_lock (RZ_STATE.lock)
static uint32_t *g_buckets;     /* node id + 1, 0 = empty */
static uint32_t g_bucket_bits;  /* log2 of the bucket count; 0 = no table yet */
static uint64_t g_grow_at;      /* zone count that makes the table grow: the bucket count (0: no table) */
static uint32_t g_nodes_used;   /* ids handed out so far (high-water mark) */
static uint32_t g_free_head;    /* unused node id + 1 */

/* Zones whose band is still to be installed (METRALE_REDZONE_INSTALL=lazy): node ids, oldest first. The
 * count is read without the lock by the hooks' cheap "anything to install?" test. */
static uint32_t *g_pending;
static uint32_t g_pending_cap;
static _Atomic uint32_t g_npending;
/* The entries also hold stale ones (zones freed, in any order, while they waited). Nothing but a device
 * operation forces an install, so program order (LIFO, FIFO, random) makes no driver call; the list is
 * compacted when it fills, and grows only when that freed less than half of it: O(1) amortised a step, and
 * at most about twice the pending zones (no count of live pending zones on the allocation path). */

static long futex(_Atomic uint32_t *word, int op, uint32_t val, const struct timespec *timeout) {
    return syscall(SYS_futex, word, op, val, timeout, NULL, 0);
}

/* Wait for the lock; until is an absolute CLOCK_MONOTONIC deadline or NULL. RZ_OK or RZ_EBUSY. */
static int lock_slow(const struct timespec *until) {
    uint32_t c = atomic_exchange_explicit(&g_lock, 2, memory_order_acquire);
    while (c != 0) {
        struct timespec left, *timeout = NULL;
        if (until) {
            struct timespec now;
            clock_gettime(CLOCK_MONOTONIC, &now);
            left.tv_sec = until->tv_sec - now.tv_sec;
            left.tv_nsec = until->tv_nsec - now.tv_nsec;
            if (left.tv_nsec < 0) {
                left.tv_sec--;
                left.tv_nsec += 1000000000L;
            }
            if (left.tv_sec < 0)
                return RZ_EBUSY;
            timeout = &left;
        }
        if (futex(&g_lock, FUTEX_WAIT_PRIVATE, 2, timeout) != 0 && errno == ETIMEDOUT && until)
            return RZ_EBUSY;
        c = atomic_exchange_explicit(&g_lock, 2, memory_order_acquire);
    }
    return RZ_OK;
}

/* Times the lock was taken (tests assert how often a free takes it): a plain counter, changed only by the
 * lock's holder, so one instruction and no atomic. */
static uint64_t g_locks;

uint64_t rz__registry_locks_taken(void) { return __atomic_load_n(&g_locks, __ATOMIC_RELAXED); }

void rz__registry_lock(void) {
    uint32_t free_ = 0;
    if (!atomic_compare_exchange_strong_explicit(&g_lock, &free_, 1, memory_order_acquire, memory_order_relaxed))
        lock_slow(NULL);
    RZ_ANNOTATE_LOCK_ACQUIRED(&g_lock);
    g_locks++;
}

int rz__registry_lock_timed(unsigned timeout_ms) {
    uint32_t free_ = 0;
    if (atomic_compare_exchange_strong_explicit(&g_lock, &free_, 1, memory_order_acquire, memory_order_relaxed)) {
        RZ_ANNOTATE_LOCK_ACQUIRED(&g_lock);
        g_locks++;
        return RZ_OK;
    }
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += timeout_ms / 1000;
    until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    int rc = lock_slow(&until);
    if (rc == RZ_OK) {
        RZ_ANNOTATE_LOCK_ACQUIRED(&g_lock);
        g_locks++;
    }
    return rc;
}

void rz__registry_unlock(void) {
    RZ_ANNOTATE_LOCK_RELEASED(&g_lock);
    if (atomic_fetch_sub_explicit(&g_lock, 1, memory_order_release) != 1) {
        atomic_store_explicit(&g_lock, 0, memory_order_release);
        futex(&g_lock, FUTEX_WAKE_PRIVATE, 1, NULL);
    }
}

/* Set under the lock by the launch policy's first check on the device (read under the lock). */
static rz_registry_observer_fn *g_observer;

void rz__registry_observe_locked(rz_registry_observer_fn *fn) { g_observer = fn; }

static inline rz_zone_node_t *node_at(uint32_t id1) {
    uint32_t id = id1 - 1;
    return &RZ_STATE.chunks[id >> RZ_CHUNK_SHIFT][id & CHUNK_MASK];
}


static inline uint32_t bucket_of(uint64_t ptr) {
    return (uint32_t)(((ptr >> 4) * UINT64_C(0x9E3779B97F4A7C15)) >> (64 - g_bucket_bits));
}

static void seq_begin(void) { atomic_fetch_add_explicit(&RZ_STATE.seq, 1, memory_order_release); }
static void seq_end(void) { atomic_fetch_add_explicit(&RZ_STATE.seq, 1, memory_order_release); }

__attribute__((cold, noinline)) static int grow_buckets(void) {
    uint32_t bits = g_bucket_bits ? g_bucket_bits + 1 : 10;
    uint32_t *nb = calloc((size_t)1 << bits, sizeof *nb);
    if (nb == NULL)
        return RZ_ENOMEM;
    uint32_t *old = g_buckets;
    g_buckets = nb;
    g_bucket_bits = bits;
    g_grow_at = (uint64_t)1 << bits;
    for (uint32_t id1 = RZ_STATE.head; id1; id1 = node_at(id1)->next) {
        rz_zone_node_t *n = node_at(id1);
        uint32_t b = bucket_of(n->ptr);
        n->hnext = g_buckets[b];
        g_buckets[b] = id1;
    }
    free(old);
    return RZ_OK;
}

/* Drop stale entries (freed zones, and second entries of a node reused while its old entry waited),
 * keeping the order. RZ_ZONE_QUEUED marks a node already kept during the pass. Lock held. */
__attribute__((cold, noinline)) static uint32_t compact_pending(void) {
    uint32_t n = atomic_load_explicit(&g_npending, memory_order_relaxed), k = 0;
    for (uint32_t i = 0; i < n; i++) {
        rz_zone_node_t *z = node_at(g_pending[i]);
        if (z->state != RZ_ZONE_LIVE || !(z->flags & RZ_ZONE_PENDING) || (z->flags & RZ_ZONE_QUEUED))
            continue;
        z->flags |= RZ_ZONE_QUEUED;
        g_pending[k++] = g_pending[i];
    }
    for (uint32_t i = 0; i < k; i++)
        node_at(g_pending[i])->flags &= (uint8_t)~RZ_ZONE_QUEUED;
    atomic_store_explicit(&g_npending, k, memory_order_relaxed);
    return k;
}

__attribute__((cold, noinline)) static int grow_pending(void) {
    if (g_pending_cap && compact_pending() <= g_pending_cap / 2)
        return RZ_OK;
    uint32_t cap = g_pending_cap ? 2 * g_pending_cap : 1024;
    uint32_t *p = realloc(g_pending, cap * sizeof *p);
    if (p == NULL)
        return RZ_ENOMEM;
    g_pending = p;
    g_pending_cap = cap;
    return RZ_OK;
}

/* A fresh chunk of nodes (3.5 MiB of address space, touched as used). */
__attribute__((cold, noinline)) static int map_chunk(uint32_t chunk) {
    void *p = mmap(NULL, sizeof(rz_zone_node_t) * RZ_CHUNK_NODES, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return RZ_ENOMEM;
    RZ_STATE.chunks[chunk] = p;
    return RZ_OK;
}

static inline __attribute__((always_inline)) uint32_t take_node(void) {
    if (g_free_head) {
        uint32_t id1 = g_free_head;
        g_free_head = node_at(id1)->hnext;
        return id1;
    }
    uint32_t id = g_nodes_used;
    uint32_t chunk = id >> RZ_CHUNK_SHIFT;
    if (chunk >= RZ_MAX_CHUNKS)
        return 0;
    /* mmap rather than malloc: zero-filled, and untouched pages cost nothing. */
    if (RZ_UNLIKELY(RZ_STATE.chunks[chunk] == NULL) && map_chunk(chunk) != RZ_OK)
        return 0;
    g_nodes_used++;
    return id + 1;
}

/* Unlink node id1 (reached through *link in its hash chain) and put it on the free list. Lock held, inside
 * seq_begin/seq_end. */
static inline __attribute__((always_inline)) void unlink_locked(uint32_t *link, rz_zone_node_t *out) {
    uint32_t id1 = *link;
    rz_zone_node_t *n = node_at(id1);
    *link = n->hnext;
    if (n->prev)
        node_at(n->prev)->next = n->next;
    else
        RZ_STATE.head = n->next;
    if (n->next)
        node_at(n->next)->prev = n->prev;
    else
        RZ_STATE.tail = n->prev;
    uint32_t npending = atomic_load_explicit(&g_npending, memory_order_relaxed);
    if ((n->flags & RZ_ZONE_PENDING) && npending && g_pending[npending - 1] == id1)
        atomic_store_explicit(&g_npending, npending - 1, memory_order_relaxed); /* freed before any install */
    if (RZ_UNLIKELY(g_observer != NULL))
        g_observer(n, 0);
    if (out)
        *out = *n;
    n->state = RZ_ZONE_UNUSED; /* the rest is overwritten when the node is reused */
    n->hnext = g_free_head;
    g_free_head = id1;
    RZ_CHECK(RZ_STATE.zone_count > 0);
    __atomic_store_n(&RZ_STATE.zone_count, RZ_STATE.zone_count - 1, __ATOMIC_RELAXED); /* read unlocked: rz__registry_count */
}

/* The driver handed out an address the registry still holds: that allocation was released without a free
 * through redzone (its context was destroyed). Forget it, and count its memory as unmapped. */
__attribute__((cold, noinline)) static void drop_stale_locked(uint32_t *link) {
    rz_zone_node_t old;
    unlink_locked(link, &old);
    rz__record_unmap(rz__zone_mapped_bytes(&old));
    if (rz__zone_watched(&old))
        rz__count(RZ_C_live_zones, -1);
    rz__count(RZ_C_stale_zones, 1);
}

/* Node id1's stack-id slot, mapping its chunk on first use; NULL when out of memory. */
__attribute__((noinline)) static uint32_t *stack_id_slot(uint32_t id1) {
    uint32_t id = id1 - 1, chunk = id >> RZ_CHUNK_SHIFT;
    if (RZ_STATE.stack_ids[chunk] == NULL) {
        void *p = mmap(NULL, sizeof(uint32_t) * RZ_CHUNK_NODES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                       -1, 0);
        if (p == MAP_FAILED)
            return NULL;
        RZ_STATE.stack_ids[chunk] = p;
    }
    return RZ_STATE.stack_ids[chunk] + (id & CHUNK_MASK);
}

uint32_t rz__registry_stack_id(const rz_zone_node_t *node) {
    if (RZ_STATE.stack_depth == 0)
        return 0;
    for (uint32_t c = 0; c < RZ_MAX_CHUNKS && RZ_STATE.chunks[c]; c++) {
        const rz_zone_node_t *base = RZ_STATE.chunks[c];
        if (node >= base && node < base + RZ_CHUNK_NODES)
            return RZ_STATE.stack_ids[c] ? RZ_STATE.stack_ids[c][node - base] : 0;
    }
    return 0;
}

const uint64_t *rz__registry_stack(const rz_zone_node_t *node, uint32_t *n) {
    const uint64_t *frames;
    *n = rz__depot_get(rz__registry_stack_id(node), &frames);
    if (*n > RZ_STATE.stack_depth)
        *n = RZ_STATE.stack_depth;
    return *n ? frames : NULL;
}

/* Two instances: without stacks (the allocation fast path) and with. */
static inline __attribute__((always_inline)) int add_impl(const rz_zone_node_t *zone, uint32_t stack,
                                                          int with_stack) {
    int rc = RZ_OK;
    rz__registry_lock();
    if (RZ_UNLIKELY(RZ_STATE.zone_count >= g_grow_at)) {
        if (grow_buckets() != RZ_OK && g_bucket_bits == 0) {
            rc = RZ_ENOMEM; /* no table at all; a failed growth of an existing one only lengthens chains */
            goto out;
        }
    }
    uint32_t npending = atomic_load_explicit(&g_npending, memory_order_relaxed);
    if (RZ_UNLIKELY((zone->flags & RZ_ZONE_PENDING) && npending == g_pending_cap)) {
        if (grow_pending() != RZ_OK) {
            rc = RZ_ENOMEM;
            goto out;
        }
        npending = atomic_load_explicit(&g_npending, memory_order_relaxed); /* compacted, perhaps */
    }
    uint32_t id1 = take_node(); /* rz-test: registry locked (the gdb lock test stops here) */
    if (id1 == 0) {
        rc = RZ_ENOMEM;
        goto out;
    }
    seq_begin();
    uint32_t b = bucket_of(zone->ptr);
    for (uint32_t *l = &g_buckets[b]; *l; l = &node_at(*l)->hnext) {
        if (RZ_UNLIKELY(node_at(*l)->ptr == zone->ptr)) {
            drop_stale_locked(l);
            npending = atomic_load_explicit(&g_npending, memory_order_relaxed);
            break;
        }
    }
    if (zone->flags & RZ_ZONE_PENDING) {
        g_pending[npending] = id1;
        atomic_store_explicit(&g_npending, npending + 1, memory_order_relaxed);
    }
    rz_zone_node_t *n = node_at(id1);
    *n = *zone;
    n->state = RZ_ZONE_LIVE;
    if (with_stack && RZ_STATE.stack_depth != 0) {
        uint32_t *slot = stack_id_slot(id1);
        if (slot)
            *slot = stack; /* also 0: the node may have held another zone's */
    }
    n->hnext = g_buckets[b];
    g_buckets[b] = id1;
    /* Sorted insert, walking back from the tail. */
    uint32_t after = RZ_STATE.tail;
    while (after && node_at(after)->index > n->index)
        after = node_at(after)->prev;
    n->prev = after;
    n->next = after ? node_at(after)->next : RZ_STATE.head;
    if (n->next)
        node_at(n->next)->prev = id1;
    else
        RZ_STATE.tail = id1;
    if (after)
        node_at(after)->next = id1;
    else
        RZ_STATE.head = id1;
    __atomic_store_n(&RZ_STATE.zone_count, RZ_STATE.zone_count + 1, __ATOMIC_RELAXED); /* read unlocked: rz__registry_count */
    if (RZ_UNLIKELY(g_observer != NULL))
        g_observer(n, 1);
    seq_end();
out:
    rz__registry_unlock();
    return rc;
}

int rz__registry_add(const rz_zone_node_t *zone) { return add_impl(zone, 0, 0); }

int rz__registry_add_stack(const rz_zone_node_t *zone, void *const *frames, uint32_t nframes) {
    /* Stored in the depot before the registry lock is taken: its own lock, and the hashing, stay outside. */
    uint64_t words[RZ_STACK_MAX];
    uint32_t k = nframes < RZ_STATE.stack_depth ? nframes : RZ_STATE.stack_depth;
    k = k < RZ_STACK_MAX ? k : RZ_STACK_MAX;
    for (uint32_t i = 0; i < k; i++)
        words[i] = (uint64_t)(uintptr_t)frames[i];
    return add_impl(zone, rz__depot_put(words, k), 1);
}

static inline __attribute__((always_inline)) rz_zone_node_t *find_locked(uint64_t ptr, uint32_t **link) {
    if (g_bucket_bits == 0)
        return NULL;
    uint32_t *l = &g_buckets[bucket_of(ptr)];
    while (*l) {
        rz_zone_node_t *n = node_at(*l);
        if (n->ptr == ptr) {
            if (link)
                *link = l;
            return n;
        }
        l = &n->hnext;
    }
    return NULL;
}

rz_zone_node_t *rz__registry_find(uint64_t ptr) { return find_locked(ptr, NULL); }

void rz__registry_drop_stale(uint64_t ptr) {
    uint32_t *link;
    if (find_locked(ptr, &link) == NULL)
        return;
    seq_begin();
    drop_stale_locked(link);
    seq_end();
}

/* The zones whose context ended, newest RZ_ENDED_MAX kept (under the lock), so that a later free of one is
 * reported as a free after its context ended (bad_free.c), with its allocation stack. A ring of plain
 * records: contexts end rarely, and the depot keeps the stacks. */
#define RZ_ENDED_MAX 4096
static rz_ended_zone_t g_ended[RZ_ENDED_MAX];
static uint64_t g_nended;

static void note_ended(const rz_zone_node_t *z) {
    g_ended[g_nended++ % RZ_ENDED_MAX] = (rz_ended_zone_t){
        .ptr = z->ptr, .user_bytes = z->user_bytes, .extent = z->user_bytes + z->pad_bytes, .index = z->index,
        .ctx = z->ctx, .alloc_stack = rz__registry_stack_id(z)};
}

int rz__registry_ended_find(uint64_t p, rz_ended_zone_t *out) {
    uint64_t n = g_nended < RZ_ENDED_MAX ? g_nended : RZ_ENDED_MAX;
    for (uint64_t k = 0; k < n; k++) { /* the newest first: the latest zone at an address */
        const rz_ended_zone_t *e = &g_ended[(g_nended - 1 - k) % RZ_ENDED_MAX];
        if (p >= e->ptr && p - e->ptr < (e->extent ? e->extent : 1)) {
            *out = *e;
            return 1;
        }
    }
    return 0;
}

size_t rz__registry_drop_ctx(void *ctx) {
    size_t dropped = 0;
    for (rz_zone_node_t *z = rz__registry_first(), *next; z; z = next) {
        next = rz__registry_next(z); /* before z is unlinked */
        if (z->ctx != ctx || ctx == NULL)
            continue;
        if (z->flags & RZ_ZONE_GUARD) {
            z->ctx = NULL; /* virtual memory belongs to the device, not the context: it stays */
            continue;
        }
        note_ended(z);
        rz__registry_drop_stale(z->ptr);
        dropped++;
    }
    return dropped;
}

/* The allocation stack of the zone this thread removed last: its node (and stack-id slot) may be reused by
 * the next allocation as soon as the lock is released, so the free-time check takes the id noted here; the
 * stack itself stays in the depot. */
static RZ_TLS struct {
    uint64_t index; /* + 1; 0: none */
    uint32_t stack;
} t_removed_stack;

uint32_t rz__registry_removed_stack(uint64_t index, uint64_t *frames, uint32_t cap) {
    if (t_removed_stack.index != index + 1)
        return 0;
    const uint64_t *kept;
    uint32_t n = rz__depot_get(t_removed_stack.stack, &kept);
    n = n < cap ? n : cap;
    memcpy(frames, kept, n * sizeof *frames);
    return n;
}

int rz__registry_remove(uint64_t ptr, rz_zone_node_t *out) {
    rz__registry_lock();
    uint32_t *link;
    rz_zone_node_t *node = find_locked(ptr, &link);
    if (node == NULL) {
        rz__registry_unlock();
        return RZ_ENOTFOUND;
    }
    if (RZ_UNLIKELY(RZ_STATE.stack_depth != 0)) {
        t_removed_stack.stack = rz__registry_stack_id(node);
        t_removed_stack.index = node->index + 1;
    }
    seq_begin();
    unlink_locked(link, out);
    seq_end();
    rz__registry_unlock();
    return RZ_OK;
}

/*
 * Why the hint also counts an install in progress: a lock holder takes pending zones (take_pending) and
 * then writes their bands, all under the lock. A thread that found no pending zone at that moment would
 * let the program's copy or kernel run at once, and a write past the end made before the band lands is
 * erased by it: a missed violation (rzstress found it). So from the take until the band writes are done
 * the hint stays non-zero, and such a thread waits for the lock, that is, for the install. Callers call
 * take_pending until it returns 0, which they do after writing the last batch: that call clears it.
 */
static _Atomic uint32_t g_installing;

uint32_t rz__registry_pending(void) {
    uint32_t n = atomic_load_explicit(&g_npending, memory_order_acquire); /* pairs with take_pending */
    return n + atomic_load_explicit(&g_installing, memory_order_acquire);
}

void rz__registry_annotate(void) {
    RZ_ANNOTATE_ATOMIC(&g_lock, sizeof g_lock);           /* the lock word itself */
    RZ_ANNOTATE_ATOMIC(&g_npending, sizeof g_npending);   /* read without the lock, as a hint */
    RZ_ANNOTATE_ATOMIC(&g_installing, sizeof g_installing);
    RZ_ANNOTATE_ATOMIC(&RZ_STATE.seq, sizeof RZ_STATE.seq);
    RZ_ANNOTATE_ATOMIC(&RZ_STATE.zone_count, sizeof RZ_STATE.zone_count); /* rz__registry_count */
}

size_t rz__registry_take_pending(rz_zone_node_t **out, size_t cap) {
    uint32_t n = atomic_load_explicit(&g_npending, memory_order_relaxed);
    size_t k = 0, i = 0;
    for (; i < n && k < cap; i++) {
        rz_zone_node_t *z = node_at(g_pending[i]);
        /* An entry may be stale: its zone was freed (and the node perhaps reused) while it waited. */
        if (z->state == RZ_ZONE_LIVE && (z->flags & RZ_ZONE_PENDING)) {
            z->flags &= (uint8_t)~RZ_ZONE_PENDING;
            out[k++] = z;
        }
    }
    memmove(g_pending, g_pending + i, (n - i) * sizeof *g_pending);
    /* Release: bands written before this call (k == 0 ends an install) are done for whoever sees it. */
    atomic_store_explicit(&g_installing, k > 0, memory_order_release);
    atomic_store_explicit(&g_npending, n - (uint32_t)i, memory_order_release); /* after g_installing */
    return k;
}

rz_zone_node_t *rz__registry_first(void) { return RZ_STATE.head ? node_at(RZ_STATE.head) : NULL; }

rz_zone_node_t *rz__registry_next(const rz_zone_node_t *node) { return node->next ? node_at(node->next) : NULL; }

/* Without the lock (the free check's churn estimate): a relaxed count, exact only under the lock. */
uint64_t rz__registry_count(void) { return __atomic_load_n(&RZ_STATE.zone_count, __ATOMIC_RELAXED); }

uint64_t rz__registry_bytes(void) {
    return (uint64_t)g_nodes_used * sizeof(rz_zone_node_t) + ((uint64_t)sizeof *g_buckets << g_bucket_bits);
}

void rz__registry_reset(void) {
    rz__registry_lock();
    seq_begin();
    for (uint32_t c = 0; c < RZ_MAX_CHUNKS && RZ_STATE.chunks[c]; c++) {
        munmap(RZ_STATE.chunks[c], sizeof(rz_zone_node_t) * RZ_CHUNK_NODES);
        RZ_STATE.chunks[c] = NULL;
    }
    free(g_buckets);
    g_buckets = NULL;
    g_bucket_bits = 0;
    g_grow_at = 0;
    g_nodes_used = 0;
    g_free_head = 0;
    atomic_store(&g_npending, 0);
    atomic_store(&g_installing, 0);
    RZ_STATE.head = RZ_STATE.tail = 0;
    __atomic_store_n(&RZ_STATE.zone_count, 0, __ATOMIC_RELAXED);
    if (g_observer)
        g_observer(NULL, 0);
    seq_end();
    rz__registry_unlock();
}

RZ_EXPORT int rz_zone_foreach(rz_zone_visit_fn fn, void *arg) {
    if (fn == NULL)
        return RZ_EINVAL;
    int rc = 0;
    rz__registry_lock();
    for (rz_zone_node_t *n = rz__registry_first(); n && rc == 0; n = rz__registry_next(n)) {
        rz_zone_info_t info = {
            .index = n->index,
            .ptr = n->ptr,
            .user_bytes = n->user_bytes,
            .pad_bytes = rz__zone_watched(n) ? n->pad_bytes : 0,
            .context = n->ctx,
            .expected = n->expected,
        };
        rc = fn(&info, arg);
    }
    rz__registry_unlock();
    return rc;
}
