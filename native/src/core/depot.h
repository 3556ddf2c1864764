/*
 * The stack depot (depot.c).
 */
#ifndef REDZONE_DEPOT_H
#define REDZONE_DEPOT_H

#include "common.h"

/* The id of this stack (n frames, at most RZ_STACK_MAX kept), stored once; 0 when n is 0 or the depot is
 * full or out of memory. Takes the depot's own lock (never while waiting for the registry's). */
uint32_t rz__depot_put(const uint64_t *frames, uint32_t n);

/* The frames of stack `id` (they never change or move) and their count; 0 for id 0. No lock. */
uint32_t rz__depot_get(uint32_t id, const uint64_t **frames);

/* Host bytes the depot holds (stacks and its hash table). */
uint64_t rz__depot_bytes(void);

/* Print stack `id`'s frames, symbolized, to the log (nothing for 0 or an unknown id). Returns the frames printed. */
uint32_t rz__depot_symbolize(uint32_t id);

#endif /* REDZONE_DEPOT_H */
