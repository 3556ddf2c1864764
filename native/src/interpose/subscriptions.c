/*
 * What the interposer registers with the layers below it, in one place and once (libredzone.so only).
 *
 * The end of a context (events.h): "ending" lets the band engine check the context's zones while their
 * memory is still there; "ended" drops the registry's zones and the device state for the handle under the
 * registry lock (band.c), then the sync scans' streams and contexts, then the launch policy's streams,
 * layouts and records. The order of the subscriptions is the order of those steps.
 *
 * Stream capture: hooks_capture.c tells capture.c that every capture begun is reported to it. Made by the
 * first cuInit or entry-point lookup (hooks_init.c), before the program's first call that may query a
 * stream's capture state (none succeeds before cuInit).
 *
 * The current context: hooks_ctx.c tells device_ctx.c that every call changing a thread's current context
 * is seen, so a new zone is named by its context without a driver call per allocation.
 */
#include <pthread.h>

#include "subscriptions.h"
#include "band.h"
#include "device_ctx.h"
#include "events.h"
#include "hooks_capture.h"
#include "launch_check.h"
#include "sync_scan.h"

static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void make(void) {
    rz__event_subscribe(RZ_EVENT_CONTEXT_ENDING, rz__bands_context_ending);
    rz__event_subscribe(RZ_EVENT_CONTEXT_ENDED, rz__bands_context_ended);
    rz__event_subscribe(RZ_EVENT_CONTEXT_ENDED, rz__sync_context_ended);
    rz__event_subscribe(RZ_EVENT_CONTEXT_ENDED, rz__launch_forget_ctx);
    rz__hooks_capture_arm();
    rz__dev_ctx_calls_seen(); /* hooks_ctx.c wraps every call that changes a thread's current context */
}

void rz__subscriptions_make(void) { pthread_once(&g_once, make); }
