/*
 * Graph check slots (graph_slots.c).
 */
#ifndef REDZONE_GRAPH_SLOTS_H
#define REDZONE_GRAPH_SLOTS_H

#include "common.h"

/* A page-locked slot of `bytes` (at most 4 KiB) for a check captured into a graph, held for the rest of the
 * process (the graph may be launched any time); NULL when none is left or pinning is not possible. */
void *rz__graph_slot_take(size_t bytes);


#endif /* REDZONE_GRAPH_SLOTS_H */
