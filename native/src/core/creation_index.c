/*
 * The creation index: the counter every allocation call takes its number from (creation_index.h says what
 * the index is for and why a failed call takes one too).
 */
#include "common.h"
#include "creation_index.h"
#include "rz_annotate.h"
#include "state.h"

RZ_EXPORT uint64_t rz_next_index(void) { return atomic_load_explicit(&RZ_STATE.next_index, memory_order_relaxed); }

void rz__index_annotate(void) { RZ_ANNOTATE_ATOMIC(&RZ_STATE.next_index, sizeof RZ_STATE.next_index); }
