/*
 * The program's device work, counted (work_epoch.c): which copies, memsets and launches the hooks saw the
 * driver accept, so a free or the exit scan can tell that nothing could have written a band since it was
 * last judged clean, and skip reading it (no host wait the program did not ask for).
 */
#ifndef REDZONE_WORK_EPOCH_H
#define REDZONE_WORK_EPOCH_H

#include "common.h"

/* The program queued device work on stream s (as the call named it): the count goes up. Work on a stream
 * handle (not the legacy or a per-thread default stream) also moves the "maybe non-blocking" mark (such a
 * stream may not be ordered before the legacy stream's next operation) and records the handle for
 * rz__work_named_streams (with the current context, asked when the handle takes a slot, for
 * rz__work_forget_ctx). Two atomic operations; a mutex more for a stream handle. */
void rz__work_note(rzcu_stream s, int per_thread);

/* The work counted so far. */
uint64_t rz__work_now(void);

/* Every watched zone whose writes the hooks see (RZ_ZONE_SEEN) had a clean band, and all work up to `epoch`
 * had completed, when a scan read them: recorded (the largest such epoch wins). */
void rz__work_judged_all(uint64_t epoch);

/* 1 when no work was noted since the last rz__work_judged_all: every RZ_ZONE_SEEN zone's band is as the
 * last judgement left it (new zones start clean), so it needs no read. */
int rz__work_none_since_clean(void);

/* The work count at the last work noted on a stream handle (maybe a non-blocking stream). */
uint64_t rz__work_named_stream_last(void);

/* 1 when every work noted after `epoch` went to a default stream (legacy or per-thread), which the legacy
 * stream's next operation in that context is ordered after. */
int rz__work_default_streams_since(uint64_t epoch);

/* The stream handles that got work after `epoch` (at most `max`, into out), of every context: how many, or
 * SIZE_MAX when they are not all known (more than max, more than RZ_WORK_NAMED_SLOTS handles busy at once,
 * or a handle destroyed with work after `epoch`): then only a context synchronisation orders a read after
 * them. A mutex, no driver call. */
#define RZ_WORK_NAMED_SLOTS 32
size_t rz__work_named_streams(uint64_t epoch, rzcu_stream *out, size_t max);

/* cuStreamDestroy of s: its slot goes (work of it not known complete makes rz__work_named_streams say
 * SIZE_MAX until it is). */
void rz__work_stream_gone(rzcu_stream s);

/* Context ctx has ended (its work with it, and its streams): its handles' records go (ctx_forget.c). */
void rz__work_forget_ctx(void *ctx);

/* The epoch up to which all work is known complete (a settle of every context with zones), and setting it. */
uint64_t rz__work_done(void);
void rz__work_completed(uint64_t epoch);

/* Tell helgrind which of these are atomics read without a lock (rz_annotate.h). */
void rz__work_annotate(void);

#endif /* REDZONE_WORK_EPOCH_H */
