/*
 * The zone registry (registry.c).
 */
#ifndef REDZONE_REGISTRY_H
#define REDZONE_REGISTRY_H

#include "common.h"
#include "state.h"

void rz__registry_lock(void);

/* The agent's way in: RZ_OK, or RZ_EBUSY after timeout_ms (a stopped thread may hold the lock). */
int rz__registry_lock_timed(unsigned timeout_ms);

void rz__registry_unlock(void);

/* How many times the registry lock has been taken (exact when read with no other thread using it). */
uint64_t rz__registry_locks_taken(void);

/* Record a live allocation. Returns RZ_OK or RZ_ENOMEM (then nothing is recorded). Takes the lock. */
int rz__registry_add(const rz_zone_node_t *zone);

/* Remove the zone whose user pointer is ptr, copying it to *out. RZ_ENOTFOUND if unknown. Takes the lock. */
int rz__registry_remove(uint64_t ptr, rz_zone_node_t *out);

uint32_t rz__registry_removed_stack(uint64_t index, uint64_t *frames, uint32_t cap);

/* Under the lock: first zone in index order and the one after `node` (NULL at the end). */
rz_zone_node_t *rz__registry_first(void);

rz_zone_node_t *rz__registry_next(const rz_zone_node_t *node);

/* Under the lock: forget the zone at ptr, whose memory the driver released without a free through redzone
 * (counted as unmapped and in stale_zones). */
void rz__registry_drop_stale(uint64_t ptr);

/* Under the lock: forget every zone of context ctx, which has ended (its memory went with it; counted as
 * for rz__registry_drop_stale); guard-page zones stay (their memory is the device's) and lose the context.
 * Returns how many were forgotten. */
size_t rz__registry_drop_ctx(void *ctx);

/* A zone forgotten because its context ended (rz__registry_drop_ctx keeps the newest 4096). */
typedef struct rz_ended_zone {
    uint64_t ptr, user_bytes, extent; /* extent: user bytes and band, from ptr */
    uint64_t index;
    void *ctx;
    uint32_t alloc_stack; /* depot id, 0: none */
} rz_ended_zone_t;

/* Under the lock: the newest zone forgotten with its ended context whose [ptr, ptr + extent) holds p. */
int rz__registry_ended_find(uint64_t p, rz_ended_zone_t *out);

/* Under the lock: the zone for ptr, or NULL. */
rz_zone_node_t *rz__registry_find(uint64_t ptr);

uint64_t rz__registry_count(void);

/* As rz__registry_add, also keeping the allocation's stack (n frames, at most RZ_STATE.stack_depth). */
int rz__registry_add_stack(const rz_zone_node_t *zone, void *const *frames, uint32_t n);

/* Under the lock: the stack kept for a registry node (NULL, 0 when none), and its depot id (0: none). The
 * frames stay valid after the lock is released (the depot never changes them). */
const uint64_t *rz__registry_stack(const rz_zone_node_t *node, uint32_t *n);

uint32_t rz__registry_stack_id(const rz_zone_node_t *node);

/* Zones waiting for their band (lazy install), plus 1 while a lock holder is installing some; read without
 * the lock, so only a hint, but 0 means no band is waiting or being written. */
uint32_t rz__registry_pending(void);

/* Tell valgrind's helgrind which registry words are atomics (nothing without REDZONE_VALGRIND; rz_annotate.h). */
void rz__registry_annotate(void);

/* Under the lock: up to cap pending zones, oldest first, no longer marked pending (the caller installs them
 * or marks them unwatched). Returns how many. Call it until it returns 0, after writing the last batch. */
size_t rz__registry_take_pending(rz_zone_node_t **out, size_t cap);

/* Host bytes the registry holds for its zones (nodes in use and hash buckets). */
uint64_t rz__registry_bytes(void);

/* The one observer of the registry's changes (the launch checks' rows, launch_rows.c, registered from above
 * under the lock, at their first use: nothing is called before): called under the lock with a zone just added
 * (added = 1, its node) or about to be removed (0: its node, still holding it; also a stale or a context's
 * zone dropped), and with NULL when every zone was dropped. It must not call the driver or take the lock. */
typedef void rz_registry_observer_fn(const rz_zone_node_t *zone, int added);
void rz__registry_observe_locked(rz_registry_observer_fn *fn);

/* Drop every zone (tests and fork children only; does not free device memory). */
void rz__registry_reset(void);

#endif /* REDZONE_REGISTRY_H */
