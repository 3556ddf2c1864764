/*
 * The launch checks' rows (launch_rows.c): every installed band of each context, kept in step with the
 * registry at each allocation and free, for tables of the check kernel updated row by row (check_changed.c).
 * Used by launch_check.c (a launch's look at the rows) and launch_attribution.c (a row's description).
 * Everything under the registry lock.
 */
#ifndef REDZONE_LAUNCH_ROWS_H
#define REDZONE_LAUNCH_ROWS_H

#include "common.h"
#include "check_changed.h"
#include "check_kernel.h"
#include "launch_check.h"

struct rz_rows;

/* At start-up (rz__launch_check_arm): counts: launches begun, the oldest unjudged (when a freed row may be
 * reused). The rows become the registry's observer at their first use (a launch check on the device). */
void rz__rows_arm(const rz_launch_counts_t *counts);

/* The rows of context ctx, brought up to date (waiting zones whose bands are now ready get theirs; numbered
 * afresh when needed); NULL with *none set when ctx has no band ready, NULL alone when the rows cannot be
 * kept (out of memory, more contexts than stores: the caller then builds a layout). */
struct rz_rows *rz__rows_sync_locked(void *ctx, int *none);

uint32_t rz__rows_live(const struct rz_rows *r);  /* rows that are not tombstones */
uint32_t rz__rows_n(const struct rz_rows *r);     /* rows, tombstones included: the kernel's n */
uint64_t rz__rows_epoch(const struct rz_rows *r);
uint64_t rz__rows_log_end(const struct rz_rows *r);

/* The rows a table of epoch `epoch`, in step at log position synced and with room for cap rows, must upload
 * to be in step now: their numbers ascending into rows[] and descriptors into descs[] (at most max); -1 when
 * it must be uploaded whole (another epoch, too far behind, more than max rows, or too small). */
long rz__rows_changes_locked(const struct rz_rows *r, uint64_t epoch, uint64_t synced, size_t cap, uint32_t *rows,
                             rz_check_desc_t *descs, size_t max);

/* Every row's descriptor, malloc'd for a whole upload (NULL: out of memory). */
rz_check_desc_t *rz__rows_copy_locked(const struct rz_rows *r);

/* The description of row pos for a check queued at epoch (NULL: numbered afresh since, or no such row). */
const rz_band_meta_t *rz__rows_meta_locked(const struct rz_rows *r, uint64_t epoch, uint32_t pos);

/* Queue launch check c on stream s against its context's table kept in step with the rows (check_changed.c);
 * area_for: a result area for ctx. 1: queued (*q: how), 0: build a layout instead, -1: nothing to check. */
int rz__rows_queue(rz_check_t *c, rzcu_stream s, struct rz_changed_area *(*area_for)(void *ctx), rzcu_result *q);

/* Context ctx ended: its rows are given up (checks naming them are not judged). */
void rz__rows_forget_locked(void *ctx);

#endif /* REDZONE_LAUNCH_ROWS_H */
