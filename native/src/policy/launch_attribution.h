/*
 * Judging launch checks (launch_attribution.c).
 */
#ifndef REDZONE_LAUNCH_ATTRIBUTION_H
#define REDZONE_LAUNCH_ATTRIBUTION_H

#include "common.h"
#include "state.h"

/* The judge's "who wrote it" hook (judge.h, registered by rz__launch_check_arm): 1 when the report is a launch
 * check's, whose attribution lines it printed. */
int rz__attrib_report(const rz_zone_node_t *z, const uint8_t *band, uint64_t bytes, int front);

/* The kernel of the launch check being judged on this thread (rz_writer_fn, judge.h), NULL when none. */
const char *rz__attrib_writer(uint64_t *launch);

/* A free-time check read `band` (back band, then front band): 1 when a launch check reported exactly these
 * bytes already (the zone is not reported twice). Registry lock held. */
int rz__attrib_freed_reported(const rz_zone_node_t *z, const uint8_t *band);

#endif /* REDZONE_LAUNCH_ATTRIBUTION_H */
