/*
 * Launch checks on the device (check_changed.c): a context's bands as a descriptor table in device memory,
 * compared by the check kernel's rz_check_changed, which brings back only the bands that changed.
 */
#ifndef REDZONE_CHECK_CHANGED_H
#define REDZONE_CHECK_CHANGED_H

#include "common.h"
#include "check_kernel.h"

/* Bands and bytes one check brings back; more changed bands are seen by a later check. */
#define RZ_CHANGED_CAP 32u
#define RZ_CHANGED_BYTES 4096u
/* Rows one check uploads into a table kept in step with rows (more: the table is uploaded whole). */
#define RZ_CHANGED_ROWS 128u

typedef struct rz_changed_table rz_changed_table_t; /* one layout's descriptors on the device */
typedef struct rz_changed_area rz_changed_area_t;   /* one check's result: device area and its host copy */

/* One changed band in a result: its position in the table, and where its bytes are (NULL: they did not fit). */
typedef struct rz_changed_band {
    uint32_t pos;
    const uint8_t *bytes;
} rz_changed_band_t;

/* Whether launch checks in ctx (the current context) can compare on the device: the option allows it and the
 * kernel loads (tried once per context, on first use; no registry lock held: loading may JIT-compile). */
int rz__changed_available(void *ctx);

/* The descriptor table of layout `id` (n bands, fill writes them; id 0: always a table made now) usable by a check queued on stream s, whose
 * identity is skey (per-thread default streams share a handle, not an order): the one already made for it,
 * or one made now, its upload queued on s. A reference for the caller; NULL when
 * out of memory or a driver call failed (the caller copies bands instead). */
rz_changed_table_t *rz__changed_table(void *ctx, uint64_t id, size_t n,
                                      void (*fill)(rz_check_desc_t *descs, size_t n, const void *arg),
                                      const void *arg, rzcu_stream s, uintptr_t skey);

/* A result area of ctx for one check; NULL when none can be made. */
rz_changed_area_t *rz__changed_area(void *ctx);

/* Queue the comparison of table t's first n rows into area a on stream s, then the copy of the result to the
 * host. */
rzcu_result rz__changed_queue(rz_changed_table_t *t, rz_changed_area_t *a, size_t n, rzcu_stream s);

/* After the queued work completed: the changed bands (at most RZ_CHANGED_CAP into out); returns how many
 * differed in all (more than returned: the rest did not fit). Once per queued comparison. No driver call. */
uint32_t rz__changed_result(rz_changed_area_t *a, rz_changed_band_t *out);

/* Give back a table reference, an area; the check they served completed (or was never queued). Whether it
 * completed: 1 when its queued work ran (the table's upload is then visible to every stream). No driver call. */
void rz__changed_table_release(rz_changed_table_t *t, int completed);
void rz__changed_area_release(rz_changed_area_t *a, int completed);

/* Tables kept in step with rows (launch_rows.c: row i of the table is row i of the rows, and a change log
 * numbers their changes). take: the table stream skey's checks use (or one no check holds, which that stream
 * takes over), a reference with its queue lock held; *epoch, *synced: the rows' epoch and log position its
 * device copy has once the work queued on skey ran, *cap its rows. NULL when there is none (the caller
 * uploads the rows whole: rz__changed_table with id 0, then rz__changed_rows_bind). */
rz_changed_table_t *rz__changed_rows_take(void *ctx, uintptr_t skey, uint64_t *epoch, uint64_t *synced, size_t *cap);
/* Queue on s the upload of the k rows (ascending) whose descriptors are descs, through a's host copy (a: the
 * check's result area), ahead of the check; the table then has n rows, in step with log position synced. */
rzcu_result rz__changed_rows_update(rz_changed_table_t *t, rz_changed_area_t *a, const uint32_t *rows,
                                    const rz_check_desc_t *descs, size_t k, size_t n, uint64_t synced, rzcu_stream s);
/* A table just uploaded whole (id 0) from rows of epoch at log position synced: kept in step from now on. */
void rz__changed_rows_bind(rz_changed_table_t *t, uint64_t epoch, uint64_t synced);
/* Release take's queue lock (the reference stays the check's, given back by rz__changed_table_release). */
void rz__changed_rows_unlock(rz_changed_table_t *t);
/* Row copies queued since the process started (tests: what a launch after an allocation uploads). */
uint64_t rz__changed_row_copies(void);

/* The context ended: its tables and areas went with it. */
void rz__changed_forget(void *ctx);

/* 0 keeps launch checks on copies (tests compare the two methods); 1 (default) lets them use the kernel. */
void rz__changed_enable(int on);

/* Tables uploaded since the process started (tests: a launch with unchanged zones uploads nothing). */
uint64_t rz__changed_uploads(void);

#endif /* REDZONE_CHECK_CHANGED_H */
