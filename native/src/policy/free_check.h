/*
 * The free check (free_check.c).
 */
#ifndef REDZONE_FREE_CHECK_H
#define REDZONE_FREE_CHECK_H

#include "common.h"
#include "alloc.h"
#include "state.h"

/* Check one zone's band just before it is freed (stream-ordered for an async free): alloc.c's before-free hook. */
void rz__free_check(const rz_zone_node_t *zone, const rz_free_req_t *req);

/* At start-up: register the free check with the allocator (before each free) and the band engine (its
 * deferred checks judged at each scan's beginning). Again in a forked child: the same registrations. */
void rz__free_check_arm(void);

/* Judge the stream-ordered checks queued while the registry was busy (free_check.c); takes the lock. */
void rz__free_checks_deferred(void);

/* Registry lock held: judge the stream-ordered checks queued while the registry was busy (a scan begins). */
void rz__free_checks_deferred_locked(void);
/* helgrind: the deferred-checks flag is read without a lock (at start-up). */
void rz__free_check_annotate(void);

#endif /* REDZONE_FREE_CHECK_H */
