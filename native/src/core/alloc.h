/*
 * Allocation and free (alloc.c).
 */
#ifndef REDZONE_ALLOC_H
#define REDZONE_ALLOC_H

#include "common.h"
#include "state.h"

typedef enum { RZ_ALLOC_PLAIN, RZ_ALLOC_MANAGED, RZ_ALLOC_PITCH, RZ_ALLOC_ASYNC, RZ_ALLOC_POOL } rz_alloc_kind_t;

typedef struct rz_alloc_req {
    rz_alloc_kind_t kind;
    unsigned flags;        /* MANAGED */
    size_t *pitch;         /* PITCH: out */
    size_t width, height;  /* PITCH: the `bytes` argument of rz__alloc is ignored */
    unsigned element_bytes;
    rzcu_stream stream;    /* ASYNC, POOL */
    rzcu_mem_pool pool;    /* POOL */
    int per_thread;        /* called through a _ptsz entry point */
    int interposed;        /* through the hooks, which install waiting bands before copies and launches */
} rz_alloc_req_t;

typedef struct rz_free_req {
    int async;             /* cuMemFreeAsync */
    rzcu_stream stream;
    int per_thread;
} rz_free_req_t;

/* Allocation number `index` (its creation index, already taken): pad, fill, register. The library is started
 * (interpose/api.h: rz__alloc takes the index, starts the library, then comes here). Returns the driver's
 * result code. */
int rz__alloc_indexed(rz_devptr_t *dptr, size_t bytes, const rz_alloc_req_t *req, uint64_t index);

/* rz__alloc_indexed for a plain cuMemAlloc through the hooks (the fast path). */
int rz__alloc_interposed_indexed(rz_devptr_t *dptr, size_t bytes, uint64_t index);

/* The start-up step of allocation (interpose/start.c, once the driver is loaded; again in a forked child that
 * starts again): what the fast path needs from the options and the driver table. */
void rz__alloc_prepare(void);

/* Forget, optionally check the band (METRALE_REDZONE_SCAN=free), free. Returns the driver's result code. */
int rz__free(rz_devptr_t dptr, const rz_free_req_t *req);

/* The check of a zone's band just before it is freed (stream-ordered for an async free): the free check's,
 * registered at start-up (rz__free_check_arm); it reports and never changes the outcome of the free. */
typedef void rz_before_free_fn(const rz_zone_node_t *zone, const rz_free_req_t *req);

void rz__alloc_on_free(rz_before_free_fn *fn);

#endif /* REDZONE_ALLOC_H */
