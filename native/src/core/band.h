/*
 * The band engine: install, scan, poison (band.c).
 */
#ifndef REDZONE_BAND_H
#define REDZONE_BAND_H

#include "common.h"

/* rz_scan() for the exit scan: no summary line when it checked and found nothing (the exit line says it). */
int rz__scan_at_exit(void);

/* For free_check.c's churn: rz_scan() without its summary line unless a band differs, not counted as a scan;
 * after rz__bands_settle, a clean one marks every band judged (work_epoch.h), so frees read none until the
 * program's next device work. */
int rz__scan_for_free(void);


/* Write the bands of zones still waiting for them (lazy install); a no-op costing one load when none wait
 * or when called from inside a scan or poison on this thread. */
void rz__bands_install(void);

/* Wait for the program's work in every context that holds a watched zone (before the exit scan: work still
 * queued or running at exit may write past an end). Never under the registry lock. */
void rz__bands_settle(void);

/* A scan of some contexts (sync scans): ctxs[0..n) sorted by handle, or one NULL for every context. Under the
 * registry lock, before any band is read, pick(arg, ctxs, n) keeps in ctxs the contexts still to judge and
 * returns how many (0: no scan); after the scan, under the same hold, done(arg, rc). `whole`: as for
 * rz__launch_scan_begin (launch_ring.h). Returns what rz_scan() returns (0 when nothing was scanned). */
typedef struct rz_scan_some {
    void **ctxs;
    size_t n;
    size_t (*pick)(void *arg, void **ctxs, size_t n);
    void (*done)(void *arg, int rc);
    void *arg;
    int whole;
} rz_scan_some_t;

int rz__scan_some(rz_scan_some_t *req);

/* What a policy does at the start of every scan, under the registry lock, before any band is read: judge the
 * checks it queued while the lock was busy (free_check.c's stream-ordered checks first, then launch_check.c's
 * launch checks, which also write back the bands they reported). Registered by the policy at start-up
 * (rz__free_check_arm, rz__launch_check_arm); run in slot order, an empty slot skipped. */
typedef enum {
    RZ_SCAN_BEGIN_FREE_CHECKS,
    RZ_SCAN_BEGIN_LAUNCH_CHECKS,
    RZ_SCAN_BEGIN_NVTX_REGIONS, /* policy/nvtx_regions.c: the NVTX regions' slack and unregistered regions */
    RZ_SCAN_BEGIN_QUARANTINE, /* quarantine.c: the held blocks, checked for writes after free */
    RZ_SCAN_BEGIN_SLOTS
} rz_scan_begin_slot_t;

typedef void rz_scan_begin_fn(void);

void rz__bands_on_scan_begin(rz_scan_begin_slot_t slot, rz_scan_begin_fn *fn);

/* Host bytes of every scan's, poison's and install's scratch held now (bounded: band.c). Registry lock held. */
uint64_t rz__band_scratch_bytes(void);

/* Zones the last full scan could not read, and the driver's error (call after rz_scan, on its thread). */
uint64_t rz__scan_unread(rzcu_result *error);

/* A context is about to end (cuCtxDestroy, the last cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxReset):
 * write waiting bands, wait for its work and check the bands of its zones, which go with it. */
void rz__bands_context_ending(void *ctx);

/* It has ended: forget its zones and the library's state for it. */
void rz__bands_context_ended(void *ctx);

#endif /* REDZONE_BAND_H */
