/*
 * The mapping counters (stats.c).
 */
#ifndef REDZONE_STATS_H
#define REDZONE_STATS_H

#include "common.h"

void rz__record_map(uint64_t bytes);

void rz__record_unmap(uint64_t bytes);

void rz__record_unmap_failure(void);

void rz__record_page_reset(uint64_t bytes);

void rz__record_guard_install(uint64_t bytes);

void rz__record_decommit(uint64_t bytes);

void rz__count(int counter, int64_t delta);

#endif /* REDZONE_STATS_H */
