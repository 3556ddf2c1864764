/*
 * Forgetting an ended context's device state (ctx_forget.c).
 */
#ifndef REDZONE_CTX_FORGET_H
#define REDZONE_CTX_FORGET_H

#include "common.h"

/* Context ctx has ended (destroyed, or a primary context released for the last time or reset): forget its
 * stream, check kernel and stream-fill state, so a context that later gets the same handle starts afresh.
 * Registry lock held (scans use the per-context kernel state under it). */
void rz__dev_forget_ctx(void *ctx);

#endif /* REDZONE_CTX_FORGET_H */
