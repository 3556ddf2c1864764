/*
 * The traced allocation's stack (alloc_trace.c).
 */
#ifndef REDZONE_ALLOC_TRACE_H
#define REDZONE_ALLOC_TRACE_H

#include "common.h"

/* Allocation `index` is METRALE_REDZONE_TRACE_IDX's: say where it was made (its size and this call's stack). */
void rz__backtrace(uint64_t index);

#endif /* REDZONE_ALLOC_TRACE_H */
