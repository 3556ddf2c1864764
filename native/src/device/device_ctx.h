/*
 * The device seam's per-context state (device_ctx.c).
 */
#ifndef REDZONE_DEVICE_CTX_H
#define REDZONE_DEVICE_CTX_H

#include "common.h"

void *rz__dev_current_ctx(void);

/*
 * The context current on this thread, for a new allocation's zone, without a driver call while nothing changed
 * it: NULL when the library cannot know it that way (the hooks have not said that they see every call that
 * changes it, or the driver has no current context). Asked once (cuCtxGetCurrent) after each change.
 */
void *rz__dev_alloc_ctx(void);

/* The hooks see every entry point that changes a thread's current context (libredzone.so's, once). */
void rz__dev_ctx_calls_seen(void);

/* This thread's current context may have changed (set, push, pop, creation): asked again at its next
 * allocation. */
void rz__dev_ctx_changed_here(void);

/* A context ended or may have (destroy, a primary context's release or reset): every thread asks again. */
void rz__dev_ctx_changed_anywhere(void);

/* Wait for all work of context ctx (the current one when NULL), as the driver's cuMemFree and context
 * teardown do, so a band read afterwards sees what the program's in-flight kernels and copies wrote. Not
 * while a capture is in progress (a context synchronisation conflicts with a capture in it whatever the mode,
 * and is refused beside another thread's global one): RZCUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, nothing done. */
rzcu_result rz__dev_settle(void *ctx);

/* The stream a stream-ordered call names (NULL with a per-thread entry point: the per-thread stream), and
 * whether it is being captured into a graph (where nothing may synchronise it). */
rzcu_stream rz__stream_of(rzcu_stream s, int per_thread);

/* Fill one band synchronously on the library's stream for the current context. */
rzcu_result rz__dev_fill(rz_devptr_t p, uint8_t value, size_t bytes);

/* The library's stream for ctx (the current context when NULL), created on first use. */
rzcu_result rz__dev_stream(void *ctx, rzcu_stream *out);

/* How many contexts have a library stream now (one each, dropped when the context ends). */
size_t rz__dev_stream_count(void);

/* Make ctx current for a band operation (pushed only when it is not); undo with rz__dev_leave. */
rzcu_result rz__dev_enter(void *ctx, int *pushed);

void rz__dev_leave(int pushed);


/* Context ctx has ended: forget its library stream (ctx_forget.c forgets the rest of its device state). */
void rz__dev_streams_forget_ctx(void *ctx);

/* The handle of device dev's primary context when it is active (learned with a retain and a release, which
 * leave its reference count as it was); NULL when inactive or unknown. */
void *rz__dev_primary_ctx(int dev);

/* Whether device dev's primary context is active (1), inactive (0) or unknown (-1). */
int rz__dev_primary_active(int dev);

#endif /* REDZONE_DEVICE_CTX_H */
