/*
 * The machine-readable report (report_file.c): METRALE_REDZONE_REPORT, JSON Lines or SARIF 2.1.0.
 */
#ifndef REDZONE_REPORT_FILE_H
#define REDZONE_REPORT_FILE_H

#include "common.h"
#include "finding.h"
#include "symbolize.h"

/* Open the file the option names (once, at start-up); 1 when there is one. */
int rz__report_file_start(void);

/* Whether a report file is being written (its records want the stacks resolved). */
int rz__report_file_on(void);

/* One finding's record: seq its number in this process, the stacks resolved (call: where a refused call was
 * made). */
void rz__report_file_finding(const rz_finding_t *f, uint64_t seq, const rz_frame_sym_t *alloc, int nalloc,
                             const rz_frame_sym_t *call, int ncall);

/* The counts the summary gives (finding.c). */
typedef struct rz_finding_totals {
    uint64_t by_kind[RZ_FINDING_NKINDS]; /* findings not suppressed, by kind */
    uint64_t findings, suppressed, unprinted;
    int halted;
} rz_finding_totals_t;

/* The summary object (JSON Lines) or the document's last rewrite (SARIF): at exit, or at a halt. */
void rz__report_file_finish(const rz_finding_totals_t *t);

#endif /* REDZONE_REPORT_FILE_H */
