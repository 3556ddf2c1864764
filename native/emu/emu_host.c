/*
 * Pinned host memory: cuMemAllocHost and cuMemHostAlloc allocations (page-aligned host memory in a hash
 * table, freed with cuMemFreeHost or with their context), cuMemHostRegister ranges, the device pointer of
 * mapped ones (cuMemHostGetDevicePointer), and the question copies ask: is this host range page-locked? (A
 * real driver returns from an asynchronous device-to-pageable copy only once it has completed.) Copies move
 * the bytes the same way whether host memory is pinned or not.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <unistd.h>

#include "emu_internal.h"

#define HOST_BUCKETS 4096
#define HOSTALLOC_FLAGS 0x7u   /* CU_MEMHOSTALLOC_PORTABLE | DEVICEMAP | WRITECOMBINED */
#define HOSTREGISTER_FLAGS 0xfu /* CU_MEMHOSTREGISTER_PORTABLE | DEVICEMAP | IOMEMORY | READ_ONLY */
#define DEVICEMAP 0x2u          /* the same bit for both */

struct host_alloc {
    struct host_alloc *next;
    struct host_alloc *all_next, **all_link; /* in host_all: every block, for the range question */
    void *p;
    size_t size;
    struct CUctx_st *ctx;
    unsigned flags; /* cuMemHostAlloc's (cuMemAllocHost: 0) */
};

/* Registered (page-locked) host ranges: cuMemHostRegister. */
struct host_reg {
    struct host_reg *next;
    uintptr_t p;
    size_t size;
    unsigned flags;
};

static pthread_mutex_t host_mu = PTHREAD_MUTEX_INITIALIZER;
static struct host_alloc *host_table[HOST_BUCKETS];
/* Every block again, in one list: whether a host range is pinned walks the blocks alive (few, and none in most
 * programs), not the 4,096 buckets (which every pageable copy from the device did). */
static struct host_alloc *host_all;

static void all_insert_locked(struct host_alloc *h)
{
    h->all_next = host_all;
    h->all_link = &host_all;
    if (host_all)
        host_all->all_link = &h->all_next;
    host_all = h;
}

static void all_remove_locked(struct host_alloc *h)
{
    *h->all_link = h->all_next;
    if (h->all_next)
        h->all_next->all_link = h->all_link;
}
static struct host_reg *host_regs;

static size_t host_bucket(const void *p) { return ((uintptr_t)p >> 12) % HOST_BUCKETS; }

static rzcu_result host_alloc(struct CUctx_st *ctx, size_t size, unsigned flags, void **out)
{
    if (size == 0)
        return RZCUDA_ERROR_INVALID_VALUE;
    struct host_alloc *h = malloc(sizeof *h);
    void *p = NULL;
    if (!h || posix_memalign(&p, (size_t)sysconf(_SC_PAGESIZE), size) != 0) {
        free(h);
        return RZCUDA_ERROR_OUT_OF_MEMORY;
    }
    *h = (struct host_alloc){.p = p, .size = size, .ctx = ctx, .flags = flags};
    pthread_mutex_lock(&host_mu);
    size_t b = host_bucket(p);
    h->next = host_table[b];
    host_table[b] = h;
    all_insert_locked(h);
    pthread_mutex_unlock(&host_mu);
    *out = p;
    return RZCUDA_SUCCESS;
}

static rzcu_result host_register(void *p, size_t size, unsigned flags)
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
    *r = (struct host_reg){host_regs, b, size, flags};
    host_regs = r;
    pthread_mutex_unlock(&host_mu);
    return RZCUDA_SUCCESS;
}

static rzcu_result host_unregister(void *p)
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

static rzcu_result host_free(void *p)
{
    pthread_mutex_lock(&host_mu);
    struct host_alloc **link = &host_table[host_bucket(p)], *h;
    while ((h = *link) && h->p != p)
        link = &h->next;
    if (h) {
        *link = h->next;
        all_remove_locked(h);
    }
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
                all_remove_locked(h);
                free(h->p);
                free(h);
            } else {
                link = &h->next;
            }
        }
    }
    pthread_mutex_unlock(&host_mu);
}

static bool inside(uintptr_t b, size_t n, uintptr_t base, size_t size)
{
    return b >= base && b - base <= size && n <= size - (b - base);
}

/* The pinned block or registered range holding [p, p + n): its flags, or -1 when none. Under host_mu. */
static long pinned_flags_locked(const void *p, size_t n)
{
    uintptr_t b = (uintptr_t)p;
    for (struct host_reg *h = host_regs; h; h = h->next)
        if (inside(b, n, h->p, h->size))
            return h->flags;
    for (struct host_alloc *h = host_all; h; h = h->all_next) /* pinned blocks: few, in tests and tools */
        if (inside(b, n, (uintptr_t)h->p, h->size))
            return h->flags;
    return -1;
}

bool emu_host_is_pinned(const void *p, size_t n)
{
    pthread_mutex_lock(&host_mu);
    long flags = pinned_flags_locked(p, n);
    pthread_mutex_unlock(&host_mu);
    return flags >= 0;
}

/* ------------------------------------------------------------------------------------------------------ */
/* entry points */

EMU_API rzcu_result cuMemAllocHost_v2(void **pp, size_t bytesize)
{
    ENTER_CTX(cuMemAllocHost_v2, c);
    CHECK(emu_capture_unsafe_call());
    if (!pp)
        return RZCUDA_ERROR_INVALID_VALUE;
    return host_alloc(c, bytesize, 0, pp);
}

/* cuMemAllocHost with flags: any combination of PORTABLE, DEVICEMAP and WRITECOMBINED (they change nothing
 * here but what cuMemHostGetDevicePointer answers); other bits are CUDA_ERROR_INVALID_VALUE. */
EMU_API rzcu_result cuMemHostAlloc(void **pp, size_t bytesize, unsigned int flags)
{
    ENTER_CTX(cuMemHostAlloc, c);
    CHECK(emu_capture_unsafe_call());
    if (!pp || (flags & ~HOSTALLOC_FLAGS))
        return RZCUDA_ERROR_INVALID_VALUE;
    return host_alloc(c, bytesize, flags, pp);
}

/*
 * The device pointer of mapped pinned memory: p inside a cuMemHostAlloc block allocated with DEVICEMAP or a
 * range registered with DEVICEMAP (as documented, the call fails for memory allocated without it, which
 * includes cuMemAllocHost memory). The device sees host memory at its host address here (unified
 * addressing, CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM), so the answer is p. Flags must be 0.
 */
EMU_API rzcu_result cuMemHostGetDevicePointer_v2(rzcu_deviceptr *pdptr, void *p, unsigned int flags)
{
    ENTER_CTX(cuMemHostGetDevicePointer_v2, c);
    if (!pdptr || !p || flags != 0)
        return RZCUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&host_mu);
    long pinned = pinned_flags_locked(p, 1);
    pthread_mutex_unlock(&host_mu);
    if (pinned < 0 || !(pinned & DEVICEMAP))
        return RZCUDA_ERROR_INVALID_VALUE;
    *pdptr = (rzcu_deviceptr)(uintptr_t)p;
    return RZCUDA_SUCCESS;
}

/* Page-locking existing host memory: any of the documented flags; a current context is required. */
EMU_API rzcu_result cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int flags)
{
    ENTER_CTX(cuMemHostRegister_v2, c);
    CHECK(emu_capture_unsafe_call());
    if (flags & ~HOSTREGISTER_FLAGS)
        return RZCUDA_ERROR_INVALID_VALUE;
    return host_register(p, bytesize, flags);
}

EMU_API rzcu_result cuMemHostUnregister(void *p)
{
    ENTER_CTX(cuMemHostUnregister, c);
    CHECK(emu_capture_unsafe_call());
    if (!p)
        return RZCUDA_ERROR_INVALID_VALUE;
    emu_sync_outstanding(); /* copies into it may still be queued */
    return host_unregister(p);
}

/* cuMemFreeHost(NULL) is CUDA_SUCCESS, as on real drivers (see cuMemFree_v2); anything but the start of a
 * cuMemAllocHost or cuMemHostAlloc block is CUDA_ERROR_INVALID_VALUE. */
EMU_API rzcu_result cuMemFreeHost(void *p)
{
    ENTER_CTX(cuMemFreeHost, c);
    CHECK(emu_capture_unsafe_call());
    if (!p)
        return RZCUDA_SUCCESS;
    emu_sync_outstanding(); /* like cuMemFree, complete outstanding work that may still read or write it */
    return host_free(p);
}
