/*
 * This thread's state (thread_state.c): the per-thread flags the library keeps, in one initial-exec
 * thread-local record at the bottom layer, so any layer reads them without calling into the layer that sets
 * them (reading one is one TLS load, as a separate thread-local was). Each field is written only by the
 * module named beside it; the others only read it.
 */
#ifndef REDZONE_THREAD_STATE_H
#define REDZONE_THREAD_STATE_H

#include "common.h"

struct rz_reports;
struct rz_check;

/* Where the lines this thread writes go instead of the log (rz__log_set_thread_sink). */
typedef void (*rz_log_sink_fn)(const char *line, size_t len);

typedef struct rz_thread_state {
    int in_hook;                /* interpose/hooks.c: inside an interposed entry point (re-entry goes straight through) */
    int in_ipc;                 /* interpose/hooks_ipc.c: the same for the IPC entry points */
    int busy;                   /* core/band.c: a scan or poison is running on this thread (hook re-entry) */
    int in_log;                 /* output/report.c: this thread is writing a log line */
    int is_agent;               /* bridge/agent.c: this is the debugger agent thread */
    rz_log_sink_fn log_sink;    /* output/report.c, set by the agent: its lines go to the debugger */
    struct rz_reports *reports; /* core/judge.c: set while this thread's scan holds the registry lock */
    struct rz_check *judging;   /* policy/launch_attribution.c: the check being judged (its report names it) */
    void *ctx;                  /* device/device_ctx.c: the context current on this thread, as last asked */
    uint64_t ctx_gen;           /* device/device_ctx.c: the generation ctx was asked in (0: not known) */
} rz_thread_state_t;

extern RZ_TLS __attribute__((visibility("hidden"))) rz_thread_state_t rz__thread;

#endif /* REDZONE_THREAD_STATE_H */
