/*
 * What the launch policy (METRALE_REDZONE_SCAN=launch) shares between its two files: launch_check.c queues a
 * check of the launch's context's bands after every launch, in the launch's stream order, and tracks the
 * launches in flight; launch_attribution.c judges a completed check, names the launch in the report, and keeps the
 * bands it reported until they are written back. Nothing here is used outside those two files.
 */
#ifndef REDZONE_LAUNCH_H
#define REDZONE_LAUNCH_H

#include "common.h"

typedef enum { RZ_LAUNCH_KERNEL = 0, RZ_LAUNCH_COOPERATIVE = 1, RZ_LAUNCH_GRAPH = 2 } rz_launch_kind_t;

/* What a launch wrapper knows about a launch. */
typedef struct rz_launch_call {
    rz_launch_kind_t kind;
    rzcu_function f;     /* kernels */
    void *graph;         /* graph launches: the executable graph */
    unsigned grid[3], block[3];
    rzcu_stream stream;  /* as the program passed it */
    int per_thread;      /* through a _ptsz entry point */
    void *ret;           /* the interposed entry point's return address (into the program) */
} rz_launch_call_t;

struct rz_check;

/* Before the driver's launch call (never under the registry lock): under the launch policy, the check this
 * launch will get (NULL otherwise, or when the launch cannot be checked: a stream being captured). */
struct rz_check *rz__launch_pre(const rz_launch_call_t *call);

/* After it: the launch ring (every policy, on success) and, under the launch policy, the check queued in the
 * launch's stream order (or, under a debugger, waited for and judged on this thread). */
void rz__launch_post(struct rz_check *c, const rz_launch_call_t *call, rzcu_result r);

/* At start-up: register the launch policy with the band engine (checks completed while the registry was busy,
 * judged at each scan's beginning) and the judge (who wrote a reported zone: the launch a check names). */
void rz__launch_check_arm(void);

/* Judge the launch checks that completed while the registry was busy, and write back the bands they
 * reported. The _locked form with the registry lock held; the other takes it (one load when nothing waits). */
void rz__launch_checks_locked(void);

void rz__launch_checks(void);

/* Only the judging, no driver call (from a stream's host function too). Registry lock held. */
void rz__launch_judge_locked(void);

/* A module or library was unloaded: kernel handles may be reused for other kernels, so the launch policy's
 * cache of kernel names is forgotten. */
void rz__launch_names_forget(void);

/* Context ctx ended: forget the launch policy's state for it (takes the registry lock). */
void rz__launch_forget_ctx(void *ctx);

/* Whether a launch is judged on the launching thread right after it (1), in stream order by the driver's
 * callback thread (0), or, by default (-1), the first under a debugger (any ptrace tracer) only. Tests. */
void rz__launch_set_sync(int mode);

#define RZ_LAUNCH_FRAMES 16 /* host frames kept per launch: the stack of the launch call */
#define RZ_OVERLAP_SHOWN 4  /* overlapping launches named in a report; more are counted */
#define RZ_KERNEL_NAME 56   /* as in the launch ring */

/* One band of a layout, as it was when the layout was made (registry lock held). */
typedef struct rz_band_meta {
    uint64_t ptr;        /* the zone's user pointer */
    uint64_t user_bytes;
    uint64_t index;
    uint32_t bytes;      /* this band's size */
    uint32_t pad_bytes;  /* the zone's back band */
    uint16_t front_units;
    uint8_t expected;
    uint8_t front;       /* this is the zone's front band */
    uint8_t flags;       /* the zone's flags (RZ_ZONE_STREAM_ORDERED matters) */
} rz_band_meta_t;

/* Every installed band of one context, in registry order: what one check copies. Shared by the checks made
 * while the registry did not change (reference counted). */
typedef struct rz_layout {
    _Atomic uint32_t refs;
    uint64_t id;          /* unique per layout made: a staging buffer's copy list is laid out for one */
    void *ctx;
    uint64_t seq;         /* RZ_STATE.seq when made */
    uint64_t poison_lo, poison_hi;
    uint8_t poison_active;
    uint8_t partial;      /* zones were left out: a stream-ordered fill still queued, a band not yet installed */
    size_t n;             /* bands */
    size_t bytes;         /* staging bytes */
    rzcu_deviceptr *srcs; /* band addresses */
    size_t *sizes;
    size_t *offs;         /* where each band lands in staging */
    rz_band_meta_t *meta;
} rz_layout_t;

/* Page-locked host memory one check copies its bands into, with the copy destinations laid out for the
 * layout it last served. */
typedef struct rz_staging_buf {
    struct rz_staging_buf *next;
    uint8_t *p;
    size_t size;
    int pinned;
    rzcu_deviceptr *dsts;
    size_t dcap;
    uint64_t dfor; /* layout id the destinations are for (0: none) */
} rz_staging_buf_t;

/* A launch on another stream that may have run while the checked one did (launch_attribution.c names them). */
typedef struct rz_overlap {
    uint64_t launch; /* its launch number, 0 while its launch call has not returned */
    rzcu_stream stream;
    rz_launch_kind_t kind;
    char name[RZ_KERNEL_NAME];
} rz_overlap_t;

/* One launch and its check. */
typedef struct rz_check {
    struct rz_check *prev, *next; /* launches in flight (begun, check not completed) */
    struct rz_check *qnext;       /* completed, waiting to be judged, in completion order */
    _Atomic uint32_t refs;        /* the launch path, its start marker, its completion */
    uint64_t begin;               /* order among launches begun (before the driver's launch call) */
    uint64_t launch;              /* launch number (the ring's), 0 until the launch call returned */
    uint64_t started;             /* clock when its start marker ran (0: not yet, or none queued) */
    uint64_t completed;           /* clock when its check completed */
    int marker;                   /* a start marker was queued before the kernel */
    int sync;                     /* judged on the launching thread (under a debugger) */
    void *ctx;
    rzcu_stream stream;           /* the stream as the program named it (NULL: legacy; 0x2: per-thread) */
    uintptr_t skey;               /* the stream's identity (per-thread default streams: the thread) */
    rz_launch_kind_t kind;
    void *graph;
    unsigned grid[3], block[3];
    char name[RZ_KERNEL_NAME];
    uint32_t nframes;
    void *frames[RZ_LAUNCH_FRAMES];
    rz_layout_t *layout;
    rz_staging_buf_t *st;         /* bands copied to the host (NULL when compared on the device) */
    struct rz_changed_table *tab; /* compared on the device (check_changed.c): the bands' table */
    struct rz_changed_area *area; /* and the result, the changed bands */
    struct rz_rows *rows;         /* the table kept in step with rows (launch_rows.c): their store, NULL: a layout's */
    uint64_t rows_epoch;          /* and their epoch when the check was queued */
    uint64_t overlap_begin;       /* the smallest begin counter of those overlapping launches (0: none) */
    uint64_t overlap_last;        /* and the largest */
    uint32_t noverlap, overlap_more;
    rz_overlap_t overlap[RZ_OVERLAP_SHOWN];
} rz_check_t;

/* launch_check.c: give back what a judged check held. */
void rz__check_release(rz_check_t *c);
/* The launch ring's number of the begin counter's current value (launch_attribution.c: refill bookkeeping). */
uint64_t rz__launch_begun(void);
/* The smallest begin counter of a launch whose check is not judged yet (in flight or completed), or the next
 * launch's: a band written back at a counter at or below it can no longer be seen unwritten by any check. */
uint64_t rz__launch_oldest_unjudged(void);
/* The smallest begin counter of a launch whose check has not completed, or the next launch's. */
uint64_t rz__launch_oldest_in_flight(void);

/* What launch_attribution.c asks launch_check.c about the launches begun and in flight, given to it at start-up
 * (rz__launch_check_arm, before any check or report can be judged): launch_attribution.c sits below launch_check.c
 * and never calls it by name. */
typedef struct rz_launch_counts {
    uint64_t (*begun)(void);            /* rz__launch_begun */
    uint64_t (*oldest_in_flight)(void); /* rz__launch_oldest_in_flight */
    uint64_t (*oldest_unjudged)(void);  /* rz__launch_oldest_unjudged */
} rz_launch_counts_t;

void rz__attrib_arm(const rz_launch_counts_t *counts);

/* launch_attribution.c, registry lock held: judge one completed check (reports with its launch named). */
void rz__attrib_judge_locked(rz_check_t *c);
/* Write back the bands reported by launch checks (rz__dev_write). Registry lock held, on a thread that may
 * call the driver. */
void rz__attrib_refill_locked(void);
/* Whether a refill is waiting (a hint, read without the lock). */
int rz__attrib_refill_wanted(void);
/* Forget the records of zones of context ctx (it ended). Registry lock held. */
void rz__attrib_forget_ctx(void *ctx);

#endif /* REDZONE_LAUNCH_H */
