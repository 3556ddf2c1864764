/*
 * Guard-page allocations (guard_pages.c).
 */
#ifndef REDZONE_GUARD_PAGES_H
#define REDZONE_GUARD_PAGES_H

#include "common.h"
#include "options.h"
#include "state.h"

/* Under the registry lock: the guard-page zone whose mapping contains p, or NULL. */
const rz_zone_node_t *rz__guard_zone_containing(rz_devptr_t p);

/* Whether allocation `index` gets a guard page (METRALE_REDZONE_GUARD), and whether the driver has the
 * virtual memory management entry points it needs. */
int rz__guard_selected(const rz_options_t *o, uint64_t index);
int rz__guard_available(void);
/* Where a guard zone's mapping starts, how long it is, and its reservation (mapping + one guard granule). */
void rz__guard_layout(const rz_zone_node_t *z, rz_devptr_t *base, size_t *mapped, size_t *reserved);
/* Map a guard allocation of `bytes` for zone z (its ptr and reserved0 set): RZCUDA_SUCCESS, or the first
 * failure with everything undone. */
rzcu_result rz__guard_alloc(size_t bytes, rz_zone_node_t *z);
/* Note a guard zone made (live 1) or freed (0), for rz__guard_zone_containing; takes the registry lock. */
void rz__guard_note(rz_devptr_t ptr, int live);
/* Unmap and release a guard zone's mapping (already out of the registry). */
rzcu_result rz__guard_free(const rz_zone_node_t *z);

#endif /* REDZONE_GUARD_PAGES_H */
