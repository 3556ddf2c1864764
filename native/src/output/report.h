/*
 * The one output path (report.c).
 */
#ifndef REDZONE_REPORT_H
#define REDZONE_REPORT_H

#include "common.h"
#include "thread_state.h"
#include "write_all.h" /* rz__write_all, for the writers that include this */

/* Every line goes through here: fixed buffer, no allocation, recursion guard. */
/* The log opens itself before its first line, from the options: METRALE_REDZONE_LOG (%p expanded; a %p in
 * it: one file per process, forked children included, lines without the pid; else every line starts with
 * `redzone[<pid>]: `), then says the options' warnings and, with METRALE_REDZONE_HELP, the help. Start-up
 * calls rz__log_start so that this happens when the options are first needed, not at the first report. */
void rz__log_start(void);

/* Lines already formatted ('\n'-terminated) to the log, each with the pid where log lines carry it. */
void rz__log_text(const char *text, size_t len);

/* For writers that cannot use rz__log (the fatal-signal handler), async-signal-safe: a forked child's own
 * per-process log opened if it is still to be, then the `redzone[<pid>]: ` a line gets (empty where lines
 * carry no pid) in out (at least 64 bytes); returns its length. */
size_t rz__log_line_start(char *out);

void rz__log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

void rz__warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));


/* Write lines already formatted (one or more, '\n'-terminated) where rz__log writes. */
void rz__log_raw(const char *buf, size_t len);

/* Lines held back: while a thread has set one with rz__log_hold, its rz__log lines are appended to it (in
 * memory mapped on first use, at most RZ_LOG_HELD_MAX bytes; a line that does not fit goes out at once)
 * instead of written; rz__log_hold(NULL) stops that. The caller writes them (rz__log_raw) and releases the
 * memory. */
#define RZ_LOG_HELD_MAX ((size_t)16 << 20)

typedef struct rz_log_held {
    char *text;
    size_t len;
} rz_log_held_t;

void rz__log_hold(rz_log_held_t *held);

/* The lines this thread writes go to `sink` instead of the log from now on (NULL: to the log again), without
 * the pid prefix: the agent thread sets its own, whose lines a debugger prints. */
void rz__log_set_thread_sink(rz_log_sink_fn sink);

void rz__log_held_release(rz_log_held_t *held);

/* While on (1), this thread's rz__log and rz__warn lines are dropped: the text of a finding that is not
 * printed (finding.h: suppressed, or over the print limit), its side effects kept. */
void rz__log_mute(int on);

/* Name of a driver result, from the driver when loaded (its namer registered), else from cu.h's table. */
const char *rz__cu_name(rzcu_result r);

/* The driver's name for a result, NULL when it has none: registered by the device seam (driver.c) once the
 * driver is loaded. */
typedef const char *rz_error_namer_fn(rzcu_result r);

void rz__report_error_namer(rz_error_namer_fn *namer);


#endif /* REDZONE_REPORT_H */
