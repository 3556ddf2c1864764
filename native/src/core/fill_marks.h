/*
 * The marks of zones whose stream-ordered band fill is not yet seen done (fill_marks.c).
 */
#ifndef REDZONE_FILL_MARKS_H
#define REDZONE_FILL_MARKS_H

#include "common.h"

/* Note a zone just registered with RZ_ZONE_FILLING; rz__fills_settle (at successful synchronisations) clears
 * the marks of noted zones whose fill is done, so a debugger that cannot ask events sees them soon. Takes the
 * registry lock (one load when nothing is noted). */
void rz__fill_note(uint64_t ptr, uint16_t fill);

void rz__fills_settle(void);
/* Tell helgrind which of these are atomics read without a lock (rz_annotate.h). */
void rz__fill_marks_annotate(void);
#endif /* REDZONE_FILL_MARKS_H */
