/*
 * METRALE_REDZONE_SCAN=sync (sync_scan.c).
 */
#ifndef REDZONE_SYNC_SCAN_H
#define REDZONE_SYNC_SCAN_H

#include "common.h"

/* The program queued device work (a copy, memset or launch the driver accepted) on stream s (as the call
 * named it; per_thread: through a _ptsz/_ptds entry point). */
void rz__note_device_work(rzcu_stream s, int per_thread);

/* What a successful synchronisation waited for: a stream, a context (NULL: the current one), or an event. */
enum { RZ_SYNC_STREAM, RZ_SYNC_CTX, RZ_SYNC_EVENT };

typedef struct rz_sync {
    int kind;
    rzcu_stream stream; /* RZ_SYNC_STREAM */
    int per_thread;     /* RZ_SYNC_STREAM through a _ptsz entry point */
    void *ctx;          /* RZ_SYNC_CTX */
} rz_sync_t;

/* Taken just before the synchronisation is called: the work noted up to it is what it waits for. */
uint64_t rz__sync_ticket(void);

/* METRALE_REDZONE_SCAN=sync, after a successful synchronisation: judge the contexts that received device work
 * since their last scan and whose work is all complete. 0 and no driver call when no work was noted since
 * every context was judged; else what rz_scan() returns (0 when nothing was scanned). */
int rz__scan_after_sync(const rz_sync_t *what, uint64_t ticket);

/* The program destroys stream s (called before the driver does) / context ctx has ended. */
void rz__sync_stream_destroying(rzcu_stream s);

void rz__sync_context_ended(void *ctx);

/* helgrind annotations and the fork handler (once, at start-up). */
void rz__sync_annotate(void);

#endif /* REDZONE_SYNC_SCAN_H */
