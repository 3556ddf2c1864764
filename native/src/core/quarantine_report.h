/*
 * The quarantine's findings (quarantine_report.c), called by quarantine.c when a check finds a held entry
 * changed.
 */
#ifndef REDZONE_QUARANTINE_REPORT_H
#define REDZONE_QUARANTINE_REPORT_H

#include <stdint.h>

#include "quarantine.h"

/* Report held entry e found written: bytes [first, last] of its range changed (offsets from its base),
 * `changed` of them, the first bad value `bad`; w: the launch SCAN=launch saw write it, or NULL (the report
 * lists the kernels launched since). */
void rz__quarantine_report(const rz_qentry_t *e, uint64_t first, uint64_t last, uint64_t changed, uint8_t bad,
                           const rz_qwriter_t *w);

#endif
