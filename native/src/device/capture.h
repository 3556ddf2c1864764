/*
 * Whether a stream is being captured (capture.c).
 */
#ifndef REDZONE_CAPTURE_H
#define REDZONE_CAPTURE_H

#include "common.h"

int rz__stream_capturing(rzcu_stream s);

/* Captures begun and ended through the interposed entry points (capture.c, from hooks_capture.c), so that
 * rz__stream_capturing asks the driver only while one is in progress. */
int rz__capture_beginning(rzcu_stream s);            /* 1: recorded now (undo with rz__capture_not_begun) */

void rz__capture_not_begun(rzcu_stream s, int added); /* the driver refused to begin it */

void rz__capture_ended(rzcu_stream s);

void rz__capture_stream_gone(rzcu_stream s);

/* Whether a capture begun through the interposed entry points may be in progress (0 without them). */
int rz__capture_in_progress(void);

/* From the interposed capture entry points (hooks_capture.c): every capture begun in the process is reported
 * through rz__capture_beginning, so while none is in progress no stream is capturing. Until then (or in a
 * build without them) rz__stream_capturing always asks the driver. */
void rz__capture_all_reported(void);

/* A quiet section: no capture begins through the interposed entry points until rz__capture_quiet_leave
 * (always called after); 1 when none was in progress (the section may run in the program's mode), 0 when
 * one may be. */
int rz__capture_quiet_enter(void);

void rz__capture_quiet_leave(void);

/* At the library's start: a fork child starts with no capture in progress and no section in flight. */
void rz__capture_annotate(void);

#endif /* REDZONE_CAPTURE_H */
