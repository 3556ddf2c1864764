/*
 * The allocation entry points' first steps (alloc.c, hooks.c): take the creation index, start the library,
 * allocate.
 */
#ifndef REDZONE_API_H
#define REDZONE_API_H

#include "common.h"
#include "alloc.h"
#include "creation_index.h"
#include "start.h"

/* Allocate (taking a creation index), pad, fill, register. The index is taken before the start-up, so a call
 * made where no driver loads consumes it too, and answers CUDA_ERROR_NOT_INITIALIZED. Returns the driver's
 * result code. */
static inline int rz__alloc(rz_devptr_t *dptr, size_t bytes, const rz_alloc_req_t *req) {
    uint64_t index = rz__index_take();
    if (RZ_UNLIKELY(rz__start() != RZ_OK))
        return RZCUDA_ERROR_NOT_INITIALIZED;
    return rz__alloc_indexed(dptr, bytes, req, index);
}

/* rz__alloc for a plain cuMemAlloc through the hooks. */
static inline int rz__alloc_interposed(rz_devptr_t *dptr, size_t bytes) {
    uint64_t index = rz__index_take();
    if (RZ_UNLIKELY(rz__start() != RZ_OK))
        return RZCUDA_ERROR_NOT_INITIALIZED;
    return rz__alloc_interposed_indexed(dptr, bytes, index);
}

#endif /* REDZONE_API_H */
