/*
 * The judge's reports (judge.c).
 */
#ifndef REDZONE_JUDGE_H
#define REDZONE_JUDGE_H

#include "common.h"
#include "report.h"
#include "state.h"

/* A scan's reports, held back while it holds the registry lock: rz__reports_begin after taking the lock (this
 * thread's judge calls queue their reports from then on), rz__reports_end after releasing it (prints them,
 * each stack symbolized, each hook called, in order, and frees the memory). rz__reports_spill: this thread's
 * scan was interrupted by a signal handler that scans again (exit): print what it held, stop holding. */
typedef struct rz_reports {
    rz_log_held_t lines;
    struct report_item *items; /* mapped on the first violation */
    size_t n;
} rz_reports_t;

void rz__reports_begin(rz_reports_t *r);

void rz__reports_end(rz_reports_t *r);

void rz__reports_spill(void);

/* Who wrote a violated zone, asked after its allocation stack: the launch policy's hook (launch_attribution.c,
 * registered at start-up by rz__launch_check_arm) answers 1 when it named the launch that wrote it (a launch
 * check's report); else, or with no hook, the launch ring names the kernels launched since the zone was last
 * seen clean (rz__launch_report). */
typedef int rz_who_wrote_fn(const rz_zone_node_t *zone, const uint8_t *band, uint64_t bytes, int front);

void rz__judge_on_who_wrote(rz_who_wrote_fn *fn);

/* The kernel a launch check being judged on this thread names as the writer (its launch number in *launch),
 * NULL when none: registered by the launch policy, for the finding's record and the kernel: rules. */
typedef const char *rz_writer_fn(uint64_t *launch);

void rz__judge_on_writer(rz_writer_fn *fn);

/* What the judges return: 0 clean; else bits: RZ_JUDGE_REPORTED (a finding reported), RZ_JUDGE_UNPRINTED
 * (counted, its text held back by the print limit) or RZ_JUDGE_SUPPRESSED (a suppression rule matched: no
 * report, not counted). Either way the band is violated, and written back by the scan. */
#define RZ_JUDGE_REPORTED 1

#define RZ_JUDGE_SUPPRESSED 2

#define RZ_JUDGE_UNPRINTED 4

#define RZ_JUDGE_COUNTED (RZ_JUDGE_REPORTED | RZ_JUDGE_UNPRINTED)

/* Judge one band already read into `band` (pad_bytes long): report, hook, and return nonzero if violated. */
int rz__band_judge(const rz_zone_node_t *zone, const uint8_t *band);

/* The same for a zone no longer in the registry (a free-time check), with its allocation stack. */
int rz__band_judge_freed(const rz_zone_node_t *zone, const uint8_t *band, const uint64_t *frames, uint32_t nframes);

/* The same for the zone's front band (rz__zone_front(zone) bytes before its pointer). */
int rz__band_judge_front(const rz_zone_node_t *zone, const uint8_t *band);

#endif /* REDZONE_JUDGE_H */
