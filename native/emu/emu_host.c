/*
 * Pinned host memory: cuMemAllocHost allocations (page-aligned host memory in a hash table, freed with their
 * context) and cuMemHostRegister ranges, and the question copies ask: is this host range page-locked? (A
 * real driver returns from an asynchronous device-to-pageable copy only once it has completed.)
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <unistd.h>

#include "emu_internal.h"

#define HOST_BUCKETS 4096

struct host_alloc {
    struct host_alloc *next;
    void *p;
    size_t size;
    struct CUctx_st *ctx;
};

static pthread_mutex_t host_mu = PTHREAD_MUTEX_INITIALIZER;
static struct host_alloc *host_table[HOST_BUCKETS];

static size_t host_bucket(const void *p) { return ((uintptr_t)p >> 12) % HOST_BUCKETS; }

rzcu_result emu_host_alloc(struct CUctx_st *ctx, size_t size, void **out)
{
    if (size == 0)
        return RZCUDA_ERROR_INVALID_VALUE;
    struct host_alloc *h = malloc(sizeof *h);
    void *p = NULL;
    if (!h || posix_memalign(&p, (size_t)sysconf(_SC_PAGESIZE), size) != 0) {
        free(h);
        return RZCUDA_ERROR_OUT_OF_MEMORY;
    }
    h->p = p;
    h->size = size;
    h->ctx = ctx;
    pthread_mutex_lock(&host_mu);
    size_t b = host_bucket(p);
    h->next = host_table[b];
    host_table[b] = h;
    pthread_mutex_unlock(&host_mu);
    *out = p;
    return RZCUDA_SUCCESS;
}

/* Registered (page-locked) host ranges: cuMemHostRegister. Copies move the bytes the same way whether host
 * memory is pinned or not; what differs is when an asynchronous copy into pageable memory returns
 * (emu_host_is_pinned), and the calls fail where a driver's would. */
struct host_reg {
    struct host_reg *next;
    uintptr_t p;
    size_t size;
};
static struct host_reg *host_regs;

rzcu_result emu_host_register(void *p, size_t size)
{
    uintptr_t b = (uintptr_t)p;
    if (!p || size == 0 || size > UINTPTR_MAX - b)
        return RZCUDA_ERROR_INVALID_VALUE;
    struct host_reg *r = malloc(sizeof *r);
    if (!r)
        return RZCUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&host_mu);
    for (struct host_reg *h = host_regs; h; h = h->next) {
        if (b < h->p + h->size && h->p < b + size) {
            pthread_mutex_unlock(&host_mu);
            free(r);
            return RZCUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
        }
    }
    *r = (struct host_reg){host_regs, b, size};
    host_regs = r;
    pthread_mutex_unlock(&host_mu);
    return RZCUDA_SUCCESS;
}

rzcu_result emu_host_unregister(void *p)
{
    pthread_mutex_lock(&host_mu);
    struct host_reg **link = &host_regs, *h;
    while ((h = *link) && h->p != (uintptr_t)p)
        link = &h->next;
    if (h)
        *link = h->next;
    pthread_mutex_unlock(&host_mu);
    free(h);
    return h ? RZCUDA_SUCCESS : RZCUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
}

rzcu_result emu_host_free(void *p)
{
    pthread_mutex_lock(&host_mu);
    struct host_alloc **link = &host_table[host_bucket(p)], *h;
    while ((h = *link) && h->p != p)
        link = &h->next;
    if (h)
        *link = h->next;
    pthread_mutex_unlock(&host_mu);
    if (!h)
        return RZCUDA_ERROR_INVALID_VALUE;
    free(h->p);
    free(h);
    return RZCUDA_SUCCESS;
}

void emu_host_free_context(struct CUctx_st *ctx)
{
    pthread_mutex_lock(&host_mu);
    for (size_t b = 0; b < HOST_BUCKETS; b++) {
        struct host_alloc **link = &host_table[b], *h;
        while ((h = *link)) {
            if (h->ctx == ctx) {
                *link = h->next;
                free(h->p);
                free(h);
            } else {
                link = &h->next;
            }
        }
    }
    pthread_mutex_unlock(&host_mu);
}


bool emu_host_is_pinned(const void *p, size_t n)
{
    uintptr_t b = (uintptr_t)p;
    bool pinned = false;
    pthread_mutex_lock(&host_mu);
    for (struct host_reg *h = host_regs; h && !pinned; h = h->next)
        pinned = b >= h->p && b - h->p <= h->size && n <= h->size - (b - h->p);
    for (size_t k = 0; k < HOST_BUCKETS && !pinned; k++) /* cuMemAllocHost blocks: few, in tests and tools */
        for (struct host_alloc *h = host_table[k]; h && !pinned; h = h->next)
            pinned = b >= (uintptr_t)h->p && b - (uintptr_t)h->p <= h->size && n <= h->size - (b - (uintptr_t)h->p);
    pthread_mutex_unlock(&host_mu);
    return pinned;
}
