/*
 * The launch ring and the kernels a report names (launch_ring.c).
 */
#ifndef REDZONE_LAUNCH_RING_H
#define REDZONE_LAUNCH_RING_H

#include "common.h"
#include "state.h"

extern rz_launches_t __redzone_launches;

/* Kernel attribution: record a launch (returns its launch number); print the kernels that may have touched a
 * violated zone (the judge's answer to "who wrote it" when no launch check named the launch, judge.h). */
void rz__launch_record(rzcu_function f);

uint64_t rz__launch_record_name(const char *name);

/* The kernel's name as the driver gives it (its storage), "(unnamed kernel)" when it gives none. */
const char *rz__launch_kernel_name(rzcu_function f);

void rz__launch_report(const rz_zone_node_t *zone);

/* The kernels that line names (most recent first, at most max), each into names + k * stride; their number. */
unsigned rz__launch_candidates(const rz_zone_node_t *zone, char *names, size_t stride, unsigned max);

/* Under the registry lock, at the start of a scan (after the policies' scan-begin steps, band.h): with
 * `whole` (every zone that may have been touched since the last such scan is covered), move the "last seen
 * clean" mark. */
void rz__launch_scan_begin(int whole);

/* The number of launches recorded so far (under the ring's lock: another thread may be recording one). */
uint64_t rz__launch_seq(void);

/* The launches recorded after launch number `since`, newest first: at most max of them, their numbers into
 * seqs and names into names (stride bytes each, NUL-terminated); *total gets how many there are in all.
 * Returns how many were copied. Under the ring's lock. */
unsigned rz__launch_names_since(uint64_t since, uint64_t *seqs, char *names, size_t stride, unsigned max,
                                uint64_t *total);

/* A free-time check: the kernels it names are those launched since the last whole scan began. */
void rz__launch_ring_since_scan(void);

#endif /* REDZONE_LAUNCH_RING_H */
