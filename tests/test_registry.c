/* The zone registry against a simple reference model, under random operations and at 1M zones. */
#include "rz_test.h"

struct model_zone {
    uint64_t ptr, index;
    int live;
};

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;
static uint64_t rng(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static int by_index(const void *a, const void *b) {
    const struct model_zone *x = a, *y = b;
    return (x->index > y->index) - (x->index < y->index);
}

/* Iteration yields exactly the model's live zones, in index order, each findable by pointer. */
static void check_against_model(struct model_zone *live, size_t n) {
    qsort(live, n, sizeof *live, by_index);
    rz__registry_lock();
    size_t i = 0;
    uint64_t prev_index = 0;
    for (rz_zone_node_t *z = rz__registry_first(); z; z = rz__registry_next(z), i++) {
        cr_assert_lt(i, n, "registry has more zones than the model");
        cr_assert_eq(z->index, live[i].index);
        cr_assert_eq(z->ptr, live[i].ptr);
        cr_assert(i == 0 || z->index >= prev_index);
        prev_index = z->index;
        cr_assert_eq(rz__registry_find(z->ptr), z);
    }
    cr_assert_eq(i, n, "registry has %zu zones, model %zu", i, n);
    cr_assert_eq(rz__registry_count(), n);
    rz__registry_unlock();
}

Test(registry, random_operations_match_model) {
    enum { OPS = 150000, MAXLIVE = 5000 };
    struct model_zone *live = calloc(MAXLIVE, sizeof *live);
    size_t n = 0;
    uint64_t next_index = 0, next_ptr = 0x10000, pending = 0;
    int have_pending = 0;
    for (int op = 0; op < OPS; op++) {
        uint64_t r = rng();
        if (n < MAXLIVE && (n == 0 || r % 3 != 0)) {
            /* Mostly increasing indices, sometimes out of order as when threads race to register. */
            uint64_t index;
            if (have_pending && r % 2 == 0) {
                index = pending; /* registered after a later index, as when threads race */
                have_pending = 0;
            } else {
                index = next_index++;
                if (!have_pending && r % 7 == 0) {
                    pending = index;
                    have_pending = 1;
                    index = next_index++;
                }
            }
            rz_zone_node_t z = {.ptr = next_ptr, .user_bytes = 16 + r % 1000, .index = index, .pad_bytes = 16};
            next_ptr += 256 * (1 + r % 4);
            cr_assert_eq(rz__registry_add(&z), RZ_OK);
            live[n++] = (struct model_zone){.ptr = z.ptr, .index = z.index, .live = 1};
        } else {
            size_t k = (r >> 16) % n;
            rz_zone_node_t out;
            cr_assert_eq(rz__registry_remove(live[k].ptr, &out), RZ_OK);
            cr_assert_eq(out.ptr, live[k].ptr);
            cr_assert_eq(out.index, live[k].index);
            cr_assert_eq(rz__registry_remove(live[k].ptr, NULL), RZ_ENOTFOUND, "double remove");
            live[k] = live[--n];
        }
        if (op % 10000 == 0)
            check_against_model(live, n);
    }
    check_against_model(live, n);
    free(live);
}

Test(registry, unknown_pointer_not_found) {
    rz_zone_node_t z = {.ptr = 0x1000, .index = 1, .pad_bytes = 16};
    cr_assert_eq(rz__registry_add(&z), RZ_OK);
    cr_assert_eq(rz__registry_remove(0x1100, NULL), RZ_ENOTFOUND);
    rz__registry_lock();
    cr_assert_null(rz__registry_find(0x1001));
    cr_assert_not_null(rz__registry_find(0x1000));
    rz__registry_unlock();
}

Test(registry, one_million_zones, .timeout = 120) {
    enum { N = 1000000 };
    for (uint64_t i = 0; i < N; i++) {
        rz_zone_node_t z = {.ptr = 0x7f0000000000ull + i * 512, .user_bytes = 100, .index = i, .pad_bytes = 64};
        cr_assert_eq(rz__registry_add(&z), RZ_OK);
    }
    cr_assert_eq(rz__registry_count(), N);
    /* Iteration in index order over all of them. */
    rz__registry_lock();
    uint64_t expect = 0;
    for (rz_zone_node_t *z = rz__registry_first(); z; z = rz__registry_next(z))
        cr_assert_eq(z->index, expect++);
    cr_assert_eq(expect, N);
    rz__registry_unlock();
    /* Forget every other one, then the rest, checking lookups as we go. */
    for (uint64_t i = 0; i < N; i += 2)
        cr_assert_eq(rz__registry_remove(0x7f0000000000ull + i * 512, NULL), RZ_OK);
    cr_assert_eq(rz__registry_count(), N / 2);
    rz__registry_lock();
    expect = 1;
    for (rz_zone_node_t *z = rz__registry_first(); z; z = rz__registry_next(z), expect += 2)
        cr_assert_eq(z->index, expect);
    rz__registry_unlock();
    for (uint64_t i = 1; i < N; i += 2)
        cr_assert_eq(rz__registry_remove(0x7f0000000000ull + i * 512, NULL), RZ_OK);
    cr_assert_eq(rz__registry_count(), 0);
    cr_assert_eq(RZ_STATE.head, 0);
    cr_assert_eq(RZ_STATE.tail, 0);
    /* Node memory is reused: adding again does not grow past the high-water mark's chunks. */
    rz_zone_node_t z = {.ptr = 0x1000, .index = 5, .pad_bytes = 16};
    cr_assert_eq(rz__registry_add(&z), RZ_OK);
    cr_assert_null(RZ_STATE.chunks[(N >> RZ_CHUNK_SHIFT) + 1]);
}

/* The sequence word is even (stable) whenever no change is in progress. */
Test(registry, sequence_word_even_when_stable) {
    uint64_t s0 = atomic_load(&RZ_STATE.seq);
    rz_zone_node_t z = {.ptr = 0x2000, .index = 3, .pad_bytes = 16};
    cr_assert_eq(rz__registry_add(&z), RZ_OK);
    uint64_t s1 = atomic_load(&RZ_STATE.seq);
    cr_assert_eq(s0 % 2, 0);
    cr_assert_eq(s1 % 2, 0);
    cr_assert_gt(s1, s0);
}

/* Many threads adding and removing their own zones, indices from one counter as in the library: nothing
 * lost, nothing duplicated, order kept. */
#include <pthread.h>
static _Atomic uint64_t g_next_index;

static void *churn(void *arg) {
    uint64_t base = (uint64_t)(uintptr_t)arg;
    for (uint64_t i = 0; i < 20000; i++) {
        rz_zone_node_t z = {.ptr = base + i * 256, .index = atomic_fetch_add(&g_next_index, 1), .pad_bytes = 16};
        if (rz__registry_add(&z) != RZ_OK)
            return (void *)1;
        if (i % 2 == 0 && rz__registry_remove(base + i * 256, NULL) != RZ_OK)
            return (void *)2;
    }
    return NULL;
}

Test(registry, concurrent_add_remove) {
    pthread_t t[8];
    for (uintptr_t i = 0; i < 8; i++)
        pthread_create(&t[i], NULL, churn, (void *)((i + 1) << 32));
    for (int i = 0; i < 8; i++) {
        void *ret;
        pthread_join(t[i], &ret);
        cr_assert_null(ret);
    }
    cr_assert_eq(rz__registry_count(), 8 * 10000);
    rz__registry_lock();
    uint64_t n = 0, prev = 0;
    for (rz_zone_node_t *z = rz__registry_first(); z; z = rz__registry_next(z), n++) {
        cr_assert(n == 0 || z->index > prev, "index order");
        prev = z->index;
        cr_assert_eq((z->ptr & 0xffffffffu) / 256 % 2, 1, "only the zones each thread kept");
    }
    for (uint64_t th = 1; th <= 8; th++)
        for (uint64_t i = 1; i < 20000; i += 2)
            cr_assert_not_null(rz__registry_find((th << 32) + i * 256));
    rz__registry_unlock();
    cr_assert_eq(n, 8 * 10000);
}

/* The driver handing out an address the registry still holds means that allocation's memory was released
 * behind redzone's back (its context was destroyed): the new zone replaces it, counted as released. */
Test(registry, an_address_handed_out_again_replaces_its_stale_zone) {
    rz_stats_t before, after;
    rz_stats_get(&before);
    rz_zone_node_t old = {.ptr = 0x2000, .index = 5, .pad_bytes = 16, .user_bytes = 100};
    rz_zone_node_t other = {.ptr = 0x9000, .index = 6, .pad_bytes = 16, .user_bytes = 8};
    rz_zone_node_t fresh = {.ptr = 0x2000, .index = 7, .pad_bytes = 32, .user_bytes = 50};
    cr_assert_eq(rz__registry_add(&old), RZ_OK);
    cr_assert_eq(rz__registry_add(&other), RZ_OK);
    cr_assert_eq(rz__registry_add(&fresh), RZ_OK);
    struct model_zone live[] = {{0x9000, 6, 1}, {0x2000, 7, 1}};
    check_against_model(live, 2);
    rz__registry_lock();
    cr_assert_eq(rz__registry_find(0x2000)->index, 7);
    rz__registry_unlock();
    rz_stats_get(&after);
    cr_assert_eq(after.stale_zones - before.stale_zones, 1);
    cr_assert_eq(after.unmap_calls - before.unmap_calls, 1, "counted as released");
    cr_assert_eq(before.current_mapped_bytes - after.current_mapped_bytes, 116);
}

/* Lazy install: from the moment a lock holder takes pending zones until its bands are written (the
 * take_pending call that returns 0), the unlocked hint must not say "nothing pending", or a thread would let
 * the program write past the end before the band lands, and the band would erase that write (rzstress found
 * this: the overrun was never reported). */
Test(registry, pending_hint_covers_an_install_in_progress) {
    rz_zone_node_t a = {.ptr = 0x3000, .index = 1, .pad_bytes = 16, .flags = RZ_ZONE_PENDING};
    rz_zone_node_t b = {.ptr = 0x4000, .index = 2, .pad_bytes = 16, .flags = RZ_ZONE_PENDING};
    cr_assert_eq(rz__registry_add(&a), RZ_OK);
    cr_assert_eq(rz__registry_add(&b), RZ_OK);
    cr_assert_eq(rz__registry_pending(), 2);
    rz_zone_node_t *taken[4];
    rz__registry_lock();
    cr_assert_eq(rz__registry_take_pending(taken, 1), 1);
    cr_assert_neq(rz__registry_pending(), 0, "one still waits, one is being installed");
    cr_assert_eq(rz__registry_take_pending(taken, 4), 1);
    cr_assert_neq(rz__registry_pending(), 0, "none waits, but the last batch's bands are not written yet");
    cr_assert_eq(rz__registry_take_pending(taken, 4), 0); /* after writing them: the install is over */
    cr_assert_eq(rz__registry_pending(), 0);
    rz__registry_unlock();
}

/* METRALE_REDZONE_STACKS=32 (issue 20.8): a stack is stored once however many zones share it, and a zone keeps
 * a 4-byte id (a slot of 33 words per zone cost 264 bytes each); distinct stacks keep their own frames, a
 * removed zone's stack is still there for the free-time check, and a reused node does not show the stack of
 * the zone it held before. */
Test(registry, allocation_stacks_are_stored_once) {
    enum { ZONES = 20000, DEPTH = 32 };
    RZ_STATE.stack_depth = DEPTH;
    void *site[DEPTH], *other[DEPTH];
    for (int i = 0; i < DEPTH; i++) {
        site[i] = (void *)(uintptr_t)(0x400000 + 16 * i);
        other[i] = (void *)(uintptr_t)(0x500000 + 16 * i);
    }
    uint64_t before = rz__depot_bytes();
    for (uint64_t i = 0; i < ZONES; i++) {
        rz_zone_node_t z = {.ptr = 0x100000000ull + 256 * i, .index = i, .pad_bytes = 16, .user_bytes = 64};
        cr_assert_eq(rz__registry_add_stack(&z, i % 1000 == 7 ? other : site, i % 1000 == 7 ? 3 : DEPTH), RZ_OK);
    }
    uint64_t grown = rz__depot_bytes() - before;
    cr_assert_leq(grown, 16384, "two distinct stacks took %llu depot bytes", (unsigned long long)grown);
    rz__registry_lock();
    uint32_t shared = 0;
    for (rz_zone_node_t *z = rz__registry_first(); z; z = rz__registry_next(z)) {
        uint32_t n;
        const uint64_t *f = rz__registry_stack(z, &n);
        int is_other = z->index % 1000 == 7;
        cr_assert_eq(n, is_other ? 3u : (uint32_t)DEPTH, "zone %llu", (unsigned long long)z->index);
        cr_assert_eq(f[n - 1], (uint64_t)(uintptr_t)(is_other ? other : site)[n - 1]);
        if (!is_other) {
            cr_assert(shared == 0 || rz__registry_stack_id(z) == shared, "one id for one stack");
            shared = rz__registry_stack_id(z);
        }
    }
    rz__registry_unlock();
    uint64_t frames[RZ_STACK_MAX];
    rz_zone_node_t out;
    cr_assert_eq(rz__registry_remove(0x100000000ull + 256 * 7, &out), RZ_OK);
    cr_assert_eq(rz__registry_removed_stack(7, frames, RZ_STACK_MAX), 3, "the removed zone's stack is kept");
    cr_assert_eq(frames[2], (uint64_t)(uintptr_t)other[2]);
    /* The freed node is reused by a zone registered without a stack: it must not inherit one. */
    rz_zone_node_t fresh = {.ptr = 0x9000, .index = ZONES, .pad_bytes = 16, .user_bytes = 8};
    cr_assert_eq(rz__registry_add_stack(&fresh, site, 0), RZ_OK);
    rz__registry_lock();
    uint32_t n;
    cr_assert_null(rz__registry_stack(rz__registry_find(0x9000), &n));
    cr_assert_eq(n, 0);
    rz__registry_unlock();
}
