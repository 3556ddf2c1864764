/*
 * Bad frees (bad_free.c): double frees, frees of a pointer inside an allocation, foreign pointers.
 */
#ifndef REDZONE_BAD_FREE_H
#define REDZONE_BAD_FREE_H

#include "common.h"
#include "alloc.h"
#include "state.h"

/* A free of dptr, which no live zone starts at, that points into a block held in the quarantine: reported (a
 * double free, or a free inside a freed block), and *answer is what the driver answers for memory it freed
 * (CUDA_ERROR_INVALID_VALUE), the block untouched. 1 then; 0 when dptr is in no held block. */
int rz__bad_free_held(rz_devptr_t dptr, const rz_free_req_t *req, int *answer);

/* The driver answered r to a free of dptr, which no live zone starts at: when it refused, the bad free is
 * reported (a double free of a zone freed recently, a pointer inside a live zone, or a foreign one). Returns r. */
int rz__bad_free_refused(rz_devptr_t dptr, int r, const rz_free_req_t *req);

#endif /* REDZONE_BAD_FREE_H */
