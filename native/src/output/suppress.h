/*
 * Suppression rules (suppress.c): METRALE_REDZONE_SUPPRESSIONS, one rule a line.
 */
#ifndef REDZONE_SUPPRESS_H
#define REDZONE_SUPPRESS_H

#include "common.h"
#include "finding.h"
#include "symbolize.h"

/* Read the file the option names (once; bad lines: one warning each, naming file:line). */
void rz__suppress_load(void);

/* Whether some rule needs the allocation stack's symbols. */
int rz__suppress_wants_frames(void);

/* The number (from 1) of the first rule f matches, 0 when none; frames: its allocation stack, resolved. */
int rz__suppress_match(const rz_finding_t *f, const rz_frame_sym_t *frames, int nframes);

/* The pure parts, for tests: a glob with `*` and `?` matched against s (1: matches). */
int rz__glob_match(const char *glob, const char *s);

#endif /* REDZONE_SUPPRESS_H */
