/*
 * The public allocation API (redzone.h): rz_mem_alloc and rz_mem_free, for programs that allocate through
 * redzone rather than through the interposed driver entry points.
 */
#include "api.h"

RZ_EXPORT int rz_mem_alloc(rz_devptr_t *dptr, size_t bytes) {
    rz_alloc_req_t req = {.kind = RZ_ALLOC_PLAIN};
    return rz__alloc(dptr, bytes, &req);
}

RZ_EXPORT int rz_mem_free(rz_devptr_t dptr) {
    rz_free_req_t req = {.async = 0};
    return rz__free(dptr, &req);
}
